"""Contexts as frames, and the ready plots over contexts and traces."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._util.plotting import SECTION_COLORS, SERIES_COLORS, new_axes, outside_legend, styled
from ..context import SECTION_ORDER as SECTIONS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..context import Context

__all__ = [
    "contexts_frame",
    "plot_context_composition",
    "plot_mutations_per_intent",
    "plot_tokens_per_turn",
]


# -- contexts -----------------------------------------------------------------------------------
def contexts_frame(contexts: Iterable[Context], *, labels: Sequence[str] | None = None) -> Any:
    """Tokens per section (and per item type) of each context, one row per context.

    Columns: ``label``, ``turn``, ``strategy``, ``system``, ``metadata``, ``active``,
    ``chat``, ``total``, ``budget``, ``files``, ``toolcalls``, ``items``.

    Example:
        >>> from ctxnb.context import Context, Section
        >>> c = Context((Section("system", "hi", 2), Section("chat", "x", 1)), 1, {"name": "k"},
        ...             None)
        >>> contexts_frame([c])[["turn", "system", "chat", "total"]].values.tolist()
        [[1, 2, 1, 3]]
    """
    rows = []
    for n, c in enumerate(contexts):
        by = c.tokens_by_section()
        items = c.items if any(s.name == "active" for s in c.sections) else []
        rows.append(
            {
                "label": labels[n] if labels is not None else f"turn {c.turn}",
                "turn": c.turn,
                "strategy": (c.strategy or {}).get("name"),
                **{s: by.get(s, 0) for s in SECTIONS},
                "total": c.total_tokens,
                "budget": c.budget,
                "files": sum(it.tokens for it in items if it.type == "file"),
                "toolcalls": sum(it.tokens for it in items if it.type == "toolcall"),
                "items": len(items),
            }
        )
    return pd.DataFrame(rows)


def _frame(contexts_or_frame: Any, labels: Sequence[str] | None = None) -> pd.DataFrame:
    if isinstance(contexts_or_frame, pd.DataFrame):
        return contexts_or_frame
    return contexts_frame(list(contexts_or_frame), labels=labels)


@styled
def plot_tokens_per_turn(
    contexts_or_frame: Iterable[Context] | pd.DataFrame,
    *,
    labels: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Stacked bars: tokens of each section, one bar per context.

    Args:
        contexts_or_frame: contexts, or a frame from :func:`contexts_frame`.
        labels: bar labels (default ``turn N``; pass strategy names to compare them).
        ax: draw into these axes (default: a new figure).

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from ctxnb.context import Context, Section
        >>> c = Context((Section("system", "hi", 2), Section("chat", "x", 1)), 1, {}, None)
        >>> len(plot_tokens_per_turn([c, c]).patches)
        8
    """
    df = _frame(contexts_or_frame, labels)
    ax = new_axes(ax)
    x = np.arange(len(df))
    bottom = np.zeros(len(df))
    for s in SECTIONS:
        vals = df[s].to_numpy(dtype=float) if s in df else np.zeros(len(df))
        ax.bar(x, vals, bottom=bottom, label=s, color=SECTION_COLORS[s], width=0.7)
        bottom += vals
    if "budget" in df and df["budget"].notna().any():
        ax.scatter(x, df["budget"], marker="_", s=400, color="black", label="budget", zorder=3)
    ticks = [str(v) for v in df["label"]] if "label" in df else [str(v) for v in x]
    # Long labels (strategy names) wrap at hyphens; if the bars are still too close for
    # them, they stand upright. Either way neighbours never overlap.
    ticks = [textwrap.fill(t, 12, break_on_hyphens=True) for t in ticks]
    widest = max((len(line) for t in ticks for line in t.splitlines()), default=0)
    upright = widest * len(ticks) > 70
    ax.set_xticks(x, ticks, rotation=90 if upright else 0)
    ax.set_ylabel("tokens")
    ax.set_title("Tokens per context, by section")
    outside_legend(ax)
    return ax


@styled
def plot_context_composition(
    contexts: Iterable[Context] | pd.DataFrame,
    *,
    normalize: bool = True,
    labels: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """How the context is made up over time: system, metadata, files, tool calls, chat.

    Args:
        contexts: contexts in time order (or a frame from :func:`contexts_frame`).
        normalize: shares of the total (default) instead of token counts.
        labels: x tick labels.
        ax: draw into these axes (default: a new figure).

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from ctxnb.context import Context, Section
        >>> c = Context((Section("system", "hi", 2), Section("chat", "x", 1)), 1, {}, None)
        >>> plot_context_composition([c, c]).get_ylabel()
        'share of tokens'
    """
    df = _frame(contexts, labels)
    ax = new_axes(ax)
    parts = ["system", "metadata", "files", "toolcalls", "chat"]
    vals = np.vstack([df[p].to_numpy(dtype=float) for p in parts])
    if normalize:
        vals = vals / np.maximum(vals.sum(axis=0), 1)
    x = np.arange(len(df))
    ax.stackplot(x, vals, labels=parts, colors=[SECTION_COLORS[p] for p in parts], alpha=0.85)
    ticks = [str(v) for v in df["label"]]
    step = max(1, -(-len(ticks) // 8))  # at most eight tick labels, so they never collide
    ax.set_xticks(x[::step], ticks[::step])
    ax.set_ylabel("share of tokens" if normalize else "tokens")
    ax.set_title("Context composition over time")
    outside_legend(ax)
    return ax


@styled
def plot_mutations_per_intent(trace_df: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Horizontal bars: trace records per intent, stacked by mutation class.

    Args:
        trace_df: a frame from :func:`load_trace`.
        ax: draw into these axes (default: a new figure).

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> df = pd.DataFrame({"record_id": ["a", "b", "b"], "intent_id": ["I1", "I2", "I2"],
        ...                    "mutation_class": ["AST_REFACTOR", None, None]})
        >>> [t.get_text() for t in plot_mutations_per_intent(df).get_yticklabels()]
        ['I1', 'I2']
    """
    ax = new_axes(ax)
    df = trace_df[["record_id", "intent_id", "mutation_class"]].astype(object)
    df = df.fillna({"intent_id": "(none)", "mutation_class": "(unclassified)"})
    counts = (
        df.drop_duplicates("record_id")
        .groupby(["intent_id", "mutation_class"])
        .size()
        .unstack(fill_value=0)
        .sort_index()
    )
    y = np.arange(len(counts))
    left = np.zeros(len(counts))
    palette = {"AST_REFACTOR": SERIES_COLORS[2], "INTENT_EVOLUTION": SERIES_COLORS[0]}
    for cls in counts.columns:
        vals = counts[cls].to_numpy(dtype=float)
        color = palette.get(str(cls), "#bbbbbb")
        ax.barh(y, vals, left=left, label=str(cls), color=color, height=0.6)
        left += vals
    ax.set_yticks(y, [str(i) for i in counts.index])
    ax.set_xlabel("trace records")
    ax.set_title("Mutations per intent")
    ax.grid(axis="y", visible=False)
    locator: Any = ax.xaxis.get_major_locator()  # a MaxNLocator, which takes `integer`
    locator.set_params(integer=True)
    outside_legend(ax, title="mutation class")
    return ax
