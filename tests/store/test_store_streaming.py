"""Large segments are not held in memory, and compaction merges them through a spill file.

An index of a large tree commits batches of files whose text would not fit in memory
all at once. These tests check that an open store keeps only the ids of a large
segment and reads its rows back from the file, that a file changed after its commit is
refused there as at open, and that a compaction through the spill file gives exactly
the versions an in-memory one gives, with the old snapshot's row groups and the new
pieces interleaved in every way the merge must handle.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import ctxnb.store._compact as compact_mod
import ctxnb.store._pending as pending_mod
from ctxnb import Workspace
from ctxnb.errors import CorruptStoreError
from ctxnb.indexer import index_tree
from ctxnb.store.objectstore import ObjectStore


class StepClock:
    """A clock that moves one second per call (two stores built alike get equal times)."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _big_docs(tx: int, ids: list[str], size: int = 300_000) -> list[dict[str, Any]]:
    rng = random.Random(tx)
    return [
        {
            "xt/id": i,
            "type": "file",
            "content": f"{i}@{tx} " + "".join(rng.choices("abcdef \n", k=size)),
        }
        for i in ids
    ]


def _held(store: ObjectStore) -> dict[int, Any]:
    return dict(store._state.pending)


def test_a_large_segment_keeps_only_its_ids_and_reads_its_rows_back(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "s", clock=StepClock(), inline_max_bytes=0)
    want: dict[str, list[str]] = {}
    for tx in range(1, 5):
        ids = [f"f{(tx + k) % 6}" for k in range(4)]  # ids repeat across transactions
        for d in _big_docs(tx, ids):
            want.setdefault(d["xt/id"], []).append(d["content"])
        store.put(_big_docs(tx, ids))
    for s in (store, ObjectStore(tmp_path / "s", create=False)):  # committed, and reopened
        for tx, p in _held(s).items():
            assert p._table is None and p.file is not None, tx  # no rows held
        assert {k: [v.doc["content"] for v in s.history(k)] for k in want} == want
        assert {k: d["content"] for k, d in s.get_many(sorted(want)).items()} == {
            k: v[-1] for k, v in want.items()
        }
        assert s.as_of("f1", 1)["content"] == want["f1"][0]
        scanned = s.scan("file", columns=["xt_id", "content"], format="arrow").to_pylist()
        assert {r["xt_id"]: r["content"] for r in scanned} == {k: v[-1] for k, v in want.items()}
    store.compact()
    assert {k: [v.doc["content"] for v in store.history(k)] for k in want} == want


def test_a_small_segment_stays_in_memory(tmp_path: Path) -> None:
    with ObjectStore(tmp_path / "s", inline_max_bytes=0) as store:
        tx = store.put([{"xt/id": "a", "type": "note", "text": "small"}]).tx_id
        p = store._state.pending[tx]
        assert p.file is None and p._table is not None
        assert store.get("a") == {"xt/id": "a", "type": "note", "text": "small"}


def _flip_a_byte(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x01]))


def test_a_segment_changed_after_its_commit_is_refused_by_reads_and_compaction(
    tmp_path: Path,
) -> None:
    store = ObjectStore(tmp_path / "s", clock=StepClock(), inline_max_bytes=0)
    store.put(_big_docs(1, ["a", "b", "c", "d"]))
    tx = store.put(_big_docs(2, ["a", "e", "f", "g"])).tx_id
    seg = store._state.pending[tx].file
    assert seg is not None
    _flip_a_byte(seg.path)  # same size: only the digest can tell
    with pytest.raises(CorruptStoreError, match="SHA-256") as err:
        store.get("e")
    assert err.value.path == seg.path
    with pytest.raises(CorruptStoreError, match="SHA-256"):
        store.get_many(["a", "b"])
    log_before = (tmp_path / "s" / "txlog").read_bytes()
    with pytest.raises(CorruptStoreError, match="SHA-256"):
        store.compact()
    # Nothing was replaced: the log has no compaction and the segments are all there.
    assert (tmp_path / "s" / "txlog").read_bytes() == log_before
    assert len(list((tmp_path / "s" / "segments").iterdir())) == 2
    assert store.get("b")["content"].startswith("b@1 ")  # the other segment still reads
    assert not [e for e in os.listdir(tmp_path / "s" / "snapshots") if e.startswith(".tmp-")]


def test_a_reader_finds_versions_another_store_compacted_away(tmp_path: Path) -> None:
    reader = ObjectStore(tmp_path / "s", clock=StepClock(), inline_max_bytes=0)
    reader.put(_big_docs(1, ["a", "b", "c", "d"]))
    reader.put(_big_docs(2, ["a", "b", "c", "d"]))
    files = [p.file.path for p in reader._state.pending.values() if p.file is not None]
    assert len(files) == 2
    with ObjectStore(tmp_path / "s", create=False) as other:
        other.compact()
    assert not any(os.path.exists(f) for f in files)  # the segments the reader knew are gone
    assert [v.doc["content"].split(" ")[0] for v in reader.history("a")] == ["a@1", "a@2"]
    assert reader.get("c")["content"].startswith("c@2 ")
    assert sorted(reader.get_many(["a", "d"])) == ["a", "d"]


def test_a_segment_removed_by_something_else_is_reported(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "s", clock=StepClock(), inline_max_bytes=0)
    tx = store.put(_big_docs(1, ["a", "b", "c", "d"])).tx_id
    seg = store._state.pending[tx].file
    assert seg is not None
    os.unlink(seg.path)
    with pytest.raises(CorruptStoreError, match="missing, though the store's log names it"):
        store.get("a")


def _build(path: Path, rounds: list[list[tuple[str, int]]], *, compact_after: int) -> ObjectStore:
    """A store from rounds of puts of (id, size) documents, compacted after round
    ``compact_after`` (so that the later rounds are newer than a snapshot)."""
    store = ObjectStore(path, clock=StepClock(), inline_max_bytes=0)
    for n, docs in enumerate(rounds, 1):
        store.put(
            [
                {"xt/id": i, "type": "note", "text": f"{i}@{n}:" + "x" * size, "n": n}
                for i, size in docs
            ]
        )
        if n == compact_after:
            store.compact()
    return store


def _rounds(seed: int, old_ids: int, new_rounds: int) -> list[list[tuple[str, int]]]:
    rng = random.Random(seed)
    ids = [f"id-{k:04d}" for k in range(old_ids)]
    first = [[(i, rng.randrange(10, 400)) for i in ids[j::4]] for j in range(4)]
    # An id with many versions before the snapshot: they straddle its row groups.
    first += [[("id-0007", 300)] for _ in range(6)]
    later = []
    for _ in range(new_rounds):
        picked = rng.sample(ids, k=min(len(ids), 25)) + [f"new-{rng.randrange(60):03d}"]
        later.append([(i, rng.randrange(10, 600)) for i in dict.fromkeys(picked)])
    later += [[("id-0007", 50)], [("id-0007", 60)], [("zzz-last", 10)], [("000-first", 10)]]
    return [*first, *later]


@pytest.mark.parametrize(("old_ids", "new_rounds"), [(200, 4), (60, 30)])
def test_a_spilled_compaction_gives_what_an_in_memory_one_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old_ids: int, new_rounds: int
) -> None:
    """(200, 4): most rows old, their frames copied as they are; (60, 30): most rows
    new, every frame compressed again with a new dictionary."""
    rounds = _rounds(old_ids + new_rounds, old_ids, new_rounds)
    compact_after = 10
    monkeypatch.setattr(compact_mod, "GROUP_BYTES", 6_000)  # many old row groups
    expected = _build(tmp_path / "mem", rounds, compact_after=compact_after)
    expected.compact()

    spills = []
    real_spill = compact_mod.NewVersions._spill

    def spill(self: Any, picked: list[int]) -> list[bytes]:
        spills.append(len(self._starts) - 1)
        return real_spill(self, picked)

    monkeypatch.setattr(compact_mod.NewVersions, "_spill", spill)
    monkeypatch.setattr(compact_mod, "SPILL_BYTES", 0)
    monkeypatch.setattr(compact_mod, "SPILL_RANGE_BYTES", 5_000)
    monkeypatch.setattr(compact_mod, "PIECE_BYTES", 1_500)
    got = _build(tmp_path / "spill", rounds, compact_after=compact_after)
    got.compact()
    assert spills and spills[-1] > 3  # the last compaction went through several ranges

    def snapshot(store: ObjectStore) -> list[dict[str, Any]]:
        st = store._state
        assert st.snap is not None
        return pq.read_table(st.abs_path(st.snap.entry.file)).to_pylist()

    assert snapshot(got) == snapshot(expected)
    ids = expected.ids()
    assert got.ids() == ids
    for i in ids:
        assert got.history(i) == expected.history(i)
    # And both are what was put, version by version.
    want: dict[str, list[str]] = {}
    for n, docs in enumerate(rounds, 1):
        for i, size in docs:
            want.setdefault(i, []).append(f"{i}@{n}:" + "x" * size)
    assert {i: [v.doc["text"] for v in got.history(i)] for i in ids} == want
    got.close()
    with ObjectStore(tmp_path / "spill", create=False) as again:
        assert str(again.verify()).endswith("every one as committed")
        assert again.get("zzz-last")["text"] == "zzz-last@" + str(len(rounds) - 1) + ":" + "x" * 10
    assert not [e for e in os.listdir(tmp_path / "spill" / "snapshots") if e.startswith(".tmp-")]


def test_a_compaction_that_fails_midway_leaves_the_store_and_no_spill_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compact_mod, "SPILL_BYTES", 0)
    monkeypatch.setattr(compact_mod, "SPILL_RANGE_BYTES", 5_000)
    store = _build(tmp_path / "s", _rounds(3, 80, 6), compact_after=3)
    before = {i: store.history(i) for i in store.ids()}
    calls = []
    real_flush = compact_mod._Sink._flush

    def failing_flush(self: Any, n: int) -> None:
        calls.append(n)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_flush(self, n)

    monkeypatch.setattr(compact_mod, "GROUP_BYTES", 4_000)
    monkeypatch.setattr(compact_mod._Sink, "_flush", failing_flush)
    with pytest.raises(OSError, match="No space left"):
        store.compact()
    assert {i: store.history(i) for i in store.ids()} == before
    assert not [e for e in os.listdir(tmp_path / "s" / "snapshots") if e.startswith(".tmp-")]
    monkeypatch.setattr(compact_mod._Sink, "_flush", real_flush)
    assert store.compact().segments_merged > 0
    assert {i: store.history(i) for i in store.ids()} == before
    store.close()


def test_an_index_in_batches_holds_no_batch_of_text_after_it_is_committed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    rng = random.Random(5)
    texts = {}
    for k in range(24):
        text = "".join(rng.choices("abc def\n", k=180_000))
        (root / f"f{k:02d}.txt").write_text(text)
        texts[f"f{k:02d}.txt"] = text
    ws = Workspace.open(root)
    report = index_tree(ws, progress=False, batch_bytes=1 << 20)
    assert report.created == 24 and len(report.transactions) >= 4
    held = [p for p in ws.store._state.pending.values() if p._table is not None]
    assert not held  # every batch was over the size kept in memory
    assert pending_mod.RESIDENT_BYTES < 180_000 * 6
    for name, text in texts.items():
        assert ws.get(root / name)["content"] == text
    ws.settle_store()
    ws.store.compact()
    for name, text in texts.items():
        assert ws.get(root / name)["content"] == text


def test_one_version_through_the_spill_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compact_mod, "SPILL_BYTES", -1)
    with ObjectStore(tmp_path / "s", inline_max_bytes=0) as store:
        store.put([{"xt/id": "a", "type": "note"}])
        assert store.compact().versions == 1
        store.put([{"xt/id": "a", "type": "note", "v": 2}])
        assert store.compact().versions == 2
        assert [v.doc.get("v") for v in store.history("a")] == [None, 2]
