"""The tip read from a store's log without opening it (ctxnb.store._tip) says what the
open store says, or nothing: a wrong "nothing changed" would let a re-index skip commits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxnb.store._append import append_inline
from ctxnb.store._tip import read_tip
from ctxnb.store.objectstore import ObjectStore


def _doc(i: int, key: str = "a") -> dict[str, object]:
    return {"xt/id": key, "type": "note", "v": i}


def _agrees(d: str) -> None:
    tip = read_tip(d)
    assert tip is not None
    with ObjectStore(d, fold_after=None) as store:
        latest = store.latest_tx()
        assert tip.tx_id == (latest.tx_id if latest else 0)
        assert tip.uncompacted == store.pending_segments()
        # ObjectStore.close folds what waits: compare before it does.
        assert tip.unfolded == len(store._state.unfolded)


def test_the_tip_agrees_with_the_open_store_through_puts_folds_and_compactions(
    tmp_path: Path,
) -> None:
    d = str(tmp_path / "store")
    ObjectStore(d).close()
    _agrees(d)  # an empty store: tx 0, nothing waits
    store = ObjectStore(d, fold_after=None)
    store.put([_doc(0)])  # inline
    store.put([{"xt/id": "big", "type": "note", "body": "x" * 40_000}])  # a segment
    assert append_inline(d, [_doc(1)]) is not None  # another process, inline
    tip = read_tip(d)
    assert tip is not None and (tip.tx_id, tip.unfolded, tip.uncompacted) == (3, 2, 3)
    store.fold()
    tip = read_tip(d)
    assert tip is not None and (tip.tx_id, tip.unfolded, tip.uncompacted) == (3, 0, 3)
    store.compact()
    tip = read_tip(d)
    assert tip is not None and (tip.tx_id, tip.unfolded, tip.uncompacted) == (3, 0, 0)
    store.put([_doc(2)])
    store.close()  # folds
    _agrees(d)
    tip = read_tip(d)
    assert tip is not None and (tip.tx_id, tip.unfolded, tip.uncompacted) == (4, 0, 1)


def test_a_line_a_crashed_writer_never_finished_is_not_the_tip(tmp_path: Path) -> None:
    d = str(tmp_path / "store")
    with ObjectStore(d, fold_after=None) as store:
        store.put([_doc(0)])
    with open(os.path.join(d, "txlog"), "ab") as f:
        f.write(b'{"op":"txdocs","crc":"00000000","tx":2,"t":1')  # died mid-line
    tip = read_tip(d)
    assert tip is not None and tip.tx_id == 1


def test_counts_the_tail_cannot_see_whole_are_unknown(tmp_path: Path) -> None:
    # More inline transactions than the tail it reads holds (64 of up to 32 KiB each):
    # the last compaction is out of sight, so it does not guess a count.
    d = str(tmp_path / "store")
    with ObjectStore(d, fold_after=None, fold_every=1000) as store:
        store.compact()
        for i in range(80):
            store.put([{"xt/id": f"k{i}", "type": "note", "body": "y" * 30_000}])
        tip = read_tip(d)
        assert tip is not None and tip.tx_id == 80
        assert tip.unfolded is None and tip.uncompacted is None
        store.fold()


@pytest.mark.parametrize("damage", ["no-store", "old-marker", "link-log", "cut-log", "no-lock"])
def test_what_only_the_store_can_tell_is_left_to_it(tmp_path: Path, damage: str) -> None:
    d = str(tmp_path / "store")
    with ObjectStore(d, fold_after=None) as store:
        store.put([_doc(0)])
        store.put([_doc(1)])
    log = os.path.join(d, "txlog")
    if damage == "no-store":
        d = str(tmp_path / "nothing-here")
    elif damage == "old-marker":
        Path(d, "ctxnb-store.json").write_text(json.dumps({"format": "ctxnb-store", "version": 1}))
    elif damage == "link-log":
        os.rename(log, log + ".real")
        os.symlink(log + ".real", log)
    elif damage == "cut-log":
        # An older copy of the log: one line short of what the guard mark says was
        # committed. Read as it is, it would say tx 1 and hide tx 2.
        data = Path(log).read_bytes()
        Path(log).write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])
    elif damage == "no-lock":
        os.unlink(os.path.join(d, "writer.lock"))
    assert read_tip(d) is None
