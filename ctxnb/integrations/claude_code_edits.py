"""What a Claude Code edit changed: the file's text before it and its changed lines.

The post-tool-use hook (:mod:`ctxnb.integrations.claude_code`) records each Write, Edit
and MultiEdit with the file's previous text and the line ranges the edit touched. Claude
Code's ``tool_response`` usually says both (``originalFile``, ``structuredPatch``); when
it does not, they are worked out from the edit's own arguments or from a diff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "changed_ranges",
    "clamp",
    "line_count",
    "original_text",
    "ranges_from_patch",
    "reverse_edits",
]


def original_text(
    tool: str, tool_input: Mapping[str, Any], response: Mapping[str, Any], new_text: str
) -> str | None:
    """The file's text before the edit: Claude Code's ``originalFile``, else the edits
    undone; None when neither says (a Write of a new file has none)."""
    old = response.get("originalFile")
    if isinstance(old, str):
        return old
    return reverse_edits(tool, tool_input, new_text)


def changed_ranges(
    tool: str,
    tool_input: Mapping[str, Any],
    response: Mapping[str, Any],
    new_text: str,
    old: str | None,
) -> list[tuple[int, int]]:
    """Changed line ranges of the file now: from Claude Code's patch, else from a diff."""
    patch = response.get("structuredPatch")
    if isinstance(patch, list) and patch:
        return ranges_from_patch(patch)
    if not old:
        n = line_count(new_text)
        return [(1, n)] if n else []
    if old == new_text:
        return []
    from ..tools._textlines import changed_line_ranges

    return changed_line_ranges(old, new_text)


def ranges_from_patch(patch: list[Any]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []

    def add(start: int, end: int) -> None:
        if out and out[-1][1] >= start - 1:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))

    for hunk in patch:
        if not isinstance(hunk, Mapping):
            continue
        start = hunk.get("newStart")
        count = hunk.get("newLines")
        if not isinstance(start, int) or not isinstance(count, int):
            continue
        lines = hunk.get("lines")
        if isinstance(lines, list) and all(isinstance(x, str) for x in lines):
            # Only the added lines are the change; context lines only move the counter.
            n = start
            for line in lines:
                if line.startswith("+"):
                    add(n, n)
                    n += 1
                elif line.startswith(" "):
                    n += 1
        elif count > 0:
            add(start, start + count - 1)
    return out


def reverse_edits(tool: str, tool_input: Mapping[str, Any], new_text: str) -> str | None:
    """The file before an Edit/MultiEdit, by undoing the edits; None when unsure."""
    if tool == "Edit":
        edits: Any = [tool_input]
    elif tool == "MultiEdit":
        edits = tool_input.get("edits")
    else:
        return None
    if not isinstance(edits, list):
        return None
    text = new_text
    for edit in reversed(edits):
        if not isinstance(edit, Mapping):
            return None
        old_s, new_s = edit.get("old_string"), edit.get("new_string")
        if not isinstance(old_s, str) or not isinstance(new_s, str) or not new_s:
            return None
        if new_s not in text:
            return None
        text = text.replace(new_s, old_s, -1 if edit.get("replace_all") else 1)
    return text


def line_count(text: str) -> int:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return len(lines)


def clamp(ranges: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    # The file may have changed again since the tool ran; keep only spans that exist.
    n = line_count(text)
    return [(s, min(e, n)) for s, e in ranges if 1 <= s <= n and s <= e]
