"""Replay all 50 real mini-swe-agent runs under six context strategies; print the figures.

Data: ``tests/data/trajectories/mini-swe-agent`` (vendored; 50
SWE-bench Verified runs of mini-swe-agent with Gemini 3 Pro; each step records the
provider's ``prompt_tokens``).

What it measures:

1. The grid: every run × the six default strategies, the context assembled at every
   step, on a local process pool (``--workers``, default one per CPU). Wall time,
   steps per second (replayed steps × strategies / wall time) and peak memory: the
   resident-set peak of this process and of the largest worker
   (``resource.getrusage`` ``RUSAGE_SELF`` and ``RUSAGE_CHILDREN``), and their sum
   over the pool as an upper bound. Targets: ≤ 60 s on 2 cores, ≤ 2 GB.
2. Fidelity: the keep-all replay with files in the metadata pool (the agent's message
   history) against the recorded prompt sizes: Pearson correlation, median ratio raw
   and calibrated (``ctxnb.replay.fidelity``). The same figures for the default
   replay (files shown in full as objects) are printed for comparison.
3. Per-strategy token totals (and peaks, re-reads, stale reads) relative to keep-all.

Run: ``python bench/replay.py [--data DIR] [--workers N] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / "tests" / "data" / "trajectories" / "mini-swe-agent"


def _mb(kb: int) -> float:
    # ru_maxrss is in kilobytes on Linux (bytes on macOS).
    return kb / 1024 if sys.platform != "darwin" else kb / 1024 / 1024


def main() -> int:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    import pandas as pd

    from ctxnb.replay.analysis import summarize
    from ctxnb.replay.experiment import expand_paths, run_experiment
    from ctxnb.replay.fidelity import fidelity_from_frame
    from ctxnb.strategies.builtin import KeepAll

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=None, help="also write the Parquet results")
    ns = ap.parse_args()

    paths = expand_paths([ns.data])
    print(f"{len(paths)} runs from {ns.data}; {ns.workers} workers, {os.cpu_count()} CPUs")

    t0 = time.perf_counter()
    with ProcessPoolExecutor(ns.workers, mp_context=get_context("spawn")) as pool:
        df = run_experiment(paths, executor=pool, out_dir=ns.out, progress=False)
        wall = time.perf_counter() - t0
        strategies = df["strategy"].nunique()
        steps = len(df) // strategies
        self_mb = _mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        # Workers are still alive here, so RUSAGE_CHILDREN does not cover them yet.
    child_mb = _mb(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print("\n== grid ==")
    print(f"steps replayed      {steps} ({len(df)} rows, {strategies} strategies)")
    print(f"wall time           {wall:.1f} s (target <= 60 s on 2 cores)")
    print(f"assemblies/s        {len(df) / wall:.0f} ({steps / wall:.1f} replayed steps/s)")
    print(
        f"peak memory         this process {self_mb:.0f} MB, largest worker {child_mb:.0f} MB, "
        f"upper bound {self_mb + ns.workers * child_mb:.0f} MB (target <= 2048 MB)"
    )

    t1 = time.perf_counter()
    with ProcessPoolExecutor(ns.workers, mp_context=get_context("spawn")) as pool:
        fid_df = run_experiment(paths, [KeepAll()], executor=pool, progress=False, files="pool")
    fid = fidelity_from_frame(fid_df)
    active = fidelity_from_frame(df)
    print(
        f"\n== fidelity (keep-all vs recorded prompt_tokens; {time.perf_counter() - t1:.1f} s) =="
    )
    for label, r in (("messages (files in pool)", fid), ("files as objects", active)):
        print(
            f"{label:<26} pearson {r.pearson:.4f} (per-run median {r.pearson_per_run_median:.4f}), "
            f"median ratio raw {r.median_ratio_raw:.3f}, "
            f"calibrated {r.median_ratio_calibrated:.3f} "
            f"[recorded = {r.scale:.3f} x ctxnb + {r.intercept:.0f}; "
            f"median abs error {100 * r.median_abs_error_calibrated:.1f}%], "
            f"scale only {r.median_ratio_scale_only:.3f} (x{r.scale_only:.3f})"
        )

    print("\n== per strategy, relative to keep-all ==")
    s = summarize(df)
    cols = [
        "total_tokens",
        "tokens_rel",
        "peak_tokens",
        "peak_rel",
        "re_reads",
        "stale_reads",
        "stale_reads_rel",
    ]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(s[cols].to_string(float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
