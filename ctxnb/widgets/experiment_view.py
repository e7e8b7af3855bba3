"""ExperimentView: a strategy × metric table and its plots, over run_experiment results."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._util.intervals import format_interval
from .._util.plotting import plot_style
from ._ipw import widgets
from .static import TEXT, esc

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ExperimentView"]

ALL_RUNS = "all runs (median per step)"
# (column, heading, format, lower is better); shown when the summary has the column.
METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("runs", "runs", "{:,.0f}", False),
    ("steps", "steps", "{:,.0f}", False),
    ("total_tokens", "input tokens", "{:,.0f}", True),
    ("tokens_rel", "× baseline", "{:.2f}×", True),
    ("peak_tokens", "peak context", "{:,.0f}", True),
    ("cache_read_share", "cache-readable", "{:.0%}", False),
    ("cost_usd", "dollars (cached)", "${:,.4f}", True),
    ("cost_usd_uncached", "dollars (uncached)", "${:,.4f}", True),
    ("cost", "dollars (flat price)", "${:,.4f}", True),
    ("re_reads", "re-reads (lost)", "{:,.0f}", True),
    ("stale_reads", "stale views kept", "{:,.0f}", True),
)


def _fmt(fmt: str, value: Any) -> str:
    try:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        return fmt.format(value)
    except (TypeError, ValueError):
        return esc(value)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


class ExperimentView(widgets.VBox):
    """The results of :func:`~ctxnb.replay.experiment.run_experiment`: one row per
    strategy, one column per metric (tokens, cache reuse, dollars, information lost,
    each best value in bold), the context size per step, and cost against information
    lost. The run picker chooses what all three show: every run (the table sums them,
    the tokens plot takes the median per step) or one run.

    Attributes:
        summary: the table's numbers, :func:`~ctxnb.replay.analysis.summarize` of the
            runs the picker chose.

    Args:
        frame: the experiment's frame.
        prices: a flat input price for a ``cost`` column, as
            :func:`~ctxnb.replay.analysis.summarize` takes it.
        baseline: the strategy the relative columns compare with.

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({
        ...     "trajectory": ["t"] * 4, "strategy": ["keep-all", "keep-all", "m", "m"],
        ...     "step": [0, 1, 0, 1], "total_tokens": [100, 300, 100, 150],
        ...     "re_reads": [0, 0, 0, 1], "stale_reads": [0, 1, 0, 0],
        ...     "prompt_tokens": [None] * 4})
        >>> view = ExperimentView(df)
        >>> view.summary.loc["m", "tokens_rel"]
        np.float64(0.625)
        >>> view.run.options[0]
        'all runs (median per step)'
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        *,
        prices: Mapping[str, float] | None = None,
        baseline: str = "keep-all",
        **kwargs: Any,
    ) -> None:
        if frame.empty:
            raise ValueError("the experiment frame is empty: run_experiment returned no rows")
        self.frame = frame
        self.baseline = baseline
        self.prices = prices
        self.summary: pd.DataFrame  # set by _draw, for the runs the picker chose
        runs = list(dict.fromkeys(frame["trajectory"].astype(str)))
        self.run = widgets.Dropdown(options=[ALL_RUNS, *runs], value=ALL_RUNS, description="run")
        self.run.layout = widgets.Layout(width="auto")
        self.table = widgets.HTML()
        self.table.add_class("ctxnb-experiment-table")
        self.tokens_plot = widgets.Image(format="png")
        self.loss_plot = widgets.Image(format="png")
        for img in (self.tokens_plot, self.loss_plot):
            img.add_class("ctxnb-plot")
            img.layout = widgets.Layout(max_width="100%", height="auto")
        self.run.observe(lambda ch: self._draw(), names="value")
        self._draw()
        super().__init__(
            [
                self.table,
                self.run,
                widgets.HBox(
                    [self.tokens_plot, self.loss_plot],
                    layout=widgets.Layout(flex_flow="row wrap"),
                ),
            ],
            **kwargs,
        )
        self.add_class("ctxnb-experiment-view")

    def table_html(self) -> str:
        """The strategy × metric table, the best value of each column in bold."""
        s = self.summary
        cols = [m for m in METRICS if m[0] in s.columns and s[m[0]].notna().any()]
        head = "".join(f"<th>{esc(h)}</th>" for _, h, _, _ in cols)
        best: dict[str, Any] = {}
        for c, _, _, lower in cols:
            if c in ("runs", "steps", "cache_read_share"):
                continue
            values = s[c].dropna()
            if len(values) > 1 and values.nunique() > 1:
                best[c] = values.min() if lower else values.max()
        rows = []
        for strategy, r in s.iterrows():
            cells = []
            for c, _, fmt, _ in cols:
                text = _fmt(fmt, r[c])
                if f"{c}_lo" in s.columns and text != "–":
                    # value [lo–hi]: the bootstrap interval summarize() gives.
                    text = esc(format_interval(r[c], r[f"{c}_lo"], r[f"{c}_hi"], fmt))
                bold = c in best and r[c] == best[c]
                cells.append(
                    f"<td style='text-align:right'>{'<b>' + text + '</b>' if bold else text}</td>"
                )
            mark = " (baseline)" if strategy == self.baseline else ""
            rows.append(
                f"<tr><th style='text-align:left'>{esc(strategy)}{mark}</th>{''.join(cells)}</tr>"
            )
        shown = "" if self.run.value == ALL_RUNS else f" · run {esc(self.run.value)}"
        ci = s.attrs.get("intervals", {})
        note = (
            f"; [{ci['level']:.0%} interval: {esc(ci['method'])}, seed {ci['seed']}]"
            if ci and int(s["runs"].max()) >= 2
            else ""
        )
        return (
            f'<div style="{TEXT}"><b>Experiment</b> {int(s["runs"].max())} runs × '
            f"{len(s)} strategies{shown}; best value of each column in bold{note}</div>"
            f'<table class="ctxnb-table" style="{TEXT}"><thead><tr><th>strategy</th>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )

    def _figure(self, size: tuple[float, float]) -> tuple[Any, Any]:
        # A figure outside pyplot: the inline backend would otherwise show it a second
        # time under the cell.
        from matplotlib.figure import Figure

        with plot_style():
            fig = Figure(figsize=size, layout="constrained")
            ax = fig.add_subplot()
        return fig, ax

    def _tokens_png(self) -> bytes:
        from ..replay.analysis import plot_tokens_per_step

        fig, ax = self._figure((6.4, 3.4))
        run = None if self.run.value == ALL_RUNS else self.run.value
        plot_tokens_per_step(self.frame, run, ax=ax)
        return _png(fig)

    def _loss_png(self) -> bytes:
        from ..replay.analysis import plot_cost_vs_loss

        fig, ax = self._figure((5.2, 3.4))
        plot_cost_vs_loss(self.summary, ax=ax)
        return _png(fig)

    def _draw(self) -> None:
        """Table and both plots for the runs the picker chose."""
        from ..replay.analysis import summarize

        rows = self.frame
        if self.run.value != ALL_RUNS:
            rows = rows[rows["trajectory"].astype(str) == self.run.value]
        self.summary = summarize(rows, self.prices, baseline=self.baseline)
        self.table.value = self.table_html()
        self.tokens_plot.value = self._tokens_png()
        self.loss_plot.value = self._loss_png()

    def _repr_html_(self) -> str:
        imgs = "".join(
            f'<img alt="{alt}" style="max-width:49%" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            for alt, png in (
                ("context tokens per step", self.tokens_plot.value),
                ("cost vs. information lost", self.loss_plot.value),
            )
        )
        return f"<div>{self.table_html()}<div>{imgs}</div></div>"

    def __repr__(self) -> str:
        return f"<ExperimentView strategies={list(self.summary.index)}>"
