"""Crash safety of the object store: SIGKILL a committing writer at random moments.

Children are forked from a server that has already imported pyarrow and ctxnb, so each
of the 50+ kills costs milliseconds of start-up instead of a fresh interpreter's imports.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from store_worker import batch_docs, crash_loop

from ctxnb.store.objectstore import ObjectStore

KILLS = 55


def _reports(path: Path) -> list[dict]:
    """Complete report lines only: a line cut by the kill is not a report."""
    text = path.read_text() if path.exists() else ""
    lines = text.split("\n")[:-1]
    return [json.loads(line) for line in lines if line.startswith("{")]


def _wait_ready(path: Path, proc: multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().startswith(b"ready\n"):
            return
        if not proc.is_alive():
            raise AssertionError(f"writer died before it was ready (exit {proc.exitcode})")
        time.sleep(0.002)
    raise AssertionError("writer did not become ready")


def _wait_for_text(path: Path, text: str, proc: multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        if not proc.is_alive():
            raise AssertionError(f"writer died (exit {proc.exitcode})")
        time.sleep(0.005)
    raise AssertionError(f"the writer never wrote {text!r}")


def _check_store(store_dir: Path, reported: dict[int, int], deep: set[int]) -> int:
    """Open the store as a fresh reader and check every committed tx is whole.

    Every reported tx must exist with its count; those in ``deep`` are compared doc by doc.
    """
    with ObjectStore(store_dir, create=False) as store:
        txs = store.transactions()
        assert [t.tx_id for t in txs] == list(range(1, len(txs) + 1))
        by_tx = {t.tx_id: t for t in txs}
        for tx_id, k in reported.items():
            assert tx_id in by_tx, f"reported tx {tx_id} (batch {k}) is missing"
            expected = batch_docs(k)
            assert by_tx[tx_id].count == len(expected)
            if tx_id not in deep:
                continue
            for doc in expected:
                assert store.as_of(doc["xt/id"], tx_id) == doc
        # No transaction is partly visible, reported or not.
        rows = store.scan(all_versions=True, columns=["tx_id"], format="arrow")
        per_tx = Counter(rows.column("tx_id").to_pylist())
        assert per_tx == {t.tx_id: t.count for t in txs if t.count}
        counter = store.history("counter")
        assert [v.tx_id for v in counter] == sorted(by_tx)
        return len(txs)


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_committed_tx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fork server imports pyarrow once; Arrow's default mimalloc pool does not
    # survive fork(), the system allocator does. The server inherits this environment.
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pandas", "ctxnb.store.objectstore"])
    store_dir = tmp_path / "store"
    rng = random.Random(1234)
    reported: dict[int, int] = {}
    compactions_seen = 0
    for run in range(KILLS):
        report = tmp_path / f"report-{run}.txt"
        # Compact often in some runs so that kills also land inside compactions.
        compact_every = rng.choice([0, 3, 5])
        # Commits inline (documents in the log line), as Parquet segments, or a mix.
        inline_max = rng.choice([None, 0, 8192])
        proc = ctx.Process(
            target=crash_loop,
            args=(str(store_dir), str(report), run * 10_000, compact_every, inline_max),
        )
        proc.start()
        _wait_ready(report, proc)
        if compact_every and compactions_seen == 0:
            # However slow the machine, at least one run gets past a compaction (and the
            # kill then lands at a random moment after it, possibly inside the next one).
            _wait_for_text(report, "compacted\n", proc)
        time.sleep(rng.uniform(0, 0.25))
        proc.kill()
        proc.join(10)
        assert proc.exitcode == -9
        new = {line["tx"]: line["batch"] for line in _reports(report)}
        reported.update(new)
        compactions_seen += report.read_text().count("compacted\n")
        n_txs = _check_store(store_dir, reported, deep=set(new))
        assert n_txs >= len(reported)
    assert len(reported) > KILLS  # the kills did land between commits, not only before
    assert compactions_seen > 0
    log = (store_dir / "txlog").read_bytes()
    assert b'{"op":"txdocs",' in log and b'{"op":"tx",' in log  # both kinds were killed
    # After all that, a writer can still commit and a compaction tidies everything up.
    with ObjectStore(store_dir) as store:
        tx = store.put(batch_docs(999_999))
        report = store.compact()
        assert report.upto_tx == tx.tx_id
        assert {p.name for p in (store_dir / "segments").iterdir()} == set()
    _check_store(store_dir, reported, deep=set(reported))
