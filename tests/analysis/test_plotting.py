"""ctxnb's plots are legible: no label is drawn over another, and legends sit outside
the data. Each plot is drawn for real (Agg) from a real replay or trace, then every
visible text's rendered box is measured."""

from __future__ import annotations

import itertools

import matplotlib
from _paths import REPO

matplotlib.use("Agg")  # tests have no display; the tutorials use the inline backend

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.text import Text

from ctxnb._util.plotting import SERIES_COLORS, line_style, marker_style, plot_style
from ctxnb.analysis import plot_context_composition, plot_mutations_per_intent
from ctxnb.analysis import plot_tokens_per_turn as plot_turns
from ctxnb.replay.analysis import plot_cost_vs_loss, plot_tokens_per_step, summarize
from ctxnb.replay.runner import replay
from ctxnb.strategies.builtin import (
    FileViewLimits,
    KeepAll,
    MetadataOnly,
    ObservationMasking,
    RecencyWindow,
)

RUN = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    strategies = [
        KeepAll(),
        ObservationMasking(10),
        RecencyWindow(10),
        FileViewLimits(5, 20_000),
        MetadataOnly(),
    ]
    return replay(RUN, strategies)


def _texts(fig: plt.Figure) -> list[tuple[str, object]]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    out = []
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_alpha() != 0:
            out.append((t.get_text(), t.get_window_extent(renderer)))
    return out


def _overlaps(fig: plt.Figure) -> list[tuple[str, str]]:
    boxes = _texts(fig)
    return [
        (a, b)
        for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
        if ba.overlaps(bb)  # type: ignore[attr-defined]
    ]


def _legend_outside(ax: plt.Axes) -> bool:
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legend = ax.get_legend()
    assert legend is not None
    return not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_cost_vs_loss_labels_never_overlap(grid: pd.DataFrame) -> None:
    summary = summarize(grid)
    # keep-all and file-view-limits land almost on the same point in this run: a label
    # beside each point would collide.
    ax = plot_cost_vs_loss(summary)
    assert _overlaps(ax.figure) == []
    assert _legend_outside(ax)
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert names == list(summary.index)
    plt.close(ax.figure)


def test_tokens_per_step_keeps_coinciding_lines_apart(grid: pd.DataFrame) -> None:
    ax = plot_tokens_per_step(grid, "django__django-13670")
    assert _overlaps(ax.figure) == []
    assert _legend_outside(ax)
    styles = {(ln.get_color(), str(ln.get_linestyle())) for ln in ax.get_lines()}
    assert len(styles) == len(ax.get_lines())  # no two series look alike
    plt.close(ax.figure)


def test_two_plots_side_by_side_stay_legible(grid: pd.DataFrame) -> None:
    # As tutorial 05 draws them: one figure, two axes, tight layout.
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    plot_tokens_per_step(grid, "django__django-13670", ax=left)
    plot_cost_vs_loss(summarize(grid), ax=right)
    fig.tight_layout()
    assert _overlaps(fig) == []
    plt.close(fig)


def test_section_plots_with_long_labels(grid: pd.DataFrame) -> None:
    last = grid[grid["step"] == grid["step"].max()]
    frame = pd.DataFrame(
        {
            "label": last["strategy"].astype(str).tolist(),
            **{s: last[f"tokens_{s}"].tolist() for s in ("system", "metadata", "active", "chat")},
            "budget": [None] * len(last),
        }
    )
    ax = plot_turns(frame)
    assert _overlaps(ax.figure) == []
    assert _legend_outside(ax)
    plt.close(ax.figure)
    many = pd.DataFrame(
        {
            "label": [f"turn {n}" for n in range(40)],
            **{p: [n * 10 for n in range(40)] for p in ("system", "metadata", "chat")},
            "files": [400] * 40,
            "toolcalls": [n * 30 for n in range(40)],
        }
    )
    ax = plot_context_composition(many)
    assert _overlaps(ax.figure) == []
    plt.close(ax.figure)


def test_mutations_per_intent_is_legible() -> None:
    df = pd.DataFrame(
        {
            "record_id": [f"r{n}" for n in range(30)],
            "intent_id": [f"INT-{n % 7:03d}" for n in range(30)],
            "mutation_class": ["AST_REFACTOR", "INTENT_EVOLUTION", None] * 10,
        }
    )
    ax = plot_mutations_per_intent(df)
    assert _overlaps(ax.figure) == []
    assert _legend_outside(ax)
    plt.close(ax.figure)


def test_one_style_for_every_series() -> None:
    assert len({tuple(sorted(line_style(n).items())) for n in range(6)}) == 6
    assert len({tuple(sorted(marker_style(n).items())) for n in range(8)}) == 8
    assert marker_style(0)["color"] == line_style(0)["color"] == SERIES_COLORS[0]
    before = matplotlib.rcParams["axes.spines.top"]
    with plot_style():
        assert matplotlib.rcParams["axes.spines.top"] is False
    assert matplotlib.rcParams["axes.spines.top"] == before  # the user's settings return


def test_cost_vs_loss_never_ranks_keep_all_as_losing_information(grid: pd.DataFrame) -> None:
    """keep-all drops nothing, so it loses nothing: it sits at the bottom of the
    information-lost axis, although it keeps the most stale views of files (which are
    outdated information kept, not lost). Each point is where the summary says."""
    summary = summarize(grid)
    assert summary.loc["keep-all", "re_reads"] == 0
    # The run has stale views, most of them under keep-all: adding them to the loss
    # (as the plot once did) would put keep-all above every other strategy.
    assert summary.loc["keep-all", "stale_reads"] > 0
    assert summary["stale_reads"].idxmax() == "keep-all"
    ax = plot_cost_vs_loss(summary)
    points = {
        text.get_text(): tuple(col.get_offsets()[0])
        for text, col in zip(ax.get_legend().get_texts(), ax.collections, strict=True)
    }
    for strategy, (x, y) in points.items():
        assert (x, y) == (summary.loc[strategy, "tokens_rel"], summary.loc[strategy, "re_reads"])
    assert points["keep-all"][1] == min(y for _, y in points.values())
    assert points["metadata-only"][1] > points["keep-all"][1]
    assert "re-reads" in ax.get_ylabel() and "stale" not in ax.get_ylabel()
    plt.close(ax.figure)


def test_dollars_per_step_pairs_a_strategys_lines_by_colour(grid: pd.DataFrame) -> None:
    """Each strategy has one colour for its two lines (cached solid, uncached dotted);
    no two strategies share a colour; each line ends at the run's summed dollars."""
    from ctxnb.replay.analysis import plot_dollars_per_step

    assert grid["cost_usd"].notna().all()  # a replay at the run's model prices
    run = str(grid["trajectory"].iloc[0])
    ax = plot_dollars_per_step(grid, run)
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    strategies = list(dict.fromkeys(grid["strategy"].astype(str)))
    assert sorted(lines) == sorted(f"{s} ({h})" for s in strategies for h in ("cached", "no cache"))
    colours = set()
    for s in strategies:
        cached, uncached = lines[f"{s} (cached)"], lines[f"{s} (no cache)"]
        assert cached.get_color() == uncached.get_color()
        assert cached.get_linestyle() == "-" and uncached.get_linestyle() == ":"
        colours.add(cached.get_color())
        rows = grid[grid["strategy"] == s]
        assert cached.get_ydata()[-1] == pytest.approx(rows["cost_usd"].sum())
        assert uncached.get_ydata()[-1] == pytest.approx(rows["cost_usd_uncached"].sum())
    assert len(colours) == len(strategies)
    assert _legend_outside(ax)
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="no rows"):
        plot_dollars_per_step(grid, "nope")
    with pytest.raises(ValueError, match="no dollars"):
        plot_dollars_per_step(grid.drop(columns=["cost_usd"]), run)
