"""Secret redaction: the one pass that text takes before it leaves ctxnb.

The public names of :mod:`ctxnb.redaction.redactor`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = [
    "RULES",
    "Finding",
    "RedactionResult",
    "has_secrets",
    "line_redactor",
    "redact",
    "redact_data",
    "redact_text",
    "shannon_entropy",
]
_EXPORTS: dict[str, str] = {name: "redactor" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .redactor import (
        RULES,
        Finding,
        RedactionResult,
        has_secrets,
        line_redactor,
        redact,
        redact_data,
        redact_text,
        shannon_entropy,
    )
