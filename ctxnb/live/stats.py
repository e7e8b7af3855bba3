"""Solve rates and costs with 95% confidence, and paired comparisons of strategies.

- a solve rate's interval is Wilson's score interval (good at small n and at 0% or
  100%, where the normal approximation gives nonsense);
- a mean cost's interval is a percentile bootstrap over runs (costs are skewed);
- two strategies run on the same tasks are compared pairwise: McNemar's exact test on
  the tasks one solved and the other did not, and a paired bootstrap of the cost
  difference (a pairing removes the task-to-task spread that dwarfs most effects).

Example:
    >>> lo, hi = wilson(19, 22)
    >>> round(lo, 3), round(hi, 3)
    (0.667, 0.953)
    >>> mcnemar_exact(0, 5) < 0.07
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._util.intervals import LEVEL, RESAMPLES, SEED

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["bootstrap_mean_ci", "compare", "mcnemar_exact", "summarize", "wilson"]

_Z95 = 1.959963984540054


def wilson(k: int, n: int, *, z: float = _Z95) -> tuple[float, float]:
    """Wilson's score interval for ``k`` successes in ``n`` trials (NaN for n = 0)."""
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_mean_ci(
    values: Sequence[float], *, resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded: the same numbers every run).

    NaN when there are no values or any is NaN (an unpriced run is not $0).
    """
    import numpy as np

    x = np.asarray(values, dtype=float)
    if not len(x) or np.isnan(x).any():
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return (float(lo), float(hi))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (1.0 when there are none)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def summarize(
    df: pd.DataFrame,
    *,
    baseline: str = "keep-all",
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """One row per strategy: solve rate and mean cost per run, each with a 95% interval.

    Args:
        df: a frame of :func:`~ctxnb.live.experiment.run_experiment`.
        baseline: the strategy the ``*_rel`` columns divide by.
        resamples: bootstrap resamples of the intervals.
        seed: the bootstrap's seed.
        level: the bootstrap intervals' level (Wilson's is 95%).

    Returns:
        Indexed by strategy: ``runs``, ``tasks``, ``solved``, ``solve_rate``,
        ``solve_rate_lo``/``_hi`` (Wilson), ``tests_tampered`` (runs), ``steps`` (mean),
        ``prompt_tokens`` and ``cached_tokens`` (totals), ``cost_usd`` (mean per run;
        NaN when any run is unpriced), ``cost_usd_lo``/``_hi`` (bootstrap),
        ``unpriced_runs``, ``re_reads`` and ``recalls`` (totals, when the runs have
        them); ``prompt_tokens_rel`` and ``cost_usd_rel``, the strategy's
        totals over the baseline's. ``steps``, ``prompt_tokens``, ``cached_tokens``,
        ``cost_usd`` and the ``*_rel`` ratios have ``_lo``/``_hi`` columns: a
        bootstrap over runs, each resample drawing the same (task, repeat) pairs for
        every strategy, so a ratio is paired. ``attrs["intervals"]`` records the
        method, level, resamples, seed and number of runs.
    """
    import pandas as pd

    rows = {}
    for name, g in df.groupby(df["strategy"].astype(str), sort=False):
        solved = int(g["solved"].sum())
        lo, hi = wilson(solved, len(g))
        cost = g["cost_usd"].astype(float)
        clo, chi = bootstrap_mean_ci(cost.tolist(), resamples=resamples, seed=seed, level=level)
        rows[name] = {
            "runs": len(g),
            "tasks": g["task"].nunique(),
            "solved": solved,
            "solve_rate": solved / len(g) if len(g) else math.nan,
            "solve_rate_lo": lo,
            "solve_rate_hi": hi,
            "tests_tampered": int(g["tests_tampered"].sum()),
            "steps": float(g["steps"].mean()),
            "prompt_tokens": int(g["prompt_tokens"].sum()),
            "cached_tokens": int(g["cached_tokens"].sum()),
            "cost_usd": float(cost.mean(skipna=False)) if len(g) else math.nan,
            "cost_usd_lo": clo,
            "cost_usd_hi": chi,
            "unpriced_runs": int(cost.isna().sum()),
        }
        # Frames made before these columns existed are summarized as they were.
        for col in ("re_reads", "recalls"):
            if col in g:
                rows[name][col] = int(g[col].sum())
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "strategy"
    return _add_intervals(df, out, baseline, resamples, seed, level)


def _add_intervals(
    df: pd.DataFrame, out: pd.DataFrame, baseline: str, resamples: int, seed: int, level: float
) -> pd.DataFrame:
    """``_lo``/``_hi`` columns and the ``*_rel`` ratios of :func:`summarize`'s table."""
    import numpy as np

    from .._util.intervals import interval_attrs, percentile_interval, run_weights

    # The resampling unit is a (task, repeat): every strategy ran it, so one draw of
    # units resamples all strategies alike, and a ratio to the baseline is paired.
    unit = df["task"].astype(str) + "\x00" + df["repeat"].astype(str)
    units = list(dict.fromkeys(unit))
    strategy = df["strategy"].astype(str)

    def wide(col: str) -> np.ndarray:
        # strategy x unit; NaN where a strategy lacks the unit, or the value is NaN.
        t = df[col].astype(float).groupby([strategy, unit], sort=False).sum(min_count=1)
        return t.unstack().reindex(index=out.index, columns=units).to_numpy(dtype=float)

    w = run_weights(len(units), resamples=resamples, seed=seed).astype(float)
    ran = np.isfinite(wide("steps"))
    count = w @ ran.T.astype(float)  # runs of each strategy in each resample
    totals: dict[str, np.ndarray] = {}
    for col in ("steps", "prompt_tokens", "cached_tokens", "cost_usd"):
        x = wide(col)
        # A run that did not happen adds nothing; an unpriced one keeps the total NaN.
        totals[col] = w @ np.where(ran, x, 0.0).T
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = {
            "steps": totals["steps"] / count,
            "prompt_tokens": totals["prompt_tokens"],
            "cached_tokens": totals["cached_tokens"],
        }
        if baseline in out.index:
            b = list(out.index).index(baseline)
            for col in ("prompt_tokens", "cost_usd"):
                whole = df[col].astype(float).groupby(strategy, sort=False).sum(min_count=1)
                # A NaN cost anywhere in a strategy leaves its total NaN, not lower.
                if col == "cost_usd":
                    whole[df.loc[df[col].isna(), "strategy"].astype(str).unique()] = math.nan
                whole = whole.reindex(out.index)
                out[f"{col}_rel"] = whole / float(whole.iloc[b])
                reps[f"{col}_rel"] = totals[col] / totals[col][:, [b]]
    for col, samples in reps.items():
        bounds = [
            percentile_interval(samples[:, i], level=level)
            if out["runs"].iloc[i] >= 2 and not np.isnan(float(out[col].iloc[i]))
            else (math.nan, math.nan)
            for i in range(len(out.index))
        ]
        out[f"{col}_lo"] = [a for a, _ in bounds]
        out[f"{col}_hi"] = [z for _, z in bounds]
    out.attrs["intervals"] = {
        **interval_attrs(len(units), resamples=resamples, seed=seed, level=level),
        "solve_rate": "Wilson score interval, 95%",
    }
    return out


def compare(df: pd.DataFrame, a: str, b: str) -> dict[str, float]:
    """Compare strategy ``a`` with ``b`` on the runs they share (same task, same repeat).

    Returns:
        ``pairs``; ``both``, ``only_a``, ``only_b``, ``neither`` (solved); ``p_mcnemar``
        (exact, two-sided); ``cost_diff_usd`` (mean of a's cost minus b's, per pair)
        with ``cost_diff_lo``/``_hi`` (paired bootstrap, 95%).

    Raises:
        ValueError: the strategies share no runs.
    """
    key = ["task", "repeat"]
    left = df[df["strategy"] == a].set_index(key)
    right = df[df["strategy"] == b].set_index(key)
    common = left.index.intersection(right.index)
    if not len(common):
        raise ValueError(
            f"strategies {a!r} and {b!r} share no (task, repeat): run them on the same tasks"
        )
    sa = left.loc[common, "solved"].astype(bool)
    sb = right.loc[common, "solved"].astype(bool)
    only_a, only_b = int((sa & ~sb).sum()), int((~sa & sb).sum())
    diff = (left.loc[common, "cost_usd"] - right.loc[common, "cost_usd"]).astype(float)
    lo, hi = bootstrap_mean_ci(diff.tolist())
    return {
        "pairs": len(common),
        "both": int((sa & sb).sum()),
        "only_a": only_a,
        "only_b": only_b,
        "neither": int((~sa & ~sb).sum()),
        "p_mcnemar": mcnemar_exact(only_a, only_b),
        "cost_diff_usd": float(diff.mean(skipna=False)),
        "cost_diff_lo": lo,
        "cost_diff_hi": hi,
    }
