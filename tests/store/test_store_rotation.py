"""The transaction log is rotated at each compaction, and nothing is lost by it.

A compaction replaces ``txlog`` by a log whose first line (``base``) names the new
snapshot and an archive of the older transactions. These tests check every answer
before and after a rotation, in this store and in another one open on the same
directory, with the standard-library appender, with transactions committed while the
compaction ran, and with the logs an attacker or an accident could put back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ctxnb.errors import CorruptStoreError
from ctxnb.store import _compact as _storecompact
from ctxnb.store import _log as _storelog
from ctxnb.store._append import append_inline
from ctxnb.store.objectstore import ObjectStore


class Clock:
    """Distinct, increasing commit times, so that ``as_of(time)`` has one answer per tx."""

    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


def _answers(store: ObjectStore) -> dict[str, Any]:
    txs = store.transactions()
    return {
        "txs": [(t.tx_id, t.tx_time, t.count) for t in txs],
        "latest": store.latest_tx(),
        "history": {
            k: [(v.tx_id, v.tx_time, v.doc) for v in store.history(k)] for k in store.ids()
        },
        "as_of_time": [store.as_of("f0", t.tx_time) for t in txs],
        "as_of_between": [store.as_of("f0", t.tx_time + timedelta(milliseconds=1)) for t in txs],
    }


def _fill(store: ObjectStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        docs = [{"xt/id": f"f{i % 3}", "type": "file", "content": f"v{i}"}]
        if i % 5 == 4:
            docs = []  # an empty transaction: in the log and the archive, in no Parquet file
        store.put(docs)


def _compacted(root: Path, n: int) -> None:
    """A store of ``n`` transactions, compacted (so its log is rotated), closed."""
    with ObjectStore(root) as store:
        _fill(store, n)
        store.compact()


def _log_lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "txlog").read_bytes().splitlines()]


def test_compaction_rotates_the_log_and_every_answer_stays(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root, clock=Clock()) as store:
        _fill(store, 40)
        store.put([{"xt/id": "big", "type": "file", "content": "x" * 40_000}])  # a segment
        before = _answers(store)
        size_before = (root / "txlog").stat().st_size
        store.compact()
        lines = _log_lines(root)
        assert [e["op"] for e in lines] == ["base"]
        assert (lines[0]["tx"], lines[0]["gen"]) == (41, 1)
        assert (root / "txlog").stat().st_size < size_before / 5
        assert _answers(store) == before
        _fill(store, 7, start=40)
        before = _answers(store)
        store.compact()  # a second rotation archives the first archive's transactions too
        assert [e["op"] for e in _log_lines(root)] == ["base"]
        assert _log_lines(root)[0]["gen"] == 2
        assert _answers(store) == before
        archives = sorted((root / "snapshots").glob("txs-*.arrow"))
        assert [p.name[:16] for p in archives] == ["txs-000000000048"]  # the old one removed
    with ObjectStore(root) as reopened:
        assert _answers(reopened) == before
    marker = json.loads((root / "ctxnb-store.json").read_text())
    assert marker["version"] == _storelog.FORMAT_VERSION


def test_opening_a_rotated_store_reads_no_archive_until_asked(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as store:
        _fill(store, 12)
        store.compact()
        want = [(t.tx_id, t.tx_time) for t in store.transactions()]
    with ObjectStore(root) as store:
        assert store._state.txs._times is None  # not read by open
        assert store.get("f0") is not None and store.latest_tx().tx_id == 12
        assert store._state.txs._times is None  # nor by get or latest_tx
        assert [(t.tx_id, t.tx_time) for t in store.transactions()] == want
        assert store._state.txs._times is not None


def test_another_open_store_follows_the_rotation_and_commits_to_the_new_log(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as a, ObjectStore(root) as b:
        _fill(a, 9)
        assert b.get("f0")["content"] == "v6"
        b.put([{"xt/id": "from-b", "type": "note"}])  # b's log descriptor is now open
        _fill(a, 3, start=9)
        a.compact()  # a rotates the log under b
        assert b.get("f2")["content"] == "v11"
        record = b.put([{"xt/id": "from-b", "type": "note", "v": 2}])
        assert record.tx_id == 14
        ops = [(e["op"], e.get("tx")) for e in _log_lines(root)]
        assert ops == [("base", 13), ("txdocs", 14)]  # in the new log, not the replaced one
        assert [v.tx_id for v in a.history("from-b")] == [10, 14]
        assert _answers(a) == _answers(b)
        want = _answers(a)
    with ObjectStore(root) as reopened:
        assert _answers(reopened) == want


def test_transactions_committed_while_the_compaction_ran_are_carried_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    other = ObjectStore(root)
    write_snapshot = _storecompact.write_snapshot

    def during(**kwargs: Any) -> int:
        # The snapshot is written without the writer lock: another writer commits.
        other.put([{"xt/id": "during", "type": "note", "v": 1}])
        other.put([{"xt/id": "during-big", "type": "file", "content": "y" * 40_000}])
        return write_snapshot(**kwargs)

    with ObjectStore(root) as store:
        _fill(store, 6)
        monkeypatch.setattr(_storecompact, "write_snapshot", during)
        report = store.compact()
        assert report.upto_tx == 6
        ops = [(e["op"], e.get("tx")) for e in _log_lines(root)]
        assert ops == [("base", 6), ("txdocs", 7), ("tx", 8)]
        assert store.get("during")["v"] == 1 and store.get("during-big") is not None
        want = _answers(store)
    monkeypatch.setattr(_storecompact, "write_snapshot", write_snapshot)
    assert _answers(other) == want
    other.close()
    with ObjectStore(root) as reopened:
        assert _answers(reopened) == want
        reopened.compact()
        assert [e["op"] for e in _log_lines(root)] == ["base"]
        assert _answers(reopened) == want


def test_the_standard_library_appender_continues_a_rotated_log(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as store:
        _fill(store, 4)
        store.compact()
        last = store.latest_tx()
    commit = append_inline(root, [{"xt/id": "hook", "type": "note", "v": 1}])
    assert commit is not None and commit.tx_id == 5
    assert (commit.uncompacted, commit.unfolded) == (1, 1)
    with ObjectStore(root) as store:
        assert store.get("hook") == {"xt/id": "hook", "type": "note", "v": 1}
        assert store.latest_tx().tx_time >= last.tx_time
        assert len(store.transactions()) == 5


def test_the_log_a_rotation_replaced_is_refused_when_put_back(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as store:
        _fill(store, 8)
        old_log = (root / "txlog").read_bytes()
        store.compact()
        store.put([{"xt/id": "after", "type": "note"}])
    (root / "txlog").write_bytes(old_log)  # a backup of the log, restored by hand
    with pytest.raises(CorruptStoreError, match="generation") as err:
        ObjectStore(root, create=False)
    assert err.value.path == str(root / "txlog")


def test_an_open_store_refuses_a_log_swapped_for_an_older_one(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as store:
        _fill(store, 8)
        store.compact()
        rotated = (root / "txlog").read_bytes()
        _fill(store, 8, start=8)
        store.compact()
    with ObjectStore(root) as reader:
        assert reader.latest_tx().tx_id == 16
        tmp = root / ".tmp-x-txlog"
        tmp.write_bytes(rotated)  # generation 1 with 8 transactions, after generation 2
        os.replace(tmp, root / "txlog")
        with pytest.raises(CorruptStoreError, match="replaced by another file"):
            reader.get("f0")


@pytest.mark.parametrize("damage", ["delete", "resize", "flip"])
def test_a_damaged_archive_is_refused_naming_it(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "store"
    _compacted(root, 10)
    archive = next((root / "snapshots").glob("txs-*.arrow"))
    data = bytearray(archive.read_bytes())
    if damage == "delete":
        archive.unlink()
    elif damage == "resize":
        archive.write_bytes(bytes(data) + b"\0")
    else:
        data[len(data) // 2] ^= 0x01
        archive.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError) as err:
        with ObjectStore(root, create=False) as store:
            store.transactions()
    assert err.value.path == str(archive)


def test_a_rotation_that_fails_leaves_the_complete_old_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as store:
        _fill(store, 6)
        want = _answers(store)
        replace = os.replace

        def full_disk(src: Any, dst: Any, **kw: Any) -> None:
            if str(dst).endswith("txlog"):
                raise OSError(28, "No space left on device")
            replace(src, dst, **kw)

        monkeypatch.setattr(os, "replace", full_disk)
        store.compact()
        monkeypatch.setattr(os, "replace", replace)
        assert [e["op"] for e in _log_lines(root)][-1] == "compact"  # not rotated
        assert not list(root.glob(".tmp-*"))
        assert _answers(store) == want
        store.put([{"xt/id": "later", "type": "note"}])
        store.compact()  # the next compaction rotates
        assert [e["op"] for e in _log_lines(root)] == ["base"]
        want = _answers(store)
    with ObjectStore(root) as reopened:
        assert _answers(reopened) == want


def test_a_format3_store_is_rotated_at_its_next_compaction(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as store:
        _fill(store, 5)
        want = _answers(store)
    marker = root / "ctxnb-store.json"
    marker.write_text(json.dumps({"format": "ctxnb-store", "version": 3}) + "\n")
    commit = append_inline(root, [{"xt/id": "hook", "type": "note"}])  # format 3 still takes it
    assert commit is not None and commit.tx_id == 6
    with ObjectStore(root) as store:
        assert _answers(store)["txs"][:5] == want["txs"]
        store.compact()
        assert json.loads(marker.read_text())["version"] == _storelog.FORMAT_VERSION
        assert len(store.transactions()) == 6


def test_base_line_elsewhere_than_first_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _compacted(root, 3)
    base = (root / "txlog").read_bytes()
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "txlog").write_bytes(base + base)
    with pytest.raises(CorruptStoreError, match="line 2 is a base line"):
        ObjectStore(copy, create=False)


_COMPACT_IN_ANOTHER_PROCESS = """
import sys
from ctxnb.store.objectstore import ObjectStore
with ObjectStore(sys.argv[1]) as store:
    for i in range(5):
        store.put([{"xt/id": "other", "type": "note", "v": i}])
    store.compact()
"""


def test_a_store_open_in_this_process_follows_a_rotation_made_by_another(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    with ObjectStore(root) as mine:
        _fill(mine, 6)
        mine.put([{"xt/id": "mine", "type": "note", "v": 0}])
        subprocess.run(
            [sys.executable, "-I", "-c", _COMPACT_IN_ANOTHER_PROCESS, str(root)],
            check=True,
            timeout=120,
        )
        assert _log_lines(root)[0]["op"] == "base"  # rotated by the other process
        assert mine.get("other")["v"] == 4 and mine.latest_tx().tx_id == 12
        assert mine.put([{"xt/id": "mine", "type": "note", "v": 1}]).tx_id == 13
        assert [(e["op"], e.get("tx")) for e in _log_lines(root)] == [("base", 12), ("txdocs", 13)]
        want = _answers(mine)
    with ObjectStore(root) as reopened:
        assert _answers(reopened) == want
