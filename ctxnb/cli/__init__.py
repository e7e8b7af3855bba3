"""The ``ctxnb`` command line: a thin layer over the library.

The public names of :mod:`ctxnb.cli.app`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = ["build_parser", "main"]
_EXPORTS: dict[str, str] = {name: "app" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .app import build_parser, main
