"""Every protocol adapter reaches a workspace through one WorkspaceBackend.

The MCP server holds one, ACP's and A2A's live sessions are one, and Claude Code's Bash
(``ctxnb sandbox exec``) opens one: a tool call or a command from any of them takes the
same access layer, policy engine and recorder. These tests check the shape (no adapter
makes governed tools of its own) and the behaviour through real workspaces.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def _dispatch_calls(path: Path) -> list[int]:
    """Lines where a module calls ``<something>.dispatch(…)`` (the tools' runner)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "dispatch"
    ]


def test_no_door_and_no_agent_loop_calls_the_tools_beside_the_backend() -> None:
    # MCP, ACP, A2A, Claude Code's sandbox exec and the live agent reach the tools only
    # through Backend.call / Backend.execute; ToolsBackend (ctxnb/tools/backend.py) is
    # the one that dispatches.
    found = {
        str(p.relative_to(REPO)): lines
        for folder in ("integrations", "live")
        for p in sorted((REPO / "ctxnb" / folder).glob("*.py"))
        if (lines := _dispatch_calls(p))
    }
    assert found == {}, f"tool calls made beside the Backend: {found}"


def _session_opens(path: Path) -> list[int]:
    """Lines where a module opens a session of a workspace (``<workspace>.session(…)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "session"
    ]


def test_no_door_opens_a_session_beside_the_backend() -> None:
    # Claude Code's record of an unconfined run opened the workspace and a session of
    # its own; every door's session is a WorkspaceBackend's.
    pkg = REPO / "ctxnb" / "integrations"
    found = {
        p.name: lines
        for p in sorted(pkg.glob("*.py"))
        if p.name != "backend.py" and (lines := _session_opens(p))
    }
    assert found == {}, f"sessions opened beside the backend: {found}"


class _Recording(WorkspaceBackend):
    """A backend that records every call, and refuses ``web/`` as no workspace would:
    what the door answers must be what its backend said."""

    seen: list[tuple[str, dict[str, Any]]]

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        self.seen.append((tool, dict(args)))
        if str(args.get("path", "")).startswith("web/"):
            return {
                "ok": False,
                "error_code": "REFUSED_BY_THE_BACKEND",
                "message": "this backend serves no web/",
                "recoverable": False,
                "required_action": "",
            }
        return super().call(tool, args)


def _recording(root: Path, session_id: str) -> _Recording:
    backend = _Recording.open(root, session_id=session_id, caller="mcp")
    backend.seen = []
    return backend


def test_the_mcp_server_answers_every_tool_call_through_the_backend_it_is_handed(
    gov_ws: Path,
) -> None:
    from ctxnb.integrations._mcp_content import URI_HISTORY_PREFIX
    from ctxnb.integrations._mcp_sdk import MCPError

    backend = _recording(gov_ws, "mcp-seam")
    with McpBackend(gov_ws, backend=backend) as mcp:
        assert mcp.backend is backend and mcp.session is backend.session
        read = mcp.call_tool("read_file", {"path": "inventory/models.py"})
        assert not read.is_error and "class Item" in str(read)
        # activate resolves a file the session has not seen by reading it: through the
        # backend too, never the disk.
        assert not mcp.call_tool("activate", {"target": "README.md"}).is_error
        mcp.content.read_resource(URI_HISTORY_PREFIX + "README.md")
        refused = mcp.call_tool("read_file", {"path": "web/app.js"})
        assert refused.is_error
        assert refused.structured_content["error_code"] == "REFUSED_BY_THE_BACKEND"
        with pytest.raises(MCPError, match="this backend serves no web/"):
            mcp.content.read_resource(URI_HISTORY_PREFIX + "web/app.js")
    assert [tool for tool, _ in backend.seen] == [
        "read_file",
        "activate",
        "read_file",
        "get_file_history",
        "read_file",
        "get_file_history",
    ]
    # Closing the server closed the backend it was handed (its session saved).
    assert backend.workspace.store._state.closed  # type: ignore[attr-defined]


def test_the_mcp_server_refuses_a_backend_of_another_workspace(
    gov_ws: Path, plain_ws: Path
) -> None:
    backend = _recording(plain_ws, "other")
    try:
        with pytest.raises(ConfigError, match="pass the root of the backend's workspace"):
            McpBackend(gov_ws, backend=backend)
    finally:
        backend.close()


def test_each_door_s_way_in_is_a_backend(gov_ws: Path) -> None:
    from ctxnb.tools.backend import Backend as ToolsBackend

    assert Backend is ToolsBackend
    with McpBackend(gov_ws, session_id="door") as mcp:
        assert isinstance(mcp.backend, ToolsBackend)
    assert issubclass(LiveSession, WorkspaceBackend)  # ACP's and A2A's sessions
    # Claude Code's Bash: `ctxnb sandbox exec` and `ctxnb sandbox commit` open one.
    source = (REPO / "ctxnb" / "cli" / "govern.py").read_text(encoding="utf-8")
    assert source.count("WorkspaceBackend.open(") == 2


class _RecordingLive(LiveSession):
    """ACP's and A2A's session, recording every call the door makes of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        self.seen.append((tool, dict(args)))
        return super().call(tool, args)


def test_an_acp_session_is_the_backend_the_agent_is_handed(gov_ws: Path) -> None:
    import asyncio

    from ctxnb.integrations.acp import AcpSettings, CtxnbAcpAgent

    agent = CtxnbAcpAgent(AcpSettings(workspace=str(gov_ws)), session_type=_RecordingLive)

    async def session_with_a_mode() -> str:
        made = await agent.new_session(cwd=str(gov_ws))
        await agent.set_session_mode(mode_id="INT-INV", session_id=made.session_id)
        return str(made.session_id)

    sid = asyncio.run(session_with_a_mode())
    live = agent.sessions[sid].live
    try:
        assert isinstance(live, _RecordingLive)
        # The only active intent, selected at the start, then the mode the client chose:
        # both through the backend's call.
        assert live.seen == [("select_active_intent", {"intent_id": "INT-INV"})] * 2
    finally:
        agent.sessions[sid].close()


def test_an_a2a_context_is_the_backend_the_executor_is_handed(gov_ws: Path) -> None:
    import asyncio

    from ctxnb.integrations.a2a import A2aSettings, CtxnbA2aExecutor

    executor = CtxnbA2aExecutor(A2aSettings(workspace=str(gov_ws)), session_type=_RecordingLive)
    live, _ = asyncio.run(executor._context("a-caller", "ctx-1"))
    try:
        assert isinstance(live, _RecordingLive)
        assert live.seen == [("select_active_intent", {"intent_id": "INT-INV"})]
        # Another caller naming the same context gets a backend of its own.
        other, _ = asyncio.run(executor._context("another-caller", "ctx-1"))
        assert other is not live and isinstance(other, _RecordingLive)
        other.close()
    finally:
        live.close()
