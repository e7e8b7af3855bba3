"""The backend of ctxnb's MCP server: the workspace, its session and tools, and one call.

:class:`McpBackend` holds what a server needs (the workspace, a session, the governed
tools, the approver, the outside servers' registry) and answers with synchronous
handlers: :func:`~ctxnb.integrations.mcp_server.build_server` runs them in worker
threads. It keeps each client's selected intent (2025-11-25) or takes the intent a
stateless request names (2026-07-28).
"""

from __future__ import annotations

import contextlib
import os
import re
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, NotFoundError, PolicyError
from ..govern.approval import ApprovalRequest, Approver, Decision
from ..redaction.redactor import redact_data
from ..tools.schemas import ToolInfo
from ._mcp_content import McpContent
from ._mcp_sdk import MCPError, types
from .mcp_approval import (
    APPROVAL_PENDING,
    ElicitationApprover,
    answers_of,
    input_required,
    is_stateless,
)
from .mcp_tools import ToolDiscovery
from .model_text import error_text, tool_text

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..session.core import Session
    from ..tools.filetools import FileTools
    from ..workspace import Workspace
    from .backend import WorkspaceBackend
    from .mcp_registry import McpRegistry

__all__ = ["McpBackend"]

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


class _Unlocked:
    """The approver a backend's engine asks: ``inner``, asked with the backend's lock let
    go (``released``), so that a call waiting on a human blocks no other client. Every
    other attribute is ``inner``'s (an ApprovalPanel over the engine finds its queue)."""

    def __init__(
        self, inner: Approver, released: Callable[[], contextlib.AbstractContextManager[Any]]
    ) -> None:
        self.inner = inner
        self._released = released

    def request(self, req: ApprovalRequest) -> Decision:
        with self._released():
            return self.inner.request(req)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


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
        backend: an open backend of the workspace to serve instead of opening one (a
            seam: an embedder's session, a backend that records its calls); every tool
            call the server answers is its :meth:`~WorkspaceBackend.call`. Its tools ask
            the approver it was opened with (``approver`` only binds elicitation to the
            client's request), and :meth:`close` closes it.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "notes.md").write_text("# Notes\\n")
        >>> from ctxnb.integrations.mcp_server import URI_CONTEXT
        >>> with McpBackend(root) as backend:
        ...     _ = backend.call_tool("activate", {"target": "notes.md"})
        ...     "# Notes" in backend.content.read_resource(URI_CONTEXT)
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
        backend: WorkspaceBackend | None = None,
    ) -> None:
        from .backend import WorkspaceBackend

        if backend is not None and backend.root != Path(workspace_root).resolve():
            raise ConfigError(
                f"the backend serves {str(backend.root)!r}, not {os.fspath(workspace_root)!r}: "
                "pass the root of the backend's workspace"
            )
        self.approver: Approver = approver or ElicitationApprover(timeout=elicitation_timeout)
        asked = self.approver
        if not isinstance(asked, ElicitationApprover):
            # Any other approver (a notebook's queue, a terminal) waits on its human with
            # the lock let go, as elicitation does: the other clients are served meanwhile.
            asked = _Unlocked(asked, self._released)
        # The one way in (ctxnb.integrations.backend); MCP adds resources, the listing
        # and per-client intents around it.
        self.backend = backend or WorkspaceBackend.open(
            workspace_root,
            session_id=session_id,
            caller=caller,
            approver=asked,
            system_prompt=system_prompt,
        )
        self.workspace: Workspace = self.backend.workspace
        self.session: Session = self.backend.session
        self.tools: FileTools = self.backend.tools
        self._lock = self.backend.lock
        #: The server's resources and prompts (:class:`McpContent`).
        self.content = McpContent(self.backend)
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
                self.registry = McpRegistry(
                    cfg.mcp.servers,
                    root=self.workspace.root,
                    sandbox=cfg.sandbox,
                    deny=cfg.policy.deny,
                ).connect()
                self.registry.attach(self.tools)
            except BaseException:
                self.close()
                raise

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def governed(self) -> bool:
        return self.backend.governed

    def close(self) -> None:
        """Save the session, disconnect outside servers and close the workspace."""
        with self._lock:
            if getattr(self, "registry", None) is not None:
                self.registry.close()  # type: ignore[union-attr]
            self.backend.close()

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
        bound: contextlib.AbstractContextManager[Any]
        bind = getattr(self.approver, "bound", None)
        if isinstance(self.approver, ElicitationApprover):
            bound = self.approver.bound(ctx, answers, released=self._released)
        elif bind is not None:
            bound = bind(ctx, answers) if answers else bind(ctx)
        else:
            bound = contextlib.nullcontext()
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

    @contextlib.contextmanager
    def _released(self) -> Iterator[None]:
        """Let go of the lock while a call waits for its user's approval, so that other
        clients are served meanwhile; take it back, and the call's intent, after.

        Safe because nothing of the waiting call is committed yet: its command's changes
        are held in the sandbox, and the commit refuses if another call changed the same
        files in the meantime."""
        engine = getattr(self.tools, "engine", None)
        intent = engine.active_intent_id if engine is not None else None
        depth = 0
        while True:  # an RLock: release every level this thread holds
            try:
                self._lock.release()
            except RuntimeError:
                break
            depth += 1
        try:
            yield
        finally:
            for _ in range(depth):
                self._lock.acquire()
            if engine is not None:
                engine.active_intent_id = intent

    # -- tools ------------------------------------------------------------------------------
    def _resolve_target(self, target: str) -> str:
        if _OBJECT_ID.match(target) and self.session.in_index(target):
            return target
        oid = self.session.find(target)
        if oid is not None:
            return oid
        # Not in the session yet: read it through the governed tools (path policy,
        # hooks, records), which adds it to the session; never read the disk here.
        out = self.backend.call("read_file", {"path": target})
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
        if info is None or not info.mutating:
            return False
        if not info.external:
            return True
        # A proxied tool is governed like ctxnb's own, so it takes the intent too, unless
        # its own schema has an argument of that name: then the argument is its server's.
        props = info.args.model_json_schema().get("properties") or {}
        return "intent_id" not in props

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
                out = redact_data(self.backend.call(name, args))
        if out.get("ok"):
            result = out.get("result")
            # The model reads the text; programs read the full JSON in structuredContent.
            text = tool_text(name, result)
            if name == "select_active_intent" and is_stateless(ctx):
                text += _STATELESS_NOTE.format(intent_id=args.get("intent_id"))
            structured: dict[str, Any] = {"result": result}
            if "budget_remaining" in out:  # the session's [budget], after this call
                structured["budget_remaining"] = out["budget_remaining"]
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=structured,
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
        from ..govern.engine import engine_of

        engine = engine_of(self.tools)
        try:
            engine.intents().get(intent_id)
        except PolicyError as e:
            return {"ok": False, **e.to_dict()}  # to_dict redacts
        return None


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
