"""Peak memory of indexing a large tree: ``ctxnb index``'s work in a fresh process.

The tree is ``--copies`` copies of the running Python's standard library (8 copies:
about 19,400 files, 820 MB). Each run copies it afresh, opens a workspace, indexes it
(``Workspace.index(settle=False)``) and then settles the store (``settle_store()``: the
compaction of every batch into the snapshot), and reports the process's peak RSS after
each step. With ``--baseline-ref REF`` the same is run, in turn, with ctxnb's code at
REF (its ``ctxnb/`` extracted with ``git archive``), on the same tree: the ratio is the
memory after this change against before it, in one run.

Usage: python bench/index_memory.py [--copies 8] [--repeat 1] [--baseline-ref main]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import copy_corpus, corpus_stats  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
import ctxnb
from ctxnb import Workspace
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
ws = Workspace.open(sys.argv[1])
rep = ws.index(progress=False, settle=False)
index_mb, index_s = peak(), time.perf_counter() - t
ws.settle_store()
print(json.dumps({"files": rep.files, "created": rep.created, "batches": len(rep.transactions),
                  "index_mb": index_mb, "total_mb": peak(), "index_s": index_s,
                  "total_s": time.perf_counter() - t, "code": ctxnb.__file__}))
"""


def run(tree: Path, work: Path, code: Path | None) -> dict[str, Any]:
    """Index a fresh copy of ``tree`` in a child process (ctxnb from ``code`` if given)."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(tree, work, symlinks=True)
    time.sleep(2.1)  # past the racy-clean window of the stat cache, as a real tree is
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(work)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=code or REPO,
    ).stdout
    shutil.rmtree(work, ignore_errors=True)
    res = dict(json.loads(out.strip().splitlines()[-1]))
    # The baseline's code must be the one that ran, not this checkout's.
    assert code is None or res["code"].startswith(str(code)), res["code"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline-ref", default=None, help="ctxnb's code to compare with")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-indexmem-"))
    try:
        tree = base / "tree"
        for i in range(args.copies):
            copy_corpus(tree / f"c{i}")
        files, size = corpus_stats(tree)
        print(f"tree: {files} files, {size / 1e6:.0f} MB ({args.copies} copies of the stdlib)")
        code = None
        if args.baseline_ref:
            code = base / "baseline"
            code.mkdir()
            archive = subprocess.run(
                ["git", "archive", args.baseline_ref, "ctxnb"],
                cwd=REPO,
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
        rows: list[tuple[str, dict[str, Any]]] = []
        for _ in range(args.repeat):
            rows.append(("this", run(tree, base / "work", None)))
            if code is not None:
                rows.append((args.baseline_ref, run(tree, base / "work", code)))
        for name, r in rows:
            print(
                f"{name:>12}: {r['files']:.0f} files in {r['batches']:.0f} batches; peak RSS "
                f"after the index {r['index_mb']:7.1f} MB ({r['index_s']:.1f} s), after the "
                f"compaction {r['total_mb']:7.1f} MB ({r['total_s']:.1f} s)"
            )
        mine = max(r["total_mb"] for n, r in rows if n == "this")
        print(f"peak RSS {mine:.1f} MB (target <= 300 MB)")
        if code is not None:
            theirs = max(r["total_mb"] for n, r in rows if n != "this")
            print(f"against {args.baseline_ref}: {theirs:.1f} MB, ratio {mine / theirs:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
