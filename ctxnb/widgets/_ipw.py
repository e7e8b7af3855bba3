"""The one place that imports ipywidgets, with a message that names the extra."""

from __future__ import annotations

try:
    import ipywidgets as widgets
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ..errors import MissingDependencyError

    raise MissingDependencyError.for_extra("ipywidgets", "notebook") from exc

__all__ = ["widgets"]
