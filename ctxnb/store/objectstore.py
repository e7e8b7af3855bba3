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

import contextlib
import fcntl
import logging
import os
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

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
from ._pending import _PendingSegment, fold_table
from ._read import Version, _StoreReads
from ._rotate import remove_old_snapshots, remove_unlogged_segments, rotate

__all__ = ["CompactReport", "ObjectStore", "TxRecord", "Version"]


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


class ObjectStore(_StoreReads):
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
            later: list[Callable[[], None]] | None = None  # the log's fsync, in the background
            self._writer_fd = self._lock(WRITER_LOCK, self._writer_fd)
            try:
                self._refresh()  # one stat when no other process committed since
                self._truncate_torn_tail()
                if not self._cleaned:
                    remove_unlogged_segments(self)
                    self._cleaned = True
                tx_id = len(self._txs) + 1
                now = self._now()
                entry = tlog.TxEntry(tx_id, tlog.to_us(now), len(batch), None, 0)
                extra = list(attached) if attached else None
                if blobs is None and data is None:  # an empty transaction
                    line = tlog.tx_line(entry, extra, [])
                if blobs is not None:
                    if self._marker_version < tlog.INLINE_FORMAT_VERSION:
                        self._upgrade_marker()
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
                    final = os.path.join(self._dir, SEGMENTS, name)
                    table = fmt.with_tx(data, tx_id, now)
                    size = fmt.write_segment(table, self._tmp_name(SEGMENTS, name), final)
                    written = final
                    entry = tlog.TxEntry(
                        tx_id, entry.time_us, len(batch), f"{SEGMENTS}/{name}", size
                    )
                    line = tlog.tx_line(entry, extra, list(batch))
                    pending = _PendingSegment(table)
                self._append_log(line, later)
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
            self._txs.append(entry.time_us, len(batch))
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
                    table = fold_table([self._pending[tx] for tx in todo])
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

    def _append_log(self, line: bytes, later: list[Callable[[], None]] | None = None) -> None:
        """Append one line as the commit point; on failure leave the log as it was.

        ``later``: fsync it in the background and append the wait there (see ``put``).
        """
        if self._log_fd is None:
            self._log_fd = os.open(self._log_path, os.O_WRONLY | os.O_APPEND)
        try:
            tlog.append(self._log_fd, line, sync=later is None)
        except BaseException:
            os.truncate(self._log_path, self._log_offset)
            raise
        self._log_offset += len(line)
        self._log_lines += 1
        self._seen_size = self._log_offset
        if later is not None:
            # A descriptor of its own: a rotation may close the store's before the wait.
            synced = fsync_close_later(os.dup(self._log_fd))

            def durable() -> None:
                try:
                    synced()
                except OSError as exc:
                    raise StoreError(
                        f"cannot make a transaction durable in {self._dir}: {exc}"
                    ) from exc

            later.append(once(durable))
        elif self._writer_fd is not None:
            # After the log's fsync, so never ahead of a durable log (see _storeguard).
            os.pwrite(self._writer_fd, guard.mark(self._log_offset, self._gen), 0)

    def _truncate_torn_tail(self) -> None:
        # Bytes after the last newline: a line a crashed writer never finished (never
        # acknowledged), dropped before ours. _refresh just saw the size, under the lock.
        if self._seen_size > self._log_offset:
            log.info("dropping an unfinished last line from %s", self._log_path)
            os.truncate(self._log_path, self._log_offset)
            self._seen_size = self._log_offset

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
            remove_old_snapshots(self)
            return CompactReport(
                snap.entry.upto if snap else (len(self._txs) or None),
                0,
                snap.entry.rows if snap else 0,
                self._abs(snap.entry.file) if snap else None,
                0,
                0,
            )
        upto = len(self._txs)
        carry_from = self._log_offset  # later lines: transactions after upto
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
            compact_at = self._log_offset
            self._append_log(tlog.compact_line(entry))
            self._apply([entry], self._log_offset, 0)
            rotate(self, entry, carry_from, compact_at)
            # Segments of commits that failed or crashed, which outside readers of the
            # Parquet files would count (the writer lock keeps out the one in flight).
            remove_unlogged_segments(self)
        finally:
            fcntl.flock(self._writer_fd, fcntl.LOCK_UN)
        self._seen_size = self._log_offset
        for rel in replaced:
            _unlink(self._abs(rel))
        remove_old_snapshots(self)
        fmt.fsync_dir(os.path.join(self._dir, SEGMENTS))
        return CompactReport(
            upto, len(segs), rows, self._abs(entry.file), bytes_before, size + docs_size
        )

    # --- reads ------------------------------------------------------------------------
    # --- lifecycle --------------------------------------------------------------------

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


def _utf8_ok(value: Any) -> bool:
    try:
        tlog.dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
