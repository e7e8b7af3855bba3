"""Context strategies: which items of a session go into the model's context.

``builtin.py`` holds the strategies (keep-all, masking, summaries, windows, budgets),
``condensers.py`` those that condense old turns, ``summaries.py`` the file outlines they
use, ``recall.py`` masking whose placeholders name a recall handle, and ``registry.py``
the name each is known by on the command line and in live runs.
Adding a strategy: a class in ``builtin.py`` (or a module beside it), an entry in
``registry.STRATEGIES``, its name here.

The public names load on first use.
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
    "STRATEGIES",
    "STRATEGY_SPECS",
    "Selection",
    "StrategyInput",
    "Summarize",
    "TokenBudgetLRU",
    "WithRecall",
    "parse_strategy",
    "strategy_spec",
]
_REGISTRY = {"STRATEGIES", "STRATEGY_SPECS", "parse_strategy"}
_EXPORTS: dict[str, str] = {
    n: "registry" if n in _REGISTRY else "recall" if n == "WithRecall" else "builtin"
    for n in __all__
}

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
    from .recall import WithRecall
    from .registry import STRATEGIES, STRATEGY_SPECS, parse_strategy
