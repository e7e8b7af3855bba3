"""Plain HTML pieces shared by every ``_repr_html_`` (no widgets, no heavy imports).

``esc`` redacts (:mod:`ctxnb.redaction.redactor`) before it escapes: every value a view shows
passes it.

Example:
    >>> html_table([{"a": "<b>", "b": None}], ["a", "b"]).count("&lt;b&gt;")
    1
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .redaction.redactor import redact_text

__all__ = ["TEXT", "esc", "html_table"]

#: Tables and text in views: the same compact line height in every frontend.
TEXT = "line-height:1.45;font-size:13px"
_NOWRAP = ' style="white-space:nowrap"'


def esc(value: Any) -> str:
    """HTML-escaped text of a value ('' for None and missing values)."""
    if value is None:
        return ""
    try:
        if value != value:  # NaN, NaT and pd.NA-like values that are not equal to themselves
            return ""
    except (TypeError, ValueError):
        if str(value) == "<NA>":
            return ""
    return html.escape(redact_text(str(value)))


def html_table(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    max_rows: int = 50,
    highlight: int | None = None,
    first_index: int | None = None,
    nowrap: Sequence[str] = (),
) -> str:
    """A plain HTML table of at most ``max_rows`` rows.

    Args:
        rows: mappings from column name to value.
        columns: the columns to show, in order.
        max_rows: rows past this are counted, not shown.
        highlight: the position (among shown rows) of a row to highlight.
        first_index: when set, a leading ``#`` column numbers rows from this value.
        nowrap: columns whose cells never break across lines (timestamps, ids).
    """
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    if first_index is not None:
        head = "<th>#</th>" + head
    body, extra = [], 0
    for n, row in enumerate(rows):
        if n >= max_rows:
            extra += 1
            continue
        style = ' style="background:#fff3bf"' if n == highlight else ""
        cells = "".join(
            f"<td{_NOWRAP if c in nowrap else ''}>{esc(row.get(c))}</td>" for c in columns
        )
        if first_index is not None:
            cells = f"<td>{first_index + n}</td>" + cells
        body.append(f'<tr data-row="{n}"{style}>{cells}</tr>')
    more = f"<p><small>… {extra} more rows</small></p>" if extra else ""
    return (
        f'<table class="ctxnb-table" style="{TEXT}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )
