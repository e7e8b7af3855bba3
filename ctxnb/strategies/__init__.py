"""Context strategies: which items of a session go into the model's context.

The public names of :mod:`ctxnb.strategies.builtin`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = [
    "BlockMasking",
    "ContextStrategy",
    "FileViewLimits",
    "Item",
    "KeepAll",
    "MetadataOnly",
    "ObservationMasking",
    "RecencyWindow",
    "RuleSource",
    "RulesTiered",
    "Selection",
    "StrategyInput",
    "Summarize",
    "TokenBudgetLRU",
    "strategy_spec",
]
_EXPORTS: dict[str, str] = {name: "builtin" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .builtin import (
        BlockMasking,
        ContextStrategy,
        FileViewLimits,
        Item,
        KeepAll,
        MetadataOnly,
        ObservationMasking,
        RecencyWindow,
        RuleSource,
        RulesTiered,
        Selection,
        StrategyInput,
        Summarize,
        TokenBudgetLRU,
        strategy_spec,
    )
