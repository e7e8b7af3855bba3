"""The store's committed transactions: the recent ones in memory, the older ones in a
Parquet archive read only when asked for.

Private to :mod:`ctxnb.store.objectstore`. When compaction rotates the transaction log, the log's
first line (its *base*) says how many transactions the rotated part held and when the
last of them was committed; their ids, times and counts move to
``snapshots/txs-<upto>-<hex>.arrow``. Opening a store therefore costs the same
after a thousand transactions as after a million: only ``history``, ``transactions``
and ``as_of`` with a time read the archive, once per open store.
"""

from __future__ import annotations

import bisect
import itertools
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStoreError
from . import _log as tlog

_SCHEMA = pa.schema(
    [
        pa.field("tx_id", pa.int64(), nullable=False),
        pa.field("tx_time", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
    ]
)


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


class TxTable:
    """Every committed transaction: ``archived`` ones behind a loader, then a tail.

    Times are kept as µs since the epoch (a datetime is made when one is asked for), so
    that a million transactions are two arrays, not a million objects.
    """

    __slots__ = ("_archived", "_last", "_loader", "_times", "_counts", "_tail_t", "_tail_n")

    def __init__(self) -> None:
        self._archived = 0
        self._last = (0, 0)  # (time_us, count) of the last archived transaction
        self._loader: Callable[[], tuple[list[int], list[int]]] | None = None
        self._times: list[int] | None = []  # archived times (None: not loaded yet)
        self._counts: list[int] | None = []
        # Times (µs) and counts of the transactions after the archive: two lists, so that
        # as_of(time) bisects the times as they are.
        self._tail_t: list[int] = []
        self._tail_n: list[int] = []

    def set_archive(
        self, n: int, last: tuple[int, int], loader: Callable[[], tuple[list[int], list[int]]]
    ) -> None:
        """Start over from an archive of ``n`` transactions, the last of them ``last``
        (its time in µs and count); the tail is emptied."""
        self._archived, self._last, self._loader = n, last, loader
        self._times = self._counts = None if n else []
        self._tail_t, self._tail_n = [], []

    def append(self, time_us: int, count: int) -> None:
        self._tail_t.append(time_us)
        self._tail_n.append(count)

    def __len__(self) -> int:
        return self._archived + len(self._tail_t)

    def last_us(self) -> int | None:
        """The last commit time in µs (None: no transaction yet)."""
        if self._tail_t:
            return self._tail_t[-1]
        return self._last[0] if self._archived else None

    def last(self) -> TxRecord | None:
        n = len(self)
        return self.record(n) if n else None

    def record(self, tx: int) -> TxRecord:
        """Transaction ``tx`` (1-based, at most ``len(self)``)."""
        if tx > self._archived:
            i = tx - self._archived - 1
            return TxRecord(tx, tlog.from_us(self._tail_t[i]), self._tail_n[i])
        if tx == self._archived:
            return TxRecord(tx, tlog.from_us(self._last[0]), self._last[1])
        times, counts = self._load()
        return TxRecord(tx, tlog.from_us(times[tx - 1]), counts[tx - 1])

    def time(self, tx: int) -> datetime:
        return self.record(tx).tx_time

    def records(self) -> list[TxRecord]:
        times, counts = self._load() if self._archived else ([], [])
        pairs = zip(times, counts, strict=True)
        out = [TxRecord(i + 1, tlog.from_us(t), c) for i, (t, c) in enumerate(pairs)]
        base = self._archived
        tail = zip(self._tail_t, self._tail_n, strict=True)
        out += [TxRecord(base + i + 1, tlog.from_us(t), c) for i, (t, c) in enumerate(tail)]
        return out

    def columns(self, n: int) -> tuple[list[int], list[int]]:
        """Times (µs) and counts of transactions ``1..n``."""
        times, counts = self._load() if self._archived else ([], [])
        k = max(0, n - self._archived)
        return (times + self._tail_t[:k])[:n], (counts + self._tail_n[:k])[:n]

    def committed_by(self, when: datetime) -> int:
        """How many transactions were committed at or before ``when`` (aware)."""
        us = tlog.to_us(when.astimezone(UTC))
        tail = self._tail_t
        if tail and us >= tail[0]:
            return self._archived + bisect.bisect_right(tail, us)
        if not self._archived:
            return 0
        times, _ = self._load()
        return bisect.bisect_right(times, us)

    def _load(self) -> tuple[list[int], list[int]]:
        if self._times is None or self._counts is None:
            assert self._loader is not None
            self._times, self._counts = self._loader()
        return self._times, self._counts


def write_archive(path: str, times: list[int], counts: list[int]) -> int:
    """Write transactions ``1..len(times)`` to ``path`` (the caller publishes it).

    An Arrow IPC file, not Parquet: outside readers glob the store's ``*.parquet`` for
    documents, and this is not one. Returns the CRC-32 of its bytes.
    """
    table = pa.table(
        [
            pa.array(range(1, len(times) + 1), pa.int64()),
            pa.array(times, pa.int64()).view(_SCHEMA.field("tx_time").type),
            pa.array(counts, pa.int64()),
        ],
        schema=_SCHEMA,
    )
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, _SCHEMA) as writer:
        writer.write_table(table)
    with open(path, "rb") as f:
        return zlib.crc32(f.read())


def check_archive(path: str, size: int, what: str = "archive of transactions") -> None:
    """One stat of an archive a base line names (it is read only when needed)."""
    actual = os.path.getsize(path)  # FileNotFoundError: the caller names the file
    if actual != size:
        raise CorruptStoreError(
            f"{path} is {actual} bytes but was committed with {size}; the {what} "
            "is damaged. Restore it from a backup",
            path=path,
        )


def archive_loader(
    path: str, n: int, size: int, crc: int
) -> Callable[[], tuple[list[int], list[int]]]:
    """Read and check the archive of ``n`` transactions at ``path`` when called."""

    def load() -> tuple[list[int], list[int]]:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError as exc:
            raise CorruptStoreError(
                f"{path} is named by the committed log but is missing; the times of "
                f"transactions 1..{n} are in it. Restore it from a backup",
                path=path,
            ) from exc
        if len(data) != size or zlib.crc32(data) != crc:
            raise CorruptStoreError(
                f"{path} is not the archive of transactions the log committed (its size "
                "or checksum differs); restore it from a backup",
                path=path,
            )
        try:
            table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
        except (OSError, pa.ArrowException) as exc:
            raise CorruptStoreError(
                f"{path} cannot be read ({exc}); restore it from a backup", path=path
            ) from exc
        ok = (
            table.schema.equals(_SCHEMA)
            and table.num_rows == n
            and pc.all(pc.equal(table.column("tx_id"), pa.array(range(1, n + 1)))).as_py()
            is not False
        )
        times = table.column("tx_time").cast(pa.int64()).to_pylist() if ok else []
        if not ok or any(b < a for a, b in itertools.pairwise(times)):
            raise CorruptStoreError(
                f"{path} does not hold transactions 1..{n} in commit order; restore it "
                "from a backup",
                path=path,
            )
        return times, table.column("count").to_pylist()

    return load
