"""Summaries, plots and side-by-side contexts for replay experiments.

:func:`summarize` turns a replay frame into one row per strategy: how many tokens the
model would have read (in total and at the peak), how much of that a prompt cache
could serve, what it costs as providers bill it (with and without caching), how much
information was lost (re-reads: dropped content the agent had to read again) and how
many outdated views it kept (stale reads: old tool outputs showing a file as it was
before a later change), each also relative to the keep-all baseline.

A replay feeds the recorded actions back, so it measures what each strategy would have
put in front of the model at each step, and what that costs; it cannot tell whether
the model would still have solved the task with less in front of it (the actions would
have differed). Solve rates need live runs: :func:`ctxnb.live.run_task`.

:func:`plot_tokens_per_step` and :func:`plot_cost_vs_loss` draw the two pictures that
matter, :func:`plot_dollars_per_step` what a run costs with and without prompt caching,
and :func:`compare_at` gives the two contexts two strategies assembled at one
step, for a closer look.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({
    ...     "trajectory": ["t"] * 4, "strategy": ["keep-all", "keep-all", "m", "m"],
    ...     "step": [0, 1, 0, 1], "total_tokens": [100, 300, 100, 150],
    ...     "re_reads": [0, 0, 0, 1], "stale_reads": [0, 1, 0, 0]})
    >>> s = summarize(df, prices={"input_per_mtok": 1.25})
    >>> float(s.loc["m", "tokens_rel"])
    0.625
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._util.intervals import LEVEL, RESAMPLES, SEED
from .._util.plotting import line_style, marker_style, new_axes, outside_legend, styled
from ..context import Context
from ..llm.tokens import TokenCounter
from ..strategies.builtin import ContextStrategy
from .model import Trajectory

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "compare_at",
    "plot_cost_vs_loss",
    "plot_dollars_per_step",
    "plot_tokens_per_step",
    "summarize",
    "with_intervals",
]

_PRICE_KEYS = ("input_per_mtok",)
# Figures summarize() rounds (to these decimals); their bounds are rounded alike.
_ROUNDED = {"mean_tokens": 1, "cache_read_share": 4, "recorded_cache_share": 4}


def summarize(
    df: pd.DataFrame,
    prices: Mapping[str, float] | None = None,
    *,
    baseline: str = "keep-all",
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """One row per strategy: tokens, cache reuse, dollars and information lost.

    Each step of a replay is one model call, so ``total_tokens`` summed over steps is
    the input the model would have read over the runs. These are context measures: the
    recorded actions are replayed, so nothing here says whether a strategy would still
    solve the task (see :func:`ctxnb.live.run_task`).

    Args:
        df: a replay frame (:func:`~ctxnb.replay.runner.replay` or
            :func:`~ctxnb.replay.experiment.run_experiment`).
        prices: ``{"input_per_mtok": dollars per million input tokens}``; adds a
            ``cost`` column at one flat input price (no caching). The frame's own
            ``cost_usd`` columns, priced per model with caching, are summed whatever
            this says.
        baseline: the strategy the ``*_rel`` columns divide by.
        resamples: bootstrap resamples of the intervals.
        seed: the bootstrap's seed (the same frame gives the same intervals).
        level: the intervals' confidence level.

    Returns:
        Indexed by strategy (in the frame's order): ``runs``, ``steps``,
        ``total_tokens``, ``peak_tokens`` (largest context), ``mean_tokens``,
        ``re_reads``, ``stale_reads``, ``cost`` (with prices); when the frame has them,
        ``cache_read_share`` (cache-readable tokens / all prompt tokens), ``cost_usd``
        and ``cost_usd_uncached`` (dollars with and without prompt caching, the
        strategy's own model calls included; NaN when any run lacks a price),
        ``unpriced_runs`` (runs with a step that has no price, the agent's model or a
        summarizer's), ``cost_usd_priced`` (the dollars of the priced runs only),
        ``recorded_cost_usd`` (what the recorded runs were billed, when they say);
        and ``tokens_rel``, ``peak_rel``,
        ``re_reads_rel``, ``stale_reads_rel``, ``cost_rel``, ``cost_usd_rel``: each
        value divided by the baseline's (NaN where the baseline's is 0, or without a
        baseline). Every figure but the counts has ``<figure>_lo`` and ``<figure>_hi``
        beside it: a bootstrap interval over runs, paired for the ``*_rel`` ratios
        (see :mod:`ctxnb._util.intervals`; NaN with fewer than two runs), with the
        method, level, resamples, seed and number of runs in ``attrs["intervals"]``.
        :func:`with_intervals` shows them as ``value [lo–hi]``.

    Raises:
        ValueError: ``prices`` has an unknown key.

    Example:
        >>> summarize(df, prices={"input_per_mtok": 1.25})  # doctest: +SKIP
    """
    import numpy as np
    import pandas as pd

    if prices is not None:
        unknown = sorted(set(prices) - set(_PRICE_KEYS))
        if unknown:
            raise ValueError(
                f"unknown price keys {unknown}; pass {{'input_per_mtok': dollars per million "
                "input tokens}}"
            )
    order = list(dict.fromkeys(df["strategy"].astype(str)))
    g = df.groupby(df["strategy"].astype(str), sort=False)
    out = pd.DataFrame(
        {
            "runs": g["trajectory"].nunique(),
            "steps": g.size(),
            "total_tokens": g["total_tokens"].sum(),
            "peak_tokens": g["total_tokens"].max(),
            "mean_tokens": g["total_tokens"].mean().round(1),
            "re_reads": g["re_reads"].sum(),
            "stale_reads": g["stale_reads"].sum(),
        }
    ).reindex(order)
    out.index.name = "strategy"
    if {"cache_read_tokens", "cost_usd", "cost_usd_uncached"} <= set(df.columns):
        out["cache_read_share"] = (g["cache_read_tokens"].sum() / g["total_tokens"].sum()).round(4)
        if {"recorded_cached_tokens", "prompt_tokens"} <= set(df.columns):
            # The provider's own cache, over the steps that record both (the same
            # steps for every strategy): what the modelled share is checked against.
            both = df["recorded_cached_tokens"].notna() & df["prompt_tokens"].notna()
            rec = df[both].groupby(df.loc[both, "strategy"].astype(str), sort=False)
            out["recorded_cache_share"] = (
                (rec["recorded_cached_tokens"].sum() / rec["prompt_tokens"].sum())
                .astype("float64")
                .round(4)
                .reindex(order)
            )
        # A step without a price (an unknown agent or summarizer model) is NaN, and the
        # sums keep it NaN: an unpriced run is never counted as $0. unpriced_runs says
        # how many runs that is; cost_usd_priced sums the runs that have prices.
        own_nan = (
            df["strategy_cost_usd"].isna()
            if "strategy_cost_usd" in df.columns
            else pd.Series(False, index=df.index)
        )
        unpriced = df["cost_usd"].isna() | own_nan
        out["unpriced_runs"] = (
            df.loc[unpriced, "trajectory"]
            .groupby(df.loc[unpriced, "strategy"].astype(str))
            .nunique()
            .reindex(order)
            .fillna(0)
            .astype("int64")
        )
        own = (
            g["strategy_cost_usd"].sum(min_count=1).fillna(0.0)
            if "strategy_cost_usd" in df.columns
            else 0.0
        )
        priced = df[~unpriced]
        gp = priced.groupby(priced["strategy"].astype(str), sort=False)
        out["cost_usd_priced"] = (
            (gp["cost_usd"].sum() + gp["strategy_cost_usd"].sum()).reindex(order)
            if "strategy_cost_usd" in df.columns
            else gp["cost_usd"].sum().reindex(order)
        )
        out["cost_usd"] = g["cost_usd"].sum(min_count=1) + own
        out["cost_usd_uncached"] = g["cost_usd_uncached"].sum(min_count=1) + own
        out.loc[out["unpriced_runs"] > 0, ["cost_usd", "cost_usd_uncached"]] = np.nan
        if "recorded_cost_usd" in df.columns:
            # The bill, over the steps that record one (a step is a call only once).
            out["recorded_cost_usd"] = g["recorded_cost_usd"].sum(min_count=1)
    if prices is not None and "input_per_mtok" in prices:
        out["cost"] = out["total_tokens"] * float(prices["input_per_mtok"]) / 1e6
    pairs = [
        ("total_tokens", "tokens_rel"),
        ("peak_tokens", "peak_rel"),
        ("re_reads", "re_reads_rel"),
        ("stale_reads", "stale_reads_rel"),
    ]
    if "cost" in out:
        pairs.append(("cost", "cost_rel"))
    if "cost_usd" in out:
        pairs.append(("cost_usd", "cost_usd_rel"))
    for col, rel in pairs:
        if baseline in out.index and out.loc[baseline, col]:
            out[rel] = out[col] / float(out.loc[baseline, col])
        else:
            out[rel] = np.nan
    return _add_intervals(df, out, prices, baseline, pairs, resamples, seed, level)


def _add_intervals(
    df: pd.DataFrame,
    out: pd.DataFrame,
    prices: Mapping[str, float] | None,
    baseline: str,
    pairs: list[tuple[str, str]],
    resamples: int,
    seed: int,
    level: float,
) -> pd.DataFrame:
    """``<figure>_lo``/``_hi`` beside each figure of :func:`summarize`'s table."""
    import numpy as np

    from .._util.intervals import interval_attrs, percentile_interval, run_weights

    runs = list(dict.fromkeys(df["trajectory"].astype(str)))
    key = [df["strategy"].astype(str), df["trajectory"].astype(str)]

    def per_run(values: pd.Series, how: str = "sum") -> pd.DataFrame:
        # strategy x run; a run a strategy lacks counts as 0 (nothing read).
        g = values.groupby(key, sort=False)
        agg = g.max() if how == "max" else g.sum(min_count=1) if how == "nan" else g.sum()
        wide = agg.unstack().reindex(index=out.index, columns=runs)
        return wide if how == "nan" else wide.fillna(0)

    table = {
        "total_tokens": per_run(df["total_tokens"]),
        "peak_tokens": per_run(df["total_tokens"], "max"),
        "steps": per_run(df["total_tokens"] * 0 + 1),
        "re_reads": per_run(df["re_reads"]),
        "stale_reads": per_run(df["stale_reads"]),
    }
    if "cost_usd" in out:
        own = df["strategy_cost_usd"] if "strategy_cost_usd" in df else 0.0
        # NaN in a run's cost (an unpriced step) keeps every resample with it NaN.
        table["cost_usd"] = per_run(df["cost_usd"] + own, "nan")
        table["cost_usd_uncached"] = per_run(df["cost_usd_uncached"] + own, "nan")
        table["cache_read_tokens"] = per_run(df["cache_read_tokens"])
        if "recorded_cost_usd" in out:
            table["recorded_cost_usd"] = per_run(df["recorded_cost_usd"])
        if "recorded_cache_share" in out:
            both = df["recorded_cached_tokens"].notna() & df["prompt_tokens"].notna()
            table["rec_cached"] = per_run(df["recorded_cached_tokens"].where(both, 0))
            table["rec_prompt"] = per_run(df["prompt_tokens"].where(both, 0).astype(float))
    w = run_weights(len(runs), resamples=resamples, seed=seed).astype(float)

    def sums(name: str) -> np.ndarray:
        # resamples x strategies: each strategy's figure over the same resampled runs.
        return np.asarray(w @ table[name].to_numpy(dtype=float).T)

    with np.errstate(divide="ignore", invalid="ignore"):
        reps: dict[str, np.ndarray] = {
            c: sums(c) for c in ("total_tokens", "re_reads", "stale_reads")
        }
        reps["mean_tokens"] = reps["total_tokens"] / sums("steps")
        peaks = table["peak_tokens"].to_numpy(dtype=float)
        reps["peak_tokens"] = np.where(w[:, None, :] > 0, peaks[None, :, :], -np.inf).max(axis=2)
        if "cost_usd" in out:
            reps["cost_usd"] = sums("cost_usd")
            reps["cost_usd_uncached"] = sums("cost_usd_uncached")
            reps["cache_read_share"] = sums("cache_read_tokens") / reps["total_tokens"]
            if "recorded_cost_usd" in table:
                reps["recorded_cost_usd"] = sums("recorded_cost_usd")
            if "rec_cached" in table:
                reps["recorded_cache_share"] = sums("rec_cached") / sums("rec_prompt")
        if "cost" in out and prices is not None:
            reps["cost"] = reps["total_tokens"] * float(prices["input_per_mtok"]) / 1e6
        if baseline in out.index:
            b = list(out.index).index(baseline)
            for col, rel in pairs:
                # Paired: each resample divides by the baseline over the same runs.
                reps[rel] = reps[col] / reps[col][:, [b]]
    for col, samples in reps.items():
        bounds = [
            percentile_interval(samples[:, i], level=level)
            if len(runs) >= 2 and not np.isnan(float(out[col].iloc[i]))
            else (np.nan, np.nan)
            for i in range(len(out.index))
        ]
        out[f"{col}_lo"] = [a for a, _ in bounds]
        out[f"{col}_hi"] = [z for _, z in bounds]
        if col in _ROUNDED:
            # Rounded as the figure is, so that the interval still holds it.
            out[[f"{col}_lo", f"{col}_hi"]] = out[[f"{col}_lo", f"{col}_hi"]].round(_ROUNDED[col])
    out.attrs["intervals"] = interval_attrs(len(runs), resamples=resamples, seed=seed, level=level)
    return out


def with_intervals(table: pd.DataFrame, formats: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The table with each figure that has ``_lo``/``_hi`` columns shown as
    ``value [lo–hi]`` (text), the bound columns dropped: for notebooks and reports.

    Args:
        table: a :func:`summarize` table (replay or live).
        formats: a format per column (``{"tokens_rel": "{:.3f}"}``); else whole
            numbers with thousands separators for a column of values of 1,000 or
            more, four significant digits for the rest.

    Example:
        >>> import pandas as pd
        >>> t = pd.DataFrame({"x": [2.0], "x_lo": [1.5], "x_hi": [2.5]}, index=["s"])
        >>> with_intervals(t).loc["s", "x"]
        '2 [1.5–2.5]'
    """
    from .._util.intervals import format_interval

    formats = dict(formats or {})
    shown = table.copy()
    for col in table.columns:
        lo, hi = f"{col}_lo", f"{col}_hi"
        if lo in table.columns and hi in table.columns:
            big = table[col].dropna().abs()
            fmt = formats.get(col, "{:,.0f}" if len(big) and (big >= 1000).all() else "{:,.4g}")
            shown[col] = [
                format_interval(v, a, z, fmt)
                for v, a, z in zip(table[col], table[lo], table[hi], strict=True)
            ]
            shown = shown.drop(columns=[lo, hi])
    shown.attrs = dict(table.attrs)
    return shown


@styled
def plot_tokens_per_step(
    df: pd.DataFrame, trajectory: str | None = None, ax: Axes | None = None
) -> Axes:
    """Context size per step, one line per strategy.

    For one run, the recorded prompt size (when known) is drawn dashed for reference.
    Without ``trajectory`` the median over runs at each step is drawn.

    Args:
        df: a replay frame.
        trajectory: a run id from the ``trajectory`` column, or None for all runs.
        ax: the Axes to draw on; a new figure when None.

    Returns:
        The Axes.

    Example:
        >>> ax = plot_tokens_per_step(df, "django__django-13670")  # doctest: +SKIP
    """
    ax = new_axes(ax, size=(7.5, 3.8))
    rows = df if trajectory is None else df[df["trajectory"] == trajectory]
    if rows.empty:
        raise ValueError(
            f"no rows for trajectory {trajectory!r}; known: "
            f"{sorted(df['trajectory'].astype(str).unique())[:10]}"
        )
    groups = rows.groupby(rows["strategy"].astype(str), sort=False)
    for n, (strategy, g) in enumerate(groups):
        series = g.groupby("step")["total_tokens"].median()
        # Earlier series draw wider and below, so a later one that coincides (a strategy
        # that dropped nothing yet) leaves both visible.
        width = 1.4 + 1.6 * (len(groups) - 1 - n) / max(1, len(groups) - 1)
        ax.plot(
            series.index,
            series.to_numpy(),
            label=str(strategy),
            linewidth=width,
            zorder=2 + n,
            **line_style(n),
        )
    rec = rows.dropna(subset=["prompt_tokens"])
    if not rec.empty:
        first = rec[rec["strategy"] == rec["strategy"].iloc[0]]
        series = first.groupby("step")["prompt_tokens"].median().astype(float)
        ax.plot(
            series.index,
            series.to_numpy(),
            color="#555555",
            linestyle=(0, (2, 2)),
            linewidth=1,
            label="recorded prompt",
            zorder=10,
        )
    ax.set_xlabel("step")
    ax.set_ylabel("context tokens" + ("" if trajectory else " (median over runs)"))
    ax.set_title(trajectory or f"{rows['trajectory'].nunique()} runs")
    outside_legend(ax)
    return ax


@styled
def plot_cost_vs_loss(summary: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Each strategy as a point: tokens relative to the baseline against information lost.

    Information lost is counted by re-reads: files the agent read again although it had
    seen them, because the strategy had dropped them from the context. Stale reads are
    not on this axis: an old tool output showing a file before a later change is
    outdated information *kept*, not lost (keep-all, which drops nothing, keeps the
    most of them), so adding them would rank keep-all as the strategy that loses most.
    :func:`summarize` still counts them, in their own column.

    Args:
        summary: a frame from :func:`summarize`.
        ax: the Axes to draw on; a new figure when None.

    Returns:
        The Axes. The x axis is ``tokens_rel`` (cost relative to keep-all when prices
        are flat per token); the y axis is re-reads.

    Example:
        >>> ax = plot_cost_vs_loss(summarize(df))  # doctest: +SKIP
    """
    ax = new_axes(ax, size=(6, 4))
    x = summary["tokens_rel"].to_numpy(dtype=float)
    y = summary["re_reads"].to_numpy(dtype=float)
    # One marker and legend entry per strategy: names in the legend never collide, even
    # when two strategies land on the same point.
    # Earlier points draw larger and below, so two strategies on one point (one that
    # dropped nothing draws where keep-all does) both stay visible.
    last = max(1, len(x) - 1)
    for n, (label, xi, yi) in enumerate(zip(summary.index, x, y, strict=True)):
        size = 46 + 80 * (last - n) / last
        ax.scatter([xi], [yi], label=str(label), s=size, zorder=3 + n, **marker_style(n))
    ax.set_xlabel("tokens relative to keep-all")
    ax.set_ylabel("re-reads (dropped, read again)")
    ax.set_title("cost vs. information lost")
    ax.margins(x=0.08, y=0.12)
    # Re-reads are counts: whole-number ticks, none below zero.
    locator: Any = ax.yaxis.get_major_locator()  # a MaxNLocator, which takes these
    locator.set_params(integer=True, min_n_ticks=1)
    ax.set_ylim(bottom=max(ax.get_ylim()[0], -0.12 * max(1.0, float(y.max(initial=0)))))
    outside_legend(ax)
    return ax


@styled
def plot_dollars_per_step(df: pd.DataFrame, trajectory: str, ax: Axes | None = None) -> Axes:
    """Dollars so far at each step of one run, with and without prompt caching.

    One colour per strategy; its cached line is solid and its uncached line dotted, so
    the two lines of a strategy read as a pair and the two ways of billing as two
    styles.

    Args:
        df: a replay frame with ``cost_usd`` and ``cost_usd_uncached`` (a replay at a
            model's prices).
        trajectory: a run id from the ``trajectory`` column.
        ax: the Axes to draw on; a new figure when None.

    Returns:
        The Axes.

    Raises:
        ValueError: no rows for ``trajectory``, or the frame has no dollar columns.

    Example:
        >>> ax = plot_dollars_per_step(df, "django__django-13670")  # doctest: +SKIP
    """
    rows = df[df["trajectory"] == trajectory]
    if rows.empty:
        raise ValueError(
            f"no rows for trajectory {trajectory!r}; known: "
            f"{sorted(df['trajectory'].astype(str).unique())[:10]}"
        )
    missing = [c for c in ("cost_usd", "cost_usd_uncached") if c not in df]
    if missing or rows[["cost_usd", "cost_usd_uncached"]].isna().all().all():
        raise ValueError(
            f"no dollars in the frame ({', '.join(missing) or 'all NaN'}): replay at a "
            "model's prices (a trajectory that names its model, or prices=...)"
        )
    ax = new_axes(ax, size=(7.5, 3.8))
    for n, (strategy, g) in enumerate(rows.groupby(rows["strategy"].astype(str), sort=False)):
        g = g.sort_values("step")
        color = line_style(n)["color"]
        billed = (("cost_usd", "-", "cached"), ("cost_usd_uncached", ":", "no cache"))
        for column, dash, how in billed:
            ax.plot(
                g["step"].to_numpy(),
                g[column].cumsum().to_numpy(),
                color=color,
                linestyle=dash,
                label=f"{strategy} ({how})",
            )
    ax.set_xlabel("step")
    ax.set_ylabel("dollars so far")
    ax.set_title(trajectory)
    outside_legend(ax)
    return ax


def compare_at(
    trajectory: Trajectory | str | os.PathLike[str],
    strategy_a: ContextStrategy,
    strategy_b: ContextStrategy,
    step: int,
    *,
    budget: int | None = None,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    files: str = "pool",
) -> tuple[Context, Context]:
    """The contexts two strategies give the model at one step of a run.

    Replays the run up to ``step`` (the context the agent chose that step's action in)
    and assembles it under both strategies. Show them with ``ContextView.compare(a, b)``
    in a notebook, or list what differs with :func:`ctxnb.context.context_diff`.

    Args:
        trajectory: a run, or a path :func:`ctxnb.replay.load` reads.
        strategy_a: the first strategy.
        strategy_b: the second.
        step: the step index (0-based).
        budget: total token budget, or None.
        token_counter: as for :func:`~ctxnb.replay.runner.replay`.
        files: as for :func:`~ctxnb.replay.runner.replay`.

    Raises:
        IndexError: the run has no such step.

    Example:
        >>> from ctxnb.strategies import KeepAll, ObservationMasking
        >>> a, b = compare_at("data/trajectories/django__django-13670.traj.json",
        ...                   KeepAll(), ObservationMasking(3), step=10)  # doctest: +SKIP
        >>> context_diff(a, b)["changed"]  # doctest: +SKIP
    """
    from .runner import replay_contexts

    if not isinstance(trajectory, Trajectory):
        from .converters import load

        trajectory = load(trajectory)
    if not 0 <= step < len(trajectory.steps):
        raise IndexError(
            f"step {step} is out of range: {trajectory.id!r} has steps 0-"
            f"{len(trajectory.steps) - 1}"
        )
    found: list[Context] = []
    for s, _, ctx, _ in replay_contexts(
        trajectory,
        [_Labelled(strategy_a, "a"), _Labelled(strategy_b, "b")],
        budget=budget,
        token_counter=token_counter,
        stop_after=step,
        files=files,  # type: ignore[arg-type]
    ):
        if s.index == step:
            found.append(ctx)
    return found[0], found[1]


class _Labelled:
    """A strategy under another label, so that two equal strategies can be compared."""

    def __init__(self, inner: ContextStrategy, label: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.label = label

    def select(self, inp: Any) -> Any:
        return self.inner.select(inp)

    def __getattr__(self, key: str) -> Any:
        # Settings of the wrapped strategy (recorded in the context's strategy spec).
        return getattr(self.__dict__["inner"], key)
