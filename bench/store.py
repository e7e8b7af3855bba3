"""Measure ObjectStore reads against sqlite3 holding the same rows.

Builds a store of ``--objects`` documents with ``--versions`` versions in total (files,
tool calls and chats in realistic shapes), in transactions of ``--tx-size`` documents,
compacting once at 90% of the versions (as ``maybe_compact`` does in real use), then
compacts the rest in a separate process whose peak RSS is measured: a streaming
compaction of the whole store. The same versions go into a sqlite3 table ``versions(id, tx, doc)``
with an index on ``(id, tx)``; sqlite answers return parsed dicts too, so both sides do
the same work for the caller.

Then, for both: ``get`` of a random id, ``history`` of a random id, ``get_many`` of
1,000 random ids and a cold open (a new instance plus its first ``get``; and a new
process, timed from inside it after imports). Prints medians, ratios to sqlite, the
targets, and the memory the open store holds for its index. Asserts nothing.

Run: ``python bench/store.py [--objects N --versions M]`` (full size: 100,000 objects,
1,000,000 versions, about two minutes) or ``python bench/store.py --quick``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ctxnb.store.objectstore import ObjectStore  # noqa: E402

WORDS = (
    "def return self import class value data path file read write index store version "
    "context session agent tool result error test assert list dict string int None True "
    "False for in if else while try except with as yield lambda async await"
).split()


def make_doc(rng: random.Random, obj: int, version: int) -> dict[str, Any]:
    """One version of object ``obj``; the object's type is fixed by its number."""
    oid = f"obj-{obj:07d}"
    text = " ".join(rng.choices(WORDS, k=rng.randint(15, 90)))
    kind = obj % 20
    if kind < 16:
        return {
            "xt/id": oid,
            "type": "file",
            "source": {"type": "filesystem", "filesystemId": "fs-1", "path": f"/ws/m{obj}.py"},
            "identity_hash": f"{obj:064x}",
            "content": text,
            "file_type": "python",
            "char_count": len(text),
            "source_hash": f"{version:064x}",
            "content_hash": f"{obj * 31 + version:064x}",
        }
    if kind < 19:
        return {
            "xt/id": oid,
            "type": "toolcall",
            "source": None,
            "identity_hash": None,
            "content": text,
            "tool": "read_file",
            "args": {"path": f"/ws/m{obj}.py", "start": version, "end": version + 40},
            "args_display": f"read_file /ws/m{obj}.py",
            "status": "ok",
            "chat_ref": "chat-1",
            "file_refs": [f"obj-{obj - 1:07d}"],
            "content_hash": None,
        }
    return {
        "xt/id": oid,
        "type": "chat",
        "source": None,
        "identity_hash": None,
        "turns": [{"role": "user", "content": text[:60]}, {"role": "assistant", "content": text}],
        "turn_count": 2 * version + 2,
        "toolcall_refs": [f"obj-{obj - 1:07d}"],
        "session_ref": "session-1",
        "content_hash": None,
    }


def transactions(n_obj: int, n_ver: int, tx_size: int, seed: int) -> Iterator[list[dict]]:
    """Creations first, then updates of random objects; an id appears once per tx."""
    rng = random.Random(seed)
    versions = [0] * n_obj
    for start in range(0, n_obj, tx_size):
        yield [make_doc(rng, i, 0) for i in range(start, min(start + tx_size, n_obj))]
    left = n_ver - n_obj
    while left > 0:
        k = min(tx_size, left, n_obj)
        batch = []
        for i in rng.sample(range(n_obj), k):
            versions[i] += 1
            batch.append(make_doc(rng, i, versions[i]))
        left -= k
        yield batch


def timed(fn: Callable[[], Any], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def per_item(fn: Callable[[Any], Any], items: list[Any]) -> list[float]:
    out = []
    perf = time.perf_counter
    for item in items:
        t0 = perf()
        fn(item)
        out.append(perf() - t0)
    return out


OPEN_SNIPPET = """
import json, sys, time
sys.path.insert(0, {repo!r})
t0 = time.perf_counter()
import pandas  # pyarrow imports it on first use anyway; count it as import time
from ctxnb.store.objectstore import ObjectStore
t1 = time.perf_counter()
s = ObjectStore({path!r}, create=False)
s.get({probe!r})
t2 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "open": t2 - t1}}))
"""

COMPACT_SNIPPET = """
import json, sys, time
sys.path.insert(0, {repo!r})
import pandas  # pyarrow imports it on first use; count it in the RSS before compaction
from ctxnb.store.objectstore import ObjectStore
s = ObjectStore({path!r}, create=False)
with open("/proc/self/statm") as f:
    import os
    before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
t0 = time.perf_counter()
report = s.compact()
seconds = time.perf_counter() - t0
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (this
# bench, which holds a large store) across exec.
with open("/proc/self/status") as f:
    peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
print(json.dumps({{"versions": report.versions, "seconds": seconds, "peak": peak,
                  "before": before}}))
"""

MEMORY_SNIPPET = """
import json, os, sys, tracemalloc
sys.path.insert(0, {repo!r})
import pandas  # pyarrow imports it on first use; keep it out of the figure
import pyarrow as pa
from ctxnb.store.objectstore import ObjectStore
pa.array(["warm up"])
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
r0, a0 = rss(), pa.total_allocated_bytes()
tracemalloc.start()
s = ObjectStore({path!r}, create=False)
s.get({probe!r})
py = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
print(json.dumps({{"python": py, "arrow": pa.total_allocated_bytes() - a0, "rss": rss() - r0}}))
"""


def fmt_t(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "


def open_cost_by_history(counts: list[int], reps: int = 5) -> None:
    """Opening a compacted store against the number of transactions ever committed.

    The log is written with the store's own line format (one inline transaction of one
    small document per line, then a compaction by ObjectStore), because committing
    each with an fsync would take most of the run; opening reads it the same way.
    """
    from ctxnb.store import _log as tlog

    print("open cost against history (compacted store, one small doc per transaction)")
    base = None
    for n in counts:
        work = Path(tempfile.mkdtemp(prefix="ctxnb-bench-log-"))
        ObjectStore(work).close()
        with open(work / "txlog", "ab") as f:
            t0 = 1_735_689_600_000_000
            for tx in range(1, n + 1):
                doc = {"xt/id": f"f{tx % 500}", "type": "file", "content": f"x = {tx}\n"}
                f.write(tlog.txdocs_line(tx, t0 + tx, [json.dumps(doc).encode()]))
        (work / "writer.lock").write_bytes(b"")  # no mark: the log above is the truth
        with ObjectStore(work, fold_after=None) as store:
            store.compact()
        size = (work / "txlog").stat().st_size

        def open_close(work: Path = work) -> None:
            ObjectStore(work, fold_after=None).close()

        t = statistics.median(timed(open_close, reps))
        base = base or t
        print(
            f"  {n:>9,} transactions  log {size / 1e6:7.1f} MB  open {fmt_t(t)}"
            f"  ({t / base:.1f}x the first)"
        )
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--versions", type=int, default=1_000_000)
    p.add_argument("--tx-size", type=int, default=10_000)
    p.add_argument("--samples", type=int, default=2_000, help="random ids per measurement")
    p.add_argument("--quick", action="store_true", help="2,000 objects, 20,000 versions")
    p.add_argument("--dir", type=Path, help="work directory (default: a temp dir, removed)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--history",
        type=int,
        nargs="*",
        help="only time opening a store after these many transactions (e.g. 1000 1000000)",
    )
    a = p.parse_args(argv)
    if a.history:
        open_cost_by_history(a.history)
        return
    if a.quick:
        a.objects, a.versions, a.tx_size, a.samples = 2_000, 20_000, 2_000, 500
    a.versions = max(a.versions, a.objects)
    work = a.dir or Path(tempfile.mkdtemp(prefix="ctxnb-bench-store-"))
    work.mkdir(parents=True, exist_ok=True)
    store_dir, db_path = work / "store", work / "bench.sqlite"
    shutil.rmtree(store_dir, ignore_errors=True)
    db_path.unlink(missing_ok=True)
    print(f"store bench: {a.objects:,} objects, {a.versions:,} versions, tx of {a.tx_size:,}")

    store = ObjectStore(store_dir)
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE versions (id TEXT NOT NULL, tx INTEGER NOT NULL, doc TEXT NOT NULL)")
    db.execute("CREATE INDEX versions_id_tx ON versions (id, tx)")
    t_put = t_sql = 0.0
    n_tx = 0
    n_total = -(-max(a.versions - a.objects, 0) // a.tx_size) + -(-a.objects // a.tx_size)
    t_first = 0.0
    for batch in transactions(a.objects, a.versions, a.tx_size, a.seed):
        if n_tx == (n_total * 9) // 10:
            t0 = time.perf_counter()
            store.compact()
            t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        rec = store.put(batch)
        t1 = time.perf_counter()
        db.executemany(
            "INSERT INTO versions VALUES (?, ?, ?)",
            [(d["xt/id"], rec.tx_id, json.dumps(d, separators=(",", ":"))) for d in batch],
        )
        db.commit()
        t_put += t1 - t0
        t_sql += time.perf_counter() - t1
        n_tx += 1
    store.close()
    print(f"  build: {n_tx} puts {t_put:.1f} s (sqlite inserts {t_sql:.1f} s), ", end="")
    print(f"compact at 90% {t_first:.1f} s")
    out = subprocess.run(
        [sys.executable, "-c", COMPACT_SNIPPET.format(repo=str(REPO), path=str(store_dir))],
        check=True,
        capture_output=True,
        text=True,
    )
    comp = json.loads(out.stdout)
    print(
        f"  compaction of all {comp['versions']:,} versions in a new process: "
        f"{comp['seconds']:.1f} s, peak RSS {comp['peak'] / 1e6:.0f} MB "
        f"(the process after imports and open: {comp['before'] / 1e6:.0f} MB)   "
        "target peak ≤ 500 MB"
    )
    parquet = sum(p.stat().st_size for p in store_dir.rglob("*.parquet"))
    cache = sum(p.stat().st_size for p in store_dir.rglob("*.docs.arrow"))
    print(
        f"  on disk: doc cache {cache / 1e6:.1f} MB vs its Parquet {parquet / 1e6:.1f} MB: "
        f"{cache / parquet:.2f}×   target ≤ 2×   (sqlite {db_path.stat().st_size / 1e6:.0f} MB)"
    )

    rng = random.Random(a.seed + 1)
    ids = [f"obj-{rng.randrange(a.objects):07d}" for _ in range(a.samples)]
    store = ObjectStore(store_dir)
    cur = db.cursor()

    def sql_get(i: str) -> dict:
        row = cur.execute(
            "SELECT doc FROM versions WHERE id = ? ORDER BY tx DESC LIMIT 1", (i,)
        ).fetchone()
        return json.loads(row[0])

    def sql_history(i: str) -> list[tuple[dict, int]]:
        rows = cur.execute("SELECT tx, doc FROM versions WHERE id = ? ORDER BY tx", (i,))
        return [(json.loads(doc), tx) for tx, doc in rows]

    def sql_get_many_in(batch: list[str]) -> dict[str, dict]:
        marks = ",".join("?" * len(batch))
        # sqlite returns the bare column of the row that holds MAX(tx).
        rows = cur.execute(
            f"SELECT id, doc, MAX(tx) FROM versions WHERE id IN ({marks}) GROUP BY id", batch
        )
        return {i: json.loads(doc) for i, doc, _ in rows}

    def sql_get_many_loop(batch: list[str]) -> dict[str, dict]:
        return {i: sql_get(i) for i in batch}

    assert store.get(ids[0]) == sql_get(ids[0])  # same rows on both sides
    assert [v.doc for v in store.history(ids[0])] == [d for d, _ in sql_history(ids[0])]
    results: list[tuple[str, float, float, float]] = []
    for _ in range(2):  # warm both caches once
        per_item(store.get, ids[:200])
        per_item(sql_get, ids[:200])
    results.append(
        (
            "get",
            statistics.median(per_item(store.get, ids)),
            statistics.median(per_item(sql_get, ids)),
            3,
        )
    )
    results.append(
        (
            "history",
            statistics.median(per_item(store.history, ids)),
            statistics.median(per_item(sql_history, ids)),
            5,
        )
    )
    many = [[f"obj-{rng.randrange(a.objects):07d}" for _ in range(1000)] for _ in range(30)]
    results.append(
        (
            "get_many(1000)",
            statistics.median(per_item(store.get_many, many)),
            # the faster of two ways to ask sqlite, so the baseline is not a straw man
            min(
                statistics.median(per_item(sql_get_many_in, many)),
                statistics.median(per_item(sql_get_many_loop, many)),
            ),
            2,
        )
    )
    probe = ids[0]

    def open_store() -> None:
        s = ObjectStore(store_dir, create=False)
        s.get(probe)
        s.close()

    def open_sql() -> None:
        c = sqlite3.connect(db_path)
        c.execute("SELECT doc FROM versions WHERE id = ? ORDER BY tx DESC LIMIT 1", (probe,))
        c.close()

    open_ours = statistics.median(timed(open_store, 7))
    results.append(("open (new instance)", open_ours, statistics.median(timed(open_sql, 7)), 0))
    procs = []
    for _ in range(3):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                OPEN_SNIPPET.format(repo=str(REPO), path=str(store_dir), probe=probe),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        procs.append(json.loads(out.stdout))
    open_proc = statistics.median(p["open"] for p in procs)
    import_t = statistics.median(p["import"] for p in procs)
    mem_out = subprocess.run(
        [
            sys.executable,
            "-c",
            MEMORY_SNIPPET.format(repo=str(REPO), path=str(store_dir), probe=probe),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    mem = json.loads(mem_out.stdout)

    print()
    print(f"  {'operation':<22}{'ctxnb':>12}{'sqlite3':>12}{'ratio':>9}   target")
    for name, ours, theirs, target in results:
        ratio = ours / theirs
        tgt = f"≤ {target}×" if target else "≤ 1 s"
        print(f"  {name:<22}{fmt_t(ours):>12}{fmt_t(theirs):>12}{ratio:>8.2f}×   {tgt}")
    print(f"  {'open (new process)':<22}{fmt_t(open_proc):>12}{'':>12}{'':>9}   ≤ 1 s", end="")
    print(f"  (after {import_t * 1e3:.0f} ms of imports)")
    print()
    print(
        f"  index memory of the open store: {mem['python'] / 1e6:.1f} MB Python objects "
        f"(tracemalloc) + {mem['arrow'] / 1e6:.1f} MB Arrow buffers; "
        f"RSS grew {mem['rss'] / 1e6:.1f} MB (includes mapped file pages read)   target ≤ 250 MB"
    )
    store.close()
    db.close()
    if a.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
