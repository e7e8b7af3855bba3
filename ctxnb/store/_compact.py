"""Compaction of the object store: the old snapshot and the newer versions, merged into a
new snapshot (Parquet and doc cache) one row group at a time.

Private to :mod:`ctxnb.store.objectstore`. Memory stays at about one row group plus one
piece of the newer versions, whatever the size of either: the old snapshot is read row
group by row group, its doc cache batch by batch with plain reads (no memory map, so its
pages do not pile up in the process), and rows are written in groups of exactly
``BATCH_ROWS`` so that Parquet row group i and doc-cache batch i hold the same rows.

The newer versions (:class:`NewVersions`) are sorted by their keys alone. When their
rows would take more than ``SPILL_BYTES`` in memory (an index of a large tree), each
transaction is read once, its rows cut into ranges of the sorted order and written to a
spill file (Arrow IPC, lz4; an unnamed temporary file in the store's directory, so a
crash leaves nothing behind), and the merge then reads one range at a time.
"""

from __future__ import annotations

import bisect
import os
import random
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStoreError, StoreError
from . import _cache as cache
from . import _fmt as fmt
from . import _log as tlog
from ._pending import _PendingSegment

SORT_KEYS = [("xt_id", "ascending"), ("tx_id", "ascending")]
# A row group (and its doc-cache batch) holds at most BATCH_ROWS rows and about this many
# bytes of Arrow data: the bound on what a compaction holds, whatever the document size.
GROUP_BYTES = 12 << 20
_NEW_PIECE = 8192
# Newer versions whose rows take more than this are merged through a spill file, in
# ranges of about SPILL_RANGE_BYTES (estimated from each transaction's size in memory).
SPILL_BYTES = 64 << 20
SPILL_RANGE_BYTES = 4 << 20
PIECE_BYTES = 2 << 20


def write_snapshot(
    *,
    old_parquet: str | None,
    old_docs: cache.DocsFile | None,
    new: NewVersions,
    parquet_tmp: str,
    docs_tmp: str,
) -> int:
    """Write the merged snapshot to ``parquet_tmp`` and ``docs_tmp``; returns its rows.

    ``new`` holds the versions newer than the old snapshot. The caller publishes (fsyncs
    and renames) both files.
    """
    n_old = old_docs.rows if old_docs is not None else 0
    if old_docs is not None and old_docs.zdict and n_old >= new.num_rows:
        # Most rows are old: keep their dictionary and copy their frames as they are.
        zdict = old_docs.zdict
    else:
        zdict = cache.train_dict(_samples(old_docs, new))
    copy = old_docs is not None and old_docs.zdict == zdict
    with fmt.parquet_writer(parquet_tmp) as pw, cache.writing(docs_tmp, zdict) as dw:
        sink = _Sink(pw, dw)
        olds: Iterator[_Part] = iter(())
        if old_parquet is not None and old_docs is not None:
            olds = _old_parts(old_parquet, old_docs, None if copy else dw)
        _merge(sink, olds, _new_parts(new, dw))
        sink.finish()
    return sink.rows


# Rows, their compressed documents and their ids, sorted by (xt_id, tx_id).
_Part = tuple[pa.Table, pa.Array, list[str]]


def _old_parts(
    parquet: str, docs: cache.DocsFile, recompress: cache.DocsWriter | None
) -> Iterator[_Part]:
    """The old snapshot a row group at a time (its frames compressed again with the new
    dictionary when ``recompress`` is given)."""
    for chunk, frames in _old_chunks(parquet, docs):
        if recompress is not None:
            decompress = docs.decompressor()
            frames = pa.array(
                [recompress.compress(decompress(f)) for f in frames.to_pylist()],
                pa.large_binary(),
            )
        yield chunk, frames, chunk.column("xt_id").to_pylist()


def _new_parts(new: NewVersions, dw: cache.DocsWriter) -> Iterator[_Part]:
    """The newer versions a piece at a time (see :attr:`NewVersions.bounds`)."""
    bounds = new.bounds
    for a, b in zip(bounds, bounds[1:], strict=False):
        rows, frames = _new_rows(new, a, b, dw)
        yield rows, frames, new.ids[a:b]


def _merge(sink: _Sink, olds: Iterator[_Part], news: Iterator[_Part]) -> None:
    """Merge two sorted streams into the sink, holding one part of each at a time.

    Each step hands the sink one whole part of one side and the rows of the other side
    that sort before everything still to come. Old rows are of earlier transactions
    than new rows, so for one id they come first; a new part never splits an id's
    versions, while an old part (a row group) may.
    """
    old, new = next(olds, None), next(news, None)
    while old is not None and new is not None:
        (ot, of, oi), (nt, nf, ni) = old, new
        if oi[-1] <= ni[-1]:
            # The old part ends first; the next old part may hold more of its last id,
            # whose versions come before the new ones: only new ids below it go now.
            k = bisect.bisect_left(ni, oi[-1])
            sink.add(ot, of, (nt.slice(0, k), nf.slice(0, k)))
            old = next(olds, None)
            new = (nt.slice(k), nf.slice(k), ni[k:]) if k < len(ni) else next(news, None)
        else:
            # The new part ends first: the old rows up to its last id go with it.
            k = bisect.bisect_right(oi, ni[-1])
            sink.add(ot.slice(0, k), of.slice(0, k), (nt, nf))
            new = next(news, None)
            old = (ot.slice(k), of.slice(k), oi[k:]) if k < len(oi) else next(olds, None)
    while old is not None:
        sink.add(old[0], old[1], (old[0].slice(0, 0), old[1].slice(0, 0)))
        old = next(olds, None)
    while new is not None:
        sink.add(None, None, (new[0], new[1]))
        new = next(news, None)


def _samples(old_docs: cache.DocsFile | None, new: NewVersions) -> list[bytes]:
    """Documents to train the new snapshot's zstd dictionary on: old and new alike."""
    rng = random.Random(new.num_rows)
    n_old = min(old_docs.rows, 500) if old_docs is not None else 0
    picked = sorted(rng.sample(range(new.num_rows), min(new.num_rows, 1000 - n_old)))
    out = new.sample_json(picked)
    if old_docs is not None:
        out += [old_docs.raw(rng.randrange(old_docs.rows)) for _ in range(n_old)]
    return out


def _json(table: pa.Table) -> list[bytes]:
    return [tlog.dumps(d).encode() for d in fmt.decode(table)]


def _new_rows(
    new: NewVersions, start: int, end: int, dw: cache.DocsWriter
) -> tuple[pa.Table, pa.Array]:
    """Sorted new rows ``start:end`` and their compressed documents."""
    rows = new.rows(start, end)
    # The previous piece's Arrow buffers go back to the system before this one grows.
    pa.default_memory_pool().release_unused()
    frames = pa.array([dw.compress(b) for b in _json(rows)], pa.large_binary())
    return rows, frames


class NewVersions:
    """The versions newer than the snapshot, in ``(xt_id, tx_id)`` order, a piece at a time.

    ``pending`` are the transactions (their ids and their rows as the open store keeps
    them: held, or read from their segment files when asked), oldest first. Only their
    keys are sorted in memory; :meth:`rows` is asked for consecutive ranges of the
    sorted order.
    """

    def __init__(self, pending: Sequence[tuple[int, _PendingSegment]], spill_dir: str) -> None:
        self._pending = [p for _, p in pending]
        self._spill_dir = spill_dir
        ids: list[str] = []
        txs: list[int] = []
        est: list[float] = []
        self._counts: list[int] = []
        for tx, p in pending:
            mine = p.ids_and_types()[0]
            ids += mine
            txs += [tx] * len(mine)
            est += [p.est_bytes / len(mine) if mine else 0.0] * len(mine)
            self._counts.append(len(mine))
        keys = pa.table({"xt_id": pa.array(ids, pa.string()), "tx_id": pa.array(txs, pa.int64())})
        del ids, txs
        self.num_rows = keys.num_rows
        self._order = pc.sort_indices(keys, sort_keys=SORT_KEYS)
        sorted_ids = keys.column("xt_id").take(self._order)
        self.ids: list[str] = sorted_ids.to_pylist()
        self._spilled: pa.ipc.RecordBatchFileReader | None = None
        self._spill_file: pa.NativeFile | None = None
        self._table: pa.Table | None = None
        # Where the sorted rows cross each multiple of a size (their sizes estimated).
        sizes = pa.array(est, pa.float64()).take(self._order) if est else pa.array([], pa.float64())
        cum = pc.cumulative_sum(sizes)

        def cuts(every: float) -> list[int]:
            if len(cum) < 2:
                return []
            step = pc.floor(pc.divide(cum, every)).cast(pa.int64())
            changes = pc.indices_nonzero(pc.not_equal(step.slice(1), step.slice(0, len(step) - 1)))
            return [int(i) + 1 for i in changes.to_pylist()]

        if sum(est) <= SPILL_BYTES:
            self._range_of: pa.Array | None = None  # the range of each sorted row
            self._starts = [0, self.num_rows]
        else:
            # Ranges of the sorted order, each about SPILL_RANGE_BYTES of rows.
            self._starts = [0, *cuts(float(SPILL_RANGE_BYTES)), self.num_rows]
            self._range_of = pc.floor(pc.divide(cum, float(SPILL_RANGE_BYTES))).cast(pa.int64())
        self._sorted_ids = sorted_ids
        # Pieces the merge asks for: at most _NEW_PIECE rows and about PIECE_BYTES (each
        # piece's documents are decoded to Python and JSON at once), within one range,
        # and never splitting an id's versions (see _merge).
        ids_ = self.ids
        every = set(range(0, self.num_rows, _NEW_PIECE))
        every |= set(self._starts[:-1]) | set(cuts(float(PIECE_BYTES)))
        self.bounds = (
            [
                *(b for b in sorted(every) if b == 0 or ids_[b - 1] != ids_[b]),
                self.num_rows,
            ]
            if self.num_rows
            else [0]
        )
        self._loaded = -1
        self._loaded_rows: pa.Table | None = None

    @property
    def spills(self) -> bool:
        """Whether the rows go through a spill file (too large to hold at once)."""
        return self._range_of is not None

    def close(self) -> None:
        if self._spill_file is not None:
            self._spill_file.close()
            self._spill_file = self._spilled = None
        self._table = self._loaded_rows = None

    def sample_json(self, picked: list[int]) -> list[bytes]:
        """The documents at positions ``picked`` (sorted) of the transactions' own order."""
        if not picked:
            return []
        if not self.spills:
            table = self._whole()
            return _json(table.take(pa.array(picked, pa.int64())))
        return self._spill(picked)

    def rows(self, start: int, end: int) -> pa.Table:
        """Rows ``start:end`` of the sorted order."""
        if not self.spills:
            return self._whole().take(self._order.slice(start, end - start))
        if self._spilled is None:
            self._spill([])
        pieces = []
        while start < end:
            r = bisect.bisect_right(self._starts, start) - 1
            table = self._range(r)
            stop = min(end, self._starts[r + 1])
            pieces.append(table.slice(start - self._starts[r], stop - start))
            start = stop
        if not pieces:
            return fmt.SCHEMA.empty_table()
        return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]

    def _whole(self) -> pa.Table:
        if self._table is None:
            tables = [self._checked(i) for i in range(len(self._pending))]
            self._table = pa.concat_tables(tables) if tables else fmt.SCHEMA.empty_table()
        return self._table

    def _checked(self, i: int) -> pa.Table:
        table = self._pending[i].table
        if table.num_rows != self._counts[i]:
            raise StoreError(
                "compaction stopped: the versions of a transaction do not match the log. "
                "Nothing was changed; reopen the store and retry"
            )
        return table

    def _spill(self, picked: list[int]) -> list[bytes]:
        """Read each transaction once and write its rows to the spill file, cut by the
        range of the sorted order they fall in; returns the JSON of ``picked``."""
        assert self._range_of is not None
        ranges = self._range_of.take(pc.sort_indices(self._order))  # each row's range
        # Named only while it is written: once it is open for reading, the name goes, so
        # that nothing is left behind (a crash before then leaves a ``.tmp-`` file, as an
        # unfinished snapshot does).
        fd, path = tempfile.mkstemp(prefix=tlog.TMP_PREFIX, suffix="-spill", dir=self._spill_dir)
        os.close(fd)
        try:
            samples = self._write_spill(path, ranges, picked)
            self._spill_file = pa.OSFile(path)
            self._spilled = pa.ipc.open_file(self._spill_file)
        finally:
            os.unlink(path)
        return samples

    def _write_spill(self, path: str, ranges: pa.Array, picked: list[int]) -> list[bytes]:
        self._where: list[list[int]] = [[] for _ in range(len(self._starts) - 1)]
        options = pa.ipc.IpcWriteOptions(compression="lz4")
        samples: list[bytes] = []
        offset, batch_no, k = 0, 0, 0
        with (
            pa.OSFile(path, "wb") as sink,
            pa.ipc.new_file(sink, fmt.SCHEMA, options=options) as w,
        ):
            for i in range(len(self._pending)):
                n = self._counts[i]
                table = self._checked(i)
                mine = []
                while k < len(picked) and picked[k] < offset + n:
                    mine.append(picked[k] - offset)
                    k += 1
                if mine:
                    samples += _json(table.take(pa.array(mine, pa.int64())))
                mine_ranges = ranges.slice(offset, n)
                by_range = pc.sort_indices(mine_ranges)
                table = table.take(by_range)
                cut = mine_ranges.take(by_range).to_pylist()
                at = 0
                while at < n:
                    r = cut[at]
                    stop = bisect.bisect_right(cut, r, at)
                    for batch in table.slice(at, stop - at).to_batches():
                        w.write_batch(batch)
                        self._where[r].append(batch_no)
                        batch_no += 1
                    at = stop
                del table
                offset += n
                pa.default_memory_pool().release_unused()
        return samples

    def _range(self, r: int) -> pa.Table:
        """Range ``r`` of the sorted order, read back from the spill file and checked."""
        if self._loaded == r and self._loaded_rows is not None:
            return self._loaded_rows
        self._loaded_rows = None
        pa.default_memory_pool().release_unused()
        assert self._spilled is not None
        batches = [self._spilled.get_batch(b) for b in self._where[r]]
        table = pa.Table.from_batches(batches, fmt.SCHEMA)
        table = table.take(pc.sort_indices(table, sort_keys=SORT_KEYS))
        lo, hi = self._starts[r], self._starts[r + 1]
        if not table.column("xt_id").equals(
            pa.chunked_array([self._sorted_ids.slice(lo, hi - lo)])
        ):
            raise StoreError(
                "compaction stopped: its spill file did not give back the rows written to "
                "it. Nothing was changed; retry (check the disk if it happens again)"
            )
        self._loaded, self._loaded_rows = r, table
        return table


def _old_chunks(parquet: str, docs: cache.DocsFile) -> Iterator[tuple[pa.Table, pa.Array]]:
    """The old snapshot's row groups with their stored frames, checked against each other.

    A layout-2 cache is read batch by batch with plain reads (batch i holds row group
    i); a layout-1 cache (one batch) through its memory map.
    """
    source = pa.OSFile(docs.path) if docs.zdict is not None else None
    try:
        batches = pa.ipc.open_file(source) if source is not None else None
        row = 0
        for i, chunk in enumerate(fmt.row_groups(parquet)):
            n = chunk.num_rows
            if batches is not None:
                if i >= batches.num_record_batches:
                    break
                batch = batches.get_batch(i)
                ids, txs, frames = batch.column(0), batch.column(1), batch.column(3)
            else:
                ids, txs = docs.ids().slice(row, n), docs.tx_array().slice(row, n)
                frames = pa.array(
                    [bytes(docs.stored(r)) for r in range(row, row + n)], pa.large_binary()
                )
            if not (
                len(ids) == n
                and chunk.column("xt_id").equals(pa.chunked_array([ids]))
                and chunk.column("tx_id").equals(pa.chunked_array([txs]))
            ):
                raise CorruptStoreError(
                    f"{docs.path} does not match its snapshot at row {row}; delete it and "
                    "reopen the store to rebuild it",
                    path=docs.path,
                )
            if n:
                yield chunk, frames
            row += n
    except (OSError, pa.ArrowException) as exc:
        raise CorruptStoreError(f"{docs.path} cannot be read ({exc})", path=docs.path) from exc
    finally:
        if source is not None:
            source.close()
    if row != docs.rows:
        raise CorruptStoreError(
            f"{parquet} has {row} rows, its doc cache {docs.rows}; the snapshot is damaged. "
            "Restore it from a backup",
            path=parquet,
        )


class _Sink:
    """Collects merged rows and writes them in groups of exactly ``BATCH_ROWS``."""

    def __init__(self, parquet: Any, docs: cache.DocsWriter) -> None:
        self._pq, self._docs = parquet, docs
        self._tables: list[pa.Table] = []
        self._frames: list[pa.Array] = []
        self._n = 0
        self._bytes = 0
        self.rows = 0

    def add(
        self, old: pa.Table | None, old_frames: pa.Array | None, new: tuple[pa.Table, pa.Array]
    ) -> None:
        """Old rows and new rows (each with their frames), in any order between them."""
        new_rows, new_frames = new
        if old is None or old_frames is None:
            self._push(new_rows, new_frames)
        elif not new_rows.num_rows:
            self._push(old, old_frames)
        else:
            merged = pa.concat_tables([old, new_rows])
            order = pc.sort_indices(merged, sort_keys=SORT_KEYS)
            frames = pa.chunked_array([old_frames, new_frames]).take(order)
            self._push(merged.take(order), frames.combine_chunks())

    def _push(self, table: pa.Table, frames: pa.Array) -> None:
        if not table.num_rows:
            return
        self._tables.append(table)
        self._frames.append(frames)
        self._n += table.num_rows
        self._bytes += table.nbytes + frames.nbytes
        # Whole pushes go out together, so that nothing is left holding on to the
        # buffers of a row group already written.
        while self._n >= cache.BATCH_ROWS or self._bytes >= GROUP_BYTES:
            self._flush(min(cache.BATCH_ROWS, self._n))

    def _flush(self, n: int) -> None:
        table = pa.concat_tables(self._tables) if len(self._tables) > 1 else self._tables[0]
        frames = pa.chunked_array(self._frames, pa.large_binary())
        self._pq.write_table(table.slice(0, n), row_group_size=cache.BATCH_ROWS)
        head = table.slice(0, n)
        self._docs.write(
            *(head.column(c).combine_chunks() for c in ("xt_id", "tx_id", "type")),
            frames.slice(0, n).combine_chunks(),
        )
        rest, rest_frames = table.slice(n), frames.slice(n)
        self._tables = [rest] if rest.num_rows else []
        self._frames = [rest_frames.combine_chunks()] if rest.num_rows else []
        self._bytes = sum(t.nbytes for t in self._tables) + sum(f.nbytes for f in self._frames)
        self._n -= n
        self.rows += n
        # Hand freed row-group buffers back to the system, so that memory stays flat
        # instead of growing to the allocator's high-water mark.
        pa.default_memory_pool().release_unused()

    def finish(self) -> None:
        if self._n:
            self._flush(self._n)
