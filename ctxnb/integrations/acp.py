"""ctxnb's live agent as an ACP (Agent Client Protocol) agent over stdio.

``ctxnb acp serve [WORKSPACE]`` lets an ACP client (Zed, or any client of the
``agent-client-protocol`` SDK) drive ctxnb's live agent: mini-swe-agent's loop with
ctxnb's context (the session assembled under a strategy) and governed commands.

* ``initialize``: ctxnb's name and version; MCP servers over stdio and HTTP accepted.
* ``session/new``: a ctxnb session in the workspace (WORKSPACE, else the client's
  ``cwd``). MCP servers sent by the client are merged with ``[mcp.servers]`` from the
  config (the config's entry wins on a name clash) and attached through the governed
  registry (:class:`~ctxnb.integrations.mcp_registry.McpRegistry`). In a governed
  workspace each active intent is a session *mode*; the mode in force is the selected
  intent (``--intent``, ``[adapters.acp] intent``, else the only active intent, else
  ``no-intent`` in which nothing may change).
* ``session/prompt``: the agent works on the prompt; the client sees the model's text
  (``agent_message_chunk``), each command as a tool call going ``in_progress`` then
  ``completed`` or ``failed``, with its output and, for every file it changed, a diff.
* ``session/request_permission``: a destructive command asks the client's user (allow
  once / reject); the decision is ctxnb's approval decision, written to the trace.
* ``session/cancel``: the run stops before its next model call or command; the prompt
  ends with ``stopReason: cancelled``.

Everything sent to the client passes :func:`~ctxnb.redaction.redactor.redact_text` first.

Example:
    >>> settings = AcpSettings(model="openai/gpt-4o-mini", strategy="observation-masking:3")
    >>> settings.context_strategy()
    ObservationMasking(keep_last=3)
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .._util.text import visible
from ..errors import ConfigError, CtxnbError, MissingDependencyError
from ..govern.approval import (
    Answer,
    ApprovalRequest,
    Decision,
    approval_question,
    invalid_answer,
    read_answer,
)
from ..redaction.redactor import redact_text
from .live_agent import LiveAgentSettings, LiveSession, LoopBridge, is_submit

try:
    import acp
    from acp import schema as acp_schema
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "ctxnb's ACP agent (`ctxnb acp serve`, ctxnb.integrations.acp) needs the "
        "Agent Client Protocol SDK (the acp package), which is not installed; install "
        "it with `pip install 'ctxnb[acp]'`"
    ) from e

if TYPE_CHECKING:
    from ..tools.filetools import FileTools
    from .mcp_registry import McpRegistry

__all__ = ["AcpSettings", "CtxnbAcpAgent", "load_adapter", "serve_acp"]

log = logging.getLogger(__name__)

NO_INTENT = "no-intent"
ALLOW, REJECT = "allow-once", "reject-once"


@dataclass(frozen=True)
class AcpSettings(LiveAgentSettings):
    """The live agent's settings for ACP: ``[adapters.acp]`` (see
    :class:`~ctxnb.integrations.live_agent.LiveAgentSettings`)."""

    section: ClassVar[str] = "acp"


# -- the bridge from the agent's worker thread to the client ----------------------------------


class _Bridge(LoopBridge):
    """Calls into the ACP connection from worker threads, in order, with a deadline."""

    conn: Any = None

    def update(self, session_id: str, update: Any) -> None:
        self.call(lambda: self.conn.session_update(session_id=session_id, update=update))


class _PermissionApprover:
    """ctxnb's approval of a destructive act, asked as ACP ``session/request_permission``."""

    def __init__(self, bridge: _Bridge, session_id: str, timeout: float) -> None:
        self.bridge = bridge
        self.session_id = session_id
        self.timeout = timeout
        self.tool_call_id: str | None = None

    def request(self, req: ApprovalRequest) -> Decision:
        # The question every door asks: the act, why, and a command's whole diff; past
        # its bound it raises DIFF_TOO_LONG and nobody is asked.
        question = approval_question(req)
        title = visible(redact_text(req.summary()))
        options = [
            acp_schema.PermissionOption(option_id=ALLOW, name="Allow once", kind="allow_once"),
            acp_schema.PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
        ]
        call = acp_schema.ToolCallUpdate(
            tool_call_id=self.tool_call_id or f"approval-{req.id}",
            title=title,
            kind="execute",
            status="pending",
            content=[acp.tool_content(acp.text_block(question))],
            # The agent's words a client may show beside the question, escaped as in it.
            raw_input={
                "command": visible(redact_text(str(req.args.get("cmd", "")))),
                "reason": visible(redact_text(req.reason)),
            },
        )
        try:
            answer = self.bridge.call(
                lambda: self.bridge.conn.request_permission(
                    session_id=self.session_id, tool_call=call, options=options
                ),
                timeout=self.timeout,
            )
        except TimeoutError:
            return Decision(False, by="timeout", note=f"no answer within {self.timeout:g}s",
                            request_id=req.id)  # fmt: skip
        except Exception as e:  # the client failed the request: no approval
            return Decision(False, by="acp-client", note=f"permission request failed: {e}",
                            request_id=req.id)  # fmt: skip
        outcome = answer.outcome
        chosen = None if outcome.outcome == "cancelled" else getattr(outcome, "option_id", "")
        read = read_answer("acp", chosen)
        if read is Answer.INVALID:
            raise invalid_answer(req, "ACP", f"one of the offered options ({ALLOW}, {REJECT})")
        note = "cancelled" if chosen is None else str(chosen)
        return Decision(read is Answer.APPROVE, by="acp-client-user", note=note, request_id=req.id)


class _Run:
    """One prompt's run: streams its events to the client and can be cancelled."""

    def __init__(self, owner: _AcpSession) -> None:
        self.owner = owner
        self.stop = threading.Event()
        self._ids = itertools.count(1)

    def cancelled(self) -> bool:
        return self.stop.is_set()

    def message(self, text: str) -> None:
        self.owner.send(acp.update_agent_message_text(redact_text(text)))

    def command_started(self, command: str) -> str | None:
        if is_submit(command):
            return None
        call_id = f"cmd-{next(self._ids)}"
        self.owner.approver.tool_call_id = call_id
        shown = redact_text(command)
        self.owner.send(
            acp.start_tool_call(
                call_id, shown, kind="execute", status="in_progress", raw_input={"command": shown}
            )  # fmt: skip
        )
        return call_id

    def command_finished(self, handle: Any, command: str, answer: dict[str, Any]) -> None:
        if handle is None:
            return
        content: list[Any] = []
        locations: list[Any] = []
        if answer.get("ok"):
            res = answer["result"]
            out = (res.get("stdout") or "") + (res.get("stderr") or "")
            failed = res.get("returncode") != 0 or bool(res.get("timed_out"))
            for change in (res.get("effects") or {}).get("changed", []):
                diff = self.owner.diff(str(change["path"]))
                if diff is not None:
                    content.append(diff)
                    locations.append(acp_schema.ToolCallLocation(path=diff.path))
        else:
            out = f"{answer.get('error_code')}: {answer.get('message')}"
            failed = True
        if out:
            content.insert(0, acp.tool_content(acp.text_block(redact_text(out))))
        self.owner.send(
            acp.update_tool_call(
                str(handle),
                status="failed" if failed else "completed",
                kind="edit" if locations else "execute",
                content=content or None,
                locations=locations or None,
            )
        )


@dataclass
class _AcpSession:
    bridge: _Bridge
    live: LiveSession
    approver: _PermissionApprover
    registry: McpRegistry | None = None
    run: _Run | None = None

    @property
    def id(self) -> str:
        return self.live.id

    @property
    def tools(self) -> FileTools:
        return self.live.tools

    def send(self, update: Any) -> None:
        self.bridge.update(self.id, update)

    def diff(self, rel: str) -> Any:
        """The last change to a file as an ACP diff (redacted), from the store's versions."""
        change = self.live.last_change(rel)
        if change is None:
            return None
        path, old, new = change
        return acp.tool_diff_content(path, new, old)

    def close(self) -> None:
        if self.registry is not None:
            self.registry.close()
        self.live.close()


# -- the agent --------------------------------------------------------------------------------


class CtxnbAcpAgent:
    """The ACP agent: one ctxnb session per ACP session, the live agent per prompt.

    Args:
        settings: the model, strategy and limits (see :class:`AcpSettings`).
        session_type: the backend each ACP session opens (a seam: a subclass that
            records or answers its calls); every tool call and command of the session
            is its :meth:`~ctxnb.integrations.backend.WorkspaceBackend.call` or
            :meth:`~ctxnb.integrations.backend.WorkspaceBackend.execute`.
    """

    def __init__(
        self, settings: AcpSettings, *, session_type: type[LiveSession] = LiveSession
    ) -> None:
        self.settings = settings
        self.session_type = session_type
        self.bridge = _Bridge()
        self.sessions: dict[str, _AcpSession] = {}

    def on_connect(self, conn: Any) -> None:
        self.bridge.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        from .._version import __version__

        self.bridge.loop = asyncio.get_running_loop()
        return acp.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=acp_schema.AgentCapabilities(
                load_session=False,
                prompt_capabilities=acp_schema.PromptCapabilities(embedded_context=True),
                mcp_capabilities=acp_schema.McpCapabilities(http=True),
            ),
            agent_info=acp_schema.Implementation(name="ctxnb", title="ctxnb", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> Any:
        self.bridge.loop = asyncio.get_running_loop()
        try:
            state = await asyncio.to_thread(self._open_session, cwd, list(mcp_servers or []))
        except CtxnbError as e:  # a bad workspace, intent or MCP server: say which
            raise acp.RequestError.invalid_params({"message": str(e)}) from e
        self.sessions[state.id] = state
        attached = sorted(state.registry.tools) if state.registry is not None else []
        return acp.NewSessionResponse(
            session_id=state.id,
            modes=self._modes(state),
            # Which outside tools the session's governed tools now include, and what
            # runs isolated: the agent loop, each outside MCP server.
            field_meta={"ctxnb": {"mcp_tools": attached, "sandboxStatus": self._status(state)}},
        )

    def _status(self, state: _AcpSession) -> dict[str, Any]:
        """``sandboxStatus``: the agent loop's (its last run's pid, once one ran) and each
        outside MCP server's."""
        agent = state.live.last_sandbox_status or self.settings.sandbox_status()
        servers = state.registry.sandbox_status() if state.registry is not None else {}
        return {"agent": agent, "mcp_servers": servers}

    def _open_session(self, cwd: str, client_servers: list[Any]) -> _AcpSession:
        approver = _PermissionApprover(self.bridge, "", self.settings.permission_timeout)
        live = self.session_type.start(
            Path(self.settings.workspace or cwd), self.settings, caller="acp", approver=approver
        )
        approver.session_id = live.id
        state = _AcpSession(self.bridge, live, approver)
        try:
            servers = merge_mcp_servers(live.workspace.config.mcp.servers, client_servers)
            if servers:
                from .mcp_registry import McpRegistry

                cfg = live.workspace.config
                state.registry = McpRegistry(
                    servers, root=live.workspace.root, sandbox=cfg.sandbox, deny=cfg.policy.deny
                ).connect()
                state.registry.attach(live.tools)
            return state
        except BaseException:
            live.workspace.close()
            raise

    def _modes(self, state: _AcpSession) -> Any:
        engine = getattr(state.tools, "engine", None)
        if engine is None:
            return None  # not governed: no intents to choose from
        from ..govern.intents import load_intents

        path = state.live.workspace.root / ".orchestration" / "active_intents.yaml"
        intents = load_intents(path).active() if path.is_file() else []
        modes = [acp_schema.SessionMode(id=NO_INTENT, name="No intent (read-only)")]
        modes += [
            acp_schema.SessionMode(
                id=i.id, name=f"{i.id}: {i.name}", description="owns " + ", ".join(i.owned_scope)
            )  # fmt: skip
            for i in intents
        ]
        current = engine.active_intent_id or NO_INTENT
        return acp_schema.SessionModeState(current_mode_id=current, available_modes=modes)

    async def set_session_mode(self, mode_id: str, session_id: str, **kwargs: Any) -> Any:
        state = self._state(session_id)
        if mode_id == NO_INTENT:
            engine = getattr(state.tools, "engine", None)
            if engine is not None:
                engine.active_intent_id = None
        else:
            try:
                await asyncio.to_thread(state.live.select, mode_id)
            except ConfigError as e:
                raise acp.RequestError.invalid_params({"message": str(e)}) from e
        return acp_schema.SetSessionModeResponse()

    def _state(self, session_id: str) -> _AcpSession:
        state = self.sessions.get(session_id)
        if state is None:
            raise acp.RequestError.invalid_params({"message": f"no session {session_id!r}"})
        return state

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        state = self._state(session_id)
        if state.run is not None:
            raise acp.RequestError.invalid_request({"message": "a prompt is already running"})
        text = prompt_text(prompt)
        run = state.run = _Run(state)
        try:
            info = await asyncio.to_thread(state.live.work, self.settings, text, run)
        finally:
            state.run = None
        meta = {"ctxnb": {"sandboxStatus": self._status(state)}}
        if run.cancelled():
            return acp.PromptResponse(stop_reason="cancelled", field_meta=meta)
        if info.get("exit_status") == "LimitsExceeded":
            return acp.PromptResponse(stop_reason="max_turn_requests", field_meta=meta)
        return acp.PromptResponse(stop_reason="end_turn", field_meta=meta)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        state = self.sessions.get(session_id)
        if state is not None and state.run is not None:
            state.run.stop.set()

    def close(self) -> None:
        for state in self.sessions.values():
            try:
                state.close()
            except Exception:  # one broken session must not keep the others open
                log.exception("closing ACP session %s", state.id)
        self.sessions.clear()


# -- helpers ----------------------------------------------------------------------------------


def prompt_text(blocks: list[Any]) -> str:
    """The text of an ACP prompt: text blocks, embedded text resources, links by URI.

    Example:
        >>> prompt_text([acp.text_block("fix the bug in"), acp.resource_link_block(
        ...     "calc.py", "file:///w/calc.py")])
        'fix the bug in\\n@file:///w/calc.py'
    """
    parts: list[str] = []
    for b in blocks:
        kind = getattr(b, "type", None)
        if kind == "text":
            parts.append(b.text)
        elif kind == "resource_link":
            parts.append(f"@{b.uri}")
        elif kind == "resource" and isinstance(getattr(b.resource, "text", None), str):
            parts.append(f"<resource uri={b.resource.uri!r}>\n{b.resource.text}\n</resource>")
    return "\n".join(parts)


def merge_mcp_servers(configured: dict[str, Any], client: list[Any]) -> dict[str, Any]:
    """``[mcp.servers]`` plus the servers an ACP client sent, as registry configs.

    The config file's entry wins on a name clash (it is the user's own setting; the
    client's list may come from elsewhere). SSE servers are not supported by the
    registry and are skipped with a warning.

    Example:
        >>> from acp.schema import McpServerStdio
        >>> sorted(merge_mcp_servers({}, [McpServerStdio(name="echo", command="/bin/echo",
        ...     args=["hi"], env=[])]))
        ['echo']
    """
    from ..config import McpServerConfig

    merged = dict(configured)
    for srv in client:
        name = str(srv.name).replace(" ", "-")
        if name in merged:
            log.warning("MCP server %r from the client ignored: [mcp.servers] has one", name)
            continue
        if isinstance(srv, acp_schema.McpServerStdio):
            merged[name] = McpServerConfig(
                command=srv.command, args=list(srv.args), env={e.name: e.value for e in srv.env}
            )
        elif getattr(srv, "type", None) == "http":
            merged[name] = McpServerConfig(
                url=srv.url, headers={h.name: h.value for h in srv.headers}
            )
        else:
            log.warning("MCP server %r skipped: only stdio and HTTP servers are supported", name)
    return merged


def load_adapter(spec: str | None, settings: AcpSettings) -> Any:
    """The ACP agent to serve: ctxnb's own, or ``create_agent(settings)`` of a module.

    ``spec`` is an importable module name (``pkg.mod``, using its ``create_agent``) or
    ``pkg.mod:factory``. It is imported from the installed packages named on the
    command line, never from the workspace.

    Raises:
        ConfigError: the module or the factory cannot be found.
    """
    if not spec:
        return CtxnbAcpAgent(settings)
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"--adapter {spec!r}: cannot import {module_name!r} ({e})") from None
    factory = getattr(module, attr or "create_agent", None)
    if not callable(factory):
        raise ConfigError(
            f"--adapter {spec!r}: {module_name} has no callable {attr or 'create_agent'!r}; "
            "an adapter module defines create_agent(settings) returning an ACP agent"
        )
    return factory(settings)


def serve_acp(settings: AcpSettings, *, adapter: str | None = None) -> None:
    """Serve the ACP agent on stdin/stdout until the client hangs up.

    While serving, fd 1 points at stderr and fd 0 at the null device, so nothing a
    library or a child process prints can corrupt the protocol stream. Each line the
    client sends passes :func:`~ctxnb.integrations._acp_wire.guard_lines` first: a
    malformed or oversized one gets its JSON-RPC error instead of ending the connection.
    """
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    # After the swap: whatever loading a local/... model prints goes to stderr.
    with settings.serving() as served:
        _serve(served, adapter, wire_in, wire_out)


def _serve(settings: AcpSettings, adapter: str | None, wire_in: int, wire_out: int) -> None:
    agent = load_adapter(adapter, settings)

    async def main() -> None:
        from ._acp_wire import MAX_LINE_BYTES, guard_lines

        loop = asyncio.get_running_loop()
        wire = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(wire), os.fdopen(wire_in, "rb", buffering=0)
        )
        # A StreamReaderProtocol gives the writer its flow control (drain).
        protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
        transport, _ = await loop.connect_write_pipe(
            lambda: protocol, os.fdopen(wire_out, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        # The SDK reads only the lines the guard lets through; the guard answers the rest.
        reader = asyncio.StreamReader(limit=acp.core.DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        guard = asyncio.create_task(guard_lines(wire, reader, writer))
        try:
            await acp.run_agent(agent, writer, reader)
        finally:
            guard.cancel()

    try:
        asyncio.run(main())
    finally:
        close = getattr(agent, "close", None)
        if callable(close):
            close()
