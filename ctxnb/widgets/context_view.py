"""ContextView: what the model sees at one turn; ContextDiffView: how two contexts differ."""

from __future__ import annotations

import difflib
import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..context import context_diff, item_text_diff
from ._ipw import widgets
from .static import diff_html, esc, html_table, pre, token_bar

if TYPE_CHECKING:
    from ..context import Context, ContextItem
    from ..session.core import Session
    from ..strategies.builtin import ContextStrategy

__all__ = ["ContextDiffView", "ContextView"]

MAX_ITEM_ROWS = 200  # items listed in a table; the rest are counted
# A view that follows a session re-assembles this long after the last change, so a
# burst of changes (add_paths of a folder, a replayed step) costs one assembly.
FOLLOW_DELAY = 0.05


def _flags(it: ContextItem) -> str:
    return ", ".join(
        f
        for f, on in (("pinned", it.pinned), ("masked", it.masked), ("truncated", it.truncated))
        if on
    )


def _strategy_text(ctx: Context) -> str:
    spec = dict(ctx.strategy or {})
    name = spec.pop("name", None) or spec.pop("class", None) or "?"
    params = spec.get("params") or {k: v for k, v in spec.items() if k != "class"}
    shown = ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, dict) else ""
    return f"{name}({shown})" if shown else str(name)


def _header(ctx: Context) -> str:
    budget = f" / budget {ctx.budget:,}" if ctx.budget is not None else ""
    over = " <b style='color:#b00'>over budget</b>" if ctx.over_budget else ""
    evicted = f", {len(ctx.evicted)} evicted" if ctx.evicted else ""
    return (
        f"<b>Context</b> turn {ctx.turn} · strategy {esc(_strategy_text(ctx))} · "
        f"{ctx.total_tokens:,} tokens{budget}{over} · {len(ctx.items)} items{evicted} · "
        f"<small>hash {esc(ctx.hash[:16])}</small>"
    )


def _rows(ctx: Context) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for s in ctx.sections:
        rows.append({"section": s.name, "item": "", "type": "", "tokens": s.tokens, "": ""})
        for it in s.items[:MAX_ITEM_ROWS]:
            rows.append(
                {
                    "section": "",
                    "item": it.label,
                    "type": it.type,
                    "tokens": it.tokens,
                    "": _flags(it),
                }
            )
        if len(s.items) > MAX_ITEM_ROWS:
            rows.append({"section": "", "item": f"… {len(s.items) - MAX_ITEM_ROWS} more items"})
    return rows


def context_html(ctx: Context) -> str:
    """The static HTML of a context: header, token bar, sections and items (bounded)."""
    bar = token_bar([(s.name, s.tokens) for s in ctx.sections], ctx.budget)
    table = html_table(_rows(ctx), ["section", "item", "type", "tokens", ""], max_rows=400)
    return f"<div>{_header(ctx)}{bar}{table}</div>"


class ContextView(widgets.VBox):
    """An assembled :class:`~ctxnb.context.Context`: sections in order, a token budget
    bar by section, per-item tokens, and the rendered text of any section or item.

    ``ContextView(context)`` shows one context as it was; :meth:`follow` shows what a
    live session would send now, redrawn whenever the session changes.

    Args:
        context: the context to show.

    Example:
        >>> from ctxnb.context import Context, ContextItem, Section
        >>> it = ContextItem("f1", "file", "a.py", 7, "x = 1\\n", "h1")
        >>> ctx = Context((Section("system", "Be brief.", 3), Section("active", "x = 1\\n", 7,
        ...                (it,))), 1, {"name": "keep-all"}, 100)
        >>> view = ContextView(ctx)
        >>> view.show("item:f1")
        >>> "x = 1" in view.text.value
        True
    """

    def __init__(self, context: Context, **kwargs: Any) -> None:
        self.context = context
        self.header = widgets.HTML()
        self.bar = widgets.HTML()
        self.table = widgets.HTML()
        self.picker = widgets.Dropdown(
            options=[], description="Show", layout=widgets.Layout(width="100%")
        )
        self.text = widgets.HTML()
        self.picker.observe(self._on_pick, names="value")
        self.session: Session | None = None
        self._strategy: ContextStrategy | None = None
        self._budget: int | None = None
        self._lock = threading.RLock()  # one redraw at a time
        # Apart from the redraw lock: a session change arrives with the session's lock
        # held, while a redraw holds this view's lock and waits for the session's.
        self._timer_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        super().__init__([self.header, self.bar, self.table, self.picker, self.text], **kwargs)
        self.update(context)

    def update(self, context: Context) -> None:
        """Show ``context`` instead (the picked section or item stays picked when the
        new context has it)."""
        with self._lock:
            self.context = context
            self.header.value = _header(context)
            self.bar.value = token_bar(
                [(s.name, s.tokens) for s in context.sections], context.budget
            )
            self.table.value = html_table(
                _rows(context), ["section", "item", "type", "tokens", ""], max_rows=400
            )
            options: list[tuple[str, str]] = []
            for s in context.sections:
                options.append((f"{s.name} ({s.tokens:,} tokens)", f"section:{s.name}"))
                for it in s.items[:MAX_ITEM_ROWS]:
                    label = f"  {s.name}: {it.label} ({it.tokens:,} tokens)"
                    options.append((label, f"item:{it.id}"))
            picked = self.picker.value
            keys = [k for _, k in options]
            self.picker.options = options  # resets the value: set it again below
            if picked in keys:
                self.picker.value = picked
                self.show(picked)  # the same key: the observer does not fire
            elif keys:
                self.show(keys[0])
            else:
                self.text.value = ""

    def _on_pick(self, change: dict[str, Any]) -> None:
        if change["new"] is not None:  # None while the options are replaced
            self.show(change["new"])

    @classmethod
    def follow(
        cls,
        session: Session,
        strategy: ContextStrategy | None = None,
        *,
        budget: int | None = None,
        **kwargs: Any,
    ) -> ContextView:
        """A view of what ``session`` would send now, kept up to date.

        The view assembles the session's context (``record=False``: nothing is stored)
        and assembles it again shortly after every change the session reports
        (:meth:`~ctxnb.session.core.Session.on_change`: a file changed on disk, an object
        added, activated, pinned, a chat turn ...), from a background thread as
        :class:`SessionView` does. :meth:`refresh` redraws at once.

        Args:
            session: the session to follow.
            strategy: the strategy to assemble under (default keep-all).
            budget: the token budget.

        Example:
            >>> import tempfile
            >>> from ctxnb import Workspace
            >>> from ctxnb.samples import copy_sample_workspace
            >>> ws = Workspace.open(copy_sample_workspace(tempfile.mkdtemp()))
            >>> s = ws.session("demo", rules=False)  # no AGENTS.md pinned: an empty start
            >>> view = ContextView.follow(s)
            >>> len(view.context.items)
            0
            >>> oid = s.add_path("AGENTS.md")
            >>> view.refresh()  # or wait a moment: the view follows by itself
            >>> [it.id for it in view.context.items] == [oid]
            True
        """
        view = cls(session.assemble(strategy, budget, record=False), **kwargs)
        view.session = session
        view._strategy, view._budget = strategy, budget
        ref = weakref.ref(view)

        def listener(_oid: str, _action: str) -> None:
            v = ref()
            if v is not None:  # the session outlives views the user threw away
                v._schedule()

        session.on_change(listener)
        return view

    def refresh(self) -> None:
        """Assemble the followed session's context again and show it (safe to call
        from any thread). A view made from one context shows that context: nothing to
        do."""
        if self.session is None:
            return
        with self._timer_lock:  # changes from now on schedule another redraw
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        with self._lock:
            self.update(self.session.assemble(self._strategy, self._budget, record=False))

    def _schedule(self) -> None:
        with self._timer_lock:
            if self._timer is None:
                self._timer = threading.Timer(FOLLOW_DELAY, self._refresh_later)
                self._timer.daemon = True
                self._timer.start()

    def _refresh_later(self) -> None:
        try:
            self.refresh()
        except Exception as exc:  # show, never raise in a timer thread
            self.header.value = f"<b style='color:#b00'>could not assemble: {esc(exc)}</b>"

    @property
    def sections(self) -> list[tuple[str, int]]:
        """``(name, tokens)`` of each section, in order."""
        return [(s.name, s.tokens) for s in self.context.sections]

    def text_of(self, key: str) -> str:
        """The rendered text of ``section:<name>`` or ``item:<id>``."""
        kind, _, name = key.partition(":")
        if kind == "section":
            return self.context.section(name).text
        for it in self.context.items:
            if it.id == name:
                return it.text
        raise KeyError(f"no section or item {key!r} in this context")

    def show(self, key: str) -> None:
        """Show the rendered text of ``section:<name>`` or ``item:<id>``."""
        if self.picker.value != key:
            self.picker.value = key  # the observer calls back here
            return
        self.text.value = pre(self.text_of(key) or "(empty)")

    @staticmethod
    def compare(a: Context, b: Context, *, labels: Sequence[str] = ("a", "b")) -> ContextDiffView:
        """What entered, left or changed between two contexts (two turns, or two
        strategies at one turn). The diff is also data: ``view.diff``.

        Example:
            >>> from ctxnb.context import Context, ContextItem, Section
            >>> def ctx(*items):
            ...     its = tuple(ContextItem(i, "file", i, 1, t, t) for i, t in items)
            ...     return Context((Section("active", "", len(its), its),), 0, {}, None)
            >>> ContextView.compare(ctx(("a", "1"), ("b", "1")), ctx(("b", "2"))).diff
            {'entered': [], 'left': ['a'], 'changed': ['b']}
        """
        return ContextDiffView(a, b, labels=labels)

    def _repr_html_(self) -> str:
        return context_html(self.context)

    def __repr__(self) -> str:
        return f"<ContextView {self.context!r}>"


class ContextDiffView(widgets.VBox):
    """Two contexts side by side: tokens per section, and the items that entered, left
    or changed (same id, different rendered text), with a unified diff of any of them.

    Attributes:
        diff: ``{"entered": [...], "left": [...], "changed": [...]}`` by item id.
        paths: the same by item label: the agent-visible path of a file, the tool and
            arguments of a tool call; what a reader wants to see.
    """

    def __init__(
        self, a: Context, b: Context, *, labels: Sequence[str] = ("a", "b"), **kwargs: Any
    ) -> None:
        self.a, self.b = a, b
        self.labels = (str(labels[0]), str(labels[1]))
        self.diff = context_diff(a, b)
        names = {it.id: it.label for it in (*a.items, *b.items)}
        self.paths = {kind: [names[i] for i in ids] for kind, ids in self.diff.items()}
        self.summary = widgets.HTML(self._summary_html())
        options: list[tuple[str, str]] = []
        items_a = {it.id: it for it in a.items}
        items_b = {it.id: it for it in b.items}
        for kind in ("changed", "entered", "left"):
            for oid in self.diff[kind]:
                it = items_b.get(oid) or items_a[oid]
                options.append((f"{kind}: {it.label}", f"item:{oid}"))
        for s in b.sections:
            if s.name != "active" and s.hash != _section_hash(a, s.name):
                options.append((f"section {s.name} changed", f"section:{s.name}"))
        self.picker = widgets.Dropdown(
            options=options, description="Diff of", layout=widgets.Layout(width="100%")
        )
        self.diff_html = widgets.HTML()
        self.picker.observe(lambda ch: self.show(ch["new"]), names="value")
        super().__init__([self.summary, self.picker, self.diff_html], **kwargs)
        if options:
            self.show(options[0][1])
        else:
            self.diff_html.value = "<p><i>the two contexts have the same items</i></p>"

    def text_diff(self, key: str) -> str:
        """A unified diff of ``item:<id>`` or ``section:<name>`` from ``a`` to ``b``."""
        kind, _, name = key.partition(":")
        if kind == "item":
            return item_text_diff(self.a, self.b, name, labels=self.labels)
        ta = _section_text(self.a, name)
        tb = _section_text(self.b, name)
        return "".join(
            difflib.unified_diff(
                ta.splitlines(keepends=True),
                tb.splitlines(keepends=True),
                fromfile=self.labels[0],
                tofile=self.labels[1],
            )
        )

    def show(self, key: str) -> None:
        """Show the diff of ``item:<id>`` or ``section:<name>``."""
        if self.picker.value != key:
            self.picker.value = key
            return
        self.diff_html.value = diff_html(self.text_diff(key))

    def _summary_html(self) -> str:
        la, lb = (esc(x) for x in self.labels)
        ta, tb = self.a.tokens_by_section(), self.b.tokens_by_section()
        names = list(dict.fromkeys([*ta, *tb]))
        sec_rows = [
            {"section": n, la: ta.get(n, 0), lb: tb.get(n, 0), "Δ": tb.get(n, 0) - ta.get(n, 0)}
            for n in names
        ]
        sec_rows.append(
            {
                "section": "total",
                la: self.a.total_tokens,
                lb: self.b.total_tokens,
                "Δ": self.b.total_tokens - self.a.total_tokens,
            }
        )
        items_a = {it.id: it for it in self.a.items}
        items_b = {it.id: it for it in self.b.items}
        rows = []
        for kind in ("entered", "left", "changed"):
            for oid in self.diff[kind]:
                ia, ib = items_a.get(oid), items_b.get(oid)
                it = ib or ia
                assert it is not None
                rows.append(
                    {
                        "": kind,
                        "item": it.label,
                        "type": it.type,
                        la: ia.tokens if ia else "",
                        lb: ib.tokens if ib else "",
                    }
                )
        counts = ", ".join(f"{len(v)} {k}" for k, v in self.diff.items())
        head = (
            f"<b>Context diff</b> {la} (turn {self.a.turn}, {esc(_strategy_text(self.a))}) → "
            f"{lb} (turn {self.b.turn}, {esc(_strategy_text(self.b))}): {counts}"
        )
        scale = max(self.a.total_tokens, self.b.total_tokens)
        bars = (
            "<div>"
            + token_bar(
                [(s.name, s.tokens) for s in self.a.sections],
                self.a.budget,
                label=self.labels[0],
                scale=scale,
            )
            + token_bar(
                [(s.name, s.tokens) for s in self.b.sections],
                self.b.budget,
                label=self.labels[1],
                scale=scale,
            )
            + "</div>"
        )
        items = (
            html_table(rows, ["", "item", "type", la, lb], max_rows=MAX_ITEM_ROWS)
            if rows
            else "<p><i>no items entered, left or changed</i></p>"
        )
        return head + bars + html_table(sec_rows, ["section", la, lb, "Δ"]) + items

    def _repr_html_(self) -> str:
        return f"<div>{self._summary_html()}</div>"

    def __repr__(self) -> str:
        return f"<ContextDiffView {self.paths}>"


def _section_text(ctx: Context, name: str) -> str:
    try:
        return ctx.section(name).text
    except KeyError:
        return ""


def _section_hash(ctx: Context, name: str) -> str | None:
    try:
        return ctx.section(name).hash
    except KeyError:
        return None
