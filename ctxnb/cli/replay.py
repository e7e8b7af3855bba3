"""The ``ctxnb replay`` command: a strategy experiment from the command line.

The table it prints fits a 100-column terminal: the columns a comparison reads first,
under short names (:data:`NARROW`); ``--wide`` prints every column of
:func:`~ctxnb.replay.analysis.summarize` under its own name. Runs with no price (their
model is not in ctxnb's price table and no ``--price`` was given) are said on stderr: the
dollars shown count the priced runs only, never an unpriced one as $0.

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

#: The narrow table's columns: summarize()'s name → the header shown (``--wide``: all).
NARROW = {
    "steps": "steps",
    "mean_tokens": "mean_tok",
    "peak_tokens": "peak_tok",
    "re_reads": "re_reads",
    "stale_reads": "stale",
    "cache_read_share": "cached",
    "cost_usd_priced": "cost_usd",
    "tokens_rel": "tokens_rel",
}
WIDTH = 100


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
@arg("--wide", action="store_true", help="print every column of the summary (about 280 wide)")
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
    _warn_unpriced(summary)
    if ns.wide:
        with pd.option_context("display.width", 400, "display.max_columns", 40):
            _out(summary.to_string(float_format=lambda v: f"{v:.3f}"))
    else:
        shown = dict(NARROW)
        if "cost" in summary.columns:  # --price: the flat-rate dollars of every run
            del shown["re_reads"]
            shown["cost"] = "cost_flat"
        narrow = summary[[c for c in shown if c in summary.columns]].rename(columns=shown)
        runs = int(summary["runs"].max()) if "runs" in summary and len(summary) else 0
        _out(f"{runs} run(s) per strategy; `--wide` for every column")
        _out(narrow.to_string(float_format=lambda v: f"{v:.3f}", line_width=WIDTH))
    if ns.out:
        _out(f"wrote {len(df)} rows to {ns.out} (partitioned by strategy)")
    return 0


def _warn_unpriced(summary: object) -> None:
    """Say on stderr when some runs have no price: their dollars are unknown, not $0."""
    unpriced = getattr(summary, "get", lambda _k: None)("unpriced_runs")
    if unpriced is None or not len(unpriced) or int(unpriced.max()) == 0:
        return
    n, runs = int(unpriced.max()), int(summary["runs"].max())  # type: ignore[index]
    import textwrap

    text = (
        f"ctxnb replay: warning: {n} of {runs} run(s) have no price (their model is not in "
        "ctxnb's price table): cost_usd counts the priced runs only (never an unpriced one "
        "as $0); --price DOLLARS_PER_MTOK adds a flat-rate cost of every run"
    )
    sys.stderr.write(textwrap.fill(text, WIDTH, subsequent_indent="  ") + "\n")
