"""Compaction of the object store: the old snapshot and the newer versions, merged into a
new snapshot (Parquet and doc cache) one row group at a time.

Private to :mod:`ctxnb.store.objectstore`. Memory stays at about one row group plus the newer
versions (which every open store holds anyway): the old snapshot is read row group by
row group, its doc cache batch by batch with plain reads (no memory map, so its pages
do not pile up in the process), and rows are written in groups of exactly
``BATCH_ROWS`` so that Parquet row group i and doc-cache batch i hold the same rows.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStoreError
from . import _cache as cache
from . import _fmt as fmt
from . import _log as tlog

SORT_KEYS = [("xt_id", "ascending"), ("tx_id", "ascending")]
# A row group (and its doc-cache batch) holds at most BATCH_ROWS rows and about this many
# bytes of Arrow data: the bound on what a compaction holds, whatever the document size.
GROUP_BYTES = 12 << 20
_NEW_PIECE = 8192


def write_snapshot(
    *,
    old_parquet: str | None,
    old_docs: cache.DocsFile | None,
    new: pa.Table,
    parquet_tmp: str,
    docs_tmp: str,
) -> int:
    """Write the merged snapshot to ``parquet_tmp`` and ``docs_tmp``; returns its rows.

    ``new`` holds the versions newer than the old snapshot, in any order. The caller
    publishes (fsyncs and renames) both files.
    """
    order = pc.sort_indices(new, sort_keys=SORT_KEYS)
    new_ids = new.column("xt_id").take(order).to_pylist()
    n_old = old_docs.rows if old_docs is not None else 0
    if old_docs is not None and old_docs.zdict and n_old >= new.num_rows:
        # Most rows are old: keep their dictionary and copy their frames as they are.
        zdict = old_docs.zdict
    else:
        zdict = cache.train_dict(_samples(old_docs, new))
    copy = old_docs is not None and old_docs.zdict == zdict
    with fmt.parquet_writer(parquet_tmp) as pw, cache.writing(docs_tmp, zdict) as dw:
        sink = _Sink(pw, dw)
        pos = 0
        if old_parquet is not None and old_docs is not None:
            for chunk, frames in _old_chunks(old_parquet, old_docs):
                last = chunk.column("xt_id")[chunk.num_rows - 1].as_py()
                end = bisect.bisect_left(new_ids, last, pos)
                if not copy:
                    decompress = old_docs.decompressor()
                    frames = pa.array(
                        [dw.compress(decompress(f)) for f in frames.to_pylist()], pa.large_binary()
                    )
                sink.add(chunk, frames, _new_rows(new, order, pos, end, dw))
                pos = end
        for start in range(pos, len(new_ids), _NEW_PIECE):
            end = min(start + _NEW_PIECE, len(new_ids))
            sink.add(None, None, _new_rows(new, order, start, end, dw))
        sink.finish()
    return sink.rows


def _samples(old_docs: cache.DocsFile | None, new: pa.Table) -> list[bytes]:
    """Documents to train the new snapshot's zstd dictionary on: old and new alike."""
    rng = random.Random(new.num_rows)
    n_old = min(old_docs.rows, 500) if old_docs is not None else 0
    picked = sorted(rng.sample(range(new.num_rows), min(new.num_rows, 1000 - n_old)))
    out = _json(new.take(pa.array(picked, pa.int64()))) if picked else []
    if old_docs is not None:
        out += [old_docs.raw(rng.randrange(old_docs.rows)) for _ in range(n_old)]
    return out


def _json(table: pa.Table) -> list[bytes]:
    return [tlog.dumps(d).encode() for d in fmt.decode(table)]


def _new_rows(
    new: pa.Table, order: pa.Array, start: int, end: int, dw: cache.DocsWriter
) -> tuple[pa.Table, pa.Array]:
    """Sorted new rows ``start:end`` and their compressed documents."""
    rows = new.take(order.slice(start, end - start))
    frames = pa.array([dw.compress(b) for b in _json(rows)], pa.large_binary())
    return rows, frames


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
