"""A transaction committed without opening the store (ctxnb.store._append) is one the
store reads as its own: same ids, same order, same checks, under the same lock."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from ctxnb.access.observe import observe_inline
from ctxnb.store._append import append_inline
from ctxnb.store.objectstore import ObjectStore


def _doc(i: int, key: str = "a") -> dict[str, object]:
    return {"xt/id": key, "type": "note", "v": i}


def _store(tmp_path: Path) -> str:
    d = str(tmp_path / "store")
    ObjectStore(d).close()
    return d


def test_inline_commits_interleave_with_the_stores_own(tmp_path: Path) -> None:
    d = _store(tmp_path)
    store = ObjectStore(d)
    ids = []
    for i in range(6):
        if i % 2:
            done = append_inline(d, [_doc(i)])
            assert done is not None
            ids.append(done.tx_id)
        else:
            ids.append(store.put([_doc(i)]).tx_id)
    assert ids == [1, 2, 3, 4, 5, 6]
    # the open store applies the lines written behind its back, in order
    assert [v.doc["v"] for v in store.history("a")] == list(range(6))
    times = [t.tx_time for t in store.transactions()]
    assert times == sorted(times)
    store.compact()
    store.close()
    with ObjectStore(d) as again:
        assert again.get("a") == _doc(5)
        assert [t.tx_id for t in again.transactions()] == ids


def _worker(d: str, n: int, key: str, inline: bool) -> None:
    store = None if inline else ObjectStore(d)
    for i in range(n):
        if inline:
            assert append_inline(d, [_doc(i, key)]) is not None
        else:
            assert store is not None
            store.put([_doc(i, key)])
    if store is not None:
        store.close()


def test_concurrent_writers_both_ways_lose_nothing(tmp_path: Path) -> None:
    d = _store(tmp_path)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(d, 25, f"k{j}", j % 2 == 0)) for j in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with ObjectStore(d) as store:
        assert len(store.transactions()) == 100
        for j in range(4):
            assert [v.doc["v"] for v in store.history(f"k{j}")] == list(range(25))


def test_a_torn_last_line_is_dropped_before_the_commit(tmp_path: Path) -> None:
    d = _store(tmp_path)
    assert append_inline(d, [_doc(1)]) is not None
    with open(os.path.join(d, "txlog"), "ab") as f:
        f.write(b'{"op":"txdocs","crc":"0000')  # a writer died mid-line
    done = append_inline(d, [_doc(2)])
    assert done is not None and done.tx_id == 2
    with ObjectStore(d) as store:
        assert [v.doc["v"] for v in store.history("a")] == [1, 2]


@pytest.mark.parametrize("damage", ["no-store", "old-marker", "link-log", "too-big", "cut-log"])
def test_what_only_the_store_can_do_is_left_to_it(tmp_path: Path, damage: str) -> None:
    d = _store(tmp_path)
    assert append_inline(d, [_doc(1)]) is not None
    log = os.path.join(d, "txlog")
    before = Path(log).read_bytes()
    docs = [_doc(2)]
    if damage == "no-store":
        d = str(tmp_path / "nothing-here")
    elif damage == "old-marker":
        Path(d, "ctxnb-store.json").write_text(json.dumps({"format": "ctxnb-store", "version": 1}))
    elif damage == "link-log":
        os.rename(log, log + ".real")
        os.symlink(log + ".real", log)
    elif damage == "too-big":
        docs = [{"xt/id": "a", "type": "note", "body": "x" * 40_000}]
    elif damage == "cut-log":
        Path(log).write_bytes(b"")  # the guard mark says a line was committed
    assert append_inline(d, docs) is None
    if damage not in ("no-store", "link-log", "cut-log"):
        assert Path(log).read_bytes() == before  # nothing written


def test_tx_times_never_go_backwards(tmp_path: Path) -> None:
    d = _store(tmp_path)
    first = append_inline(d, [_doc(1)], clock=lambda: 2_000_000_000.0)
    second = append_inline(d, [_doc(2)], clock=lambda: 1_000_000_000.0)  # clock stepped back
    assert first is not None and second is not None
    with ObjectStore(d) as store:
        a, b = store.transactions()
        assert a.tx_time == b.tx_time


def test_counts_of_what_waits_for_a_fold_and_a_compaction(tmp_path: Path) -> None:
    d = _store(tmp_path)
    for i in range(3):
        done = append_inline(d, [_doc(i)])
    assert done is not None and (done.unfolded, done.uncompacted) == (3, 3)
    with ObjectStore(d) as store:
        store.fold()
    done = append_inline(d, [_doc(9)])
    assert done is not None and (done.unfolded, done.uncompacted) == (1, 4)
    with ObjectStore(d) as store:
        store.compact()
    done = append_inline(d, [_doc(10)])
    assert done is not None and (done.unfolded, done.uncompacted) == (1, 1)


def test_observe_inline_writes_the_document_observe_bytes_would(tmp_path: Path) -> None:
    d = _store(tmp_path)
    src = {"type": "filesystem", "filesystemId": "fs", "path": "/ws/a.py"}
    got = observe_inline(d, [(src, b"x = 1\n")])
    assert got is not None
    (obs,), _, _, _ = got
    other = tmp_path / "other"
    from ctxnb.access.observe import observe_bytes

    with ObjectStore(str(other)) as ref:
        (want,) = observe_bytes(ref, [(src, b"x = 1\n")])
    assert obs.doc == want.doc and obs.object_id == want.object_id
    with ObjectStore(d) as store:
        assert store.get(obs.object_id) == want.doc
        assert obs.version_id == f"{obs.object_id}@1"
