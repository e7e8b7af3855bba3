"""Fault injection over every file of an object store: no fault loses data silently.

Each fault is applied to a fresh copy of one real store (segments, inline
transactions, a fold, a snapshot and its doc cache, both locks). Opening the damaged
copy must either give back every committed version, and keep them through a
compaction and a reopen, or refuse with a ``CorruptStoreError`` whose message and
``.path`` name a file of the store. Anything else counts as a loss, and there must be
none. A full disk is injected for real, with ``RLIMIT_FSIZE`` in a child process.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from ctxnb.errors import CorruptStoreError, StoreError
from ctxnb.store.objectstore import ObjectStore

Versions = dict[str, list[tuple[int, dict[str, Any]]]]


def _build(path: Path) -> Versions:
    """A store with every kind of file, and every version it holds."""
    big = "x" * 40_000  # above the inline limit: a Parquet segment
    with ObjectStore(path, fold_after=None) as store:
        for i in range(6):
            store.put([{"xt/id": f"f{i % 3}", "type": "file", "content": f"v{i}"}])
        store.put([{"xt/id": "big0", "type": "file", "content": big}])
        store.compact()
        for i in range(4):
            store.put([{"xt/id": f"f{i % 2}", "type": "file", "content": f"w{i}"}])
        assert store.fold() == 4
        store.put([{"xt/id": "big1", "type": "file", "content": big + "1"}])
        store.put([{"xt/id": "n1", "type": "note", "text": "after the fold"}])
        store._fold_every = 10**9  # keep the last one inline at close
        return _versions(store)


def _versions(store: ObjectStore) -> Versions:
    return {key: [(v.tx_id, v.doc) for v in store.history(key)] for key in sorted(store.ids())}


def _store_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _outcome(root: Path, expected: Versions) -> str:
    """``recovered``, ``refused`` (naming a file of the store) or ``lost``."""
    try:
        with ObjectStore(root, create=False) as store:
            first = _versions(store)
            table = store.scan(all_versions=True, format="arrow")
            store.compact()
        with ObjectStore(root, create=False) as store:
            again = _versions(store)
    except CorruptStoreError as exc:
        named = exc.path is not None and str(root) in str(exc.path) and str(exc.path) in str(exc)
        return "refused" if named else f"lost: refusal names no store file: {exc}"
    except StoreError as exc:
        return f"lost: not a CorruptStoreError naming the file: {exc!r}"
    if first != expected or again != expected:
        return "lost: versions differ"
    if table.num_rows != sum(len(v) for v in expected.values()):
        return "lost: scan differs"
    return "recovered"


def _faults(files: list[Path]) -> list[tuple[str, Any]]:
    def truncate(p: Path) -> None:
        os.truncate(p, p.stat().st_size // 2)

    def empty(p: Path) -> None:
        os.truncate(p, 0)

    def delete(p: Path) -> None:
        p.unlink()

    def flip(at: float, mask: int) -> Any:
        def apply(p: Path) -> None:
            data = bytearray(p.read_bytes())
            if data:
                i = min(len(data) - 1, int(len(data) * at))
                data[i] ^= mask
                p.write_bytes(bytes(data))

        return apply

    out: list[tuple[str, Any]] = []
    for f in files:
        for name, fn in [
            ("truncate", truncate),
            ("empty", empty),
            ("delete", delete),
            *(
                (f"flip {mask:#x} @{at}", flip(at, mask))
                for at in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999)
                for mask in (0x01, 0xFF)
            ),
        ]:
            out.append((f"{name} {f.name}", (fn, f)))
    for a, b in itertools.combinations(files, 2):

        def swap(_: Path, a: Path = a, b: Path = b) -> None:
            tmp = a.with_name(a.name + ".swap")
            os.rename(a, tmp)
            os.rename(b, a)
            os.rename(tmp, b)

        out.append((f"swap {a.name} {b.name}", (swap, a)))
    return out


def test_every_fault_on_every_store_file_is_recovered_or_refused(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    expected = _build(pristine)
    rels = [p.relative_to(pristine) for p in _store_files(pristine)]
    assert {r.name.split("-")[0].split(".")[0] for r in rels} >= {
        "txlog", "writer", "compact", "ctxnb", "seg", "snap"
    }  # fmt: skip
    tally: Counter[str] = Counter()
    losses = []
    for i, (label, (fn, target)) in enumerate(_faults([pristine / r for r in rels])):
        copy = tmp_path / f"c{i}"
        shutil.copytree(pristine, copy)
        fn(copy / target.relative_to(pristine))
        outcome = _outcome(copy, expected)
        tally[outcome.split(":")[0]] += 1
        if outcome.startswith("lost"):
            losses.append(f"{label}: {outcome}")
        shutil.rmtree(copy)
    print(f"\nstore faults: tried {sum(tally.values())}, {dict(tally)}")
    assert not losses, losses
    assert tally["recovered"] and tally["refused"]


def test_an_emptied_log_is_refused_and_compaction_keeps_the_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "store"
    expected = _build(root)
    snapshot = next((root / "snapshots").glob("*.parquet"))
    (root / "txlog").write_bytes(b"")
    for witness in ("writer.lock", None):  # with the log's mark, then without it
        if witness is None:
            (root / "writer.lock").unlink()
        with pytest.raises(CorruptStoreError, match="txlog") as info:
            ObjectStore(root, create=False)
        assert info.value.path == str(root / "txlog")
        assert snapshot.exists()
    assert expected  # the snapshot still holds what the log had


def test_a_log_cut_inside_its_last_line_is_refused_not_taken_for_a_torn_write(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    _build(root)
    log = root / "txlog"
    os.truncate(log, log.stat().st_size - 5)  # a committed line, cut
    with pytest.raises(CorruptStoreError, match="cut short"):
        ObjectStore(root, create=False)


_FULL_DISK = """
import resource, signal, sys
from ctxnb.store.objectstore import ObjectStore
from ctxnb.errors import StoreError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
path, limit = sys.argv[1], int(sys.argv[2])
store = ObjectStore(path, fold_after=None, fold_every=5)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
acked, i = [], 0
while i < 400:
    doc = {"xt/id": f"d{i % 7}", "type": "file", "content": "y" * (200 + 97 * i)}
    try:
        tx = store.put([doc])
        acked.append([tx.tx_id, doc])
    except StoreError:
        pass
    if i % 25 == 24:
        try:
            store.compact()
        except (StoreError, OSError):
            pass
    i += 1
print(__import__("json").dumps(acked))
"""


@pytest.mark.parametrize("limit", [60_000, 250_000])
def test_a_full_disk_loses_no_acknowledged_transaction(tmp_path: Path, limit: int) -> None:
    root = tmp_path / "store"
    run = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(root), str(limit)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    acked = json.loads(run.stdout)
    assert 0 < len(acked) < 400  # some commits were refused by the full disk
    with ObjectStore(root, create=False) as store:
        got = {(v.tx_id, json.dumps(v.doc)) for k in store.ids() for v in store.history(k)}
        store.compact()
        after = {(v.tx_id, json.dumps(v.doc)) for k in store.ids() for v in store.history(k)}
    want = {(tx, json.dumps(doc)) for tx, doc in acked}
    assert want <= got and got == after
    files = [str(p) for p in root.rglob("*.parquet") if not p.name.startswith(".")]
    assert ds.dataset(files).count_rows() == len(got)


def test_a_stale_lock_does_not_block_or_damage_the_store(tmp_path: Path) -> None:
    root = tmp_path / "store"
    expected = _build(root)
    # A writer killed while it held both locks: flock() dies with it.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time\n"
            "for n in ('writer.lock','compact.lock'):\n"
            " fd=os.open(os.path.join(sys.argv[1],n),os.O_RDWR)\n"
            " fcntl.flock(fd,fcntl.LOCK_EX)\n"
            "print('held',flush=True); time.sleep(60)",
            str(root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    assert _outcome(root, expected) == "recovered"
