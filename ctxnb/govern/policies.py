"""The pre and post policies a governed tool call passes (:mod:`ctxnb.govern.engine`).

A pre policy's ``check`` runs before the call and raises
:class:`~ctxnb.errors.PolicyError` to refuse it; a post policy's ``run`` runs after a
successful call and returns feedback items for the result. The
:class:`~ctxnb.govern.engine.HookEngine` holds them in ``engine.pre`` and ``engine.post``,
in this order::

    circuit breaker → path policy → intent presence → intent validity → scope
    → sensitivity → risk → approval → optimistic lock
    record → quality loop
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import NotFoundError, PolicyError
from ..redaction.redactor import redact, redact_text
from ..tools.call import ToolCall
from .approval import args_summary
from .core import check_scope, in_scope, require_intent
from .record import FileChange, Origin

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..tools.merging import MergeProposal
    from .engine import HookEngine
    from .record import PendingRecord

log = logging.getLogger("ctxnb.govern")

__all__ = [
    "Approval",
    "CircuitBreaker",
    "IntentPresence",
    "IntentValidity",
    "OptimisticLock",
    "PathPolicyCheck",
    "PostPolicy",
    "PrePolicy",
    "QualityLoop",
    "RecordPolicy",
    "Risk",
    "Scope",
    "Sensitivity",
    "policy_error",
    "run_quality",
]

_PATH_ARGS = ("path", "doc_path")


def _path_values(call: ToolCall) -> list[tuple[str, str]]:
    """Every path a call names: its path arguments and the extra targets the tool found
    (a rename diff's destination), each under its key in ``call.resolved``."""
    out = [(key, v) for key in _PATH_ARGS if isinstance(v := call.args.get(key), str)]
    out += [(f"target:{k}", v) for k, v in enumerate(call.context.get("targets", ()))]
    return out


class PrePolicy(Protocol):
    """Runs before a call; raises :class:`~ctxnb.errors.PolicyError` to refuse it."""

    name: str

    def check(self, call: ToolCall, engine: HookEngine) -> None: ...


class PostPolicy(Protocol):
    """Runs after a successful call; may return feedback items for the result."""

    name: str

    def run(self, call: ToolCall, result: Any, engine: HookEngine) -> list[dict[str, Any]]: ...


# -- pre policies ------------------------------------------------------------------------------
class CircuitBreaker:
    """After ``threshold`` consecutive failures of one tool, refuse it until reset."""

    name = "circuit-breaker"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        n = engine.breaker.get(call.tool)
        if n >= engine.breaker_threshold:
            raise PolicyError(
                "CIRCUIT_OPEN",
                f"{call.tool} failed {n} times in a row; the circuit breaker is open",
                recoverable=False,
                required_action="A human must look at the failures and reset the breaker "
                "(engine.reset_breaker()).",
            )


class PathPolicyCheck:
    """Every path argument passes the workspace path policy."""

    name = "path-policy"
    KINDS = "_path_kinds"
    """``call.context`` key: what the look found at each path argument (``"missing"``,
    ``"file"``, ``"dir"``), by its key in ``call.resolved``."""

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        kinds = call.context.setdefault(self.KINDS, {})
        for key, value in _path_values(call):
            # Resolved once, here; the scope check and the tool use call.resolved, the
            # optimistic lock what the look found there (this call's, never another's).
            sp, kinds[key] = engine.tools.resolve_kind(value, for_write=call.mutating)
            call.resolved[key] = sp


class IntentPresence:
    """A mutating call needs a prior ``select_active_intent``."""

    name = "intent-presence"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        if engine.needs_intent(call) and engine.active_intent_id is None:
            require_intent(
                None,
                [i.id for i in engine.intents().active()],
                how_to_select="Call select_active_intent(intent_id) with one of them.",
            )


class IntentValidity:
    """The selected intent must still exist and be active."""

    name = "intent-validity"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        if engine.needs_intent(call) and engine.active_intent_id is not None:
            # get() raises INVALID_INTENT; narrow() gives a worker its narrowed scope.
            intent = engine.narrow(engine.intents().get(engine.active_intent_id))
            call.context["intent_id"] = intent.id
            call.context["_intent"] = intent  # the call's later policies ask again


class Scope:
    """The target of a file mutation must lie in the intent's owned scope."""

    name = "scope"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        if not call.mutating or call.tool == "run_command":
            return
        intent = engine.current_intent(call)
        if intent is None:
            return
        for key, value in _path_values(call):
            sp = call.resolved.get(key)
            if sp is None:  # the path policy was taken out of engine.pre
                sp = engine.tools.resolve(value, for_write=True)
            check_scope(intent, sp.rel)


class Sensitivity:
    """Reading or writing a file marked sensitive (``[policy] sensitive``) waits for a human.

    An approval holds for that file and that kind of access for the rest of the session.
    """

    name = "sensitivity"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        if not engine.sensitive:
            return
        mode = "write" if call.mutating else "read"
        for key, value in _path_values(call):
            sp = call.resolved.get(key)
            rel = (sp or engine.tools.resolve(value, for_write=call.mutating)).rel
            if not in_scope(tuple(engine.sensitive), rel) or (rel, mode) in engine._sensitive_ok:
                continue
            reason = f"{rel} is marked sensitive; {mode} needs a human's approval"
            if engine.approver is None:
                raise PolicyError(
                    "SENSITIVE_NEEDS_APPROVAL",
                    f"{call.tool} would {mode} {rel}, which is marked sensitive, and no human "
                    "approver is connected",
                    recoverable=True,
                    required_action="Ask a human, or connect an approver (notebook "
                    "ApprovalPanel, terminal, or MCP elicitation).",
                    details={"path": rel, "access": mode},
                )
            decision = engine.ask(call, reason)
            if not decision.approved:
                raise PolicyError(
                    "APPROVAL_REJECTED",
                    f"{decision.by} refused to let {call.tool} {mode} {rel}"
                    + (f" ({decision.note})" if decision.note else ""),
                    recoverable=True,
                    required_action="Do not retry; work without this file or ask the human.",
                    details={"decision": decision.to_dict(), "path": rel},
                )
            engine._sensitive_ok.add((rel, mode))


class Risk:
    """Classify commands as SAFE or DESTRUCTIVE (file tools are SAFE: they keep versions)."""

    name = "risk"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        call.context["risk"] = engine.risk_of(call)


class Approval:
    """A DESTRUCTIVE act waits for a human decision; a refusal stops it."""

    name = "approval"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        if call.tool == "run_command":
            # A command's text decides nothing (its risk is an early warning in the
            # result): what it did is approved after it ran, with the real diff
            # (ctxnb.sandbox.commit).
            return
        risk = call.context.get("risk") or engine.risk_of(call)
        if risk["level"] != "DESTRUCTIVE":
            return
        reason = "; ".join(risk["reasons"]) or "destructive"
        if engine.approver is None:
            raise PolicyError(
                "DESTRUCTIVE_NEEDS_APPROVAL",
                f"{call.tool} is destructive ({reason}) and no human approver is connected",
                recoverable=True,
                required_action="Ask a human to run it, or connect an approver "
                "(notebook ApprovalPanel, terminal, or MCP elicitation).",
                details={"reasons": risk["reasons"]},
            )
        if call.tool == "apply_merge":
            # The human is shown the diff ctxnb computes from the bytes (never the
            # agent's words): the file now against the merged text.
            diff, notes = merge_diff(engine, str(call.args.get("proposal_id", "")))
            reason = "; ".join([reason, *notes])
            call.args["diff"] = diff
            try:
                decision = engine.ask(call, reason)
            finally:
                call.args.pop("diff", None)
        else:
            decision = engine.ask(call, reason)
        if not decision.approved:
            engine.record_lesson(
                f"{call.tool}({args_summary(call.args)}) was refused by {decision.by}"
                + (f": {decision.note}" if decision.note else ""),
                paths=[sp.rel for sp in call.resolved.values()],
            )
            raise PolicyError(
                "APPROVAL_REJECTED",
                f"{decision.by} rejected {call.tool}: {reason}"
                + (f" ({decision.note})" if decision.note else ""),
                recoverable=True,
                required_action="Do not retry the same act; find a non-destructive way or "
                "ask the human what they want instead.",
                details={"decision": decision.to_dict()},
            )


def merge_diff(engine: HookEngine, proposal_id: str) -> tuple[str, list[str]]:
    """The approval diff of a merge proposal (from the file it was made against to the
    merged text, as :mod:`ctxnb.sandbox.review` builds it from the bytes) and what the
    redaction hides in it."""
    return proposal_diff(engine.tools.merge_proposal(proposal_id))


def proposal_diff(proposal: MergeProposal) -> tuple[str, list[str]]:
    """:func:`merge_diff` of ``proposal`` itself: what the human approves (``ctxnb merge
    show`` prints it, ``accept --expect`` is given its SHA-256)."""
    from ..redaction.redactor import redact_text
    from ..sandbox.review import file_diff, redaction_notes

    if proposal.merged is None:
        raise PolicyError(
            "MERGE_UNRESOLVED",
            f"merge proposal {proposal.id} of {proposal.path} has {proposal.conflicts} "
            "unresolved conflict(s); it is never written",
            required_action="Read the file again and redo the edit, or ask the user.",
        )
    shown = redact_text(proposal.path)
    d = file_diff(
        proposal.theirs,
        proposal.merged.encode("utf-8"),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
    )
    return d.text or f"--- a/{shown}\n+++ b/{shown}\n", redaction_notes(d.hidden, d.spans)


class OptimisticLock:
    """The hash the agent read must equal the file's hash now, else ``STALE_FILE``.

    The comparison itself runs inside the tool, under the file's write lock, where it is
    atomic with the write (``FileSources.check_lock``); comparing here as well would read
    and hash the file twice and still race. This policy refuses early what can never
    pass: an edit of an existing file with no base hash at all (``READ_BEFORE_WRITE``).
    """

    name = "optimistic-lock"

    def check(self, call: ToolCall, engine: HookEngine) -> None:
        if call.tool not in ("write_file", "apply_patch", "write_patch"):
            return
        if call.tool == "write_file" and call.args.get("mode") == "create":
            return
        path = call.args.get("path") or call.args.get("doc_path")
        if not isinstance(path, str):
            return
        tools = engine.tools
        key = "doc_path" if call.tool == "write_patch" else "path"
        sp = call.resolved.get(key)
        rel = sp.rel if sp is not None else tools.resolve(path).rel
        expected = call.args.get("expected_sha256") or call.args.get("original_sha256")
        # Whether the file exists, as the path policy's look found it in this call: an
        # early answer only (the tool compares under the file's lock, whatever it says),
        # so the one it would refuse on is looked at again first.
        kind = call.context.get(PathPolicyCheck.KINDS, {}).get(key) if sp is not None else None
        if kind == "missing":
            return  # a new file: nothing to be stale against
        if kind == "file":
            try:
                tools.lock_base(rel, expected, call.tool)
                return
            except PolicyError:
                pass  # looked at again before refusing: the file may be gone by now
        try:
            tools.policy.stat(rel)
        except NotFoundError:
            return  # a new file: nothing to be stale against
        tools.lock_base(rel, expected, call.tool)


# -- post policies ------------------------------------------------------------------------------
class RecordPolicy:
    """Record the call's file change (:mod:`ctxnb.govern.record`): mutation class, Agent
    Trace record, intent map; a call that changed no file but needs a trace (an approved
    command, an outside server's mutating tool) gets an event record."""

    name = "record"

    def run(self, call: ToolCall, result: Any, engine: HookEngine) -> list[dict[str, Any]]:
        if call.new_text is None or not call.paths:
            if call.tool == "run_command" and call.context.get("approval"):
                engine.trace_command(call)
            elif call.info is not None and call.info.external and call.mutating:
                engine.trace_command(call)  # a change outside the workspace, still traced
            return []
        pending = call.context.get("_trace_pending")
        if pending is not None and call.logged_tx is not None:
            # Committed with the store version, in its log line, whose fsync the write
            # waited for before its rename. The ledger line (one write, no fsync) must
            # never name a version that is not durable: it is appended after that
            # fsync's wait, among the call's durable waits, before the call returns.
            call.context["trace_id"] = pending.recorded.trace_id
            call.durable_waits.append(
                functools.partial(
                    _finish_logged,
                    engine,
                    pending,
                    call.logged_tx,
                    call.context.get("_log_durable"),
                )
            )
            return []
        change, origin = self.change_of(call, getattr(result, "version_id", None), engine)
        # Durable before the tool call returns (FileTools waits for it after recording
        # the call), not before the next policy runs: the fsync overlaps with that work.
        done = engine.recorder.record(
            [change],
            origin,
            waits=call.durable_waits,
            mutation_classes=[engine.mutation_class(call)],
        )
        call.context["trace_id"] = done[0].trace_id
        return []

    @staticmethod
    def change_of(
        call: ToolCall, version: str | None, engine: HookEngine
    ) -> tuple[FileChange, Origin]:
        """The call's change (its first path) and who made it, as the trace records them."""
        rel = call.paths[0]
        # The scope policy let it through (a write outside the scope never runs).
        meta: dict[str, Any] = {"scope": "in-scope", **engine.context_metadata()}
        if call.context.get("approval"):
            meta["approval"] = call.context["approval"]
        if call.context.get("merged_from"):  # a merge proposal's three sides, by hash
            meta["merged_from"] = call.context["merged_from"]
        change = FileChange(
            rel,
            old=call.old_text,
            new=call.new_text,
            metadata={"version_id": version} if version else None,
        )
        intent = engine.current_intent(call)
        origin = Origin(
            call.tool,
            caller=call.caller,
            session_id=call.session_id,
            intent=intent,
            intent_id=call.context.get("intent_id") or engine.active_intent_id,
            metadata=meta,
        )
        return change, origin


def _finish_logged(
    engine: HookEngine,
    pending: PendingRecord,
    tx: int,
    log_durable: Callable[[], None] | None,
) -> None:
    if log_durable is not None:
        log_durable()  # raises if the log line is not durable: no ledger line then
    try:
        engine.recorder.finish_logged(pending, tx)
    except Exception as exc:  # noqa: BLE001 - the change and its record are durable
        # The record is in the store's log; the next restore appends it to the ledger.
        log.warning(
            "trace record %s of %s is in the store log, not yet in the ledger (%s); "
            "`ctxnb trace verify` appends it",
            pending.recorded.trace_id,
            redact_text(pending.recorded.path),
            redact_text(str(exc)),  # a log is an exit too
        )


class QualityLoop:
    """Run the configured quality commands; failures become structured feedback."""

    name = "quality-loop"

    def run(self, call: ToolCall, result: Any, engine: HookEngine) -> list[dict[str, Any]]:
        if call.new_text is None or not engine.quality_commands:
            return []
        # What the commands change is recorded after this call's own change.
        call.wait_durable()
        feedback = run_quality(
            engine, session_id=call.session_id, after=call.tool, paths=call.paths
        )
        if feedback:
            call.context["quality_failed"] = True
        return feedback


def run_quality(
    engine: HookEngine,
    *,
    session_id: str | None,
    after: str,
    paths: Sequence[str] = (),
    budget: float | None = None,
) -> list[dict[str, Any]]:
    """Run ``engine.quality_commands`` in the engine's sandbox, one after the other, and
    return each failure as ``{kind: "quality", command, returncode, output}`` (a lesson
    is recorded when any failed). The one quality loop of every door: the engine's
    post policy and the Claude Code post-tool-use hook.

    Args:
        engine: the governing engine (its sandbox, its intent, its lessons).
        session_id: the session the commands run for (their trace records name it).
        after: the tool whose change the commands check (named in the lesson).
        paths: the files it changed.
        budget: seconds for all the commands together (each is also bounded by
            ``command_timeout``); a command the budget leaves no time for is a failure
            that says it did not run, never a silent pass. None: no overall bound.
    """
    import time

    deadline = None if budget is None else time.monotonic() + budget
    feedback: list[dict[str, Any]] = []
    for cmd in engine.quality_commands:
        timeout = engine.command_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left < 1.0:
                feedback.append(
                    {
                        "kind": "quality",
                        "command": cmd,
                        "returncode": None,
                        "output": f"not run: the quality commands' {budget:g} s ran out "
                        "before it; run it yourself and fix what it reports",
                    }
                )
                continue
            timeout = min(timeout, left)
        # Confined like any command; what it changes is traced or put back.
        res = engine.commands.run(
            cmd,
            shell=True,
            session_id=session_id,
            caller="quality-loop",
            tool="quality",
            timeout=timeout,
        )
        if res["returncode"] != 0 or res.get("timed_out"):
            out = (res["stdout"] + res["stderr"])[-2000:]
            if res.get("timed_out"):
                out += f"\n(stopped after {timeout:g} s)"
            feedback.append(
                {
                    "kind": "quality",
                    "command": cmd,
                    "returncode": res["returncode"],
                    "output": redact(out).text,
                }
            )
    if feedback:
        engine.record_lesson(
            f"after {after}: "
            + "; ".join(f"`{f['command']}` failed ({f['returncode']})" for f in feedback),
            paths=paths,
        )
    return feedback


def policy_error(name: str, e: Exception) -> dict[str, Any]:
    """A post policy's failure as the agent and the audit see it."""
    code = e.error_code if isinstance(e, PolicyError) else "POST_POLICY_FAILED"
    return {
        "kind": "policy-error",
        "policy": name,
        "error_code": code,
        "message": redact_text(f"{type(e).__name__}: {e}"),
    }
