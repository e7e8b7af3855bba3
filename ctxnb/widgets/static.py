"""Static HTML for ctxnb's views: what nbconvert, GitHub and plain HTML frontends show.

Nothing here imports ipywidgets, so the reprs work in any environment. Every function
bounds its output (rows, characters), because a repr must stay cheap whatever the size
of the object behind it. Every text a view shows passes ``esc``, ``pre`` or
``diff_html``, which redact it (:mod:`ctxnb.redaction.redactor`) before escaping it.

Example:
    >>> html_table([{"a": 1, "b": "<x>"}], ["a", "b"]).split("<tbody>")[1]
    '<tr data-row="0"><td>1</td><td>&lt;x&gt;</td></tr></tbody></table>'
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence

from .._html import TEXT, esc, html_table
from .._util.plotting import SECTION_COLORS
from ..redaction.redactor import redact_text

__all__ = [
    "MONO",
    "SECTION_COLORS",
    "diff_html",
    "diff_side_by_side_html",
    "esc",
    "html_table",
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

MAX_TEXT = 20_000  # characters of text a view shows at once


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


def diff_html(diff: str, *, limit: int = MAX_TEXT, redact: bool = True) -> str:
    """A unified diff with added lines green and removed lines red.

    ``redact=False`` only for a diff redacted already and meant to be shown exactly as
    it is committed (an approval's diff, :func:`ctxnb.govern.approval.question`).
    """
    if not diff:
        return "<p><i>no differences</i></p>"
    if redact:
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


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_OLD_BG, _NEW_BG, _HUNK_BG = "#ffebe9", "#e6ffec", "#ddf4ff"


def diff_side_by_side_html(diff: str, *, limit: int = MAX_TEXT, redact: bool = True) -> str:
    """A unified diff as two columns: the old lines left, the new lines right, each with
    its line number; a removed line and the added line that replaces it share a row.

    For long files, where a unified diff's alternating red and green runs are hard to
    follow. Every line of the diff is shown once, in order, as in :func:`diff_html`; the
    same ``limit`` and ``redact`` apply.

    Example:
        >>> html = diff_side_by_side_html("@@ -1,2 +1,2 @@\\n a\\n-b\\n+c\\n")
        >>> html.count("<tr")
        3
    """
    if not diff:
        return "<p><i>no differences</i></p>"
    if redact:
        diff = redact_text(diff)
    cut = len(diff) > limit
    rows: list[str] = []
    old: list[tuple[int, str]] = []
    new: list[tuple[int, str]] = []
    o = n = 0  # the next old and new line numbers

    def cell(num: int | None, text: str | None, bg: str) -> str:
        style = f"background:{bg};" if bg and text is not None else ""
        no = "" if num is None else str(num)
        body = "" if text is None else html.escape(text)
        return (
            f'<td class="ctxnb-diff-no" style="color:#8c959f;text-align:right;'
            f'padding:0 6px;user-select:none">{no}</td>'
            f'<td style="{style}white-space:pre-wrap;word-break:break-all;width:50%">{body}</td>'
        )

    def flush() -> None:
        # Removed and added lines of one change pair up row by row; the longer side
        # runs on against blank cells.
        for i in range(max(len(old), len(new))):
            lo, lt = old[i] if i < len(old) else (None, None)
            ro, rt = new[i] if i < len(new) else (None, None)
            rows.append(f"<tr>{cell(lo, lt, _OLD_BG)}{cell(ro, rt, _NEW_BG)}</tr>")
        old.clear()
        new.clear()

    def whole(text: str, bg: str = "") -> None:
        style = f' style="background:{bg}"' if bg else ""
        rows.append(f'<tr><td colspan="4"{style}>{html.escape(text)}</td></tr>')

    ol = nl = 0  # old and new lines of the current hunk still to come (its header says)
    for line in diff[:limit].splitlines():
        if ol or nl:
            if line.startswith("-") and ol:
                old.append((o, line[1:]))
                o, ol = o + 1, ol - 1
                continue
            if line.startswith("+") and nl:
                new.append((n, line[1:]))
                n, nl = n + 1, nl - 1
                continue
            if (line.startswith(" ") or not line) and ol and nl:
                flush()
                rows.append(f"<tr>{cell(o, line[1:], '')}{cell(n, line[1:], '')}</tr>")
                o, n, ol, nl = o + 1, n + 1, ol - 1, nl - 1
                continue
        m = _HUNK.match(line)
        flush()
        if m:
            o, n = int(m.group(1)), int(m.group(3))
            ol = 1 if m.group(2) is None else int(m.group(2))
            nl = 1 if m.group(4) is None else int(m.group(4))
            whole(line, _HUNK_BG)
        else:  # a file header, "\\ No newline at end of file", any other text
            whole(line)
    flush()
    note = (
        f'<tr><td colspan="4">[… {len(diff) - limit:,} more characters of diff]</td></tr>'
        if cut
        else ""
    )
    return (
        f'<div style="max-height:30em;overflow:auto"><table class="ctxnb-diff-sbs" '
        f'style="{MONO};border-collapse:collapse;width:100%;table-layout:fixed">'
        '<colgroup><col style="width:3.5em"><col><col style="width:3.5em"><col></colgroup>'
        f"<tbody>{''.join(rows)}{note}</tbody></table></div>"
    )


def token_bar(
    sections: Sequence[tuple[str, int]],
    budget: int | None = None,
    *,
    label: str | None = None,
    scale: int | None = None,
    colors: Mapping[str, str] | None = None,
) -> str:
    """A horizontal bar of tokens by section, scaled to the budget when there is one.

    Args:
        sections: ``(name, tokens)`` in drawing order.
        budget: the token budget, drawn as the bar's full width.
        label: a caption on its own line above the bar (two bars compared side by side).
        scale: the token count of the full width, so several bars share one scale.
        colors: a colour per part (default: the section colours).

    Example:
        >>> html = token_bar([("system", 10), ("chat", 26)], label="masking")
        >>> "chat 26</span></div>" in html and "masking" in html
        True
    """
    total = sum(t for _, t in sections)
    scale = max(total, budget or 0, scale or 0, 1)
    palette = SECTION_COLORS if colors is None else colors
    parts = "".join(
        f'<div title="{esc(name)}: {tokens:,} tokens" style="display:inline-block;height:14px;'
        f'width:{100 * tokens / scale:.2f}%;background:{palette.get(name, "#999")}">'
        "</div>"
        for name, tokens in sections
        if tokens
    )
    legend = " · ".join(
        f'<span style="white-space:nowrap"><span style="color:{palette.get(n, "#999")}">'
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
