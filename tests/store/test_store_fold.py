"""The fold of inline transactions into Parquet, and the log reads of a commit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ctxnb.store._fmt as fmt
from ctxnb.errors import CorruptStoreError
from ctxnb.store._pending import _PendingSegment, fold_table
from ctxnb.store.objectstore import ObjectStore


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
    folds = sorted(store._state.folds)
    assert len(folds) == 1
    return store.path / folds[0]


def test_fold_writes_the_file_that_per_transaction_tables_would(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "s", clock=StepClock(), fold_every=10**6, fold_after=None)
    for i in range(40):
        store.put(_docs(i))
    todo = list(store._state.unfolded)
    # What the fold wrote before it encoded the transactions together: one table each.
    rebuilt = pa.concat_tables(
        [
            _PendingSegment.inline(
                None,
                list(store._state.pending[tx]._json or []),
                tx,
                store._state.pending[tx]._time_us,
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
        assert store._state.pending[tx].table.equals(
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
        first._state.unfolded.clear()  # leave them to the next process (close folds the rest)
    store = ObjectStore(path, clock=StepClock(), fold_every=10**6, fold_after=None)
    assert store._state.unfolded == [1, 2, 3, 4, 5]  # from the log: documents, no JSON yet
    for i in range(5, 9):
        store.put(_docs(i))
    store.scan()  # some transactions have their table built already
    store.put(_docs(9))
    pending = [store._state.pending[tx] for tx in store._state.unfolded]
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
        assert len(store._state.folds) == (1 if n >= 64 else 0)
        assert len(store._state.unfolded) == n % 64
        ids = store.scan(columns=["xt_id"], format="arrow").column("xt_id").to_pylist()
        assert sorted(ids) == sorted(f"d{i}" for i in range(n))


# --- the log, read under the writer lock ----------------------------------------------


def test_a_commit_reads_what_another_process_appended_since(tmp_path: Path) -> None:
    path = tmp_path / "s"
    a, b = ObjectStore(path), ObjectStore(path)
    a.put([{"xt/id": "x", "type": "n", "v": 1}])
    b.put([{"xt/id": "x", "type": "n", "v": 2}])  # behind a's back: a saw the log end at tx 1
    big = {"xt/id": "y", "type": "n", "text": "z" * 40_000}  # a segment, not inline
    b.put([big])
    assert a.put([{"xt/id": "x", "type": "n", "v": 3}]).tx_id == 4
    for store in (a, b):
        assert [v.doc["v"] for v in store.history("x")] == [1, 2, 3]
        assert store.get("y") == big
    a.close()
    b.close()
    with ObjectStore(path) as reader:
        assert [t.tx_id for t in reader.transactions()] == [1, 2, 3, 4]


@pytest.mark.parametrize("read_first", [False, True])
def test_an_unfinished_line_behind_a_writer_is_dropped_at_its_next_commit(
    tmp_path: Path, read_first: bool
) -> None:
    store = ObjectStore(tmp_path / "s")
    store.put([{"xt/id": "a", "type": "n", "v": 1}])
    log = store.path / "txlog"
    committed = log.read_bytes()
    with log.open("ab") as f:  # another writer killed mid-line, after our commit
        f.write(committed[: len(committed) // 2].replace(b'"tx":1', b'"tx":2'))
    if read_first:
        assert store.get("a") == {"xt/id": "a", "type": "n", "v": 1}  # a read sees it
    assert store.put([{"xt/id": "a", "type": "n", "v": 2}]).tx_id == 2
    lines = log.read_bytes().split(b"\n")
    assert log.read_bytes().startswith(committed) and lines[-1] == b""
    assert [json.loads(line)["tx"] for line in lines[:-1]] == [1, 2]
    store.close()
    with ObjectStore(tmp_path / "s") as reader:
        assert [v.doc["v"] for v in reader.history("a")] == [1, 2]


def test_a_log_shrunk_behind_a_writer_is_refused_at_its_next_commit(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "s")
    store.put([{"xt/id": "a", "type": "n", "v": 1}])
    store.put([{"xt/id": "a", "type": "n", "v": 2}])
    log = store.path / "txlog"
    with log.open("r+b") as f:
        f.truncate(len(log.read_bytes().split(b"\n")[0]) + 1)
    with pytest.raises(CorruptStoreError, match="shrank"):
        store.put([{"xt/id": "a", "type": "n", "v": 3}])
    store.close()


# --- the file document a write stores -------------------------------------------------


@pytest.mark.parametrize("data", [b"x = 1\n", b"\x00\x01binary", "é\n".encode() * 3000, None])
def test_a_file_document_keeps_its_keys_their_order_and_its_content_hash(
    data: bytes | None,
) -> None:
    from ctxnb.access.observe import build_file_doc
    from ctxnb.hashing import content_hash, identity_hash, source_hash

    src = {"type": "filesystem", "filesystemId": "fs", "path": "/w/a.py"}
    doc = build_file_doc(src, data)
    text = data.decode() if data is not None and b"\x00" not in data else None
    payload = {
        "content": text,
        "file_type": "python" if text is not None or data is None else "binary",
        "char_count": len(text) if text is not None else 0,
        "source_hash": source_hash(data) if data is not None else None,
    }
    oid = identity_hash("file", src)
    expected = {"xt/id": oid, "type": "file", "source": src, "identity_hash": oid, **payload}
    expected["content_hash"] = content_hash(payload)  # the definition: without source_hash
    # The stored JSON keeps key order: the log line's bytes depend on it.
    assert list(doc.items()) == list(expected.items())
