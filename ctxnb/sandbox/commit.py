"""A command's changes, committed: from its overlay into the workspace, all or nothing.

Every command an agent runs (``run_command``, the MCP server, the quality loop, Claude
Code's Bash through ``ctxnb sandbox exec``) goes through :func:`run_governed`: the
sandbox runs it on an overlay (:class:`~ctxnb.sandbox.Sandbox`), and what it changed
is read from the upper layer. Then:

1. Only regular-file creations, modifications and deletions in the selected intent's
   scope, on paths neither denied nor governance (:func:`ctxnb.access.pathrules.governance_reason`),
   are candidates; everything else — outside the scope, symlinks, hard links, FIFOs,
   sockets, devices, anything under ``.git/`` — is **dropped** and listed with its
   reason. A file whose bytes did not change (``touch``, ``chmod``) is not a change; a
   mode-only change is dropped.
2. **Destructive** changes (:func:`destructive_reason`: a deletion, a truncation to
   zero bytes, a text file made binary, or a write that keeps less than half of a
   file's lines or bytes) are shown to the
   approver with their real diff before anything is committed. A rejection (or no
   approver) discards the whole overlay: nothing happened.
3. Under the workspace lock (:meth:`FileTools.locked_all`: every file's write lock at
   once, one descriptor), the workspace file must still be the one the command
   started from: a file changed by someone else since the command started (its ctime
   is at or after the start) is a **conflict**, and then nothing of the command is
   committed (one command's commit is all-or-nothing up to I/O errors). Each file is
   checked once more right before its rename: a save landing during the commit stays
   and is reported as a conflict.
4. Each change goes through the one governed write path: the access layer's descriptor
   walk with ``O_NOFOLLOW`` at every component (:meth:`PathPolicy.write_bytes_atomic`,
   :meth:`PathPolicy.delete`), a store version (the previous bytes first, so
   ``restore_file`` can take the change back), one Agent Trace record with the
   mutation class, ``intent_map.md``.

Nothing here writes stored bytes back into the workspace to undo a command: what is not
committed was never in the workspace.

Files ignored by the workspace's ignore rules, or over ``[index] max_file_bytes``, are
committed but not stored (``untracked``), as the indexer does not store them.
"""

from __future__ import annotations

import os
import shlex
import stat as stat_mod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import CtxnbError, NotFoundError, PolicyError, StaleFileError
from ..hashing import sha256_hex
from .destructive import destructive_reason

if TYPE_CHECKING:
    from ..access.door import Access
    from ..govern.approval import Approver, Decision
    from ..govern.intents import Intent
    from ..govern.record import Recorded
    from ..tools.call import ToolCall
    from ..tools.filetools import FileTools
    from .held import Hold
    from .runner import Sandbox, SandboxResult

__all__ = [
    "CommandEffects",
    "EffectsReport",
    "GoverningEngine",
    "commit_held",
    "destructive_reason",
    "run_governed",
]

MAX_DIFF_CHARS = 40_000
"""The diff an approver sees is cut here (the message says so)."""

_MAX_PENDING = 64
"""Directory fsyncs left to the background thread at once (each holds a descriptor)."""


class GoverningEngine(Protocol):
    """What the commit needs of a :class:`~ctxnb.govern.engine.HookEngine`.

    A protocol, so that this module does not import the engine (which starts it).
    """

    workspace: Access
    root: Path
    tools: FileTools
    approver: Approver | None
    command_timeout: float

    def context_metadata(self) -> dict[str, Any]: ...
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
    ) -> list[Recorded]: ...
    def current_intent(self) -> Intent | None: ...
    def command_effects(self) -> CommandEffects: ...
    def sandbox(self) -> Sandbox: ...
    def ask(self, call: ToolCall, reason: str) -> Decision: ...
    def record_lesson(self, text: str, *, paths: list[str] = ...) -> None: ...


@dataclass
class EffectsReport:
    """What happened to a command's changes.

    Attributes:
        changed: changes committed: ``{path, kind, version, trace_id}``.
        dropped: changes not committed: ``{path, reason}``.
        conflicts: files changed by someone else while the command ran
            ``{path, reason}``; when one is found before the commit, nothing was
            committed; a save that lands during the commit (between the check and the
            file's own write) is kept, and only that file is not committed.
        untracked: committed changes to ignored files or files over ``[index]
            max_file_bytes`` (not stored): paths.
    """

    changed: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "dropped": self.dropped,
            "conflicts": self.conflicts,
            "untracked": self.untracked,
        }


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


class CommandEffects:
    """Commits the changes of commands run under one hook engine.

    Args:
        engine: the hook engine (workspace, tools, ledger, intent map, approver).
    """

    def __init__(self, engine: GoverningEngine) -> None:
        self.engine = engine
        self.ws = engine.workspace
        self.root = str(engine.root)
        self._ignore: Any = None
        self._max_bytes = self.ws.config.index.max_file_bytes
        # rel -> (the bytes before this engine's first change to it, or since its last
        # approved change; the SHA-256 of what this engine last committed there): so
        # several small removals that add up to a destructive one still ask.
        self._since: dict[str, tuple[bytes, bytes]] = {}

    def _ignored(self, rel: str) -> bool:
        # The indexer's ignores (git's, .ctxnbignore, [index] ignore), decided per path.
        if self._ignore is None:
            from ..ignore import TreeIgnores

            cfg = self.ws.config.index
            self._ignore = TreeIgnores(cfg.ignore, use_gitignore=cfg.use_gitignore, root=self.root)

        def read(path: str) -> bytes | None:
            try:
                return self.ws.read(path)
            except CtxnbError:
                return None  # a link or a denied name: not an ignore file, as in the walk

        return bool(self._ignore.decide(rel, read))

    def keep(self, intent: Intent | None) -> Any:
        """The sandbox's ``keep``: None when a change to ``rel`` may be committed."""
        policy = self.engine.tools.policy
        from ..access.pathrules import governance_reason

        def keep(rel: str) -> str | None:
            reason = governance_reason(rel)
            if reason is not None:
                return reason
            if not policy.is_allowed(rel):
                return "a denied path"
            if intent is None or not intent.in_scope(rel):
                return "outside the scope"
            return None

        return keep

    def _current(self, rel: str) -> tuple[bytes | None, os.stat_result | None]:
        """The workspace file's bytes and stat, through the access layer's walk."""
        policy = self.engine.tools.policy
        try:
            st = policy.stat(rel)
            return policy.read_bytes(rel), st
        except NotFoundError:
            return None, None

    # -- the commit ---------------------------------------------------------------------------
    def apply(
        self,
        sres: SandboxResult,
        *,
        intent: Intent | None,
        command: str,
        session_id: str | None,
        caller: str,
        tool: str = "run_command",
        call: ToolCall | None = None,
        hold: Callable[[SandboxResult, str, list[str]], Hold] | None = None,
        expect_diff: str | None = None,
    ) -> EffectsReport:
        """Commit the in-scope changes of ``sres`` (all or nothing), then discard the
        overlay.

        Args:
            hold: with no approver, destructive changes are held for a later decision
                (``hold(sres, diff, reasons)``) instead of refused.
            expect_diff: the SHA-256 of the diff a human approved (a held command's):
                the changes are committed only when their diff now is that one.

        Raises:
            PolicyError: ``DESTRUCTIVE_NEEDS_APPROVAL`` (no approver), ``APPROVAL_HELD``
                (no approver; held with ``hold``), ``APPROVAL_REJECTED``, or
                ``APPROVAL_STALE`` (the diff is not the approved one): nothing was
                committed.
        """
        try:
            report = EffectsReport(dropped=[d.to_dict() for d in sres.dropped])
            planned: list[_Planned] = []
            for ch in sres.changes:
                try:
                    old, st = self._current(ch.path)
                except PolicyError as e:
                    # A link or special file on the way in the real tree: never written through.
                    report.dropped.append({"path": ch.path, "reason": f"refused: {e.message}"})
                    continue
                new = None if ch.kind == "deleted" else sres.read(ch.path)
                if ch.kind == "deleted" and old is None:
                    continue
                if ch.path == "pyproject.toml":
                    from ..config import tool_ctxnb_changed

                    if tool_ctxnb_changed(old, new):
                        report.dropped.append(
                            {
                                "path": ch.path,
                                "reason": "changes [tool.ctxnb]: settings are governance",
                            }
                        )
                        continue
                if new is not None and old == new:
                    if st is not None and stat_mod.S_IMODE(st.st_mode) != stat_mod.S_IMODE(ch.mode):
                        report.dropped.append({"path": ch.path, "reason": "a mode-only change"})
                    continue
                base = None
                since = self._since.get(ch.path)
                if since is not None and old is not None and _sha(old) == since[1]:
                    base = since[0]
                planned.append(_Planned(ch.path, ch.kind, old, new, ch.mode, base))
            if not planned:
                return report
            assert intent is not None  # a change is only kept in an intent's scope
            approval = self._approve(
                planned,
                command,
                session_id,
                caller,
                call,
                hold=None if hold is None else (lambda diff, why: hold(sres, diff, why)),
                expect_diff=expect_diff,
            )
            tools = self.engine.tools
            # One lock for the whole commit (not one descriptor per file): every
            # writer of a single file holds it shared.
            with tools.locked_all():
                for p in planned:
                    reason = self._conflict(p, sres.started_ns)
                    if reason is not None:
                        report.conflicts.append({"path": p.rel, "reason": reason})
                if report.conflicts:
                    return report
                self._commit_all(
                    planned, report, intent, command, session_id, caller, tool, approval
                )
            self._remember(planned, approval is not None)
            self._remove_dirs(sres, planned)
            return report
        finally:
            sres.discard()

    def _remember(self, planned: list[_Planned], approved: bool) -> None:
        """Keep each committed file's baseline: the bytes before this engine's first
        change to it, reset to the new bytes by a human's approval."""
        for p in planned:
            if p.new is None or p.old is None or len(p.old) > self._max_bytes:
                self._since.pop(p.rel, None)
                continue
            if approved and p.destructive:
                base = p.new  # the human saw this file's diff and approved it
            else:
                base = p.base if p.base is not None else p.old
            self._since[p.rel] = (base, _sha(p.new))

    def _remove_dirs(self, sres: SandboxResult, planned: list[_Planned]) -> None:
        """Directories the command removed, whose files were all deleted by the commit,
        are removed too (deepest first; through descriptors, no link followed)."""
        gone = [e.rel for e in sres.entries if e.kind == "whiteout"]
        deleted = [p.rel for p in planned if p.kind == "deleted"]
        dirs: set[str] = set()
        for d in gone:
            if any(r.startswith(d + "/") for r in deleted):
                dirs.add(d)
                dirs.update(
                    r.rsplit("/", 1)[0] for r in deleted if r.startswith(d + "/") and "/" in r
                )
        for rel in sorted(dirs, key=lambda r: r.count("/"), reverse=True):
            _rmdir_nofollow(self.root, rel)

    def _conflict(self, p: _Planned, started_ns: int) -> str | None:
        try:
            cur, st = self._current(p.rel)
        except PolicyError as e:
            return f"refused: {e.message}"
        if st is None:
            if p.old is not None:
                return "deleted by someone else while the command ran"
            return None
        if p.old is None:
            return "created by someone else while the command ran"
        if st.st_ctime_ns >= started_ns or cur != p.old:
            return "changed by someone else while the command ran; nothing was overwritten"
        return None

    def _approve(
        self,
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
                reasons.append(r)
        if not reasons and expect_diff is None:
            return None
        # A held command's changes are compared with the approved diff even when what is
        # left of them is harmless (a destructive file out of the scope now): the human
        # approved all of them, not a part.
        from ..redaction import redact_text
        from ..tools.patching import unified_diff

        def file_diff(p: _Planned) -> str:
            fromfile = f"a/{p.rel}" if p.old is not None else "/dev/null"
            tofile = f"b/{p.rel}" if p.new is not None else "/dev/null"
            text = "".join(
                unified_diff(
                    redact_text(
                        ((p.old if p.base is None else p.base) or b"").decode("utf-8", "replace")
                    ),
                    redact_text((p.new or b"").decode("utf-8", "replace")),
                    fromfile=fromfile,
                    tofile=tofile,
                )
            )
            # An empty file created or deleted (or a change the redaction hides) has no
            # diff lines; its header still names it, so every change is in what is shown
            # and hashed. A new file keeps its x bits: shown as git shows them.
            text = text or f"--- {fromfile}\n+++ {tofile}\n"
            if p.old is None and p.mode & 0o111:
                text = f"new file mode 100{stat_mod.S_IMODE(p.mode) & 0o777:o}\n" + text
            return text

        diff = "".join(file_diff(p) for p in planned)
        if len(diff) > MAX_DIFF_CHARS:
            diff = diff[:MAX_DIFF_CHARS] + f"\n[... ctxnb: diff cut at {MAX_DIFF_CHARS} chars]\n"
        reason = "the command's changes are destructive: " + "; ".join(reasons)
        from ..redaction import redact

        details = {"reasons": reasons, "diff": diff, "paths": [p.rel for p in planned]}
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
        elif self.engine.approver is None and hold is not None:
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
        if self.engine.approver is None:
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
            decision = self.engine.ask(call, reason)
        finally:
            call.args.pop("diff", None)
        if not decision.approved:
            self.engine.record_lesson(
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

    def _commit_all(
        self,
        planned: list[_Planned],
        report: EffectsReport,
        intent: Intent,
        command: str,
        session_id: str | None,
        caller: str,
        tool: str,
        approval: dict[str, Any] | None = None,
    ) -> None:
        """Write every change, then store and trace them in batches: one store
        transaction for the versions the command started from, one for the new ones,
        the fsyncs of the writes and of the trace lines overlapped."""
        engine = self.engine
        tools = engine.tools
        ws = self.ws
        tracked = [
            p
            for p in planned
            if not self._ignored(p.rel)
            and max(len(p.new or b""), len(p.old or b"")) <= self._max_bytes
        ]
        olds = [p for p in tracked if p.old is not None]
        if olds:  # the version the command started from, so restore_file can go back
            ws.observe([p.rel for p in olds], data=[p.old for p in olds])
        waits: list[Any] = []

        stale: list[_Planned] = []

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
                )
            except StaleFileError:
                stale.append(p)

        try:
            # Deletions first (a file that becomes a directory), then the writes.
            for p in planned:
                if p.new is None:
                    tools.policy.delete(p.rel)
            writes = [p for p in planned if p.new is not None]
            if len(writes) == 1:
                write(writes[0])
            elif writes:
                # Each write fsyncs its file before the rename: run side by side, the
                # fsyncs overlap instead of queueing (the files are distinct).
                from .._fsync import side_by_side

                for at in range(0, len(writes), _MAX_PENDING // 2):
                    side_by_side(write, writes[at : at + _MAX_PENDING // 2])
                    if len(waits) >= _MAX_PENDING // 2:  # each holds a descriptor
                        for wait in waits:
                            wait()
                        waits.clear()
            if stale:
                kept = {p.rel for p in stale}
                report.conflicts.extend(
                    {"path": rel, "reason": "saved by someone else during the commit; kept"}
                    for rel in sorted(kept)
                )
                planned = [p for p in planned if p.rel not in kept]
                tracked = [p for p in tracked if p.rel not in kept]
            tracked_set = {p.rel for p in tracked}
            report.untracked.extend(p.rel for p in planned if p.rel not in tracked_set)
            if not tracked:
                return
            observed = ws.observe([p.rel for p in tracked], data=[p.new for p in tracked])
            from ..access.observe import decode_bytes
            from ..redaction import redact

            session = tools.session
            changes = []
            for p, obs in zip(tracked, observed, strict=True):
                version = obs.version_id if obs.tx_id is not None else None
                if obs.tx_id is not None:
                    session.took_version(obs.object_id)
                meta: dict[str, Any] = {"change": p.kind}
                if version:
                    meta["version_id"] = version
                changes.append(
                    (
                        p.rel,
                        None if p.old is None else (decode_bytes(p.old) or ""),
                        None if p.new is None else (decode_bytes(p.new) or ""),
                        meta,
                    )
                )
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
            recorded = engine.record_changes(
                changes,
                tool=tool,
                caller=caller,
                session_id=session_id,
                intent=intent,
                metadata=origin_meta,
                waits=waits,
            )
            for done in recorded:
                report.changed.append(
                    {
                        "path": done.path,
                        "kind": done.record["metadata"]["change"],
                        "version": done.version_id,
                        "trace_id": done.trace_id,
                    }
                )
        finally:
            for wait in waits:
                wait()


def _sha(data: bytes) -> bytes:
    import hashlib

    return hashlib.sha256(data).digest()


def _rmdir_nofollow(root: str, rel: str) -> None:
    """Remove the empty directory ``root/rel``, walking with ``O_NOFOLLOW``; any error
    (not empty, a link on the way, gone) leaves it."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    parts = rel.split("/")
    try:
        fd = os.open(root, flags)
    except OSError:
        return
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.rmdir(parts[-1], dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def run_governed(
    engine: GoverningEngine,
    cmd: str | list[str],
    *,
    cwd: Path | None = None,
    timeout: float | None = None,
    shell: bool = False,
    session_id: str | None = None,
    caller: str = "agent",
    tool: str = "run_command",
    call: ToolCall | None = None,
    hold: Callable[[SandboxResult, str, list[str]], Hold] | None = None,
) -> dict[str, Any]:
    """Run ``cmd`` in the engine's sandbox and commit its in-scope changes (no pre
    policies: callers run those). Returns the command result with ``effects`` and
    ``sandbox``. With ``hold`` and no approver, destructive changes are held
    (``APPROVAL_HELD``) instead of refused.

    Raises:
        SandboxError: ``SANDBOX_UNAVAILABLE`` (no overlay here), before anything ran.
        PolicyError: the changes were destructive and not approved; nothing committed.
    """
    from ..redaction import redact

    effects = engine.command_effects()
    intent = engine.current_intent()
    sb = engine.sandbox()
    sres = sb.run(
        cmd,
        cwd=cwd or engine.root,
        timeout=timeout or engine.command_timeout,
        shell=shell,
        redact=lambda s: redact(s).text,
        keep=effects.keep(intent),
    )
    text = cmd if isinstance(cmd, str) else shlex.join(cmd)
    report = effects.apply(
        sres,
        intent=intent,
        command=text,
        session_id=session_id,
        caller=caller,
        tool=tool,
        call=call,
        hold=hold,
    )
    out = sres.result.to_dict()
    out["effects"] = report.to_dict()
    out["sandbox"] = sres.backend
    if sres.plan is not None and sres.plan.hidden_git_objects:
        out["notes"] = [sres.plan.hidden_git_objects]
    return out


def commit_held(
    engine: GoverningEngine,
    hold: Hold,
    *,
    caller: str = "agent",
    tool: str = "run_command",
    expect: str | None = None,
) -> dict[str, Any]:
    """Commit a held command's changes (:mod:`ctxnb.sandbox.held`) for the human who
    approved its diff, as :func:`run_governed` would have: the engine's intent must be
    the hold's, and the diff computed now must be the held one (``expect``: the SHA-256
    of the diff the human was shown, when the asking was done by someone else).

    Raises:
        PolicyError: ``INVALID_INTENT`` (another intent is selected),
            ``APPROVAL_STALE``; a conflict is reported in ``effects`` as for any
            command. Nothing was committed then; the hold is gone but after
            ``INVALID_INTENT``.
    """
    from .held import resume_hold

    effects = engine.command_effects()
    intent = engine.current_intent()
    if intent is None or intent.id != hold.intent_id:
        raise PolicyError(
            "INVALID_INTENT",
            f"the held changes were made under {hold.intent_id}, not {getattr(intent, 'id', None)}",
            required_action=f"Select {hold.intent_id} to commit them.",
        )
    sres = resume_hold(engine.root, hold, keep=effects.keep(intent))
    report = effects.apply(
        sres,
        intent=intent,
        command=hold.command,
        session_id=hold.session_id,
        caller=caller,
        tool=tool,
        expect_diff=expect or hold.diff_sha256,
    )
    return {"hold_id": hold.id, "effects": report.to_dict()}
