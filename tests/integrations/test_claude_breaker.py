"""The pre-tool-use hook's refusals count toward the engine's circuit breaker, through the
real ``ctxnb hook`` processes: each call below is a new process, as under Claude Code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from _claude_hook_process import CTXNB, hook_process
from _paths import TESTS

from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import HookResult

DATA = TESTS / "data" / "claude-code-hooks"
SID = "5b7c9d1e-2f3a-4b5c-8d6e-7f8091a2b3c4"
INTENTS = """\
active_intents:
  - id: INT-001
    name: The inventory
    status: active
    owned_scope: ["inventory/**"]
"""


def hook(event: str, payload: dict[str, Any]) -> HookResult:
    result = hook_process(event, payload)
    assert result.exit_code == 0, result.stderr
    return result


def pre(root: Path, tool: str, tool_input: dict[str, Any], session: str = SID) -> HookResult:
    payload = json.loads((DATA / "pre-edit.json").read_text())
    payload.update(cwd=str(root), session_id=session, tool_name=tool, tool_input=tool_input)
    return hook("pre-tool-use", payload)


def edit(root: Path, rel: str) -> dict[str, Any]:
    return {"file_path": str(root / rel), "old_string": "a", "new_string": "b"}


def reason(result: HookResult) -> str:
    return result.answer["hookSpecificOutput"]["permissionDecisionReason"]


def governed(root: Path, *, select: bool = True) -> Path:
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    (root / "ctxnb.toml").write_text("[governance]\nbreaker_threshold = 2\n")
    if select:
        subprocess.run(
            [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(root)],
            check=True,
            capture_output=True,
        )
    return root


def failures(root: Path) -> dict[str, int]:
    from ctxnb import Workspace

    w = Workspace.open(root)
    try:
        return w.tools(w.session("nb"), caller="nb").engine.failures
    finally:
        w.close()


def test_out_of_scope_edits_open_the_breaker_for_every_later_hook_process(sample_ws):
    ws = governed(sample_ws)
    for _ in range(2):  # an agent that keeps editing what its intent does not own
        refused = pre(ws, "Edit", edit(ws, "README.md"))
        assert refused.decision == "deny" and "scope" in reason(refused)
    # The next Edit, in scope this time, is refused by the open breaker.
    stopped = pre(ws, "Edit", edit(ws, "inventory/models.py"))
    assert stopped.decision == "deny"
    assert "write_patch failed 2 times" in reason(stopped)
    assert "circuit breaker is open" in reason(stopped)
    # One breaker: the notebook's engine sees the hook's refusals as write_patch failures,
    # and the breaker's own refusals did not add to them.
    assert failures(ws) == {"write_patch": 2}
    subprocess.run([str(CTXNB), "hook", "reset-breaker", "-w", str(ws)], check=True)
    assert pre(ws, "Edit", edit(ws, "inventory/models.py")).decision is None


def test_writes_without_an_intent_count_toward_the_breaker(sample_ws):
    # Claude Code cannot select its own intent: retrying a write without one is a loop.
    ws = governed(sample_ws, select=False)
    for _ in range(2):
        refused = pre(ws, "Write", {"file_path": str(ws / "inventory" / "new.py"), "content": ""})
        assert refused.decision == "deny" and "intent" in reason(refused).lower()
    assert failures(ws) == {"write_file": 2}
    stopped = pre(ws, "Write", {"file_path": str(ws / "inventory" / "new.py"), "content": ""})
    assert "circuit breaker is open" in reason(stopped)


def test_denied_reads_count_in_a_row_and_an_allowed_read_ends_the_run(sample_ws):
    ws = governed(sample_ws)
    secret = {"file_path": str(ws / ".env")}
    allowed = {"file_path": str(ws / "README.md")}
    assert pre(ws, "Read", secret).decision == "deny"
    assert pre(ws, "Read", allowed).decision is None  # ends the run of refusals
    assert pre(ws, "Read", secret).decision == "deny"
    assert failures(ws) == {"read_file": 1}  # one in a row, not two in all
    assert pre(ws, "Read", secret).decision == "deny"
    stopped = pre(ws, "Read", allowed)  # two in a row: even an allowed path is refused
    assert stopped.decision == "deny" and "read_file failed 2 times" in reason(stopped)
