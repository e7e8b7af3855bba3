"""Governance that remembers: lessons come back, the breaker survives a restart, and
sensitive files wait for a human. Real governed workspaces on a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.approval import CallbackApprover

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory reorder rules
    status: active
    owned_scope: ["inventory/**", "tests/**"]
  - id: INT-002
    name: Web page polish
    status: active
    owned_scope: ["web/**"]
"""


@pytest.fixture
def gov(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return git_repo


def tools_for(root: Path, sid: str = "agent-1", **kw):  # type: ignore[no-untyped-def]
    ws = Workspace.open(root)
    return ws.tools(ws.session(sid), caller="test-agent", **kw)


def test_a_refusal_comes_back_as_a_lesson_to_the_next_agent_in_scope(gov: Path) -> None:
    refuse = CallbackApprover(lambda req: False, by="ana")
    t = tools_for(gov, approver=refuse)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    out = t.dispatch("run_command", {"cmd": "rm -rf inventory/__pycache__"})
    assert out["error_code"] == "APPROVAL_REJECTED"
    agent_md = (gov / ".orchestration" / "AGENT.md").read_text()
    assert "[INT-001]" in agent_md and "refused by ana" in agent_md

    # a quality failure after an edit is a lesson about that file
    (gov / "ctxnb.toml").write_text('[governance]\nquality_commands = ["false"]\n')
    t2 = tools_for(gov, sid="agent-2")
    t2.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = t2.read_file("inventory/store.py")
    assert t2.write_file(
        "inventory/store.py", r.content + "# x\n", expected_sha256=r.sha256
    ).feedback

    # a new agent selecting the intent is told both; another intent's agent is not
    fresh = tools_for(gov, sid="agent-3")
    block = fresh.dispatch("select_active_intent", {"intent_id": "INT-001"})["result"]
    lessons = block.split("lessons:", 1)[1]
    assert "refused by ana" in lessons and "`false` failed" in lessons
    other = fresh.dispatch("select_active_intent", {"intent_id": "INT-002"})["result"]
    assert "lessons: (none)" in other


def test_the_breaker_stays_open_across_a_restart(gov: Path) -> None:
    (gov / "ctxnb.toml").write_text(
        '[governance]\nquality_commands = ["false"]\nbreaker_threshold = 2\n'
    )
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    for i in range(2):
        r = t.read_file("inventory/store.py")
        assert t.write_file("inventory/store.py", r.content + f"# {i}\n", expected_sha256=r.sha256)
    t.workspace.close()

    restarted = tools_for(gov, sid="after-restart")  # a new kernel, the same workspace
    restarted.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = restarted.read_file("inventory/store.py")
    args = {"path": "inventory/store.py", "content": "x", "expected_sha256": r.sha256}
    assert restarted.dispatch("write_file", args)["error_code"] == "CIRCUIT_OPEN"
    # the agent cannot close it by writing the state file: .ctxnb is governance's
    forged = restarted.dispatch(
        "write_file", {"path": ".ctxnb/breaker.json", "content": '{"failures": {}}'}
    )
    assert not forged["ok"]
    assert restarted.dispatch("write_file", args)["error_code"] == "CIRCUIT_OPEN"
    restarted.engine.reset_breaker()  # a human closes it
    assert tools_for(gov, sid="later").engine.failures == {}


def test_sensitive_files_wait_for_a_human(gov: Path) -> None:
    (gov / "ctxnb.toml").write_text('[policy]\nsensitive = ["inventory/models.py"]\n')
    asked: list[tuple[str, str]] = []
    answers = [False, True]

    def decide(req) -> bool:  # type: ignore[no-untyped-def]
        asked.append((req.tool, req.reason))
        return answers.pop(0)

    t = tools_for(gov, approver=CallbackApprover(decide, by="ana"))
    no = t.dispatch("read_file", {"path": "inventory/models.py"})
    assert no["error_code"] == "APPROVAL_REJECTED"
    assert no["details"]["path"] == "inventory/models.py"
    yes = t.dispatch("read_file", {"path": "inventory/models.py"})
    assert yes["ok"]
    again = t.dispatch("read_lines", {"path": "inventory/models.py", "start": 1, "end": 3})
    assert again["ok"]  # approved once for reading in this session
    assert [tool for tool, _ in asked] == ["read_file", "read_file"]
    assert "marked sensitive" in asked[0][1]
    # a file not marked sensitive is read freely
    assert t.dispatch("read_file", {"path": "inventory/store.py"})["ok"]
    assert len(asked) == 2

    # without a human to ask, a sensitive read is refused with what to do
    lone = tools_for(gov, sid="no-human")
    out = lone.dispatch("read_file", {"path": "inventory/models.py"})
    assert out["error_code"] == "SENSITIVE_NEEDS_APPROVAL"
    assert "approver" in out["required_action"]
