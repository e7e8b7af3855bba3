"""Sessions: what an agent has seen, what is active, and what the model sees (DESIGN §6).

The public names of :mod:`ctxnb.session.core`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = ["MetaEntry", "ResumeReport", "Session", "open_session"]
_EXPORTS: dict[str, str] = {name: "core" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .core import MetaEntry, ResumeReport, Session, open_session
