"""ReplayView: step through a replayed (or live) run, two strategies side by side.

The view keeps, per strategy and step, only what it draws: the tokens of each section,
the cache-readable and new tokens and the dollars when the frame has them, and each
item's state (in full, masked, truncated, evicted). Moving the slider renders one HTML
payload for the step from these arrays; the per-step bar chart over the whole run is
drawn once per pair of strategies. Nothing is recomputed from contexts after the view
is built, so a step stays fast on long runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._util.plotting import CACHE_COLORS, SECTION_COLORS
from ..context import SECTION_ORDER as SECTIONS
from ..context._changes import changes_html
from ._ipw import widgets
from ._replay_items import (
    AXIS_W,
    ItemState,
    _badge,
    _counts,
    _lossy,
    _num,
    _Series,
    _svg,
    _with_y_axis,
    _x_axis,
    item_states,
    unparsed_label,
)
from .static import MONO, TEXT, esc, token_bar

if TYPE_CHECKING:
    import pandas as pd

    from ..context import Context, ContextChange
    from ..replay.model import Step, Trajectory
    from ..strategies.builtin import ContextStrategy

__all__ = ["ItemState", "ReplayView"]

MAX_ITEMS = 60  # item rows per strategy and step; the rest are counted
_CHART_H = 70  # viewBox height of one strategy's section bars
_CACHE_H = 26  # and of its cache-readable / new bars


class ReplayView(widgets.VBox):
    """A replayed run, step by step: a slider (and a play button) over the steps, the
    context under two strategies side by side, per-step stacked token bars for the whole
    run (system, metadata, active, chat; cache-readable against new tokens when the
    replay measured them), and which items were masked, truncated or evicted.

    The caption names the run's own step number (as the frame, :meth:`show` and
    :meth:`items_at` do); the charts have a y axis in tokens and share an x axis of step
    numbers. An unparsed step's tool call, ``unknown()`` in the context, is listed as
    ``step N, not parsed: <the converter's reason>``.

    Build it with :meth:`from_trajectory` (item lists included), from a replay frame
    alone (sizes and counts), or empty with :meth:`live` and :meth:`add_step` during a
    live run.

    Args:
        frame: a replay frame (:func:`~ctxnb.replay.runner.replay`,
            :func:`~ctxnb.replay.experiment.run_experiment`).
        trajectory: which run of the frame to show (default: the first).
        strategies: the two strategies shown side by side (default: the first two);
            any strategy of the frame can be picked in the view.
        items: ``{(strategy, step): item states}`` as :meth:`from_trajectory` records.
        step: the step shown first (default: the first).
        changes: ``{(strategy, step): context changes}`` (what was masked, truncated,
            summarized or evicted, with tokens before and after), shown per step.
        compactions: ``{step: compacted tool results}`` of the run's compactions (which
            survived in the summary; see :mod:`ctxnb.replay.compaction`).

    Example:
        >>> from ctxnb.replay import Trajectory, Step, Action, FileTouch
        >>> from ctxnb.strategies import KeepAll, ObservationMasking
        >>> steps = [Step(index=i, action=Action(tool="read", args={"path": f"f{i}.py"}),
        ...               observation="x = 1\\n" * 40,
        ...               files=[FileTouch(path=f"f{i}.py", op="read", content="x\\n")])
        ...          for i in range(4)]
        >>> run = Trajectory(id="demo", source_format="ctxnb", task="Fix it", steps=steps)
        >>> view = ReplayView.from_trajectory(run, [KeepAll(), ObservationMasking(1)])
        >>> view.show(3)
        >>> sorted({i.state for i in view.items_at("observation-masking", 3)})
        ['in full', 'masked']
    """

    def __init__(
        self,
        frame: pd.DataFrame | None = None,
        *,
        trajectory: str | None = None,
        strategies: Sequence[str] | None = None,
        items: Mapping[tuple[str, int], Sequence[ItemState]] | None = None,
        step: int | None = None,
        changes: Mapping[tuple[str, int], Sequence[ContextChange]] | None = None,
        compactions: Mapping[int, Sequence[ContextChange]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.trajectory = trajectory
        self.changes = {k: _lossy(v) for k, v in (changes or {}).items()}
        self.compactions = {k: tuple(v) for k, v in (compactions or {}).items()}
        self.steps: list[int] = []
        self.tools: list[str] = []
        self.series: dict[str, _Series] = {}
        self.items: dict[tuple[str, int], tuple[ItemState, ...]] = {
            k: tuple(v) for k, v in (items or {}).items()
        }
        self.has_cache = False
        self.has_cost = False
        self._names: dict[str, tuple[str, str]] = {}
        self._trackers: Any = None
        if frame is not None:
            self._load_frame(frame)
        labels = list(self.series)
        chosen = list(strategies or labels[:2])
        for s in chosen:
            if labels and s not in self.series:
                raise KeyError(f"strategy {s!r} is not in the frame; it has {labels}")
        self.left = widgets.Dropdown(options=labels, value=chosen[0] if chosen else None)
        self.right = widgets.Dropdown(
            options=labels, value=chosen[1] if len(chosen) > 1 else (chosen[0] if chosen else None)
        )
        for dd in (self.left, self.right):
            dd.layout = widgets.Layout(width="auto")
        last = max(0, len(self.steps) - 1)
        # The slider counts positions; the step number is in the caption below it (a
        # run's numbers need not start at 0 or be contiguous), so it shows no number.
        self.slider = widgets.IntSlider(
            value=0, min=0, max=last, description="step", readout=False, continuous_update=True
        )
        self.slider.layout = widgets.Layout(width="60%")
        self.play = widgets.Play(value=0, min=0, max=last, interval=400)
        # The slider leads: a browser link copies its source to its target when the view
        # appears, so the step chosen in Python stays the one shown.
        widgets.jslink((self.slider, "value"), (self.play, "value"))
        self.prev_button = widgets.Button(
            description="◀", tooltip="previous step", layout=widgets.Layout(width="2.8em")
        )
        self.next_button = widgets.Button(
            description="▶", tooltip="next step", layout=widgets.Layout(width="2.8em")
        )
        self.prev_button.on_click(lambda _: self._move(-1))
        self.next_button.on_click(lambda _: self._move(1))
        self.header = widgets.HTML()
        self.chart = widgets.HTML()
        self.detail = widgets.HTML()
        self.detail.add_class("ctxnb-replay-step")
        self.chart.add_class("ctxnb-replay-chart")
        self.slider.observe(lambda ch: self._render_step(), names="value")
        for dd in (self.left, self.right):
            dd.observe(lambda ch: self._render_all(), names="value")
        controls = widgets.HBox(
            [self.prev_button, self.next_button, self.play, self.slider, self.left, self.right]
        )
        super().__init__([self.header, controls, self.chart, self.detail], **kwargs)
        self.add_class("ctxnb-replay-view")
        if step is not None:
            self.slider.value = self._position(step)
        self._render_all()

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def from_trajectory(
        cls,
        trajectory: Trajectory | str | os.PathLike[str],
        strategies: Sequence[ContextStrategy] | None = None,
        *,
        budget: int | None = None,
        token_counter: Any = None,
        shown: Sequence[str] | None = None,
        **replay_options: Any,
    ) -> ReplayView:
        """Replay a run under ``strategies`` and show it with every step's item lists.

        Args:
            trajectory: a :class:`~ctxnb.replay.model.Trajectory` or a file
                :func:`ctxnb.replay.load` reads.
            strategies: the strategies (default: the standard grid).
            budget: the token budget per context.
            token_counter: as for :func:`~ctxnb.replay.runner.replay`.
            shown: the two strategy labels shown first.
            **replay_options: passed to :func:`~ctxnb.replay.runner.replay`
                (``files``, ``hidden_prompt_tokens``, ``model``, ``prices``).
        """
        import dataclasses

        from ..replay._replayer import toolcall_id
        from ..replay.converters import load
        from ..replay.runner import default_strategies, replay

        run = trajectory if not isinstance(trajectory, str | os.PathLike) else load(trajectory)
        chosen = list(strategies) if strategies is not None else default_strategies()
        # An unparsed step's call is "unknown()" in the context: name its step and why.
        labels = {
            toolcall_id(run.id, s.index): unparsed_label(s)
            for s in run.steps
            if s.action.tool == "unknown"
        }
        names: dict[str, tuple[str, str]] = {}
        items: dict[tuple[str, int], tuple[ItemState, ...]] = {}
        changes: dict[tuple[str, int], tuple[ContextChange, ...]] = {}
        compactions: dict[int, list[ContextChange]] = {}

        def keep(step: Step, label: str, ctx: Context) -> None:
            items[(label, step.index)] = item_states(ctx, names, labels)
            changes[(label, step.index)] = tuple(
                dataclasses.replace(c, label=labels[c.id]) if c.id in labels else c
                for c in _lossy(ctx.changes)
            )

        def compacted(step: Step, dropped: list[ContextChange]) -> None:
            compactions[step.index] = dropped

        # One replay gives the measures, the item lists and the compactions.
        frame = replay(
            run,
            chosen,
            budget,
            token_counter,
            on_context=keep,
            on_compaction=compacted,
            **replay_options,
        )
        return cls(
            frame,
            trajectory=run.id,
            strategies=shown,
            items=items,
            changes=changes,
            compactions=compactions,
        )

    @classmethod
    def live(cls, strategies: Sequence[str], *, title: str = "live run") -> ReplayView:
        """An empty view that :meth:`add_step` fills while an agent runs.

        Example:
            >>> view = ReplayView.live(["keep-all", "masking"])
            >>> len(view.steps)
            0
        """
        view = cls(trajectory=title)
        for s in strategies:
            view.series[s] = _Series()
        view.left.options = view.right.options = list(strategies)
        view.left.value = strategies[0]
        view.right.value = strategies[1] if len(strategies) > 1 else strategies[0]
        view._render_all()
        return view

    def add_step(
        self,
        contexts: Mapping[str, Context],
        *,
        tool: str = "",
        follow: bool = True,
    ) -> None:
        """Append one step of a live run: the context each strategy assembled.

        Cache-readable tokens are measured as the replay does (the prompt's common
        prefix with the same strategy's previous prompt).

        Args:
            contexts: strategy label -> the context it assembled for this step.
            tool: the action the step took, for the caption.
            follow: move the slider to the new step.
        """
        from ..replay.frame import PromptTracker

        if self._trackers is None:
            self._trackers = PromptTracker()
        step = (self.steps[-1] + 1) if self.steps else 0
        self.steps.append(step)
        self.tools.append(tool)
        for label, ctx in contexts.items():
            s = self.series.setdefault(label, _Series())
            self._pad(s, len(self.steps) - 1)
            by = ctx.tokens_by_section()
            for name in SECTIONS:
                s.sections[name].append(by.get(name, 0))
            s.total.append(ctx.total_tokens)
            shared = self._trackers.shared(label, ctx, 0)
            s.cache_read.append(shared)
            s.new.append(ctx.total_tokens - shared)
            s.cost.append(math.nan)
            states = item_states(ctx, self._names)
            self.items[(label, step)] = states
            self.changes[(label, step)] = _lossy(ctx.changes)
            s.counts.append(_counts(states))
            s.losses.append((0, 0))
            s.budget.append(ctx.budget)
        self.has_cache = True
        for s in self.series.values():
            self._pad(s, len(self.steps))
        labels = list(self.series)
        if list(self.left.options) != labels:
            self.left.options = self.right.options = labels
        last = len(self.steps) - 1
        self.slider.max = self.play.max = last
        if follow:
            with self.hold_sync():
                self.slider.value = last
        self._render_all()

    def _pad(self, s: _Series, n: int) -> None:
        """A strategy missing at some steps draws nothing there."""
        while len(s.total) < n:
            for name in SECTIONS:
                s.sections[name].append(0)
            s.total.append(0)
            s.cache_read.append(0)
            s.new.append(0)
            s.cost.append(math.nan)
            s.counts.append((0, 0, 0, 0))
            s.losses.append((0, 0))
            s.budget.append(None)

    def _load_frame(self, frame: pd.DataFrame) -> None:
        if frame.empty:
            raise ValueError("the replay frame is empty: nothing to step through")
        runs = list(dict.fromkeys(frame["trajectory"].astype(str)))
        if self.trajectory is None:
            self.trajectory = runs[0]
        elif self.trajectory not in runs:
            raise KeyError(f"trajectory {self.trajectory!r} is not in the frame; it has {runs}")
        df = frame[frame["trajectory"].astype(str) == self.trajectory]
        df = df.sort_values("step", kind="stable")
        self.steps = [int(v) for v in dict.fromkeys(df["step"].tolist())]
        pos = {s: n for n, s in enumerate(self.steps)}
        first = df.drop_duplicates("step")
        self.tools = [str(t) for t in first["tool"].tolist()]
        self.has_cache = "cache_read_tokens" in df.columns and "new_tokens" in df.columns
        self.has_cost = "cost_usd" in df.columns and df["cost_usd"].notna().any()
        cols = {c: df[c].tolist() for c in df.columns}
        n = len(self.steps)
        for i, label in enumerate(cols["strategy"]):
            label = str(label)
            s = self.series.get(label)
            if s is None:
                s = self.series[label] = _Series()
                self._pad(s, n)
            p = pos[int(cols["step"][i])]
            for name in SECTIONS:
                s.sections[name][p] = int(cols[f"tokens_{name}"][i])
            s.total[p] = int(cols["total_tokens"][i])
            if self.has_cache:
                s.cache_read[p] = int(cols["cache_read_tokens"][i])
                s.new[p] = int(cols["new_tokens"][i])
            if self.has_cost:
                s.cost[p] = _num(cols["cost_usd"][i]) or math.nan
            s.counts[p] = (
                int(cols["items_active"][i]) - int(cols["items_truncated"][i]),
                int(cols["items_masked"][i]),
                int(cols["items_truncated"][i]),
                int(cols["items_evicted"][i]),
            )
            s.losses[p] = (int(cols["re_reads"][i]), int(cols["stale_reads"][i]))
            b = _num(cols["budget"][i]) if "budget" in cols else None
            s.budget[p] = int(b) if b is not None else None

    # -- reading ----------------------------------------------------------------------------
    def items_at(self, strategy: str, step: int) -> tuple[ItemState, ...]:
        """The items of ``strategy``'s context at ``step`` (empty without item lists)."""
        return self.items.get((strategy, step), ())

    def changes_at(self, strategy: str, step: int) -> tuple[ContextChange, ...]:
        """What ``strategy`` masked, truncated, summarized or evicted at ``step``."""
        return self.changes.get((strategy, step), ())

    @property
    def step(self) -> int:
        """The step shown."""
        return self.steps[self.slider.value] if self.steps else 0

    def show(self, step: int) -> None:
        """Move to ``step`` (a step number of the run)."""
        self.slider.value = self._position(step)

    def _move(self, by: int) -> None:
        if self.steps:
            self.slider.value = min(max(self.slider.value + by, 0), len(self.steps) - 1)

    def _position(self, step: int) -> int:
        try:
            return self.steps.index(step)
        except ValueError:
            raise KeyError(
                f"step {step} is not in this run (steps {self.steps[:1]}…{self.steps[-1:]})"
            ) from None

    def _pair(self) -> list[str]:
        pair = [v for v in (self.left.value, self.right.value) if v is not None]
        return list(dict.fromkeys(pair))

    # -- drawing ----------------------------------------------------------------------------
    def _render_all(self) -> None:
        self.header.value = self._header_html()
        self.chart.value = self._chart_html()
        self._render_step()

    def _render_step(self) -> None:
        self.detail.value = self.step_html(self.slider.value)

    def _header_html(self) -> str:
        cols = "sections" + (", cache-readable and new tokens" if self.has_cache else "")
        return (
            f'<div style="{TEXT}"><b>Replay</b> {esc(self.trajectory or "")} · '
            f"{len(self.steps)} steps · {len(self.series)} strategies · per-step bars: "
            f"{cols}</div>"
        )

    def _scale(self, pair: Sequence[str]) -> int:
        return max([1, *(max(self.series[p].total, default=0) for p in pair)])

    def _chart_html(self) -> str:
        pair = self._pair()
        n = len(self.steps)
        if not n or not pair:
            return '<div style="color:#777"><i>no steps yet</i></div>'
        scale = self._scale(pair)
        rows = []
        for label in pair:
            s = self.series[label]
            paths = []
            for name in SECTIONS:
                d = []
                for p in range(n):
                    below = sum(s.sections[q][p] for q in SECTIONS[: SECTIONS.index(name)])
                    h = s.sections[name][p] * _CHART_H / scale
                    if h > 0:
                        y = _CHART_H - (below * _CHART_H / scale) - h
                        d.append(f"M{p + 0.1:.2f} {y:.2f}h0.8v{h:.2f}h-0.8z")
                if d:
                    paths.append(f'<path fill="{SECTION_COLORS[name]}" d="{"".join(d)}"/>')
            bars = _with_y_axis(
                _svg(n, _CHART_H, "".join(paths), f"{label}: tokens per step by section"),
                _CHART_H,
                scale,
            )
            cache = ""
            if self.has_cache:
                cp = []
                for key, values in (("cache-readable", s.cache_read), ("new", s.new)):
                    d = []
                    for p in range(n):
                        base = s.cache_read[p] if key == "new" else 0
                        h = values[p] * _CACHE_H / scale
                        if h > 0:
                            y = _CACHE_H - base * _CACHE_H / scale - h
                            d.append(f"M{p + 0.1:.2f} {y:.2f}h0.8v{h:.2f}h-0.8z")
                    if d:
                        cp.append(f'<path fill="{CACHE_COLORS[key]}" d="{"".join(d)}"/>')
                cache = _with_y_axis(
                    _svg(n, _CACHE_H, "".join(cp), f"{label}: cache-readable and new tokens"),
                    _CACHE_H,
                    scale,
                )
            rows.append(
                f'<div style="{TEXT}"><b>{esc(label)}</b> <small>peak '
                f"{max(s.total, default=0):,} tokens</small></div>{bars}{cache}"
            )
        legend = " · ".join(
            f'<span style="white-space:nowrap"><span style="color:{SECTION_COLORS[k]}">■'
            f"</span> {k}</span>"
            for k in SECTIONS
        )
        if self.has_cache:
            legend += " · " + " · ".join(
                f'<span style="white-space:nowrap"><span style="color:{c}">■</span> {k}</span>'
                for k, c in CACHE_COLORS.items()
            )
        return (
            f'<div class="ctxnb-replay-bars">{"".join(rows)}{_x_axis(self.steps)}'
            f'<div style="font-size:12px;line-height:1.45">{legend} · '
            f"one bar per step, tokens on the same scale for both</div></div>"
        )

    def step_html(self, position: int) -> str:
        """The HTML of one step (by position 0…n-1): the payload the slider sends."""
        pair = self._pair()
        n = len(self.steps)
        if not n or not pair:
            return ""
        position = min(max(position, 0), n - 1)
        step = self.steps[position]
        # Above the bars: the same gutter as the charts' y axis, then one slot per step.
        marker = (
            f'<div style="margin:0 0 4px {AXIS_W}"><div style="position:relative;height:8px">'
            f'<div style="position:absolute;left:{100 * position / n:.3f}%;'
            f'width:max(2px,{100 / n:.3f}%);height:8px;background:#222"></div></div></div>'
        )
        tool = esc(self.tools[position]) if position < len(self.tools) else ""
        cols = "".join(self._column_html(label, position, step) for label in pair)
        return (
            # The run's own step number (the frame's, goto's and show's), and the range
            # it is in: a second count from 1 beside it read as another step.
            f'<div style="{TEXT}">{marker}<div><b>step {step}</b> '
            f"<small>(steps {self.steps[0]}–{self.steps[-1]})</small>"
            f"{' · action ' + tool if tool else ''}</div>{self._compaction_html(step)}"
            f'<div style="display:grid;grid-template-columns:repeat({len(pair)},minmax(0,1fr));'
            f'gap:12px">{cols}</div></div>'
        )

    def _column_html(self, label: str, p: int, step: int) -> str:
        s = self.series[label]
        sections = [(name, s.sections[name][p]) for name in SECTIONS]
        bar = token_bar(sections, s.budget[p], label=label, scale=self._scale(self._pair()))
        extra = ""
        if self.has_cache:
            total = max(1, s.total[p])
            extra += token_bar(
                [("cache-readable", s.cache_read[p]), ("new", s.new[p])],
                scale=self._scale(self._pair()),
                colors=CACHE_COLORS,
            ).replace(
                "tokens: ",
                f"tokens, {100 * s.cache_read[p] / total:.0f}% cache-readable: ",
                1,
            )
        if self.has_cost and not math.isnan(s.cost[p]):
            so_far = sum(c for c in s.cost[: p + 1] if not math.isnan(c))
            extra += f"<div>${s.cost[p]:.4f} this step · ${so_far:.4f} so far</div>"
        full, masked, truncated, evicted = s.counts[p]
        re_reads, stale = s.losses[p]
        counts = (
            f"<div>{_badge('in full')} {full} · {_badge('masked')} {masked} · "
            f"{_badge('truncated')} {truncated} · {_badge('evicted')} {evicted}"
            f" · re-reads {re_reads} · stale reads {stale}</div>"
        )
        changes = ""
        if (label, step) in self.changes:
            changes = (
                "<details><summary>context changes</summary>"
                f"{changes_html(self.changes[(label, step)])}</details>"
            )
        return f"<div>{bar}{extra}{counts}{changes}{self._items_html(label, p, step)}</div>"

    def _compaction_html(self, step: int) -> str:
        dropped = self.compactions.get(step)
        if dropped is None:
            return ""
        kept = sum(1 for c in dropped if c.survived)
        return (
            f"<details open><summary><b>compaction</b>: {len(dropped)} tool results left the "
            f"context; {kept} survived in the summary</summary>{changes_html(dropped)}</details>"
        )

    def _items_html(self, label: str, p: int, step: int) -> str:
        states = self.items.get((label, step))
        if states is None:
            if not self.items:
                return (
                    "<div style='color:#777'><small>item lists: build the view with "
                    "ReplayView.from_trajectory</small></div>"
                )
            return ""
        prev_step = self.steps[p - 1] if p > 0 else None
        before = {
            (i.label, i.type): i.state
            for i in (self.items.get((label, prev_step), ()) if prev_step is not None else ())
        }
        order = {"evicted": 0, "masked": 1, "truncated": 2, "in full": 3}
        ranked = sorted(states, key=lambda i: (order.get(i.state, 4), i.label))
        rows = []
        for it in ranked[:MAX_ITEMS]:
            was = before.get((it.label, it.type))
            change = "" if was == it.state else ("new" if was is None else f"was {was}")
            rows.append(
                f'<tr><td>{_badge(it.state)}</td><td style="word-break:break-all;{MONO}">'
                f"{esc(it.label)}</td><td>{esc(it.type)}</td>"
                f"<td style='text-align:right'>{it.tokens:,}</td>"
                f"<td><small>{esc(change)}</small></td></tr>"
            )
        more = len(ranked) - MAX_ITEMS
        tail = f"<div><small>… {more} more items</small></div>" if more > 0 else ""
        return (
            f'<table class="ctxnb-table" style="{TEXT};width:100%"><thead><tr><th>state</th>'
            "<th>item</th><th>type</th><th>tokens</th><th></th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{tail}"
        )

    def _repr_html_(self) -> str:
        return (
            f'<div class="ctxnb-replay-view">{self._header_html()}{self._chart_html()}'
            f"{self.step_html(self.slider.value)}</div>"
        )

    def __repr__(self) -> str:
        return (
            f"<ReplayView {self.trajectory!r} steps={len(self.steps)} "
            f"strategies={list(self.series)}>"
        )
