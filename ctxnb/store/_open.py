"""Opening an object store and following its transaction log.

:class:`StoreState` is what an open store knows, and how it gets there: the directory,
its marker and layout checked on open, the transaction log read and applied (snapshot,
live segments, inline transactions) whenever another process committed, the lock that
serialises this process's threads, and the small file helpers the reads and the writes
share. :class:`ctxnb.store.objectstore.ObjectStore` *has* one: its reads
(:class:`ctxnb.store._read.StoreReader`) look at it, its writes, folds and compactions
(``objectstore.py``, ``_rotate.py``) append to the log and apply what they appended.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from ..errors import CorruptStoreError, StoreError
from . import _cache as cache
from . import _fmt as fmt
from . import _guard as guard
from . import _log as tlog
from ._pending import SegmentFile, _PendingSegment
from ._rebuild import rebuild_docs
from ._txs import TxRecord, TxTable, archive_loader, check_archive

log = logging.getLogger("ctxnb.store.objectstore")


MARKER, TXLOG, WRITER_LOCK = tlog.MARKER, tlog.TXLOG, tlog.WRITER_LOCK
COMPACT_LOCK = "compact.lock"
SEGMENTS = "segments"
SNAPSHOTS = "snapshots"
_KNOWN_TOP = frozenset({MARKER, TXLOG, WRITER_LOCK, COMPACT_LOCK, SEGMENTS, SNAPSHOTS})
_RETRIES = 8
# The JSON kept of segments read from their files (at least the last one read).
_JSON_CACHE_BYTES = 32 << 20
INLINE_MAX_BYTES = tlog.INLINE_MAX_BYTES
_INLINE_MAX_DOCS = 256
# Inline transactions are folded into a Parquet file (see ObjectStore.fold) once this
# many wait, or this many seconds after the first of them: outside readers of the
# Parquet files never lag further behind. A fold costs about one segment commit.
FOLD_EVERY_TX = tlog.FOLD_EVERY_TX
FOLD_AFTER_SECONDS = tlog.FOLD_AFTER_SECONDS


__all__ = ["TxRecord"]  # defined with the table of transactions; its home for callers


class _Snapshot:
    """The current snapshot: its log entry and its memory-mapped doc cache."""

    __slots__ = ("entry", "docs")

    def __init__(self, entry: tlog.CompactEntry, docs: cache.DocsFile) -> None:
        self.entry = entry
        self.docs = docs


def _default_clock() -> datetime:
    return datetime.now(UTC)


class StoreState:
    """An open store directory and what its log says (see the module).

    Its attributes are shared by the reads and the writes of one
    :class:`~ctxnb.store.objectstore.ObjectStore`; every use holds :attr:`mu`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = Path(path)
        self.dir = str(self.path)
        self.clock = clock or _default_clock
        self.marker_version = tlog.FORMAT_VERSION
        self.mu = threading.RLock()
        self.closed = False
        self.log_path = os.path.join(self.dir, TXLOG)
        self.seen_size = -1
        self.seen_ino = -1
        self.snap: _Snapshot | None = None
        self.log_fd: int | None = None
        self._rotated_from: tuple[int, int] | None = None
        self._reset_log_state()
        self.writer_fd: int | None = None
        self._open(create)

    def _reset_log_state(self) -> None:
        """Forget what the log said: it is read again from its first byte."""
        self.log_offset = 0  # end of the last complete line we applied
        self.log_lines = 0
        self.gen = 0  # rotations the log went through (its base line says)
        self.archive: str | None = None  # the base line's archive of transactions
        self.base: tlog.BaseEntry | None = None  # the log's base line, when rotated
        self.txs = TxTable()
        self.segments: dict[int, tlog.TxEntry] = {}  # live segments: tx > snapshot upto
        # Live folds (newer than the snapshot) by file, the last tx they or the snapshot
        # cover, and the inline transactions after it (not in any Parquet file yet).
        self.folds: dict[str, tlog.FoldEntry] = {}
        self.folded_upto = 0
        self.unfolded: list[int] = []
        if self.snap is not None:
            self.snap.docs.close()
            self.snap = None
        # Versions newer than the snapshot: id -> [(tx_id, row, type)], oldest first; the
        # version is row ``row`` of ``self.pending[tx_id]``.
        self.overlay: dict[str, list[tuple[int, int, str]]] = {}
        self.pending: dict[int, _PendingSegment] = {}
        self._json_cache: OrderedDict[int, list[bytes]] = OrderedDict()
        self._json_bytes = 0
        if self.log_fd is not None:
            os.close(self.log_fd)  # it may be the log a rotation replaced
            self.log_fd = None

    def _open(self, create: bool) -> None:
        marker = os.path.join(self.dir, MARKER)
        # One stat, not isdir() then exists(): another process may create the directory
        # between two checks, and this one must then open it, not call it a file.
        try:
            is_dir: bool | None = stat.S_ISDIR(os.stat(self.dir).st_mode)
        except FileNotFoundError:
            is_dir = None
        except NotADirectoryError:
            blocker = next(
                (str(a) for a in reversed(Path(self.dir).parents) if a.exists() and not a.is_dir()),
                os.path.dirname(self.dir),
            )
            raise StoreError(
                f"cannot open the store at {self.dir}: {blocker} is a file, not a directory; "
                "move or delete that file, or pass another store path"
            ) from None
        if is_dir is False:
            raise StoreError(f"{self.dir} exists and is not a directory; pass a store path")
        if is_dir is None:
            if not create:
                raise StoreError(
                    f"no ctxnb store at {self.dir}; create one with ObjectStore(path) "
                    "(create=True is the default)"
                )
            os.makedirs(self.dir, exist_ok=True)
        listed = [] if os.path.exists(marker) else os.listdir(self.dir)
        # A marker listed now was published by another process since the check.
        if not os.path.exists(marker) and MARKER not in listed:
            entries = [e for e in listed if not e.startswith(tlog.TMP_PREFIX)]
            if entries and not (create and self._being_created(entries)):
                first = os.path.join(self.dir, sorted(entries)[0])
                raise CorruptStoreError(
                    f"{self.dir} is not a ctxnb store: it has files (e.g. {first}) but no "
                    f"{MARKER}; point ObjectStore at an empty or ctxnb-made directory",
                    path=first,
                )
            if not create:
                raise StoreError(f"no ctxnb store at {self.dir} (no {MARKER})")
            self._init_dir(marker)
        self._check_marker(marker)
        for sub in (SEGMENTS, SNAPSHOTS):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        # Read before the log: a commit after this only moves the log further ahead.
        lock_path = os.path.join(self.dir, WRITER_LOCK)
        witnessed = os.path.exists(lock_path)
        committed_end, committed_gen = guard.read_mark(lock_path)
        if not os.path.exists(self.log_path):
            if self._has_data_files() or committed_end:
                raise CorruptStoreError(
                    f"{self.log_path} is missing but the store has committed data; without "
                    "the log no transaction can be trusted. Restore it from a backup",
                    path=self.log_path,
                )
            os.close(os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644))
        self._check_layout()
        files = guard.data_files(self.dir)
        self.refresh(force=True)
        if committed_gen > self.gen:
            raise CorruptStoreError(
                f"{self.log_path} is a log of generation {self.gen}, but transactions were "
                f"committed to generation {committed_gen} (recorded in {WRITER_LOCK}): the "
                "log was replaced by an older copy, and opening it would lose them. Restore "
                "the log from a backup",
                path=self.log_path,
            )
        if committed_gen == self.gen and committed_end > self.log_offset:
            raise CorruptStoreError(
                f"{self.log_path} ends its committed lines at byte {self.log_offset}, but "
                f"transactions were committed up to byte {committed_end} (recorded in "
                f"{WRITER_LOCK}): the log was cut short or replaced, and opening it would "
                "lose them. Restore the log from a backup",
                path=self.log_path,
            )
        self.refuse_files_ahead(files)
        if not witnessed and self.log_offset:
            self._refuse_unwitnessed(files)

    def _refuse_unwitnessed(self, files: list[tuple[str, int, int]]) -> None:
        """Without ``writer.lock``'s mark nothing says whether the log is whole: a
        segment for the transaction after its last one is then either a killed writer's
        (never committed) or the one the log's lost last line named (committed). ctxnb
        cannot tell which, so it refuses rather than let a compaction delete it."""
        named = {os.path.basename(e.file) for e in self.segments.values() if e.file}
        named |= {os.path.basename(f) for f in self.folds}
        for path, tx, slack in files:
            if slack and tx > len(self.txs) and os.path.basename(path) not in named:
                raise CorruptStoreError(
                    f"{path} holds transaction {tx}, which {self.log_path} does not name, "
                    f"and {WRITER_LOCK}, which records where the log's committed lines end, "
                    "is missing or holds no mark of this log: either a writer was killed "
                    "before its log line (the file was never committed) or the log lost its "
                    "last line (the file holds a committed transaction). If the log is a "
                    "restored or edited copy, "
                    "restore the complete log from a backup; if a writer was killed, move "
                    "this file out of the store. Then open the store again",
                    path=path,
                )

    def refuse_files_ahead(self, files: list[tuple[str, int, int]]) -> None:
        ahead = guard.ahead_of_log(files, len(self.txs))
        if ahead is not None:
            raise CorruptStoreError(
                f"{ahead} was written after transaction {len(self.txs)}, the last one "
                f"{self.log_path} holds: the log lost committed lines. Restore the log "
                "from a backup",
                path=self.log_path,
            )

    def _init_dir(self, marker: str) -> None:
        # The marker's bytes first (a .tmp- name nobody reads), so that the moment
        # between the first data folder and the marker, when another process that opens
        # the directory finds it is not a store, stays as short as a rename.
        tmp = self._marker_tmp()
        for sub in (SEGMENTS, SNAPSHOTS):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        os.close(os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644))
        self._publish_marker(tmp, marker)  # last: a directory with a marker is a complete store

    def _being_created(self, entries: list[str]) -> bool:
        """Whether the directory holds only what another process's ``_init_dir`` makes
        before its marker (empty data folders, an empty log): then this process finishes
        the same creation instead of refusing the directory. Both write the same marker.
        """
        if not set(entries) <= {SEGMENTS, SNAPSHOTS, TXLOG}:
            return False
        for sub in (SEGMENTS, SNAPSHOTS):
            folder = os.path.join(self.dir, sub)
            if os.path.exists(folder) and (
                not os.path.isdir(folder)
                or any(not e.startswith(tlog.TMP_PREFIX) for e in os.listdir(folder))
            ):
                return False
        return not os.path.exists(self.log_path) or os.path.getsize(self.log_path) == 0

    def _marker_tmp(self) -> str:
        """The marker of the current format, written and fsynced under a .tmp- name."""
        body = json.dumps({"format": tlog.FORMAT_NAME, "version": tlog.FORMAT_VERSION}) + "\n"
        tmp = os.path.join(self.dir, f"{tlog.TMP_PREFIX}{secrets.token_hex(4)}-{MARKER}")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def _publish_marker(self, tmp: str, marker: str) -> None:
        os.replace(tmp, marker)
        fmt.fsync_dir(self.dir)
        self.marker_version = tlog.FORMAT_VERSION

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
                f"{self.dir} uses store format {version!r}; this ctxnb reads up to "
                f"{tlog.FORMAT_VERSION}. Upgrade ctxnb: pip install -U ctxnb"
            )
        self.marker_version = version

    def upgrade_marker(self) -> None:
        """Mark an older store with the current format before its first inline
        transaction or fold.

        A ctxnb that reads only an older format then asks to be upgraded instead of
        reading the store without its inline transactions. Needs the writer lock.
        """
        marker = os.path.join(self.dir, MARKER)
        self._check_marker(marker)  # another process may have done it already
        if self.marker_version < tlog.FORMAT_VERSION:
            self._publish_marker(self._marker_tmp(), marker)

    def _has_data_files(self) -> bool:
        return any(
            not e.startswith(tlog.TMP_PREFIX)
            for sub in (SEGMENTS, SNAPSHOTS)
            for e in os.listdir(os.path.join(self.dir, sub))
        )

    def _check_layout(self) -> None:
        """Refuse foreign files: they are either damage or someone else's data."""
        foreign: list[str] = []
        for e in os.listdir(self.dir):
            if e not in _KNOWN_TOP and not e.startswith(tlog.TMP_PREFIX):
                foreign.append(os.path.join(self.dir, e))
        for sub, patterns in (
            (SEGMENTS, (tlog.SEG_RE,)),
            (SNAPSHOTS, (tlog.SNAP_RE, tlog.DOCS_RE, tlog.TXS_RE, tlog.ATT_RE)),
        ):
            folder = os.path.join(self.dir, sub)
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

    def refresh(self, *, force: bool = False) -> None:
        """Apply log lines other processes appended since we last looked.

        The fast path is one ``stat``; it is what keeps ``get`` cheap, and a commit's
        read of the log under the writer lock. A log replaced by a compaction's rotation
        (another inode) is read again from its start. ``force``: read the log whatever
        the ``stat`` says.

        Afterwards ``_seen_size`` is the log's size at that look: more than
        ``_log_offset`` when its last line is unfinished (see ``_truncate_torn_tail``).
        """
        try:
            st = os.stat(self.log_path)
        except FileNotFoundError as exc:
            raise CorruptStoreError(
                f"{self.log_path} has disappeared; restore the store directory from a backup",
                path=self.log_path,
            ) from exc
        if not force and st.st_ino == self.seen_ino and st.st_size == self.log_offset:
            # The file we read, ending where the last line we applied ends: nothing was
            # appended and no line is unfinished (lines are only ever appended; a log
            # that is rewritten is a new file, another inode). Reading it from
            # _log_offset, as force does, would find no bytes.
            self.seen_size = st.st_size
            return
        missing: FileNotFoundError | None = None
        for _ in range(_RETRIES):
            with open(self.log_path, "rb") as f:
                fst = os.fstat(f.fileno())
                if self.seen_ino not in (-1, fst.st_ino):
                    self._follow_rotation()
                size = fst.st_size
                if size < self.log_offset:
                    raise CorruptStoreError(
                        f"{self.log_path} shrank below committed data ({size} < "
                        f"{self.log_offset} bytes); restore it from a backup",
                        path=self.log_path,
                    )
                f.seek(self.log_offset)
                data = f.read(size - self.log_offset)
            end = data.rfind(b"\n") + 1
            entries = tlog.parse(
                data[:end],
                log_path=self.log_path,
                first_line=self.log_lines,
                next_tx=len(self.txs) + 1,
            )
            if self._rotated_from is not None:
                self._check_rotation(entries)
            try:
                self.apply(entries, self.log_offset + end, data.count(b"\n", 0, end))
            except FileNotFoundError as exc:
                # A compaction removed a segment between our reading the log and the
                # file; the log now says which snapshot holds it. Read on and retry.
                missing = exc
                continue
            self.seen_size = self.log_offset + (len(data) - end)
            self.seen_ino = fst.st_ino
            return
        path = getattr(missing, "filename", None) or "?"
        raise CorruptStoreError(
            f"{path} is named by the committed log {self.log_path} but is missing; "
            "committed data has been removed by hand. Restore it from a backup",
            path=str(path),
        )

    def _follow_rotation(self) -> None:
        """Another process rotated the log: read the new one from its first byte.

        What this store had seen must still be there afterwards (``_check_rotation``):
        a log swapped for an older copy is refused, not followed.
        """
        self._rotated_from = (self.gen, len(self.txs))
        self.seen_ino = -1
        self._reset_log_state()

    def _check_rotation(self, entries: list[tlog.Entry]) -> None:
        """Refuse a new log (before reading any file it names) unless it is a newer
        generation that holds every transaction this store had seen."""
        assert self._rotated_from is not None
        gen, n = self._rotated_from
        base = entries[0] if entries and isinstance(entries[0], tlog.BaseEntry) else None
        new_gen = base.gen if base is not None else 0
        new_n = (base.upto if base is not None else 0) + sum(
            isinstance(e, tlog.TxEntry) for e in entries
        )
        if new_gen <= gen or new_n < n:
            raise CorruptStoreError(
                f"{self.log_path} was replaced by another file while the store was open "
                f"(generation {new_gen} with {new_n} transactions, after generation {gen} "
                f"with {n}); only a compaction's rotation may replace it, with a newer "
                "generation holding every transaction. Reopen the store",
                path=self.log_path,
            )
        self._rotated_from = None

    def apply(self, entries: list[tlog.Entry], new_offset: int, nlines: int) -> None:
        """Load what the new log entries add, then switch state in one step."""
        if not entries:
            self.log_offset, self.log_lines = new_offset, self.log_lines + nlines
            return
        last_compact = None
        base = None
        for e in entries:
            if isinstance(e, tlog.CompactEntry):
                last_compact = e
            elif isinstance(e, tlog.BaseEntry):
                base, last_compact = e, e.compact
                check_archive(self.abs_path(e.txs), e.txs_size)
                if e.att is not None:
                    check_archive(self.abs_path(e.att), e.att_size, "archive of attachments")
        snap = self.snap
        new_snap: _Snapshot | None = None
        upto = snap.entry.upto if snap else 0
        if last_compact is not None:
            new_snap = _Snapshot(last_compact, self._open_docs(last_compact))
            upto = last_compact.upto
        new_txs = [e for e in entries if isinstance(e, tlog.TxEntry)]
        if base is not None:
            self.gen, self.archive, self.base = base.gen, base.txs, base
            load = archive_loader(self.abs_path(base.txs), base.upto, base.txs_size, base.txs_crc)
            self.txs.set_archive(base.upto, (base.last_us, base.last_count), load)
        loaded: list[tuple[tlog.TxEntry, _PendingSegment]] = []
        try:
            for e in entries:
                # What outside readers (pandas, DuckDB) read as these transactions' rows:
                # checked whole, as cheap as reading a small file once.
                if isinstance(e, tlog.FoldEntry) and e.upto > upto:
                    check_file(self.abs_path(e.file), e.size, e.sha, "fold segment")
            for e in new_txs:
                if e.tx > upto and e.file is not None:
                    loaded.append((e, self._read_segment(e)))
                elif e.tx > upto and e.docs:
                    loaded.append((e, _PendingSegment.inline(e.docs, None, e.tx, e.time_us)))
        except BaseException:
            if new_snap is not None:
                new_snap.docs.close()
            raise
        # Commit the new state; nothing below can fail on I/O.
        for e in new_txs:
            self.txs.append(e.time_us, e.count)
        if new_snap is not None:
            old, self.snap = self.snap, new_snap
            if old is not None:
                old.docs.close()
            self.segments = {tx: s for tx, s in self.segments.items() if tx > upto}
            self.pending = {tx: p for tx, p in self.pending.items() if tx > upto}
            self.forget_json()
            for key in list(self.overlay):
                kept = [v for v in self.overlay[key] if v[0] > upto]
                if kept:
                    self.overlay[key] = kept
                else:
                    del self.overlay[key]
        for e, docs in loaded:
            self.segments[e.tx] = e
            self.add_overlay(e.tx, docs)
            if e.file is None:
                self.unfolded.append(e.tx)
        for e in entries:
            if isinstance(e, tlog.FoldEntry) and e.upto > upto:
                self.folds[e.file] = e
        if new_snap is not None:
            self.folds = {f: e for f, e in self.folds.items() if e.upto > upto}
        self.folded_upto = max([upto, *(e.upto for e in self.folds.values())])
        self.unfolded = [tx for tx in self.unfolded if tx > self.folded_upto]
        if len(loaded) > 1:
            # Decoding many segments leaves freed buffers in Arrow's allocator; give them
            # back, so that a store opened once does not keep its peak.
            pa.default_memory_pool().release_unused()
        self.log_offset, self.log_lines = new_offset, self.log_lines + nlines

    def add_overlay(self, tx: int, pending: _PendingSegment) -> None:
        self.pending[tx] = pending
        overlay = self.overlay
        ids, types = pending.ids_and_types()
        for row, (key, typ) in enumerate(zip(ids, types, strict=True)):
            versions = overlay.get(key)
            if versions is None:
                overlay[key] = [(tx, row, typ)]
            else:
                versions.append((tx, row, typ))

    def abs_path(self, rel: str) -> str:
        return os.path.join(self.dir, rel)

    def _read_segment(self, e: tlog.TxEntry) -> _PendingSegment:
        """A live segment, checked whole (size, SHA-256, rows); held in memory only
        when small (see :data:`ctxnb.store._pending.RESIDENT_BYTES`)."""
        assert e.file is not None
        path = self.abs_path(e.file)
        size = os.path.getsize(path)  # FileNotFoundError: handled by _refresh
        if size != e.size:
            raise CorruptStoreError(
                f"{path} is {size} bytes but was committed with {e.size}; the file is "
                "damaged. Restore it from a backup",
                path=path,
            )
        file = SegmentFile(path, e.size, e.sha, e.tx, e.count, 0)
        return _PendingSegment.segment(file.read(), file)

    def version_json(self, tx: int, row: int) -> bytes:
        """The JSON bytes of a version newer than the snapshot.

        A segment whose rows are not held is read from its file; the JSON of the last
        few read stays for the next reads (a ``get_many`` asks segment by segment).

        Raises:
            FileNotFoundError: a compaction in another process removed the segment
                (the reader refreshes from the log and asks again).
        """
        pending = self.pending[tx]
        if pending.file is None:
            return pending.json(row)
        rows = self._json_cache.get(tx)
        if rows is None:
            rows = pending.all_json()
            self._json_cache[tx] = rows
            self._json_bytes += sum(map(len, rows))
            while self._json_bytes > _JSON_CACHE_BYTES and len(self._json_cache) > 1:
                _, dropped = self._json_cache.popitem(last=False)
                self._json_bytes -= sum(map(len, dropped))
        else:
            self._json_cache.move_to_end(tx)
        return rows[row]

    def forget_json(self) -> None:
        """Drop the JSON kept of segments read from their files."""
        self._json_cache.clear()
        self._json_bytes = 0

    def _open_docs(self, e: tlog.CompactEntry) -> cache.DocsFile:
        parquet = self.abs_path(e.file)
        size = os.path.getsize(parquet)
        if size != e.size:
            raise CorruptStoreError(
                f"{parquet} is {size} bytes but was committed with {e.size}; the snapshot "
                "is damaged. Restore it from a backup",
                path=parquet,
            )
        if e.foot is not None and fmt.footer_sha256(parquet) != e.foot:
            raise CorruptStoreError(
                f"{parquet} is not the snapshot its log line names: its footer's SHA-256 "
                "differs (the file was rewritten, swapped or damaged). Restore it from a "
                "backup; `ctxnb store verify` checks every file of the store",
                path=parquet,
            )
        docs_path = self.abs_path(e.docs)
        try:
            if os.path.getsize(docs_path) != e.docs_size:
                raise CorruptStoreError(f"{docs_path} has the wrong size", path=docs_path)
            return cache.DocsFile(docs_path, e.rows, e.upto)
        except (CorruptStoreError, FileNotFoundError) as exc:
            if not os.path.exists(parquet):
                raise
            # The doc cache is derived from the snapshot Parquet: rebuild it.
            log.warning("rebuilding the doc cache %s from %s (%s)", docs_path, parquet, exc)
            tmp = self.tmp_name(SNAPSHOTS, os.path.basename(docs_path))
            rebuild_docs(parquet, docs_path, tmp)
            return cache.DocsFile(docs_path, e.rows, e.upto)

    def tmp_name(self, sub: str, name: str) -> str:
        return os.path.join(self.dir, sub, f"{tlog.TMP_PREFIX}{secrets.token_hex(4)}-{name}")

    # --- for the writes -------------------------------------------------------------

    def lock(self, name: str, fd: int | None) -> int:
        fd = guard.lock_file(os.path.join(self.dir, name), fd)
        if name == WRITER_LOCK:
            try:
                self._check_witness(fd)
            except BaseException:
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise
        return fd

    def _check_witness(self, fd: int) -> None:
        """A writer lock without a mark of the log's generation (recreated after it was
        removed, or damaged) is no evidence that the log is whole: until a commit marks
        it again, every commit first refuses a segment the log may have lost (see
        :meth:`_refuse_unwitnessed`). Costs one ``pread`` when the mark is there."""
        end, gen = guard.read_mark_fd(fd)
        if end > 0 and gen == self.gen:
            return
        files = guard.data_files(self.dir)
        self.refresh(force=True)
        if self.log_offset and not (end > 0 and gen == self.gen):
            self._refuse_unwitnessed(files)

    def now(self) -> datetime:
        now = self.clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise StoreError(
                f"the store's clock returned {now!r}; it must return an aware datetime, "
                "e.g. datetime.now(timezone.utc)"
            )
        now = now.astimezone(UTC)
        # Tx times never go backwards, so as_of(time) has one answer even if the
        # wall clock steps back.
        last = self.txs.last_us()
        if last is not None and tlog.to_us(now) < last:
            now = tlog.from_us(last)
        return now

    def check_open(self) -> None:
        if self.closed:
            raise StoreError(f"the store at {self.dir} is closed; open it again")

    def close(self) -> None:
        """Release the descriptors and the snapshot's memory map; reads then refuse."""
        self.closed = True
        for fd in (self.log_fd, self.writer_fd):
            if fd is not None:
                os.close(fd)
        self.log_fd = self.writer_fd = None
        if self.snap is not None:
            self.snap.docs.close()
            self.snap = None
        self.overlay = {}
        self.pending = {}
        self.forget_json()

    def __del__(self) -> None:
        # A store dropped without close(): its descriptors go with it, as a file
        # object's do (what waits to be folded stays in the log; the next open reads it).
        for name in ("log_fd", "writer_fd"):
            fd = getattr(self, name, None)
            if fd is not None:
                setattr(self, name, None)
                with contextlib.suppress(OSError):
                    os.close(fd)


def check_file(path: str, size: int, sha: str | None, what: str) -> None:
    """Refuse ``path`` unless it has the size and SHA-256 its log line recorded.

    Raises:
        FileNotFoundError: the file is gone (a compaction may just have replaced it).
        CorruptStoreError: it is another size or its bytes changed, naming it.
    """
    actual = os.path.getsize(path)
    if actual != size:
        raise CorruptStoreError(
            f"{path} is {actual} bytes but the {what} was committed with {size}; the file "
            "is damaged. Restore it from a backup; `ctxnb store verify` checks every file",
            path=path,
        )
    check_digest(path, sha, what)


def check_digest(path: str, sha: str | None, what: str) -> None:
    """Refuse ``path`` unless its SHA-256 is ``sha`` (None: a line older than digests)."""
    if sha is not None and fmt.file_sha256(path) != sha:
        raise CorruptStoreError(
            f"{path} does not hold the bytes its {what} was committed with (its SHA-256 "
            "differs from the log's): the file is damaged, and readers of it would get "
            "wrong rows. Restore it from a backup; `ctxnb store verify` checks every file",
            path=path,
        )


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
