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
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field

from ..errors import NotFoundError, PolicyError
from ..govern.approval import Approver
from ..redaction import redact_data, redact_text
from ..tools.schemas import ToolInfo
from ._mcp_sdk import MCPError, RequestStateBoundary, RequestStateSecurity, Server, anyio, types
from .mcp_approval import (
    APPROVAL_PENDING,
    DenyDestructiveApprover,
    ElicitationApprover,
    answers_of,
    input_required,
    is_stateless,
)
from .mcp_http import BearerTokenMiddleware, check_bind, http_app, is_loopback, transport_security
from .mcp_tools import ToolDiscovery
from .model_text import error_text, tool_text

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..session import Session
    from ..tools.filetools import FileTools
    from ..workspace import Workspace
    from .mcp_registry import McpRegistry

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

SERVER_NAME = "ctxnb"
TRACE_TAIL = 50

URI_CONTEXT = "ctxnb://context"
URI_METADATA = "ctxnb://metadata-pool"
URI_TRACE = "ctxnb://trace/tail"
URI_HISTORY_PREFIX = "ctxnb://history/"
URI_HISTORY_TEMPLATE = URI_HISTORY_PREFIX + "{path}"

PROMPT_HANDSHAKE = "intent-handshake"

# Errors found before a tool runs: the request itself is malformed, so they are
# protocol errors rather than tool results.
_PROTOCOL_ERROR_CODES = frozenset({"UNKNOWN_TOOL", "INVALID_ARGUMENTS"})
_OBJECT_ID = re.compile(r"^[0-9a-f]{64}$")

_INTENT_ARG: dict[str, Any] = {
    "type": "string",
    "description": "The intent this change belongs to (see select_active_intent). Needed "
    "under MCP 2026-07-28, where the server keeps nothing between requests; otherwise it "
    "defaults to the intent this connection selected.",
}
_STATELESS_NOTE = (
    "\n\nThis connection keeps no state between requests (MCP 2026-07-28): pass "
    'intent_id="{intent_id}" with every call that changes files.'
)


# -- the session tools ------------------------------------------------------------------------


class _TargetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str = Field(
        min_length=1,
        description="A workspace-relative file path, or an object id from the metadata pool.",
    )


_SESSION_TOOLS: dict[str, str] = {
    "activate": "Put an object's full content into the context (by path or object id). "
    "A file not yet in the session is read first.",
    "deactivate": "Take an object's content out of the context; it stays in the metadata pool.",
    "pin": "Keep an object in the context whatever the context strategy (activates it).",
    "unpin": "Let the context strategy evict an object again.",
}


# -- the backend ------------------------------------------------------------------------------


class McpBackend:
    """The workspace, session and tools behind an MCP server, with synchronous handlers.

    :func:`build_server` wraps one of these in an MCP ``Server``; tests and embedders
    may call the handlers directly. Calls are serialized: the session and the store
    see one tool call at a time, as with the Python API.

    Args:
        workspace_root: the workspace directory.
        session_id: the session to resume or create (a new id when omitted).
        caller: the caller name written to the audit log and the trace.
        approver: decides destructive acts; by default an :class:`ElicitationApprover`.
        system_prompt: the session's system prompt, if any.
        elicitation_timeout: seconds to wait for a user's approval.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "notes.md").write_text("# Notes\\n")
        >>> with McpBackend(root) as backend:
        ...     _ = backend.call_tool("activate", {"target": "notes.md"})
        ...     "# Notes" in backend.read_resource(URI_CONTEXT)
        True
    """

    def __init__(
        self,
        workspace_root: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        caller: str = "mcp",
        approver: Approver | None = None,
        system_prompt: str | None = None,
        elicitation_timeout: float = 300.0,
    ) -> None:
        from ..workspace import Workspace

        self.workspace: Workspace = Workspace.open(workspace_root)
        try:
            self.session: Session = self.workspace.session(session_id, system_prompt=system_prompt)
            self.approver: Approver = approver or ElicitationApprover(timeout=elicitation_timeout)
            self.tools: FileTools = self.workspace.tools(
                self.session, caller=caller, approver=self.approver
            )
        except BaseException:
            self.workspace.close()
            raise
        self._lock = threading.RLock()
        # client session (None for direct calls) -> its selected intent; weak keys, so a
        # closed session is forgotten.
        self._client_intents: Any = _ClientIntents()
        for name, description in _SESSION_TOOLS.items():
            self.tools.register_tool(
                ToolInfo(name=name, description=description, args=_TargetArgs),
                self._session_tool(name),
            )
        self.registry: McpRegistry | None = None
        cfg = self.workspace.config
        self.tool_listing = cfg.adapters.mcp.tool_listing
        self.discovery = ToolDiscovery(self.tools)
        if cfg.adapters.mcp.expose_registry and cfg.mcp.servers:
            # A governed proxy: the outside servers' tools, through the same tools path.
            from .mcp_registry import McpRegistry

            try:
                self.registry = McpRegistry(cfg.mcp.servers, root=self.workspace.root).connect()
                self.registry.attach(self.tools)
            except BaseException:
                self.close()
                raise

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def governed(self) -> bool:
        return (self.workspace.root / ".orchestration").is_dir()

    def close(self) -> None:
        """Save the session, disconnect outside servers and close the workspace."""
        with self._lock:
            if getattr(self, "registry", None) is not None:
                self.registry.close()  # type: ignore[union-attr]
            try:
                self.session.save()
            finally:
                self.session.close()
                self.workspace.close()

    def __enter__(self) -> McpBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _call(
        self,
        ctx: ServerRequestContext[Any] | None,
        *,
        intent: str | None = None,
        answers: dict[str, Any] | None = None,
    ) -> Iterator[None]:
        bind = getattr(self.approver, "bound", None)
        bound = (
            bind(ctx, answers)
            if bind is not None and answers
            else bind(ctx)
            if bind is not None
            else contextlib.nullcontext()
        )
        with self._lock, bound:
            engine = getattr(self.tools, "engine", None)
            if engine is None:
                yield
                return
            # The selected intent belongs to one client session (one connection over
            # stdio, one Mcp-Session-Id over HTTP), never to the whole server: a second
            # client must do its own handshake. A stateless (2026-07-28) request has no
            # session: only the intent its call names is in force, for that call.
            client = _client_of(ctx)
            stateless = is_stateless(ctx)
            kept = None if stateless else self._client_intents.get(client)
            engine.active_intent_id = intent if intent is not None else kept
            try:
                yield
            finally:
                if not stateless and intent is None:
                    self._client_intents[client] = engine.active_intent_id
                else:
                    engine.active_intent_id = kept

    # -- tools ------------------------------------------------------------------------------
    def _resolve_target(self, target: str) -> str:
        if _OBJECT_ID.match(target) and target in self.session._index_set:
            return target
        oid = self.session.find(target)
        if oid is not None:
            return oid
        # Not in the session yet: read it through the governed tools (path policy,
        # hooks, records), which adds it to the session; never read the disk here.
        out = self.tools.dispatch("read_file", {"path": target})
        if not out["ok"]:
            raise PolicyError(
                out["error_code"],
                out["message"],
                recoverable=out.get("recoverable", True),
                required_action=out.get("required_action", ""),
                details=out.get("details"),
            )
        oid = self.session.find(out["result"]["path"])
        if oid is None:
            raise NotFoundError(f"{target!r} is neither a file of this workspace nor an object id")
        return oid

    def _session_tool(self, name: str) -> Callable[..., dict[str, Any]]:
        def run(target: str) -> dict[str, Any]:
            oid = self._resolve_target(target)
            getattr(self.session, name)(oid)
            meta = self.session.metadata(oid)
            return {
                "id": oid,
                "path": meta.path,
                "active": oid in self.session.active_set,
                "pinned": oid in self.session.pinned_set,
            }

        return run

    def list_tools(self, ctx: ServerRequestContext[Any] | None = None) -> list[types.Tool]:
        """The tools this client may use now (``[adapters.mcp] tool_listing``, see
        :mod:`~ctxnb.integrations.mcp_tools`), each with its input schema and annotations."""
        out = []
        with self._lock:
            schemas = self.tools.tool_schemas("mcp")
            governed = getattr(self.tools, "engine", None) is not None
            stateless = is_stateless(ctx)
            shown = self.discovery.visible(
                (s["name"] for s in schemas),
                listing=self.tool_listing,
                governed=governed,
                # Under 2026-07-28 each change names its intent: the mutating tools are
                # usable by any request that passes one.
                intent=None if stateless else self._client_intents.get(_client_of(ctx)),
                per_call_intent=stateless,
            )
        for spec in schemas:
            if spec["name"] not in shown:
                continue
            ann = dict(spec.get("annotations") or {})
            if spec["name"] in _SESSION_TOOLS:
                # They change what the model sees, not the workspace: not read-only,
                # never destructive, and repeating one changes nothing more.
                ann.update(readOnlyHint=False, destructiveHint=False, idempotentHint=True)
            schema = dict(spec["inputSchema"])
            schema.setdefault("type", "object")
            if governed and self._takes_intent(spec["name"]):
                schema["properties"] = {
                    **schema.get("properties", {}),
                    "intent_id": _INTENT_ARG,
                }
            out.append(
                types.Tool(
                    name=spec["name"],
                    description=spec.get("description"),
                    input_schema=schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=ann.get("readOnlyHint"),
                        destructive_hint=ann.get("destructiveHint"),
                        idempotent_hint=ann.get("idempotentHint"),
                        open_world_hint=spec["name"] == "run_command",
                    ),
                )
            )
        return out

    def _takes_intent(self, name: str) -> bool:
        """Whether ``name`` takes the ``intent_id`` argument: the tools a governed
        workspace refuses without an intent."""
        info = self.tools.tool_info(name)
        return info is not None and info.mutating and not info.external

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        ctx: ServerRequestContext[Any] | None = None,
        input_responses: dict[str, Any] | None = None,
        request_state: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Run one tool call through ``dispatch``; blocking (run it in a worker thread).

        Under 2026-07-28 a destructive act the user must approve returns an
        ``input_required`` result; the client's retry brings ``input_responses`` and the
        ``request_state`` this server sealed.

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown tool, arguments that do not
                match the tool's schema, or a request state this server did not write.
        """
        args = dict(arguments or {})
        intent = None
        if "intent_id" in args and getattr(self.tools, "engine", None) is not None:
            if self._takes_intent(name):
                intent = args.pop("intent_id")
                if not isinstance(intent, str) or not intent:
                    raise MCPError(types.INVALID_PARAMS, "intent_id must be an intent's id")
        answers = answers_of(input_responses, request_state)
        with self._call(ctx, intent=intent, answers=answers):
            if intent is not None and (refusal := self._check_intent(intent)) is not None:
                out = refusal
            else:
                # Tool results are redacted by the tools; this pass also covers messages,
                # conflict details and tools registered by others, at the server's one exit.
                out = redact_data(self.tools.dispatch(name, args))
        if out.get("ok"):
            result = out.get("result")
            # The model reads the text; programs read the full JSON in structuredContent.
            text = tool_text(name, result)
            if name == "select_active_intent" and is_stateless(ctx):
                text += _STATELESS_NOTE.format(intent_id=args.get("intent_id"))
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content={"result": result},
            )
        error = {k: v for k, v in out.items() if k != "ok"}
        if error.get("error_code") in _PROTOCOL_ERROR_CODES:
            raise MCPError(types.INVALID_PARAMS, str(error.get("message")), data=error)
        if error.get("error_code") == APPROVAL_PENDING:
            return input_required(error["details"], answers)
        if error.get("error_code") == "NO_ACTIVE_INTENT" and is_stateless(ctx):
            error["required_action"] = (
                "Pass intent_id (the intent this change belongs to) with the call: under "
                "MCP 2026-07-28 the server keeps no selection between requests."
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=error_text(error))],
            structured_content=error,
            is_error=True,
        )

    def _check_intent(self, intent_id: str) -> dict[str, Any] | None:
        """The refusal of a call naming an intent that is not active, else None."""
        engine = self.tools.engine  # type: ignore[attr-defined]
        try:
            engine.intents().get(intent_id)
        except PolicyError as e:
            return {"ok": False, **redact_data(e.to_dict())}
        return None

    # -- resources ------------------------------------------------------------------------
    def list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                name="context",
                uri=URI_CONTEXT,
                description="The session's assembled context (keep-all strategy), as the "
                "model sees it.",
                mime_type="text/plain",
            ),
            types.Resource(
                name="metadata-pool",
                uri=URI_METADATA,
                description="One row per object the model knows about: path, type, size, "
                "active, pinned.",
                mime_type="application/json",
            ),
            types.Resource(
                name="trace-tail",
                uri=URI_TRACE,
                description=f"The last {TRACE_TAIL} records of .orchestration/agent_trace.jsonl "
                "(empty when the workspace is not governed).",
                mime_type="application/json",
            ),
        ]

    def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                name="file-history",
                uri_template=URI_HISTORY_TEMPLATE,
                description="The stored versions of one file (workspace-relative path), "
                "oldest first.",
                mime_type="application/json",
            )
        ]

    def read_resource(self, uri: str) -> str:
        """The text of one resource (redacted); blocking.

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown URI or a refused history read.
        """
        return redact_text(self._resource_text(uri))

    def _resource_text(self, uri: str) -> str:
        with self._lock:
            if uri == URI_CONTEXT:
                return self.session.assemble(record=False).to_text()
            if uri == URI_METADATA:
                frame = self.session.metadata_frame()
                return _dumps(json.loads(frame.to_json(orient="records")))
            if uri == URI_TRACE:
                return _dumps(self.trace_tail())
            if uri.startswith(URI_HISTORY_PREFIX):
                path = unquote(uri[len(URI_HISTORY_PREFIX) :])
                out = self.tools.dispatch("get_file_history", {"path": path})
                if not out.get("ok"):
                    error = {k: v for k, v in out.items() if k != "ok"}
                    raise MCPError(types.INVALID_PARAMS, str(error.get("message")), data=error)
                return _dumps(out["result"])
        raise MCPError(
            types.INVALID_PARAMS,
            f"unknown resource {uri!r}; use {URI_CONTEXT}, {URI_METADATA}, {URI_TRACE} or "
            f"{URI_HISTORY_TEMPLATE}",
        )

    def trace_tail(self, n: int = TRACE_TAIL) -> list[dict[str, Any]]:
        """The last ``n`` trace records; empty when the workspace is not governed."""
        path = self.workspace.root / ".orchestration" / "agent_trace.jsonl"
        if not path.is_file():
            return []
        from ..govern.ledger import TraceLedger

        return TraceLedger(path).tail(n)

    # -- prompts ------------------------------------------------------------------------
    def list_prompts(self) -> list[types.Prompt]:
        return [
            types.Prompt(
                name=PROMPT_HANDSHAKE,
                description="Start governed work: select an intent before changing files.",
                arguments=[
                    types.PromptArgument(
                        name="intent_id",
                        description="The intent to work under (one of the active intents).",
                        required=False,
                    )
                ],
            )
        ]

    def handshake_text(self, intent_id: str | None = None) -> str:
        """The text of the ``intent-handshake`` prompt."""
        lines = []
        if intent_id:
            lines.append(
                "Before anything else, call the tool select_active_intent with "
                f'intent_id="{intent_id}".'
            )
        else:
            lines.append(
                "Before anything else, call the tool select_active_intent with the id of the "
                "intent your task belongs to."
            )
        lines += [
            "It returns an <intent_context> block: the intent's owned scope, constraints and "
            "acceptance criteria. Change only files inside that scope; a change outside it is "
            "refused with SCOPE_VIOLATION, and a change without a selected intent with "
            "NO_ACTIVE_INTENT.",
            "Read a file before you edit it and pass the sha256 from the read as "
            "expected_sha256, so that a stale edit is refused rather than applied.",
        ]
        path = self.workspace.root / ".orchestration" / "active_intents.yaml"
        if path.is_file():
            from ..govern.intents import load_intents

            try:
                intents = load_intents(path).active()
            except Exception as e:  # a broken file must not hide the rest of the prompt
                lines.append(f"(active_intents.yaml could not be read: {e})")
            else:
                if intents:
                    lines.append("Active intents:")
                    for it in intents:
                        scope = ", ".join(it.owned_scope) or "(nothing)"
                        lines.append(f"- {it.id}: {it.name} (owns {scope})")
                else:
                    lines.append("There are no active intents; ask the user to add one.")
        else:
            lines.append("This workspace is not governed: no intent is needed to change files.")
        return "\n".join(lines)

    def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != PROMPT_HANDSHAKE:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {name!r}; use {PROMPT_HANDSHAKE!r}"
            )
        text = redact_text(self.handshake_text((arguments or {}).get("intent_id")))
        return types.GetPromptResult(
            description="Select an intent before changing files.",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )


def _client_of(ctx: ServerRequestContext[Any] | None) -> Any:
    """The object that lives as long as one client's connection (the SDK makes a new
    ``ServerSession`` per request and keeps the connection in it)."""
    if ctx is None:
        return None
    session = ctx.session
    return getattr(session, "connection", None) or getattr(session, "_connection", session)


class _ClientIntents:
    """Intent ids per client session object, forgotten when the session is collected."""

    def __init__(self) -> None:
        self._weak: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
        self._direct: str | None = None

    def get(self, client: Any) -> str | None:
        return self._direct if client is None else self._weak.get(client)

    def __setitem__(self, client: Any, intent_id: str | None) -> None:
        if client is None:
            self._direct = intent_id
        else:
            self._weak[client] = intent_id


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# -- the MCP server ------------------------------------------------------------------------


def build_server(
    workspace_root: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    caller: str = "mcp",
    approver: Approver | None = None,
    elicitation_timeout: float = 300.0,
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
            supports it, else a refusal with ``DESTRUCTIVE_NEEDS_APPROVAL``.
        elicitation_timeout: seconds to wait for the user's answer.

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

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await anyio.to_thread.run_sync(backend.list_tools, ctx))

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
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
        return types.ListResourcesResult(resources=backend.list_resources())

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=backend.list_resource_templates()
        )

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = await anyio.to_thread.run_sync(backend.read_resource, uri)
        mime = "text/plain" if uri == URI_CONTEXT else "application/json"
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=backend.list_prompts())

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await anyio.to_thread.run_sync(backend.get_prompt, params.name, params.arguments)

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
    # A 2026-07-28 approval's state goes through the client: sealed (authenticated,
    # encrypted, bound to this very call, expiring) so it cannot be forged or replayed.
    # The key lives as long as this server; a restart asks again.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME)
    )
    server.ctxnb_backend = backend  # type: ignore[attr-defined]
    return server


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
    token: str | None = None,
    session_id: str | None = None,
    caller: str = "mcp",
    extra_hosts: tuple[str, ...] = (),
    on_listen: Callable[[str], None] | None = None,
) -> None:
    """Serve the workspace over streamable HTTP at ``http://HOST:PORT/mcp``.

    Binds 127.0.0.1 unless told otherwise; a non-loopback host needs a bearer token
    (``token`` or ``$CTXNB_MCP_TOKEN``). The socket is bound and listening before
    ``on_listen`` is called with the endpoint's URL, so a client may connect at once.

    Args:
        port: the TCP port; 0 picks a free one (``on_listen`` tells which).
        on_listen: called once with ``http://HOST:PORT/mcp`` when the socket listens.

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
        server = build_server(workspace_root, session_id=session_id, caller=caller)
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


def history_uri(path: str | Path) -> str:
    """The ``ctxnb://history/…`` URI of a workspace-relative path.

    Example:
        >>> history_uri("inventory/models.py")
        'ctxnb://history/inventory/models.py'
    """
    return URI_HISTORY_PREFIX + quote(str(path).replace(os.sep, "/"), safe="/")
