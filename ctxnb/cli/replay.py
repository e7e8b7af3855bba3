"""The ``ctxnb replay`` command: a strategy experiment from the command line.

Example:
    ``ctxnb replay data/trajectories --strategy keep-all --strategy observation-masking:5
    --out results --workers 2`` prints one row per strategy and writes
    ``results/strategy=…/part-0.parquet``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .app import _out, arg, command

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__: list[str] = []


def _strategy(spec: str) -> object:
    # Imported when a --strategy is parsed: `ctxnb --help` lists this command without it.
    from ..strategies.registry import parse_strategy

    try:
        return parse_strategy(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _specs() -> list[str]:
    from ..strategies.registry import STRATEGY_SPECS

    return list(STRATEGY_SPECS.values())


@command("replay", help="replay agent trajectories under context strategies and compare them")
@arg("paths", nargs="+", metavar="PATH", help="trajectory files, or directories of them")
@arg(
    "--strategy",
    dest="strategies",
    action="append",
    type=_strategy,
    metavar="SPEC",
    help=lambda: "a strategy, repeatable: " + "; ".join(_specs()) + " (default: six)",
)
@arg("--budget", type=int, default=None, help="total token budget per context")
@arg("--out", default=None, help="write the per-step results here as Parquet")
@arg("--workers", type=int, default=None, help="worker processes (default: one per CPU)")
@arg("--price", type=float, default=None, help="dollars per million input tokens")
@arg("--no-progress", action="store_true", help="never show a progress bar")
def _cmd_replay(ns: argparse.Namespace) -> int:
    import multiprocessing
    import warnings
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    import pandas as pd

    from ..replay.analysis import summarize
    from ..replay.experiment import DuplicateRunWarning, run_experiment

    executor: Executor | None = None
    if ns.workers is not None:
        if ns.workers < 1:
            raise SystemExit("ctxnb replay: error: --workers must be at least 1")
        # One worker needs no second process.
        executor = (
            ThreadPoolExecutor(max_workers=1)
            if ns.workers == 1
            else ProcessPoolExecutor(
                max_workers=ns.workers, mp_context=multiprocessing.get_context("spawn")
            )
        )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DuplicateRunWarning)
            df = run_experiment(
                ns.paths,
                ns.strategies,
                budget=ns.budget,
                executor=executor,
                out_dir=ns.out,
                progress=False if ns.no_progress else None,
            )
    finally:
        if executor is not None:
            executor.shutdown()
    for w in caught:
        if issubclass(w.category, DuplicateRunWarning):
            sys.stderr.write(f"ctxnb replay: warning: {w.message}\n")
        else:  # not ours to word: hand it on as it came
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    summary = summarize(df, {"input_per_mtok": ns.price} if ns.price is not None else None)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        _out(summary.to_string(float_format=lambda v: f"{v:.3f}"))
    if ns.out:
        _out(f"wrote {len(df)} rows to {ns.out} (partitioned by strategy)")
    return 0
