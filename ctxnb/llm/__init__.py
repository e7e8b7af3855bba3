"""Model calls through litellm, offline by default, with their tokens and dollars counted.

The public names of :mod:`ctxnb.llm.calls`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = ["CallUsage", "LiteLLMSummarizer", "call_usage", "litellm_module"]
_EXPORTS: dict[str, str] = {name: "calls" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .calls import CallUsage, LiteLLMSummarizer, call_usage, litellm_module
