"""The hook engine: every governed tool call passes ordered pre and post policies.

When a workspace has ``.orchestration/``, ``ws.tools(session)`` returns file tools
wired to a :class:`HookEngine`. Before a call, the pre policies run in order and the
first that refuses stops it with a machine-readable error::

    circuit breaker → path policy → intent presence → intent validity → scope
    → risk → approval → optimistic lock

After a successful call the post policies run: ``record`` (the one recorder of a file
change, :mod:`ctxnb.govern.record`: mutation class, Agent Trace record, intent map),
then the quality loop (configured commands whose failures come back as structured
feedback). The audit line is written by the tools for every call.

Policies are small classes in two lists, ``engine.pre`` and ``engine.post``; add,
remove or reorder them::

    class NoFridayDeploys:
        name = "no-friday-deploys"

        def check(self, call, engine):
            if call.tool == "run_command" and "deploy" in call.args.get("cmd", ""):
                raise PolicyError("POLICY_REFUSED", "no deploys today", required_action="Wait.")

    engine.pre.insert(0, NoFridayDeploys())

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> from ctxnb.govern import init_governance
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "app.py").write_text("x = 1\\n")
    >>> _ = init_governance(root)
    >>> ws = Workspace.open(root)
    >>> tools = ws.tools(ws.session("s"), caller="docs")
    >>> tools.dispatch("write_file", {"path": "app.py", "content": "x = 2\\n"})["message"]
    'You must cite a valid active Intent ID before mutating tools.'
"""

from __future__ import annotations

import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, Field

from ..errors import PolicyError
from ..redaction.redactor import redact_text
from ..tools.call import ToolCall
from ..tools.filetools import FileTools
from ..tools.schemas import ToolInfo
from .approval import ApprovalRequest, Approver, Decision, args_summary
from .breaker import BreakerState
from .core import NO_INTENT_MESSAGE, in_scope
from .intents import Intent, IntentFile, intent_context, load_intents
from .ledger import ContributorType, TraceLedger
from .lessons import format_lesson, lessons_for, read_lessons
from .policies import (
    Approval,
    CircuitBreaker,
    IntentPresence,
    IntentValidity,
    OptimisticLock,
    PathPolicyCheck,
    PostPolicy,
    PrePolicy,
    QualityLoop,
    RecordPolicy,
    Risk,
    Scope,
    Sensitivity,
    policy_error,
)
from .record import FileChange, Origin, PendingRecord, Recorded, Recorder, classify

if TYPE_CHECKING:
    from ..access.door import Access
    from ..sandbox.commands import EngineCommands
    from ..session.core import Session
    from ..workspace import Workspace

log = logging.getLogger("ctxnb.govern.engine")

__all__ = [
    "NO_INTENT_MESSAGE",
    "HookEngine",
    "PostPolicy",
    "PrePolicy",
    "governed_tools",
]

_NOT_FAILURES = frozenset(
    {
        "CIRCUIT_OPEN",
        "STALE_FILE",
        "NO_ACTIVE_INTENT",
        "INVALID_INTENT",
        "READ_BEFORE_WRITE",
        "DESTRUCTIVE_NEEDS_APPROVAL",
        "APPROVAL_REJECTED",
        # An MCP 2026-07-28 call stopped to ask its user: the answer comes with its retry.
        "APPROVAL_PENDING",
    }
)


# -- the engine ------------------------------------------------------------------------------------
class SelectIntentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    intent_id: str = Field(description="The id of an active intent in active_intents.yaml.")


class HookEngine:
    """Ordered pre and post policies around the file tools of one session.

    Args:
        workspace: a governed workspace (one with ``.orchestration/``).
        approver: decides destructive acts; None refuses them with
            ``DESTRUCTIVE_NEEDS_APPROVAL``.
        model_id: recorded as the contributor's model in the trace.
        contributor_type: ``ai`` (default), ``human``, ``mixed`` or ``unknown``.
        clock: returns the current time (a seam for tests).
    """

    def __init__(
        self,
        workspace: Access,
        *,
        approver: Approver | None = None,
        model_id: str | None = None,
        contributor_type: ContributorType = "ai",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        gov = workspace.config.governance
        self.workspace = workspace
        self.root = Path(workspace.root)
        self.dir = self.root / ".orchestration"
        self.approver = approver
        self.clock = clock or (lambda: datetime.now(UTC))
        self.unknown_command = gov.unknown_command
        self.safe_commands = set(gov.safe_commands)
        self.quality_commands = list(gov.quality_commands)
        self.breaker_threshold = gov.breaker_threshold
        self.command_timeout = gov.command_timeout
        self.ledger = TraceLedger(self.dir / "agent_trace.jsonl")
        # Who the changes are by lives in the recorder (model_id and contributor_type
        # below read and set it there): one place, whichever way a change comes.
        self.recorder = Recorder(
            self.root,
            ledger=self.ledger,
            model_id=model_id or gov.model_id,
            contributor_type=contributor_type,
            clock=clock,
        )
        self.pre: list[PrePolicy] = [
            CircuitBreaker(),
            PathPolicyCheck(),
            IntentPresence(),
            IntentValidity(),
            Scope(),
            Sensitivity(),
            Risk(),
            Approval(),
            OptimisticLock(),
        ]
        self.post: list[PostPolicy] = [RecordPolicy(), QualityLoop()]
        self.active_intent_id: str | None = None
        # Counts live on disk: a restarted kernel or a new hook process keeps them.
        self.breaker = BreakerState(self.root / ".ctxnb" / "breaker.json")
        self.sensitive = list(workspace.config.policy.sensitive)
        self._sensitive_ok: set[tuple[str, str]] = set()
        self.decisions: list[tuple[ApprovalRequest, Decision]] = []
        self._intents: IntentFile | None = None
        self._intents_mtime: float | None = None
        self._intents_path = os.path.join(self.dir, "active_intents.yaml")
        self._commands: EngineCommands | None = None
        self.tools: FileTools  # set by governed_tools()
        # Write partitioning (ctxnb.govern.partition): this session's lease on its scope.
        self.overlap = gov.overlap
        self.overlap_strict = gov.overlap_strict
        self.lease_minutes = gov.lease_minutes
        self._leased_at: float | None = None
        # Releases the lease when the session is garbage collected without close().
        self._lease_finalizer: weakref.finalize[Any, Any] | None = None
        # The session the lease is held under when it is not this one's: a Claude Code
        # session's confined command runs in its own ctxnb session (claude-code-<id>)
        # but under the Claude Code session's lease, which it refreshes, never releases.
        self.lease_session: str | None = None
        # A worker (spawn_worker): its supervisor's session and its narrowed scope.
        self.parent_session: str | None = None
        # Its supervisors up the chain, the first one first (the parent is the last).
        self.supervisors: list[str] = []
        self.narrowed_scope: list[str] | None = None
        self.workers: list[str] = []

    @property
    def model_id(self) -> str | None:
        """The model recorded as the contributor of the changes."""
        return self.recorder.model_id

    @model_id.setter
    def model_id(self, value: str | None) -> None:
        self.recorder.model_id = value

    @property
    def contributor_type(self) -> ContributorType:
        """Who the changes are recorded as by: ``ai``, ``human``, ``mixed``, ``unknown``."""
        return self.recorder.contributor_type

    @contributor_type.setter
    def contributor_type(self, value: ContributorType) -> None:
        self.recorder.contributor_type = value

    # -- intents -------------------------------------------------------------------------------
    def intents(self) -> IntentFile:
        """The intents, reloaded when ``active_intents.yaml`` changes."""
        path = self._intents_path  # a string: one stat per call, without pathlib
        try:
            mtime = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            return IntentFile()
        if self._intents is None or mtime != self._intents_mtime:
            self._intents = load_intents(Path(path))
            self._intents_mtime = mtime
        return self._intents

    def current_intent(self, call: ToolCall | None = None) -> Intent | None:
        """The selected intent; with ``call``, the one its policies saw (one lookup)."""
        if self.active_intent_id is None:
            return None
        if call is not None and "_intent" in call.context:
            return call.context["_intent"]  # type: ignore[no-any-return]
        found = self.intents().find(self.active_intent_id)
        intent = None if found is None else self.narrow(found)
        if call is not None:
            call.context["_intent"] = intent
        return intent

    def narrow(self, intent: Intent) -> Intent:
        """``intent`` as this session may act under it: a worker's has its narrowed scope.

        Every policy that asks for the selected intent gets it through here, so no path
        hands a worker its supervisor's wider scope."""
        if self.narrowed_scope is None:
            return intent
        return intent.model_copy(update={"owned_scope": list(self.narrowed_scope)})

    def select_active_intent(self, intent_id: str) -> str:
        """The handshake: make ``intent_id`` the active intent; returns its context block.

        Raises:
            PolicyError: ``INVALID_INTENT`` for an unknown or inactive intent.
        """
        intent = self.intents().get(intent_id)
        if self.narrowed_scope is not None:
            if intent.id != self.active_intent_id:
                raise PolicyError(
                    "INVALID_INTENT",
                    f"this worker works under intent {self.active_intent_id} of its supervisor "
                    f"(session {self.parent_session}); it cannot select {intent.id}",
                    required_action=f"Select {self.active_intent_id}, or ask the supervisor.",
                )
            intent = intent.model_copy(update={"owned_scope": list(self.narrowed_scope)})
        self.claim_scope(intent.id, list(intent.owned_scope))
        self.active_intent_id = intent.id
        recent = list(self.ledger.records(intent_id=intent.id))[-10:]
        lessons = lessons_for(intent, read_lessons(self.dir / "AGENT.md"))
        return intent_context(intent, recent, lessons=lessons)

    # -- write partitioning ------------------------------------------------------------------------
    def indexed_files(self) -> list[str] | None:
        """The workspace-relative paths of the files the store holds a live version of
        (None: the workspace was never indexed)."""
        from .partition import indexed_files

        return indexed_files(self.workspace)

    def claim_scope(self, intent_id: str, scope: list[str]) -> None:
        """Take this session's lease on ``scope``, refused (or asked, per ``[governance]
        overlap``) when another live session holds an overlapping one."""
        from .partition import check_partition, lease_lock, write_lease

        session_id = self.lease_session or self.tools.session.session_id
        # A lease taken for a Claude Code session outlives this process (the session
        # goes on after its command): it is bound to no process, as the hook's are.
        bound = self.lease_session is None

        def take() -> None:
            write_lease(
                self.root, session_id, intent_id, scope, supervisors=self.supervisors, bound=bound
            )
            self._leased_at = time.time()
            if bound and (self._lease_finalizer is None or not self._lease_finalizer.alive):
                # A session dropped without close() would keep its scope from every
                # other session until this process ends: release it with the session.
                # The callback holds no reference to the session or this engine.
                from .partition import release_own_lease

                self._lease_finalizer = weakref.finalize(
                    self.tools.session, release_own_lease, str(self.root), session_id, os.getpid()
                )

        # The check and the write are one step under the lease lock: two sessions that
        # select overlapping intents at once cannot both pass the check.
        with lease_lock(self.root):
            err = (
                None
                if self.overlap == "allow"
                else check_partition(
                    self.root,
                    session_id,
                    intent_id,
                    scope,
                    files=self.indexed_files,
                    minutes=self.lease_minutes,
                    strict=self.overlap_strict,
                    supervisors=self.supervisors,
                )
            )
            if err is None:
                take()
                return
        if self.overlap != "ask" or self.approver is None:
            raise err
        # Asked outside the lock: a human may take minutes, and other sessions' checks
        # must not wait for the answer.
        req = ApprovalRequest.new(
            "select_active_intent",
            {"intent_id": intent_id},
            err.message,
            risk="SCOPE_OVERLAP",
            intent_id=intent_id,
            session_id=session_id,
        )
        decision = self.approver.request(req)
        self.decisions.append((req, decision))
        if not decision.approved:
            raise err
        with lease_lock(self.root):
            take()

    def hold_lease(self) -> None:
        """Take this session's lease on its active intent's scope again after
        :meth:`release` (a live agent between two prompts holds none).

        Raises:
            PolicyError: ``SCOPE_OVERLAP`` when another live session took an
                overlapping scope meanwhile.
        """
        if self._leased_at is not None or self.active_intent_id is None:
            return
        intent = self.current_intent()
        if intent is not None:
            self.claim_scope(intent.id, list(intent.owned_scope))

    def refresh_lease(self) -> None:
        """Keep this session's lease live; fail closed when it lapsed and another session
        took an overlapping scope meanwhile (the check runs again)."""
        if self._leased_at is None or self.active_intent_id is None:
            return
        if time.time() - self._leased_at < 30:
            return  # one small write per half minute is enough to stay live
        intent = self.current_intent()
        if intent is None:
            return
        self.claim_scope(intent.id, list(intent.owned_scope))

    def spawn_worker(
        self, *, scope: list[str], budget: int | None = None, session_id: str | None = None
    ) -> Session:
        """See :meth:`ctxnb.session.Session.spawn_worker`."""
        from .partition import check_subset
        from .worker import worker_context

        intent = self.current_intent()
        supervisor = self.tools.session
        if intent is None:
            raise PolicyError(
                "NO_ACTIVE_INTENT",
                f"session {supervisor.session_id} has no active intent to narrow a worker from",
                required_action="Select an intent with select_active_intent first.",
            )
        files = self.indexed_files() or []
        check_subset(intent.owned_scope, scope, files)
        ws = cast("Workspace", self.workspace)
        worker_id = session_id or f"{supervisor.session_id}.w{len(self.workers) + 1}"
        worker = ws.session(worker_id, rules=False)
        tools = ws.tools(
            worker,
            caller=f"{self.tools.caller}/worker",
            approver=self.approver,
            model_id=self.model_id,
            clock=self.clock,
        )
        child = tools.engine  # type: ignore[attr-defined]
        child.parent_session = supervisor.session_id
        child.supervisors = [*self.supervisors, supervisor.session_id]
        child.narrowed_scope = list(scope)
        child.active_intent_id = intent.id
        try:
            child.select_active_intent(intent.id)
        except BaseException:
            child.active_intent_id = None
            raise
        own = [f for f in files if in_scope(scope, f)]
        worker_context(supervisor, worker, child.current_intent() or intent, own, budget=budget)
        self.workers.append(worker_id)
        return worker

    def release(self) -> None:
        """Release this session's lease (its scope is free for other sessions)."""
        from .partition import release_lease

        if self._leased_at is not None and self.lease_session is None:
            if self._lease_finalizer is not None:
                self._lease_finalizer.detach()
                self._lease_finalizer = None
            release_lease(self.root, self.tools.session.session_id)
            self._leased_at = None

    # -- classification --------------------------------------------------------------------------
    def needs_intent(self, call: ToolCall) -> bool:
        # run_command is mutating whatever its risk: its sandbox is writable only in
        # the selected intent's scope, so without an intent there is nothing to run.
        return call.mutating

    def risk_of(self, call: ToolCall) -> dict[str, Any]:
        cached = call.context.get("_risk")
        if cached is not None:
            return cached
        if call.info is not None and call.info.external:
            # An outside server's tool: nothing of ours can undo it, so its own
            # destructiveHint decides whether a human is asked.
            reasons = [f"{call.tool} declares side effects that may destroy"]
            out: dict[str, Any] = (
                {"level": "DESTRUCTIVE", "reasons": reasons}
                if call.info.destructive
                else {"level": "SAFE", "reasons": []}
            )
        elif call.tool == "apply_merge":
            # Lines neither the agent nor the person who changed the file wrote as they
            # stand together: a human approves the merged file (ctxnb.tools.merging).
            out = {
                "level": "DESTRUCTIVE",
                "reasons": ["a merge proposal writes a three-way merge of a stale edit"],
            }
        elif call.tool != "run_command":
            out = {"level": "SAFE", "reasons": []}
        else:
            from ..shell.risk import classify_command

            intent = self.current_intent(call)
            scope = (lambda p: intent.in_scope(_scope_rel(p, self.root))) if intent else None
            r = classify_command(
                str(call.args.get("cmd", "")),
                scope_check=scope,
                unknown_default=self.unknown_command,
                safe_commands=self.safe_commands,
            )
            out = {"level": r.level, "reasons": list(r.reasons)}
        call.context["_risk"] = out
        return out

    def mutation_class(self, call: ToolCall) -> str | None:
        if "mutation_class" in call.context:
            return call.context["mutation_class"]
        if call.new_text is None or not call.paths:
            return None
        mc = classify(call.paths[0], call.old_text, call.new_text)
        call.context["mutation_class"] = mc
        return mc

    def record_changes(
        self,
        changes: Sequence[tuple[str, str | None, str | None, dict[str, Any]]],
        *,
        tool: str,
        caller: str,
        session_id: str | None,
        intent: Intent | None,
        metadata: dict[str, Any],
        waits: list[Callable[[], None]] | None = None,
    ) -> list[Recorded]:
        """Record changes already written and stored (``(path, old text, new text,
        metadata)`` each; a text None: no file) through :attr:`recorder`: the seam of
        the sandbox's commit, which does not import the governance it serves."""
        files = [FileChange(p, old=o, new=n, metadata=m) for p, o, n, m in changes]
        origin = Origin(
            tool, caller=caller, session_id=session_id, intent=intent, metadata=metadata
        )
        return self.recorder.record(files, origin, waits=waits)

    def prepare_change(
        self,
        change: tuple[str, str | None, str | None, dict[str, Any]],
        *,
        oid: str,
        store_dir: str | os.PathLike[str],
        tool: str,
        caller: str,
        session_id: str | None,
        intent: Intent | None,
        metadata: dict[str, Any],
    ) -> PendingRecord:
        """The trace record of a change about to be committed with its store version
        (object ``oid``), to go in the same log line (see :mod:`ctxnb.govern.tracewal`):
        the sandbox's commit makes both durable before it replaces the file."""
        path, old, new, meta = change
        origin = Origin(
            tool, caller=caller, session_id=session_id, intent=intent, metadata=metadata
        )
        return self.recorder.prepare_logged(
            FileChange(path, old=old, new=new, metadata=meta),
            origin,
            oid=oid,
            store_dir=store_dir,
        )

    def finish_change(self, pending: PendingRecord, tx_id: int) -> Recorded:
        """Append the record :meth:`prepare_change` made, committed in ``tx_id``."""
        return self.recorder.finish_logged(pending, tx_id)

    def context_metadata(self) -> dict[str, Any]:
        """The session's turn and the id (hash) of the context it last assembled: what
        the model saw when it asked for a change (``ctxnb why`` rebuilds it)."""
        session = self.tools.session
        last = session.last_context
        out: dict[str, Any] = (
            {"turn": session.turn} if last is None else {"turn": last[0], "context_id": last[1]}
        )
        if self.parent_session is not None:
            out["parent_session"] = self.parent_session
            if len(self.supervisors) > 1:
                out["supervisors"] = list(self.supervisors)  # a worker of a worker
        return out

    # -- the hooks the tools call ---------------------------------------------------------------
    def before(self, call: ToolCall) -> None:
        if self.active_intent_id is not None:
            call.context["intent_id"] = self.active_intent_id
            self.refresh_lease()
        try:
            for policy in self.pre:
                policy.check(call, self)
        except PolicyError as e:
            # Refusals that are the normal course of governed work (a lost race, a
            # missing handshake, a human saying no) do not trip the breaker.
            if e.error_code not in _NOT_FAILURES:
                self._count(call.tool, failed=True)
            raise
        if call.tool == "write_file" and any(isinstance(p, RecordPolicy) for p in self.post):
            call.attach = functools.partial(self._attach, call)

    def refused(self, call: ToolCall, error: PolicyError) -> None:
        """A refusal of the tool runner's own (``BUDGET_EXCEEDED``): a failure of the tool
        for the breaker, as a policy's refusal is, so an agent that keeps calling past its
        budget is stopped and a human looks."""
        if error.error_code not in _NOT_FAILURES:
            self._count(call.tool, failed=True)

    def _attach(self, call: ToolCall, oid: str) -> bytes | None:
        """The trace record of ``call``'s write, prepared to be committed with its store
        version (see :mod:`ctxnb.govern.tracewal`); None leaves it to the record policy."""
        if call.new_text is None or len(call.paths) != 1:
            return None
        # Prepared once: the write prepares it while its data is fsynced, then the store
        # version asks for it again.
        ready = call.context.get("_trace_pending")
        if ready is not None and ready.oid == oid:
            return ready.attachment
        try:
            change, origin = RecordPolicy.change_of(call, None, self)
            pending = self.recorder.prepare_logged(
                change,
                origin,
                oid=oid,
                store_dir=self.workspace.store.path,
                mutation_class=self.mutation_class(call),
            )
        except Exception:  # noqa: BLE001 - recorded by the record policy, as before
            return None
        call.context["_trace_pending"] = pending
        return pending.attachment

    def after(self, call: ToolCall, result: Any) -> list[dict[str, Any]]:
        from ..tools.results import PatchResult

        if isinstance(result, PatchResult) and not result.success:
            self._count(call.tool, failed=True)
            return []
        feedback: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for policy in self.post:
            try:
                feedback.extend(policy.run(call, result, self) or [])
            except Exception as e:  # the call already ran: what follows must still happen
                errors.append(policy_error(policy.name, e))
        wrote = call.new_text is not None and bool(call.paths)
        if errors and wrote and "trace_id" not in call.context:
            # The change is on disk: it is recorded whatever failed after it (unless
            # recording was taken out of engine.post on purpose).
            for policy in self.post:
                if isinstance(policy, RecordPolicy):
                    try:
                        policy.run(call, result, self)
                    except Exception as e:
                        errors.append(policy_error(policy.name, e))
        if errors:
            call.context["post_errors"] = errors
            feedback.extend(errors)
        failed = bool(errors) or bool(call.context.get("quality_failed"))
        self._count(call.tool, failed=failed)
        return feedback

    @property
    def failures(self) -> dict[str, int]:
        """Consecutive failures per tool (persisted in ``.ctxnb/breaker.json``)."""
        return self.breaker.counts()

    def _count(self, tool: str, *, failed: bool) -> None:
        try:
            self.breaker.record(tool, failed=failed)
        except OSError as exc:
            # A count that cannot be saved (a full disk) must not turn a change that is
            # on disk, stored and traced into a failed call, nor hide a refusal.
            log.warning("could not save the failure count of %s: %s", tool, exc)

    def reset_breaker(self, tool: str | None = None) -> None:
        """Close the circuit breaker of one tool (or of all), for every process."""
        self.breaker.reset(tool)

    # -- human decisions -------------------------------------------------------
    def ask(self, call: ToolCall, reason: str) -> Decision:
        """Ask the approver about ``call``; the decision is kept, and a refusal traced and
        recorded as a lesson by the caller's wording (see :class:`Approval`)."""
        assert self.approver is not None
        req = ApprovalRequest.new(
            call.tool,
            call.args,
            reason,
            intent_id=self.active_intent_id,
            caller=call.caller,
            session_id=call.session_id,
        )
        decision = self.approver.request(req)
        call.context["approval"] = decision.to_dict()
        diff = call.args.get("diff")
        if isinstance(diff, str):  # what the approver saw, by its hash, for the trace
            from ..hashing import sha256_hex

            call.context["approval"]["diff_sha256"] = sha256_hex(diff.encode("utf-8"))
        self.decisions.append((req, decision))
        if not decision.approved:
            self.trace_decision(call, req, decision)
        return decision

    # -- records ---------------------------------------------------------------
    def record_lesson(self, text: str, *, paths: Sequence[str] = ()) -> None:
        """Append a dated lesson to ``.orchestration/AGENT.md``, tagged with the active
        intent and the files concerned, so that it comes back to whoever works there next
        (see :mod:`ctxnb.govern.lessons`)."""
        when = f"{self.clock():%Y-%m-%d %H:%M}"
        # A lesson quotes the refused call (its command line) and names its files, and it
        # goes back to the next agent in its <intent_context>: both leave redacted.
        text, paths = redact_text(text), [redact_text(p) for p in paths]
        line = (
            format_lesson(when, text, intent_id=self.active_intent_id, paths=paths) + "\n"
        ).encode()
        fd = os.open(self.dir / "AGENT.md", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def trace_decision(self, call: ToolCall, req: ApprovalRequest, decision: Decision) -> None:
        """Record a human decision on a destructive act in the trace (no file changed)."""
        self._trace_no_files(call, {"approval": decision.to_dict(), "request": req.summary()})

    def trace_command(self, call: ToolCall) -> None:
        self._trace_no_files(call, {"approval": call.context.get("approval")})

    def _trace_no_files(self, call: ToolCall, meta: dict[str, Any]) -> None:
        from .ledger import build_event_record

        metadata = {
            "intent_id": self.active_intent_id or "unknown",
            "session_id": call.session_id,
            "tool": call.tool,
            "args": args_summary(call.args),
            "caller": call.caller,
            **meta,
        }
        self.ledger.append(
            build_event_record(metadata=metadata, repo_root=self.root, clock=self.clock)
        )

    # -- commands ---------------------------------------------------------------------
    @property
    def commands(self) -> EngineCommands:
        """This engine's commands: the ``run_command`` tool, the sandbox of the selected
        intent and the commit of what a command changed (:mod:`ctxnb.sandbox.commands`)."""
        if self._commands is None:
            from ..sandbox.commands import EngineCommands

            self._commands = EngineCommands(self)
        return self._commands

    def select_intent_tool(self, intent_id: str) -> str:
        return self.tools.run_call(
            "select_active_intent",
            {"intent_id": intent_id},
            lambda call: self.select_active_intent(intent_id),
        )

    def __repr__(self) -> str:
        return f"<HookEngine {self.root} intent={self.active_intent_id!r}>"


def _scope_rel(path: str, root: Path) -> str:
    p = path
    if os.path.isabs(p):
        try:
            return os.path.relpath(p, root)
        except ValueError:
            return p
    return p[2:] if p.startswith("./") else p


class GovernedTools(FileTools):
    """File tools whose every call passes a :class:`HookEngine`: ``tools.engine``.

    The engine is the tools' ``hooks`` and is handed in, typed, when the tools are made
    (by :func:`governed_tools`); it knows its tools back (``engine.tools``).
    """

    def __init__(
        self, workspace: Access, session: Session, *, engine: HookEngine, **kwargs: Any
    ) -> None:
        super().__init__(workspace, session, hooks=engine, **kwargs)
        self.engine: HookEngine = engine
        engine.tools = self


def engine_of(tools: FileTools) -> HookEngine:
    """The governance engine behind ``tools``.

    Raises:
        PolicyError: ``tools`` are not governed (the workspace has no ``.orchestration/``).
    """
    if isinstance(tools, GovernedTools):
        return tools.engine
    raise PolicyError(
        "NOT_GOVERNED",
        "these file tools are not governed: the workspace has no .orchestration/",
        recoverable=False,
        required_action="Run `ctxnb init-governance` in the workspace (a human does), "
        "then open the tools again.",
    )


def governed_tools(
    workspace: Access,
    session: Session,
    *,
    caller: str = "agent",
    profile: str | None = None,
    approver: Approver | None = None,
    model_id: str | None = None,
    clock: Callable[[], datetime] | None = None,
    **kwargs: Any,
) -> GovernedTools:
    """File tools of ``session`` wired to a new :class:`HookEngine` (``tools.engine``).

    ``select_active_intent`` and ``run_command`` become tools of ``dispatch`` too. One
    ``clock`` times the audit lines, the trace records and the lessons.
    """
    held = session.governor
    if isinstance(held, HookEngine) and held.narrowed_scope is not None:
        # A worker keeps the tools it was spawned with: opening them again must not
        # hand it an engine without its narrowed scope.
        return held.tools  # type: ignore[return-value]
    engine = HookEngine(workspace, approver=approver, model_id=model_id, clock=clock)
    tools = GovernedTools(
        workspace, session, engine=engine, caller=caller, profile=profile, clock=clock, **kwargs
    )
    tools.register_tool(
        ToolInfo(
            name="select_active_intent",
            description="Declare the intent you are working under before any mutating tool. "
            "Returns the intent's scope, constraints and acceptance criteria.",
            args=SelectIntentArgs,
            mutating=False,
            idempotent=True,
        ),
        engine.select_intent_tool,
    )
    from ..sandbox.commands import RUN_COMMAND

    tools.register_tool(RUN_COMMAND, engine.commands.tool)
    session.governor = engine
    return tools
