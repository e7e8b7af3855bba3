"""``[budget]`` limits on Claude Code's own tools, through the real ``ctxnb hook``
processes: each call below is a new process, as under Claude Code, and what a session
used is read back from the audit log the runner's budgets count too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _claude_hook_process import CTXNB, hook_process
from _paths import TESTS

from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import HookResult
from ctxnb.tools.audit import AuditLog, audit_record

DATA = TESTS / "data" / "claude-code-hooks"
SID = "7e1f3a5b-9c2d-4e6f-8a0b-1c2d3e4f5a6b"
INTENTS = """\
active_intents:
  - id: INT-001
    name: The inventory
    status: active
    owned_scope: ["inventory/**"]
"""


def governed(root: Path, budget: str, governance: str = "") -> Path:
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    (root / "ctxnb.toml").write_text(f"[budget]\n{budget}\n[governance]\n{governance}\n")
    select(root, SID)
    return root


def select(root: Path, session: str) -> None:
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", session, "-w", str(root)],
        check=True,
        capture_output=True,
    )


def pre(root: Path, tool: str, tool_input: dict[str, Any], **extra: Any) -> HookResult:
    payload = json.loads((DATA / "pre-edit.json").read_text())
    payload.update(cwd=str(root), session_id=SID, tool_name=tool, tool_input=tool_input)
    payload.update(extra)
    result = hook_process("pre-tool-use", payload)
    assert result.exit_code == 0, result.stderr
    return result


def post_write(root: Path, rel: str, text: str) -> None:
    """Save ``text`` as Claude Code's Write did, then run its post-tool-use hook."""
    path = root / rel
    before = path.read_text() if path.exists() else None
    path.write_text(text)
    payload = json.loads((DATA / "post-write.json").read_text())
    payload.update(cwd=str(root), session_id=SID)
    payload["tool_input"] = {"file_path": str(path), "content": text}
    payload["tool_response"] = {"filePath": str(path), "success": True, "originalFile": before}
    result = hook_process("post-tool-use", payload)
    assert result.exit_code == 0, result.stderr


def reason(result: HookResult) -> str:
    assert result.decision == "deny", result
    return str(result.answer["hookSpecificOutput"]["permissionDecisionReason"])


def audit(root: Path) -> list[dict[str, Any]]:
    path = root / ".ctxnb" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_write_past_the_budget_is_refused_for_every_write_tool_and_bash(sample_ws):
    ws = governed(sample_ws, "writes = 1")
    target = ws / "inventory" / "models.py"
    edit = {"file_path": str(target), "old_string": "a", "new_string": "b"}
    assert pre(ws, "Edit", edit).decision is None  # the budget's one write
    post_write(ws, "inventory/models.py", target.read_text() + "\nLIMIT = 3\n")
    for tool, tool_input in [
        ("Edit", edit),
        ("Write", {"file_path": str(target), "content": "x = 1\n"}),
        ("MultiEdit", {"file_path": str(target), "edits": [edit]}),
        ("NotebookEdit", {"notebook_path": str(ws / "inventory" / "n.ipynb")}),
        ("Bash", {"command": "echo hi > inventory/x.txt"}),
    ]:
        why = reason(pre(ws, tool, tool_input))
        assert why.startswith("BUDGET_EXCEEDED: ") and "nothing was written" in why
        assert "Left of this session's budget: writes 0" in why
        assert "[budget] writes" in why  # what a human changes to allow more
    assert "LIMIT = 3" in target.read_text() and not (ws / "inventory" / "x.txt").exists()


def test_the_hook_keeps_the_running_totals_and_a_damaged_counter_lets_nothing_through(
    sample_ws,
):
    ws = governed(sample_ws, "writes = 1")
    target = ws / "inventory" / "models.py"
    edit = {"file_path": str(target), "old_string": "a", "new_string": "b"}
    assert pre(ws, "Edit", edit).decision is None
    post_write(ws, "inventory/models.py", target.read_text() + "\nLIMIT = 3\n")
    assert reason(pre(ws, "Edit", edit)).startswith("BUDGET_EXCEEDED: ")
    # The session's totals, kept between the hook's processes under .ctxnb/budget/.
    (counter,) = (ws / ".ctxnb" / "budget").iterdir()
    state = json.loads(counter.read_text())
    assert state["usage"]["writes"] == 1
    assert state["offset"] == (ws / ".ctxnb" / "audit.jsonl").stat().st_size - len(
        (ws / ".ctxnb" / "audit.jsonl").read_text().splitlines(keepends=True)[-1]
    )  # the refusal's own line is appended after the check
    # A counter edited to say no write was made is set aside: the log still counts one.
    state["usage"]["writes"] = 0
    counter.write_text(json.dumps(state))
    assert reason(pre(ws, "Edit", edit)).startswith("BUDGET_EXCEEDED: ")
    counter.write_text("{")
    assert reason(pre(ws, "Write", {"file_path": str(target), "content": "x"})).startswith(
        "BUDGET_EXCEEDED: "
    )
    assert "LIMIT = 3" in target.read_text()


def test_a_session_id_names_no_path_for_its_counter(sample_ws):
    ws = governed(sample_ws, "writes = 5")
    read = {"file_path": str(ws / "README.md")}
    pre(ws, "Read", read)  # an audit log to keep totals of
    for sid in ("../../escaped", "/tmp/abs", "a/b"):
        payload = json.loads((DATA / "pre-read.json").read_text())
        payload.update(cwd=str(ws), session_id=sid, tool_name="Read", tool_input=read)
        assert hook_process("pre-tool-use", payload).exit_code == 0
    counters = sorted(p.name for p in (ws / ".ctxnb" / "budget").iterdir())
    # One per session that found a log to count (the first call of all found none).
    assert len(counters) == 3 and all(len(n) == len("0" * 32 + ".json") for n in counters)
    assert not (ws.parent / "escaped").exists() and not Path("/tmp/abs").exists()


def test_commands_run_through_sandbox_exec_count_toward_the_same_budget(sample_ws):
    # `sandbox exec` records a Claude Code session's commands as claude-code-<id>; its
    # audit line, written by the same writer it uses, spends the hook session's budget.
    # Two Claude Code sessions edit under one intent at once: they say they share it.
    ws = governed(sample_ws, "writes = 1", 'overlap = "allow"')
    AuditLog(ws / ".ctxnb" / "audit.jsonl").append(
        audit_record(
            caller="claude-code",
            session_id=f"claude-code-{SID}",
            tool="run_command",
            args={"cmd": "true"},
            duration_ms=1.0,
            success=True,
            error_code=None,
            mutating=True,
        )  # fmt: skip
    )
    edit = {"file_path": str(ws / "inventory" / "models.py"), "old_string": "a", "new_string": "b"}
    assert "writes 0" in reason(pre(ws, "Edit", edit))
    # Another Claude Code session has its own budget.
    select(ws, "another-session")
    assert pre(ws, "Edit", edit, session_id="another-session").decision is None


def test_a_read_that_would_cross_the_read_budget_is_refused_before_it_runs(sample_ws):
    ws = governed(sample_ws, "read_bytes = 100")
    (ws / "inventory" / "ten.txt").write_text("".join(f"line {n:04}\n" for n in range(10)))
    path = str(ws / "inventory" / "ten.txt")  # 10 lines of 10 bytes
    assert pre(ws, "Read", {"file_path": path, "offset": 1, "limit": 3}).decision is None
    assert pre(ws, "Read", {"file_path": path, "offset": 4, "limit": 5}).decision is None
    charged = [r for r in audit(ws) if r["tool"] == "Read"]
    assert [r["read_bytes"] for r in charged] == [30, 50]
    assert all(r["session_id"] == SID and r["caller"] == "claude-code" for r in charged)
    # The whole file (100 bytes) would cross what is left (20): refused, not charged.
    why = reason(pre(ws, "Read", {"file_path": path}))
    assert why.startswith("BUDGET_EXCEEDED: Read inventory/ten.txt: 100 bytes")
    assert "Left of this session's budget: read_bytes 20" in why
    assert len([r for r in audit(ws) if r["tool"] == "Read" and r["success"]]) == 2
    # A limit of 0 (or a negative one) may mean no limit to Claude Code: sized as none.
    assert "100 bytes" in reason(pre(ws, "Read", {"file_path": path, "limit": 0}))
    # What still fits is read: the last two lines.
    assert pre(ws, "Read", {"file_path": path, "offset": 9}).decision is None
    assert "read_bytes 0" in reason(pre(ws, "Read", {"file_path": path, "limit": 1}))


def test_a_read_budget_in_tokens_counts_with_the_default_counter(sample_ws):
    from ctxnb.llm.tokens import default_token_counter

    ws = governed(sample_ws, "read_tokens = 80")
    text = "def alpha(beta, gamma):\n    return beta * gamma + 17\n" * 3
    (ws / "inventory" / "calc.py").write_text(text)
    tokens = default_token_counter().count(text)
    assert tokens <= 80 < 2 * tokens
    path = str(ws / "inventory" / "calc.py")
    assert pre(ws, "Read", {"file_path": path}).decision is None
    assert [r["read_tokens"] for r in audit(ws) if r["tool"] == "Read"] == [tokens]
    assert f"read_tokens {80 - tokens}" in reason(pre(ws, "Read", {"file_path": path}))


def test_grep_is_charged_what_ripgrep_prints_in_its_output_mode(sample_ws):
    ws = governed(sample_ws, "read_bytes = 400")
    lines = "".join(f"needle number {n} in a long enough line of text\n" for n in range(40))
    (ws / "inventory" / "hay.txt").write_text(lines)
    grep = {"pattern": "needle", "path": str(ws / "inventory")}
    # Listing the matching files (the default mode) is small: allowed and charged.
    assert pre(ws, "Grep", grep).decision is None
    listed = [r["read_bytes"] for r in audit(ws) if r["tool"] == "Grep"]
    assert listed == [len(f"{ws / 'inventory' / 'hay.txt'}\n")]
    # The matching lines themselves (~2 KB) are not: a search is a read like Read.
    why = reason(pre(ws, "Grep", {**grep, "output_mode": "content", "-n": True}))
    assert why.startswith("BUDGET_EXCEEDED: Grep ") and "would cross" in why
    # head_limit bounds what Grep returns, and so what it is charged.
    assert pre(ws, "Grep", {**grep, "output_mode": "content", "head_limit": 2}).decision is None


def test_glob_is_charged_the_names_it_lists(sample_ws):
    ws = governed(sample_ws, "read_bytes = 10000")
    assert pre(ws, "Glob", {"pattern": "**/*.py", "path": str(ws)}).decision is None
    (charged,) = [r for r in audit(ws) if r["tool"] == "Glob"]
    listed = sorted(str(p) for p in ws.rglob("*.py") if ".ctxnb" not in p.parts)
    assert charged["read_bytes"] == sum(len(p) + 1 for p in listed)


def test_budget_refusals_open_the_breaker(sample_ws):
    ws = governed(sample_ws, "writes = 0", "breaker_threshold = 2")
    edit = {"file_path": str(ws / "inventory" / "models.py"), "old_string": "a", "new_string": "b"}
    for _ in range(2):  # an agent that keeps writing past its budget
        assert reason(pre(ws, "Edit", edit)).startswith("BUDGET_EXCEEDED")
    stopped = reason(pre(ws, "Edit", edit))
    assert "write_patch failed 2 times" in stopped and "circuit breaker is open" in stopped
    assert [r["error_code"] for r in audit(ws)] == ["BUDGET_EXCEEDED", "BUDGET_EXCEEDED",
                                                    "CIRCUIT_OPEN"]  # fmt: skip


def test_a_budget_with_no_session_id_blocks_the_call(sample_ws):
    ws = governed(sample_ws, "writes = 5")
    payload = json.loads((DATA / "pre-read.json").read_text())
    payload.update(cwd=str(ws), tool_input={"file_path": str(ws / "README.md")})
    payload.pop("session_id")
    result = hook_process("pre-tool-use", payload)
    assert result.exit_code == 2 and "no 'session_id'" in result.stderr


_PROBE = """
import io, json, sys
sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))
from ctxnb.cli.app import main
code = main(["hook", "pre-tool-use"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""
HEAVY = ("pandas", "pyarrow", "pydantic", "numpy", "jsonschema", "yaml", "ctxnb.store")


@pytest.mark.parametrize("tool", ["Read", "Edit"])
def test_a_budgeted_hook_loads_nothing_heavy(sample_ws, tool):
    ws = governed(sample_ws, "read_bytes = 100000\nread_tokens = 100000\nwrites = 10")
    path = str(ws / "inventory" / "models.py")
    tool_input = (
        {"file_path": path}
        if tool == "Read"
        else {"file_path": path, "old_string": "a", "new_string": "b"}  # fmt: skip
    )
    pre(ws, tool, tool_input)  # the settings and intents caches, as after the first call
    payload = json.loads((DATA / "pre-edit.json").read_text())
    payload.update(cwd=str(ws), session_id=SID, tool_name=tool, tool_input=tool_input)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(payload)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert proc.stdout == ""  # within the budget: no decision
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    heavy = [m for m in report["modules"] if m.startswith(HEAVY)]
    assert report["code"] == 0 and heavy == []
    # What a budget adds to the hook's path, and no more.
    assert "ctxnb.integrations._claude_budget" in report["modules"]
