"""Static HTML for ctxnb's views: what nbconvert, GitHub and plain HTML frontends show.

Nothing here imports ipywidgets, so the reprs work in any environment. Every function
bounds its output (rows, characters), because a repr must stay cheap whatever the size
of the object behind it. Every text a view shows passes ``esc``, ``pre`` or
``diff_html``, which redact it (:mod:`ctxnb.redaction`) before escaping it.

Example:
    >>> html_table([{"a": 1, "b": "<x>"}], ["a", "b"]).split("<tbody>")[1]
    '<tr data-row="0"><td>1</td><td>&lt;x&gt;</td></tr></tbody></table>'
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..plotting import SECTION_COLORS
from ..redaction import redact_text

if TYPE_CHECKING:
    from ..govern.ledger import TraceLedger

__all__ = [
    "MONO",
    "SECTION_COLORS",
    "diff_html",
    "esc",
    "html_table",
    "ledger_html",
    "pre",
    "token_bar",
]

#: Code and diffs: the notebook's code font, 12 px, and a line height for reading code.
#: ipywidgets' HTML widget sets a 28 px line height and the UI font on its content, so
#: every block of code says what it needs inline.
MONO = (
    "font-family:var(--jp-code-font-family,ui-monospace,'SFMono-Regular','DejaVu Sans Mono',"
    "Menlo,Consolas,monospace);font-size:12px;line-height:1.45"
)
#: Tables and text in views: the same compact line height in every frontend.
TEXT = "line-height:1.45;font-size:13px"

MAX_TEXT = 20_000  # characters of text a view shows at once
_TAIL_BYTES = 256 * 1024  # how far back ledger_html reads: bounded, whatever the file size


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
) -> str:
    """A plain HTML table of at most ``max_rows`` rows.

    Args:
        rows: mappings from column name to value.
        columns: the columns to show, in order.
        max_rows: rows past this are counted, not shown.
        highlight: the position (among shown rows) of a row to highlight.
        first_index: when set, a leading ``#`` column numbers rows from this value.
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
        cells = "".join(f"<td>{esc(row.get(c))}</td>" for c in columns)
        if first_index is not None:
            cells = f"<td>{first_index + n}</td>" + cells
        body.append(f'<tr data-row="{n}"{style}>{cells}</tr>')
    more = f"<p><small>… {extra} more rows</small></p>" if extra else ""
    return (
        f'<table class="ctxnb-table" style="{TEXT}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


def pre(text: str, *, limit: int = MAX_TEXT) -> str:
    """Text in a scrollable ``<pre>``, cut at ``limit`` characters with a note."""
    text = redact_text(text)  # whole, before the cut
    cut = ""
    if len(text) > limit:
        cut = f"\n[… {len(text) - limit:,} more characters not shown]"
        text = text[:limit]
    return (
        f'<pre class="ctxnb-code" style="max-height:24em;overflow:auto;white-space:pre-wrap;'
        f'{MONO};margin:0">{html.escape(text)}{html.escape(cut)}</pre>'
    )


def diff_html(diff: str, *, limit: int = MAX_TEXT) -> str:
    """A unified diff with added lines green and removed lines red."""
    if not diff:
        return "<p><i>no differences</i></p>"
    diff = redact_text(diff)
    cut = len(diff) > limit
    lines = []
    for line in diff[:limit].splitlines():
        color = ""
        if line.startswith("+") and not line.startswith("+++"):
            color = "#e6ffec"
        elif line.startswith("-") and not line.startswith("---"):
            color = "#ffebe9"
        elif line.startswith("@@"):
            color = "#ddf4ff"
        style = f' style="background:{color}"' if color else ""
        lines.append(f"<span{style}>{html.escape(line)}</span>")
    note = f"\n[… {len(diff) - limit:,} more characters of diff]" if cut else ""
    return (
        f'<pre class="ctxnb-diff" style="max-height:30em;overflow:auto;{MONO};margin:0">'
        + "\n".join(lines)
        + html.escape(note)
        + "</pre>"
    )


def token_bar(
    sections: Sequence[tuple[str, int]],
    budget: int | None = None,
    *,
    label: str | None = None,
    scale: int | None = None,
) -> str:
    """A horizontal bar of tokens by section, scaled to the budget when there is one.

    Args:
        sections: ``(name, tokens)`` in drawing order.
        budget: the token budget, drawn as the bar's full width.
        label: a caption on its own line above the bar (two bars compared side by side).
        scale: the token count of the full width, so several bars share one scale.

    Example:
        >>> html = token_bar([("system", 10), ("chat", 26)], label="masking")
        >>> "chat 26</span></div>" in html and "masking" in html
        True
    """
    total = sum(t for _, t in sections)
    scale = max(total, budget or 0, scale or 0, 1)
    parts = "".join(
        f'<div title="{esc(name)}: {tokens:,} tokens" style="display:inline-block;height:14px;'
        f'width:{100 * tokens / scale:.2f}%;background:{SECTION_COLORS.get(name, "#999")}">'
        "</div>"
        for name, tokens in sections
        if tokens
    )
    legend = " · ".join(
        f'<span style="white-space:nowrap"><span style="color:{SECTION_COLORS.get(n, "#999")}">'
        f"■</span> {esc(n)} {t:,}</span>"
        for n, t in sections
    )
    over = budget is not None and total > budget
    budget_text = ""
    if budget is not None:
        budget_text = f" of budget {budget:,}" + (" (over budget)" if over else "")
    caption = f'<div style="font-weight:600">{esc(label)}</div>' if label is not None else ""
    # Each part is a block: a caption, the bar and the legend never run into each other
    # or into the next bar's caption.
    return (
        f'<div class="ctxnb-token-bar" style="{TEXT};margin:2px 0 6px 0">{caption}'
        '<div style="width:100%;border:1px solid #bbb;background:#f6f6f6;line-height:0">'
        f'{parts}</div><div style="font-size:12px">{total:,} tokens{budget_text}: '
        f"{legend}</div></div>"
    )


def _tail_lines(path: Path, max_bytes: int = _TAIL_BYTES) -> tuple[list[bytes], int]:
    """The complete lines in the last ``max_bytes`` of a file, and the file size."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return [], 0
    with open(path, "rb") as fh:
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read()
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first line read is probably a partial one
    return [ln for ln in lines if ln.strip()], size


def ledger_html(ledger: TraceLedger | str | os.PathLike[str], *, n: int = 20) -> str:
    """The last ``n`` records of a trace ledger as an HTML table.

    Reads only the end of the file, so it stays fast on a ledger of any size.

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb.govern.ledger import TraceLedger, build_trace_record
        >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
        >>> ledger.append(build_trace_record(file_path="a.py", ranges=[(1, 1)],
        ...     new_text="x\\n", intent_id="INT-1", session_id=None, model_id=None,
        ...     repo_root=None))
        >>> "INT-1" in ledger_html(ledger)
        True
    """
    from ..govern.ledger import record_intent_id

    path = Path(getattr(ledger, "path", ledger))  # type: ignore[arg-type]
    lines, size = _tail_lines(path)
    rows: list[dict[str, Any]] = []
    for raw in reversed(lines):  # newest first, until n readable records
        if len(rows) >= n:
            break
        try:
            rec = json.loads(raw)
        except ValueError:
            continue  # a cut last line; the analysis readers report it
        if not isinstance(rec, dict):
            continue
        files = [f for f in rec.get("files") or [] if isinstance(f, dict)]
        meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
        rows.append(
            {
                "time": rec.get("timestamp"),
                "intent": record_intent_id(rec),
                "files": ", ".join(str(f.get("path")) for f in files[:3])
                + (" …" if len(files) > 3 else ""),
                "tool": meta.get("tool"),
                "mutation": meta.get("mutation_class"),
            }
        )
    rows.reverse()
    head = (
        f"<div><b>TraceLedger</b> {esc(str(path))} ({size:,} bytes)"
        f"<br><small>last {len(rows)} records</small>"
    )
    if not rows:
        return head + "<p><i>no records</i></p></div>"
    return head + html_table(rows, ["time", "intent", "files", "tool", "mutation"]) + "</div>"
