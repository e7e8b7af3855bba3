"""The live task suite under two strategies with the scripted model; recorded vs replayed dollars.

1. Every task of ``ctxnb/data/live/suite.json`` under ``KeepAll()`` and
   ``ObservationMasking(1)``, in one process: wall time per run (the baseline: one
   scripted run of the sample task, timed in the same process first), solve rate with
   its Wilson interval, mean dollars with a bootstrap interval, and the paired
   comparison.
2. Keep-all replay dollars against each recorded run's bill (``recorded_cost_usd``):
   mini-swe-agent's 50 runs (OpenRouter's per-call cost) and the full Claude Code
   session (its usage at the shipped prices, 1-hour cache writes at 2x input), the
   latter with files as tool output only (``files="pool"``) and over the steps that
   are model calls (a message with parallel tool calls is one call, several steps).
3. Tasks mined from the vendored histories of ``tests/data/tasks/`` (parse and
   inflection, MIT) under keep-all, masking the last output but one, and the same
   masking paired with recall, answered by the scripted model from each task's gold
   patch (``ctxnb.tasks.gold_script``: the fix needs a line of the file it read): solve
   rate with its Wilson interval, dollars and tokens with paired bootstrap intervals,
   re-reads and recalls, the paired comparisons (McNemar, cost difference), the
   provenance. ``--mined-only`` runs this part alone, ``--skip-mined`` leaves it out;
   ``--revs`` limits the commits mined (``HEAD~6..HEAD``).

Needs bubblewrap on PATH (the wheel's: see docs/sandbox.md). Run:
``python bench/live_suite.py [--data tests/data/trajectories]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd


def suite() -> None:
    from ctxnb.live import ScriptedModelServer, run_task, sample_task
    from ctxnb.live.experiment import run_experiment
    from ctxnb.live.run import sample_script
    from ctxnb.live.stats import compare, summarize
    from ctxnb.strategies.builtin import KeepAll, ObservationMasking

    prices = {"ctxnb-scripted": {"input": 1, "cache_write": 1, "cache_read": 0.1, "output": 1}}
    warm = tempfile.mkdtemp()
    with ScriptedModelServer(sample_script()) as server:  # warm up: imports
        run_task(warm, sample_task(warm), prices=prices, **server.model_args)
    root = tempfile.mkdtemp()
    t0 = time.perf_counter()
    with ScriptedModelServer(sample_script()) as server:
        run_task(root, sample_task(root), prices=prices, **server.model_args)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    df = run_experiment(strategies=[KeepAll(), ObservationMasking(1)])
    took = time.perf_counter() - t0
    print(
        f"suite: {len(df)} runs in {took:.1f} s ({took / len(df):.2f} s per run; "
        f"one sample-task run {base:.2f} s, ratio {took / len(df) / base:.2f})"
    )
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(
            summarize(df)[
                [
                    "runs",
                    "solved",
                    "solve_rate",
                    "solve_rate_lo",
                    "solve_rate_hi",
                    "cost_usd",
                    "cost_usd_lo",
                    "cost_usd_hi",
                    "prompt_tokens",
                    "cached_tokens",
                ]
            ]
        )
    print(compare(df, "keep-all", "observation-masking"))


def share(df: pd.DataFrame, part: str, whole: str) -> float:
    return float(df[part].sum() / df[whole].sum())


def dollars(data: Path) -> None:
    from ctxnb.replay import bill_check, run_experiment
    from ctxnb.strategies.builtin import KeepAll

    def mini_runs(**options: Any) -> pd.DataFrame:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every run must have a price
            return run_experiment(
                [data / "mini-swe-agent"],
                [KeepAll()],
                executor=ThreadPoolExecutor(1),
                progress=False,
                **options,
            )

    def cache_share(df: pd.DataFrame) -> tuple[float, float]:
        return (
            share(df, "cache_read_tokens", "total_tokens"),
            share(df, "recorded_cached_tokens", "prompt_tokens"),
        )

    for files in ("active", "pool"):
        mini = mini_runs(files=files)
        rep, rec = mini["cost_usd"].sum(), mini["recorded_cost_usd"].sum()
        modelled, recorded = cache_share(mini)
        print(
            f"mini-swe-agent files={files}: {mini['trajectory'].nunique()} runs, keep-all "
            f"replay ${rep:.2f}, recorded ${rec:.2f}, ratio {rep / rec:.3f}; cache share "
            f"replay {modelled:.3f}, recorded {recorded:.3f}; prompt tokens replay/recorded "
            f"{share(mini, 'total_tokens', 'prompt_tokens'):.3f}"
        )
    # Gemini caches implicitly: model the share its cache served (pool: the agent's view).
    rate = round(recorded / modelled, 3)
    mini = mini_runs(files="pool", cache_hit_rate=rate)
    rep, rec = mini["cost_usd"].sum(), mini["recorded_cost_usd"].sum()
    print(
        f"mini-swe-agent files=pool cache_hit_rate={rate}: replay ${rep:.2f}, recorded "
        f"${rec:.2f}, ratio {rep / rec:.3f}; cache share replay "
        f"{cache_share(mini)[0]:.3f}, recorded {cache_share(mini)[1]:.3f}"
    )
    cc = data / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    for files, ttl in (("active", "auto"), ("pool", "5m"), ("pool", "auto")):
        df = run_experiment(
            [cc],
            [KeepAll()],
            executor=ThreadPoolExecutor(1),
            progress=False,
            files=files,
            hidden_prompt_tokens="auto",
            cache_write_ttl=ttl,  # type: ignore[arg-type]
        )
        calls = df[df["recorded_cost_usd"].notna()]
        check = bill_check(df).loc["all"]
        print(
            f"claude-code files={files} cache_write_ttl={ttl}: all {len(df)} steps "
            f"${df['cost_usd'].sum():.2f}; the {len(calls)} model calls "
            f"${check['replayed_usd']:.2f} vs recorded ${check['recorded_usd']:.2f} "
            f"(ratio {check['ratio']:.3f}); cache share replay "
            f"{share(calls, 'cache_read_tokens', 'total_tokens'):.3f}, recorded "
            f"{share(calls, 'recorded_cached_tokens', 'prompt_tokens'):.3f}; without the "
            f"{int(check['cache_resets'])} calls whose recorded cache reset: "
            f"${check['replayed_usd_without_resets']:.2f} vs "
            f"${check['recorded_usd_without_resets']:.2f} "
            f"(ratio {check['ratio_without_resets']:.3f})"
        )


def mined(revs: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from _tasks import FAST_CMD, clone

    from ctxnb.live.stats import compare, summarize
    from ctxnb.replay.analysis import with_intervals
    from ctxnb.strategies import KeepAll, ObservationMasking, WithRecall
    from ctxnb.tasks import mine_tasks, run_task_experiment

    tmp = Path(tempfile.mkdtemp(prefix="ctxnb-bench-mined-"))
    frames = []
    t0 = time.perf_counter()
    for name in ("parse", "inflection"):
        repo = clone(name, tmp / name)
        report = mine_tasks(
            repo,
            revs=revs,
            python=sys.executable,
            test_cmd=FAST_CMD,
            cache_dir=tmp / f"cache-{name}",
            progress=False,
        )
        print(f"{name}: {len(report.instances)} tasks mined")
        strategies = [KeepAll(), ObservationMasking(1), WithRecall(ObservationMasking(1))]
        frames.append(
            run_task_experiment(report.instances, strategies, repo=repo, python=sys.executable)
        )
    df = pd.concat(frames, ignore_index=True)
    df.attrs = frames[0].attrs
    took = time.perf_counter() - t0
    print(f"mined tasks: {len(df)} runs in {took:.0f} s")
    summary = summarize(df)
    cols = ["runs", "solved", "solve_rate", "cost_usd", "prompt_tokens", "cached_tokens"]
    cols += ["cost_usd_rel", "re_reads", "recalls"]
    table = with_intervals(summary, {"solve_rate": "{:.2f}", "cost_usd": "{:.5f}"})
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table[cols])
    for a, b in [
        ("keep-all", "observation-masking"),
        ("observation-masking", "observation-masking-recall"),
        ("keep-all", "observation-masking-recall"),
    ]:
        c = compare(df, a, b)
        print(
            f"paired ({a} vs {b}): both {c['both']}, only one {c['only_a'] + c['only_b']}, "
            f"neither {c['neither']}, McNemar p = {c['p_mcnemar']:.3g}; cost difference per "
            f"run ${c['cost_diff_usd']:.6f} [{c['cost_diff_lo']:.6f}, {c['cost_diff_hi']:.6f}]"
        )
    prov = df.attrs["ctxnb"]
    print(
        f"ctxnb {prov['ctxnb_version']} at {prov['ctxnb_commit']} (dirty {prov['ctxnb_dirty']}); "
        f"prices of {prov['price_table_as_of']}; {prov['model']}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("tests/data/trajectories"))
    ap.add_argument("--skip-suite", action="store_true")
    ap.add_argument("--skip-dollars", action="store_true")
    ap.add_argument("--skip-mined", action="store_true")
    ap.add_argument("--mined-only", action="store_true")
    ap.add_argument("--revs", default="HEAD", help="the commits to mine (default: all)")
    args = ap.parse_args()
    if args.mined_only:
        mined(args.revs)
        raise SystemExit
    if not args.skip_dollars:
        dollars(args.data)
    if not args.skip_suite:
        suite()
    if not args.skip_mined:
        mined(args.revs)
