"""Index the Python standard library: ctxnb's index_tree vs git, in the same run.

Prints the medians and the ratios:
- cold ``index_tree`` vs ``git init && git add -A`` of the same copy (target ≤ 0.25x),
  with the peak RSS of the indexing process (target ≤ 300 MB);
- re-index with nothing changed (in-process) vs ``git status --porcelain`` (target ≤ 1.5x);
- the ``compact()`` that would follow (not part of the cold figure: ``ws.index()``
  compacts only once 32 transactions wait), so the deferred work is visible too.

Usage: python bench/index.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import copy_corpus, corpus_stats, git_env  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from ctxnb import Workspace
root = sys.argv[1]
t = time.perf_counter()
ws = Workspace.open(root)
rep = ws.index(progress=False)
cold = time.perf_counter() - t
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
warm = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    again = ws.index(progress=False)
    warm.append(time.perf_counter() - t)
    assert again.created == again.updated == again.deleted == 0, again
t = time.perf_counter()
ws.store.compact()
compact = time.perf_counter() - t
print(json.dumps({"compact": compact, "cold": cold, "peak_mb": peak_mb, "warm": warm,
                  "files": rep.files, "created": rep.created, "hashed_warm": again.hashed}))
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-index-"))
    try:
        src = copy_corpus(base / "src")
        files, size = corpus_stats(src)
        print(f"corpus: {files} files, {size / 1e6:.0f} MB (stdlib of {sys.version.split()[0]})")
        # Let the copy's timestamps age past the racy-clean window, as a real tree's are.
        time.sleep(2.5)
        cold, gitadd, peaks, warm, gitstatus, compacts = [], [], [], [], [], []
        env = git_env()
        for i in range(args.repeat):
            g = base / f"git{i}"
            shutil.copytree(src, g, symlinks=True)
            t = time.perf_counter()
            subprocess.run(["git", "init", "-q"], cwd=g, check=True, env=env)
            subprocess.run(["git", "add", "-A"], cwd=g, check=True, env=env)
            gitadd.append(time.perf_counter() - t)
            for _ in range(5):
                t = time.perf_counter()
                subprocess.run(["git", "status", "--porcelain"], cwd=g, check=True,
                               capture_output=True, env=env)  # fmt: skip
                gitstatus.append(time.perf_counter() - t)
            shutil.rmtree(g)

            c = base / f"ctx{i}"
            shutil.copytree(src, c, symlinks=True)
            time.sleep(2.1)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(c), "5"], check=True, capture_output=True,
                text=True,
            ).stdout  # fmt: skip
            r = json.loads(out)
            cold.append(r["cold"])
            compacts.append(r["compact"])
            peaks.append(r["peak_mb"])
            warm.extend(r["warm"])
            shutil.rmtree(c)
        mc, mg = statistics.median(cold), statistics.median(gitadd)
        mw, ms = statistics.median(warm), statistics.median(gitstatus)
        print(f"cold index_tree          median {mc * 1000:8.1f} ms  ({r['created']} created)")
        print(f"git init && git add -A   median {mg * 1000:8.1f} ms")
        print(f"  ratio {mc / mg:.2f}x  (target <= 0.25x)")
        print(f"then compact()           median {statistics.median(compacts) * 1000:8.1f} ms")
        print(f"peak RSS of indexing     {max(peaks):8.1f} MB  (target <= 300 MB)")
        hashed = r["hashed_warm"]
        print(f"re-index, nothing changed median {mw * 1000:7.1f} ms  (files hashed: {hashed})")
        print(f"git status --porcelain   median {ms * 1000:8.1f} ms")
        print(f"  ratio {mw / ms:.2f}x  (target <= 1.5x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
