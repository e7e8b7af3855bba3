"""Intervals on every figure of a replay summary: bootstrap over runs, paired, seeded."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ctxnb.replay.analysis import summarize, with_intervals

FIGURES = (
    "total_tokens",
    "peak_tokens",
    "mean_tokens",
    "re_reads",
    "stale_reads",
    "cache_read_share",
    "cost_usd",
    "cost_usd_uncached",
    "cost",
    "tokens_rel",
    "peak_rel",
    "cost_usd_rel",
    "cost_rel",
)


def _frame(n_runs: int, *, seed: int = 7, same: bool = False) -> pd.DataFrame:
    """A replay-shaped frame: n runs of 3-12 steps under keep-all and a masking strategy
    (the masking strategy equal to keep-all on every step when ``same``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n_runs):
        steps = int(rng.integers(3, 13))
        size = float(rng.lognormal(8, 0.8))
        for step in range(steps):
            base = int(size * (step + 1))
            for strategy, factor in (("keep-all", 1.0), ("masking", 1.0 if same else 0.7)):
                tokens = int(base * factor) if strategy == "masking" else base
                cache = int(tokens * (0.9 if strategy == "keep-all" or same else 0.6))
                rows.append(
                    {
                        "trajectory": f"run{r}",
                        "strategy": strategy,
                        "step": step,
                        "total_tokens": tokens,
                        "cache_read_tokens": cache,
                        "cost_usd": tokens * 3e-6 - cache * 2.7e-6,
                        "cost_usd_uncached": tokens * 3e-6,
                        "re_reads": int(rng.integers(0, 2)) if strategy == "masking" else 0,
                        "stale_reads": int(rng.integers(0, 3)),
                    }
                )
    return pd.DataFrame(rows)


def _width(s: pd.DataFrame, col: str, strategy: str = "masking") -> float:
    return float(s.loc[strategy, f"{col}_hi"] - s.loc[strategy, f"{col}_lo"])


def test_every_figure_has_an_interval_that_holds_its_point_and_the_method_is_recorded() -> None:
    s = summarize(_frame(12), prices={"input_per_mtok": 3.0})
    for col in FIGURES:
        for strategy in s.index:
            v, lo, hi = (s.loc[strategy, c] for c in (col, f"{col}_lo", f"{col}_hi"))
            if col == "re_reads" and strategy == "keep-all":
                assert v == lo == hi == 0
                continue
            assert lo <= v <= hi, (col, strategy, lo, v, hi)
            # Zero width only where every run gives the same value: the baseline's own
            # ratios, and keep-all's cache share (9 in 10 tokens on every run, here).
            fixed = strategy == "keep-all" and (col.endswith("_rel") or col == "cache_read_share")
            assert lo < hi or fixed, (col, strategy)
    ci = s.attrs["intervals"]
    assert ci["seed"] == 0 and ci["n"] == 12 and ci["resamples"] == 2000
    assert ci["level"] == 0.95 and "bootstrap over runs" in ci["method"]
    assert "paired" in ci["method"]


def test_intervals_shrink_with_more_runs_and_repeat_with_the_seed() -> None:
    few, many = summarize(_frame(8)), summarize(_frame(256))
    for col in ("total_tokens", "mean_tokens", "cost_usd", "tokens_rel", "cache_read_share"):
        # Sums grow with n: compare the width relative to the value.
        rel = [_width(t, col) / abs(float(t.loc["masking", col])) for t in (few, many)]
        assert rel[1] < rel[0] / 1.5, col
    again = summarize(_frame(8))
    pd.testing.assert_frame_equal(again, few)
    other = summarize(_frame(8), seed=1)
    assert other.loc["masking", "total_tokens_lo"] != few.loc["masking", "total_tokens_lo"]
    assert other.attrs["intervals"]["seed"] == 1


def test_a_paired_ratio_of_identical_runs_is_exactly_one_with_zero_width() -> None:
    s = summarize(_frame(20, same=True))
    for rel in ("tokens_rel", "peak_rel", "cost_usd_rel"):
        assert s.loc["masking", rel] == s.loc["masking", f"{rel}_lo"] == 1.0
        assert s.loc["masking", f"{rel}_hi"] == 1.0, rel
    # Unpaired, the same runs would give a wide ratio: the pairing is what narrows it.
    assert _width(s, "total_tokens") > 0


def test_one_interval_matches_a_bootstrap_computed_by_hand() -> None:
    df = _frame(15)
    s = summarize(df, resamples=4000, seed=3)
    per_run = (
        df[df["strategy"] == "masking"].groupby("trajectory", sort=False)["total_tokens"].sum()
    )
    x = per_run.reindex([f"run{r}" for r in range(15)]).to_numpy(dtype=float)
    rng = np.random.default_rng(3)
    totals = [x[rng.integers(0, 15, size=15)].sum() for _ in range(4000)]
    lo, hi = np.percentile(totals, [2.5, 97.5])
    assert s.loc["masking", "total_tokens_lo"] == pytest.approx(lo, rel=1e-12)
    assert s.loc["masking", "total_tokens_hi"] == pytest.approx(hi, rel=1e-12)
    # And against scipy's percentile bootstrap (its own draws): the same interval, up
    # to resampling noise.
    stats = pytest.importorskip("scipy.stats")
    ref = stats.bootstrap(
        (x,), np.sum, method="percentile", n_resamples=20_000, random_state=1
    ).confidence_interval
    width = hi - lo
    assert abs(ref.low - lo) < 0.05 * width and abs(ref.high - hi) < 0.05 * width


def test_one_run_has_no_interval_and_a_table_shows_value_and_interval() -> None:
    one = summarize(_frame(1))
    assert math.isnan(one.loc["masking", "total_tokens_lo"])
    # (a figure of thousands is shown whole, with separators, and without bounds here)
    assert with_intervals(one).loc["masking", "total_tokens"] == format(
        one.loc["masking", "total_tokens"], ",.0f"
    )
    s = summarize(_frame(10))
    shown = with_intervals(s, {"tokens_rel": "{:.3f}"})
    lo, hi = s.loc["masking", "tokens_rel_lo"], s.loc["masking", "tokens_rel_hi"]
    v = s.loc["masking", "tokens_rel"]
    assert shown.loc["masking", "tokens_rel"] == f"{v:.3f} [{lo:.3f}–{hi:.3f}]"
    assert not any(c.endswith(("_lo", "_hi")) for c in shown.columns)
    assert shown.attrs["intervals"] == s.attrs["intervals"]


def test_an_unpriced_run_leaves_the_dollars_and_their_interval_nan() -> None:
    df = _frame(6)
    df.loc[(df["trajectory"] == "run2") & (df["strategy"] == "masking"), "cost_usd"] = np.nan
    s = summarize(df)
    assert math.isnan(s.loc["masking", "cost_usd"])
    assert math.isnan(s.loc["masking", "cost_usd_lo"]) and math.isnan(
        s.loc["masking", "cost_usd_hi"]
    )
    assert s.loc["keep-all", "cost_usd_lo"] < s.loc["keep-all", "cost_usd_hi"]
