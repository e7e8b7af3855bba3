"""TraceView: the Agent Trace ledger as a paged, filterable, sortable table."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis import load_trace
from ..redaction.redactor import redact_text
from ._ipw import widgets
from .static import esc, html_table

if TYPE_CHECKING:
    from ..govern.ledger import TraceLedger

__all__ = ["TraceView"]

COLUMNS = (
    "timestamp",
    "intent_id",
    "file",
    "start_line",
    "end_line",
    "contributor_type",
    "model_id",
    "tool",
    "mutation_class",
    "approval",
    "integrity",
)
MAX_INTENT_OPTIONS = 200  # suggestions in the intent box; any intent can still be typed
# Times to the second, in UTC: the ledger's microseconds and "+00:00" made the column
# wrap onto two lines in a notebook and said nothing a reader needs.
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array is a value, not a missing one
        return False


def _shown(value: Any) -> Any:
    """A cell as a reader wants it: a time to the second in UTC, a missing value blank."""
    if _missing(value):
        return None
    if isinstance(value, pd.Timestamp):
        return (value.tz_convert("UTC") if value.tzinfo else value).strftime(TIME_FORMAT)
    return value


def _plain(value: Any) -> str:
    """Text for a plain-text label (a list option): shown, redacted, '' when missing."""
    shown = _shown(value)
    return "" if shown is None else redact_text(str(shown))


def _utc(value: str | pd.Timestamp | None) -> pd.Timestamp | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _sort_key(s: pd.Series) -> Any:
    """Sort categoricals by their text, not by the order categories were first seen."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        rank = np.argsort(np.argsort(s.cat.categories.astype(str), kind="stable"))
        codes = s.cat.codes.to_numpy()
        out = np.where(codes >= 0, rank[np.maximum(codes, 0)], len(rank))
        return pd.Series(out, index=s.index)
    return s


class TraceView(widgets.VBox):
    """The trace ledger, one row per attributed range, 50 rows to a page.

    Filter by intent, file (substring), contributor type and time range; sort by any
    column; pick a row to see its record's detail. A human's answer to an approval
    question shows in the ``approval`` column (``approved by NAME``, ``rejected by
    NAME``), on the record of the decision and on the changes it let through. Filtering
    and sorting are pandas operations over the frame from
    :func:`ctxnb.analysis.load_trace`, and each page is one HTML payload, so a ledger of
    100,000 records stays responsive. Each row shows its
    record's ``integrity`` (the ledger verifier's verdict), and a ledger with tampered
    records says so above the table.

    Args:
        source: a :class:`~ctxnb.govern.ledger.TraceLedger`, a ledger or Parquet path,
            or a frame from :func:`~ctxnb.analysis.load_trace`.
        page_size: rows per page.

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"record_id": ["r1", "r2"], "intent_id": ["I1", "I2"],
        ...     "file": ["a.py", "b.py"], "contributor_type": ["ai", "human"],
        ...     "timestamp": pd.to_datetime(["2025-01-01", "2025-01-02"], utc=True)})
        >>> view = TraceView(df)
        >>> view.filter(intent="I2")
        >>> view.filtered["file"].tolist()
        ['b.py']
    """

    def __init__(
        self,
        source: TraceLedger | str | os.PathLike[str] | pd.DataFrame,
        *,
        page_size: int = 50,
        **kwargs: Any,
    ) -> None:
        df = source if isinstance(source, pd.DataFrame) else load_trace(source)
        self.frame = df
        self.page_size = page_size
        self.columns = [c for c in COLUMNS if c in df.columns]
        self._view = df
        self._batch = False
        self._paging = False

        def values(col: str, limit: int | None = None) -> list[str]:
            if col not in df:
                return []
            counts = df[col].value_counts(sort=True)
            counts = counts[counts > 0]
            return [str(v) for v in counts.index[:limit]]

        self.intent = widgets.Combobox(
            options=values("intent_id", MAX_INTENT_OPTIONS),
            placeholder="any intent",
            description="Intent",
            ensure_option=False,
            continuous_update=False,
        )
        self.file = widgets.Text(
            placeholder="path contains…", description="File", continuous_update=False
        )
        self.contributor = widgets.Dropdown(
            options=[("any", ""), *[(v, v) for v in values("contributor_type")]],
            description="Contributor",
        )
        self.since = widgets.Text(
            placeholder="2025-01-01T00:00Z", description="Since", continuous_update=False
        )
        self.until = widgets.Text(
            placeholder="2025-12-31", description="Until", continuous_update=False
        )
        self.sort_by = widgets.Dropdown(
            options=self.columns or list(df.columns),
            value="timestamp" if "timestamp" in df else None,
            description="Sort by",
        )
        self.descending = widgets.Checkbox(value=True, description="descending", indent=False)
        # Pages are numbered from 1 where a reader sees them (the box and the status
        # line); page_frame and the row numbers stay 0-based like pandas positions.
        self.page = widgets.BoundedIntText(
            value=1, min=1, max=1, description="Page", layout=widgets.Layout(width="12em")
        )
        self.prev_button = widgets.Button(description="◀", layout=widgets.Layout(width="3em"))
        self.next_button = widgets.Button(description="▶", layout=widgets.Layout(width="3em"))
        self.prev_button.on_click(lambda _: self._step(-1))
        self.next_button.on_click(lambda _: self._step(1))
        self.status = widgets.HTML()
        self.table = widgets.HTML()
        self.table.add_class("ctxnb-trace-table")
        self.row = widgets.Select(
            options=[], rows=8, description="Detail of", layout=widgets.Layout(width="100%")
        )
        self.row.add_class("ctxnb-trace-rows")
        self.detail = widgets.HTML()
        self.detail.add_class("ctxnb-trace-detail")
        self.summary = widgets.HTML()

        for w in (
            self.intent,
            self.file,
            self.contributor,
            self.since,
            self.until,
            self.sort_by,
            self.descending,
        ):
            w.observe(lambda _: self._recompute(), names="value")
        self.page.observe(lambda _: self._on_page(), names="value")
        self.row.observe(lambda _: self._render_detail(), names="value")

        filters = widgets.VBox(
            [
                widgets.HBox([self.intent, self.file, self.contributor]),
                widgets.HBox([self.since, self.until, self.sort_by, self.descending]),
            ]
        )
        nav = widgets.HBox([self.prev_button, self.page, self.next_button, self.status])
        super().__init__([filters, nav, self.table, self.row, self.detail, self.summary], **kwargs)
        self._recompute()

    # -- filtering ---------------------------------------------------------------------------
    def filter(
        self,
        *,
        intent: str | None = None,
        file: str | None = None,
        contributor: str | None = None,
        since: str | pd.Timestamp | None = None,
        until: str | pd.Timestamp | None = None,
        sort_by: str | None = None,
        descending: bool | None = None,
    ) -> None:
        """Set several filters at once (one recomputation). ``None`` leaves a filter
        as it is; ``""`` clears it."""
        self._batch = True
        try:
            if intent is not None:
                self.intent.value = intent
            if file is not None:
                self.file.value = file
            if contributor is not None:
                self.contributor.value = contributor
            if since is not None:
                self.since.value = str(since)
            if until is not None:
                self.until.value = str(until)
            if sort_by is not None:
                self.sort_by.value = sort_by
            if descending is not None:
                self.descending.value = descending
        finally:
            self._batch = False
        self._recompute()

    def _mask(self) -> pd.Series | None:
        df = self.frame
        mask = None

        def add(m: Any) -> None:
            nonlocal mask
            mask = m if mask is None else (mask & m)

        if self.intent.value and "intent_id" in df:
            add(df["intent_id"] == self.intent.value)
        if self.file.value and "file" in df:
            col = df["file"]
            if isinstance(col.dtype, pd.CategoricalDtype):
                # Test each distinct path once, then select rows by category.
                cats = col.cat.categories.astype(str)
                add(col.isin(cats[cats.str.contains(self.file.value, regex=False)]))
            else:
                add(col.astype(str).str.contains(self.file.value, regex=False))
        if self.contributor.value and "contributor_type" in df:
            add(df["contributor_type"] == self.contributor.value)
        since, until = _utc(self.since.value), _utc(self.until.value)
        if since is not None:
            add(df["timestamp"] >= since)
        if until is not None:
            add(df["timestamp"] <= until)
        return None if mask is None else mask.fillna(False).astype(bool)

    def _recompute(self) -> None:
        if self._batch:
            return
        try:
            mask = self._mask()
        except ValueError as exc:  # an unreadable date in since/until
            self.status.value = f"<small style='color:#b00'>{esc(exc)}</small>"
            return
        view = self.frame if mask is None else self.frame[mask]
        col = self.sort_by.value
        if col and col in view:
            view = view.sort_values(
                col,
                ascending=not self.descending.value,
                kind="stable",
                na_position="last",
                key=_sort_key,
            )
        self._view = view
        pages = max(1, -(-len(view) // self.page_size))
        self._paging = True  # one render below, not one per change of the page box
        try:
            self.page.max = pages
            self.page.value = 1
        finally:
            self._paging = False
        self._render_page()
        self._render_summary()

    def _on_page(self) -> None:
        if not self._paging:
            self._render_page()

    def _step(self, delta: int) -> None:
        self.page.value = min(max(1, self.page.value + delta), self.page.max)

    # -- rendering ----------------------------------------------------------------------------
    @property
    def filtered(self) -> pd.DataFrame:
        """The rows that pass the filters, in the current sort order."""
        return self._view

    @property
    def page_frame(self) -> pd.DataFrame:
        """The rows on the current page."""
        start = (self.page.value - 1) * self.page_size
        return self._view.iloc[start : start + self.page_size]

    def _render_page(self) -> None:
        page = self.page_frame
        start = (self.page.value - 1) * self.page_size
        records = page[self.columns].to_dict("records")
        self.table.value = self._table(records, start)
        self.row.options = [(self._row_label(start + n, r), n) for n, r in enumerate(records)]
        self.row.value = None
        self.detail.value = ""
        total = len(self.frame)
        self.status.value = self._warning() + (
            f"<small>rows {start + 1 if len(page) else 0}–{start + len(page)} of "
            f"{len(self._view):,} matching ({total:,} in all) · of {self.page.max} "
            f"page{'s' if self.page.max > 1 else ''} · times in UTC</small>"
        )

    def _warning(self) -> str:
        """A line above the table when records were changed outside ctxnb."""
        if "integrity" not in self.frame:
            return ""
        rows = self.frame[self.frame["integrity"] == "tampered"]
        if not len(rows):
            return ""
        n = rows["record_id"].nunique() if "record_id" in rows else len(rows)
        return (
            f"<div style='color:#b00'><b>{n:,} record(s) of this ledger were "
            "changed outside ctxnb</b> (integrity: tampered); they are not evidence. "
            "Run <code>ctxnb trace verify</code>.</div>"
        )

    def _table(self, records: list[dict[str, Any]], start: int) -> str:
        shown = [{c: _shown(v) for c, v in r.items()} for r in records]
        return html_table(
            shown,
            self.columns,
            max_rows=self.page_size,
            first_index=start,
            nowrap=("timestamp", "intent_id", "model_id", "mutation_class", "approval"),
        )

    @staticmethod
    def _row_label(n: int, r: dict[str, Any]) -> str:
        lines = ""
        if not _missing(r.get("start_line")):
            lines = f" L{_plain(r['start_line'])}-{_plain(r.get('end_line'))}"
        parts = (_plain(r.get(c)) for c in ("timestamp", "intent_id", "tool", "file"))
        return " ".join([f"#{n}", *(p for p in parts if p)]) + lines

    def select_row(self, position: int) -> None:
        """Show the detail of the row at ``position`` on the current page."""
        self.row.value = position

    @property
    def selected(self) -> pd.Series | None:
        """The selected row, or None."""
        if self.row.value is None:
            return None
        return self.page_frame.iloc[self.row.value]

    def _render_detail(self) -> None:
        row = self.selected
        if row is None:
            self.detail.value = ""
            return
        fields = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td>{esc(_shown(v))}</td></tr>"
            for k, v in row.items()
            if not _missing(v)
        )
        others = ""
        if "record_id" in self.frame:
            same = self.frame[self.frame["record_id"] == row["record_id"]]
            if len(same) > 1:
                cols = [
                    c
                    for c in (
                        "file",
                        "start_line",
                        "end_line",
                        "contributor_type",
                        "model_id",
                        "content_hash",
                    )
                    if c in same
                ]
                others = (
                    f"<p><b>All {len(same)} ranges of record {esc(row['record_id'])}</b></p>"
                    + html_table(same[cols].to_dict("records"), cols, max_rows=50)
                )
        self.detail.value = (
            f"<b>Record {esc(row.get('record_id', ''))}</b>"
            f"<table class='ctxnb-table'>{fields}</table>{others}"
        )

    def _render_summary(self) -> None:
        parts = []
        view = self._view
        # A record that touched no file (a human's decision, a command that changed
        # nothing) is counted under a name, not as a blank row.
        for col, title, none in (
            ("intent_id", "by intent", "(no intent)"),
            ("file", "by file", "(no file)"),
        ):
            if col not in view or not len(view):
                continue
            key = view["record_id"] if "record_id" in view else view.index.to_series()
            counts = (
                pd.DataFrame({col: view[col].astype(object).fillna(none), "r": key.to_numpy()})
                .groupby(col)["r"]
                .nunique()
                .sort_values(ascending=False, kind="stable")
                .head(10)
            )
            rows = [{col: k, "records": v} for k, v in counts.items()]
            parts.append(
                f"<div style='margin-right:2em'><b>{title}</b>"
                f"{html_table(rows, [col, 'records'], max_rows=10)}</div>"
            )
        self.summary.value = f"<div style='display:flex'>{''.join(parts)}</div>"

    def _repr_html_(self) -> str:
        page = self._view.iloc[: self.page_size]
        return (
            f"<div><b>TraceView</b> {len(self._view):,} of {len(self.frame):,} rows "
            "(times in UTC)"
            + self._warning()
            + self._table(page[self.columns].to_dict("records"), 0)
            + "</div>"
        )

    def __repr__(self) -> str:
        return f"<TraceView rows={len(self.frame)} matching={len(self._view)}>"
