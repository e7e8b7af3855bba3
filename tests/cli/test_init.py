"""``ctxnb init`` and the numbered steps of docs/integrations.md, run as a user runs them.

Each client's list in "Start here" is run as a script: its ``bash`` blocks in order, in a
copy of the sample project, by the installed ``ctxnb`` command; the step between them
(editing the intents file) is done as the list and the file itself say. For Claude Code,
the hook commands ``ctxnb init --claude-code`` wrote into ``.claude/settings.json`` are then
run as Claude Code runs them (a shell command, the payload on stdin) with the shared example
payloads (``tests/data/claude-code-hooks``): a prompt naming the intent, the Edit's pre
hook, the edit itself, its post hook. The edit must be stored and traced.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _git import git
from _paths import REPO
from test_docs import code_blocks

from ctxnb.govern.intents import load_intents
from ctxnb.samples import copy_sample_workspace

BIN = REPO / ".venv" / "bin"
PAYLOAD_PROJECT = "/home/user/proj"
DOC = REPO / "docs" / "integrations.md"


def _steps(client: str) -> list[str]:
    """The ``bash`` blocks of one client's numbered list in "Start here"."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Start here")
    section = text[start : text.index("\n## ", start + 1)]
    parts = re.split(r"^### ", section, flags=re.MULTILINE)
    (part,) = [p for p in parts if p.startswith(client)]
    blocks = [b.code for b in code_blocks(part) if b.info == "bash"]
    assert blocks, f"no bash steps for {client}"
    return blocks


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def _bash(script: str, root: Path) -> str:
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=root,
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{script!r} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _describe_the_work(root: Path, scope: str) -> None:
    """Step 3, as the intents file says: remove the leading "# " of the example's lines,
    then set its scope."""
    path = root / ".orchestration" / "active_intents.yaml"
    lines = path.read_text().splitlines()
    key = lines.index("active_intents:")
    example = [ln.removeprefix("# ") for ln in lines[key + 1 :]]
    text = "\n".join([*lines[: key + 1], *example]) + "\n"
    path.write_text(text.replace("- src/export/**", f"- {scope}"))
    assert load_intents(path).get("INT-001").in_scope("src/app.py") == (scope == "src/**")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = copy_sample_workspace(tmp_path, name="proj")
    # The file the shared payloads edit ("return x + 1" -> "return x + 2" on line 2).
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def f(x):\n    return x + 1\n")
    git(root, "init", "-q")
    return root


def _payload(test_data: Path, name: str, root: Path) -> str:
    text = (test_data / "claude-code-hooks" / f"{name}.json").read_text()
    return text.replace(PAYLOAD_PROJECT, str(root))


def _hook_commands(root: Path) -> dict[str, str]:
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    return {
        event: entries[0]["hooks"][0]["command"] for event, entries in settings["hooks"].items()
    }


def _claude_runs(command: str, payload: str, root: Path) -> subprocess.CompletedProcess[str]:
    # Claude Code runs a hook's command with a shell, the event on stdin, in the project.
    env = {**_env(root), "CLAUDE_PROJECT_DIR": str(root)}
    return subprocess.run(
        ["sh", "-c", command],
        input=payload,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_claude_code_steps_record_an_edit(project: Path, test_data: Path) -> None:
    init, index, verify = _steps("Claude Code")
    out = _bash(init, project)
    assert "created" in out and "Claude Code's hooks" in out
    # The three next steps, numbered.
    assert [ln.split(".")[0].strip() for ln in out.splitlines() if re.match(r"\s+\d\.", ln)] == [
        "1",
        "2",
        "3",
    ]
    _describe_the_work(project, "src/**")
    _bash(index, project)

    hooks = _hook_commands(project)
    prompt = _claude_runs(
        hooks["UserPromptSubmit"], _payload(test_data, "user-prompt-submit", project), project
    )
    assert prompt.returncode == 0, prompt.stderr
    assert "INT-001 is now the active intent" in prompt.stdout

    pre = _claude_runs(hooks["PreToolUse"], _payload(test_data, "pre-edit", project), project)
    assert (pre.returncode, pre.stdout) == (0, ""), (pre.stdout, pre.stderr)  # no objection
    app = project / "src" / "app.py"
    app.write_text(app.read_text().replace("return x + 1", "return x + 2"))  # Claude Code edits
    post = _claude_runs(hooks["PostToolUse"], _payload(test_data, "post-edit", project), project)
    assert post.returncode == 0, post.stderr

    lines = (project / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    records: list[dict[str, Any]] = [json.loads(ln) for ln in lines]
    assert [r["files"][0]["path"] for r in records] == ["src/app.py"]
    assert "INT-001" in json.dumps(records[0])
    history = _bash("ctxnb history src/app.py", project)
    assert len([ln for ln in history.splitlines() if "@" in ln]) == 2, history  # index + edit
    # Claude Code compacts the conversation (a real transcript of a short session): the
    # installed hook records what it dropped.
    compact = json.loads(_payload(test_data, "post-compact", project))
    compact["transcript_path"] = str(test_data / "trajectories" / "claude-code" / "short.jsonl")
    done = _claude_runs(hooks["PostCompact"], json.dumps(compact), project)
    assert (done.returncode, done.stdout) == (0, ""), (done.stdout, done.stderr)
    audit = (project / ".ctxnb" / "audit.jsonl").read_text().splitlines()
    (compacted,) = [r for r in map(json.loads, audit) if r["tool"] == "PostCompact"]
    assert compacted["success"] and compacted["args"]["dropped"] > 0
    # The user quits Claude Code: the installed hook releases the session's lease at once,
    # so the next session need not wait lease_minutes for the intent's scope.
    leases = project / ".ctxnb" / "leases"
    assert list(leases.glob("*.json"))
    end = _claude_runs(hooks["SessionEnd"], _payload(test_data, "session-end", project), project)
    assert (end.returncode, end.stdout, end.stderr) == (0, "", "")
    assert list(leases.glob("*.json")) == []
    audit = (project / ".ctxnb" / "audit.jsonl").read_text().splitlines()
    (ended,) = [r for r in map(json.loads, audit) if r["tool"] == "SessionEnd"]
    assert ended["args"]["released"] == "INT-001"
    assert "intact" in _bash(verify, project)  # exits 0: the ledger's chain holds

    # The store is not the project's to commit: `git add -A` leaves .ctxnb/ out.
    git(project, "add", "-A")
    staged = git(project, "diff", "--cached", "--name-only").split()
    assert "src/app.py" in staged and not any(p.startswith(".ctxnb/") for p in staged)


def test_an_intent_outside_the_edit_is_refused_by_the_installed_hook(
    project: Path, test_data: Path
) -> None:
    """The example as shipped (src/export/**) does not own src/app.py: the hook says no."""
    init, index, _ = _steps("Claude Code")
    _bash(init, project)
    _describe_the_work(project, "src/export/**")
    _bash(index, project)
    hooks = _hook_commands(project)
    _claude_runs(
        hooks["UserPromptSubmit"], _payload(test_data, "user-prompt-submit", project), project
    )
    pre = _claude_runs(hooks["PreToolUse"], _payload(test_data, "pre-edit", project), project)
    assert json.loads(pre.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_mcp_steps_list_and_call_the_tools(project: Path) -> None:
    setup, check = _steps("MCP clients")
    _bash(setup, project)
    out = _bash(check, project)
    assert "read_file" in out and "select_active_intent" in out
    assert "Inventory" in out or "inventory" in out  # AGENTS.md, read through the tools


def test_acp_steps_set_up_and_start(project: Path) -> None:
    setup, check = _steps("ACP editors")
    _bash(setup, project)
    assert (project / ".orchestration" / "active_intents.yaml").is_file()
    out = _bash(check, project)
    assert out.startswith("usage: ctxnb acp") and "--model" in out


def test_init_twice_changes_nothing_and_a_missing_directory_is_refused(tmp_path: Path) -> None:
    first = _bash("ctxnb init --claude-code", tmp_path)
    settings = (tmp_path / ".claude" / "settings.json").read_text()
    (tmp_path / ".orchestration" / "AGENT.md").write_text("mine\n")
    again = _bash("ctxnb init --claude-code", tmp_path)
    assert "created" in first and "created" not in again and "unchanged" in again
    assert (tmp_path / ".orchestration" / "AGENT.md").read_text() == "mine\n"
    assert (tmp_path / ".claude" / "settings.json").read_text() == settings
    proc = subprocess.run(
        [str(BIN / "ctxnb"), "init", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "is not a directory" in proc.stderr
    assert not (tmp_path / "nope").exists()
