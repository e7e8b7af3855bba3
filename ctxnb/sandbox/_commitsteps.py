"""The two steps of a command's commit: the approver's look, then the governed writes.

:class:`ctxnb.sandbox.commit.CommandEffects` plans a command's changes and checks them
for conflicts; these are the steps after that, functions of the engine it is given.
:func:`approve` shows a destructive change's real diff to the approver (or holds it for
``ctxnb sandbox commit ID``), and :func:`commit_all` writes each change through the
access layer's descriptor walk and hands it to the one recorder, under the workspace lock
``apply`` holds. :class:`TrackedFiles` says which committed files are stored too.
"""

from __future__ import annotations

import logging
import stat as stat_mod
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import CtxnbError, PolicyError, StaleFileError
from ..hashing import sha256_hex
from .destructive import destructive_reason

if TYPE_CHECKING:
    from ..access.door import Access
    from ..govern.intents import Intent
    from ..tools.call import ToolCall
    from .commit import EffectsReport, GoverningEngine
    from .held import Hold

_log = logging.getLogger("ctxnb.sandbox.commit")

MAX_DIFF_CHARS = 40_000
"""The diff an approver sees is cut here (the message says so)."""

_MAX_PENDING = 64
"""Directory fsyncs left to the background thread at once (each holds a descriptor)."""


@dataclass
class _Planned:
    rel: str
    kind: str
    old: bytes | None
    new: bytes | None
    mode: int = 0
    base: bytes | None = None
    """The bytes before this engine's first commit to the file, when they differ from
    ``old`` and the file has not changed since but by this engine's commits."""
    destructive: bool = False


class TrackedFiles:
    """Which of a command's committed files are also stored: those the indexer would
    store (not ignored by git's, ``.ctxnbignore``'s or ``[index]``'s rules, and within
    ``[index] max_file_bytes``); the others are committed and traced, not stored.

    Args:
        ws: the workspace (its settings, and its reads of ignore files).
        root: the workspace root, as a string.
    """

    def __init__(self, ws: Access, root: str) -> None:
        self.ws = ws
        self.root = root
        self.max_bytes: int = ws.config.index.max_file_bytes
        self._ignore: Any = None

    def ignored(self, rel: str) -> bool:
        """Whether the indexer's ignore rules leave ``rel`` out (decided per path)."""
        if self._ignore is None:
            from ..access.ignore import TreeIgnores

            cfg = self.ws.config.index
            self._ignore = TreeIgnores(cfg.ignore, use_gitignore=cfg.use_gitignore, root=self.root)

        def read(path: str) -> bytes | None:
            try:
                return self.ws.read(path)
            except CtxnbError:
                return None  # a link or a denied name: not an ignore file, as in the walk

        return bool(self._ignore.decide(rel, read))

    def stored(self, p: _Planned) -> bool:
        """Whether a planned change's file is stored (not ignored, not too large)."""
        return not self.ignored(p.rel) and max(len(p.new or b""), len(p.old or b"")) <= (
            self.max_bytes
        )


def approve(
    engine: GoverningEngine,
    planned: list[_Planned],
    command: str,
    session_id: str | None,
    caller: str,
    call: ToolCall | None,
    *,
    hold: Callable[[str, list[str]], Hold] | None = None,
    expect_diff: str | None = None,
) -> dict[str, Any] | None:
    """Ask the approver when a change is destructive: the approval (who, when, the
    hash of the diff they saw) when it was asked and approved, None when nothing was
    destructive; raises when refused (or held)."""
    from ..redaction.redactor import redact_text

    reasons = []
    for p in planned:
        r = destructive_reason(p.rel, p.old, p.new)
        if r is None and p.base is not None:
            r = destructive_reason(p.rel, p.base, p.new)
            if r is None:
                p.base = None  # the diff shows this command's change only
            else:
                r += " (with this session's earlier commands; the diff starts before them)"
        else:
            p.base = None
        if r is not None:
            p.destructive = True
            # A command can name a file after a secret it read (touch "$(cat cred)"):
            # its name leaves redacted here as in the effects, toward the agent and the
            # approver alike.
            reasons.append(redact_text(r))
    if not reasons and expect_diff is None:
        return None
    # A held command's changes are compared with the approved diff even when what is
    # left of them is harmless (a destructive file out of the scope now): the human
    # approved all of them, not a part.
    from .review import file_diff, redaction_notes

    hidden = spans = 0

    def shown_diff(p: _Planned) -> str:
        nonlocal hidden, spans
        shown = redact_text(p.rel)
        fromfile = f"a/{shown}" if p.old is not None else "/dev/null"
        tofile = f"b/{shown}" if p.new is not None else "/dev/null"
        # The diff of the bytes, redacted span by span (ctxnb.sandbox.review): a
        # change the redaction hides is still a changed line, and is counted.
        d = file_diff(
            (p.old if p.base is None else p.base) or b"",
            p.new or b"",
            fromfile=fromfile,
            tofile=tofile,
        )
        hidden += d.hidden
        spans += d.spans
        # An empty file created or deleted has no diff lines; its header still names
        # it, so every change is in what is shown and hashed. A new file keeps its x
        # bits: shown as git shows them.
        text = d.text or f"--- {fromfile}\n+++ {tofile}\n"
        if p.old is None and p.mode & 0o111:
            text = f"new file mode 100{stat_mod.S_IMODE(p.mode) & 0o777:o}\n" + text
        return text

    diff = "".join(shown_diff(p) for p in planned)
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n[... ctxnb: diff cut at {MAX_DIFF_CHARS} chars]\n"
    # What the redaction hides is said with the reasons, so every door's question
    # (ctxnb.govern.approval) says it.
    reasons += redaction_notes(hidden, spans)
    reason = "the command's changes are destructive: " + "; ".join(reasons)
    from ..redaction.redactor import redact

    details = {"reasons": reasons, "diff": diff, "paths": [redact_text(p.rel) for p in planned]}
    if expect_diff is not None:
        from .held import diff_sha256

        if diff_sha256(diff) != expect_diff:
            raise PolicyError(
                "APPROVAL_STALE",
                "the command's changes are not the ones the human approved (the "
                "workspace changed since): nothing was committed",
                recoverable=True,
                required_action="Run the command again; its changes are shown anew.",
                details=details,
            )
    elif engine.approver is None and hold is not None:
        held = hold(diff, reasons)
        from .held import hold_info

        raise PolicyError(
            "APPROVAL_HELD",
            f"{reason}; they are held, not committed, until a human decides (hold {held.id})",
            recoverable=True,
            required_action="Ask for the held changes to be committed (the human is "
            "shown this diff) or discard them; they are discarded after an hour.",
            details={**details, **hold_info(held)},
        )
    if engine.approver is None:
        raise PolicyError(
            "DESTRUCTIVE_NEEDS_APPROVAL",
            f"{reason}; no human approver is connected, so nothing was committed",
            recoverable=True,
            required_action="Ask a human to run it, or connect an approver "
            "(notebook ApprovalPanel, terminal, or MCP elicitation).",
            details=details,
        )
    if call is None:
        from ..tools.call import ToolCall

        call = ToolCall("run_command", {"cmd": command}, caller, session_id or "")
    call.args = {**call.args, "cmd": redact(command).text, "diff": diff}
    try:
        decision = engine.ask(call, reason)
    finally:
        call.args.pop("diff", None)
    if not decision.approved:
        engine.record_lesson(
            f"the changes of {command!r} were refused by {decision.by}"
            + (f": {decision.note}" if decision.note else ""),
            paths=[p.rel for p in planned],
        )
        raise PolicyError(
            "APPROVAL_REJECTED",
            f"{decision.by} rejected the command's changes ({'; '.join(reasons)}); "
            "nothing was committed" + (f" ({decision.note})" if decision.note else ""),
            recoverable=True,
            required_action="Do not retry the same act; find a non-destructive way or "
            "ask the human what they want instead.",
            details={**details, "decision": decision.to_dict()},
        )
    approval: dict[str, Any] = call.context.get("approval") or decision.to_dict()
    return approval


def commit_all(
    engine: GoverningEngine,
    tracked_files: TrackedFiles,
    planned: list[_Planned],
    report: EffectsReport,
    intent: Intent,
    command: str,
    session_id: str | None,
    caller: str,
    tool: str,
    approval: dict[str, Any] | None = None,
) -> None:
    """Write every change, its store version and trace record durable before its file
    is replaced (or removed), as a governed ``write_file``'s are.

    The new bytes wait, fsynced, under a temporary name; the versions of the files
    ready at once go into one store transaction (a group commit: whoever finds no commit
    running commits every change waiting, so the fsyncs are shared without waiting for
    a whole batch) that also carries their trace records; only then are they renamed.
    A commit that fails (a full disk) leaves those files as they were and raises. A
    file the store does not keep (ignored, too large) is written, then traced."""
    tools = engine.tools
    ws = tracked_files.ws
    tracked = [p for p in planned if tracked_files.stored(p)]
    olds = [p for p in tracked if p.old is not None]
    if olds:  # the version the command started from, so restore_file can go back
        ws.observe([p.rel for p in olds], data=[p.old for p in olds])
    from .._util.fsync import side_by_side, wait_all
    from ..access.observe import decode_bytes
    from ..redaction.redactor import redact

    def text(data: bytes | None) -> str | None:
        if data is None:
            return None
        # A file over the index's limit is not decoded: traced as binary.
        return "" if len(data) > tracked_files.max_bytes else (decode_bytes(data) or "")

    # Only changes in the intent's scope get this far (the rest were dropped).
    origin_meta: dict[str, Any] = {
        "command": redact(command).text,
        "scope": "in-scope",
        **engine.context_metadata(),
    }
    if approval is not None:
        origin_meta["approval"] = approval
    if ws.config.source_sha256:
        origin_meta["config_sha256"] = ws.config.source_sha256
    protected = tools.policy.protected_set
    if protected is not None:
        # Which derived set of host-run files held while this was committed.
        origin_meta["protected_sha256"] = protected.sha256
    origin: dict[str, Any] = {
        "tool": tool,
        "caller": caller,
        "session_id": session_id,
        "intent": intent,
        "metadata": origin_meta,
    }
    store_dir = ws.store.path
    # rel -> (its committed observation, its prepared trace record)
    committed: dict[str, tuple[Any, Any]] = {}

    def commit_batch(batch: list[_Planned]) -> None:
        pending = [
            engine.prepare_change(
                (p.rel, text(p.old), text(p.new), {"change": p.kind}),
                oid=ws.object_id(p.rel),
                store_dir=store_dir,
                **origin,
            )
            for p in batch
        ]
        observed = ws.observe(
            [p.rel for p in batch],
            data=[p.new for p in batch],
            attached=[x.attachment for x in pending],
        )
        for p, obs, x in zip(batch, observed, pending, strict=True):
            committed[p.rel] = (obs, x)

    group = _GroupCommit(commit_batch)
    tracked_set = {p.rel for p in tracked}
    waits: list[Any] = []
    stale: list[_Planned] = []
    replaced: list[_Planned] = []

    def first(p: _Planned) -> Callable[[], object] | None:
        return (lambda: group(p)) if p.rel in tracked_set else None

    def write(p: _Planned) -> None:
        assert p.new is not None
        try:
            # A new executable keeps its x bits (set-id bits are never kept), set on
            # the temporary file's descriptor: a path could lead outside by then.
            # Right before the rename the file is checked again: a save by someone
            # else since the conflict check (an editor, Claude Code's Write, which
            # takes no ctxnb lock) stays, and is reported as a conflict.
            tools.policy.write_bytes_atomic(
                p.rel,
                p.new,
                make_parents=True,
                durable_waits=waits,
                new_file_mode=stat_mod.S_IMODE(p.mode) & 0o777 if p.mode & 0o111 else None,
                check_replaced=True,
                expected_sha256=None if p.old is None else sha256_hex(p.old),
                before_replace=first(p),
            )
        except StaleFileError:
            stale.append(p)
            return
        except BaseException:
            group.drop(p)
            raise
        replaced.append(p)

    try:
        # Deletions first (a file that becomes a directory), then the writes. Each
        # is checked right before its unlink, as a write before its rename.
        for p in planned:
            if p.new is None:
                assert p.old is not None  # a deletion of nothing is not planned
                try:
                    tools.policy.delete(
                        p.rel, expected_sha256=sha256_hex(p.old), before_unlink=first(p)
                    )
                except StaleFileError:
                    stale.append(p)
                    continue
                replaced.append(p)
        writes = [p for p in planned if p.new is not None]
        if len(writes) == 1:
            write(writes[0])
        elif writes:
            # Each write fsyncs its file before the rename: run side by side, the
            # fsyncs overlap instead of queueing (the files are distinct).
            for at in range(0, len(writes), _MAX_PENDING // 2):
                side_by_side(write, writes[at : at + _MAX_PENDING // 2])
                if len(waits) >= _MAX_PENDING // 2:  # each holds a descriptor
                    wait_all(waits)
    except OSError as exc:
        # A full disk is no internal error: the agent is told what was kept.
        raise PolicyError(
            "WRITE_FAILED",
            f"cannot write the command's changes: {exc.strerror or exc}; a file not yet "
            "replaced was left as it was (the trace ledger lists the ones committed)",
            required_action="Free space on the disk (or fix the error named) and run the "
            "command again.",
            details={"path": getattr(exc, "filename", None)},
        ) from exc
    finally:
        try:
            wait_all(waits)
        finally:
            # Committed, then not replaced (a save by someone else, an error): the
            # store's latest version must be the file's, so it is observed again.
            done = {p.rel for p in replaced}
            again = [rel for rel in committed if rel not in done]
            if again:
                try:
                    ws.observe(again)
                except (OSError, CtxnbError):
                    pass  # the next read or index of the file observes it
            _finish(engine, planned, replaced, committed, report, text, origin)
    if stale:
        report.conflicts.extend(
            {"path": rel, "reason": "saved by someone else during the commit; kept"}
            for rel in sorted({p.rel for p in stale})
        )


def _finish(
    engine: GoverningEngine,
    planned: list[_Planned],
    replaced: list[_Planned],
    committed: dict[str, tuple[Any, Any]],
    report: EffectsReport,
    text: Callable[[bytes | None], str | None],
    origin: dict[str, Any],
) -> None:
    """Report what was replaced: the ledger lines of the committed changes (their
    records are durable in the store's log already), then the untracked changes',
    written and fsynced now."""
    from ..redaction.redactor import redact_text

    session = engine.tools.session
    done = {p.rel for p in replaced}
    untracked = [p for p in planned if p.rel in done and p.rel not in committed]
    report.untracked.extend(p.rel for p in untracked)
    for p in planned:
        if p.rel not in done or p.rel not in committed:
            continue
        obs, pending = committed[p.rel]
        if obs.tx_id is not None:
            session.took_version(obs.object_id)
        try:
            engine.finish_change(pending, obs.tx_id)
        except Exception as exc:  # noqa: BLE001 - the change and its record are durable
            # The record is in the store's log; the next restore appends it (a full
            # disk may refuse the ledger's line, not undo what the log holds).
            _log.warning(
                "trace record %s of %s is in the store log, not yet in the ledger (%s); "
                "`ctxnb trace verify` appends it",
                pending.recorded.trace_id,
                redact_text(p.rel),
                redact_text(str(exc)),  # a log is an exit too
            )
        report.changed.append(
            {
                "path": p.rel,
                "kind": p.kind,
                "version": f"{pending.oid}@{obs.tx_id}",
                "trace_id": pending.recorded.trace_id,
            }
        )
    if not untracked:
        return
    # Every committed change is traced, stored or not: which files are ignored is
    # decided by files the agent may write (.gitignore, .ctxnbignore).
    try:
        recorded = engine.record_changes(
            [(p.rel, text(p.old), text(p.new), {"change": p.kind}) for p in untracked], **origin
        )
    except Exception as exc:  # noqa: BLE001 - the files are replaced already
        # No store version to commit them with: traced after the rename, so a full disk
        # here leaves them changed and untraced; said, not hidden.
        _log.warning(
            "could not trace the command's change to %s (%s)",
            ", ".join(redact_text(p.rel) for p in untracked),
            redact_text(str(exc)),
        )
        report.changed.extend(
            {"path": p.rel, "kind": p.kind, "version": None, "trace_id": None} for p in untracked
        )
        return
    for done_rec in recorded:
        report.changed.append(
            {
                "path": done_rec.path,
                "kind": done_rec.record["metadata"]["change"],
                "version": None,
                "trace_id": done_rec.trace_id,
            }
        )


class _GroupCommit:
    """One store transaction for every change waiting when a commit can start.

    Each writer calls it from its own thread once its new bytes are durable under a
    temporary name: the first to find no commit running commits everything waiting
    (its own change among them); the others wait for the commit that took theirs and
    get its outcome (its error, if it failed). A writer never waits for one that has not
    arrived, so a thread pool of any size cannot deadlock it.
    """

    def __init__(self, commit: Callable[[list[_Planned]], None]) -> None:
        self._commit = commit
        self._cv = threading.Condition()
        self._waiting: list[_Planned] = []
        self._busy = False
        self._outcome: dict[int, BaseException | None] = {}

    def __call__(self, p: _Planned) -> None:
        key = id(p)
        with self._cv:
            self._waiting.append(p)
            while key not in self._outcome and self._busy:
                self._cv.wait()
            if key not in self._outcome:
                batch, self._waiting = self._waiting, []
                self._busy = True
            else:
                batch = []
        if batch:
            error: BaseException | None = None
            try:
                self._commit(batch)
            except BaseException as exc:  # every writer of the batch gets it
                error = exc
            with self._cv:
                for q in batch:
                    self._outcome[id(q)] = error
                self._busy = False
                self._cv.notify_all()
        with self._cv:
            error = self._outcome.pop(key)
        if error is not None:
            raise error

    def drop(self, p: _Planned) -> None:
        """Forget an outcome ``p`` will not collect (its write failed after the
        commit)."""
        with self._cv:
            self._outcome.pop(id(p), None)
