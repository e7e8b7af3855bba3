"""Replayed dollars against the recorded bill, and where the recorded cache reset.

A replay prices each step's context with a modelled prompt cache; a recorded run's
usage says what its provider actually served from the cache and billed
(``recorded_cached_tokens``, ``recorded_cost_usd``). :func:`bill_check` puts the two
side by side per run, over the steps that record a bill (one per model call).

Where they part, it is usually at a **recorded cache reset**: a call whose provider
served far less from the cache than the previous call's prompt, although the prompt
did not shrink and no compaction came between (:func:`recorded_cache_resets`). The
agent changed something early in its prompt that its transcript does not show (Claude
Code re-renders parts of its context), or the provider dropped the cache. A replay,
which sees only the transcript, cannot know; :func:`bill_check` gives the ratio with
and without those calls so that the rest can be checked on its own.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({
    ...     "trajectory": ["t"] * 3, "strategy": ["keep-all"] * 3, "step": [0, 1, 2],
    ...     "segment": [0, 0, 0], "prompt_tokens": [1000, 1100, 1200],
    ...     "recorded_cached_tokens": [0, 990, 100],
    ...     "cost_usd": [1.0, 0.3, 0.3], "recorded_cost_usd": [1.0, 0.3, 1.1]})
    >>> recorded_cache_resets(df).tolist()
    [False, False, True]
    >>> check = bill_check(df).loc["t"]
    >>> [round(float(check[k]), 3) for k in ("ratio", "cache_resets", "ratio_without_resets")]
    [0.667, 1.0, 1.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RESET_SHARE", "bill_check", "recorded_cache_resets"]

RESET_SHARE = 0.5
"""A call is a reset when its provider served less than this share of the previous
call's prompt from the cache (the prompt not shrinking, in the same segment)."""


def recorded_cache_resets(df: pd.DataFrame, *, share: float = RESET_SHARE) -> pd.Series:
    """Which rows are model calls whose recorded cache reset (see the module docs).

    Args:
        df: a replay frame (:func:`~ctxnb.replay.replay`), any strategies.
        share: the reset threshold, a share of the previous call's prompt.

    Returns:
        A boolean Series aligned with ``df``: True at a call (a row with a recorded
        bill and cache read) that read less than ``share`` of the previous call's
        prompt from the cache while its own prompt is at least as long and no
        compaction (a new ``segment``) came between. The first call of a run is never
        a reset: its cache starts cold.

    Raises:
        ValueError: ``share`` is not between 0 and 1.
    """
    import pandas as pd

    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1] (of the previous call's prompt), got {share!r}")
    out = pd.Series(False, index=df.index)
    calls = df[df["recorded_cost_usd"].notna() & df["recorded_cached_tokens"].notna()]
    for _, run in calls.sort_values("step").groupby(["trajectory", "strategy"], sort=False):
        prev_prompt = run["prompt_tokens"].shift(1)
        same_segment = run["segment"].eq(run["segment"].shift(1))
        reset = (
            same_segment
            & prev_prompt.notna()
            & (run["prompt_tokens"] >= prev_prompt)
            & (run["recorded_cached_tokens"] < share * prev_prompt)
        )
        out.loc[run.index] = reset.fillna(False).astype(bool).to_numpy()
    return out


def bill_check(df: pd.DataFrame, strategy: str = "keep-all") -> pd.DataFrame:
    """Replayed against recorded dollars per run, over the calls that record a bill.

    Args:
        df: a replay frame holding ``strategy`` (keep-all is the one a recorded run
            is checked with: it shows what the agent saw).
        strategy: the strategy label to check.

    Returns:
        One row per trajectory and a last row ``"all"``: ``calls`` (steps with a
        recorded bill), ``replayed_usd``, ``recorded_usd``, ``ratio``,
        ``cache_resets`` (:func:`recorded_cache_resets`), and ``replayed_usd``,
        ``recorded_usd`` and ``ratio`` over the calls that are not resets
        (``…_without_resets``). A run without a recorded bill is left out.

    Raises:
        ValueError: ``strategy`` is not in the frame.
    """
    import pandas as pd

    if strategy not in set(df["strategy"]):
        raise ValueError(
            f"strategy {strategy!r} is not in the frame (it holds "
            f"{sorted(set(df['strategy']))}); replay with it, or pass one of those"
        )
    mine = df[df["strategy"] == strategy]
    calls = mine[mine["recorded_cost_usd"].notna()].copy()
    calls["reset"] = recorded_cache_resets(calls)
    kept = calls[~calls["reset"]]

    def figures(part: pd.DataFrame, rest: pd.DataFrame) -> dict[str, float | int]:
        rep, rec = float(part["cost_usd"].sum()), float(part["recorded_cost_usd"].sum())
        rep_k, rec_k = float(rest["cost_usd"].sum()), float(rest["recorded_cost_usd"].sum())
        nan = float("nan")
        return {
            "calls": len(part),
            "replayed_usd": rep,
            "recorded_usd": rec,
            "ratio": rep / rec if rec else nan,
            "cache_resets": int(part["reset"].sum()),
            "replayed_usd_without_resets": rep_k,
            "recorded_usd_without_resets": rec_k,
            "ratio_without_resets": rep_k / rec_k if rec_k else nan,
        }

    rows = {
        str(name): figures(part, kept[kept["trajectory"] == name])
        for name, part in calls.groupby("trajectory", sort=False)
    }
    rows["all"] = figures(calls, kept)
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "trajectory"
    return out
