"""The replay frame: its columns, one row per (run, strategy, step), and what a row costs.

Besides the sizes of each context, a row says how much of the prompt a provider's
prompt cache could serve: ``cache_read_tokens`` are the leading tokens the prompt
shares with the prompt the same strategy gave at the previous step (providers cache
prefixes, so anything after the first change is billed as new), and ``new_tokens``
the rest. ``cost_usd`` prices a step as the provider bills it with caching (cache
reads, cache writes for the new tokens, and the recorded output tokens);
``cost_usd_uncached`` prices every prompt token at the input price. A strategy that
calls a model itself (an LLM summarizer) reports what that cost in
``strategy_tokens`` and ``strategy_cost_usd``, apart from the agent's own calls. Prices come from a
:class:`~ctxnb.llm.prices.PriceTable`; a model the table does not know gives NaN dollars.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..context import Context, prefix_reuse
from ..llm.prices import ModelPrice, recorded_cost
from .model import Step, Trajectory

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "PromptTracker", "StepMeasure"]

#: Columns of the frame :func:`~ctxnb.replay.runner.replay` returns, in order.
COLUMNS: tuple[str, ...] = (
    "trajectory",
    "source_format",
    "strategy",
    "step",
    "tool",
    "tokens_system",
    "tokens_metadata",
    "tokens_active",
    "tokens_chat",
    "total_tokens",
    "items_active",
    "items_masked",
    "items_truncated",
    "items_evicted",
    "re_reads",
    "stale_reads",
    "prompt_tokens",
    "budget",
    "over_budget",
    "context_hash",
    "segment",
    "tokens_hidden",
    "cache_read_tokens",
    "new_tokens",
    "completion_tokens",
    "cost_usd",
    "cost_usd_uncached",
    "strategy_tokens",
    "strategy_cost_usd",
    "recorded_cached_tokens",
    "recorded_cost_usd",
)


@dataclass(frozen=True)
class StepMeasure:
    """What a replay knows about one context beyond the context itself.

    Attributes:
        segment: compactions before the step (0 until the first).
        hidden: tokens of the agent's system prompt that the run does not record
            (part of ``total_tokens``; see ``hidden_prompt_tokens``).
        cache_read: tokens the prompt shares with the previous prompt of the same
            strategy, the hidden prompt included.
        strategy_tokens: tokens the strategy spent on its own model calls.
        strategy_cost: the dollars of those calls.
    """

    segment: int
    hidden: int
    cache_read: int
    strategy_tokens: int = 0
    strategy_cost: float = 0.0


class PromptTracker:
    """Tokens each strategy's prompt shares with its previous prompt.

    The shared part is measured by :func:`ctxnb.context.prefix_reuse`: the context's
    segments in reading order, up to the first that changed.
    """

    def __init__(self) -> None:
        self._prev: dict[str, Context] = {}

    def shared(self, label: str, ctx: Context, hidden: int) -> int:
        prev = self._prev.get(label)
        self._prev[label] = ctx
        if prev is None or not ctx.total_tokens:
            return 0
        return hidden + prefix_reuse(prev, ctx).shared


def row(
    traj: Trajectory,
    label: str,
    step: Step,
    ctx: Context,
    losses: tuple[int, int],
    measure: StepMeasure,
    price: ModelPrice | None,
) -> dict[str, Any]:
    """One row of the replay frame."""
    by = ctx.tokens_by_section()
    items = ctx.items
    masked = sum(1 for it in items if it.masked)
    usage = step.usage
    total = ctx.total_tokens + measure.hidden
    cache_read = min(measure.cache_read, total)
    completion = usage.completion_tokens if usage is not None else None
    out = completion or 0
    nan = float("nan")
    return {
        "trajectory": traj.id,
        "source_format": traj.source_format,
        "strategy": label,
        "step": step.index,
        "tool": step.action.tool,
        "tokens_system": by.get("system", 0),
        "tokens_metadata": by.get("metadata", 0),
        "tokens_active": by.get("active", 0),
        "tokens_chat": by.get("chat", 0),
        "total_tokens": total,
        "items_active": len(items) - masked,
        "items_masked": masked,
        "items_truncated": sum(1 for it in items if it.truncated),
        "items_evicted": len(ctx.evicted),
        "re_reads": losses[0],
        "stale_reads": losses[1],
        "prompt_tokens": usage.prompt_tokens if usage is not None else None,
        "budget": ctx.budget,
        "over_budget": ctx.over_budget,
        "context_hash": ctx.hash,
        "segment": measure.segment,
        "tokens_hidden": measure.hidden,
        "cache_read_tokens": cache_read,
        "new_tokens": total - cache_read,
        "completion_tokens": completion,
        "cost_usd": nan
        if price is None
        else price.cost(cache_read=cache_read, new=total - cache_read, output=out),
        "cost_usd_uncached": nan
        if price is None
        else price.cost(cache_read=cache_read, new=total - cache_read, output=out, caching=False),
        "strategy_tokens": measure.strategy_tokens,
        "strategy_cost_usd": measure.strategy_cost,
        # What the recorded call itself read from the cache and cost (the same for
        # every strategy): the bill a replay's dollars are checked against.
        "recorded_cached_tokens": usage.cached_tokens if usage is not None else None,
        "recorded_cost_usd": recorded_cost(price, usage),
    }


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The typed frame of replay rows (an empty one has the same columns and types)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(COLUMNS))
    ints = [c for c in COLUMNS if c.startswith(("tokens_", "items_")) or c in ("step",)]
    ints += ["total_tokens", "re_reads", "stale_reads", "segment"]
    ints += ["cache_read_tokens", "new_tokens", "strategy_tokens"]
    for c in ints:
        df[c] = df[c].astype("int64")
    for c in ("prompt_tokens", "budget", "completion_tokens", "recorded_cached_tokens"):
        df[c] = df[c].astype("Int64")
    for c in ("cost_usd", "cost_usd_uncached", "strategy_cost_usd", "recorded_cost_usd"):
        df[c] = df[c].astype("float64")
    df["over_budget"] = df["over_budget"].astype(bool)
    for c in ("trajectory", "source_format", "strategy", "tool", "context_hash"):
        df[c] = df[c].astype("string")
    return df
