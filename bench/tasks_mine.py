"""Benchmark task mining and grading on a real history (data/tasks/parse.bundle).

(a) Mining one commit (parse's fix #221: two sides, two rounds each, confined) with an
empty cache, against mining it again from the cache, in the same run: the seconds of
each and the ratio.

(b) One confined round of the task's test file (a fresh copy, the test patch's files
written over it, bubblewrap) against the same pytest command run unconfined in a copy of
the tree, interleaved in the same run: the medians, the added seconds and the ratio.

Run with::

    python bench/tasks_mine.py [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _tasks import FAST_CMD, clone  # noqa: E402

from ctxnb.tasks import mine_tasks
from ctxnb.tasks._git import export_tree
from ctxnb.tasks.testrun import run_tests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ctxnb-bench-tasks-"))
    try:
        repo = clone("parse", tmp / "parse")
        args = dict(revs="HEAD~2..HEAD", python=sys.executable, test_cmd=FAST_CMD, progress=False)
        cold, warm = [], []
        for r in range(ns.runs):
            cache = tmp / f"cache-{r}"
            t0 = time.perf_counter()
            first = mine_tasks(repo, cache_dir=cache, **args)
            t1 = time.perf_counter()
            again = mine_tasks(repo, cache_dir=cache, **args)
            t2 = time.perf_counter()
            assert first.rounds_run == 2 and again.rounds_run == 0
            assert first.instances == again.instances
            cold.append(t1 - t0)
            warm.append(t2 - t1)
        c, w = statistics.median(cold), statistics.median(warm)
        print(
            f"(a) mining 1 task (2 sides x 2 rounds): {c:.2f} s fresh, {w:.3f} s cached, "
            f"{c / w:.0f}x"
        )
        inst = first.instances[0]
        tree = export_tree(repo, inst.base_commit, tmp / "tree")
        test_file = "tests/test_parse.py"
        files = {test_file: (repo / test_file).read_bytes()}
        command = FAST_CMD.format(python=sys.executable, tests=test_file)
        confined, plain = [], []
        for r in range(ns.runs):
            t0 = time.perf_counter()
            run = run_tests(
                tree, [test_file], python=sys.executable, files=files, test_cmd=FAST_CMD
            )
            t1 = time.perf_counter()
            work = tmp / f"plain-{r}"
            shutil.copytree(tree, work)
            (work / test_file).write_bytes(files[test_file])
            subprocess.run(command, shell=True, cwd=work, capture_output=True)
            t2 = time.perf_counter()
            assert run.complete
            confined.append(t1 - t0)
            plain.append(t2 - t1)
        a, b = statistics.median(confined), statistics.median(plain)
        print(
            f"(b) one round of {test_file}: confined {a:.2f} s, unconfined {b:.2f} s "
            f"(copy + pytest), +{a - b:.2f} s, {a / b:.2f}x"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
