"""Every segment is checked before it is trusted; no segment the log may have lost is deleted.

A flipped byte anywhere in a segment or fold segment makes opening refuse, naming the
file (their SHA-256 is in the log line that names them); one inside the snapshot's data
is caught by ``verify`` and ``ctxnb store verify``; a snapshot rewritten whole, by its
footer at open. A log cut at a line boundary with ``writer.lock`` gone cannot prove
the segment of its lost line uncommitted: the store refuses and the file stays.
"""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from ctxnb.cli import main
from ctxnb.errors import CorruptStoreError
from ctxnb.store import _guard as guard
from ctxnb.store.objectstore import ObjectStore

AT = (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95)  # where a byte is flipped, as a share of the size


def _build(root: Path) -> dict[str, Any]:
    """A store with a snapshot, transaction segments and a fold segment."""
    with ObjectStore(root, fold_after=None, fold_every=10**9) as store:
        for i in range(4):
            store.put([{"xt/id": f"big{i}", "type": "file", "content": _noise(i, 50_000)}])
        store.compact()
        for i in range(3):
            store.put([{"xt/id": f"big{i}", "type": "file", "content": _noise(i + 9, 40_000)}])
        for i in range(6):
            store.put([{"xt/id": f"f{i % 3}", "type": "file", "content": f"v{i} " * 20}])
        assert store.fold() == 6
        return {k: [v.doc for v in store.history(k)] for k in store.ids()}


def _noise(seed: int, n: int) -> str:
    """Text that compresses badly: data pages, not the footer, make most of a file."""
    return random.Random(seed).randbytes(n // 2).hex()


def _flip(path: Path, at: float) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def _segments(root: Path) -> tuple[list[Path], Path]:
    log = [json.loads(line) for line in (root / "txlog").read_text().splitlines()]
    folds = [root / e["file"] for e in log if e["op"] == "fold"]
    txs = [root / e["file"] for e in log if e["op"] == "tx" and e["file"]]
    assert len(folds) == 1 and len(txs) == 3
    return txs, folds[0]


@pytest.mark.parametrize("kind", ["fold", "tx"])
@pytest.mark.parametrize("at", AT)
def test_a_flipped_byte_in_a_segment_is_refused_at_open_naming_it(
    tmp_path: Path, kind: str, at: float
) -> None:
    root = tmp_path / "store"
    _build(root)
    txs, fold = _segments(root)
    target = fold if kind == "fold" else txs[1]
    _flip(target, at)
    with pytest.raises(CorruptStoreError) as info:
        ObjectStore(root, create=False)
    assert info.value.path == str(target)
    assert str(target) in str(info.value)
    assert "Restore it from a backup" in str(info.value)


def test_a_flipped_byte_in_the_snapshot_is_found_by_verify_and_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    root = ws / ".ctxnb" / "store"
    expected = _build(root)
    assert main(["store", "verify", str(ws)]) == 0
    assert "every one as committed" in capsys.readouterr().out
    snapshot = next((root / "snapshots").glob("*.parquet"))
    _flip(snapshot, 0.3)  # inside a data page: the footer is as it was
    with ObjectStore(root, create=False, fold_after=None) as store:
        with pytest.raises(CorruptStoreError) as info:
            store.verify()
        assert info.value.path == str(snapshot)
    assert main(["store", "verify", str(ws)]) == 1
    assert str(snapshot) in capsys.readouterr().err
    assert expected


def test_a_snapshot_rewritten_with_other_rows_is_refused_at_open(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _build(root)
    snapshot = next((root / "snapshots").glob("*.parquet"))
    other = tmp_path / "other"
    with ObjectStore(other, fold_after=None) as store:
        for i in range(4):
            store.put([{"xt/id": f"big{i}", "type": "file", "content": f"{i + 1}" * 50_000}])
        store.compact()
    forged = next((other / "snapshots").glob("*.parquet")).read_bytes()
    # Same size, other rows: padded or cut to the size the log recorded.
    size = snapshot.stat().st_size
    snapshot.write_bytes(forged[:size].ljust(size, b"\0"))
    with pytest.raises(CorruptStoreError) as info:
        ObjectStore(root, create=False)
    assert info.value.path == str(snapshot)


def test_readers_through_ctxnb_never_get_wrong_rows_from_a_damaged_segment(
    tmp_path: Path,
) -> None:
    """The documented way to read with pandas or DuckDB opens the store with ctxnb
    first (Workspace.index or ObjectStore); a damaged file stops it there."""
    for at in AT:
        root = tmp_path / f"store-{at}"
        expected = _build(root)
        _, fold = _segments(root)
        _flip(fold, at)
        try:
            with ObjectStore(root, create=False, fold_after=None) as store:
                all_versions = store.scan(all_versions=True, format="arrow").num_rows
        except CorruptStoreError as exc:
            assert exc.path == str(fold)
            continue
        # Reached only if ctxnb accepted the store: then every reader agrees with it.
        files = glob.glob(f"{root}/*/*.parquet")
        rows = pd.concat(pd.read_parquet(f) for f in files)
        assert len(rows) == all_versions == sum(map(len, expected.values()))
        got = duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/*/*.parquet')").fetchone()
        assert got == (all_versions,)
        pytest.fail(f"a flip at {at} of {fold} was not noticed by ctxnb")


def _cut_last_line(root: Path) -> bytes:
    log = root / "txlog"
    data = log.read_bytes()
    keep = data[: data.rstrip(b"\n").rfind(b"\n") + 1]
    log.write_bytes(keep)
    return data[len(keep) :]


def test_a_log_cut_at_a_line_without_writer_lock_keeps_the_lost_segment(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ObjectStore(root, fold_after=None, inline_max_bytes=0) as store:
        for i in range(3):
            store.put([{"xt/id": f"d{i}", "type": "file", "content": f"v{i}"}])
    lost_line = _cut_last_line(root)
    lost = json.loads(lost_line)
    segment = root / lost["file"]
    (root / "writer.lock").unlink()
    for _ in range(2):  # refused, and refused again: nothing was taken as permission
        with pytest.raises(CorruptStoreError) as info:
            ObjectStore(root, create=False)
        assert info.value.path == str(segment)
        assert "writer.lock" in str(info.value) and "backup" in str(info.value)
        assert segment.exists()
    # Once the log is whole again, every transaction is there.
    backup = tmp_path / "restored"
    shutil.copytree(root, backup)
    with open(backup / "txlog", "ab") as f:
        f.write(lost_line)
    with ObjectStore(backup, create=False, fold_after=None) as store:
        assert [t.tx_id for t in store.transactions()] == [1, 2, 3]
        assert store.get("d2") == {"xt/id": "d2", "type": "file", "content": "v2"}


def test_a_killed_writers_segment_with_the_mark_in_place_is_still_removed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    with ObjectStore(root, fold_after=None, inline_max_bytes=0) as store:
        for i in range(3):
            store.put([{"xt/id": f"d{i}", "type": "file", "content": f"v{i}"}])
    # A writer killed after renaming its segment into place, before its log line.
    orphan = root / "segments" / "seg-000000000004-0badf00d.parquet"
    shutil.copy(next((root / "segments").glob("seg-000000000003-*")), orphan)
    with ObjectStore(root, create=False, fold_after=None) as store:
        store.compact()
        assert store.get("d2") == {"xt/id": "d2", "type": "file", "content": "v2"}
    assert not orphan.exists()


def test_a_writer_lock_removed_under_an_open_store_is_not_taken_as_permission(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    store = ObjectStore(root, fold_after=None, inline_max_bytes=0)
    for i in range(3):
        store.put([{"xt/id": f"d{i}", "type": "file", "content": f"v{i}"}])
    # writer.lock removed under an open store, and a segment for tx 4 appears: nothing
    # tells a killed writer's file from a committed one whose line was lost.
    (root / "writer.lock").unlink()
    ahead = root / "segments" / "seg-000000000004-0badf00d.parquet"
    shutil.copy(next((root / "segments").glob("seg-000000000003-*")), ahead)
    store._cleaned = False  # as at a process's first commit
    for attempt in (store.compact, lambda: store.put([{"xt/id": "e", "type": "note"}])):
        with pytest.raises(CorruptStoreError) as info:
            attempt()
        assert info.value.path == str(ahead)
        assert ahead.exists()
    store.close()


def test_a_lock_on_a_removed_writer_lock_is_taken_again_on_the_new_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    a = ObjectStore(root, fold_after=None)
    a.put([{"xt/id": "a", "type": "note"}])
    lock = root / "writer.lock"
    lock.unlink()
    b = ObjectStore(root, create=False, fold_after=None)
    b.put([{"xt/id": "b", "type": "note"}])  # recreates writer.lock and locks it
    a.put([{"xt/id": "c", "type": "note"}])
    # a's lock is on the file at the path now, the one b locks: never two writers at once.
    assert os.fstat(a._state.writer_fd).st_ino == lock.stat().st_ino
    fd = guard.lock_file(str(lock))
    try:
        assert os.fstat(fd).st_ino == lock.stat().st_ino
    finally:
        os.close(fd)
    assert [t.tx_id for t in b.transactions()] == [1, 2, 3]
    a.close()
    b.close()
