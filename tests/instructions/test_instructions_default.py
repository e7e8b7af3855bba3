"""Rules are on by default wherever a session is made (issue #28, point 1): the root
AGENTS.md in every context, linked docs on user turns and tool queries, nested rules on
touch; ``rules=False`` turns it off."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.instructions import rules_status, tracker_for
from ctxnb.integrations.mcp_server import URI_CONTEXT, McpBackend
from ctxnb.strategies.builtin import TokenBudgetLRU

ROOT_RULE = "Always run the test suite with make check."
NESTED_RULE = "No network calls inside pkg."
LINKED = "Fixtures live in tests/data and are generated."


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Lexical matching only: the test is about when rules load, not about the dense model.
    monkeypatch.setenv("CTXNB_EMBEDDER", "none")
    r = tmp_path / "ws"
    (r / "docs").mkdir(parents=True)
    (r / "pkg").mkdir()
    (r / "AGENTS.md").write_text(
        f"{ROOT_RULE}\nSee the [fixtures guide](docs/fixtures.md) for test fixtures.\n"
    )
    (r / "docs" / "fixtures.md").write_text(f"# Fixtures\n{LINKED}\n")
    (r / "pkg" / "AGENTS.md").write_text(f"{NESTED_RULE}\n")
    (r / "pkg" / "x.py").write_text("x = 1\n")
    (r / "big.txt").write_text("filler line\n" * 4000)
    return r


def test_a_default_session_shows_the_root_agents_md(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("s")
    text = session.assemble().to_text()
    assert ROOT_RULE in text
    assert NESTED_RULE not in text and LINKED not in text  # tiers 2 and 3 wait
    assert rules_status(session)["path"].tolist() == ["AGENTS.md"]


def test_the_root_rules_survive_a_tight_budget(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("s")
    session.add_path("big.txt")  # far more than the budget below
    ctx = session.assemble(strategy=TokenBudgetLRU(), budget=300)
    assert ROOT_RULE in ctx.to_text()
    assert "filler line" not in ctx.to_text()


def test_rules_false_turns_it_off(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("bare", rules=False)
    tools = ws.tools(session)  # the tools do not attach what the session turned off
    tools.read_file("pkg/x.py")
    session.add_turn("user", "where do the test fixtures live?")
    assert tracker_for(session) is None
    text = session.assemble().to_text()
    assert ROOT_RULE not in text and NESTED_RULE not in text and LINKED not in text


def test_a_user_turn_loads_linked_docs(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("s")
    session.add_turn("user", "where do the test fixtures live?")
    assert LINKED in session.assemble().to_text()
    row = rules_status(session).set_index("path").loc["docs/fixtures.md"]
    assert row["tier"] == 2 and row["load_reason"] == "link_match"


def test_a_search_query_loads_linked_docs(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("s")
    ws.tools(session).search("fixtures guide")
    assert LINKED in session.assemble().to_text()


def test_touching_a_subtree_loads_its_rules(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("s")
    ws.tools(session).read_file("pkg/x.py")
    assert NESTED_RULE in session.assemble().to_text()
    row = rules_status(session).set_index("path").loc["pkg/AGENTS.md"]
    assert row["tier"] == 3


def test_resuming_keeps_one_tracker_and_the_root_rules(root: Path) -> None:
    ws = Workspace.open(root)
    session = ws.session("s")
    session.save()
    again = Workspace.open(root).session("s")
    assert ROOT_RULE in again.assemble().to_text()
    assert rules_status(again)["path"].tolist() == ["AGENTS.md"]


def test_the_mcp_server_context_has_the_root_rules(root: Path) -> None:
    with McpBackend(root) as backend:
        assert ROOT_RULE in backend.content.read_resource(URI_CONTEXT)
        backend.call_tool("read_file", {"path": "pkg/x.py"})
        assert NESTED_RULE in backend.content.read_resource(URI_CONTEXT)
