"""The ``ctxnb`` command as a user meets it: a fresh process, against a baseline in the same run.

- ``ctxnb --help`` vs ``python -c pass`` (target ≤ 2x): what parsing and dispatch cost
  before any command runs;
- ``ctxnb index`` of the standard-library corpus (about 2,450 files) with nothing changed
  vs ``git status --porcelain`` of the same tree (target ≤ 10x).

Each pair runs in turn (A B A B …) after a warm-up, so load on a shared machine falls on
both alike; the ratio is taken pair by pair and its median printed. Wall time and CPU time
(user + sys of the child, from the kernel's accounting) are both printed: on a loaded
machine the wall ratio drifts with the scheduler, the CPU ratio much less.

Usage: python bench/cli.py [--repeat N]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import copy_corpus, corpus_stats, git_env  # noqa: E402

TARGET_HELP = 2.0
TARGET_INDEX = 10.0


def _once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of argv as its own process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _pair(
    label: str,
    a: list[str],
    b: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    runs: int,
    target: float,
    base_label: str,
) -> None:
    _once(a, cwd, env), _once(b, cwd, env)  # warm-up: bytecode, the page cache
    rows: list[tuple[tuple[float, float], tuple[float, float]]] = []
    for _ in range(runs):
        rows.append((_once(a, cwd, env), _once(b, cwd, env)))
    med = statistics.median
    a_wall, b_wall = med(r[0][0] for r in rows), med(r[1][0] for r in rows)
    a_cpu, b_cpu = med(r[0][1] for r in rows), med(r[1][1] for r in rows)
    wall_ratio = med(r[0][0] / r[1][0] for r in rows)
    cpu_ratio = med(r[0][1] / max(r[1][1], 1e-3) for r in rows)
    verdict = "meets" if wall_ratio <= target else "misses"
    print(f"{label} vs {base_label} ({runs} pairs, medians)")
    print(f"    wall: {a_wall * 1e3:8.1f} ms vs {b_wall * 1e3:7.1f} ms  {wall_ratio:6.2f}x", end="")
    print(f"  ({verdict} <= {target:g}x)")
    print(f"    cpu:  {a_cpu * 1e3:8.1f} ms vs {b_cpu * 1e3:7.1f} ms  {cpu_ratio:6.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="pairs of runs per figure")
    args = ap.parse_args()
    ctxnb = Path(sys.executable).parent / "ctxnb"
    if not ctxnb.exists():
        raise SystemExit(f"no console script at {ctxnb}; install ctxnb (make test installs it)")
    env = git_env()
    # Bytecode for every module first: with PYTHONDONTWRITEBYTECODE set (or a read-only
    # tree) a changed module would otherwise be compiled again in every timed process.
    import ctxnb as package

    compileall.compile_dir(Path(package.__file__).parent, quiet=1)
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-cli-"))
    try:
        root = copy_corpus(base / "stdlib")
        files, size = corpus_stats(root)
        print(f"corpus: {files} files, {size / 1e6:.1f} MB (the standard library)")
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
            subprocess.run(["git", *cmd], cwd=root, env=env, check=True, capture_output=True)
        # The first index stores every file; the figure is the one after, with none changed.
        subprocess.run(
            [str(ctxnb), "index", "--no-progress"],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        )
        python = [sys.executable, "-c", "pass"]
        _pair(
            "ctxnb --help",
            [str(ctxnb), "--help"],
            python,
            cwd=root,
            env=env,
            runs=args.repeat,
            target=TARGET_HELP,
            base_label="python -c pass",
        )
        _pair(
            "ctxnb index (unchanged)",
            [str(ctxnb), "index", "--no-progress"],
            ["git", "status", "--porcelain"],
            cwd=root,
            env=env,
            runs=args.repeat,
            target=TARGET_INDEX,
            base_label="git status --porcelain",
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
