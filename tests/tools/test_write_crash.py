"""A governed writer killed (SIGKILL) at random moments: the file never holds unkept bytes.

Whenever the writer dies, the workspace file holds a version the store kept, and every
write it acknowledged is in the store with its trace record in the store's log (the
ledger's write-ahead log). Before the store commit moved ahead of the rename, a kill
between the two left new bytes on disk that no version held.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _tracewal_setup import governed

from ctxnb import Workspace
from ctxnb.hashing import sha256_hex
from ctxnb.store._attach import attached_lines
from ctxnb.store.objectstore import ObjectStore

HERE = Path(__file__).resolve().parent.parent


def _run_and_kill(root: Path, seed: int, rng: random.Random) -> list[dict]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_write_crash.py"), str(root), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=HERE,
    )
    with proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.8))
        proc.kill()
        out = proc.stdout.read()
    assert proc.returncode == -9
    lines = out.split(b"\n")[:-1]  # a line cut by the kill is no report
    return [json.loads(line) for line in lines]


def _check(root: Path, acked: set[str]) -> None:
    oid = Workspace.open(root).object_id("inventory/a.py")
    store_dir = root / ".ctxnb" / "store"
    with ObjectStore(store_dir, create=False) as store:
        history = store.history(oid)
    # Every transaction that kept each content: the same bytes are kept again when a
    # later process finds them back on disk (a write killed between its commit and its
    # rename leaves the old bytes, which the next observation stores once more).
    kept: dict[str, set[int]] = {}
    for v in history:
        kept.setdefault(str(v.doc.get("source_hash")), set()).add(v.tx_id)
    disk = sha256_hex((root / "inventory" / "a.py").read_bytes())
    assert disk in kept, "the file holds bytes that no version kept"
    missing = [sha for sha in acked if sha not in kept]
    assert missing == [], "an acknowledged write has no version"
    logged = {ln.tx for ln in attached_lines(store_dir) for a in ln.attached}
    # A compaction rotates the log and settles the records it held into the ledger
    # first (ctxnb.store._rotate): a record is in the log, or in the ledger after that.
    ledger = root / ".orchestration" / "agent_trace.jsonl"
    settled = set()
    for line in ledger.read_text(encoding="utf-8").splitlines():
        try:
            version = str(json.loads(line).get("metadata", {}).get("version_id") or "")
        except ValueError:  # a line cut by the kill
            continue
        if version.startswith(f"{oid}@"):
            settled.add(int(version.rsplit("@", 1)[1]))
    untraced = [sha for sha in acked if not kept[sha] & (logged | settled)]
    assert untraced == [], "an acknowledged write has no trace record in the log or ledger"


def _kills(tmp_path: Path, kills: int) -> None:
    root = tmp_path / "ws"
    (root / "inventory").mkdir(parents=True)
    (root / "inventory" / "a.py").write_text("a = 1\n")
    governed(root)
    rng = random.Random(4343)
    acked: set[str] = set()
    amid = 0  # kills that landed after a write began, not while the writer started
    for seed in range(kills):
        reports = _run_and_kill(root, seed, rng)
        acked |= {r["sha"] for r in reports if "acked" in r}
        amid += any("try" in r for r in reports)
        _check(root, acked)
    assert amid >= kills // 2


def test_sigkill_during_governed_writes_never_leaves_unkept_bytes(tmp_path: Path) -> None:
    _kills(tmp_path, 8)


@pytest.mark.slow
def test_many_sigkills_during_governed_writes(tmp_path: Path) -> None:
    _kills(tmp_path, 20)
