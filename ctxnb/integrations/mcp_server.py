"""An MCP server over a ctxnb workspace: governed file tools, context and trace for any agent.

Every tool an MCP client calls goes through :meth:`FileTools.dispatch
<ctxnb.tools.filetools.FileTools.dispatch>`, the same path (and, in a governed
workspace, the same hook engine) as the Python API. What the server offers:

* **tools**: every file tool (``read_file``, ``write_file``, ``apply_patch`` …), the
  governance tools of a governed workspace (``select_active_intent``,
  ``run_command``) and the session tools ``activate``, ``deactivate``, ``pin`` and
  ``unpin`` (by path or object id), each with its JSON schema and MCP annotations.
  A refusal comes back as a tool error (``isError: true``) whose text is the
  structured error object ``{error_code, message, recoverable, required_action}``,
  also sent as ``structuredContent``. An unknown tool or arguments that do not match
  the schema are protocol errors (JSON-RPC ``-32602``).
* **tool discovery**: ``search_tools`` ranks every tool (outside servers' too) for a
  task; ``tools/list`` shows what the client's intent may use (see
  :mod:`~ctxnb.integrations.mcp_tools`, ``[adapters.mcp] tool_listing``).
* **resources**: ``ctxnb://context`` (the assembled context, keep-all),
  ``ctxnb://metadata-pool`` (JSON), ``ctxnb://history/{path}`` (one file's stored
  versions, JSON) and ``ctxnb://trace/tail`` (the last 50 trace records, JSON).
* **prompts**: ``intent-handshake``, which tells the agent to select an intent first
  and lists the active intents.

A destructive act (e.g. ``run_command("rm -rf build")``) asks the human through MCP
elicitation when the client supports it, and is refused with
``DESTRUCTIVE_NEEDS_APPROVAL`` otherwise.

**Both protocol revisions.** A client of 2025-11-25 does the ``initialize`` handshake; its
selected intent belongs to its connection, and approvals are ``elicitation/create``
requests. A client of 2026-07-28 sends each request on its own (no handshake, no
session): there is no connection to hold an intent, so each mutating tool takes the
intent as an ``intent_id`` argument (listed in its schema; under 2025-11-25 it is
optional and overrides the connection's selection for that one call), and an approval
comes back as an ``input_required`` result (see :mod:`~ctxnb.integrations.mcp_approval`).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "app.py").write_text("x = 1\\n")
    >>> backend = McpBackend(root, session_id="doc")
    >>> "read_file" in [t.name for t in backend.list_tools()]
    True
    >>> backend.call_tool("read_file", {"path": "app.py"}).is_error
    False
    >>> backend.call_tool("read_file", {"path": ".env"}).structured_content["error_code"]
    'PATH_DENIED'
    >>> backend.close()

Serve it with ``ctxnb mcp serve /path/to/workspace`` (stdio) or
``ctxnb mcp serve /path/to/workspace --http 8765`` (streamable HTTP on 127.0.0.1).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..govern.approval import Approver
from ._mcp_backend import McpBackend
from ._mcp_content import SERVER_NAME, URI_CONTEXT, history_uri
from ._mcp_content import URI_METADATA as URI_METADATA  # importable from here, as before
from ._mcp_content import URI_TRACE as URI_TRACE
from ._mcp_sdk import RequestStateBoundary, RequestStateSecurity, Server, anyio, types
from .mcp_approval import DenyDestructiveApprover, ElicitationApprover, is_stateless
from .mcp_http import (
    BearerTokenMiddleware,
    caller_principal,
    check_bind,
    http_app,
    is_loopback,
    transport_security,
)

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "BearerTokenMiddleware",
    "DenyDestructiveApprover",
    "ElicitationApprover",
    "McpBackend",
    "build_server",
    "check_bind",
    "history_uri",
    "http_app",
    "is_loopback",
    "serve_http",
    "serve_stdio",
    "transport_security",
]


# -- the MCP server ------------------------------------------------------------------------


def build_server(
    workspace_root: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    caller: str = "mcp",
    approver: Approver | None = None,
    elicitation_timeout: float = 300.0,
    conformance_fixtures: bool = False,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) over one workspace.

    Blocking work (tool calls, reads of the store) runs in worker threads, so the
    event loop keeps serving while a destructive call waits for a human's approval.
    The backend is reachable as ``server.ctxnb_backend`` (close it when done).

    Args:
        workspace_root: the workspace directory.
        session_id: the session to resume or create (a new id when omitted).
        caller: the caller name for the audit log and the trace.
        approver: decides destructive acts; by default MCP elicitation when the client
            supports it, else a refusal with ``DESTRUCTIVE_NEEDS_APPROVAL``. Whichever
            it is (a notebook's ``QueueApprover`` too), a call waiting on it holds no
            lock: the other clients are served meanwhile.
        elicitation_timeout: seconds to wait for the user's answer.
        conformance_fixtures: also serve the official MCP conformance suite's diagnostic
            tools, resources and prompts, logging levels, completion and subscriptions
            (:mod:`~ctxnb.integrations.mcp_fixtures`); for the suite, never for an agent.

    Example:
        >>> import anyio, tempfile
        >>> from mcp.server.stdio import stdio_server
        >>> server = build_server(tempfile.mkdtemp())
        >>> async def main():
        ...     async with stdio_server() as (read, write):
        ...         await server.run(read, write, server.create_initialization_options())
        >>> # anyio.run(main)  # serves on stdin/stdout until the client hangs up
        >>> server.ctxnb_backend.close()
    """
    backend = McpBackend(
        workspace_root,
        session_id=session_id,
        caller=caller,
        approver=approver,
        elicitation_timeout=elicitation_timeout,
    )

    fixtures = None
    if conformance_fixtures:
        from .mcp_fixtures import ConformanceFixtures

        fixtures = ConformanceFixtures()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = await anyio.to_thread.run_sync(backend.list_tools, ctx)
        return types.ListToolsResult(tools=tools + (fixtures.tools() if fixtures else []))

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if fixtures is not None and fixtures.has_tool(params.name):
            return await fixtures.call_tool(ctx, params)
        result = await anyio.to_thread.run_sync(
            backend.call_tool,
            params.name,
            dict(params.arguments or {}),
            ctx,
            params.input_responses,
            params.request_state,
        )
        if (
            params.name == "select_active_intent"
            and isinstance(result, types.CallToolResult)
            and not result.is_error
            and backend.tool_listing == "intent"
            and not is_stateless(ctx)
        ):
            # The mutating tools are usable now: tell the client to list again.
            with contextlib.suppress(Exception):
                await ctx.session.send_tool_list_changed()
        return result

    async def on_list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        extra = fixtures.resources() if fixtures else []
        return types.ListResourcesResult(resources=backend.content.list_resources() + extra)

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        extra = fixtures.templates() if fixtures else []
        return types.ListResourceTemplatesResult(
            resource_templates=backend.content.list_resource_templates() + extra
        )

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if fixtures is not None and fixtures.owns_resource(uri):
            return fixtures.read_resource(uri)
        text = await anyio.to_thread.run_sync(backend.content.read_resource, uri)
        mime = "text/plain" if uri == URI_CONTEXT else "application/json"
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        extra = fixtures.prompts() if fixtures else []
        return types.ListPromptsResult(prompts=backend.content.list_prompts() + extra)

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        if fixtures is not None and fixtures.has_prompt(params.name):
            return fixtures.get_prompt(params)
        return await anyio.to_thread.run_sync(
            backend.content.get_prompt, params.name, params.arguments
        )

    from .._version import __version__

    server: Server[Any] = Server(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "ctxnb governs this workspace's files. In a governed workspace, call "
            "select_active_intent before changing files (see the intent-handshake prompt). "
            "Refusals are structured: read error_code and required_action."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )
    if fixtures is not None:
        _serve_fixture_methods(server, fixtures)
    # A 2026-07-28 approval's state goes through the client: sealed (authenticated,
    # encrypted, bound to this very call, expiring) so it cannot be forged or replayed.
    # The key lives as long as this server (as RequestStateSecurity.ephemeral's); a
    # restart asks again.
    # The state names its caller (the token's name over HTTP): another caller sending it
    # back is refused, whatever answer it carries.
    security = RequestStateSecurity(keys=[os.urandom(32)], bind_principal=caller_principal)
    server.middleware.append(RequestStateBoundary(security, default_audience=SERVER_NAME))
    server.ctxnb_backend = backend  # type: ignore[attr-defined]
    return server


def _serve_fixture_methods(server: Server[Any], fixtures: Any) -> None:
    """Completion, logging levels and subscriptions for the conformance suite: added to
    the built server, whose capabilities follow from the methods it serves."""

    async def on_completion(
        ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        return fixtures.complete(params)

    async def on_set_logging_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        fixtures.set_level(params.level)
        return types.EmptyResult()

    async def on_subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        fixtures.subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def on_unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        fixtures.subscribed.discard(str(params.uri))
        return types.EmptyResult()

    server.add_request_handler("completion/complete", types.CompleteRequestParams, on_completion)
    # logging/setLevel is deprecated as of 2026-07-28; the 2025-11-25 requirements test it.
    server.add_request_handler(
        "logging/setLevel", types.SetLevelRequestParams, on_set_logging_level
    )
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, on_subscribe)
    server.add_request_handler(
        "resources/unsubscribe", types.UnsubscribeRequestParams, on_unsubscribe
    )


# -- transports ------------------------------------------------------------------------------


def serve_stdio(
    workspace_root: str | os.PathLike[str], *, session_id: str | None = None, caller: str = "mcp"
) -> None:
    """Serve the workspace over stdio until the client closes stdin.

    A line that is not JSON gets ``-32700``, one that is not a JSON-RPC message or is
    longer than ``[adapters.mcp] max_message_bytes`` gets ``-32600``
    (see :mod:`ctxnb.integrations.mcp_stdio`).

    Example:
        >>> # in a terminal, or as the command an MCP client starts:
        >>> # serve_stdio("/path/to/workspace")
    """
    server = build_server(workspace_root, session_id=session_id, caller=caller)
    from mcp.server.lowlevel import NotificationOptions

    from .mcp_stdio import guarded_stdio_server

    limit = server.ctxnb_backend.workspace.config.adapters.mcp.max_message_bytes  # type: ignore[attr-defined]

    async def main() -> None:
        # A malformed line gets its JSON-RPC error instead of being dropped in silence.
        async with guarded_stdio_server(max_message_bytes=limit) as (read, write):
            # tools/list changes when the client selects an intent (tool_listing="intent").
            options = server.create_initialization_options(NotificationOptions(tools_changed=True))
            await server.run(read, write, options)

    try:
        anyio.run(main)
    finally:
        server.ctxnb_backend.close()  # type: ignore[attr-defined]


def serve_http(
    workspace_root: str | os.PathLike[str],
    *,
    port: int,
    host: str = "127.0.0.1",
    token: str | Sequence[str] | None = None,
    session_id: str | None = None,
    caller: str = "mcp",
    extra_hosts: tuple[str, ...] = (),
    on_listen: Callable[[str], None] | None = None,
    conformance_fixtures: bool = False,
) -> None:
    """Serve the workspace over streamable HTTP at ``http://HOST:PORT/mcp``.

    Binds 127.0.0.1 unless told otherwise; a non-loopback host needs a bearer token
    (``token`` or ``$CTXNB_MCP_TOKEN``). Several tokens are several callers, each with
    its own sessions and approvals (see :mod:`~ctxnb.integrations.mcp_http`). The socket
    is bound and listening before ``on_listen`` is called with the endpoint's URL, so a
    client may connect at once.

    Args:
        port: the TCP port; 0 picks a free one (``on_listen`` tells which).
        on_listen: called once with ``http://HOST:PORT/mcp`` when the socket listens.
        conformance_fixtures: serve the MCP conformance suite's fixtures too
            (see :func:`build_server`).

    Raises:
        ConfigError: a non-loopback host without a token (checked before anything
            is opened or bound).
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    check_bind(host, token)
    import socket

    import uvicorn

    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.create_server((host, port), family=family, backlog=128)
    try:
        port = sock.getsockname()[1]
        server = build_server(
            workspace_root,
            session_id=session_id,
            caller=caller,
            conformance_fixtures=conformance_fixtures,
        )
        try:
            app = http_app(server, host=host, port=port, token=token, extra_hosts=extra_hosts)
            config = uvicorn.Config(app, log_level="warning", lifespan="on")
            if on_listen is not None:
                shown = f"[{host}]" if ":" in host else host
                on_listen(f"http://{shown}:{port}/mcp")
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            server.ctxnb_backend.close()  # type: ignore[attr-defined]
    finally:
        sock.close()
