"""SessionView: a session's sets, editable from the notebook and updated live."""

from __future__ import annotations

import html
import threading
import weakref
from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ._ipw import widgets
from .static import esc

if TYPE_CHECKING:
    from ..session.core import Session

__all__ = ["SessionView"]

MAX_OPTIONS = 5_000  # a session past this is better explored with session.metadata_frame()


class SessionView(widgets.VBox):
    """The session index, metadata pool, active and pinned sets of a :class:`Session`.

    Select objects in the list and press Activate, Deactivate, Pin or Unpin; the
    session changes at once and the next ``assemble`` sees it. Whenever the session
    changes (its watcher records a file change from its background thread, or code
    activates, pins, adds ...) the view redraws and lists the change under "what
    changed".

    Args:
        session: the session to show.
        max_changes: how many recent changes to list.

    Example:
        >>> import tempfile
        >>> from ctxnb import Workspace
        >>> from ctxnb.samples import copy_sample_workspace
        >>> ws = Workspace.open(copy_sample_workspace(tempfile.mkdtemp()))
        >>> s = ws.session("demo", excerpts=False)
        >>> oid = s.add_path("AGENTS.md", activate=False)
        >>> view = SessionView(s)
        >>> view.select.value = (oid,)
        >>> view.activate_button.click()
        >>> s.active_set == [oid]
        True
    """

    def __init__(self, session: Session, *, max_changes: int = 10, **kwargs: Any) -> None:
        self.session = session
        self.changes: deque[tuple[datetime, str, str]] = deque(maxlen=max_changes)
        self._lock = threading.RLock()
        self._applying = False  # a button's own changes: one redraw at the end
        self.summary = widgets.HTML()
        self.select = widgets.SelectMultiple(
            options=[], rows=12, layout=widgets.Layout(width="100%")
        )
        self.select.add_class("ctxnb-session-objects")
        self.activate_button = widgets.Button(description="Activate")
        self.deactivate_button = widgets.Button(description="Deactivate")
        self.pin_button = widgets.Button(description="Pin")
        self.unpin_button = widgets.Button(description="Unpin")
        self.activate_button.on_click(lambda _: self.activate())
        self.deactivate_button.on_click(lambda _: self.deactivate())
        self.pin_button.on_click(lambda _: self.pin())
        self.unpin_button.on_click(lambda _: self.unpin())
        self.detail = widgets.HTML()
        self.status = widgets.HTML()
        self.changes_html = widgets.HTML()
        self.rules_html = widgets.HTML()
        # What the strategies did at a recorded turn (session.context_changes), on demand:
        # reading it goes through the store's history, too slow for every redraw.
        self.changes_turn = widgets.IntText(description="turn", layout=widgets.Layout(width="12em"))
        self.changes_button = widgets.Button(description="Context changes")
        self.changes_button.on_click(lambda _: self.show_context_changes(self.changes_turn.value))
        self.context_changes_html = widgets.HTML()
        self.select.observe(lambda _: self._show_detail(), names="value")
        buttons = widgets.HBox(
            [self.activate_button, self.deactivate_button, self.pin_button, self.unpin_button]
        )
        super().__init__(
            [
                self.summary,
                self.select,
                buttons,
                self.status,
                self.detail,
                self.rules_html,
                self.changes_html,
                widgets.HBox([self.changes_turn, self.changes_button]),
                self.context_changes_html,
            ],
            **kwargs,
        )
        ref = weakref.ref(self)

        def listener(oid: str, action: str) -> None:
            view = ref()
            if view is not None:  # the session outlives views the user threw away
                view._on_change(oid, action)

        session.on_change(listener)
        self.refresh()

    # -- actions ---------------------------------------------------------------------------
    def _apply(self, op: str, ids: Iterable[str] | None) -> list[str]:
        chosen = list(ids) if ids is not None else list(self.select.value)
        if not chosen:
            self.status.value = "<small>select one or more objects first</small>"
            return []
        fn = getattr(self.session, op)
        done = []
        self._applying = True
        try:
            for oid in chosen:
                try:
                    fn(oid)
                except Exception as exc:  # show, do not raise into the frontend's callback
                    self.status.value = f"<small style='color:#b00'>{esc(exc)}</small>"
                    break
                done.append(oid)
            else:
                self.status.value = f"<small>{op}: {len(done)} object(s)</small>"
        finally:
            self._applying = False
        self.refresh()
        return done

    def activate(self, ids: Iterable[str] | None = None) -> list[str]:
        """Activate ``ids`` (default: the selected objects); returns those changed."""
        return self._apply("activate", ids)

    def deactivate(self, ids: Iterable[str] | None = None) -> list[str]:
        """Deactivate ``ids`` (default: the selected objects)."""
        return self._apply("deactivate", ids)

    def pin(self, ids: Iterable[str] | None = None) -> list[str]:
        """Pin ``ids`` (default: the selected objects); pinning also activates."""
        return self._apply("pin", ids)

    def unpin(self, ids: Iterable[str] | None = None) -> list[str]:
        """Unpin ``ids`` (default: the selected objects)."""
        return self._apply("unpin", ids)

    def show_context_changes(self, turn: int | None = None) -> None:
        """Show what each strategy did to each item at ``turn`` (default: the current turn).

        Example:
            >>> import tempfile
            >>> from ctxnb import Workspace
            >>> from ctxnb.strategies import ObservationMasking
            >>> s = Workspace.open(tempfile.mkdtemp()).session("changes", rules=False)
            >>> _ = [s.record_toolcall("ls", {}, f"a{n}.py") for n in range(3)]
            >>> _ = s.assemble(ObservationMasking(keep_last=1))
            >>> view = SessionView(s)
            >>> view.show_context_changes(0)
            >>> view.context_changes_html.value.count(">masked<")
            2
        """
        from ..context._changes import changes_html

        turn = self.session.turn if turn is None else turn
        try:
            found = self.session.context_changes(turn)
        except Exception as exc:  # show, do not raise into the frontend's callback
            self.context_changes_html.value = f"<small style='color:#b00'>{esc(exc)}</small>"
            return
        self.changes_turn.value = turn
        self.context_changes_html.value = (
            f"<b>Context changes at turn {turn}</b>{changes_html(found)}"
        )

    # -- drawing ---------------------------------------------------------------------------
    def _label(self, oid: str, active: set[str], pinned: set[str], pool: set[str]) -> str:
        m = self.session.metadata(oid)
        name = m.path or m.args_display or m.tool or oid
        flags = [
            f
            for f, on in (
                ("pinned", oid in pinned),
                ("active", oid in active),
                ("metadata only", oid in pool and oid not in active),
                ("deleted", m.deleted),
                ("orphaned", m.orphaned),
            )
            if on
        ]
        mark = "●" if oid in active else "○"
        return f"{mark} {m.type} {name} ({m.char_count:,} chars) [{', '.join(flags)}]"

    def refresh(self) -> None:
        """Redraw from the session's current state (safe to call from any thread)."""
        with self._lock:
            s = self.session
            active, pinned = set(s.active_set), set(s.pinned_set)
            pool = set(s.metadata_pool)
            index = s.session_index
            options = [(self._label(o, active, pinned, pool), o) for o in index[:MAX_OPTIONS]]
            keep = tuple(v for v in self.select.value if v in set(index))
            self.select.options = options
            self.select.value = keep
            more = (
                f" (showing the first {MAX_OPTIONS:,}; see session.metadata_frame())"
                if len(index) > MAX_OPTIONS
                else ""
            )
            self.summary.value = (
                f"<b>Session</b> {esc(s.session_id)}: {len(index)} in the index, "
                f"{len(pool)} in the metadata pool, {len(active)} active, "
                f"{len(pinned)} pinned, {s.turn} turns{more}"
            )
            self._show_detail()
            self._show_rules()
            self._show_changes()

    def _show_rules(self) -> None:
        """The rules files in context and why they were loaded (when rules are tracked)."""
        from ..instructions import tracker_for

        tracker = tracker_for(self.session)
        if tracker is None:
            self.rules_html.value = ""
            return
        rows = tracker.status().head(50)
        body = "".join(
            f"<tr><td>{esc(r.path)}</td><td>{esc(r.tier)}</td><td>{esc(r.reason)}</td></tr>"
            for r in rows.itertuples()
        )
        self.rules_html.value = (
            "<details open><summary><b>Rules in context</b> "
            f"({len(rows)})</summary><table><tr><th>file</th><th>tier</th><th>why</th></tr>"
            f"{body}</table></details>"
        )

    def _show_detail(self) -> None:
        sel = self.select.value
        if not sel:
            self.detail.value = ""
            return
        m = self.session.metadata(sel[0])
        fields = {k: v for k, v in vars(m).items() if v not in (None, False, "")}
        rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in fields.items())
        self.detail.value = f"<table class='ctxnb-table'>{rows}</table>"

    def _show_changes(self) -> None:
        if not self.changes:
            self.changes_html.value = ""
            return
        items = "".join(
            f"<li>{t:%H:%M:%S} {html.escape(action)} {html.escape(label)}</li>"
            for t, action, label in reversed(self.changes)
        )
        self.changes_html.value = f"<b>What changed</b><ul>{items}</ul>"

    def _on_change(self, oid: str, action: str) -> None:
        try:
            m = self.session.metadata(oid)
            label = m.path or m.args_display or oid
        except Exception:
            label = oid
        self.changes.append((datetime.now(UTC), action, label))
        if not self._applying:
            self.refresh()

    def _repr_html_(self) -> str:
        return self.session._repr_html_()

    def __repr__(self) -> str:
        return f"<SessionView {self.session!r}>"
