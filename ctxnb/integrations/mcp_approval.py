"""Approval over MCP: ask the client's user through elicitation, or refuse.

A destructive act (e.g. ``run_command("rm -rf build")``) asks the human through MCP
elicitation when the client supports it, and is refused with
``DESTRUCTIVE_NEEDS_APPROVAL`` otherwise. How the question travels depends on the
protocol revision the client speaks:

* **2025-11-25** (the ``initialize`` handshake): the server sends an
  ``elicitation/create`` request on the connection and the call waits for the answer.
* **2026-07-28** (stateless; a server may not send requests): the call stops before
  anything is committed and its result is ``input_required``, carrying the question as
  an elicitation. The client asks its user and sends the same call again with the
  answer and the server's sealed ``requestState``; the call then runs again and an
  approval counts only for the very act it was given for (same tool, arguments,
  reason and, for a command, the same diff), else the user is asked anew.

Example:
    >>> req = ApprovalRequest.new("run_command", {"cmd": "rm a.txt", "diff": "-x\\n"}, "deletes")
    >>> approval_fingerprint(req) == approval_fingerprint(ApprovalRequest.new(
    ...     "run_command", {"cmd": "rm a.txt", "diff": "-x\\n"}, "deletes"))
    True
    >>> print(approval_message(req))
    ctxnb: approve the changes of `rm a.txt`?
    Why: deletes
    <BLANKLINE>
    -x
    <BLANKLINE>
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import PolicyError
from ..govern.approval import (
    Answer,
    ApprovalRequest,
    Approver,
    Decision,
    approval_question,
    invalid_answer,
    read_answer,
)
from ._mcp_sdk import MODERN_PROTOCOL_VERSIONS, MCPError, anyio, types

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "APPROVAL_PENDING",
    "DenyDestructiveApprover",
    "ElicitationApprover",
    "approval_fingerprint",
    "approval_message",
    "is_stateless",
]

APPROVAL_PENDING = "APPROVAL_PENDING"
"""The error code of a call stopped to ask its user (MCP 2026-07-28); the server turns it
into an ``input_required`` result, so an agent never sees it."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this destructive act?",
            "default": False,
        }
    },
    "required": ["approve"],
}


def is_stateless(ctx: ServerRequestContext[Any] | None) -> bool:
    """Whether the request behind ``ctx`` speaks a stateless revision (2026-07-28 or
    later): no connection state, no requests from the server."""
    version = getattr(ctx.session, "protocol_version", None) if ctx is not None else None
    return version in MODERN_PROTOCOL_VERSIONS


def declares_elicitation(ctx: ServerRequestContext[Any] | None) -> bool:
    """Whether the client behind ``ctx`` declared the elicitation capability (in its
    ``initialize``, or in the request's envelope under 2026-07-28)."""
    caps = getattr(ctx.session, "client_capabilities", None) if ctx is not None else None
    return bool(caps is not None and caps.elicitation is not None)


def approval_fingerprint(req: ApprovalRequest) -> str:
    """What an approval is given for: the tool, its arguments (a command's diff among
    them) and the reason, hashed; the request's id and time are left out, so the same
    act asked again has the same fingerprint."""
    body = json.dumps([req.tool, req.args, req.reason], sort_keys=True, default=str)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def approval_message(req: ApprovalRequest) -> str:
    """The question a user is shown: :func:`ctxnb.govern.approval.approval_question`,
    the one every door asks (the act, why it needs a yes, and a command's whole diff;
    control, bidi and invisible characters shown as escapes)."""
    return approval_question(req)


_VALID_ANSWER = 'action "accept" with content {"approve": true} or {"approve": false}, or "decline"'


def _needs_approval(req: ApprovalRequest, why: str) -> PolicyError:
    return PolicyError(
        "DESTRUCTIVE_NEEDS_APPROVAL",
        f"{req.summary()} is destructive and needs a human's approval; {why}",
        recoverable=False,
        required_action=(
            "Ask the user to run it themselves, or connect with an MCP client that "
            "supports elicitation so that the user can approve it."
        ),
        details={"tool": req.tool, "request_id": req.id},
    )


class DenyDestructiveApprover:
    """Refuses every destructive act with ``DESTRUCTIVE_NEEDS_APPROVAL``.

    Used when no human can be asked (the MCP client does not support elicitation).

    Example:
        >>> ap = DenyDestructiveApprover()
        >>> try:
        ...     ap.request(ApprovalRequest.new("run_command", {"cmd": "rm -rf /"}, "deletes"))
        ... except PolicyError as e:
        ...     print(e.error_code)
        DESTRUCTIVE_NEEDS_APPROVAL
    """

    def request(self, req: ApprovalRequest) -> Decision:
        raise _needs_approval(req, "no approver is available on this connection")


class ElicitationApprover:
    """Asks the MCP client's user through elicitation whether a destructive act may run.

    Tool calls run in worker threads (see :class:`McpBackend`), so :meth:`request`
    may block: it hands the question to the server's event loop with
    :func:`anyio.from_thread.run` and waits for the answer there, while the loop keeps
    serving other messages (among them the elicitation's response). The request
    context of the call being served is bound to the worker thread with
    :meth:`bound`; without one, or when the client did not declare the elicitation
    capability, the act is refused with ``DESTRUCTIVE_NEEDS_APPROVAL``.

    Args:
        timeout: seconds to wait for the user; no answer in time is a refusal.
        fallback: the approver used when elicitation is not possible.
    """

    def __init__(self, *, timeout: float = 300.0, fallback: Approver | None = None) -> None:
        self.timeout = timeout
        self.fallback: Approver = fallback or DenyDestructiveApprover()
        self._local = threading.local()

    @contextlib.contextmanager
    def bound(
        self,
        ctx: ServerRequestContext[Any] | None,
        answers: Mapping[str, Decision] | None = None,
        *,
        released: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> Iterator[None]:
        """Bind the request being served to this thread for the duration of a call,
        with the user's answers it carries (2026-07-28), by :func:`approval_fingerprint`.

        ``released`` gives what the call holds that others need (the backend's lock),
        let go while the user thinks: waiting blocks only the waiter."""
        previous = (
            getattr(self._local, "ctx", None),
            getattr(self._local, "answers", None),
            getattr(self._local, "released", None),
        )
        self._local.ctx = ctx
        self._local.answers = dict(answers or {})
        self._local.released = released
        try:
            yield
        finally:
            self._local.ctx, self._local.answers, self._local.released = previous

    @staticmethod
    def supported(ctx: ServerRequestContext[Any] | None) -> bool:
        """Whether the client behind ``ctx`` can be asked (declared elicitation)."""
        if is_stateless(ctx):
            return declares_elicitation(ctx)  # asked through an input_required result
        if ctx is None or not ctx.session.can_send_request:
            return False  # e.g. a stateless HTTP request: no channel back to the client
        return declares_elicitation(ctx)

    def request(self, req: ApprovalRequest) -> Decision:
        ctx = getattr(self._local, "ctx", None)
        if not self.supported(ctx):
            return self._fallback(req)
        if is_stateless(ctx):
            return self._answered(req)
        assert ctx is not None
        # Built here, in the call's thread: a question too long to ask refuses the act
        # (DIFF_TOO_LONG) before anything is sent or let go.
        question = approval_message(req)
        released = getattr(self._local, "released", None)
        try:
            with released() if released is not None else contextlib.nullcontext():
                result = anyio.from_thread.run(self._ask, ctx, question)
        except RuntimeError:  # not called from one of the server's worker threads
            return self._fallback(req)
        except MCPError as e:
            return Decision(
                False, by="mcp-client", note=f"elicitation failed: {e}", request_id=req.id
            )
        if result is None:
            return Decision(
                False, by="timeout", note=f"no answer within {self.timeout:g}s", request_id=req.id
            )
        read = read_answer("mcp", result)
        if read is Answer.INVALID:
            raise invalid_answer(req, "MCP", _VALID_ANSWER)
        return Decision(
            read is Answer.APPROVE, by="mcp-client-user", note=_note(result), request_id=req.id
        )

    def _fallback(self, req: ApprovalRequest) -> Decision:
        # The fallback may wait on a human too (a notebook's queue): not with the lock.
        released = getattr(self._local, "released", None)
        with released() if released is not None else contextlib.nullcontext():
            return self.fallback.request(req)

    def _answered(self, req: ApprovalRequest) -> Decision:
        """The answer the call carries for exactly this act, or a stop to ask for it."""
        fingerprint = approval_fingerprint(req)
        answer = getattr(self._local, "answers", {}).get(fingerprint)
        if answer is not None:
            return Decision(answer.approved, by=answer.by, note=answer.note, request_id=req.id)
        raise PolicyError(
            APPROVAL_PENDING,
            f"{req.summary()} needs the user's approval; the client is asked",
            recoverable=True,
            required_action="Answer the input request and send the same call again.",
            details={"fingerprint": fingerprint, "question": approval_message(req)},
        )

    async def _ask(
        self, ctx: ServerRequestContext[Any], question: str
    ) -> types.ElicitResult | None:
        with anyio.move_on_after(self.timeout):
            return await ctx.session.elicit_form(
                question, APPROVAL_SCHEMA, related_request_id=ctx.request_id
            )
        return None


# -- 2026-07-28: the question as an input_required result ------------------------------------

_INPUT_KEY = "approval"


class _SpentStates:
    """The nonces of the request states already answered, kept as long as a state can be
    valid (the SDK refuses older ones), so that each is used once."""

    def __init__(self, ttl: float = 660.0) -> None:
        self.ttl = ttl
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def spend(self, nonce: str) -> bool:
        """Mark ``nonce`` used; False when it was used before."""
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > 4096:
                self._seen = {n: t for n, t in self._seen.items() if now - t < self.ttl}
            if nonce in self._seen:
                return False
            self._seen[nonce] = now
            return True


_SPENT = _SpentStates()


def input_required(details: Mapping[str, Any], answers: Mapping[str, Decision]) -> Any:
    """The ``input_required`` result that asks the user about a stopped call: one form
    elicitation, and a state naming the act asked about and the answers given so far
    (the SDK's request-state boundary seals it and binds it to this very call)."""
    state = {
        "asked": details["fingerprint"],
        "answers": {fp: [d.approved, d.note] for fp, d in answers.items()},
        "nonce": secrets.token_hex(16),  # one use: see _SPENT
    }
    params = types.ElicitRequestFormParams(
        message=details["question"], requested_schema=APPROVAL_SCHEMA
    )
    return types.InputRequiredResult(
        input_requests={_INPUT_KEY: types.ElicitRequest(params=params)},
        request_state=json.dumps(state, sort_keys=True),
    )


def answers_of(
    input_responses: Mapping[str, Any] | None, request_state: str | None
) -> dict[str, Decision]:
    """The answers a retried call carries: those of earlier rounds (from the state the
    server sealed) and the user's answer to the last question.

    Raises:
        MCPError: ``INVALID_PARAMS`` for a state this server did not write.
    """
    if request_state is None:
        return {}
    try:
        state = json.loads(request_state)
        answers = {
            fp: Decision(bool(ok), by="mcp-client-user", note=str(note))
            for fp, (ok, note) in state["answers"].items()
        }
        asked = str(state["asked"])
        nonce = str(state["nonce"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise MCPError(types.INVALID_PARAMS, "requestState is not one ctxnb wrote") from e
    if not _SPENT.spend(nonce):
        # Sent before: an approval is for one act, once. A state replayed (to repeat an
        # approved act later, within its ten minutes) carries no answers; ask again.
        return {}
    response = (input_responses or {}).get(_INPUT_KEY)
    if response is not None:
        read = read_answer("mcp", response)
        if read is Answer.INVALID:
            # An error to the client; the call does not run, so nothing is committed.
            raise MCPError(
                types.INVALID_PARAMS,
                f"the answer to the approval question is not valid: send {_VALID_ANSWER}",
            )
        answers[asked] = Decision(
            read is Answer.APPROVE, by="mcp-client-user", note=_note(response)
        )
    return answers


def _note(response: Any) -> str:
    action = response.get("action") if isinstance(response, Mapping) else response.action
    if action != "accept":
        return str(action)
    content = response.get("content") if isinstance(response, Mapping) else response.content
    return "approved" if (content or {}).get("approve") is True else "denied"
