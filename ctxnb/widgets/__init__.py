"""Jupyter views over ctxnb's live objects (ipywidgets 8).

- :class:`SessionView`: the session's index, metadata pool, active and pinned sets;
  activate, deactivate, pin and unpin from the view; updates live when files change.
- :class:`ContextView`: an assembled context, section by section, with a token budget
  bar and per-item tokens; :meth:`ContextView.compare` shows what entered, left or
  changed between two contexts.
- :class:`TraceView`: the trace ledger as a paged, filterable, sortable table.
- :class:`HistoryView`: the versions of one file and a diff between any two.
- :class:`ReplayView`: a replayed (or live) run step by step, two context strategies
  side by side: per-step token bars, cache-readable and new tokens, and which items
  were masked, truncated or evicted.
- :class:`ExperimentView`: ``run_experiment`` results as a strategy × metric table with
  its plots.
- :class:`ApprovalPanel`: pending destructive acts with Approve and Reject buttons;
  :func:`run_in_background` runs the agent's call in a thread so the buttons stay live.

Every view is an ipywidgets ``VBox`` and also has a static ``_repr_html_``, so a saved
notebook shows something in nbconvert and on GitHub. The views need the ``notebook``
extra (``pip install 'ctxnb[notebook]'``); :func:`ledger_html` and the helpers in
:mod:`ctxnb.widgets.static` do not.

Example:
    >>> import tempfile
    >>> from ctxnb import Workspace
    >>> from ctxnb.widgets import ContextView
    >>> from ctxnb.samples import copy_sample_workspace
    >>> ws = Workspace.open(copy_sample_workspace(tempfile.mkdtemp()))
    >>> session = ws.session("demo", system_prompt="Be careful.")
    >>> _ = session.add_path("AGENTS.md")
    >>> view = ContextView(session.assemble())
    >>> [name for name, _ in view.sections]
    ['system', 'metadata', 'active', 'chat']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

_LAZY = {
    "ApprovalPanel": "ctxnb.widgets.approval",
    "ContextDiffView": "ctxnb.widgets.context_view",
    "ContextView": "ctxnb.widgets.context_view",
    "ExperimentView": "ctxnb.widgets.experiment_view",
    "HistoryView": "ctxnb.widgets.history_view",
    "ReplayView": "ctxnb.widgets.replay_view",
    "SessionView": "ctxnb.widgets.session_view",
    "TraceView": "ctxnb.widgets.trace_view",
    "ledger_html": "ctxnb.govern.ledger",
    "run_in_background": "ctxnb.widgets.approval",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ..govern.ledger import ledger_html as ledger_html
    from .approval import ApprovalPanel as ApprovalPanel
    from .approval import run_in_background as run_in_background
    from .context_view import ContextDiffView as ContextDiffView
    from .context_view import ContextView as ContextView
    from .experiment_view import ExperimentView as ExperimentView
    from .history_view import HistoryView as HistoryView
    from .replay_view import ReplayView as ReplayView
    from .session_view import SessionView as SessionView
    from .trace_view import TraceView as TraceView
