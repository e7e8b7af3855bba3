"""What a :class:`~ctxnb.widgets.replay_view.ReplayView` keeps, and its small drawings.

Per strategy and step the view keeps measures (``_Series``) and each item's state
(:class:`ItemState`: in full, masked, truncated, evicted), read once from the contexts;
the badges and the stretched SVG frame of its charts are drawn from them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..context import SECTION_ORDER as SECTIONS
from .static import esc

if TYPE_CHECKING:
    from ..context import Context, ContextChange
    from ..replay.model import Step


STATE_COLORS = {
    "in full": "#2e7d32",
    "masked": "#b26a00",
    "truncated": "#6a1b9a",
    "evicted": "#b00020",
}


@dataclass(frozen=True)
class ItemState:
    """One content object at one step under one strategy.

    Attributes:
        label: the agent-visible path of a file, or the tool call.
        type: ``file`` or ``toolcall``.
        tokens: its tokens in the context (0 when evicted).
        state: ``in full``, ``masked``, ``truncated`` or ``evicted``.
    """

    label: str
    type: str
    tokens: int
    state: str


def item_states(
    ctx: Context,
    names: dict[str, tuple[str, str]],
    labels: Mapping[str, str] | None = None,
) -> tuple[ItemState, ...]:
    """The state of every item a context holds or left out.

    ``names`` maps object ids to ``(label, type)``; it learns the items of ``ctx``, so
    an object evicted later is still named by its path. ``labels`` names some objects
    better than their context label does (an unparsed step's call, ``unknown()``).
    """
    labels = labels or {}
    out = []
    for it in ctx.items:
        label = labels.get(it.id, it.label)
        names[it.id] = (label, it.type)
        state = "masked" if it.masked else "truncated" if it.truncated else "in full"
        out.append(ItemState(label, it.type, it.tokens, state))
    for oid in ctx.evicted:
        label, kind = names.get(oid, (f"object {oid[:8]}", "?"))
        out.append(ItemState(label, kind, 0, "evicted"))
    return tuple(out)


@dataclass
class _Series:
    """One strategy's measures, step by step (lists indexed by position)."""

    sections: dict[str, list[int]] = field(default_factory=lambda: {s: [] for s in SECTIONS})
    total: list[int] = field(default_factory=list)
    cache_read: list[int] = field(default_factory=list)
    new: list[int] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    counts: list[tuple[int, int, int, int]] = field(default_factory=list)
    losses: list[tuple[int, int]] = field(default_factory=list)
    budget: list[int | None] = field(default_factory=list)


def _num(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def unparsed_label(step: Step) -> str:
    """What an unparsed step's tool call is called in a view: its step and why the
    converter could not read it (the context names it ``unknown()``)."""
    why = step.note or (step.action.raw or "").strip().split("\n", 1)[0]
    if len(why) > 80:
        why = why[:79] + "…"
    return f"step {step.index}, not parsed" + (f": {why}" if why else "")


def _lossy(changes: Iterable[ContextChange]) -> tuple[ContextChange, ...]:
    """The changes a view keeps: not the items kept in full (every step has many)."""
    return tuple(c for c in changes if c.op != "kept")


def _counts(states: Iterable[ItemState]) -> tuple[int, int, int, int]:
    c = {"in full": 0, "masked": 0, "truncated": 0, "evicted": 0}
    for i in states:
        c[i.state] = c.get(i.state, 0) + 1
    return c["in full"], c["masked"], c["truncated"], c["evicted"]


def _badge(state: str) -> str:
    color = STATE_COLORS.get(state, "#555")
    return (
        f'<span style="color:#fff;background:{color};border-radius:3px;padding:0 4px;'
        f'font-size:11px;white-space:nowrap">{html.escape(state)}</span>'
    )


def _svg(n: int, height: int, body: str, title: str) -> str:
    # Stretched to the full width, so step p sits at p/n of it, as the step marker does.
    return (
        f'<svg role="img" aria-label="{esc(title)}" viewBox="0 0 {n} {height}" '
        f'preserveAspectRatio="none" style="display:block;width:100%;height:{height}px;'
        f'background:#fafafa;border-bottom:1px solid #ccc">{body}</svg>'
    )


# The width of the y axis's labels left of every chart; the step marker keeps the same
# gutter, so that it stays above its bar.
AXIS_W = "4.5em"
_AXIS_TEXT = "font-size:10px;line-height:1;color:#555"


def _compact(n: int) -> str:
    """A token count short enough for an axis label: 950, 11.3k, 2.1M."""
    for div, unit in ((1_000_000, "M"), (1_000, "k")):
        if n >= div:
            return f"{n / div:.1f}".removesuffix(".0") + unit
    return str(n)


def _with_y_axis(svg: str, height: int, top: int) -> str:
    """``svg`` with its y axis: ``top`` tokens at the top, 0 at the bottom."""
    return (
        '<div style="display:flex;align-items:stretch">'
        f'<div class="ctxnb-y-axis" style="flex:0 0 {AXIS_W};display:flex;'
        "flex-direction:column;justify-content:space-between;text-align:right;"
        f'padding-right:4px;box-sizing:border-box;height:{height}px;{_AXIS_TEXT}">'
        f"<span>{_compact(top)}</span><span>0</span></div>"
        f'<div style="flex:1 1 auto;min-width:0;border-left:1px solid #888">{svg}</div></div>'
    )


def _x_axis(steps: list[int]) -> str:
    """The step numbers under the bars: the first, the last and three between."""
    n = len(steps)
    picks = sorted({0, n - 1, *(round(k * (n - 1) / 4) for k in range(1, 4))})
    ticks = "".join(
        f'<span style="position:absolute;left:{100 * (p + 0.5) / n:.3f}%;'
        f'transform:translateX(-50%)">{steps[p]}</span>'
        for p in picks
    )
    return (
        f'<div class="ctxnb-x-axis" style="display:flex;{_AXIS_TEXT}">'
        f'<div style="flex:0 0 {AXIS_W};text-align:right;padding-right:4px;'
        'box-sizing:border-box">step</div>'
        f'<div style="flex:1 1 auto;position:relative;height:1.3em">{ticks}</div></div>'
    )
