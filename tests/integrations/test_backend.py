"""Every protocol adapter reaches a workspace through one WorkspaceBackend.

The MCP server holds one, ACP's and A2A's live sessions are one, and Claude Code's Bash
(``ctxnb sandbox exec``) opens one: a tool call or a command from any of them takes the
same access layer, policy engine and recorder. These tests check the shape (no adapter
makes governed tools of its own) and the behaviour through real workspaces.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from _paths import REPO

from ctxnb.errors import ConfigError, NotFoundError
from ctxnb.govern.approval import CallbackApprover
from ctxnb.integrations.backend import Backend, WorkspaceBackend
from ctxnb.integrations.live_agent import LiveAgentSettings, LiveSession
from ctxnb.integrations.mcp_server import McpBackend


def _tools_calls(path: Path) -> list[int]:
    """Lines where a module makes file tools (``<workspace>.tools(session, …)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "tools"
        and node.args
    ]


def test_no_adapter_makes_governed_tools_of_its_own() -> None:
    # A second way in is the bug: only the backend opens a session's tools for a client.
    pkg = REPO / "ctxnb" / "integrations"
    found = {
        p.name: lines
        for p in sorted(pkg.glob("*.py"))
        if p.name != "backend.py" and (lines := _tools_calls(p))
    }
    assert found == {}, f"adapters making their own tools: {found}"
    govern_cli = REPO / "ctxnb" / "cli" / "govern.py"
    assert _tools_calls(govern_cli) == [], "ctxnb sandbox exec/commit open a WorkspaceBackend"


def test_the_mcp_server_holds_a_backend_and_serialises_on_its_lock(gov_ws: Path) -> None:
    with McpBackend(gov_ws, session_id="mcp-b") as mcp:
        assert isinstance(mcp.backend, WorkspaceBackend)
        assert isinstance(mcp.backend, Backend)
        assert mcp.tools is mcp.backend.tools and mcp.session is mcp.backend.session
        assert mcp._lock is mcp.backend.lock
        assert mcp.governed
        out = mcp.call_tool("read_file", {"path": "inventory/models.py"})
        assert "class Item" in str(out)
    # Closed with the session saved: a new backend resumes it.
    with WorkspaceBackend.open(gov_ws, session_id="mcp-b") as again:
        assert again.session.find("inventory/models.py") is not None


def test_a_live_session_is_a_backend_and_its_commands_take_the_one_path(gov_ws: Path) -> None:
    live = LiveSession.start(
        gov_ws,
        LiveAgentSettings(intent="INT-INV"),
        caller="acp",
        approver=CallbackApprover(lambda req: False, by="test"),
    )
    try:
        assert isinstance(live, WorkspaceBackend) and isinstance(live, Backend)
        ran = live.execute("echo made > inventory/new.txt; echo out > web/new.txt", shell=True)
        assert ran["ok"], ran
        effects = ran["result"]["effects"]
        assert [c["path"] for c in effects["changed"]] == ["inventory/new.txt"]
        assert [d["path"] for d in effects["dropped"]] == ["web/new.txt"]
        assert (gov_ws / "inventory" / "new.txt").read_text() == "made\n"
        assert not (gov_ws / "web" / "new.txt").exists()
        # Through the same door as any call: a denied path is refused, nothing read.
        denied = live.call("read_file", {"path": ".env"})
        assert not denied["ok"] and denied["error_code"] == "PATH_DENIED"
    finally:
        live.close()


def test_a_live_session_refuses_an_intent_the_workspace_refuses(gov_ws: Path) -> None:
    with pytest.raises(ConfigError, match="INT-OLD"):
        LiveSession.start(
            gov_ws,
            LiveAgentSettings(intent="INT-OLD"),
            caller="a2a",
            approver=CallbackApprover(lambda req: False, by="test"),
        )


def test_a_failed_open_leaves_nothing_open(plain_ws: Path) -> None:
    opened = []

    def prepare(ws: object) -> None:
        opened.append(ws)

    with WorkspaceBackend.open(plain_ws, session_id="s1") as b:
        b.session.record_toolcall("ls", {}, "x")
    # "s1" names a session; its chat is another kind of object: asking for it as a
    # session fails after the workspace was opened, and the store is closed again.
    chat_id = b.session.chat_id
    with pytest.raises(NotFoundError, match="not a session"):
        WorkspaceBackend.open(plain_ws, session_id=chat_id, prepare=prepare)
    assert len(opened) == 1 and opened[0].store._state.closed  # type: ignore[attr-defined]


def test_a_live_session_with_a_model_opens_in_a_workspace_without_governance(
    plain_ws: Path,
) -> None:
    # The model names the contributor of governed changes; without governance there is
    # none to name, and the session opens all the same.
    live = LiveSession.start(
        plain_ws,
        LiveAgentSettings(model="openai/gpt-4o-mini"),
        caller="acp",
        approver=CallbackApprover(lambda req: False, by="test"),
    )
    try:
        assert not live.governed
        assert live.call("read_file", {"path": "README.md"})["ok"]
    finally:
        live.close()
