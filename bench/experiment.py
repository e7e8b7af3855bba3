"""50 real runs × 8 strategies: one process against a 2-worker dask LocalCluster; cache and cost.

Data: ``tests/data/trajectories/mini-swe-agent`` (50 SWE-bench Verified runs of
mini-swe-agent with Gemini 3 Pro; every step records the provider's ``prompt_tokens``).

What it measures, in one run of this script:

1. The grid: every run × 8 strategies (the six defaults, ``BlockMasking(5, 10)`` and
   ``Summarize(5)``), the context assembled at every step,
   - in one process (``ThreadPoolExecutor(1)``: the baseline),
   - on a ``dask.distributed.LocalCluster`` of 2 worker processes (started before the
     clock starts), and
   - on ctxnb's default local process pool;
   wall time of each and its ratio to the one-process baseline (target: ≤ 30 s on 2
   cores). The three frames must be equal, and the cluster's Parquet identical.
2. Prompt-cache reuse per strategy: the share of prompt tokens each step shares with the
   previous step's prompt (``cache_read_tokens / total_tokens``), from step 1 on.
3. Dollars per strategy with and without prompt caching, at the run's model prices
   (Gemini 3 Pro preview in the shipped table), relative to keep-all.

Run: ``python bench/experiment.py [--data DIR] [--skip-pool]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / "tests" / "data" / "trajectories" / "mini-swe-agent"


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    import pandas as pd

    from ctxnb.replay.analysis import summarize
    from ctxnb.replay.experiment import expand_paths, run_experiment
    from ctxnb.replay.runner import default_strategies
    from ctxnb.strategies.builtin import BlockMasking, Summarize

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--skip-pool", action="store_true", help="skip the default process pool")
    ns = ap.parse_args()
    runs = expand_paths([ns.data])
    strategies = [*default_strategies(), BlockMasking(5, 10), Summarize(5)]
    print(f"{len(runs)} runs × {len(strategies)} strategies; load average {os.getloadavg()}")

    def key(df: pd.DataFrame) -> pd.DataFrame:
        return df.sort_values(["trajectory", "strategy", "step"]).reset_index(drop=True)

    def differences(a: pd.DataFrame, b: pd.DataFrame) -> str:
        a, b = key(a), key(b)
        cols = [c for c in a.columns if not a[c].equals(b[c])]
        if not cols:
            return "none (identical frames)"
        c = cols[0]
        bad = a[c].astype(str) != b[c].astype(str)
        where = a.loc[bad, ["trajectory", "strategy", "step"]].head(2).values.tolist()
        return f"columns {cols}; first at {where}: {a.loc[bad, c].head(2).tolist()} vs " + str(
            b.loc[bad, c].head(2).tolist()
        )

    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(1) as ex:
        base = run_experiment(runs, strategies, executor=ex, progress=False)
    one, one_cpu = time.perf_counter() - t0, time.process_time() - c0
    contexts = len(base)
    print(
        f"one process (baseline): {one:.1f} s wall, {one_cpu:.1f} s CPU, {contexts} contexts, "
        f"{contexts / one_cpu:,.0f} per CPU-second"
    )

    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as out:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            before = client.run(_cpu)
            t0 = time.perf_counter()
            dist = run_experiment(runs, strategies, executor=client, out_dir=out, progress=False)
            cl = time.perf_counter() - t0
            after = client.run(_cpu)
            cl_cpu = sum(after[w] - before[w] for w in after)
        import pyarrow.dataset as ds

        parquet = ds.dataset(out, format="parquet", partitioning="hive").to_table().to_pandas()
    same = differences(base, dist)
    print(
        f"dask LocalCluster, 2 worker processes: {cl:.1f} s wall ({one / cl:.2f}× the "
        f"one-process speed; target ≤ 30 s), {cl_cpu:.1f} s CPU in the workers; same frame: "
        f"differences from one process: {same}; Parquet rows {len(parquet)}"
    )
    if not ns.skip_pool:
        t0 = time.perf_counter()
        pool = run_experiment(runs, strategies, progress=False)
        pt = time.perf_counter() - t0
        print(
            f"default process pool (spawned, one worker per CPU): {pt:.1f} s "
            f"({one / pt:.2f}×); differences: {differences(base, pool)}"
        )

    later = base[base["step"] > 0]
    g = later.groupby("strategy", sort=False)
    reuse = (g["cache_read_tokens"].sum() / g["total_tokens"].sum()).rename("prefix_reuse")
    per_step = later.assign(r=later["cache_read_tokens"] / later["total_tokens"])
    median = per_step.groupby("strategy", sort=False)["r"].median().rename("median_step_reuse")
    s = summarize(base)
    table = pd.concat(
        [
            reuse.round(3),
            median.round(3),
            s["total_tokens"],
            s["tokens_rel"].round(3),
            s["cost_usd"].round(2),
            s["cost_usd_uncached"].round(2),
            s["cost_usd_rel"].round(3),
        ],
        axis=1,
    )
    with pd.option_context("display.width", 160):
        print(table.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
