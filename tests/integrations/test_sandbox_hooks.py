"""Claude Code's Bash through ctxnb's hook: the rewritten command is what runs.

The pre-tool-use hook is fed real Bash tool inputs (tests/data/claude-code-bash) in
Claude Code's payload envelope; the ``updatedInput.command`` it answers with is then
executed as Claude Code executes a Bash command (``bash -c``, the caller's environment,
the payload's ``cwd``), and the filesystem is checked afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from _needs import needs, require
from _paths import REPO, TESTS

from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import run_hook, select_intent, state_dir
from ctxnb.sandbox.plan import find_bwrap

pytestmark = needs(find_bwrap() is not None, "bubblewrap (bwrap)")

DATA = TESTS / "data"
ORIGINAL_ROOT = "/home/USER/projects/spotter-worktrees/spotter-a0y"
INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory rules
    status: active
    owned_scope: ["inventory/**"]
"""


def real_inputs() -> list[dict]:
    lines = (DATA / "claude-code-bash" / "bash_tool_inputs.jsonl").read_text().splitlines()
    return [json.loads(x)["tool_input"] for x in lines]


@pytest.fixture
def ws(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    root = git_repo
    secret = "sk" + "-" + secrets.token_hex(16)
    (root / ".env").write_text(f"API_TOKEN={secret}\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    for d in ("scripts", "priv/repo/migrations", "test/fixtures/transcripts"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "scripts" / "tail_wrapper.sh").write_text("#!/bin/sh\n")
    (
        root / "priv/repo/migrations/20260212165422_add_unique_index_messages_session_uuid.exs"
    ).write_text("x\n")
    (root / "test/fixtures/transcripts/subagent.jsonl").write_text('{"a": 1}\n')
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "more"], cwd=root, check=True)
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    env_secret = "sk" + "-" + secrets.token_hex(16)
    monkeypatch.setenv("CTXNB_TEST_CALLER_SECRET", env_secret)
    return {"root": root, "secret": secret, "env_secret": env_secret}


def payload(
    root: Path, tool_input: dict, sid: str = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
) -> dict:
    base = json.loads((DATA / "claude-code-hooks" / "pre-bash.json").read_text())
    ti = dict(tool_input)
    ti["command"] = ti["command"].replace(ORIGINAL_ROOT, str(root))
    return {**base, "cwd": str(root), "session_id": sid, "tool_input": ti}


def run_as_claude_code(root: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Execute a Bash command as Claude Code does: bash -c, in cwd, with its environment."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)  # ctxnb importable by the interpreter the hook names
    return subprocess.run(
        ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d != ".ctxnb"]  # ctxnb's own caches
        for f in filenames:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                out[os.path.join(rel, f)] = "link"
                continue
            with open(p, "rb") as fh:
                out[os.path.join(rel, f)] = (
                    f"{os.lstat(p).st_mode:o}:" + hashlib.sha256(fh.read()).hexdigest()
                )
    return out


HOSTILE = [
    {"command": "echo zz9 > inventory/models.py; sed -i 's/a/b/' README.md", "description": "x"},
    {"command": "cat .env; base64 .env; env | grep CTXNB", "description": "x"},
    {"command": "rm -rf inventory web .orchestration; git checkout -b zz9", "description": "x"},
    {"command": "python3 -c \"open('src/app.py','w').write('zz9')\"", "description": "x"},
]


def answer(root: Path, tool_input: dict) -> dict:
    res = run_hook("pre-tool-use", json.dumps(payload(root, tool_input)))
    assert res.exit_code == 0, res
    out = res.answer["hookSpecificOutput"]
    assert out["permissionDecision"] in ("allow", "ask")
    assert out["updatedInput"]["description"] == tool_input.get("description")
    return out


@pytest.mark.parametrize("tool_input", real_inputs() + HOSTILE, ids=lambda t: t["command"][:40])
def test_without_an_intent_bash_changes_nothing_and_reads_no_secret(ws, tool_input):
    root = ws["root"]
    before = tree(root)
    out = answer(root, tool_input)
    assert out["permissionDecision"] == "allow"
    cmd = out["updatedInput"]["command"]
    assert " sandbox exec " in cmd and "--intent" not in cmd
    proc = run_as_claude_code(root, cmd)
    assert tree(root) == before, proc.stderr
    assert ws["secret"] not in proc.stdout + proc.stderr
    assert ws["env_secret"] not in proc.stdout + proc.stderr


def test_ls_and_git_status_still_work_without_an_intent(ws):
    root = ws["root"]
    out = answer(root, {"command": "ls src", "description": "List"})
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert proc.returncode == 0, proc.stderr
    assert "app.py" in proc.stdout
    # The sample repository tracks its .env: git's objects are hidden, and it says why.
    out = answer(root, {"command": "git status --porcelain", "description": "Status"})
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert ".git/objects (the denied '.env' is in its history" in proc.stderr
    # Untracked now, but still in HEAD: hidden all the same, until a human allows git.
    subprocess.run(["git", "rm", "-q", "--cached", ".env"], cwd=root, check=True)
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert proc.returncode != 0 and "'.env' is in its history" in proc.stderr
    (root / "ctxnb.toml").write_text('[sandbox]\ngit = "read"\n')
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert proc.returncode == 0 and "D  .env" in proc.stdout, proc.stderr


def test_cat_env_is_refused_in_the_sandbox(ws):
    root = ws["root"]
    out = answer(root, {"command": "cat .env", "description": "Show env"})
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert proc.returncode != 0 and ws["secret"] not in proc.stdout


def test_with_an_intent_an_edit_in_scope_lands_and_is_traced(ws, test_data):
    root = ws["root"]
    sid = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
    select_intent(root, "INT-001", sid)
    before = tree(root)
    cmd = "printf 'LIMIT = 5\\n' >> inventory/models.py && echo zz9 >> README.md"
    out = answer(root, {"command": cmd, "description": "Edit"})
    assert "--intent INT-001" in out["updatedInput"]["command"]
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert "stored and traced: inventory/models.py" in proc.stderr, proc.stderr
    after = tree(root)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed <= {
        "inventory/models.py",
        ".orchestration/agent_trace.jsonl",
        ".orchestration/agent_trace.jsonl.head",  # the ledger's hash chain head
        ".orchestration/intent_map.md",
    }
    assert "inventory/models.py" in changed
    assert (root / "inventory" / "models.py").read_text().endswith("LIMIT = 5\n")
    schema = json.loads((test_data / "agent-trace-0.1.0.schema.json").read_text())
    records = [
        json.loads(x)
        for x in (root / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    ]
    [rec] = [r for r in records if r["files"]]
    jsonschema.Draft202012Validator(schema).validate(rec)
    assert rec["metadata"]["intent_id"] == "INT-001" and rec["metadata"]["tool"] == "Bash"
    assert rec["metadata"]["caller"] == "claude-code"


def test_a_command_whose_text_looks_destructive_is_not_asked_about_before_it_runs(ws):
    """The text decides nothing: it runs (a warning in the reason), and what it did is
    judged from its overlay."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    out = answer(root, {"command": "rm -rf inventory/build", "description": "Clean"})
    assert out["permissionDecision"] == "allow"
    assert "sandbox exec" in out["updatedInput"]["command"]
    assert "looks destructive" in out["permissionDecisionReason"]


def test_the_wrapped_command_keeps_quotes_and_heredocs(ws):
    root = ws["root"]
    original = "cat <<'EOF'\nit's \"quoted\" $HOME\nEOF"
    out = answer(root, {"command": original, "description": "Quote"})
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert proc.stdout == 'it\'s "quoted" $HOME\n', proc.stderr
    assert sys.executable in out["updatedInput"]["command"]


def test_documented_hook_settings_are_what_install_writes(tmp_path):
    from ctxnb.integrations.claude_code_install import install_settings

    text = (REPO / "docs" / "integrations.md").read_text()
    block = next(b for b in text.split("```json\n")[1:] if '"PreToolUse"' in b)
    python = os.path.abspath(sys.executable)
    documented = json.loads(block.split("```")[0].replace("/path/to/venv/bin/python", python))
    path, _ = install_settings(tmp_path)
    assert json.loads(path.read_text()) == documented


def test_a_planted_ctxnb_py_and_sitecustomize_never_run_in_ctxnb(ws, tmp_path):
    """Old hole: ``python -m ctxnb sandbox exec`` put the workspace first on sys.path, so a
    ctxnb.py the agent wrote at the root ran on the host at every Bash call."""
    from ctxnb.integrations.claude_code_install import install_settings

    root = ws["root"]
    marker = tmp_path / "planted-code-ran"
    for name in ("ctxnb.py", "sitecustomize.py", "usercustomize.py"):
        (root / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    # The hook itself, started as `ctxnb hook install` wrote it, by Claude Code (bash -c
    # in the project directory, the payload on stdin).
    settings, _ = install_settings(tmp_path / "proj")
    hook = json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert hook.split()[:2] == [os.path.abspath(sys.executable), "-I"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run(
        ["bash", "-c", hook],
        input=json.dumps(payload(root, {"command": "echo hi", "description": "x"})),
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    updated = json.loads(res.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
    # The rewritten Bash command, executed as Claude Code does.
    assert updated.split()[:2] == [os.path.abspath(sys.executable), "-I"]
    proc = run_as_claude_code(root, updated)
    assert proc.stdout == "hi\n", proc.stderr
    assert not marker.exists(), marker.read_text()


SID = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
HELD = re.compile(r"`ctxnb sandbox commit ([0-9a-f]{12})`")


def hold_changes(root: Path, command: str, sid: str = SID) -> tuple[str, str]:
    """Run ``command`` as Claude Code would; its changes must be held: (id, stderr)."""
    out = answer(root, {"command": command, "description": "x"})
    assert out["permissionDecision"] == "allow", out
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert proc.returncode == 1, proc.stderr
    assert "APPROVAL_HELD" in proc.stderr, proc.stderr
    match = HELD.search(proc.stderr)
    assert match, proc.stderr
    return match.group(1), proc.stderr


def pre(root: Path, command: str, sid: str = SID) -> dict:
    res = run_hook(
        "pre-tool-use",
        json.dumps(payload(root, {"command": command, "description": "x"}, sid)),
    )
    assert res.exit_code == 0, res
    return res.answer["hookSpecificOutput"]


def trace_records(root: Path) -> list[dict]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [json.loads(x) for x in text.splitlines()]


@pytest.mark.parametrize(
    ("command", "after"),
    [
        ("cp /dev/null inventory/models.py", b""),
        ("awk 'BEGIN{system(\"rm inventory/models.py\")}'", None),
        ("truncate -s 0 inventory/models.py", b""),
    ],
)
def test_destructive_changes_are_held_and_committed_only_after_the_user_saw_their_diff(
    ws, command, after
):
    """Old hole: Claude Code's user was asked about the command's *text* (a blanket
    --approved), and a safe-looking text's destructive effect was refused outright. Now
    what the command did waits in its overlay; the user is asked with its diff."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    hold_id, stderr = hold_changes(root, command)
    assert "--- a/inventory/models.py" in stderr
    assert models.read_bytes() == before  # nothing committed yet
    asked = pre(root, f"ctxnb sandbox commit {hold_id}")
    assert asked["permissionDecision"] == "ask"
    reason = asked["permissionDecisionReason"]
    assert "--- a/inventory/models.py" in reason and "-" + before.decode().splitlines()[0] in reason
    cmd = asked["updatedInput"]["command"]
    assert cmd.split()[:2] == [os.path.abspath(sys.executable), "-I"]
    assert " sandbox exec " not in cmd  # the commit runs on the host, after the user's yes
    proc = run_as_claude_code(root, cmd)
    assert proc.returncode == 0, proc.stderr
    assert (models.read_bytes() if models.exists() else None) == after
    [rec] = [r for r in trace_records(root) if r["files"]]
    approval = rec["metadata"]["approval"]
    assert approval["by"] == "human (asked by Claude Code)" and approval["approved"] is True
    shown = stderr[stderr.index("--- a/inventory/models.py") :].split("ctxnb: nothing")[0]
    assert approval["diff_sha256"] == hashlib.sha256(shown.encode()).hexdigest()
    # Committed once: the hold is gone.
    assert pre(root, f"ctxnb sandbox commit {hold_id}")["permissionDecision"] == "deny"


def test_a_held_commit_after_an_outside_edit_commits_nothing(ws):
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    hold_id, _ = hold_changes(root, "cp /dev/null inventory/models.py")
    models.write_text("edited by a human meanwhile\n")
    proc = run_as_claude_code(
        root, pre(root, f"ctxnb sandbox commit {hold_id}")["updatedInput"]["command"]
    )
    assert proc.returncode == 1, proc.stderr
    assert "APPROVAL_STALE" in proc.stderr or "changed by someone else" in proc.stderr
    assert models.read_text() == "edited by a human meanwhile\n"


def test_held_changes_cannot_be_committed_around_the_users_question(ws):
    """Only the exact ``ctxnb sandbox commit ID`` reaches the host, and only by asking;
    another session, a bad id, a longer command, or the commit run inside the sandbox
    commits nothing."""
    root = ws["root"]
    # The other session works beside this one under the same intent: they share its scope.
    (root / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    other = "0b2d4f6a-1c3e-4a5b-8d7f-9e0a1b2c3d4e"
    select_intent(root, "INT-001", other)
    assert pre(root, f"ctxnb sandbox commit {hold_id}", other)["permissionDecision"] == "deny"
    # An id of decimal digits only (one in about 280) has no upper-case variant.
    variant = [hold_id.upper()] if hold_id.upper() != hold_id else []
    for bad in ("../../etc", "0" * 11, *variant):
        assert pre(root, f"ctxnb sandbox commit {bad}")["permissionDecision"] == "deny", bad
    # Those refusals count toward the circuit breaker, as every pre-hook refusal does; a
    # human closes it, since what follows tests the commit, not the breaker.
    from ctxnb.cli.app import main

    assert main(["hook", "reset-breaker", "-w", str(root)]) == 0
    python = os.path.abspath(sys.executable)
    sneaky = [
        f"ctxnb sandbox commit {hold_id}; true",
        f"ctxnb sandbox commit {hold_id} && ctxnb sandbox commit {hold_id}",
        f"{python} -I -m ctxnb sandbox commit --workspace {root} --session {SID} -- {hold_id}",
    ]
    for command in sneaky:
        out = pre(root, command)
        assert (
            out["permissionDecision"] == "allow"
            and " sandbox exec " in out["updatedInput"]["command"]
        )
        run_as_claude_code(root, out["updatedInput"]["command"])
        assert models.read_bytes() == before, command
    assert (root / ".ctxnb" / "overlay" / f"held-{hold_id}" / "hold.json").is_file()
    # Discarding needs nobody, and then there is nothing to commit.
    out = pre(root, f"ctxnb sandbox discard {hold_id}")
    assert out["permissionDecision"] == "allow"
    assert run_as_claude_code(root, out["updatedInput"]["command"]).returncode == 0
    assert not (root / ".ctxnb" / "overlay" / f"held-{hold_id}").exists()
    assert pre(root, f"ctxnb sandbox commit {hold_id}")["permissionDecision"] == "deny"
    assert models.read_bytes() == before


def test_an_expired_hold_is_discarded(ws):
    from ctxnb.sandbox.held import HOLD_TTL

    root = ws["root"]
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    record = root / ".ctxnb" / "overlay" / f"held-{hold_id}" / "hold.json"
    data = json.loads(record.read_text())
    data["created"] -= HOLD_TTL + 1
    record.write_text(json.dumps(data))
    out = pre(root, f"ctxnb sandbox commit {hold_id}")
    assert out["permissionDecision"] == "deny" and "expired" in out["permissionDecisionReason"]
    assert not record.parent.exists()


def held_dir(root: Path, hold_id: str) -> Path:
    return root / ".ctxnb" / "overlay" / f"held-{hold_id}"


def test_the_commit_is_bound_to_the_diff_the_prompt_showed_not_to_the_record(ws):
    """Defence in depth: were the hold's record and upper layer replaced after the user
    was asked (here by the test: nothing the agent runs reaches .ctxnb/), the approved
    command commits nothing; a record whose diff is not its hash is never asked about."""
    import shutil

    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    shown_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    other_id, _ = hold_changes(root, "printf 'zz9 was here\\n' > inventory/models.py")
    asked = pre(root, f"ctxnb sandbox commit {shown_id}")
    assert asked["permissionDecision"] == "ask" and "zz9" not in asked["permissionDecisionReason"]
    # Between the prompt and the user's yes: the other hold's upper and record move in.
    shutil.rmtree(held_dir(root, shown_id))
    shutil.copytree(held_dir(root, other_id), held_dir(root, shown_id))
    proc = run_as_claude_code(root, asked["updatedInput"]["command"])
    assert proc.returncode == 1 and "APPROVAL_STALE" in proc.stderr, proc.stderr
    assert models.read_bytes() == before
    # A planted record: the other hold's changes under a harmless-looking diff.
    record = held_dir(root, other_id) / "hold.json"
    data = json.loads(record.read_text())
    data["diff"] = "--- a/inventory/notes.txt\n+++ b/inventory/notes.txt\n@@ -0,0 +1 @@\n+ok\n"
    record.write_text(json.dumps(data))
    out = pre(root, f"ctxnb sandbox commit {other_id}")
    assert out["permissionDecision"] == "deny", out
    assert models.read_bytes() == before


def test_a_diff_the_prompt_cannot_show_whole_is_not_asked_about(ws):
    """The user approves only what they saw: a diff longer than the prompt shows, or a
    command text long enough to push the diff out of Claude Code's 10,000 characters,
    gets no question (nothing to approve blind); the agent is told to split the work."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    models.write_text("".join(f"line {i} of the inventory model\n" for i in range(400)))
    before = models.read_bytes()
    out = answer(root, {"command": "truncate -s 0 inventory/models.py", "description": "x"})
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert "APPROVAL_HELD" in proc.stderr and "smaller commands" in proc.stderr
    assert "run exactly" not in proc.stderr  # not told to ask for what cannot be asked
    [long_id] = re.findall(r"sandbox discard ([0-9a-f]{12})", proc.stderr)
    out = pre(root, f"ctxnb sandbox commit {long_id}")
    assert out["permissionDecision"] == "deny", out["permissionDecision"]
    assert "smaller" in out["permissionDecisionReason"]
    assert "updatedInput" not in out
    models.write_text("short\nfile\nhere\n")
    # The command's own text cannot push the diff out of what the prompt shows.
    padding = "x" * 9_500
    short_id, stderr = hold_changes(root, f": '{padding}'; truncate -s 0 inventory/models.py")
    held = json.loads((held_dir(root, short_id) / "hold.json").read_text())
    out = pre(root, f"ctxnb sandbox commit {short_id}")
    assert out["permissionDecision"] == "ask"
    assert held["diff"] in out["permissionDecisionReason"]
    assert before != models.read_bytes() == b"short\nfile\nhere\n"


def ask_to_commit(root: Path, command: str) -> dict:
    """Hold ``command``'s changes and ask to commit them: the hook's answer (an ask)."""
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, command)
    out = pre(root, f"ctxnb sandbox commit {hold_id}")
    assert out["permissionDecision"] == "ask", out
    return out


def test_the_prompt_shows_no_control_characters_of_the_agent(ws):
    """Terminal escapes in the command or in the file's new bytes could redraw the
    permission prompt; they are shown escaped, the command on one line."""
    reason = ask_to_commit(
        ws["root"],
        "printf '\\033[2K\\033[1Aok\\xe2\\x80\\x8b\\xe2\\x80\\xae\\n' > inventory/models.py "
        "#\x1b[2K\x1b[1A\u2028\u200b\u202e\U000e0041\nexit 0",
    )["permissionDecisionReason"]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", reason), repr(reason)
    assert not set("\u2028\u200b\u202e\U000e0041") & set(reason), repr(reason)
    assert "\\x1b[2K" in reason or "\\u001b[2K" in reason
    assert "exit 0" in reason.splitlines()[0]


def test_another_sessions_hold_cannot_be_discarded(ws):
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    other = "0b2d4f6a-1c3e-4a5b-8d7f-9e0a1b2c3d4e"
    out = pre(root, f"ctxnb sandbox discard {hold_id}", other)
    if out["permissionDecision"] == "allow":
        run_as_claude_code(root, out["updatedInput"]["command"])
    assert held_dir(root, hold_id).is_dir()
    assert pre(root, f"ctxnb sandbox commit {hold_id}")["permissionDecision"] == "ask"


def commit_after_intents_change(
    root: Path, command: str, intents: str
) -> subprocess.CompletedProcess[str]:
    """Hold ``command``'s changes and ask; the intents file becomes ``intents``; then
    the user's yes: the commit."""
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, command)
    cmd = pre(root, f"ctxnb sandbox commit {hold_id}")["updatedInput"]["command"]
    (root / ".orchestration" / "active_intents.yaml").write_text(intents)
    return run_as_claude_code(root, cmd)


def test_a_hold_whose_changes_left_the_scope_commits_nothing(ws):
    """The intent's scope narrowed after the hold: its destructive change is no longer
    committable, and the rest, harmless alone, is not what the user approved."""
    root = ws["root"]
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    proc = commit_after_intents_change(
        root,
        "rm inventory/models.py; echo new > inventory/notes.txt",
        INTENTS.replace('["inventory/**"]', '["inventory/notes.txt"]'),
    )
    assert proc.returncode == 1 and "APPROVAL_STALE" in proc.stderr, proc.stderr
    assert models.read_bytes() == before
    assert not (root / "inventory" / "notes.txt").exists()


def test_nothing_the_agent_runs_or_writes_reaches_a_held_overlay(ws):
    """Between the hold and the commit the agent tries to rewrite the held upper layer
    and record: from a sandboxed command (the path, /proc, the overlay's work
    directory, a symlink, unmounting the mask) and with Claude Code's Write tool; the
    commit then commits exactly the diff it held."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    held = held_dir(root, hold_id)
    record_before = (held / "hold.json").read_bytes()
    rel = f".ctxnb/overlay/held-{hold_id}"
    attacks = [
        f"printf 'zz9\\n' > {rel}/upper/inventory/models.py",
        f"cat {rel}/hold.json",
        f"printf 'zz9\\n' > /proc/self/root{root}/{rel}/upper/inventory/models.py",
        f"printf 'zz9\\n' > /proc/1/cwd/{rel}/upper/inventory/models.py",
        f"ln -s {root}/.ctxnb inventory/lnk; printf 'zz9\\n' > inventory/lnk/overlay/x",
        f"umount {root}/.ctxnb; printf 'zz9\\n' > {rel}/upper/inventory/models.py",
        "for d in .ctxnb/overlay/*/work .ctxnb/overlay/*/upper; do echo zz9 > $d/x; done",
        "grep -rl held- /proc/self/mountinfo && "
        f"find / -path '*held-{hold_id}*' -name hold.json 2>/dev/null | xargs cat",
    ]
    for command in attacks:
        out = answer(root, {"command": command, "description": "x"})
        proc = run_as_claude_code(root, out["updatedInput"]["command"])
        assert "zz9" not in proc.stdout and hold_id not in proc.stdout, (command, proc.stdout)
    for path in (
        f"{root}/{rel}/upper/inventory/models.py",
        f"{root}/inventory/../{rel}/hold.json",
        f"{root}/./.ctxnb//overlay/held-{hold_id}/hold.json",
    ):
        res = run_hook(
            "pre-tool-use",
            json.dumps(
                {
                    **payload(root, {"command": "x"}),
                    "tool_name": "Write",
                    "tool_input": {"file_path": path, "content": "zz9\n"},
                }
            ),
        )
        assert res.answer["hookSpecificOutput"]["permissionDecision"] == "deny", path
    assert (held / "hold.json").read_bytes() == record_before
    assert not any("zz9" in p.read_text() for p in held.rglob("*") if p.is_file())
    proc = run_as_claude_code(
        root, pre(root, f"ctxnb sandbox commit {hold_id}")["updatedInput"]["command"]
    )
    assert proc.returncode == 0, proc.stderr
    assert models.read_bytes() == b""


@pytest.mark.parametrize(
    "spelling",
    [
        "ctxnb sandbox commit {id}",
        "  ctxnb\tsandbox  commit {id}\n",
        "'ctxnb' \"sandbox\" c'omm'it {id}",
        "\\ctxnb sandbox commit '{id}'",
    ],
)
def test_every_spelling_of_the_commit_runs_the_one_rewritten_command(ws, spelling):
    """The command's text is replaced whole: what runs after the yes is the launcher's
    commit of this hold with the shown diff's hash, however the four words were spelt."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    held = json.loads((held_dir(root, hold_id) / "hold.json").read_text())
    out = pre(root, spelling.format(id=hold_id))
    assert out["permissionDecision"] == "ask"
    python = os.path.abspath(sys.executable)
    states = state_dir(root)
    assert out["updatedInput"]["command"] == (
        f"{python} -I -m ctxnb sandbox commit --workspace {root} --session {SID} "
        f"--receipt toolu_01E --state-dir {states} --expect {held['diff_sha256']} -- {hold_id}"
    )
    # bash joins a backslash-newline, shlex keeps the newline in the word: no such hold,
    # a refusal, never a command of the agent's on the host.
    out = pre(root, f"ctxnb sandbox commit \\\n{hold_id}")
    assert out["permissionDecision"] == "deny" and "updatedInput" not in out


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: "{not json",
        lambda d: json.dumps({**d, "diff": 5}),
        lambda d: json.dumps({**d, "reasons": [1]}),
        lambda d: json.dumps({**d, "created": True}),
        lambda d: json.dumps([d]),
        lambda d: json.dumps({k: v for k, v in d.items() if k != "diff_sha256"}),
    ],
)
def test_a_damaged_hold_record_is_one_clear_refusal(ws, damage):
    """A record not as ctxnb wrote it is answered with a refusal that says so (not a
    crash of the hook); a human can still discard it."""
    from ctxnb.cli.app import main

    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    record = held_dir(root, hold_id) / "hold.json"
    record.write_text(damage(json.loads(record.read_text())))
    for action in ("commit", "discard"):
        out = pre(root, f"ctxnb sandbox {action} {hold_id}")
        assert out["permissionDecision"] == "deny", out
        assert "damaged" in out["permissionDecisionReason"]
    assert main(["sandbox", "discard", "--workspace", str(root), "--", hold_id]) == 0
    assert not held_dir(root, hold_id).exists()
    assert models.read_bytes() == before


def test_a_change_with_no_diff_lines_is_in_the_diff_the_user_approves(ws):
    """Deleting an empty file has no diff lines: it must still be in the diff shown and
    hashed, or the scope widened after the hold lets the commit delete a file the
    user's diff never named."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    init = root / "src" / "__init__.py"
    init.write_bytes(b"")
    hold_id, stderr = hold_changes(root, "truncate -s 0 inventory/models.py; rm src/__init__.py")
    assert "src/__init__.py" not in stderr.split("ctxnb: nothing")[0].split("---", 1)[1]
    cmd = pre(root, f"ctxnb sandbox commit {hold_id}")["updatedInput"]["command"]
    (root / ".orchestration" / "active_intents.yaml").write_text(
        INTENTS.replace('["inventory/**"]', '["inventory/**", "src/**"]')
    )
    proc = run_as_claude_code(root, cmd)
    assert proc.returncode == 1 and "APPROVAL_STALE" in proc.stderr, proc.stderr
    assert init.exists()
    # In scope from the start, the deletion is in the diff the user is shown.
    hold_id, _ = hold_changes(root, "rm src/__init__.py")
    asked = pre(root, f"ctxnb sandbox commit {hold_id}")
    assert "--- a/src/__init__.py\n+++ /dev/null\n" in asked["permissionDecisionReason"]
    assert run_as_claude_code(root, asked["updatedInput"]["command"]).returncode == 0
    assert not init.exists()


@pytest.mark.parametrize("meanwhile", ["bash", "write"])
def test_the_workspace_changed_by_the_agent_between_hold_and_commit_commits_nothing(ws, meanwhile):
    """After the prompt, the agent changes a file of the held diff (another command,
    committed; or Claude Code's Write creating a file the hold creates): the user's yes
    commits nothing, and the agent's later change stays."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    new = root / "inventory" / "new.txt"
    hold_id, _ = hold_changes(
        root, "truncate -s 0 inventory/models.py; echo held > inventory/new.txt"
    )
    cmd = pre(root, f"ctxnb sandbox commit {hold_id}")["updatedInput"]["command"]
    if meanwhile == "bash":
        out = answer(root, {"command": "echo '# more' >> inventory/models.py", "description": "x"})
        assert run_as_claude_code(root, out["updatedInput"]["command"]).returncode == 0
        assert models.read_text().endswith("# more\n")
    else:
        tool_input = {"file_path": str(new), "content": "mine\n"}
        res = run_hook(
            "pre-tool-use",
            json.dumps(
                {**payload(root, {"command": "x"}), "tool_name": "Write", "tool_input": tool_input}
            ),
        )
        assert res.answer is None or res.decision != "deny", res
        new.write_text("mine\n")  # Claude Code's Write, allowed
    after = tree(root)
    proc = run_as_claude_code(root, cmd)
    assert proc.returncode == 1, proc.stderr
    assert "APPROVAL_STALE" in proc.stderr or "changed by someone else" in proc.stderr
    assert tree(root) == after


def test_a_hold_whose_intent_was_closed_commits_nothing(ws):
    root = ws["root"]
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    proc = commit_after_intents_change(
        root, "truncate -s 0 inventory/models.py", INTENTS.replace("status: active", "status: done")
    )
    assert proc.returncode != 0 and "INT-001" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert models.read_bytes() == before


def test_a_new_executable_is_shown_as_one(ws):
    """A new file keeps its x bits at the commit: the diff the user approves says so."""
    root = ws["root"]
    asked = ask_to_commit(
        root,
        "truncate -s 0 inventory/models.py; printf 'echo hi\\n' > inventory/run.sh; "
        "printf 'plain\\n' > inventory/plain.txt; chmod 755 inventory/run.sh",
    )
    reason = asked["permissionDecisionReason"]
    assert "new file mode 100755\n--- /dev/null\n+++ b/inventory/run.sh\n" in reason
    assert reason.count("new file mode") == 1
    assert run_as_claude_code(root, asked["updatedInput"]["command"]).returncode == 0
    assert os.stat(root / "inventory" / "run.sh").st_mode & 0o777 == 0o755


@pytest.mark.parametrize("mode", ["bypassPermissions", "auto", "dontAsk", None, 1])
def test_no_commit_is_asked_for_where_claude_code_may_answer_for_the_user(ws, mode):
    """In some permission modes Claude Code approves a hook's "ask" with no prompt
    (anthropics/claude-code#89561 for "auto", #77212 for "bypassPermissions" before
    2.1.233): there the commit would run unseen and be traced as the user's yes. Held
    changes are asked about only in the modes that prompt."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    p = payload(root, {"command": f"ctxnb sandbox commit {hold_id}", "description": "x"})
    if mode is None:
        del p["permission_mode"]
    else:
        p["permission_mode"] = mode
    out = run_hook("pre-tool-use", json.dumps(p)).answer["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "updatedInput" not in out, out
    assert "permission mode" in out["permissionDecisionReason"]
    p["permission_mode"] = "acceptEdits"
    out = run_hook("pre-tool-use", json.dumps(p)).answer["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask"


def test_the_agents_description_is_not_shown_with_the_commit_question(ws):
    """Claude Code shows a Bash call's description in its prompt: the agent's own words
    ("harmless, nothing deleted") must not stand beside the diff the user approves."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    tool_input = {
        "command": f"ctxnb sandbox commit {hold_id}",
        "description": "Harmless: adds one comment, nothing is deleted",
    }
    res = run_hook("pre-tool-use", json.dumps(payload(root, tool_input)))
    out = res.answer["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask"
    assert "Harmless" not in json.dumps(out)
    assert hold_id in out["updatedInput"]["description"]


@pytest.mark.parametrize("blank", ["\x1c", "\r", "\x0b", "\xa0", "\u3000 \u2028"])
def test_a_command_python_calls_blank_and_bash_does_not_still_runs_sandboxed(ws, tmp_path, blank):
    """Python's str.strip() removes \\x1c, \\r, NBSP...; bash runs them as a command's name
    (found on PATH). Such a command got no decision: it ran on the host, unconfined."""
    root = ws["root"]
    select_intent(root, "INT-001", SID)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    marker = tmp_path / "escaped"  # outside the workspace: the host's, not an overlay's
    prog = bindir / blank.partition(" ")[0]
    prog.write_text(f"#!/bin/sh\necho escaped > {marker}\n")
    prog.chmod(0o755)
    res = run_hook(
        "pre-tool-use", json.dumps(payload(root, {"command": blank, "description": "x"}))
    )
    assert res.answer, "no decision: Claude Code runs the command as it is, unconfined"
    out = res.answer["hookSpecificOutput"]
    assert (
        out["permissionDecision"] == "allow" and " sandbox exec " in out["updatedInput"]["command"]
    )
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", out["updatedInput"]["command"]], cwd=root, env=env, timeout=120)
    assert not marker.exists()


def test_a_commit_typed_in_a_terminal_commits_only_the_diff_it_printed(ws, capsys):
    """Not through Claude Code's prompt, nobody was shown the diff: ``ctxnb sandbox
    commit`` prints it and, without a terminal to answer on, commits it only with
    ``--expect`` naming the diff printed."""
    from ctxnb.cli.app import main

    root = ws["root"]
    select_intent(root, "INT-001", SID)
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    base = ["sandbox", "commit", "--workspace", str(root), "--session", SID]
    capsys.readouterr()
    assert main([*base, "--", hold_id]) == 1
    err = capsys.readouterr().err
    assert "--- a/inventory/models.py" in err and models.read_bytes() == before
    [sha] = re.findall(r"--expect ([0-9a-f]{64})", err)
    assert main([*base, "--expect", "0" * 64, "--", hold_id]) == 1
    assert models.read_bytes() == before
    hold_id, _ = hold_changes(root, "truncate -s 0 inventory/models.py")
    assert main([*base, "--expect", sha, "--", hold_id]) == 0
    assert models.read_bytes() == b""


def test_claude_codes_prompt_for_a_held_change_says_what_the_redaction_hides(ws):
    """Through Claude Code's path: the command runs sandboxed and is held; the real hook
    process asks the commit question; it carries the note and the changed line. The
    user's no (the commit never runs) lands nothing; a yes commits those bytes."""
    from _hidden_change import HIDDEN_ONE, key_then_code, marker

    root = ws["root"]
    select_intent(root, "INT-001", SID)
    cfg = root / "inventory" / "deploy.cfg"
    cfg.write_bytes(key_then_code("safe"))
    models = root / "inventory" / "models.py"
    before = models.read_bytes()
    hold_id, told = hold_changes(
        root, "cp /dev/null inventory/models.py; sed -i 's/safe/unsafe/' inventory/deploy.cfg"
    )
    assert HIDDEN_ONE in told  # the agent is told too
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run(
        [str(bin_dir / "ctxnb"), "hook", "pre-tool-use"],
        input=json.dumps(
            payload(root, {"command": f"ctxnb sandbox commit {hold_id}", "description": "x"})
        ),
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask"
    reason = out["permissionDecisionReason"]
    assert HIDDEN_ONE in reason
    assert "+" + marker(b'run = "unsafe"') in reason
    # No: Claude Code never runs the command; nothing was committed.
    assert cfg.read_bytes() == key_then_code("safe") and models.read_bytes() == before
    # Yes: the rewritten command commits exactly those bytes.
    done = run_as_claude_code(root, out["updatedInput"]["command"])
    assert done.returncode == 0, done.stderr
    assert cfg.read_bytes() == key_then_code("unsafe") and models.read_bytes() == b""


def test_a_bash_command_refused_by_the_network_proxy_is_told_why(ws):
    """curl prints only "CONNECT tunnel failed, response 403": the reason comes from ctxnb,
    and the refused name was never resolved (no seam: a refused name needs no DNS)."""
    require(shutil.which("curl") is not None, "curl")
    root = ws["root"]
    (root / "ctxnb.toml").write_text('[sandbox]\nallowed_domains = ["allowed.test"]\n')
    cmd = "curl -sS -p http://refused.test/ ; curl -sS http://refused.test:8080/x"
    out = answer(root, {"command": cmd, "description": "Fetch"})
    proc = run_as_claude_code(root, out["updatedInput"]["command"])
    assert "CONNECT tunnel failed, response 403" in proc.stderr
    assert "refused.test is not in the sandbox's allowed domains (allowed.test)" in proc.stdout
    assert (
        "ctxnb: network refused refused.test:80: refused.test is not in the sandbox's "
        "allowed domains (allowed.test)"
    ) in proc.stderr
    assert "network refused refused.test:8080" in proc.stderr
