"""A command's changes, committed: from its overlay into the workspace, all or nothing.

Every command an agent runs (``run_command``, the MCP server, the quality loop, Claude
Code's Bash through ``ctxnb sandbox exec``) goes through :func:`run_governed`: the
sandbox runs it on an overlay (:class:`~ctxnb.sandbox.Sandbox`), and what it changed
is read from the upper layer. Then:

1. Only regular-file creations, modifications and deletions in the selected intent's
   scope, on paths neither denied, governance
   (:func:`ctxnb.access.pathrules.governance_reason`) nor protected (what runs on the
   host, :mod:`ctxnb.access.protected`), are candidates; everything else — outside the
   scope, symlinks, hard links, FIFOs, sockets, devices, anything under ``.git/`` — is
   **dropped** and listed with its reason. A file whose bytes did not change
   (``touch``, ``chmod``) is not a change; a mode-only change is dropped.
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
   checked once more right before its rename (or unlink): a save landing during the commit stays
   and is reported as a conflict.
4. Each change goes through the one governed write path: the access layer's descriptor
   walk with ``O_NOFOLLOW`` at every component (:meth:`PathPolicy.write_bytes_atomic`,
   :meth:`PathPolicy.delete`), a store version (the previous bytes first, so
   ``restore_file`` can take the change back), one Agent Trace record with the
   mutation class, ``intent_map.md``. As a governed ``write_file``, the version and its
   trace record are committed, in one durable log line, before the file is replaced or
   removed: a commit the store cannot make (a full disk) leaves the file as it was, and
   what the report lists as changed is durable.

Nothing here writes stored bytes back into the workspace to undo a command: what is not
committed was never in the workspace.

Files ignored by the workspace's ignore rules, or over ``[index] max_file_bytes``, are
committed but not stored (``untracked``), as the indexer does not store them; they are
traced all the same (the ignore files are files an agent may write).
"""

from __future__ import annotations

import os
import shlex
import stat as stat_mod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import NotFoundError, PolicyError
from ._commitsteps import MAX_DIFF_CHARS as MAX_DIFF_CHARS
from ._commitsteps import TrackedFiles, _Planned, approve, commit_all
from .destructive import destructive_reason

if TYPE_CHECKING:
    from ..access.door import Access
    from ..govern.approval import Approver, Decision
    from ..govern.intents import Intent
    from ..govern.record import PendingRecord, Recorded
    from ..tools.call import ToolCall
    from ..tools.filetools import FileTools
    from .commands import EngineCommands
    from .held import Hold
    from .runner import SandboxResult

__all__ = [
    "CommandEffects",
    "EffectsReport",
    "GoverningEngine",
    "commit_held",
    "destructive_reason",
    "run_governed",
]


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
    ) -> PendingRecord: ...
    def finish_change(self, pending: PendingRecord, tx_id: int) -> Recorded: ...
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
    @property
    def commands(self) -> EngineCommands: ...
    def ask(self, call: ToolCall, reason: str) -> Decision: ...
    def record_lesson(self, text: str, *, paths: list[str] = ...) -> None: ...


@dataclass
class EffectsReport:
    """What happened to a command's changes.

    Attributes:
        changed: changes committed: ``{path, kind, version, trace_id}`` (``version``
            None for an untracked file).
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


class CommandEffects:
    """Commits the changes of commands run under one hook engine.

    Args:
        engine: the hook engine (workspace, tools, ledger, intent map, approver).
    """

    def __init__(self, engine: GoverningEngine) -> None:
        self.engine = engine
        self.ws = engine.workspace
        self.root = str(engine.root)
        # Which committed files are stored too (the indexer's ignores and size limit).
        self.tracked = TrackedFiles(self.ws, self.root)
        # rel -> (the bytes before this engine's first change to it, or since its last
        # approved change; the SHA-256 of what this engine last committed there): so
        # several small removals that add up to a destructive one still ask.
        self._since: dict[str, tuple[bytes, bytes]] = {}

    def keep(self, intent: Intent | None) -> Any:
        """The sandbox's ``keep``: None when a change to ``rel`` may be committed.

        The protected set (what runs on the host) is derived here, before the command
        runs: a workspace whose configuration cannot be read runs nothing.
        """
        policy = self.engine.tools.policy
        from ..access.pathrules import governance_reason

        policy.protected_set  # noqa: B018 - derived now, or the command does not run

        def keep(rel: str) -> str | None:
            reason = governance_reason(rel)
            if reason is not None:
                return reason
            protected = policy.protected_by(rel)
            if protected is not None:
                # Never committed and never offered to an approver: the agent's approver
                # cannot consent to code that runs on the host.
                return f"protected: {protected}; never written by an agent"
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

    def _variant_of(self, rel: str, new_keys: dict[str, str]) -> str | None:
        """The file a new ``rel`` would share its docPath key with (one already in the
        workspace, or another new one of this commit), else None; the key is then taken.

        A case-sensitive filesystem holds ``src/app.py`` beside ``src/App.py``, but ctxnb
        keys documents by docPath (lowercase, NFC), so the pair would be one ambiguous
        document; the file tools refuse to create it, and so does a command's commit."""
        from ..access.docpath import find_document
        from ..resolver import doc_path

        key = doc_path(rel)
        if key in new_keys and new_keys[key] != rel:
            return new_keys[key]
        policy = self.engine.tools.policy
        try:
            found = find_document(policy, policy.check(rel)).rel
        except PolicyError as e:
            return str((e.details or {}).get("files") or (e.details or {}).get("document") or rel)
        if found != rel:
            return found
        new_keys[key] = rel
        return None

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
            new_keys: dict[str, str] = {}  # docPath key -> the new file this commit keeps
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
                if old is None and new is not None:
                    variant = self._variant_of(ch.path, new_keys)
                    if variant is not None:
                        report.dropped.append(
                            {
                                "path": ch.path,
                                "reason": f"a case or Unicode variant of {variant}: the two "
                                "names would be one document (the file tools refuse it too)",
                            }
                        )
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
            approval = approve(
                self.engine,
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
                commit_all(
                    self.engine,
                    self.tracked,
                    planned,
                    report,
                    intent,
                    command,
                    session_id,
                    caller,
                    tool,
                    approval,
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
            if p.new is None or p.old is None or len(p.old) > self.tracked.max_bytes:
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
    from ..redaction.redactor import redact

    effects = engine.commands.effects
    intent = engine.current_intent()
    sb = engine.commands.sandbox()
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
    if sres.plan is not None and sres.plan.notes:
        out["notes"] = sres.plan.notes
    if sres.network:
        # What the proxy let through and refused, with why: for the agent and the audit.
        out["network"] = sres.network
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

    effects = engine.commands.effects
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
