"""The names of the built-in strategies, as the command line and live runs spell them.

One table: a strategy's name, what makes it from its settings, and how many settings it
takes. ``ctxnb replay --strategy``, ``ctxnb context --strategy``, live runs and
:func:`ctxnb.replay.run_experiment` all read a strategy through :func:`parse_strategy`, so
a strategy added here is known to every one of them.

Example:
    >>> parse_strategy("observation-masking:3")
    ObservationMasking(keep_last=3)
    >>> parse_strategy("file-view-limits:2,5000")
    FileViewLimits(2, 5000)
    >>> STRATEGY_SPECS["recency-window"]
    'recency-window[:N] (default 10)'
    >>> parse_strategy("observation-masking-recall:1")
    WithRecall(ObservationMasking(keep_last=1))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .builtin import (
    BlockMasking,
    ContextStrategy,
    FileViewLimits,
    KeepAll,
    MetadataOnly,
    ObservationMasking,
    RecencyWindow,
    Summarize,
    TokenBudgetLRU,
)
from .recall import WithRecall

__all__ = ["STRATEGIES", "STRATEGY_SPECS", "StrategyName", "parse_strategy"]


class StrategyName(NamedTuple):
    """A strategy's entry: what makes it, from at most ``max_settings`` integers."""

    make: Callable[..., ContextStrategy]
    max_settings: int
    usage: str


def _summarize(keep_last: int = 5, max_tokens: int = 200) -> ContextStrategy:
    return Summarize(keep_last, max_tokens=max_tokens)


def _recency(n: int = 10) -> ContextStrategy:
    return RecencyWindow(n)


def _masking_recall(keep_last: int = 5) -> ContextStrategy:
    return WithRecall(ObservationMasking(keep_last))


def _block_recall(keep_last: int = 5, block: int = 10) -> ContextStrategy:
    return WithRecall(BlockMasking(keep_last, block))


#: Every built-in strategy by its command-line name. A new strategy is added here.
STRATEGIES: dict[str, StrategyName] = {
    "keep-all": StrategyName(KeepAll, 0, "keep-all"),
    "observation-masking": StrategyName(
        ObservationMasking, 1, "observation-masking[:KEEP_LAST] (default 5)"
    ),
    "block-masking": StrategyName(
        BlockMasking, 2, "block-masking[:KEEP_LAST[,BLOCK]] (default 5,10)"
    ),
    "summarize": StrategyName(
        _summarize, 2, "summarize[:KEEP_LAST[,MAX_TOKENS]] (default 5,200; extractive summaries)"
    ),
    "recency-window": StrategyName(_recency, 1, "recency-window[:N] (default 10)"),
    "token-budget-lru": StrategyName(
        TokenBudgetLRU, 1, "token-budget-lru[:TOKENS] (default: the run's --budget)"
    ),
    "file-view-limits": StrategyName(
        FileViewLimits, 2, "file-view-limits[:MAX_OPEN[,CHAR_LIMIT]] (default 5,20000)"
    ),
    "metadata-only": StrategyName(MetadataOnly, 0, "metadata-only"),
    # Masking paired with recall: the placeholders name the `recall` command's handle.
    "observation-masking-recall": StrategyName(
        _masking_recall, 1, "observation-masking-recall[:KEEP_LAST] (default 5)"
    ),
    "block-masking-recall": StrategyName(
        _block_recall, 2, "block-masking-recall[:KEEP_LAST[,BLOCK]] (default 5,10)"
    ),
}

#: Strategy names :func:`parse_strategy` knows, with the meaning of their settings.
STRATEGY_SPECS: dict[str, str] = {name: entry.usage for name, entry in STRATEGIES.items()}


def parse_strategy(spec: str) -> ContextStrategy:
    """A built-in strategy from a short text such as ``observation-masking:5``.

    Args:
        spec: a name from :data:`STRATEGY_SPECS`, optionally followed by ``:`` and its
            settings, comma-separated.

    Raises:
        ValueError: unknown name or bad settings (the message lists what is allowed).
    """
    name, _, rest = spec.strip().partition(":")
    try:
        nums = [int(x) for x in rest.split(",")] if rest else []
    except ValueError:
        raise ValueError(
            f"strategy {spec!r}: settings after ':' must be integers; "
            f"use {STRATEGY_SPECS.get(name, 'one of ' + ', '.join(STRATEGY_SPECS))}"
        ) from None
    entry = STRATEGIES.get(name)
    if entry is None:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGY_SPECS.values())}")
    if len(nums) > entry.max_settings:
        raise ValueError(
            f"strategy {spec!r} takes at most {entry.max_settings} settings: {entry.usage}"
        )
    return entry.make(*nums)
