"""The versioned object store: every version of every object, in plain Parquet.

``ObjectStore`` mirrors XTDB's document API (DESIGN §4): ``put`` is one atomic
transaction, ``get`` reads the latest version, ``history`` and ``as_of`` read the past,
and ``scan`` returns typed columns as a pandas DataFrame or an Arrow table.

On disk (see ``docs/store-format.md``) a store is a directory of append-only Parquet
segments, one per transaction, compacted now and then into a snapshot, plus a small
transaction log whose fsynced line is the commit point. Writers in several processes
take turns under a file lock; readers never lock and notice other processes' commits
by a ``stat`` of the log.

Example:
    >>> import tempfile
    >>> with ObjectStore(tempfile.mkdtemp()) as store:
    ...     tx = store.put([{"xt/id": "a", "type": "note", "text": "hello"}])
    ...     _ = store.put([{"xt/id": "a", "type": "note", "text": "hello again"}])
    ...     store.get("a")["text"], store.as_of("a", tx)["text"], len(store.history("a"))
    ('hello again', 'hello', 2)
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import logging
import os
import secrets
import stat
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from . import _storecache as cache
from . import _storecompact as compaction
from . import _storefmt as fmt
from . import _storeguard as guard
from . import _storelog as tlog
from .errors import CorruptStoreError, StoreError
from .model import OBJECT_TYPES, model_for_type

__all__ = ["CompactReport", "ObjectStore", "TxRecord", "Version"]

log = logging.getLogger("ctxnb.store")

MARKER, TXLOG, WRITER_LOCK = tlog.MARKER, tlog.TXLOG, tlog.WRITER_LOCK
COMPACT_LOCK = "compact.lock"
SEGMENTS = "segments"
SNAPSHOTS = "snapshots"
_KNOWN_TOP = frozenset({MARKER, TXLOG, WRITER_LOCK, COMPACT_LOCK, SEGMENTS, SNAPSHOTS})
_RETRIES = 8
INLINE_MAX_BYTES = tlog.INLINE_MAX_BYTES
_INLINE_MAX_DOCS = 256
# Inline transactions are folded into a Parquet file (see ObjectStore.fold) once this
# many wait, or this many seconds after the first of them: outside readers of the
# Parquet files never lag further behind. A fold costs about one segment commit.
FOLD_EVERY_TX = tlog.FOLD_EVERY_TX
FOLD_AFTER_SECONDS = 30.0


@dataclass(frozen=True)
class TxRecord:
    """A committed transaction.

    Attributes:
        tx_id: 1, 2, 3, ... in commit order, never reused.
        tx_time: commit time, UTC, timezone-aware; never earlier than the previous tx's.
        count: number of documents written (after removing repeated ids).
    """

    tx_id: int
    tx_time: datetime
    count: int


@dataclass(frozen=True)
class Version:
    """One version of a document, as returned by :meth:`ObjectStore.history`."""

    doc: dict[str, Any]
    tx_id: int
    tx_time: datetime

    @property
    def version_id(self) -> str:
        """``"<xt/id>@<tx_id>"``, unique per version."""
        return f"{self.doc[fmt.ID_KEY]}@{self.tx_id}"


@dataclass(frozen=True)
class CompactReport:
    """What :meth:`ObjectStore.compact` did.

    Attributes:
        upto_tx: the snapshot now holds every version up to this tx (None: empty store).
        segments_merged: transactions folded into the snapshot, as segment files or
            inline in the log (0: nothing to do).
        versions: rows in the new snapshot.
        snapshot: path of the snapshot Parquet file, or None.
        bytes_before: size of the data files that were replaced.
        bytes_after: size of the new snapshot files.
    """

    upto_tx: int | None
    segments_merged: int
    versions: int
    snapshot: str | None
    bytes_before: int
    bytes_after: int


class _Snapshot:
    """The current snapshot: its log entry and its memory-mapped doc cache."""

    __slots__ = ("entry", "docs")

    def __init__(self, entry: tlog.CompactEntry, docs: cache.DocsFile) -> None:
        self.entry = entry
        self.docs = docs


def _default_clock() -> datetime:
    return datetime.now(UTC)


def _fold_later(ref: weakref.ref[ObjectStore]) -> None:
    store = ref()
    if store is not None:
        store._fold_on_timer()


class ObjectStore:
    """A versioned document store in a directory of Parquet files.

    Documents are JSON-shaped dicts with a string ``"xt/id"`` and a string ``"type"``.
    ``get`` returns a dict equal to the one that was put: same keys, same values, a key
    set to ``None`` stays ``None`` and an absent key stays absent. Tuples come back as
    lists (as with JSON); the order of keys is not kept.

    Args:
        path: the store directory, e.g. ``<workspace>/.ctxnb/store``.
        create: create the directory if it does not exist (else raise StoreError).
        clock: returns the current time as an aware datetime; tx times come from it.
        inline_max_bytes: a transaction whose documents' JSON is at most this many
            bytes is committed inline, in its log line, and reaches Parquet at the next
            :meth:`fold`; 0 writes every transaction as a Parquet segment.
        fold_every: fold once this many inline transactions wait (see :meth:`fold`).
        fold_after: seconds after an inline commit by which a background timer folds
            it; None: no timer (folds happen at ``fold_every``, :meth:`fold` and
            :meth:`close`).

    Raises:
        StoreError: no store at ``path`` and ``create`` is false.
        CorruptStoreError: a file in the directory is damaged or foreign (``.path``
            names it).

    Example:
        >>> import tempfile
        >>> store = ObjectStore(tempfile.mkdtemp())
        >>> store.put([{"xt/id": "f1", "type": "file", "content": None, "char_count": 0}])
        TxRecord(tx_id=1, ...)
        >>> store.get("f1")
        {'xt/id': 'f1', 'type': 'file', 'content': None, 'char_count': 0}
        >>> store.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        clock: Callable[[], datetime] | None = None,
        inline_max_bytes: int = INLINE_MAX_BYTES,
        fold_every: int = FOLD_EVERY_TX,
        fold_after: float | None = FOLD_AFTER_SECONDS,
    ) -> None:
        self.path = Path(path)
        self._dir = str(self.path)
        self._clock = clock or _default_clock
        self._inline_max = inline_max_bytes
        self._fold_every = max(1, fold_every)
        self._fold_after = fold_after
        self._fold_timer: threading.Timer | None = None
        # Live folds (newer than the snapshot) by file, the last tx they or the snapshot
        # cover, and the inline transactions after it (not in any Parquet file yet).
        self._folds: dict[str, tlog.FoldEntry] = {}
        self._folded_upto = 0
        self._unfolded: list[int] = []
        self._marker_version = tlog.FORMAT_VERSION
        self._mu = threading.RLock()
        self._closed = False
        self._log_path = os.path.join(self._dir, TXLOG)
        self._log_offset = 0  # end of the last complete line we applied
        self._log_lines = 0
        self._seen_size = -1
        self._seen_ino = -1
        self._txs: list[TxRecord] = []
        self._tx_times: list[datetime] = []
        self._segments: dict[int, tlog.TxEntry] = {}  # live segments: tx > snapshot upto
        self._snap: _Snapshot | None = None
        # Versions newer than the snapshot: id -> [(tx_id, row, type)], oldest first; the
        # version is row ``row`` of ``self._pending[tx_id]``.
        self._overlay: dict[str, list[tuple[int, int, str]]] = {}
        self._pending: dict[int, _PendingSegment] = {}
        self._log_fd: int | None = None
        self._writer_fd: int | None = None
        self._cleaned = False
        self._open(create)

    @classmethod
    def for_workspace(cls, workspace_root: str | os.PathLike[str], **kwargs: Any) -> ObjectStore:
        """The store of a workspace, at ``<root>/.ctxnb/store`` (created if missing).

        Example:
            >>> import tempfile
            >>> ObjectStore.for_workspace(tempfile.mkdtemp()).path.parts[-2:]
            ('.ctxnb', 'store')
        """
        return cls(Path(workspace_root) / ".ctxnb" / "store", **kwargs)

    # --- opening ----------------------------------------------------------------------

    def _open(self, create: bool) -> None:
        marker = os.path.join(self._dir, MARKER)
        # One stat, not isdir() then exists(): another process may create the directory
        # between two checks, and this one must then open it, not call it a file.
        try:
            is_dir: bool | None = stat.S_ISDIR(os.stat(self._dir).st_mode)
        except FileNotFoundError:
            is_dir = None
        except NotADirectoryError:
            blocker = next(
                (
                    str(a)
                    for a in reversed(Path(self._dir).parents)
                    if a.exists() and not a.is_dir()
                ),
                os.path.dirname(self._dir),
            )
            raise StoreError(
                f"cannot open the store at {self._dir}: {blocker} is a file, not a directory; "
                "move or delete that file, or pass another store path"
            ) from None
        if is_dir is False:
            raise StoreError(f"{self._dir} exists and is not a directory; pass a store path")
        if is_dir is None:
            if not create:
                raise StoreError(
                    f"no ctxnb store at {self._dir}; create one with ObjectStore(path) "
                    "(create=True is the default)"
                )
            os.makedirs(self._dir, exist_ok=True)
        listed = [] if os.path.exists(marker) else os.listdir(self._dir)
        # A marker listed now was published by another process since the check.
        if not os.path.exists(marker) and MARKER not in listed:
            entries = [e for e in listed if not e.startswith(tlog.TMP_PREFIX)]
            if entries and not (create and self._being_created(entries)):
                first = os.path.join(self._dir, sorted(entries)[0])
                raise CorruptStoreError(
                    f"{self._dir} is not a ctxnb store: it has files (e.g. {first}) but no "
                    f"{MARKER}; point ObjectStore at an empty or ctxnb-made directory",
                    path=first,
                )
            if not create:
                raise StoreError(f"no ctxnb store at {self._dir} (no {MARKER})")
            self._init_dir(marker)
        self._check_marker(marker)
        for sub in (SEGMENTS, SNAPSHOTS):
            os.makedirs(os.path.join(self._dir, sub), exist_ok=True)
        # Read before the log: a commit after this only moves the log further ahead.
        committed_end = guard.read_mark(os.path.join(self._dir, WRITER_LOCK))
        if not os.path.exists(self._log_path):
            if self._has_data_files() or committed_end:
                raise CorruptStoreError(
                    f"{self._log_path} is missing but the store has committed data; without "
                    "the log no transaction can be trusted. Restore it from a backup",
                    path=self._log_path,
                )
            os.close(os.open(self._log_path, os.O_WRONLY | os.O_CREAT, 0o644))
        self._check_layout()
        files = guard.data_files(self._dir)
        self._refresh(force=True)
        if committed_end > self._log_offset:
            raise CorruptStoreError(
                f"{self._log_path} ends its committed lines at byte {self._log_offset}, but "
                f"transactions were committed up to byte {committed_end} (recorded in "
                f"{WRITER_LOCK}): the log was cut short or replaced, and opening it would "
                "lose them. Restore the log from a backup",
                path=self._log_path,
            )
        self._refuse_files_ahead(files)

    def _refuse_files_ahead(self, files: list[tuple[str, int, int]]) -> None:
        ahead = guard.ahead_of_log(files, len(self._txs))
        if ahead is not None:
            raise CorruptStoreError(
                f"{ahead} was written after transaction {len(self._txs)}, the last one "
                f"{self._log_path} holds: the log lost committed lines. Restore the log "
                "from a backup",
                path=self._log_path,
            )

    def _init_dir(self, marker: str) -> None:
        # The marker's bytes first (a .tmp- name nobody reads), so that the moment
        # between the first data folder and the marker, when another process that opens
        # the directory finds it is not a store, stays as short as a rename.
        tmp = self._marker_tmp()
        for sub in (SEGMENTS, SNAPSHOTS):
            os.makedirs(os.path.join(self._dir, sub), exist_ok=True)
        os.close(os.open(self._log_path, os.O_WRONLY | os.O_CREAT, 0o644))
        self._publish_marker(tmp, marker)  # last: a directory with a marker is a complete store

    def _being_created(self, entries: list[str]) -> bool:
        """Whether the directory holds only what another process's ``_init_dir`` makes
        before its marker (empty data folders, an empty log): then this process finishes
        the same creation instead of refusing the directory. Both write the same marker.
        """
        if not set(entries) <= {SEGMENTS, SNAPSHOTS, TXLOG}:
            return False
        for sub in (SEGMENTS, SNAPSHOTS):
            folder = os.path.join(self._dir, sub)
            if os.path.exists(folder) and (
                not os.path.isdir(folder)
                or any(not e.startswith(tlog.TMP_PREFIX) for e in os.listdir(folder))
            ):
                return False
        return not os.path.exists(self._log_path) or os.path.getsize(self._log_path) == 0

    def _marker_tmp(self) -> str:
        """The marker of the current format, written and fsynced under a .tmp- name."""
        body = json.dumps({"format": tlog.FORMAT_NAME, "version": tlog.FORMAT_VERSION}) + "\n"
        tmp = os.path.join(self._dir, f"{tlog.TMP_PREFIX}{secrets.token_hex(4)}-{MARKER}")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def _publish_marker(self, tmp: str, marker: str) -> None:
        os.replace(tmp, marker)
        fmt.fsync_dir(self._dir)
        self._marker_version = tlog.FORMAT_VERSION

    def _check_marker(self, marker: str) -> None:
        try:
            with open(marker, encoding="utf-8") as f:
                info = json.load(f)
            name, version = info["format"], info["version"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptStoreError(
                f"{marker} is not a ctxnb store marker ({exc}); restore it or move the "
                "directory aside",
                path=marker,
            ) from exc
        if name != tlog.FORMAT_NAME:
            raise CorruptStoreError(f"{marker} names format {name!r}, not ctxnb's", path=marker)
        if type(version) is not int or version > tlog.FORMAT_VERSION:
            raise StoreError(
                f"{self._dir} uses store format {version!r}; this ctxnb reads up to "
                f"{tlog.FORMAT_VERSION}. Upgrade ctxnb: pip install -U ctxnb"
            )
        self._marker_version = version

    def _upgrade_marker(self) -> None:
        """Mark an older store with the current format before its first inline
        transaction or fold.

        A ctxnb that reads only an older format then asks to be upgraded instead of
        reading the store without its inline transactions. Needs the writer lock.
        """
        marker = os.path.join(self._dir, MARKER)
        self._check_marker(marker)  # another process may have done it already
        if self._marker_version < tlog.FORMAT_VERSION:
            self._publish_marker(self._marker_tmp(), marker)

    def _has_data_files(self) -> bool:
        return any(
            not e.startswith(tlog.TMP_PREFIX)
            for sub in (SEGMENTS, SNAPSHOTS)
            for e in os.listdir(os.path.join(self._dir, sub))
        )

    def _check_layout(self) -> None:
        """Refuse foreign files: they are either damage or someone else's data."""
        foreign: list[str] = []
        for e in os.listdir(self._dir):
            if e not in _KNOWN_TOP and not e.startswith(tlog.TMP_PREFIX):
                foreign.append(os.path.join(self._dir, e))
        for sub, patterns in (
            (SEGMENTS, (tlog.SEG_RE,)),
            (SNAPSHOTS, (tlog.SNAP_RE, tlog.DOCS_RE)),
        ):
            folder = os.path.join(self._dir, sub)
            for e in os.listdir(folder):
                if e.startswith(tlog.TMP_PREFIX) or any(p.fullmatch(e) for p in patterns):
                    continue
                foreign.append(os.path.join(folder, e))
        if foreign:
            raise CorruptStoreError(
                f"{foreign[0]} is not a file ctxnb writes in a store directory"
                + (f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else "")
                + "; move it out of the store directory",
                path=foreign[0],
            )

    # --- reading the log --------------------------------------------------------------

    def _refresh(self, *, force: bool = False) -> None:
        """Apply log lines other processes appended since we last looked.

        The fast path is one ``stat``; it is what keeps ``get`` cheap.
        """
        try:
            st = os.stat(self._log_path)
        except FileNotFoundError as exc:
            raise CorruptStoreError(
                f"{self._log_path} has disappeared; restore the store directory from a backup",
                path=self._log_path,
            ) from exc
        if (
            not force
            and st.st_size == self._seen_size
            and st.st_ino == self._seen_ino
            and self._seen_size == self._log_offset
        ):
            return
        if self._seen_ino not in (-1, st.st_ino):
            raise CorruptStoreError(
                f"{self._log_path} was replaced by another file while the store was open; "
                "the log is append-only. Reopen the store",
                path=self._log_path,
            )
        missing: FileNotFoundError | None = None
        for _ in range(_RETRIES):
            with open(self._log_path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self._log_offset:
                    raise CorruptStoreError(
                        f"{self._log_path} shrank below committed data ({size} < "
                        f"{self._log_offset} bytes); restore it from a backup",
                        path=self._log_path,
                    )
                f.seek(self._log_offset)
                data = f.read(size - self._log_offset)
            end = data.rfind(b"\n") + 1
            entries = tlog.parse(
                data[:end],
                log_path=self._log_path,
                first_line=self._log_lines,
                next_tx=len(self._txs) + 1,
            )
            try:
                self._apply(entries, self._log_offset + end, data.count(b"\n", 0, end))
            except FileNotFoundError as exc:
                # A compaction removed a segment between our reading the log and the
                # file; the log now says which snapshot holds it. Read on and retry.
                missing = exc
                continue
            self._seen_size = self._log_offset + (len(data) - end)
            self._seen_ino = st.st_ino
            return
        path = getattr(missing, "filename", None) or "?"
        raise CorruptStoreError(
            f"{path} is named by the committed log {self._log_path} but is missing; "
            "committed data has been removed by hand. Restore it from a backup",
            path=str(path),
        )

    def _apply(self, entries: list[tlog.Entry], new_offset: int, nlines: int) -> None:
        """Load what the new log entries add, then switch state in one step."""
        if not entries:
            self._log_offset, self._log_lines = new_offset, self._log_lines + nlines
            return
        last_compact = None
        for e in entries:
            if isinstance(e, tlog.CompactEntry):
                last_compact = e
        snap = self._snap
        new_snap: _Snapshot | None = None
        upto = snap.entry.upto if snap else 0
        if last_compact is not None:
            new_snap = _Snapshot(last_compact, self._open_docs(last_compact))
            upto = last_compact.upto
        new_txs = [e for e in entries if isinstance(e, tlog.TxEntry)]
        loaded: list[tuple[tlog.TxEntry, _PendingSegment]] = []
        try:
            for e in new_txs:
                if e.tx > upto and e.file is not None:
                    loaded.append((e, _PendingSegment(self._read_segment(e))))
                elif e.tx > upto and e.docs:
                    loaded.append((e, _PendingSegment.inline(e.docs, None, e.tx, e.time_us)))
        except BaseException:
            if new_snap is not None:
                new_snap.docs.close()
            raise
        # Commit the new state; nothing below can fail on I/O.
        for e in new_txs:
            t = tlog.from_us(e.time_us)
            self._txs.append(TxRecord(e.tx, t, e.count))
            self._tx_times.append(t)
        if new_snap is not None:
            old, self._snap = self._snap, new_snap
            if old is not None:
                old.docs.close()
            self._segments = {tx: s for tx, s in self._segments.items() if tx > upto}
            self._pending = {tx: p for tx, p in self._pending.items() if tx > upto}
            for key in list(self._overlay):
                kept = [v for v in self._overlay[key] if v[0] > upto]
                if kept:
                    self._overlay[key] = kept
                else:
                    del self._overlay[key]
        for e, docs in loaded:
            self._segments[e.tx] = e
            self._add_overlay(e.tx, docs)
            if e.file is None:
                self._unfolded.append(e.tx)
        for e in entries:
            if isinstance(e, tlog.FoldEntry) and e.upto > upto:
                self._folds[e.file] = e
        if new_snap is not None:
            self._folds = {f: e for f, e in self._folds.items() if e.upto > upto}
        self._folded_upto = max([upto, *(e.upto for e in self._folds.values())])
        self._unfolded = [tx for tx in self._unfolded if tx > self._folded_upto]
        if len(loaded) > 1:
            # Decoding many segments leaves freed buffers in Arrow's allocator; give them
            # back, so that a store opened once does not keep its peak.
            pa.default_memory_pool().release_unused()
        self._log_offset, self._log_lines = new_offset, self._log_lines + nlines

    def _add_overlay(self, tx: int, pending: _PendingSegment) -> None:
        self._pending[tx] = pending
        overlay = self._overlay
        ids, types = pending.ids_and_types()
        for row, (key, typ) in enumerate(zip(ids, types, strict=True)):
            versions = overlay.get(key)
            if versions is None:
                overlay[key] = [(tx, row, typ)]
            else:
                versions.append((tx, row, typ))

    def _json(self, tx: int, row: int) -> bytes:
        """The JSON bytes of a version newer than the snapshot."""
        return self._pending[tx].json(row)

    def _abs(self, rel: str) -> str:
        return os.path.join(self._dir, rel)

    def _read_segment(self, e: tlog.TxEntry) -> pa.Table:
        assert e.file is not None
        path = self._abs(e.file)
        size = os.path.getsize(path)  # FileNotFoundError: handled by _refresh
        if size != e.size:
            raise CorruptStoreError(
                f"{path} is {size} bytes but was committed with {e.size}; the file is "
                "damaged. Restore it from a backup",
                path=path,
            )
        table = fmt.read_parquet(path)
        if table.num_rows != e.count:
            raise CorruptStoreError(
                f"{path} has {table.num_rows} rows but tx {e.tx} committed {e.count}",
                path=path,
            )
        if table.num_rows and not pc.all(pc.equal(table.column("tx_id"), e.tx)).as_py():
            raise CorruptStoreError(
                f"{path} holds rows of another transaction than tx {e.tx}, which names it; "
                "restore it from a backup",
                path=path,
            )
        return table

    def _open_docs(self, e: tlog.CompactEntry) -> cache.DocsFile:
        parquet = self._abs(e.file)
        size = os.path.getsize(parquet)
        if size != e.size:
            raise CorruptStoreError(
                f"{parquet} is {size} bytes but was committed with {e.size}; the snapshot "
                "is damaged. Restore it from a backup",
                path=parquet,
            )
        docs_path = self._abs(e.docs)
        try:
            if os.path.getsize(docs_path) != e.docs_size:
                raise CorruptStoreError(f"{docs_path} has the wrong size", path=docs_path)
            return cache.DocsFile(docs_path, e.rows, e.upto)
        except (CorruptStoreError, FileNotFoundError) as exc:
            if not os.path.exists(parquet):
                raise
            # The doc cache is derived from the snapshot Parquet: rebuild it.
            log.warning("rebuilding the doc cache %s from %s (%s)", docs_path, parquet, exc)
            self._rebuild_docs(parquet, docs_path)
            return cache.DocsFile(docs_path, e.rows, e.upto)

    def _rebuild_docs(self, parquet: str, docs_path: str) -> None:
        """Write the doc cache of a snapshot from its Parquet, one row group at a time."""
        groups = fmt.row_groups(parquet)
        first = next(groups, None)
        chunks = [] if first is None else [first]

        def blobs(chunk: pa.Table) -> list[bytes]:
            return [tlog.dumps(d).encode() for d in fmt.decode(chunk)]

        tmp = self._tmp_name(SNAPSHOTS, os.path.basename(docs_path))
        first_blobs = blobs(first) if first is not None else []
        with (
            fmt.publishing(tmp, docs_path),
            cache.writing(tmp, cache.train_dict(first_blobs)) as writer,
        ):
            for chunk in [*chunks, *groups]:
                data = first_blobs if chunk is first else blobs(chunk)
                writer.write(*_cache_columns(chunk), [writer.compress(b) for b in data])

    def _tmp_name(self, sub: str, name: str) -> str:
        return os.path.join(self._dir, sub, f"{tlog.TMP_PREFIX}{secrets.token_hex(4)}-{name}")

    # --- writing ----------------------------------------------------------------------

    def _lock(self, name: str, fd: int | None) -> int:
        if fd is None:
            fd = os.open(os.path.join(self._dir, name), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _now(self) -> datetime:
        now = self._clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise StoreError(
                f"the store's clock returned {now!r}; it must return an aware datetime, "
                "e.g. datetime.now(timezone.utc)"
            )
        now = now.astimezone(UTC)
        # Tx times never go backwards, so as_of(time) has one answer even if the
        # wall clock steps back.
        if self._tx_times and now < self._tx_times[-1]:
            now = self._tx_times[-1]
        return now

    def put(self, docs: Iterable[Mapping[str, Any]]) -> TxRecord:
        """Write documents as one atomic transaction.

        Every document needs a string ``"xt/id"`` and a string ``"type"``; values must
        be JSON-shaped. If an id appears more than once, the last document wins. An
        empty ``docs`` commits an empty transaction (count 0).

        Returns:
            The committed transaction. Once ``put`` returns, the transaction survives a
            crash of this process or of the machine.

        Raises:
            StoreError: a document is not storable (the message names it and the key).

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> tx = store.put([{"xt/id": "a", "type": "note"}, {"xt/id": "b", "type": "note"}])
            >>> tx.tx_id, tx.count
            (1, 2)
        """
        self._check_open()
        batch: dict[str, Mapping[str, Any]] = {}
        for i, doc in enumerate(docs):
            batch[fmt.validate(doc, i)] = doc
        data: pa.Table | None = None
        blobs = self._inline_blobs(batch)
        if batch and blobs is None:
            data = fmt.to_table(fmt.encode(list(batch.values())))
        with self._mu:
            self._check_open()
            written: str | None = None  # a segment renamed into place, not yet logged
            self._writer_fd = self._lock(WRITER_LOCK, self._writer_fd)
            try:
                self._refresh(force=True)
                self._truncate_torn_tail()
                if not self._cleaned:
                    self._cleanup_segments()
                    self._cleaned = True
                tx_id = len(self._txs) + 1
                now = self._now()
                entry = tlog.TxEntry(tx_id, tlog.to_us(now), len(batch), None, 0)
                line = tlog.tx_line(entry)
                if blobs is not None:
                    if self._marker_version < tlog.INLINE_FORMAT_VERSION:
                        self._upgrade_marker()
                    line = tlog.txdocs_line(tx_id, entry.time_us, blobs)
                    # From the JSON, not the caller's dicts, which may change after put.
                    pending = _PendingSegment.inline(
                        None,
                        blobs,
                        tx_id,
                        entry.time_us,
                        ids=list(batch),
                        types=[d["type"] for d in batch.values()],
                    )
                elif data is not None:
                    name = f"seg-{tx_id:012d}-{secrets.token_hex(4)}.parquet"
                    final = os.path.join(self._dir, SEGMENTS, name)
                    table = fmt.with_tx(data, tx_id, now)
                    size = fmt.write_segment(table, self._tmp_name(SEGMENTS, name), final)
                    written = final
                    entry = tlog.TxEntry(
                        tx_id, entry.time_us, len(batch), f"{SEGMENTS}/{name}", size
                    )
                    line = tlog.tx_line(entry)
                    pending = _PendingSegment(table)
                self._append_log(line)
            except OSError as exc:
                if written is not None:
                    # Not committed: outside readers of the Parquet files must not see it.
                    _unlink(written)
                raise StoreError(f"cannot commit to {self._dir}: {exc}") from exc
            finally:
                fcntl.flock(self._writer_fd, fcntl.LOCK_UN)
            if batch:
                self._segments[tx_id] = entry
                self._add_overlay(tx_id, pending)
                if blobs is not None:
                    self._unfolded.append(tx_id)
            record = TxRecord(tx_id, tlog.from_us(entry.time_us), len(batch))
            self._txs.append(record)
            self._tx_times.append(record.tx_time)
            self._after_commit()
            return record

    def _after_commit(self) -> None:
        """Keep outside readers' lag bounded, without folding on every write."""
        if len(self._unfolded) >= self._fold_every:
            self._fold(wait=False)
        elif self._unfolded and self._fold_after is not None and self._fold_timer is None:
            # The timer holds the store weakly: a store dropped without close() is
            # collected (its descriptors closed) instead of living on for the timer.
            timer = threading.Timer(self._fold_after, _fold_later, (weakref.ref(self),))
            timer.daemon = True
            self._fold_timer = timer
            timer.start()

    def _fold_on_timer(self) -> None:
        with self._mu:
            self._fold_timer = None
            if self._closed:
                return
            try:
                self.fold()
            except (StoreError, OSError) as exc:
                # Nothing is lost (the log holds the documents); the next fold retries.
                log.warning("could not fold inline transactions of %s: %s", self._dir, exc)

    def fold(self) -> int:
        """Write the inline transactions not yet in Parquet into one Parquet file.

        Small transactions commit inline, in their log line (one fsync). A fold puts
        their versions into one segment file as well, so that every committed version
        is in a Parquet file that pandas, DuckDB or Spark read without ctxnb. Nothing
        ctxnb reads changes. It runs by itself once ``fold_every`` inline transactions
        wait, ``fold_after`` seconds after an inline commit, at :meth:`close`, after
        ``Workspace.index()`` and at a session's save; its cost is about one segment
        commit, whatever the size of the store.

        Returns:
            How many transactions were folded (0: nothing waited).

        Example:
            >>> import glob, tempfile
            >>> import pandas as pd
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 1}])
            >>> store.fold()
            1
            >>> files = glob.glob(f"{store.path}/*/*.parquet")
            >>> pd.concat(pd.read_parquet(f) for f in files)["xt_id"].tolist()
            ['a']
        """
        return self._fold(wait=True)

    def _fold(self, *, wait: bool) -> int:
        with self._mu:
            self._check_open()
            fd = os.open(os.path.join(self._dir, COMPACT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                # A compaction is running: a commit does not wait for it (the
                # compaction or the next commit folds these transactions).
                os.close(fd)
                return 0
            try:
                # Under the writer lock: another process's first commit removes segment
                # files the log does not name yet.
                self._writer_fd = self._lock(WRITER_LOCK, self._writer_fd)
                try:
                    self._refresh(force=True)
                    todo = list(self._unfolded)
                    if not todo:
                        return 0
                    self._truncate_torn_tail()
                    table = pa.concat_tables([self._pending[tx].table for tx in todo])
                    name = f"seg-{todo[-1]:012d}-{secrets.token_hex(4)}.parquet"
                    final = os.path.join(self._dir, SEGMENTS, name)
                    size = fmt.write_segment(table, self._tmp_name(SEGMENTS, name), final)
                    entry = tlog.FoldEntry(
                        todo[0], todo[-1], f"{SEGMENTS}/{name}", size, table.num_rows
                    )
                    try:
                        if self._marker_version < tlog.FOLD_FORMAT_VERSION:
                            self._upgrade_marker()
                        self._append_log(tlog.fold_line(entry))
                    except BaseException:
                        _unlink(final)  # not committed: no outside reader may count it
                        raise
                    self._apply([entry], self._log_offset, 0)
                    return len(todo)
                except OSError as exc:
                    raise StoreError(
                        f"cannot fold inline transactions in {self._dir}: {exc}"
                    ) from exc
                finally:
                    fcntl.flock(self._writer_fd, fcntl.LOCK_UN)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _inline_blobs(self, batch: Mapping[str, Mapping[str, Any]]) -> list[bytes] | None:
        """The documents' JSON when the transaction is small enough to commit inline."""
        if not batch or len(batch) > _INLINE_MAX_DOCS or self._inline_max <= 0:
            return None
        blobs, total = [], 0
        for key, doc in batch.items():
            try:
                blob = tlog.dumps(doc).encode("utf-8")
            except UnicodeEncodeError as exc:
                # The same refusal as a segment's (Arrow strings are valid UTF-8), so that
                # compaction can always fold an inline transaction into Parquet.
                bad = next(k for k, v in doc.items() if not _utf8_ok(k) or not _utf8_ok(v))
                raise StoreError(
                    f"document {key!r} key {bad!r} cannot be stored: {exc.reason} "
                    "(a lone surrogate); strings must be valid Unicode"
                ) from exc
            total += len(blob)
            if total > self._inline_max:
                return None
            blobs.append(blob)
        return blobs

    def _append_log(self, line: bytes) -> None:
        """Append one line as the commit point; on failure leave the log as it was."""
        if self._log_fd is None:
            self._log_fd = os.open(self._log_path, os.O_WRONLY | os.O_APPEND)
        try:
            tlog.append(self._log_fd, line)
        except BaseException:
            os.truncate(self._log_path, self._log_offset)
            raise
        self._log_offset += len(line)
        self._log_lines += 1
        self._seen_size = self._log_offset
        if self._writer_fd is not None:
            # After the log's fsync, so never ahead of a durable log (see _storeguard).
            os.pwrite(self._writer_fd, guard.mark(self._log_offset), 0)

    def _truncate_torn_tail(self) -> None:
        # Bytes after the last newline are a line a crashed writer never finished: it was
        # never acknowledged, so it is dropped before the next line goes in.
        if os.path.getsize(self._log_path) > self._log_offset:
            log.info("dropping an unfinished last line from %s", self._log_path)
            os.truncate(self._log_path, self._log_offset)
            self._seen_size = self._log_offset

    def _cleanup_segments(self) -> None:
        """Remove segment files the log does not reference (needs the writer lock)."""
        live = {os.path.basename(e.file) for e in self._segments.values() if e.file}
        live |= {os.path.basename(f) for f in self._folds}
        folder = os.path.join(self._dir, SEGMENTS)
        removed = 0
        for name in os.listdir(folder):
            if name not in live:
                _unlink(os.path.join(folder, name))
                removed += 1
        if removed:
            fmt.fsync_dir(folder)

    # --- compaction -------------------------------------------------------------------

    def compact(self) -> CompactReport:
        """Merge all segments and the old snapshot into one snapshot, keeping every version.

        Readers keep working meanwhile and never see a half-done compaction: the new
        snapshot takes over with one log line. Writers are held up only for that line.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 1}])
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 2}])
            >>> report = store.compact()
            >>> report.segments_merged, report.versions, len(store.history("a"))
            (2, 2, 2)
        """
        with self._mu:
            self._check_open()
            fd = self._lock(COMPACT_LOCK, None)
            try:
                return self._compact_locked()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _compact_locked(self) -> CompactReport:
        self._refresh()
        snap = self._snap
        segs = [self._segments[tx] for tx in sorted(self._segments)]
        if not segs:
            self._cleanup_snapshots()
            return CompactReport(
                snap.entry.upto if snap else (len(self._txs) or None),
                0,
                snap.entry.rows if snap else 0,
                self._abs(snap.entry.file) if snap else None,
                0,
                0,
            )
        upto = len(self._txs)
        replaced = [s.file for s in segs if s.file] + sorted(self._folds)
        if snap is not None:
            replaced += [snap.entry.file, snap.entry.docs]
        bytes_before = sum(
            os.path.getsize(self._abs(f)) for f in replaced if os.path.exists(self._abs(f))
        )
        pending = [self._pending[s.tx].table for s in segs if s.tx in self._pending]
        new = pa.concat_tables(pending) if pending else fmt.SCHEMA.empty_table()
        if new.num_rows != sum(s.count for s in segs):
            raise StoreError(
                f"compaction of {self._dir} stopped: the versions in memory do not match the "
                "log. Nothing was changed; reopen the store and retry"
            )
        name = f"snap-{upto:012d}-{secrets.token_hex(4)}"
        folder = os.path.join(self._dir, SNAPSHOTS)
        final = os.path.join(folder, name + ".parquet")
        docs_final = os.path.join(folder, name + ".docs.arrow")
        tmp, docs_tmp = self._tmp_name(SNAPSHOTS, name), self._tmp_name(SNAPSHOTS, name + "-docs")
        with fmt.publishing(tmp, final), fmt.publishing(docs_tmp, docs_final):
            rows = compaction.write_snapshot(
                old_parquet=self._abs(snap.entry.file) if snap else None,
                old_docs=snap.docs if snap else None,
                new=new,
                parquet_tmp=tmp,
                docs_tmp=docs_tmp,
            )
        size, docs_size = os.path.getsize(final), os.path.getsize(docs_final)
        fmt.fsync_dir(folder)
        entry = tlog.CompactEntry(
            upto=upto,
            file=f"{SNAPSHOTS}/{name}.parquet",
            size=size,
            docs=f"{SNAPSHOTS}/{name}.docs.arrow",
            docs_size=docs_size,
            rows=rows,
            replaces=tuple(replaced),
        )
        self._writer_fd = self._lock(WRITER_LOCK, self._writer_fd)
        try:
            self._refresh(force=True)
            self._truncate_torn_tail()
            self._append_log(tlog.compact_line(entry))
            self._apply([entry], self._log_offset, 0)
            # Segments of commits that failed or crashed, which outside readers of the
            # Parquet files would count (the writer lock keeps out the one in flight).
            self._cleanup_segments()
        finally:
            fcntl.flock(self._writer_fd, fcntl.LOCK_UN)
        self._seen_size = self._log_offset
        for rel in replaced:
            _unlink(self._abs(rel))
        self._cleanup_snapshots()
        fmt.fsync_dir(os.path.join(self._dir, SEGMENTS))
        return CompactReport(
            upto, len(segs), rows, self._abs(entry.file), bytes_before, size + docs_size
        )

    def _cleanup_snapshots(self) -> None:
        """Remove snapshot files no longer current (needs the compaction lock).

        Never one that the log cannot account for: that one holds data the log lost.
        """
        files = [f for f in guard.data_files(self._dir) if f[2] == 0]
        self._refresh()
        self._refuse_files_ahead(files)
        snap = self._snap
        live = (
            {os.path.basename(snap.entry.file), os.path.basename(snap.entry.docs)}
            if snap
            else set()
        )
        folder = os.path.join(self._dir, SNAPSHOTS)
        for name in os.listdir(folder):
            if name not in live:
                _unlink(os.path.join(folder, name))
        fmt.fsync_dir(folder)

    # --- reads ------------------------------------------------------------------------

    def get(self, id: str) -> dict[str, Any] | None:
        """The latest version of a document, or None if the store has never seen ``id``.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note", "tags": ["x"]}])
            >>> store.get("a"), store.get("nope")
            ({'xt/id': 'a', 'type': 'note', 'tags': ['x']}, None)
        """
        with self._mu:
            self._check_open()
            self._refresh()
            versions = self._overlay.get(id)
            if versions is not None:
                return json.loads(self._json(*versions[-1][:2]))
            snap = self._snap
            if snap is not None:
                k = snap.docs.index.get(id)
                if k is not None:
                    return json.loads(snap.docs.raw(snap.docs.starts[k + 1] - 1))
            return None

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The latest versions of several documents; ids the store lacks are left out.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note"}])
            >>> list(store.get_many(["a", "b"]))
            ['a']
        """
        with self._mu:
            self._check_open()
            self._refresh()
            overlay, out = self._overlay, {}
            snap = self._snap.docs if self._snap else None
            loads = json.loads
            for key in ids:
                if key in out:
                    continue
                versions = overlay.get(key)
                if versions is not None:
                    out[key] = loads(self._json(*versions[-1][:2]))
                elif snap is not None:
                    k = snap.index.get(key)
                    if k is not None:
                        out[key] = loads(snap.raw(snap.starts[k + 1] - 1))
            return out

    def latest_tx_of(self, id: str) -> int | None:
        """The transaction of the latest version of ``id`` (None if unknown), without
        decoding any document.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note"}])
            >>> _ = store.put([{"xt/id": "b", "type": "note"}])
            >>> store.latest_tx_of("a"), store.latest_tx_of("b"), store.latest_tx_of("c")
            (1, 2, None)
        """
        with self._mu:
            self._check_open()
            self._refresh()
            versions = self._overlay.get(id)
            if versions:
                return versions[-1][0]
            snap = self._snap.docs if self._snap else None
            if snap is not None:
                k = snap.index.get(id)
                if k is not None:
                    return int(snap.txs[snap.starts[k + 1] - 1])
            return None

    def history(self, id: str) -> list[Version]:
        """Every version of a document, oldest first (empty if the id is unknown).

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 1}])
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 2}])
            >>> [(v.tx_id, v.doc["v"], v.version_id) for v in store.history("a")]
            [(1, 1, 'a@1'), (2, 2, 'a@2')]
        """
        with self._mu:
            self._check_open()
            self._refresh()
            times, out = self._tx_times, []
            snap = self._snap.docs if self._snap else None
            if snap is not None:
                k = snap.index.get(id)
                if k is not None:
                    txs, raw = snap.txs, snap.raw
                    for row in range(snap.starts[k], snap.starts[k + 1]):
                        tx = txs[row]
                        out.append(Version(json.loads(raw(row)), tx, times[tx - 1]))
            for tx, row, _ in self._overlay.get(id, ()):
                out.append(Version(json.loads(self._json(tx, row)), tx, times[tx - 1]))
            return out

    def as_of(self, id: str, tx: int | datetime | TxRecord) -> dict[str, Any] | None:
        """The version of ``id`` that was current at a transaction or time.

        Args:
            id: the document id.
            tx: a tx id, a TxRecord, or an aware datetime (the latest transaction
                committed at or before it counts).

        Returns:
            The document, or None if it did not exist yet.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> first = store.put([{"xt/id": "a", "type": "note", "v": 1}])
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 2}])
            >>> store.as_of("a", first)["v"], store.as_of("a", first.tx_time)["v"]
            (1, 1)
        """
        with self._mu:
            self._check_open()
            self._refresh()
            limit = self._resolve_tx(tx)
            if limit is None:
                return None
            for v_tx, row, _ in reversed(self._overlay.get(id, ())):
                if v_tx <= limit:
                    return json.loads(self._json(v_tx, row))
            snap = self._snap.docs if self._snap else None
            if snap is not None:
                k = snap.index.get(id)
                if k is not None:
                    txs = snap.txs
                    for row in range(snap.starts[k + 1] - 1, snap.starts[k] - 1, -1):
                        if txs[row] <= limit:
                            return json.loads(snap.raw(row))
            return None

    def _resolve_tx(self, tx: int | datetime | TxRecord | None) -> int | None:
        """A tx reference to a tx id (None: before the first transaction)."""
        if isinstance(tx, TxRecord):
            return tx.tx_id
        if isinstance(tx, datetime):
            if tx.tzinfo is None:
                raise ValueError(
                    f"as_of needs a timezone-aware datetime, got {tx!r}; "
                    "e.g. datetime.now(timezone.utc)"
                )
            n = bisect.bisect_right(self._tx_times, tx.astimezone(UTC))
            return n or None
        if isinstance(tx, int) and not isinstance(tx, bool):
            return tx if tx >= 1 else None
        raise TypeError(f"expected a tx id, a TxRecord or a datetime, got {tx!r}")

    def ids(self, type: str | None = None) -> list[str]:
        """The ids of all documents (optionally of one type, by latest version), sorted.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "b", "type": "file"}, {"xt/id": "a", "type": "chat"}])
            >>> store.ids(), store.ids("file")
            (['a', 'b'], ['b'])
        """
        with self._mu:
            self._check_open()
            self._refresh()
            out: set[str] = set()
            snap = self._snap.docs if self._snap else None
            if snap is not None:
                if type is None:
                    out.update(snap.index)
                else:
                    latest = pa.array(snap.latest_rows(), pa.int64())
                    mask = pc.equal(snap.types().take(latest), type)
                    ids = snap.ids().take(latest).filter(mask)
                    out.update(ids.to_pylist())
            for key, versions in self._overlay.items():
                if type is None or versions[-1][2] == type:
                    out.add(key)
                else:
                    out.discard(key)
            return sorted(out)

    def latest_tx(self) -> TxRecord | None:
        """The last committed transaction, or None for an empty store."""
        with self._mu:
            self._check_open()
            self._refresh()
            return self._txs[-1] if self._txs else None

    def transactions(self) -> list[TxRecord]:
        """Every committed transaction, oldest first."""
        with self._mu:
            self._check_open()
            self._refresh()
            return list(self._txs)

    def scan(
        self,
        type: str | None = None,
        *,
        as_of: int | datetime | TxRecord | None = None,
        all_versions: bool = False,
        columns: Iterable[str] | None = None,
        format: Literal["pandas", "arrow"] = "pandas",
    ) -> Any:
        """Documents as a table with one typed column per field.

        Args:
            type: only documents of this type (judged by the version returned).
            as_of: read as of this tx id, TxRecord or aware datetime.
            all_versions: every version instead of the latest of each document.
            columns: column names to return (see ``docs/store-format.md``). By default
                the envelope, the type's own fields (all fields without ``type``),
                ``extra``, ``tx_id`` and ``tx_time``.
            format: ``"pandas"`` for a DataFrame, ``"arrow"`` for a ``pyarrow.Table``.

        Rows are sorted by ``xt_id``, then ``tx_id``. ``args`` and ``turns`` hold JSON
        text, ``extra`` a JSON object of all other keys.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "f", "type": "file", "content": "hi", "char_count": 2}])
            >>> store.scan("file")[["xt_id", "content", "char_count"]].to_dict("records")
            [{'xt_id': 'f', 'content': 'hi', 'char_count': 2}]
        """
        if format not in ("pandas", "arrow"):
            raise ValueError(f"format must be 'pandas' or 'arrow', not {format!r}")
        wanted = self._scan_columns(type, columns)
        with self._mu:
            self._check_open()
            for _ in range(_RETRIES):
                self._refresh()
                limit = self._resolve_tx(as_of) if as_of is not None else None
                files = [self._abs(self._snap.entry.file)] if self._snap else []
                files += [self._abs(s.file) for _, s in sorted(self._segments.items()) if s.file]
                inline = [
                    self._pending[tx]
                    for tx, s in sorted(self._segments.items())
                    if s.file is None and tx in self._pending
                ]
                if as_of is not None and limit is None:
                    files, inline = [], []
                # A snapshot alone is already sorted by id, then tx.
                presorted = self._snap is not None and len(files) == 1 and not inline
                read = sorted(set(wanted) | {"xt_id", "tx_id", "type"}, key=fmt.SCHEMA.names.index)
                try:
                    tables = [fmt.read_parquet(f, columns=read) for f in files]
                except FileNotFoundError:
                    continue  # a compaction replaced the files; the log says with what
                tables += [p.table.select(read) for p in inline]
                break
            else:
                raise StoreError(f"could not read {self._dir}: files kept changing; retry")
        schema = pa.schema([fmt.SCHEMA.field(n) for n in read])
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        if limit is not None:
            table = table.filter(pc.less_equal(table.column("tx_id"), limit))
        if not presorted:
            table = table.take(pc.sort_indices(table, sort_keys=_SORT_KEYS))
        if not all_versions and table.num_rows:
            ids = table.column("xt_id")
            n = table.num_rows
            last = pc.indices_nonzero(pc.not_equal(ids.slice(1), ids.slice(0, n - 1)))
            table = table.take(pa.concat_arrays([last.cast(pa.int64()), pa.array([n - 1])]))
        if type is not None:
            table = table.filter(pc.equal(table.column("type"), type))
        table = table.select(wanted)
        return table if format == "arrow" else table.to_pandas()

    @staticmethod
    def _scan_columns(type: str | None, columns: Iterable[str] | None) -> list[str]:
        if columns is not None:
            wanted = list(columns)
            unknown = [c for c in wanted if c not in fmt.SCHEMA.names]
            if unknown:
                raise ValueError(
                    f"unknown column(s) {unknown}; store columns are {fmt.SCHEMA.names}"
                )
            return wanted
        envelope = [c for c in fmt.ENVELOPE_COLUMNS if c not in ("tx_id", "tx_time")]
        if type in OBJECT_TYPES:
            own = model_for_type(type).PAYLOAD_FIELDS  # type: ignore[arg-type]
            payload = [c for c in fmt.PAYLOAD_COLUMNS if c in own]
        else:
            payload = list(fmt.PAYLOAD_COLUMNS)
        return [*envelope, *payload, "extra", "tx_id", "tx_time"]

    # --- lifecycle --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self._dir} is closed; open it again")

    def close(self) -> None:
        """Fold what waits (see :meth:`fold`), release files and memory maps.

        Safe to call twice.
        """
        with self._mu:
            if self._closed:
                return
            if self._fold_timer is not None:
                self._fold_timer.cancel()
                self._fold_timer = None
            if self._unfolded:
                try:
                    self._fold(wait=True)
                except (StoreError, OSError) as exc:
                    # The log still holds every document: nothing is lost, the
                    # Parquet files lag until the next fold.
                    log.warning("could not fold inline transactions of %s: %s", self._dir, exc)
            self._closed = True
            for fd in (self._log_fd, self._writer_fd):
                if fd is not None:
                    os.close(fd)
            self._log_fd = self._writer_fd = None
            if self._snap is not None:
                self._snap.docs.close()
                self._snap = None
            self._overlay = {}
            self._pending = {}

    def __del__(self) -> None:
        # A store dropped without close(): its descriptors go with it, as a file
        # object's do (what waits to be folded stays in the log; the next open reads it).
        timer = getattr(self, "_fold_timer", None)
        if timer is not None:
            timer.cancel()
        for name in ("_log_fd", "_writer_fd"):
            fd = getattr(self, name, None)
            if fd is not None:
                setattr(self, name, None)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def pending_segments(self) -> int:
        """How many transactions are not compacted into the snapshot yet.

        Scans and opening read every one of them; :meth:`maybe_compact` keeps the
        number bounded.
        """
        with self._mu:
            self._check_open()
            self._refresh()
            return len(self._segments)

    def maybe_compact(self, threshold: int = 64) -> CompactReport | None:
        """Compact when more than ``threshold`` transactions wait; otherwise do nothing.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> for i in range(3):
            ...     _ = store.put([{"xt/id": "a", "type": "note", "v": i}])
            >>> store.maybe_compact(threshold=2).versions
            3
            >>> store.pending_segments(), store.maybe_compact(threshold=2)
            (0, None)
        """
        if self.pending_segments() <= threshold:
            return None
        return self.compact()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"latest_tx={len(self._txs)}"
        return f"ObjectStore({self._dir!r}, {state})"


_SORT_KEYS = compaction.SORT_KEYS


def _cache_columns(table: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    return tuple(  # type: ignore[return-value]
        table.column(c).combine_chunks() for c in ("xt_id", "tx_id", "type")
    )


class _PendingSegment:
    """A committed transaction newer than the snapshot: its rows and their JSON.

    A segment starts from its Parquet rows, an inline transaction from its documents;
    each builds the other form on first use. Writing and opening stay cheap: a tree
    index that nobody reads back before the next compaction never pays for a JSON
    encoding of every file, and a tool's small write never builds Arrow rows until a
    scan or a compaction needs them.
    """

    __slots__ = ("_table", "_json", "_docs", "_tx", "_time_us", "_ids")

    def __init__(self, table: pa.Table | None) -> None:
        self._table = (
            table.replace_schema_metadata(fmt.SCHEMA.metadata) if table is not None else None
        )
        self._json: list[bytes] | None = None
        self._docs: list[dict[str, Any]] | None = None
        self._tx = 0
        self._time_us = 0
        self._ids: tuple[list[str], list[str]] | None = None

    @classmethod
    def inline(
        cls,
        docs: list[dict[str, Any]] | None,
        blobs: list[bytes] | None,
        tx: int,
        time_us: int,
        *,
        ids: list[str] | None = None,
        types: list[str] | None = None,
    ) -> _PendingSegment:
        """From an inline transaction: its documents as read from the log, or their
        JSON with their ids and types as committed by this process."""
        out = cls(None)
        out._docs, out._json, out._tx, out._time_us = docs, blobs, tx, time_us
        if ids is not None and types is not None:
            out._ids = (ids, types)
        return out

    @property
    def table(self) -> pa.Table:
        """The rows, with tx columns, in :data:`ctxnb._storefmt.SCHEMA`."""
        if self._table is None:
            docs = self._docs
            if docs is None:
                assert self._json is not None
                docs = [json.loads(b) for b in self._json]
            data = fmt.to_table(fmt.encode(docs))
            self._table = fmt.with_tx(data, self._tx, tlog.from_us(self._time_us))
            self._docs = None  # the table and the JSON hold everything from now on
        return self._table

    def ids_and_types(self) -> tuple[list[str], list[str]]:
        if self._ids is not None:
            return self._ids
        if self._docs is not None:
            return [d[fmt.ID_KEY] for d in self._docs], [d["type"] for d in self._docs]
        table = self.table
        return table.column("xt_id").to_pylist(), table.column("type").to_pylist()

    def json(self, row: int) -> bytes:
        if self._json is None:
            docs = self._docs if self._docs is not None else fmt.decode(self.table)
            self._json = [tlog.dumps(d).encode() for d in docs]
        return self._json[row]


def _utf8_ok(value: Any) -> bool:
    try:
        tlog.dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
