"""ctxnb's look for plots, in one place: colours, sizes, legends and point labels.

Every plot ctxnb draws (:mod:`ctxnb.analysis`, :mod:`ctxnb.replay.analysis`, the
widgets' figures) goes through these helpers, so the figures share one style and stay
legible: the legend sits outside the data (so no label is drawn over a line, a bar or
another label), every series has its own colour and dash or marker shape, and
lines that coincide (a strategy that drops nothing draws the same line as keep-all)
stay visible through distinct dash patterns.

Nothing here picks a matplotlib backend: in Jupyter and Voilà figures render inline
(``image/png``), in scripts wherever the user's backend sends them. matplotlib is
imported only when a figure is drawn, so importing this module is cheap and works
without it; the colour tables are plain data that the HTML views use too.

Example:
    >>> import matplotlib
    >>> matplotlib.use("Agg")  # a doctest has no display
    >>> ax = new_axes()
    >>> _ = ax.plot([0, 1], [0, 1], label="keep-all", **line_style(0))
    >>> outside_legend(ax)
    >>> ax.get_legend().get_texts()[0].get_text()
    'keep-all'
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "CACHE_COLORS",
    "SECTION_COLORS",
    "SERIES_COLORS",
    "line_style",
    "marker_style",
    "new_axes",
    "outside_legend",
    "plot_style",
    "styled",
]

#: The colour of each context section, and of the item kinds inside "active".
SECTION_COLORS: dict[str, str] = {
    "system": "#6c8ebf",
    "metadata": "#d6b656",
    "active": "#82b366",
    "chat": "#b85450",
    "files": "#82b366",
    "toolcalls": "#9673a6",
}

#: Cache-readable (a prefix the provider has cached) against newly sent tokens.
CACHE_COLORS: dict[str, str] = {"cache-readable": "#a9c4e4", "new": "#2f5f98"}

#: One colour per series (strategies, intents, ...), colour-blind safe (Okabe-Ito).
SERIES_COLORS: tuple[str, ...] = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#000000",
)

_DASHES: tuple[Any, ...] = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

# The rc settings every ctxnb figure is drawn with.
_RC: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "lines.linewidth": 1.6,
}

P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def plot_style() -> Iterator[None]:
    """Draw with ctxnb's rc settings inside the ``with`` block (the user's rc outside).

    Example:
        >>> import matplotlib
        >>> with plot_style():
        ...     matplotlib.rcParams["axes.spines.top"]
        False
    """
    import matplotlib

    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]  # keys are checked by matplotlib
        yield


def styled(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a plotting function so it draws in :func:`plot_style`."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with plot_style():
            return fn(*args, **kwargs)

    return wrapper


def new_axes(ax: Axes | None = None, *, size: tuple[float, float] = (7.0, 3.5)) -> Axes:
    """``ax`` itself, or the axes of a new figure of ``size`` inches drawn in ctxnb's style.

    The figure uses constrained layout, so titles, tick labels and an outside legend
    never overlap whatever the figure's size.
    """
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    with plot_style():
        _, new = plt.subplots(figsize=size, layout="constrained")
    return new


def line_style(n: int) -> dict[str, Any]:
    """Colour and dash pattern of the ``n``-th series; two series never look alike, so
    coinciding lines stay distinguishable."""
    return {
        "color": SERIES_COLORS[n % len(SERIES_COLORS)],
        "linestyle": _DASHES[n % len(_DASHES)],
    }


def marker_style(n: int) -> dict[str, Any]:
    """Colour and marker shape of the ``n``-th series of points."""
    return {"color": SERIES_COLORS[n % len(SERIES_COLORS)], "marker": _MARKERS[n % len(_MARKERS)]}


def outside_legend(ax: Axes, *, title: str | None = None) -> None:
    """A legend to the right of the axes, where it cannot hide data."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    ax.legend(
        handles,
        labels,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        title=title,
    )
