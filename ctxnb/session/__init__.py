"""Sessions: what an agent has seen, what is active, and what the model sees (DESIGN §6).

The public names of :mod:`ctxnb.session.core` and :mod:`ctxnb.session.state`, loaded on
first use. The folder's files:

- ``core.py``: :class:`Session` (the lock, the store, tool calls, saving, assembling);
- ``state.py``: :class:`SessionState`, what a session holds (its sets, copies, chat);
- ``_resume.py``: bringing a stored session back into a state, checked against the disk;
- ``_columns.py``: a resumed session's files made from the store's typed columns;
- ``_cold.py``: what a resume found, written for the next process to resume from without
  the store;
- ``watch.py``: the background watcher of a session's files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = ["MetaEntry", "ResumeReport", "Session", "SessionState", "open_session"]
_EXPORTS: dict[str, str] = {name: "core" for name in __all__} | {"SessionState": "state"}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .core import MetaEntry, ResumeReport, Session, open_session
    from .state import SessionState
