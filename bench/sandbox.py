"""Benchmark the sandbox: start-up cost of a confined command, and change detection.

(a) Start-up: ``true`` run by :class:`ctxnb.sandbox.Sandbox` (plan with the deny-list
walk, the stat snapshots before and after, bubblewrap with its namespaces, prlimit, sh)
against ``sh -c true`` run by the same process runner, unconfined, in the same run,
interleaved; the median of each, the added milliseconds and the ratio. On the sample
workspace with an intent that owns ``inventory/**``.

(b) Change detection: after a command, the stat snapshot of a 2,450-file writable scope
and its comparison with the one from before (what ``Sandbox.run`` does after every
command) against ``git status --porcelain`` on the same tree (git's own stat-based
check, with a fresh index), in the same run; one file changed between the snapshots.

Targets: (a) added start-up <= 15 ms; (b) detection <= 20 ms.

Run with::

    python bench/sandbox.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ctxnb.samples import copy_sample_workspace
from ctxnb.sandbox import Sandbox, check_bwrap, diff_snapshots, run_command, take_snapshot
from ctxnb.sandbox.plan import bwrap_argv

TARGET_ADDED_MS = 15.0
TARGET_DETECT_MS = 20.0
SCOPE_FILES = 2450


def _median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def bench_startup(runs: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_sample_workspace(Path(tmp))
        sb = Sandbox(root, owned_scope=["inventory/**"])
        sb.run("true")  # probe bwrap once, as a long-lived process has
        raw_argv = bwrap_argv(sb.plan(), ["true"], cwd=root, bwrap=check_bwrap())
        boxed, bare, raw = [], [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            r = run_command(["sh", "-c", "true"], cwd=root)
            bare.append(time.perf_counter() - t0)
            assert r.returncode == 0
            t0 = time.perf_counter()
            res = sb.run("true")
            boxed.append(time.perf_counter() - t0)
            assert res.result.returncode == 0, res.result.stderr
            t0 = time.perf_counter()
            r = run_command(raw_argv, cwd=root)  # bubblewrap alone, same mounts
            raw.append(time.perf_counter() - t0)
            assert r.returncode == 0, r.stderr
    return _median_ms(boxed), _median_ms(bare), _median_ms(raw)


def _make_scope(root: Path) -> None:
    # 2,450 files in 49 directories of 50, like a mid-sized source tree.
    for d in range(SCOPE_FILES // 50):
        sub = root / "src" / f"pkg{d:02d}"
        sub.mkdir(parents=True)
        for f in range(50):
            (sub / f"mod{f:02d}.py").write_text(f"x = {d * 50 + f}\n")


def bench_detection(runs: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _make_scope(root)
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@b.invalid"]
        subprocess.run([*git, "init", "-q"], cwd=root, check=True, env=env)
        subprocess.run([*git, "add", "-A"], cwd=root, check=True, env=env)
        subprocess.run([*git, "commit", "-qm", "x"], cwd=root, check=True, env=env)
        subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True, env=env)
        target = root / "src" / "pkg07" / "mod07.py"
        ours, gits = [], []
        found = 0
        for i in range(runs):
            before = take_snapshot(root, ["src"])
            time.sleep(0.002)  # the command runs here
            target.write_text(f"x = {i}\n")
            t0 = time.perf_counter()
            changes = diff_snapshots(before, take_snapshot(root, ["src"]))
            ours.append(time.perf_counter() - t0)
            found = len(changes)
            assert [c.path for c in changes] == ["src/pkg07/mod07.py"], changes
            t0 = time.perf_counter()
            subprocess.run(
                ["git", "status", "--porcelain"], cwd=root, check=True, env=env, capture_output=True
            )
            gits.append(time.perf_counter() - t0)
    return _median_ms(ours), _median_ms(gits), found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=40)
    ns = ap.parse_args()

    boxed, bare, raw = bench_startup(ns.runs)
    added = boxed - bare
    print("(a) start-up of a confined command (median of", ns.runs, "runs)")
    print(f"    Sandbox.run('true'):        {boxed:7.2f} ms")
    print(f"      of which bwrap alone:     {raw:7.2f} ms (namespaces, mounts, prlimit, sh)")
    print(f"    sh -c true (baseline):      {bare:7.2f} ms")
    verdict = "met" if added <= TARGET_ADDED_MS else "MISSED"
    print(
        f"    added: {added:.2f} ms, ratio {boxed / bare:.1f}x "
        f"(target added <= {TARGET_ADDED_MS:.0f} ms: {verdict})"
    )
    print(f"    load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    ours, gits, _ = bench_detection(ns.runs)
    print(f"(b) change detection in a {SCOPE_FILES:,}-file scope (median of {ns.runs} runs)")
    print(f"    snapshot + diff:            {ours:7.2f} ms")
    print(f"    git status (baseline):      {gits:7.2f} ms")
    print(
        f"    ratio {ours / gits:.2f}x (target <= {TARGET_DETECT_MS:.0f} ms: "
        f"{'met' if ours <= TARGET_DETECT_MS else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
