"""ctxnb's live agent as an A2A (Agent2Agent) peer over HTTP.

``ctxnb a2a serve [WORKSPACE]`` serves the same governed agent ``ctxnb acp serve``
does (mini-swe-agent's loop with ctxnb's context and governed commands) to any A2A
client, on the ``a2a-sdk`` package (protocol 1.0, with the 0.3 method names too).

* **The agent card** at ``/.well-known/agent-card.json``: one skill, ``code``, and the
  JSON-RPC endpoint ``/``; streaming is on. It is the one thing readable without a
  token (a ``GET`` of that path): it says the server wants an HTTP bearer token
  (``securitySchemes``/``securityRequirements``), which is how a client learns to send
  one, and it holds nothing secret.
* ``SendMessage`` / ``message/send`` and ``SendStreamingMessage`` / ``message/stream``:
  each message starts a task in the workspace; it is read as text (``text/plain``), so
  a part of another media type, or a message with no text at all, is refused with
  ``ContentTypeNotSupportedError`` (-32005) and nothing runs. Every A2A context is one ctxnb session
  (its turns are the context the model sees). The task streams its status (``working``
  with the model's text as a status message), one artifact per command (its output)
  and one per changed file (``diff:<path>``: a unified diff, plus the text before and
  after as data), then ``completed``, ``failed`` or ``canceled``.
* **Approvals** (a destructive command): the task goes ``input-required`` with the
  question every door asks (:func:`ctxnb.govern.approval.approval_question`: the command,
  the reason, the diff of its changes); the client answers by sending a message to the
  same task: ``approve`` (or ``yes``/``allow``) or ``reject`` (``no``/``deny``). Only a
  message that reached the server after the question was asked answers it: one sent
  while the task was working (the SDK holds it until the task pauses) is not read as an
  answer to a question its sender had not seen; the task asks again. The decision is
  ctxnb's approval decision, written to the trace (``by="a2a-client-user"``); no answer
  within ``permission_timeout`` is a refusal.
* ``GetTask`` / ``tasks/get`` and ``CancelTask`` / ``tasks/cancel``: a cancel stops the
  run before its next model call or command (a pending approval is refused).

Everything sent to the client passes :func:`~ctxnb.redaction.redactor.redact_text` first (an
approval's diff was built redacted, span by span, from the bytes). The server binds
127.0.0.1; ``Host`` and ``Origin`` must name it.

**Callers.** Every request but a read of the agent card needs a bearer token, on
loopback too: another local program (or a web page reaching 127.0.0.1) must not read or
answer this agent's tasks. Without ``--token`` (or ``$CTXNB_A2A_TOKEN``) one is
generated and printed at start, as Jupyter does; ``--no-token`` turns the check off on
loopback only, with a warning.
``--token`` may be given once per client: the token a request carries is its caller
(:func:`~ctxnb.integrations.http_guard.caller_of_token`). Tasks are kept per caller
(another caller's task is not found, nor listed, nor answered), and so are contexts (a
caller naming another's context id gets a session of its own), so an approval is
answered only by the caller that was asked.

Example:
    >>> A2aSettings(model="openai/x").section, A2aSettings().port
    ('a2a', 9999)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import itertools
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .._util.text import visible
from ..errors import ConfigError, MissingDependencyError
from ..govern.approval import Answer, ApprovalRequest, Decision, approval_question, read_answer
from ..redaction.redactor import redact_text
from .http_guard import (
    CALLER_SCOPE_KEY,
    BearerTokenMiddleware,
    BodyLimitMiddleware,
    HostCheckMiddleware,
    allowed_hosts,
    caller_of_token,
    is_loopback,
)
from .live_agent import LiveAgentSettings, LiveSession, LoopBridge, is_submit

try:
    from a2a.auth.user import UnauthenticatedUser, User
    from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.request_handlers.request_handler import validate_request_params
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.routes.common import DefaultServerCallContextBuilder
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import a2a_pb2 as pb
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
    from a2a.utils.errors import (
        ContentTypeNotSupportedError,
        TaskNotFoundError,
        UnsupportedOperationError,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "`ctxnb a2a serve` needs the A2A SDK; install it with `pip install 'ctxnb[a2a]'`"
    ) from e

__all__ = [
    "TOKEN_ENV",
    "A2aSettings",
    "CtxnbA2aExecutor",
    "a2a_app",
    "agent_card",
    "caller_of_token",
    "serve_a2a",
]

log = logging.getLogger(__name__)

TOKEN_ENV = "CTXNB_A2A_TOKEN"


# -- callers ----------------------------------------------------------------------------------


class _Caller(User):
    """A caller known by the bearer token it sent (by the token's hash, never the token)."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


_ARRIVED = "ctxnb_arrived"  # the call context's state key: when the request arrived


class _CallerContextBuilder(DefaultServerCallContextBuilder):
    """Names each request's caller as
    :class:`~ctxnb.integrations.http_guard.BearerTokenMiddleware` found it (the token it
    accepted): the SDK's task store keeps tasks per caller name, and the executor binds
    contexts and approvals to it. Without a token (``--no-token``) every request is the
    one unauthenticated caller.

    It also stamps each request with its place in the order of arrival (``clock``, shared
    with the executor), so an answer can be told from a message sent before the question
    it would answer."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock

    def build(self, request: Any) -> Any:
        call = super().build(request)
        call.state[_ARRIVED] = self._clock()
        return call

    def build_user(self, request: Any) -> User:
        caller = request.scope.get(CALLER_SCOPE_KEY)
        return _Caller(caller) if isinstance(caller, str) else UnauthenticatedUser()


def _caller(context: RequestContext) -> str:
    call = context.call_context
    return call.user.user_name if call is not None else ""


@dataclass(frozen=True)
class A2aSettings(LiveAgentSettings):
    """The live agent's settings for A2A: ``[adapters.a2a]`` (see
    :class:`~ctxnb.integrations.live_agent.LiveAgentSettings`), plus where to listen.

    Attributes:
        host: the address to bind (loopback unless a token is given).
        port: the TCP port; 0 picks a free one.
    """

    section: ClassVar[str] = "a2a"

    host: str = "127.0.0.1"
    port: int = 9999


BEARER_SCHEME = "bearer"  # the agent card's name for the bearer token it asks for


def agent_card(url: str, *, bearer: bool = True) -> pb.AgentCard:
    """The agent card: who ctxnb is, its one skill, where its JSON-RPC endpoint is and,
    with ``bearer``, that every call needs ``Authorization: Bearer <token>`` (the token
    itself is never in the card).

    Example:
        >>> card = agent_card("http://127.0.0.1:9999/")
        >>> card.security_schemes["bearer"].http_auth_security_scheme.scheme
        'bearer'
        >>> list(card.security_requirements[0].schemes), len(agent_card("u", bearer=False)
        ...     .security_requirements)
        (['bearer'], 0)
    """
    from .._version import __version__

    skill = pb.AgentSkill(
        id="code",
        name="Work on the workspace",
        description="Reads, edits and runs commands in one workspace, governed by ctxnb: "
        "changes only under the selected intent, destructive commands after approval "
        "(input-required), every change in the trace.",
        tags=["coding", "governed", "workspace"],
        examples=["Fix add() in calc.py", "Run the tests and fix what fails"],
    )
    card = pb.AgentCard(
        name="ctxnb",
        description="ctxnb's live agent: an LLM coding agent with a governed workspace.",
        version=__version__,
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "text/x-diff", "application/json"],
        skills=[skill],
    )
    if bearer:
        scheme = pb.HTTPAuthSecurityScheme(
            scheme="bearer",
            description="The token `ctxnb a2a serve` printed at start, or one given with "
            f"--token or ${TOKEN_ENV}; each token is a caller of its own.",
        )
        card.security_schemes[BEARER_SCHEME].CopyFrom(
            pb.SecurityScheme(http_auth_security_scheme=scheme)
        )
        requirement = card.security_requirements.add()
        requirement.schemes[BEARER_SCHEME].SetInParent()
    return card


def unified_diff(path: str, old: str | None, new: str) -> str:
    """A unified diff of a file's change (``/dev/null`` for a new file).

    Example:
        >>> print(unified_diff("a.py", "x = 1\\n", "x = 2\\n"), end="")
        --- a/a.py
        +++ b/a.py
        @@ -1 +1 @@
        -x = 1
        +x = 2
    """
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        "/dev/null" if old is None else f"a/{path}",
        f"b/{path}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# -- one task's run ---------------------------------------------------------------------------

_HOW_TO_ANSWER = "Reply 'approve' or 'reject' to this question of ctxnb:"


class _InputApprover:
    """ctxnb's approval of a destructive act, asked as the task's ``input-required``."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.run: _Run | None = None

    def request(self, req: ApprovalRequest) -> Decision:
        run = self.run
        if run is None or run.cancelled():
            return Decision(False, by="a2a", note="no task to ask in", request_id=req.id)
        # The question every door asks, as its own text part: the act, why, and a
        # command's whole diff; past its bound it raises DIFF_TOO_LONG, nobody asked.
        question = approval_question(req)
        command = visible(redact_text(str(req.args.get("cmd", ""))))
        answer: concurrent.futures.Future[tuple[bool, str, str]] = concurrent.futures.Future()
        run.pending, run.pending_id = answer, req.id
        try:
            run.call(lambda: run.ask(question, {"command": command, "approval_id": req.id}))
            approved, by, note = answer.result(self.timeout)
        except concurrent.futures.TimeoutError:
            approved, by, note = False, "timeout", f"no answer within {self.timeout:g}s"
        finally:
            run.pending = None
        if not run.cancelled():  # the task works again, whatever the answer
            run.call(lambda: run.updater.start_work())
        return Decision(approved, by=by, note=note, request_id=req.id)


class _Run:
    """One task's run of the live agent: its events become the task's events."""

    def __init__(
        self,
        bridge: LoopBridge,
        live: LiveSession,
        updater: TaskUpdater,
        caller: str,
        clock: Callable[[], int],
    ) -> None:
        self.bridge = bridge
        self.caller = caller  # who may answer this run's approvals
        self.clock = clock
        self.asked_at = 0  # the arrival clock's reading when the question was last asked
        self.live = live
        self.updater = updater
        self.stop = threading.Event()
        self.paused = asyncio.Event()  # input-required: execute() hands control back
        self.pending: concurrent.futures.Future[tuple[bool, str, str]] | None = None
        self.pending_id: str | None = None  # the id of the approval pending
        self.question: str | None = None  # the approval question last asked
        self.asked_meta: dict[str, Any] = {}  # and its metadata (its approval_id)
        self.answered: set[str] = set()  # the ids of the messages that answered one
        self.driver: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)

    # RunEvents, called from the agent's thread
    def cancelled(self) -> bool:
        return self.stop.is_set()

    def call(self, coro_fn: Callable[[], Any]) -> None:
        if not self.cancelled():  # after a cancel the task is final: nothing more is sent
            self.bridge.call(coro_fn)

    def message(self, text: str) -> None:
        msg = self.updater.new_agent_message([new_text_part(redact_text(text))])
        self.call(lambda: self.updater.update_status(pb.TaskState.TASK_STATE_WORKING, msg))

    def command_started(self, command: str) -> str | None:
        return None if is_submit(command) else f"cmd-{next(self._ids)}"

    def command_finished(self, handle: Any, command: str, answer: dict[str, Any]) -> None:
        if handle is None:
            return
        changed: list[str] = []
        if answer.get("ok"):
            res = answer["result"]
            out = (res.get("stdout") or "") + (res.get("stderr") or "")
            failed = res.get("returncode") != 0 or bool(res.get("timed_out"))
            changed = [str(c["path"]) for c in (res.get("effects") or {}).get("changed", [])]
        else:
            out, failed = f"{answer.get('error_code')}: {answer.get('message')}", True
        shown = redact_text(command)
        meta = {"command": shown, "status": "failed" if failed else "completed"}
        self._artifact(str(handle), f"command: {shown}", [new_text_part(redact_text(out))], meta)
        for rel in changed:
            change = self.live.last_change(rel)
            if change is None:
                continue
            path, old, new = change
            parts = [
                new_text_part(unified_diff(rel, old, new), media_type="text/x-diff"),
                new_data_part({"path": path, "old_text": old, "new_text": new}),
            ]
            self._artifact(f"{handle}-diff-{rel}", f"diff:{rel}", parts, {"path": rel})

    def _artifact(self, aid: str, name: str, parts: list[Any], meta: dict[str, Any]) -> None:
        self.call(
            lambda: self.updater.add_artifact(parts, artifact_id=aid, name=name, metadata=meta)
        )

    # on the event loop
    async def ask(self, question: str | None, meta: dict[str, Any]) -> None:
        """Ask the client: how to answer, then ``question`` (the approval's, as built;
        None asks the last one again)."""
        if question is not None:
            self.question, self.asked_meta = question, dict(meta)
        # Read before the question goes out: whatever arrives later was sent by a
        # client that could have seen it.
        self.asked_at = self.clock()
        parts = [new_text_part(_HOW_TO_ANSWER)]
        if self.question is not None:
            parts.append(new_text_part(self.question))
        # Asked again, the question keeps its approval_id: the one an answer may name.
        msg = self.updater.new_agent_message(parts, metadata={**self.asked_meta, **meta})
        await self.updater.requires_input(msg)
        self.paused.set()

    async def drive(self, settings: LiveAgentSettings, text: str) -> None:
        try:
            info = await asyncio.to_thread(self.live.work, settings, text, self)
        except Exception as e:  # the model or the agent failed: say why, end the task
            if not self.cancelled():
                log.exception("A2A task %s failed", self.updater.task_id)
                note = redact_text(f"{type(e).__name__}: {e}")
                await self.updater.failed(self.updater.new_agent_message([new_text_part(note)]))
            return
        if self.cancelled():
            return  # cancel() ended the task
        status = str(info.get("exit_status", ""))
        note = self.updater.new_agent_message([new_text_part(f"exit status: {status}")])
        if status == "Submitted":
            await self.updater.complete(note)
        else:
            await self.updater.failed(note)

    async def until_paused_or_done(self) -> None:
        assert self.driver is not None
        waiter = asyncio.ensure_future(self.paused.wait())
        try:
            await asyncio.wait({self.driver, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()


# -- the executor -----------------------------------------------------------------------------


class CtxnbA2aExecutor(AgentExecutor):
    """The A2A agent executor: one ctxnb session per A2A context, one run per task.

    Args:
        settings: the model, strategy and limits (see :class:`A2aSettings`).
        session_type: the backend each A2A context opens (a seam: a subclass that
            records or answers its calls); every tool call and command of the context
            is its :meth:`~ctxnb.integrations.backend.WorkspaceBackend.call` or
            :meth:`~ctxnb.integrations.backend.WorkspaceBackend.execute`.
    """

    def __init__(
        self, settings: A2aSettings, *, session_type: type[LiveSession] = LiveSession
    ) -> None:
        self.settings = settings
        self.session_type = session_type
        self.bridge = LoopBridge()
        # (caller, context id) -> its session: a context id is no secret (it is in every
        # task), so another caller naming it gets a session of its own.
        self.contexts: dict[tuple[str, str], tuple[LiveSession, _InputApprover]] = {}
        self.runs: dict[str, _Run] = {}
        self._arrivals = itertools.count(1)

    def clock(self) -> int:
        """The next place in the order requests and questions happen in (on the loop)."""
        return next(self._arrivals)

    def sandbox_status(self) -> dict[str, Any]:
        """``sandboxStatus`` (``GET /status``): whether the agent loop runs isolated, and
        the last sandboxed run's process, once one ran."""
        runs = [
            live.last_sandbox_status
            for live, _ in self.contexts.values()
            if live.last_sandbox_status is not None
        ]
        return {"agent": runs[-1] if runs else self.settings.sandbox_status()}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.bridge.loop = asyncio.get_running_loop()
        task_id, context_id = str(context.task_id), str(context.context_id)
        caller = _caller(context)
        run = self.runs.get(task_id)
        if run is not None and run.caller != caller:
            # The SDK's task store already keeps tasks per caller; this holds even if a
            # store is swapped in that does not.
            raise TaskNotFoundError()
        if run is not None and run.pending is not None and not run.pending.done():
            call = context.call_context
            arrived = call.state.get(_ARRIVED) if call is not None else None
            if not isinstance(arrived, int) or arrived < run.asked_at:
                # Sent while the task was working, before this question was asked: its
                # sender did not see the question, so it is no answer to it.
                run.paused.clear()
                early = visible(redact_text(context.get_user_input()))
                await run.ask(None, {"unanswered_reply": early})
                return
            await self._answer(run, context.get_user_input(), context.message)
            return
        if run is not None:
            # A message to a task that waits for nothing: its run has ended (the SDK
            # holds a message to a working task until it pauses or ends). Refused as a
            # message to a finished task is; the task's state stays what it was.
            raise UnsupportedOperationError(
                message=f"task {task_id} is not waiting for input: its run has ended; "
                "send a new message (without this task id) to start another"
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        try:
            live, approver = await self._context(caller, context_id)
        except ConfigError as e:  # a bad workspace or intent: say which
            await updater.failed(_text(updater, redact_text(str(e))))
            return
        if approver.run is not None and approver.run.driver is not None:
            if not approver.run.driver.done():
                msg = "another task of this context is running; wait for it or cancel it"
                await updater.reject(_text(updater, msg))
                return
        run = _Run(self.bridge, live, updater, caller, self.clock)
        self.runs[task_id] = approver.run = run
        await updater.start_work()
        run.driver = asyncio.create_task(run.drive(self.settings, context.get_user_input()))
        await run.until_paused_or_done()

    async def _answer(self, run: _Run, reply: str, msg: pb.Message | None) -> None:
        pending = run.pending
        message_id = msg.message_id if msg is not None else ""
        named = _approval_named(msg)
        resent = bool(message_id) and message_id in run.answered
        if resent or (named is not None and named != run.pending_id):
            # A message that answered an earlier question (sent again), or one naming
            # another approval, is no answer to this one, which its sender never read.
            run.paused.clear()
            await run.ask(None, {"stale_reply": "it answered another approval question"})
            return
        read = read_answer("a2a", reply)
        if read is Answer.INVALID or pending is None:
            # Not a yes: the task asks again and nothing runs until a valid answer.
            run.paused.clear()
            await run.ask(None, {"unclear_reply": visible(redact_text(reply))})
            return
        if message_id:
            run.answered.add(message_id)
        run.paused.clear()
        pending.set_result((read is Answer.APPROVE, "a2a-client-user", read.value))
        await run.until_paused_or_done()

    async def _context(self, caller: str, context_id: str) -> tuple[LiveSession, _InputApprover]:
        key = (caller, context_id)
        if key not in self.contexts:
            approver = _InputApprover(self.settings.permission_timeout)
            root = Path(self.settings.workspace or os.getcwd())
            live = await asyncio.to_thread(
                self.session_type.start, root, self.settings, caller="a2a", approver=approver
            )
            self.contexts[key] = (live, approver)
        return self.contexts[key]

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = str(context.task_id)
        run = self.runs.get(task_id)
        if run is not None:
            run.stop.set()
            if run.pending is not None and not run.pending.done():
                run.pending.set_result((False, "a2a-cancel", "the task was cancelled"))
        updater = run.updater if run is not None else None
        updater = updater or TaskUpdater(event_queue, task_id, str(context.context_id))
        await updater.cancel(_text(updater, "cancelled by the client"))

    def close(self) -> None:
        for run in self.runs.values():
            run.stop.set()
            if run.pending is not None and not run.pending.done():
                run.pending.set_result((False, "a2a-server", "the server is shutting down"))
        for live, _ in self.contexts.values():
            try:
                live.close()
            except Exception:  # one broken session must not keep the others open
                log.exception("closing A2A context session %s", live.id)
        self.contexts.clear()


def _approval_named(msg: pb.Message | None) -> str | None:
    """The approval a reply says it answers (its metadata's ``approval_id``), if any."""
    if msg is None or not msg.HasField("metadata") or "approval_id" not in msg.metadata:
        return None
    return str(msg.metadata["approval_id"])


def _text(updater: TaskUpdater, text: str) -> pb.Message:
    return updater.new_agent_message([new_text_part(text)])


def _check_text_only(message: pb.Message) -> None:
    """Refuse a message the agent could not read whole: it reads text parts only, and a
    file or data part silently dropped would start a task on part of what was asked (or
    on nothing), and an answer to an approval must be text too.

    Raises:
        ContentTypeNotSupportedError: a part that is not text, or no text at all.
    """
    parts = list(message.parts)
    kinds = {part.WhichOneof("content") for part in parts}
    others = sorted(str(k) for k in kinds - {"text"})
    if others or not any(part.text.strip() for part in parts):
        has = f"{', '.join(others)} parts" if others else "no text"
        raise ContentTypeNotSupportedError(
            message=f"ctxnb's agent reads text parts only (text/plain), and this message has "
            f"{has}: send what to do (or the answer to its question) as text"
        )


# -- the server -------------------------------------------------------------------------------


class _TextOnlyHandler(DefaultRequestHandler):
    """The SDK's request handler, refusing a message the agent cannot read
    (:func:`_check_text_only`) before a task exists for it or a waiting task reads it:
    refused there, a waiting approval stays waiting and no failed task is left behind.
    The SDK's own check of the request's shape comes first (-32602 for a malformed
    message, as before)."""

    @validate_request_params
    async def on_message_send(self, params: Any, context: Any) -> Any:
        _check_text_only(params.message)
        return await super().on_message_send(params, context)

    @validate_request_params
    async def on_message_send_stream(self, params: Any, context: Any) -> Any:
        _check_text_only(params.message)
        events = super().on_message_send_stream(params, context)
        try:
            async for event in events:
                yield event
        finally:  # a client that hangs up ends the SDK's stream too
            await events.aclose()


def _unknown_list_status(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a ``ListTasks`` request filtering on a task state that does
    not exist, or None for any other body.

    The SDK reads parameters with protobuf's ``ignore_unknown_fields``, which turns an
    unknown enum name into "unspecified": ``status: "TASK_STATE_DONE"`` would list every
    task, unfiltered, as if the filter had matched. A filter that cannot match is the
    client's mistake, so it is -32602, as the A2A compatibility kit requires.

    Example:
        >>> _unknown_list_status(b'{"jsonrpc": "2.0", "id": 7, "method": "ListTasks",'
        ...     b' "params": {"status": "DONE"}}')["error"]["code"]
        -32602
        >>> _unknown_list_status(b'{"jsonrpc": "2.0", "id": 7, "method": "ListTasks",'
        ...     b' "params": {"status": "TASK_STATE_COMPLETED"}}') is None
        True
    """
    if b"ListTasks" not in body:  # the cheap test first: most requests are not lists
        return None
    try:
        request = json.loads(body)
    except ValueError:
        return None  # the SDK answers -32700
    if not isinstance(request, dict) or request.get("method") != "ListTasks":
        return None
    params = request.get("params")
    status = params.get("status") if isinstance(params, dict) else None
    if not isinstance(status, str) or status in pb.TaskState.keys():
        return None
    rid = request.get("id")
    shown = visible(status[:64])
    return {
        "jsonrpc": "2.0",
        "id": rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None,
        "error": {
            "code": -32602,
            "message": f"Invalid params: status '{shown}' is no task state; use one of "
            + ", ".join(pb.TaskState.keys()[1:]),
        },
    }


class _ListStatusCheck:
    """ASGI middleware: answers :func:`_unknown_list_status`'s error before the SDK reads
    the request. It sits behind :class:`~ctxnb.integrations.http_guard.BodyLimitMiddleware`,
    which hands the body on whole, in one message."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        first = await receive()
        body = first.get("body", b"") if first["type"] == "http.request" else b""
        error = _unknown_list_status(body)
        if error is not None:
            payload = json.dumps(error).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        await self.app(scope, replay, send)


def a2a_app(
    executor: CtxnbA2aExecutor,
    *,
    url: str,
    host: str,
    port: int,
    token: str | Sequence[str] | None = None,
) -> Any:
    """The ASGI app: the agent card, the JSON-RPC endpoint (1.0 and 0.3 method names),
    behind the ``Host``/``Origin`` check, a request-body limit
    (:data:`~ctxnb.integrations.http_guard.DEFAULT_MAX_BODY_BYTES`) and, when given,
    the bearer token (several: one caller each)."""
    card = agent_card(url, bearer=bool(token))
    # validate_input_modes: a part whose media type the card does not list is refused
    # (-32005) before the executor sees it.
    handler = _TextOnlyHandler(
        agent_executor=executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        validate_input_modes=True,
    )
    builder = _CallerContextBuilder(executor.clock)
    rpc = create_jsonrpc_routes(handler, "/", context_builder=builder, enable_v0_3_compat=True)

    async def status(_request: Request) -> JSONResponse:
        return JSONResponse({"sandboxStatus": executor.sandbox_status()})

    # Behind the same token and Host check as the rest: it names a process id.
    routes = [*create_agent_card_routes(card), Route("/status", status), *rpc]
    # Starlette reads a request body whole and uvicorn sets no ceiling: bound it here.
    app: Any = BodyLimitMiddleware(_ListStatusCheck(Starlette(routes=routes)))
    app = HostCheckMiddleware(app, allowed_hosts(host, port))
    if not token:
        return app
    # The card is public (it tells a client to send a token); the Host/Origin check
    # behind this still holds for it.
    return BearerTokenMiddleware(app, token, public_paths=[AGENT_CARD_WELL_KNOWN_PATH])


def serve_a2a(
    settings: A2aSettings,
    *,
    token: str | Sequence[str] | None = None,
    no_token: bool = False,
    on_listen: Callable[[str, tuple[str, ...]], None] | None = None,
) -> None:
    """Serve the A2A agent over HTTP until interrupted.

    Every request needs a bearer token: ``token`` (several: one per client, each its own
    caller), else ``$CTXNB_A2A_TOKEN``, else one generated here. ``on_listen`` gets the
    URL and the tokens clients may send (none with ``no_token``), to print. ``no_token``
    serves without one, on loopback only.

    Raises:
        ConfigError: ``no_token`` on a non-loopback host, checked before anything is
            bound.
        OSError: the address cannot be bound.
        MissingDependencyError: a ``local/...`` model without the ``local`` extra.
    """
    import socket

    host = settings.host
    if no_token:
        if not is_loopback(host):
            raise ConfigError(
                f"refusing to serve A2A on {host!r} without a bearer token: anyone who can "
                "reach that address could change the workspace. Drop --no-token (a token is "
                f"generated), pass --token or set {TOKEN_ENV}, or bind 127.0.0.1"
            )
        tokens: tuple[str, ...] = ()
    else:
        tokens = (token,) if isinstance(token, str) else tuple(token or ())
        tokens = tokens or tuple(filter(None, [os.environ.get(TOKEN_ENV)]))
        tokens = tokens or (secrets.token_urlsafe(24),)
    # A local/... model is loaded first: a bad one is refused before anything is bound.
    with settings.serving() as served:
        family = socket.getaddrinfo(host, served.port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, served.port), family=family, backlog=128)
        try:
            _serve(served, sock, host, tokens, on_listen)
        finally:
            sock.close()


def _serve(
    settings: A2aSettings,
    sock: Any,  # a bound socket.socket
    host: str,
    tokens: tuple[str, ...],
    on_listen: Callable[[str, tuple[str, ...]], None] | None,
) -> None:
    import socket

    import uvicorn

    executor = CtxnbA2aExecutor(settings)
    try:
        port = sock.getsockname()[1]
        # The card's URL is where clients connect: a wildcard bind names this machine.
        shown = socket.getfqdn() if host in ("0.0.0.0", "::") else host
        url = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/"
        app = a2a_app(executor, url=url, host=host, port=port, token=tokens or None)
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        if on_listen is not None:
            on_listen(url, tokens)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        executor.close()
