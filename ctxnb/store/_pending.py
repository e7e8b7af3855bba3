"""A committed transaction newer than the snapshot, as the store keeps it in memory.

A segment's Parquet rows or an inline transaction's documents, each turned into the
other form only when a read, a scan or a compaction needs it. A large segment (an
index's batch of files) keeps only its ids and types in memory and reads its rows from
its file when asked, checked against the size and SHA-256 its log line recorded: an open
store then holds a constant per version, not every file's text, however many batches
wait for the next compaction.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStoreError
from . import _fmt as fmt
from . import _log as tlog

# A segment whose rows take more than this in memory is read from its file when needed
# instead of being held (a tool's write stays resident: it is small, and read back soon).
RESIDENT_BYTES = 1 << 20


class SegmentFile:
    """Where a segment's rows are, and what its log line says they are.

    ``read`` raises FileNotFoundError when the file is gone (a compaction in another
    process replaced it: the caller refreshes from the log and asks again) and
    CorruptStoreError when its bytes are not the committed ones.
    """

    __slots__ = ("count", "path", "row_bytes", "sha", "size", "tx")

    def __init__(
        self, path: str, size: int, sha: str | None, tx: int, count: int, row_bytes: int
    ) -> None:
        self.path, self.size, self.sha = path, size, sha
        self.tx, self.count = tx, count
        self.row_bytes = row_bytes  # the rows' size in memory, about (Arrow's nbytes)

    def read(self) -> pa.Table:
        with open(self.path, "rb") as f:
            data = f.read(self.size + 1)
        if len(data) != self.size:
            raise CorruptStoreError(
                f"{self.path} is {len(data)} bytes but was committed with {self.size}; the "
                "file is damaged. Restore it from a backup; `ctxnb store verify` checks "
                "every file",
                path=self.path,
            )
        if self.sha is not None and hashlib.sha256(data).hexdigest() != self.sha:
            raise CorruptStoreError(
                f"{self.path} does not hold the bytes its segment was committed with (its "
                "SHA-256 differs from the log's): the file changed after it was committed. "
                "Restore it from a backup; `ctxnb store verify` checks every file",
                path=self.path,
            )
        table = fmt.read_parquet_bytes(data, self.path)
        del data
        check_rows(table, self.path, self.tx, self.count)
        return table.replace_schema_metadata(fmt.SCHEMA.metadata)


def check_rows(table: pa.Table, path: str, tx: int, count: int) -> None:
    """Refuse a segment whose rows are not the transaction its log line names."""
    if table.num_rows != count:
        raise CorruptStoreError(
            f"{path} has {table.num_rows} rows but tx {tx} committed {count}",
            path=path,
        )
    if table.num_rows and not pc.all(pc.equal(table.column("tx_id"), tx)).as_py():
        raise CorruptStoreError(
            f"{path} holds rows of another transaction than tx {tx}, which names it; "
            "restore it from a backup",
            path=path,
        )


class _PendingSegment:
    """A committed transaction newer than the snapshot: its rows and their JSON.

    A segment starts from its Parquet rows, an inline transaction from its documents;
    each builds the other form on first use. Writing and opening stay cheap: a tree
    index that nobody reads back before the next compaction never pays for a JSON
    encoding of every file, and a tool's small write never builds Arrow rows until a
    scan or a compaction needs them.
    """

    __slots__ = ("_table", "_json", "_docs", "_tx", "_time_us", "_ids", "file")

    def __init__(self, table: pa.Table | None) -> None:
        self._table = (
            table.replace_schema_metadata(fmt.SCHEMA.metadata) if table is not None else None
        )
        self._json: list[bytes] | None = None
        self._docs: list[dict[str, Any]] | None = None
        self._tx = 0
        self._time_us = 0
        self._ids: tuple[list[str], list[str]] | None = None
        # Set when the rows are not held: they are read from this file when needed.
        self.file: SegmentFile | None = None

    @classmethod
    def segment(cls, table: pa.Table, file: SegmentFile) -> _PendingSegment:
        """From a segment's rows: held when small, else only its ids and types (the
        rows are read again from ``file`` when a read or a compaction needs them)."""
        if table.nbytes <= RESIDENT_BYTES:
            return cls(table)
        out = cls(None)
        out._ids = (table.column("xt_id").to_pylist(), table.column("type").to_pylist())
        file.row_bytes = table.nbytes
        out.file = file
        return out

    @property
    def est_bytes(self) -> int:
        """About how much memory the rows take once read."""
        if self.file is not None:
            return self.file.row_bytes
        return self.table.nbytes

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
        """The rows, with tx columns, in :data:`ctxnb.store._fmt.SCHEMA` (read from the
        segment's file, and not kept, when the rows are not held)."""
        if self.file is not None:
            return self.file.read()
        if self._table is None:
            data = fmt.to_table(fmt.encode(self._documents()))
            self._table = fmt.with_tx(data, self._tx, tlog.from_us(self._time_us))
            self._docs = None  # the table and the JSON hold everything from now on
        return self._table

    def _documents(self) -> list[dict[str, Any]]:
        """An inline transaction's documents (before its table is built)."""
        if self._docs is not None:
            return self._docs
        assert self._json is not None
        return [json.loads(b) for b in self._json]

    def ids_and_types(self) -> tuple[list[str], list[str]]:
        if self._ids is not None:
            return self._ids
        if self._docs is not None:
            return [d[fmt.ID_KEY] for d in self._docs], [d["type"] for d in self._docs]
        table = self.table
        return table.column("xt_id").to_pylist(), table.column("type").to_pylist()

    def all_json(self) -> list[bytes]:
        """Every row's JSON, read from the file of a segment whose rows are not held."""
        assert self.file is not None, "a held segment answers json(row)"
        return [tlog.dumps(d).encode() for d in fmt.decode(self.file.read())]

    def json(self, row: int) -> bytes:
        if self._json is None:
            docs = self._docs if self._docs is not None else fmt.decode(self.table)
            self._json = [tlog.dumps(d).encode() for d in docs]
        return self._json[row]


def fold_table(pending: list[_PendingSegment]) -> pa.Table:
    """The rows of several transactions, in order, as one table (what a fold writes).

    Equal to ``pa.concat_tables([p.table for p in pending])``, but the inline
    transactions' documents are encoded together: one table for 64 small transactions
    instead of 64 tables of one row, each of which costs about as much as the whole.
    Each transaction then keeps its rows as a slice of that table (no copy), for the
    reads and the compaction that ask for its ``table``.
    """
    parts: list[pa.Table] = []
    docs: list[dict[str, Any]] = []
    runs: list[tuple[_PendingSegment, int]] = []  # transactions in ``docs``, their counts
    txs: list[int] = []
    times: list[int] = []

    def flush() -> None:
        if not runs:
            return
        table = fmt.with_tx_columns(fmt.to_table(fmt.encode(docs)), txs, times)
        start = 0
        for p, count in runs:
            p._table = table.slice(start, count)
            p._docs = None  # as after ``table``: the rows and the JSON hold everything
            start += count
        parts.append(table)
        for done in (docs, runs, txs, times):
            done.clear()

    for p in pending:
        if p._table is not None:
            flush()
            parts.append(p._table)
            continue
        mine = p._documents()
        docs.extend(mine)
        runs.append((p, len(mine)))
        txs.extend([p._tx] * len(mine))
        times.extend([p._time_us] * len(mine))
    flush()
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts) if parts else fmt.SCHEMA.empty_table()
