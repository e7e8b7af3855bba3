"""The one recorder of a file change: store version, trace record, mutation class, intent map.

Every change an agent makes to a file reaches :meth:`Recorder.record`, whichever way
it was made:

- a governed tool's write (``write_file``, ``apply_patch`` …): the hook engine's
  ``record`` post policy;
- a sandboxed command's change, once committed from its overlay
  (:mod:`ctxnb.sandbox.commit`);
- a Claude Code edit, reported by ``ctxnb hook post-tool-use``.

Each change gets the same record: a store version (through the access layer), one
Agent Trace record whose ``metadata`` carries the mutation class
(``AST_REFACTOR``/``INTENT_EVOLUTION``), intent, session, tool and caller, and, for
an ``INTENT_EVOLUTION`` under an intent, its file and touched symbols in
``.orchestration/intent_map.md``.

A Claude Code hook is a new process on every edit, so this module imports neither
pyarrow nor pydantic: the store version of a small change is committed as an inline
store transaction (:func:`ctxnb.access.observe.observe_inline`), the trace line with
the standard library.

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / ".orchestration").mkdir()
    >>> rec = Recorder(root, model_id="anthropic/claude-sonnet-4")
    >>> change = FileChange("a.py", old="def f():\\n    return 1\\n",
    ...                     new="def f():\\n    return 2\\n")
    >>> [r.mutation_class for r in rec.record([change], Origin("write_file", caller="docs"))]
    ['INTENT_EVOLUTION']
    >>> rec.ledger.tail(1)[0]["metadata"]["mutation_class"]
    'INTENT_EVOLUTION'
"""

from __future__ import annotations

import _thread  # threading's lock, without importing threading (hook start-up)
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import tracewal
from ._tracerecord import RepoRoot
from .ledger import ContributorType, TraceLedger, build_trace_record

if TYPE_CHECKING:
    from .core import IntentLike

__all__ = [
    "FileChange",
    "IntentMap",
    "Origin",
    "PendingRecord",
    "Recorded",
    "Recorder",
    "classify",
]

StoreVersions = Callable[[Sequence["FileChange"]], Sequence["str | None"]]
"""Writes a store version of each change's new bytes; returns their version ids."""


class FileChange:
    """One file's change: its workspace-relative path and its text before and after.

    Args:
        path: the file, relative to the workspace root (as the access layer resolved it).
        old: the text before (None: the file did not exist).
        new: the text after (None: the file was deleted).
        data: the new bytes, when a store version is to be written from them.
        ranges: the changed line ranges of ``new``, when the caller knows them better
            than a diff of ``old`` and ``new`` does (an edit tool's own patch).
        metadata: more trace ``metadata`` for this file (``version_id``, ``change`` …).
    """

    # A plain class: the post-edit hook imports this module on every edit.
    __slots__ = ("data", "metadata", "new", "old", "path", "ranges")

    def __init__(
        self,
        path: str,
        *,
        old: str | None,
        new: str | None,
        data: bytes | None = None,
        ranges: Sequence[tuple[int, int]] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.old = old
        self.new = new
        self.data = data
        self.ranges = ranges
        self.metadata = dict(metadata or {})

    def __repr__(self) -> str:
        return f"FileChange({self.path!r})"


class Origin:
    """Who made a set of changes, with which tool, under which intent.

    Args:
        tool: the tool that changed the files (``write_file``, ``run_command``, ``Edit`` …).
        caller: who called it (an agent name, ``claude-code``, ``mcp`` …).
        session_id: the session the change belongs to.
        intent: the intent it was made under (None: none was selected); its id is the
            record's, and an ``INTENT_EVOLUTION`` is listed under it in the intent map.
        intent_id: the id to record when there is no ``intent`` object (``unknown``
            when neither is given).
        metadata: more trace ``metadata`` for every file (``approval``, ``command``,
            ``turn``, ``context_id`` …).
        conversation_url: where the conversation can be read (a transcript's URI).
    """

    __slots__ = (
        "caller",
        "conversation_url",
        "intent",
        "intent_id",
        "metadata",
        "session_id",
        "tool",
    )

    def __init__(
        self,
        tool: str,
        *,
        caller: str,
        session_id: str | None = None,
        intent: IntentLike | None = None,
        intent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        conversation_url: str | None = None,
    ) -> None:
        self.tool = tool
        self.caller = caller
        self.session_id = session_id
        self.intent = intent
        self.intent_id = intent.id if intent is not None else (intent_id or "unknown")
        self.metadata = dict(metadata or {})
        self.conversation_url = conversation_url


class Recorded:
    """What was recorded of one change."""

    __slots__ = ("mutation_class", "path", "record", "symbols", "version_id")

    def __init__(
        self,
        path: str,
        mutation_class: str,
        record: dict[str, Any],
        version_id: str | None,
        symbols: list[str],
    ) -> None:
        self.path = path
        self.mutation_class = mutation_class
        self.record = record
        self.version_id = version_id
        self.symbols = symbols

    @property
    def trace_id(self) -> str:
        return str(self.record["id"])

    def __repr__(self) -> str:
        return f"Recorded({self.path!r}, {self.mutation_class}, trace_id={self.trace_id!r})"


def classify(path: str, old: str | None, new: str | None) -> str:
    """The mutation class of a change: ``AST_REFACTOR`` when the meaning cannot have
    changed (see :mod:`ctxnb.govern.mutation`), else ``INTENT_EVOLUTION``."""
    from .mutation import classify_mutation

    return classify_mutation(path, old or "", new or "")


class Recorder:
    """Records the file changes of one workspace (see the module docs).

    Args:
        root: the workspace root.
        ledger: the Agent Trace ledger (``.orchestration/agent_trace.jsonl``).
        model_id: the contributor's model, in models.dev form.
        contributor_type: who wrote the changes (``ai`` by default).
        clock: the records' time (timezone-aware).
        carried: ``metadata`` for every record this recorder makes: what the process it
            runs in carries (the agent's trace context and prompt,
            :func:`ctxnb.govern.tracecontext.carried_metadata`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        ledger: TraceLedger | None = None,
        model_id: str | None = None,
        contributor_type: ContributorType = "ai",
        clock: Callable[[], datetime] | None = None,
        carried: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = Path(root)
        self.carried: dict[str, Any] = dict(carried or {})
        # Resolved once, as the workspace's own root is (see RepoRoot).
        self._where = RepoRoot(self.root)
        self.ledger = ledger or TraceLedger(self.root / ".orchestration" / "agent_trace.jsonl")
        self.model_id = model_id
        self.contributor_type: ContributorType = contributor_type
        self.clock = clock
        self._restored: set[str] = set()  # stores whose log this recorder restored from
        self.intent_map = IntentMap(
            self.root / ".orchestration" / "intent_map.md",
            self.root / ".ctxnb" / "locks" / "intent-map.lock",
        )

    def record(
        self,
        changes: Sequence[FileChange],
        origin: Origin,
        *,
        store: StoreVersions | None = None,
        waits: list[Callable[[], None]] | None = None,
        mutation_classes: Sequence[str | None] | None = None,
    ) -> list[Recorded]:
        """Record ``changes``: store versions, one trace record each, the intent map.

        Args:
            changes: the files changed (already written).
            origin: who made them, how, under which intent.
            store: writes the store versions of the changes' ``data`` and returns their
                version ids; None when the caller already stored them (their
                ``version_id`` metadata is kept).
            waits: when given, the trace lines' fsync overlaps with the caller's work:
                a function that returns once they are durable is appended here, and the
                caller calls it before it reports the change. Otherwise the lines are
                durable when this returns. The lines of all changes are one write.
            mutation_classes: classes the caller already computed, one per change.

        Returns:
            One :class:`Recorded` per change, in order.
        """
        versions: Sequence[str | None] = (
            store(changes) if store is not None else [None] * len(changes)
        )
        out: list[Recorded] = []
        records: list[dict[str, Any]] = []
        mapped: list[tuple[str, list[str]]] = []
        for i, (change, version) in enumerate(zip(changes, versions, strict=True)):
            known = mutation_classes[i] if mutation_classes is not None else None
            done = self._build(change, version, origin, known)
            records.append(done.record)
            if done.mutation_class == "INTENT_EVOLUTION" and origin.intent is not None:
                mapped.append((change.path, done.symbols))
            out.append(done)
        # One write and one fsync for all of them (a command's commit changes many files).
        if waits is not None:
            waits.append(self.ledger.append_many_later(records))
        elif len(records) == 1:
            self.ledger.append(records[0])
        elif records:
            self.ledger.append_many_later(records)()
        if mapped and origin.intent is not None:
            self.intent_map.add(origin.intent.id, origin.intent.name, mapped)
        return out

    def _build(
        self, change: FileChange, version: str | None, origin: Origin, known: str | None
    ) -> Recorded:
        """One change's record (not yet written) and what the caller learns of it."""
        mclass = known or classify(change.path, change.old, change.new)
        new_text = change.new or ""
        ranges = change.ranges
        if ranges is None:
            from ..tools._textlines import changed_line_ranges

            ranges = changed_line_ranges(change.old or "", new_text) if new_text else []
        meta: dict[str, Any] = {
            "caller": origin.caller,
            **self.carried,
            **origin.metadata,
            **change.metadata,
        }
        if version is not None:
            meta["version_id"] = version
        record = build_trace_record(
            file_path=change.path,
            ranges=list(ranges),
            new_text=new_text,
            intent_id=origin.intent_id,
            session_id=origin.session_id,
            contributor_type=self.contributor_type,
            model_id=self.model_id,
            repo_root=self._where,
            tool=origin.tool,
            mutation_class=mclass,
            extra_metadata=meta,
            clock=self.clock,
            conversation_url=origin.conversation_url or _conversation_urn(origin.session_id),
        )
        symbols: list[str] = []
        if mclass == "INTENT_EVOLUTION" and origin.intent is not None:
            from .mutation import touched_symbols

            symbols = touched_symbols(change.path, change.old or "", new_text)
        return Recorded(change.path, mclass, record, meta.get("version_id"), symbols)

    def prepare_logged(
        self,
        change: FileChange,
        origin: Origin,
        *,
        oid: str,
        store_dir: str | os.PathLike[str],
        mutation_class: str | None = None,
    ) -> PendingRecord:
        """Prepare the record of a change whose store version is about to be committed,
        to go in the same log line (see :mod:`ctxnb.govern.tracewal`).

        The caller commits :attr:`PendingRecord.attachment` with the version of object
        ``oid`` (:meth:`ObjectStore.put <ctxnb.store.objectstore.ObjectStore.put>`'s ``attached``)
        and then calls :meth:`finish_logged` with the transaction; if the version was not
        committed, it records the change with :meth:`record` instead.

        Raises:
            ValueError, StoreError: as :meth:`record` does for a record it cannot make.
        """
        done = self._build(change, None, origin, mutation_class)
        prepared = self.ledger.prepare([done.record])[0]
        # Where the ledger ends now, and its last line: committed with the version, it
        # pins every line before this record (a reorder or an edit that recomputed the
        # chain is caught, see ctxnb.govern.ledgercheck).
        at, head = self.ledger.checkpoint()
        tracewal.ledger_for(store_dir, self.ledger.path)
        return PendingRecord(done, origin, prepared, oid, at, os.fspath(store_dir), head)

    def finish_logged(self, pending: PendingRecord, tx_id: int) -> Recorded:
        """Append the record :meth:`prepare_logged` made, committed in transaction
        ``tx_id``: one write to the ledger, no fsync (the store's log holds it durably)."""
        version = f"{pending.oid}@{tx_id}"
        done = pending.recorded
        done.version_id = version
        done.record["metadata"]["version_id"] = version
        # A recorder's first logged append restores what a crash or a power loss took
        # from the ledger (records in the store's log that the ledger lacks).
        if pending.store_dir not in self._restored:
            tracewal.restore(pending.store_dir, self.ledger)
            self._restored.add(pending.store_dir)
        logged = tracewal.Logged(pending.prepared, version, pending.at)
        tracewal.append_logged(self.ledger, [logged], durable=False)
        origin = pending.origin
        if done.mutation_class == "INTENT_EVOLUTION" and origin.intent is not None:
            self.intent_map.add(origin.intent.id, origin.intent.name, [(done.path, done.symbols)])
        return done


class PendingRecord:
    """A record prepared to be committed with a store version (see
    :meth:`Recorder.prepare_logged`)."""

    __slots__ = (
        "_attachment",
        "at",
        "head",
        "oid",
        "origin",
        "prepared",
        "recorded",
        "store_dir",
    )

    def __init__(
        self,
        recorded: Recorded,
        origin: Origin,
        prepared: dict[str, Any],
        oid: str,
        at: int,
        store_dir: str,
        head: str | None = None,
    ) -> None:
        self.recorded = recorded
        self.origin = origin
        self.prepared = prepared
        self.oid = oid
        self.at = at
        self.head = head
        self.store_dir = store_dir
        self._attachment: bytes | None = None  # asked for more than once, made once

    @property
    def attachment(self) -> bytes:
        """What the store's log line carries: the prepared record, bound to ``oid``."""
        if self._attachment is None:
            self._attachment = tracewal.attachment(self.prepared, self.oid, self.at, self.head)
        return self._attachment


class IntentMap:
    """``.orchestration/intent_map.md``: which files and symbols each intent changed.

    The map only grows; it is written at most once per :meth:`add`, and not at all
    when the change adds nothing to it.
    """

    def __init__(self, path: Path, lock_path: Path | None = None) -> None:
        self.path = path
        self.lock_path = lock_path
        self._lock = _thread.allocate_lock()
        # The map as last read or written, and the stamp of the file it was read from.
        self._cache: tuple[_Stamp, dict[str, dict[str, Any]]] | None = None

    def add(self, intent_id: str, intent_name: str, files: Sequence[tuple[str, list[str]]]) -> None:
        """List ``files`` (each with its touched symbols) under the intent."""
        from ..redaction.redactor import redact_text  # only when the map is written to

        # The map is read by people and agents: names leave redacted like any text.
        files = [(redact_text(path), [redact_text(s) for s in syms]) for path, syms in files]
        with self._lock:
            # Most changes add nothing (the file and its symbols are listed already):
            # then one stat, no lock file. The cached map is the file's content while
            # its stamp holds (ctxnb replaces the map by a rename, a new inode; an edit
            # in place changes its ctime, which no one can set back): if it lists
            # everything, so does the file at that stat, and a writer under the lock
            # would have had nothing to write either (the map only grows).
            cached = self._cache
            if (
                cached is not None
                and not _adds(cached[1], intent_id, intent_name, files)
                and _stamp(self.path) == cached[0]
            ):
                return
            with _flocked(self.lock_path):
                stamp = _stamp(self.path)
                cached = self._cache
                entries = cached[1] if cached is not None and cached[0] == stamp else self.read()
                self._cache = None  # until the entries are the file's again
                if _adds(entries, intent_id, intent_name, files):
                    per = entries.setdefault(intent_id, {"name": intent_name, "files": {}})
                    per["name"] = intent_name
                    for path, symbols in files:
                        known = per["files"].setdefault(path, [])
                        for sym in symbols:
                            if sym not in known:
                                known.append(sym)
                    self._write(entries)
                    stamp = _stamp(self.path)
                self._cache = (stamp, entries)

    def read(self) -> dict[str, dict[str, Any]]:
        """The sections ctxnb writes: ``## ID — name`` then ``- `path`: sym, sym``."""
        out: dict[str, dict[str, Any]] = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return out
        current: dict[str, Any] | None = None
        for line in text.splitlines():
            if line.startswith("## "):
                iid, _, name = line[3:].partition(" — ")
                current = out.setdefault(iid.strip(), {"name": name.strip(), "files": {}})
            elif current is not None and line.startswith("- `"):
                path_part, _, syms = line[3:].partition("`")
                syms = syms.lstrip(":").strip()
                current["files"][path_part] = [s.strip() for s in syms.split(",") if s.strip()]
        return out

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        lines = [
            "# Intent map",
            "",
            "Which files and symbols each intent has changed (kept up to date by ctxnb).",
            "",
        ]
        for iid in sorted(entries):
            e = entries[iid]
            lines += [f"## {iid} — {e['name']}", ""]
            for f in sorted(e["files"]):
                syms = ", ".join(e["files"][f])
                lines.append(f"- `{f}`" + (f": {syms}" if syms else ""))
            lines.append("")
        # Readers see the old map or the new one, never half of one.
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{_thread.get_ident()}.tmp")
        tmp.write_text("\n".join(lines), encoding="utf-8")
        os.replace(tmp, self.path)


_Stamp = tuple[int, int, int, int] | None


def _stamp(path: Path) -> _Stamp:
    """What changes whenever the file does: inode, size, modification and change times
    (None: no file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _adds(
    entries: Mapping[str, Mapping[str, Any]],
    intent_id: str,
    intent_name: str,
    files: Sequence[tuple[str, list[str]]],
) -> bool:
    """Whether listing ``files`` under the intent would change ``entries``."""
    per = entries.get(intent_id)
    if per is None or per["name"] != intent_name:
        return True
    listed = per["files"]
    for path, symbols in files:
        known = listed.get(path)
        if known is None or any(sym not in known for sym in symbols):
            return True
    return False


@contextlib.contextmanager
def _flocked(path: Path | None) -> Iterator[None]:
    """Hold ``path``'s lock: a hook process and a kernel may add to the map at once."""
    if path is None:
        yield
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _conversation_urn(session_id: str | None) -> str | None:
    """Where a session's conversation can be read, for every door that has a session."""
    from urllib.parse import quote

    from ._tracerecord import CONVERSATION_URN_PREFIX

    return CONVERSATION_URN_PREFIX + quote(session_id, safe="") if session_id else None
