"""Secret redaction: the one pass that text takes before it leaves ctxnb.

The public names of :mod:`ctxnb.redaction.redactor`, loaded on first use. Its files:

- ``redactor.py``: the pass itself (``redact``, ``redact_data``), the rule table's doc;
- ``_patterns.py``: tokens by their shape, assignments to secret-like names;
- ``_checks.py``: placeholders, secret-looking names, the generic detector's checks;
- ``_efficiency.py``: token efficiency under cl100k_base (rare text is a secret);
- ``_formats.py``: values read by the text's format (dotenv, INI, YAML, JSON, URLs …);
- ``_commands.py``: passwords where a client's argument grammar puts them;
- ``_sql.py``: SQL that sets a password;
- ``_http.py``: session and auth cookies;
- ``_credfiles.py``: ``.pgpass`` lines, ``.properties`` continuations and separators;
- ``_escapes.py``: JSON-escaped strings and percent-encoded URLs, decoded and redacted;
- ``_prose.py``: what a value under a secret name is when it is prose, code or a template.
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
