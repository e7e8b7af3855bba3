"""The versioned object store: every version of every object, in plain Parquet.

``ObjectStore`` mirrors XTDB's document API (DESIGN §4): ``put`` is one atomic
transaction, ``get`` reads the latest version, ``history`` and ``as_of`` read the past,
and ``scan`` returns typed columns as a pandas DataFrame or an Arrow table.

On disk (see ``docs/store-format.md``) a store is a directory of append-only Parquet
segments, one per transaction, compacted now and then into a snapshot, plus a small
transaction log whose fsynced line is the commit point. Writers in several processes
take turns under a file lock; readers never lock and notice other processes' commits
by a ``stat`` of the log.

An ``ObjectStore`` is three parts, one concern each: a
:class:`~ctxnb.store._open.StoreState` (``_open.py``: the directory opened and checked, the
log followed, the snapshot, segments and inline transactions it names), a
:class:`~ctxnb.store._read.StoreReader` over that state (``_read.py``: ``get``, ``history``,
``as_of``, ``scan`` …, which the store passes its reads to), and the writes, folds and
compactions here, which append to the log and apply what they appended to the state.
Those three stay in one module because they share one commit protocol: the writer lock,
the log line as the commit point, the guard mark, and the state updated after it.

Example:
    >>> import tempfile
    >>> with ObjectStore(tempfile.mkdtemp()) as store:
    ...     tx = store.put([{"xt/id": "a", "type": "note", "text": "hello"}])
    ...     _ = store.put([{"xt/id": "a", "type": "note", "text": "hello again"}])
    ...     store.get("a")["text"], store.as_of("a", tx)["text"], len(store.history("a"))
    ('hello again', 'hello', 2)
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import pyarrow as pa

from .._util.fsync import fsync_close_later, once
from ..errors import StoreError
from . import _compact as compaction
from . import _fmt as fmt
from . import _guard as guard
from . import _log as tlog

# The layout and limits stay importable from here (ctxnb.store.objectstore.INLINE_MAX_BYTES).
from ._open import (
    _INLINE_MAX_DOCS,
    COMPACT_LOCK,
    SEGMENTS,
    SNAPSHOTS,
    WRITER_LOCK,
    StoreState,
    TxRecord,
    _unlink,
)
from ._open import (
    FOLD_AFTER_SECONDS as FOLD_AFTER_SECONDS,
)
from ._open import (
    FOLD_EVERY_TX as FOLD_EVERY_TX,
)
from ._open import (
    INLINE_MAX_BYTES as INLINE_MAX_BYTES,
)
from ._open import (
    MARKER as MARKER,
)
from ._open import (
    TXLOG as TXLOG,
)
from ._pending import SegmentFile, _PendingSegment, fold_table
from ._read import StoreReader, Version
from ._rotate import remove_old_snapshots, remove_unlogged_segments, rotate
from ._verify import VerifyReport, verify_state

__all__ = ["CompactReport", "ObjectStore", "TxRecord", "Version", "VerifyReport"]


log = logging.getLogger("ctxnb.store.objectstore")


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
            :meth:`close`). By default ``CTXNB_FOLD_AFTER``, else 30. Opening a store
            folds the inline transactions another process left that are older than
            this (a short-lived writer's, which no timer of its own outlived), and
            starts the timer for younger ones.

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

    @classmethod
    def for_workspace(cls, workspace_root: str | os.PathLike[str], **kwargs: Any) -> ObjectStore:
        """The store of a workspace, at ``<root>/.ctxnb/store`` (created if missing).

        Example:
            >>> import tempfile
            >>> ObjectStore.for_workspace(tempfile.mkdtemp()).path.parts[-2:]
            ('.ctxnb', 'store')
        """
        return cls(Path(workspace_root) / ".ctxnb" / "store", **kwargs)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        clock: Callable[[], datetime] | None = None,
        inline_max_bytes: int = INLINE_MAX_BYTES,
        fold_every: int = FOLD_EVERY_TX,
        fold_after: float | None | tlog.Inherit = tlog.INHERIT,
    ) -> None:
        self._inline_max = inline_max_bytes
        self._fold_every = max(1, fold_every)
        self._fold_after = tlog.fold_after_seconds(fold_after)
        self._fold_timer: threading.Timer | None = None
        self._cleaned = False  # unlogged segments removed (at the first commit)
        self._state = StoreState(path, create=create, clock=clock)
        self._reader = StoreReader(self._state)
        self.path = self._state.path
        if self._state.unfolded and self._fold_after is not None:
            self._fold_overdue()

    def _fold_overdue(self) -> None:
        """Fold what other processes left inline past the fold interval (or start the
        timer for it): a process that commits and exits (the Claude Code hook) has no
        timer that outlives it, so the next one to open the store keeps the promise."""
        st = self._state
        assert self._fold_after is not None
        age = (st.now() - st.txs.time(st.unfolded[0])).total_seconds()
        if age < self._fold_after:
            self._start_timer(self._fold_after - age)
            return
        try:
            self._fold(wait=False)
        except (StoreError, OSError) as exc:
            # Nothing is lost (the log holds the documents); the next fold retries.
            log.warning("could not fold inline transactions of %s: %s", st.dir, exc)

    # --- writes -----------------------------------------------------------------------
    def put(
        self,
        docs: Iterable[Mapping[str, Any]],
        *,
        attached: Sequence[bytes] | None = None,
        durable_waits: list[Callable[[], None]] | None = None,
    ) -> TxRecord:
        """Write documents as one atomic transaction.

        Every document needs a string ``"xt/id"`` and a string ``"type"``; values must
        be JSON-shaped. If an id appears more than once, the last document wins. An
        empty ``docs`` commits an empty transaction (count 0).

        ``attached``: JSON objects (bytes) committed in the transaction's log line for
        another log, the Agent Trace ledger (see :mod:`ctxnb.store._attach`): durable
        with the transaction, in one fsync, and never read back as documents.

        ``durable_waits``: when given, an inline transaction's log line is fsynced in
        the background and a function that waits for it is appended here: the caller
        does its next work meanwhile and calls it before it reports the transaction as
        durable (it may be called again: it raises the same error, ``StoreError`` if
        the fsync failed, and the transaction's durability is then unknown). Its mark
        in ``writer.lock`` is left to the next commit, so that the mark is never ahead
        of a durable log.

        Returns:
            The committed transaction. Once ``put`` returns (and, with
            ``durable_waits``, its wait), the transaction survives a crash of this
            process or of the machine.

        Raises:
            StoreError: a document is not storable (the message names it and the key).

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> tx = store.put([{"xt/id": "a", "type": "note"}, {"xt/id": "b", "type": "note"}])
            >>> tx.tx_id, tx.count
            (1, 2)
        """
        st = self._state
        st.check_open()
        batch: dict[str, Mapping[str, Any]] = {}
        for i, doc in enumerate(docs):
            batch[fmt.validate(doc, i)] = doc
        data: pa.Table | None = None
        blobs = self._inline_blobs(batch)
        if batch and blobs is None:
            data = fmt.to_table(fmt.encode(list(batch.values())))
        with st.mu:
            st.check_open()
            written: str | None = None  # a segment renamed into place, not yet logged
            later: list[Callable[[], None]] | None = None  # the log's fsync, in the background
            st.writer_fd = st.lock(WRITER_LOCK, st.writer_fd)
            try:
                st.refresh()  # one stat when no other process committed since
                self._truncate_torn_tail()
                if not self._cleaned:
                    remove_unlogged_segments(st)
                    self._cleaned = True
                tx_id = len(st.txs) + 1
                now = st.now()
                entry = tlog.TxEntry(tx_id, tlog.to_us(now), len(batch), None, 0)
                extra = list(attached) if attached else None
                if blobs is None and data is None:  # an empty transaction
                    line = tlog.tx_line(entry, extra, [])
                if blobs is not None:
                    if st.marker_version < tlog.INLINE_FORMAT_VERSION:
                        st.upgrade_marker()
                    line = tlog.txdocs_line(tx_id, entry.time_us, blobs, extra)
                    later = durable_waits
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
                    final = os.path.join(st.dir, SEGMENTS, name)
                    table = fmt.with_tx(data, tx_id, now)
                    size = fmt.write_segment(table, st.tmp_name(SEGMENTS, name), final)
                    written = final
                    entry = tlog.TxEntry(
                        tx_id,
                        entry.time_us,
                        len(batch),
                        f"{SEGMENTS}/{name}",
                        size,
                        sha=fmt.file_sha256(final),
                    )
                    line = tlog.tx_line(entry, extra, list(batch))
                    # A large segment (an index's batch) is read back from its file when
                    # needed, so that an index holds one batch's text at a time.
                    pending = _PendingSegment.segment(
                        table, SegmentFile(final, size, entry.sha, tx_id, len(batch), 0)
                    )
                self._append_log(line, later)
            except OSError as exc:
                if written is not None:
                    # Not committed: outside readers of the Parquet files must not see it.
                    _unlink(written)
                raise StoreError(f"cannot commit to {st.dir}: {exc}") from exc
            finally:
                fcntl.flock(st.writer_fd, fcntl.LOCK_UN)
            if batch:
                st.segments[tx_id] = entry
                st.add_overlay(tx_id, pending)
                if blobs is not None:
                    st.unfolded.append(tx_id)
            record = TxRecord(tx_id, tlog.from_us(entry.time_us), len(batch))
            st.txs.append(entry.time_us, len(batch))
            self._after_commit()
            return record

    def _after_commit(self) -> None:
        """Keep outside readers' lag bounded, without folding on every write."""
        st = self._state
        if len(st.unfolded) >= self._fold_every:
            self._fold(wait=False)
        elif st.unfolded and self._fold_after is not None:
            self._start_timer(self._fold_after)

    def _start_timer(self, seconds: float) -> None:
        if self._fold_timer is not None:
            return
        # The timer holds the store weakly: a store dropped without close() is
        # collected (its descriptors closed) instead of living on for the timer.
        timer = threading.Timer(seconds, _fold_later, (weakref.ref(self),))
        timer.daemon = True
        self._fold_timer = timer
        timer.start()

    def _fold_on_timer(self) -> None:
        st = self._state
        with st.mu:
            self._fold_timer = None
            if st.closed:
                return
            try:
                self.fold()
            except (StoreError, OSError) as exc:
                # Nothing is lost (the log holds the documents); the next fold retries.
                log.warning("could not fold inline transactions of %s: %s", st.dir, exc)

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
        st = self._state
        with st.mu:
            st.check_open()
            fd = os.open(os.path.join(st.dir, COMPACT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
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
                st.writer_fd = st.lock(WRITER_LOCK, st.writer_fd)
                try:
                    st.refresh(force=True)
                    todo = list(st.unfolded)
                    if not todo:
                        return 0
                    self._truncate_torn_tail()
                    table = fold_table([st.pending[tx] for tx in todo])
                    name = f"seg-{todo[-1]:012d}-{secrets.token_hex(4)}.parquet"
                    final = os.path.join(st.dir, SEGMENTS, name)
                    size = fmt.write_segment(table, st.tmp_name(SEGMENTS, name), final)
                    entry = tlog.FoldEntry(
                        todo[0],
                        todo[-1],
                        f"{SEGMENTS}/{name}",
                        size,
                        table.num_rows,
                        sha=fmt.file_sha256(final),
                    )
                    try:
                        if st.marker_version < tlog.FOLD_FORMAT_VERSION:
                            st.upgrade_marker()
                        self._append_log(tlog.fold_line(entry))
                    except BaseException:
                        _unlink(final)  # not committed: no outside reader may count it
                        raise
                    st.apply([entry], st.log_offset, 0)
                    return len(todo)
                except OSError as exc:
                    raise StoreError(f"cannot fold inline transactions in {st.dir}: {exc}") from exc
                finally:
                    fcntl.flock(st.writer_fd, fcntl.LOCK_UN)
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

    def _append_log(self, line: bytes, later: list[Callable[[], None]] | None = None) -> None:
        """Append one line as the commit point; on failure leave the log as it was.

        ``later``: fsync it in the background and append the wait there (see ``put``).
        """
        st = self._state
        if st.log_fd is None:
            st.log_fd = os.open(st.log_path, os.O_WRONLY | os.O_APPEND)
        try:
            tlog.append(st.log_fd, line, sync=later is None)
        except BaseException:
            os.truncate(st.log_path, st.log_offset)
            raise
        st.log_offset += len(line)
        st.log_lines += 1
        st.seen_size = st.log_offset
        if later is not None:
            # A descriptor of its own: a rotation may close the store's before the wait.
            synced = fsync_close_later(os.dup(st.log_fd))

            def durable() -> None:
                try:
                    synced()
                except OSError as exc:
                    raise StoreError(
                        f"cannot make a transaction durable in {st.dir}: {exc}"
                    ) from exc

            later.append(once(durable))
        elif st.writer_fd is not None:
            # After the log's fsync, so never ahead of a durable log (see _storeguard).
            os.pwrite(st.writer_fd, guard.mark(st.log_offset, st.gen), 0)

    def _truncate_torn_tail(self) -> None:
        # Bytes after the last newline: a line a crashed writer never finished (never
        # acknowledged), dropped before ours. _refresh just saw the size, under the lock.
        st = self._state
        if st.seen_size > st.log_offset:
            log.info("dropping an unfinished last line from %s", st.log_path)
            os.truncate(st.log_path, st.log_offset)
            st.seen_size = st.log_offset

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
        st = self._state
        with st.mu:
            st.check_open()
            fd = st.lock(COMPACT_LOCK, None)
            try:
                return self._compact_locked()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _compact_locked(self) -> CompactReport:
        st = self._state
        st.refresh()
        snap = st.snap
        segs = [st.segments[tx] for tx in sorted(st.segments)]
        if not segs:
            remove_old_snapshots(st)
            return CompactReport(
                snap.entry.upto if snap else (len(st.txs) or None),
                0,
                snap.entry.rows if snap else 0,
                st.abs_path(snap.entry.file) if snap else None,
                0,
                0,
            )
        upto = len(st.txs)
        carry_from = st.log_offset  # later lines: transactions after upto
        replaced = [s.file for s in segs if s.file] + sorted(st.folds)
        if snap is not None:
            replaced += [snap.entry.file, snap.entry.docs]
        bytes_before = sum(
            os.path.getsize(st.abs_path(f)) for f in replaced if os.path.exists(st.abs_path(f))
        )
        name = f"snap-{upto:012d}-{secrets.token_hex(4)}"
        folder = os.path.join(st.dir, SNAPSHOTS)
        # The rows of large segments are read from their files, one at a time; what the
        # writes before left in Arrow's allocator goes back to the system first.
        pa.default_memory_pool().release_unused()
        new = compaction.NewVersions(
            [(s.tx, st.pending[s.tx]) for s in segs if s.tx in st.pending], folder
        )
        if new.num_rows != sum(s.count for s in segs):
            raise StoreError(
                f"compaction of {st.dir} stopped: the versions in memory do not match the "
                "log. Nothing was changed; reopen the store and retry"
            )
        final = os.path.join(folder, name + ".parquet")
        docs_final = os.path.join(folder, name + ".docs.arrow")
        tmp, docs_tmp = st.tmp_name(SNAPSHOTS, name), st.tmp_name(SNAPSHOTS, name + "-docs")
        try:
            with fmt.publishing(tmp, final), fmt.publishing(docs_tmp, docs_final):
                rows = compaction.write_snapshot(
                    old_parquet=st.abs_path(snap.entry.file) if snap else None,
                    old_docs=snap.docs if snap else None,
                    new=new,
                    parquet_tmp=tmp,
                    docs_tmp=docs_tmp,
                )
        finally:
            new.close()
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
            sha=fmt.file_sha256(final),
            foot=fmt.footer_sha256(final),
        )
        st.writer_fd = st.lock(WRITER_LOCK, st.writer_fd)
        try:
            st.refresh(force=True)
            self._truncate_torn_tail()
            compact_at = st.log_offset
            self._append_log(tlog.compact_line(entry))
            st.apply([entry], st.log_offset, 0)
            rotate(st, entry, carry_from, compact_at)
            # Segments of commits that failed or crashed, which outside readers of the
            # Parquet files would count (the writer lock keeps out the one in flight).
            remove_unlogged_segments(st)
        finally:
            fcntl.flock(st.writer_fd, fcntl.LOCK_UN)
        st.seen_size = st.log_offset
        for rel in replaced:
            _unlink(st.abs_path(rel))
        remove_old_snapshots(st)
        fmt.fsync_dir(os.path.join(st.dir, SEGMENTS))
        return CompactReport(
            upto, len(segs), rows, st.abs_path(entry.file), bytes_before, size + docs_size
        )

    # --- reads (answered by the reader) -----------------------------------------------

    def get(self, id: str) -> dict[str, Any] | None:
        """The latest version of a document, or None if the store has never seen ``id``.

        Example:
            >>> import tempfile
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note", "tags": ["x"]}])
            >>> store.get("a"), store.get("nope")
            ({'xt/id': 'a', 'type': 'note', 'tags': ['x']}, None)
        """
        return self._reader.get(id)

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The latest versions of several documents; ids the store lacks are left out.

        Example:
            >>> import tempfile
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note"}])
            >>> list(store.get_many(["a", "b"]))
            ['a']
        """
        return self._reader.get_many(ids)

    def latest_tx_of(self, id: str) -> int | None:
        """The transaction of the latest version of ``id`` (None if unknown), without
        decoding any document.

        Example:
            >>> import tempfile
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note"}])
            >>> _ = store.put([{"xt/id": "b", "type": "note"}])
            >>> store.latest_tx_of("a"), store.latest_tx_of("b"), store.latest_tx_of("c")
            (1, 2, None)
        """
        return self._reader.latest_tx_of(id)

    def history(self, id: str) -> list[Version]:
        """Every version of a document, oldest first (empty if the id is unknown).

        Example:
            >>> import tempfile
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 1}])
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 2}])
            >>> [(v.tx_id, v.doc["v"], v.version_id) for v in store.history("a")]
            [(1, 1, 'a@1'), (2, 2, 'a@2')]
        """
        return self._reader.history(id)

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
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> first = store.put([{"xt/id": "a", "type": "note", "v": 1}])
            >>> _ = store.put([{"xt/id": "a", "type": "note", "v": 2}])
            >>> store.as_of("a", first)["v"], store.as_of("a", first.tx_time)["v"]
            (1, 1)
        """
        return self._reader.as_of(id, tx)

    def ids(self, type: str | None = None) -> list[str]:
        """The ids of all documents (optionally of one type, by latest version), sorted.

        Example:
            >>> import tempfile
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "b", "type": "file"}, {"xt/id": "a", "type": "chat"}])
            >>> store.ids(), store.ids("file")
            (['a', 'b'], ['b'])
        """
        return self._reader.ids(type)

    def latest_tx(self) -> TxRecord | None:
        """The last committed transaction, or None for an empty store."""
        return self._reader.latest_tx()

    def transactions(self) -> list[TxRecord]:
        """Every committed transaction, oldest first."""
        return self._reader.transactions()

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
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> _ = store.put([{"xt/id": "f", "type": "file", "content": "hi", "char_count": 2}])
            >>> store.scan("file")[["xt_id", "content", "char_count"]].to_dict("records")
            [{'xt_id': 'f', 'content': 'hi', 'char_count': 2}]
        """
        return self._reader.scan(
            type, as_of=as_of, all_versions=all_versions, columns=columns, format=format
        )

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Fold what waits (see :meth:`fold`), release files and memory maps.

        Safe to call twice.
        """
        st = self._state
        with st.mu:
            if st.closed:
                return
            if self._fold_timer is not None:
                self._fold_timer.cancel()
                self._fold_timer = None
            if st.unfolded:
                try:
                    self._fold(wait=True)
                except (StoreError, OSError) as exc:
                    # The log still holds every document: nothing is lost, the
                    # Parquet files lag until the next fold.
                    log.warning("could not fold inline transactions of %s: %s", st.dir, exc)
            st.close()

    def __del__(self) -> None:
        # A store dropped without close(): its timer stops, and its state, collected with
        # it, closes its descriptors (what waits to be folded stays in the log).
        timer = getattr(self, "_fold_timer", None)
        if timer is not None:
            timer.cancel()

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def verify(self) -> VerifyReport:
        """Read every file the log names, whole, and check it against what was committed.

        Opening a store checks sizes, the segments' SHA-256 and the snapshot's footer;
        this also hashes the snapshot whole and reads every frame of the doc cache and
        the archive of transactions (see :mod:`ctxnb.store._verify`). ``ctxnb store
        verify`` runs it.

        Raises:
            CorruptStoreError: a file is damaged; ``.path`` names it.

        Example:
            >>> import tempfile
            >>> store = ObjectStore(tempfile.mkdtemp(), inline_max_bytes=0)
            >>> _ = store.put([{"xt/id": "a", "type": "note"}])
            >>> str(store.verify())
            '1 files, ... bytes: every one as committed'
        """
        st = self._state
        with st.mu:
            st.check_open()
            st.refresh()
            return verify_state(st)

    def pending_segments(self) -> int:
        """How many transactions are not compacted into the snapshot yet.

        Scans and opening read every one of them; :meth:`maybe_compact` keeps the
        number bounded.
        """
        st = self._state
        with st.mu:
            st.check_open()
            st.refresh()
            return len(st.segments)

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
        st = self._state
        state = "closed" if st.closed else f"latest_tx={len(st.txs)}"
        return f"ObjectStore({st.dir!r}, {state})"


def _utf8_ok(value: Any) -> bool:
    try:
        tlog.dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
