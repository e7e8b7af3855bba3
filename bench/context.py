"""Context assembly speed: 10,000 objects in the pool, 200 active files (~2 MB of text).

Prints the median ``assemble`` time (target ≤ 20 ms) and the time to re-assemble after
one file changes (target ≤ 5 ms), against building the same text by a plain
``"".join`` in the same run as the baseline.

Usage: python bench/context.py
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ctxnb import Workspace
from ctxnb.indexer import build_file_doc
from ctxnb.strategies.builtin import KeepAll, TokenBudgetLRU


def median_ms(fn, n: int = 15) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def main() -> None:
    rng = random.Random(7)
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-ctx-"))
    try:
        ws = Workspace.open(base)
        fs = ws.resolver.default_filesystem_id()
        words = ["alpha", "beta", "gamma", "delta", "def", "return", "self", "x", "=", "(", ")"]
        docs = []
        for i in range(10_000):
            size = 10_000 if i < 200 else 200
            text = " ".join(rng.choice(words) for _ in range(size // 6)) + "\n"
            src = {"type": "filesystem", "filesystemId": fs, "path": f"{base}/pkg{i % 50}/f{i}.py"}
            docs.append(build_file_doc(src, text.encode()))
        ws.store.put(docs)
        s = ws.session("bench", system_prompt="You are a careful engineer.")
        for i, d in enumerate(docs):
            s.add(d["xt/id"], activate=i < 200)
        for i in range(20):
            s.add_turn("user" if i % 2 == 0 else "assistant", f"turn {i} " * 20)
        active_chars = sum(len(docs[i]["content"]) for i in range(200))
        print(f"pool {len(s.metadata_pool)} objects, {len(s.active_set)} active, "
              f"{active_chars / 1e6:.1f} MB active text")  # fmt: skip

        cold = time.perf_counter()
        s.assemble(record=False)
        cold = (time.perf_counter() - cold) * 1000
        warm = median_ms(lambda: s.assemble(record=False))
        lru = median_ms(lambda: s.assemble(strategy=TokenBudgetLRU(), budget=300_000, record=False))
        recorded = median_ms(lambda: s.assemble(record=True), n=5)

        target = docs[0]
        counter = {"n": 0}

        def change_and_assemble() -> None:
            counter["n"] += 1
            new = build_file_doc(target["source"], f"changed {counter['n']}\n".encode() * 500)
            s.store.put([new])
            s.refresh(new["xt/id"])
            t = time.perf_counter()
            s.assemble(strategy=KeepAll(), record=False)
            timings.append(time.perf_counter() - t)

        timings: list[float] = []
        for _ in range(15):
            change_and_assemble()
        reassemble = statistics.median(timings) * 1000

        texts = [d["content"] for d in docs[:200]]
        join = median_ms(lambda: "".join(texts))
        print(f"first assemble (cold caches)      {cold:8.2f} ms")
        print(f"assemble, KeepAll (median)        {warm:8.2f} ms   (target <= 20 ms)")
        print(f"assemble, TokenBudgetLRU          {lru:8.2f} ms")
        print(f"assemble + record to the store    {recorded:8.2f} ms")
        print(f"re-assemble after one file change {reassemble:8.2f} ms   (target <= 5 ms)")
        print(f"baseline: join of the active text {join:8.2f} ms   "
              f"(assemble/join {warm / max(join, 1e-6):.1f}x)")  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
