"""The fold of inline transactions into Parquet, and the log reads of a commit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ctxnb._storefmt as fmt
from ctxnb._storepending import _PendingSegment, fold_table
from ctxnb.store import ObjectStore


class StepClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _docs(i: int) -> list[dict[str, Any]]:
    """Transactions of one or two documents, with typed, extra and null fields."""
    docs: list[dict[str, Any]] = [
        {
            "xt/id": f"a{i % 3}",
            "type": "file",
            "source": {"type": "filesystem", "filesystemId": "fs", "path": f"/w/{i}.py"},
            "content": "x\n" * i,
            "char_count": 2 * i,
            "file_refs": [f"r{i}"] if i % 2 else None,
            "args": {"i": i, "nested": [None, True]},
            "unknown": [i, "é"],
        }
    ]
    if i % 4 == 1:
        docs.append({"xt/id": "b", "type": "note", "source": None, "char_count": "12"})
    return docs


def _fold_segment(store: ObjectStore) -> Path:
    folds = sorted(store._folds)
    assert len(folds) == 1
    return store.path / folds[0]


def test_fold_writes_the_file_that_per_transaction_tables_would(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "s", clock=StepClock(), fold_every=10**6, fold_after=None)
    for i in range(40):
        store.put(_docs(i))
    todo = list(store._unfolded)
    # What the fold wrote before it encoded the transactions together: one table each.
    rebuilt = pa.concat_tables(
        [
            _PendingSegment.inline(
                None, list(store._pending[tx]._json or []), tx, store._pending[tx]._time_us
            ).table
            for tx in todo
        ]
    )
    assert store.fold() == 40
    assert rebuilt.num_rows == 50
    reference = tmp_path / "reference.parquet"
    fmt.write_segment(rebuilt, str(tmp_path / "tmp.parquet"), str(reference))
    written = _fold_segment(store)
    assert written.read_bytes() == reference.read_bytes()
    table = fmt.read_parquet(str(written))  # the store's own check of a segment
    assert table.schema.equals(fmt.SCHEMA)
    assert table.column("tx_id").to_pylist() == [tx for tx in todo for _ in _docs(tx - 1)]
    # Each transaction keeps its rows (a slice of the fold's table) for reads and scans.
    for tx in todo:
        assert store._pending[tx].table.equals(
            rebuilt.filter(pa.compute.equal(rebuilt.column("tx_id"), tx))
        )
    with ObjectStore(store.path) as reader:
        assert reader.get("b") == store.get("b") == _docs(37)[1]
        assert reader.scan(format="arrow").equals(store.scan(format="arrow"))
    store.close()


def test_fold_mixes_transactions_read_back_with_ones_committed_here(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with ObjectStore(path, clock=StepClock(), fold_every=10**6, fold_after=None) as first:
        for i in range(5):
            first.put(_docs(i))
        first._unfolded.clear()  # leave them to the next process (close folds the rest)
    store = ObjectStore(path, clock=StepClock(), fold_every=10**6, fold_after=None)
    assert store._unfolded == [1, 2, 3, 4, 5]  # from the log: documents, no JSON yet
    for i in range(5, 9):
        store.put(_docs(i))
    store.scan()  # some transactions have their table built already
    store.put(_docs(9))
    pending = [store._pending[tx] for tx in store._unfolded]
    expected = pa.concat_tables(
        [
            fmt.with_tx(
                fmt.to_table(fmt.encode(_docs(p._tx - 1))),
                p._tx,
                datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=p._time_us),
            )
            for p in pending
        ]
    )
    assert fold_table(pending).equals(expected, check_metadata=True)
    assert store.fold() == 10
    assert fmt.read_parquet(str(_fold_segment(store))).equals(expected)
    assert [json.loads(p.json(0)) for p in pending] == [_docs(i)[0] for i in range(10)]
    store.close()


def test_fold_table_of_nothing_is_an_empty_store_table() -> None:
    assert fold_table([]).schema.equals(fmt.SCHEMA, check_metadata=True)
    assert fold_table([]).num_rows == 0


@pytest.mark.parametrize("n", [1, 64, 65])
def test_commits_fold_at_fold_every(tmp_path: Path, n: int) -> None:
    with ObjectStore(tmp_path / "s", fold_every=64, fold_after=None) as store:
        for i in range(n):
            store.put([{"xt/id": f"d{i}", "type": "n", "v": i}])
        assert len(store._folds) == (1 if n >= 64 else 0)
        assert len(store._unfolded) == n % 64
        ids = store.scan(columns=["xt_id"], format="arrow").column("xt_id").to_pylist()
        assert sorted(ids) == sorted(f"d{i}" for i in range(n))
