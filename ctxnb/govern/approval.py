"""Human approval of destructive acts.

A destructive tool call waits for a human decision through an :class:`Approver`.
ctxnb ships three:

- :class:`CallbackApprover`: a function decides (scripts, tests, policies in code);
- :class:`TerminalApprover`: asks on the terminal (the CLI);
- :class:`QueueApprover`: keeps pending requests for a UI to decide (the notebook
  ``ApprovalPanel``, an MCP client's elicitation); the waiting call blocks on an event
  in its own thread while the UI stays responsive.

Every decision carries who decided and when; the hook engine writes it to the trace.

Every door asks the same question (:func:`approval_question`, :func:`question`): the
notebook panel, MCP elicitation, ACP's permission request, A2A's input request and
Claude Code's prompt for a held command. For a command it holds the whole diff of the
command's changes as :mod:`ctxnb.sandbox.review` built it from the bytes (redacted spans
by length and hash), and what the redaction hides is said in its reasons. A question
whose diff is longer than a person is shown at once
(:data:`~ctxnb.sandbox.held.PROMPT_DIFF_CHARS`) or whose text is longer than
:data:`QUESTION_CHARS` is not asked at any door: the act is refused with
``DIFF_TOO_LONG``, since the user would approve changes they were not shown.

Example:
    >>> ap = CallbackApprover(lambda req: req.tool != "run_command", by="policy-bot")
    >>> d = ap.request(ApprovalRequest.new("run_command", {"cmd": "rm -rf build"}, "deletes"))
    >>> (d.approved, d.by)
    (False, 'policy-bot')
"""

from __future__ import annotations

import contextlib
import enum
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import PolicyError

if TYPE_CHECKING:
    from ..sandbox.held import Hold

__all__ = [
    "Answer",
    "ApprovalRequest",
    "Approver",
    "CallbackApprover",
    "Decision",
    "DenyAllApprover",
    "QUESTION_CHARS",
    "QueueApprover",
    "TerminalApprover",
    "approval_question",
    "held_question",
    "invalid_answer",
    "one_line",
    "question",
    "read_answer",
]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ApprovalRequest:
    """A destructive act waiting for a decision."""

    id: str
    tool: str
    args: dict[str, Any]
    reason: str
    risk: str = "DESTRUCTIVE"
    intent_id: str | None = None
    caller: str | None = None
    session_id: str | None = None
    created_at: datetime = field(default_factory=_now)

    @classmethod
    def new(cls, tool: str, args: dict[str, Any], reason: str, **kw: Any) -> ApprovalRequest:
        return cls(id=uuid.uuid4().hex[:12], tool=tool, args=dict(args), reason=reason, **kw)

    def summary(self) -> str:
        shown = args_summary(self.args)
        return f"{self.tool}({shown}): {self.reason}"


def args_summary(args: dict[str, Any], limit: int = 120) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


QUESTION_CHARS = 10_000
"""The longest approval question any door asks (Claude Code cuts a hook's words there)."""

COMMAND_CHARS = 300
"""A command is shown on one line, cut here: it is the agent's text; the diff is what is
committed."""


def one_line(command: str, limit: int = COMMAND_CHARS) -> str:
    """``command`` on one line (its whitespace runs made one space), cut at ``limit``.

    Example:
        >>> one_line("rm a\\n  b", 8)
        'rm a b'
    """
    command = " ".join(command.split())
    return command if len(command) <= limit else command[: limit - 1] + "…"


def question(
    act: str, reason: str, *, intent_id: str | None = None, diff: str | None = None
) -> str:
    """The question a human is asked: the act, why it needs a yes, and the diff.

    ``act`` and ``reason`` are redacted here; ``diff`` is shown as given: it is the
    approval diff, built redacted from the bytes (:mod:`ctxnb.sandbox.review`), and a
    second pass over a diff could swallow it (a private key's header in its context
    reads as a key that runs to the end of the text) and show less than is committed.
    Control, bidi and invisible characters (the agent's, in the command or the diff)
    are shown as escapes (:func:`~ctxnb._util.text.visible`): they must not redraw it.

    Raises:
        PolicyError: ``DIFF_TOO_LONG`` when ``diff`` is longer than
            :data:`~ctxnb.sandbox.held.PROMPT_DIFF_CHARS` or the question longer than
            :data:`QUESTION_CHARS`: no door asks it, and the act is not run.

    Example:
        >>> print(question("the changes of `rm a.txt`", "deletes a.txt", intent_id="INT-1",
        ...                diff="--- a/a.txt\\n+++ /dev/null\\n@@ -1 +0,0 @@\\n-x\\n"), end="")
        ctxnb: approve the changes of `rm a.txt` under INT-1?
        Why: deletes a.txt
        <BLANKLINE>
        --- a/a.txt
        +++ /dev/null
        @@ -1 +0,0 @@
        -x
    """
    from .._util.text import visible
    from ..redaction.redactor import redact_text
    from ..sandbox.held import PROMPT_DIFF_CHARS

    head = f"ctxnb: approve {redact_text(act)}"
    if intent_id:
        head += f" under {redact_text(intent_id)}"
    text = f"{head}?\nWhy: {redact_text(reason)}"
    asked = visible(f"{text}\n\n{diff}" if diff else text)
    if len(diff or "") > PROMPT_DIFF_CHARS or len(asked) > QUESTION_CHARS:
        raise PolicyError(
            "DIFF_TOO_LONG",
            f"the approval of {one_line(visible(redact_text(act)), 120)} would show "
            f"{len(asked)} characters ({len(diff or '')} of diff): more than a person is "
            f"asked to read at once ({PROMPT_DIFF_CHARS} characters of diff, "
            f"{QUESTION_CHARS} in all), so the user would approve changes they were not "
            "shown; they are not asked, and nothing was run",
            required_action="Make the change in smaller steps (fewer files or lines each), "
            "or ask the user to make it.",
            details={"question_chars": len(asked), "diff_chars": len(diff or "")},
        )
    return asked


def approval_question(req: ApprovalRequest) -> str:
    """:func:`question` for ``req``: a command's changes with their diff, any other act
    by its tool and arguments.

    Example:
        >>> req = ApprovalRequest.new("delete_file", {"path": "a.txt"}, "deletes a.txt")
        >>> print(approval_question(req))
        ctxnb: approve delete_file(path='a.txt')?
        Why: deletes a.txt
    """
    cmd, diff = req.args.get("cmd"), req.args.get("diff")
    if req.tool == "run_command" and isinstance(cmd, str) and isinstance(diff, str):
        # The diff of a command's changes is ctxnb's (the commit sets it), never the agent's.
        act = f"the changes of `{one_line(cmd)}`"
        return question(act, req.reason, intent_id=req.intent_id, diff=diff)
    if req.tool == "apply_merge" and isinstance(diff, str):
        # The merged file's diff is ctxnb's (the approval policy sets it from the bytes).
        act = f"the merge proposal {req.args.get('proposal_id')} for {req.args.get('path')}"
        return question(act, req.reason, intent_id=req.intent_id, diff=diff)
    shown = {k: v for k, v in req.args.items() if k != "diff"}
    act = f"{req.tool}({args_summary(shown)})"
    return question(act, req.reason, intent_id=req.intent_id)


def held_question(hold: Hold) -> str:
    """:func:`question` for a command's held changes (``ctxnb sandbox commit ID``): its
    reasons, what the redaction hides among them, and the diff the commit is bound to."""
    act = f"the changes of `{one_line(hold.command)}`"
    return question(act, "; ".join(hold.reasons), intent_id=hold.intent_id, diff=hold.diff)


@dataclass(frozen=True)
class Decision:
    """A human's (or a policy's) answer to an :class:`ApprovalRequest`."""

    approved: bool
    by: str
    at: datetime = field(default_factory=_now)
    note: str = ""
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "approved": self.approved,
            "by": self.by,
            "at": self.at.isoformat(),
            "note": self.note,
            "request_id": self.request_id,
        }


class Answer(enum.Enum):
    """A client's answer to an approval question, read by :func:`read_answer`."""

    APPROVE = "approve"
    REJECT = "reject"
    INVALID = "invalid"


def read_answer(protocol: str, answer: Any) -> Answer:
    """Read a protocol's answer to an approval question by its schema, never by truthiness.

    Every door (MCP, ACP, A2A) asks its client in its own shape; this is the one place
    that decides what counts as a yes. Only the protocol's explicit accept counts: a
    string ``"false"``, ``1``, ``"yes"`` in a boolean field, a missing field or an
    unknown option is :attr:`Answer.INVALID`, which a door reports to its client as an
    error while nothing is committed.

    Args:
        protocol: ``"mcp"``: an elicitation result, ``{"action": "accept", "content":
            {"approve": true}}`` (``approve`` a JSON boolean; ``decline`` and ``cancel``
            are refusals); ``"acp"``: the option id the client selected (``"allow-once"`` or
            ``"reject-once"``; a cancelled permission request is ``None``, a refusal);
            ``"a2a"``: the text of the client's reply or a data part ``{"approve":
            true|false}``. A yes is the reply ``approve``, ``yes`` or ``allow`` alone (any
            case, a closing ``.`` or ``!``); a no is a reply whose first word is
            ``reject``, ``no`` or ``deny``. A yes with more words ("approve only the
            build folder") is no yes: a condition ctxnb cannot check is not an approval.
        answer: the client's answer in that shape (a mapping, or an SDK object with
            the same attributes).

    Example:
        >>> read_answer("mcp", {"action": "accept", "content": {"approve": True}})
        <Answer.APPROVE: 'approve'>
        >>> read_answer("mcp", {"action": "accept", "content": {"approve": "false"}})
        <Answer.INVALID: 'invalid'>
        >>> read_answer("mcp", {"action": "decline"})
        <Answer.REJECT: 'reject'>
        >>> read_answer("a2a", "Approve."), read_answer("a2a", "sure")
        (<Answer.APPROVE: 'approve'>, <Answer.INVALID: 'invalid'>)
        >>> read_answer("a2a", "approve only if README.md stays"), read_answer("a2a", "No, wait")
        (<Answer.INVALID: 'invalid'>, <Answer.REJECT: 'reject'>)
    """
    if protocol == "mcp":
        action = _field(answer, "action")
        if action in ("decline", "cancel"):
            return Answer.REJECT
        content = _field(answer, "content")
        if action != "accept" or not isinstance(content, Mapping):
            return Answer.INVALID
        return _boolean(content.get("approve"))
    if protocol == "acp":
        if answer is None:  # the client cancelled the permission request
            return Answer.REJECT
        return {"allow-once": Answer.APPROVE, "reject-once": Answer.REJECT}.get(
            answer, Answer.INVALID
        )
    if protocol == "a2a":
        if isinstance(answer, Mapping):
            return _boolean(answer.get("approve"))
        if not isinstance(answer, str) or not answer.strip():
            return Answer.INVALID
        words = answer.split()
        first = words[0].strip(".!,;:").lower()
        if first in _A2A_NO:
            return Answer.REJECT  # a no, whatever follows it, runs nothing
        # A yes is the word alone: what follows it may be a condition ("approve if ...",
        # "yes, but not src/") that the approval could not honour.
        if len(words) == 1 and words[0].rstrip(".!").lower() in _A2A_YES:
            return Answer.APPROVE
        return Answer.INVALID
    raise ValueError(f"no answer schema for protocol {protocol!r}; expected mcp, acp or a2a")


def invalid_answer(req: ApprovalRequest, protocol: str, expected: str) -> PolicyError:
    """The error a door raises for an answer :func:`read_answer` found invalid: the act
    is not run (nothing is committed) and the client is told what a valid answer is."""
    return PolicyError(
        "APPROVAL_ANSWER_INVALID",
        f"the {protocol} client's answer to the approval of {req.summary()} is neither a "
        "yes nor a no in the question's schema; nothing was run",
        recoverable=True,
        required_action=f"Answer with {expected}, then call again.",
        details={"tool": req.tool, "request_id": req.id},
    )


_A2A_YES = frozenset({"approve", "approved", "allow", "yes", "y"})
_A2A_NO = frozenset({"reject", "rejected", "deny", "no", "n"})


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _boolean(value: Any) -> Answer:
    # ``bool`` only: 1 and "true" are not booleans in a JSON schema, and a client that
    # sends them did not follow the schema it was given.
    if value is True:
        return Answer.APPROVE
    if value is False:
        return Answer.REJECT
    return Answer.INVALID


@runtime_checkable
class Approver(Protocol):
    """Decides on destructive acts. ``request`` blocks until there is a decision."""

    def request(self, req: ApprovalRequest) -> Decision: ...


class CallbackApprover:
    """A function decides: ``fn(request) -> bool`` (or a :class:`Decision`)."""

    def __init__(self, fn: Callable[[ApprovalRequest], bool | Decision], *, by: str = "callback"):
        self.fn = fn
        self.by = by

    def request(self, req: ApprovalRequest) -> Decision:
        out = self.fn(req)
        if isinstance(out, Decision):
            return out
        return Decision(approved=bool(out), by=self.by, request_id=req.id)


class DenyAllApprover:
    """Refuses everything (the default when no human is available)."""

    def request(self, req: ApprovalRequest) -> Decision:
        return Decision(False, by="no-approver", note="no approver configured", request_id=req.id)


class TerminalApprover:
    """Asks on the terminal; refuses when there is no terminal to ask on."""

    def __init__(self, *, by: str | None = None, stdin: Any = None, stdout: Any = None) -> None:
        import getpass

        self.by = by or getpass.getuser()
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stderr

    def request(self, req: ApprovalRequest) -> Decision:
        if not getattr(self.stdin, "isatty", lambda: False)() and self.stdin is sys.stdin:
            return Decision(
                False, by="no-terminal", note="no terminal to ask on", request_id=req.id
            )
        self.stdout.write(f"\nctxnb: approve destructive act?\n  {req.summary()}\n[y/N] ")
        self.stdout.flush()
        answer = (self.stdin.readline() or "").strip().lower()
        return Decision(answer in ("y", "yes"), by=self.by, request_id=req.id)


class _Queue:
    """What the views of one :class:`QueueApprover` share: the pending requests (each
    with the owner that asked), the decisions, the listeners and the history."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[str, tuple[ApprovalRequest, threading.Event, str | None]] = {}
        self.decisions: dict[str, tuple[Decision, str | None]] = {}
        self.listeners: list[Callable[[], None]] = []
        self.history: list[tuple[ApprovalRequest, Decision, str | None]] = []


class QueueApprover:
    """Pending requests wait here until a UI calls :meth:`decide`.

    ``request`` blocks the calling thread (an agent's worker thread) until a decision
    arrives or ``timeout`` passes (then it is refused). Listeners registered with
    :meth:`on_change` are called whenever the pending list changes, so a view can
    redraw.

    **Owners.** The queue itself is the workspace's own UI (the notebook's
    ``ApprovalPanel``, the person at the workspace): it lists and decides every request.
    :meth:`for_owner` gives one asker (a client, a connection, a session) a view of the
    same queue: what it asks through the view is its own, and it lists, reads and decides
    only its own; another owner's request is not found, exactly as one that does not
    exist.

    Example:
        >>> import threading
        >>> q = QueueApprover(timeout=5)
        >>> req = ApprovalRequest.new("run_command", {"cmd": "git clean -fdx"}, "deletes files")
        >>> asked = threading.Event()
        >>> q.on_change(asked.set)
        >>> t = threading.Thread(target=lambda: asked.wait(5) and q.decide(req.id, True, by="ana"))
        >>> t.start()
        >>> q.request(req).by
        'ana'
        >>> a, b = q.for_owner("client-a"), q.for_owner("client-b")
        >>> _ = a.submit(ApprovalRequest.new("delete_file", {"path": "x"}, "deletes x"))
        >>> len(a.pending()), len(b.pending()), len(q.pending())
        (1, 0, 1)
    """

    def __init__(self, *, timeout: float | None = 300.0) -> None:
        self.timeout = timeout
        self._queue = _Queue()
        self.owner: str | None = None  # None: the workspace's own UI, which sees all

    def for_owner(self, owner: str) -> QueueApprover:
        """A view of this queue for ``owner``: it asks as ``owner`` and lists, reads and
        decides only ``owner``'s requests (see the class).

        Raises:
            ValueError: an empty owner (it would name nobody in particular).
        """
        if not owner:
            raise ValueError("an approval's owner must be a non-empty name")
        view = QueueApprover(timeout=self.timeout)
        view._queue, view.owner = self._queue, owner
        return view

    def _sees(self, owner: str | None) -> bool:
        return self.owner is None or owner == self.owner

    def pending(self) -> list[ApprovalRequest]:
        """The requests waiting for a decision that this view may see."""
        with self._queue.lock:
            return [r for r, _, o in self._queue.pending.values() if self._sees(o)]

    @property
    def history(self) -> list[tuple[ApprovalRequest, Decision]]:
        """The decided requests this view may see, with their decisions, oldest first."""
        with self._queue.lock:
            return [(r, d) for r, d, o in self._queue.history if self._sees(o)]

    def on_change(self, fn: Callable[[], None]) -> None:
        self._queue.listeners.append(fn)

    def _changed(self) -> None:
        for fn in list(self._queue.listeners):
            try:
                fn()
            except Exception:  # a broken view must not break the agent
                pass

    def submit(self, req: ApprovalRequest) -> threading.Event:
        """Queue a request (as this view's owner) without waiting; returns the event set
        on decision.

        Raises:
            PolicyError: ``DIFF_TOO_LONG``: the request's question
                (:func:`approval_question`) is too long to ask; it is not queued.
        """
        approval_question(req)  # a UI shows this question: past its bound, none is asked
        ev = threading.Event()
        with self._queue.lock:
            self._queue.pending[req.id] = (req, ev, self.owner)
        self._changed()
        return ev

    def result(self, request_id: str) -> Decision | None:
        """The decision on a request this view may see, or None."""
        with self._queue.lock:
            got = self._queue.decisions.get(request_id)
        return got[0] if got is not None and self._sees(got[1]) else None

    def request(self, req: ApprovalRequest) -> Decision:
        ev = self.submit(req)
        if not ev.wait(self.timeout):
            with contextlib.suppress(KeyError):  # decided just now: that decision stands
                self.decide(req.id, False, by="timeout", note=f"no decision within {self.timeout}s")
        with self._queue.lock:
            return self._queue.decisions[req.id][0]

    def decide(self, request_id: str, approved: bool, *, by: str, note: str = "") -> Decision:
        """Record a decision for a pending request this view may see and wake the
        waiting call.

        Raises:
            KeyError: when no such request is pending, or it is another owner's (the
                same error: another's request is not found).
        """
        with self._queue.lock:
            entry = self._queue.pending.get(request_id)
            if entry is None or not self._sees(entry[2]):
                raise KeyError(f"no pending approval request {request_id!r}")
            req, ev, owner = self._queue.pending.pop(request_id)
            d = Decision(approved, by=by, note=note, request_id=request_id)
            self._queue.decisions[request_id] = (d, owner)
            self._queue.history.append((req, d, owner))
        ev.set()
        self._changed()
        return d
