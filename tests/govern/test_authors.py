"""File history authors (issue #49): ``ws.history(path)`` and ``ctxnb history FILE`` say
who wrote each version: the caller and contributor of the trace record attached to the
version's transaction (or, for the Claude Code hook, the ledger record naming the
version), ``index`` or ``outside edit`` otherwise. Writes go through the real file tools
and the real hook process; the store and the ledger are read as written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _intents import ENGINE_INTENTS as INTENTS
from _paths import TESTS

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.authors import INDEX, OUTSIDE_EDIT

MODEL = "anthropic/claude-test"
REL = "inventory/models.py"
CTXNB = Path(sys.executable).with_name("ctxnb")
HOOKS = TESTS / "data" / "claude-code-hooks"
SID = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"


@pytest.fixture
def gov(sample_ws: Path) -> Path:
    init_governance(sample_ws)
    (sample_ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    with Workspace.open(sample_ws) as ws:
        ws.index()
    return sample_ws


def agent_write(root: Path, text: str, caller: str = "bob-agent") -> None:
    with Workspace.open(root) as ws:
        tools = ws.tools(ws.session("s", rules=False), caller=caller, model_id=MODEL)
        assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
        tools.read_file(REL)
        assert tools.write_file(REL, text).success


def outside_edit(root: Path, text: str) -> None:
    (root / REL).write_text(text)
    with Workspace.open(root) as ws:
        ws.index()


def history(root: Path) -> list[Any]:
    with Workspace.open(root) as ws:
        return ws.history(REL)


def cli_history(root: Path) -> str:
    proc = subprocess.run(
        [str(CTXNB), "history", REL, "-w", str(root)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_each_version_names_its_author(gov: Path) -> None:
    agent_write(gov, "X = 1\n")
    outside_edit(gov, "X = 2\n")
    versions = history(gov)
    assert [v.author for v in versions] == [INDEX, "bob-agent", OUTSIDE_EDIT]
    agent = versions[1]
    assert agent.caller == "bob-agent" and agent.source == "attached"
    assert agent.contributor == {"type": "ai", "model_id": MODEL}
    assert agent.record_id and agent.doc["content"] == "X = 1\n"
    assert versions[0].record_id is None and versions[2].contributor is None


def test_the_cli_prints_the_author_column(gov: Path) -> None:
    agent_write(gov, "X = 1\n")
    outside_edit(gov, "X = 2\n")
    lines = cli_history(gov).splitlines()
    assert lines[0].endswith("author (contributor)")
    assert lines[1].endswith("  index")
    assert lines[2].endswith(f"  bob-agent (ai ({MODEL}))")
    assert lines[3].endswith("  outside edit")


def test_the_attached_record_wins_over_a_rewritten_ledger_line(gov: Path) -> None:
    # Rewriting the ledger's copy does not change who wrote the version: the record the
    # store committed with the version is read first.
    agent_write(gov, "X = 1\n")
    ledger = gov / ".orchestration" / "agent_trace.jsonl"
    text = ledger.read_text()
    assert '"caller":"bob-agent"' in text.replace(" ", "")
    ledger.write_text(text.replace("bob-agent", "mallory"))
    assert [v.author for v in history(gov)] == [INDEX, "bob-agent"]


def test_authors_survive_the_logs_rotation(gov: Path) -> None:
    agent_write(gov, "X = 1\n")
    with Workspace.open(gov) as ws:
        ws.store.compact()
    outside_edit(gov, "X = 2\n")
    assert [v.author for v in history(gov)] == [INDEX, "bob-agent", OUTSIDE_EDIT]


def test_a_version_no_record_names_is_not_given_a_neighbours_author(gov: Path) -> None:
    # The agent's record names its own version; an outside edit in a later transaction of
    # the same file, and a deletion, are not the agent's.
    agent_write(gov, "X = 1\n")
    outside_edit(gov, "X = 1\nY = 2\n")
    (gov / REL).unlink()
    with Workspace.open(gov) as ws:
        ws.index()
    assert [v.author for v in history(gov)] == [INDEX, "bob-agent", OUTSIDE_EDIT, OUTSIDE_EDIT]


def test_a_caller_name_with_terminal_controls_is_printed_escaped(gov: Path) -> None:
    agent_write(gov, "X = 1\n", caller="evil\x1b[2Jagent")
    out = cli_history(gov)
    assert "\x1b" not in out and "evil\\u001b[2Jagent" in out


def _hook(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [str(CTXNB), "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**os.environ, "PATH": f"{CTXNB.parent}:{os.environ['PATH']}"},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout or b"{}")


def claude_code_write(gov: Path, content: str) -> None:
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(gov)],
        check=True,
        capture_output=True,
    )
    target = str(gov / REL)
    base = json.loads((HOOKS / "pre-write.json").read_text())
    pre = {**base, "cwd": str(gov), "session_id": SID, "tool_name": "Write",
           "tool_input": {"file_path": target, "content": content}}  # fmt: skip
    answer = _hook("pre-tool-use", pre)
    assert answer.get("hookSpecificOutput", {}).get("permissionDecision") != "deny", answer
    (gov / REL).write_text(content)  # what Claude Code's Write does between the hooks
    base = json.loads((HOOKS / "post-write.json").read_text())
    post = {**base, "cwd": str(gov), "session_id": SID, "tool_name": "Write",
            "tool_input": {"file_path": target, "content": content},
            "tool_response": {"filePath": target, "success": True}}  # fmt: skip
    _hook("post-tool-use", post)


def test_a_claude_code_write_is_credited_to_claude_code(gov: Path) -> None:
    content = "X = 3\n"
    claude_code_write(gov, content)
    versions = history(gov)
    assert [v.author for v in versions] == [INDEX, "claude-code"]
    # The hook stores the version before its record: the ledger names it by version_id.
    assert versions[1].source == "ledger"
    assert versions[1].doc["content"] == content and versions[1].contributor is not None
    assert "claude-code (ai" in cli_history(gov).splitlines()[2]


def test_a_rewritten_ledger_record_names_no_author(gov: Path) -> None:
    # The hook's record is found in the ledger only; a line rewritten there (its chain
    # broken) is not believed: the version is an outside edit rather than the forger's.
    claude_code_write(gov, "X = 3\n")
    claude_code_write(gov, "X = 4\n")
    ledger = gov / ".orchestration" / "agent_trace.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "claude-code" in line)
    lines[first] = lines[first].replace("claude-code", "mallory-bot")
    ledger.write_text("".join(lines))
    authors = [v.author for v in history(gov)]
    # The next line's link to the rewritten one no longer holds either, so the check
    # cannot tell which of the two was changed: neither is believed (fail closed).
    assert authors == [INDEX, OUTSIDE_EDIT, OUTSIDE_EDIT]


def test_the_history_widget_names_each_versions_author(gov: Path) -> None:
    from ctxnb.widgets.history_view import HistoryView

    # A caller is whatever the client said it is: markup and a bidi override in it are
    # shown as text, never as HTML or reordered characters.
    hostile = "eve<b>\u202eagent"
    agent_write(gov, "X = 1\n", caller=hostile)
    outside_edit(gov, "X = 2\n")
    with Workspace.open(gov) as ws:
        view = HistoryView(ws, REL)
        labels = [label for label, _ in view.from_version.options]
        html = view._repr_html_()
    assert labels[0].endswith(" · index")
    assert labels[1].endswith(f" · eve<b>\\u202eagent (ai ({MODEL}))")
    assert labels[2].endswith(" · outside edit")
    assert "<th>author</th>" in html
    assert "eve&lt;b&gt;\\u202eagent" in html
    assert "<b>\u202e" not in html and "\u202e" not in html
