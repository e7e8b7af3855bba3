"""What a Claude Code edit changed, and how the post-tool-use hook keeps it.

The post-tool-use hook (:mod:`ctxnb.integrations.claude_code`) records each Write, Edit
and MultiEdit with the file's previous text and the line ranges the edit touched. Claude
Code's ``tool_response`` usually says both (``originalFile``, ``structuredPatch``); when
it does not, they are worked out from the edit's own arguments or from a diff. The new
version of the file is stored (:func:`store_versions`) and the edit gets its audit line
(:func:`audit_change`), as the file tools write one for each call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..hashing import sha256_hex

if TYPE_CHECKING:
    from ..govern.record import FileChange

__all__ = [
    "audit_change",
    "changed_ranges",
    "clamp",
    "line_count",
    "original_text",
    "ranges_from_patch",
    "reverse_edits",
    "store_versions",
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


def store_versions(
    root: Path, settings: Mapping[str, Any], changes: Sequence[FileChange]
) -> list[str | None]:
    """Store versions of the changed files, through the access layer: as one inline
    transaction when the store takes it (no pyarrow in this process), else by opening
    the store. Every ``FOLD_EVERY_TX`` inline transactions the store is opened to fold
    them, so outside readers of its Parquet files never lag far behind."""
    from ..access.observe import observe_inline
    from ..resolver import default_filesystem_id, filesystem_of, normalize_path
    from ..store._log import COMPACT_AFTER, FOLD_EVERY_TX

    real = os.path.realpath(root)  # as Workspace.open names the files
    fs = default_filesystem_id()
    table = [(str(p), str(f)) for p, f in settings.get("filesystems") or ()]
    items = []
    for c in changes:
        path = normalize_path(f"{real}/{c.path}")
        source = {"type": "filesystem", "filesystemId": filesystem_of(path, table, fs)}
        items.append(({**source, "path": path}, c.data or b""))
    inline = observe_inline(os.path.join(real, ".ctxnb", "store"), items)
    if inline is not None:
        observed, unfolded, uncompacted = inline
        compact_after = int(settings.get("compact_after", COMPACT_AFTER))
        if unfolded < FOLD_EVERY_TX and uncompacted <= compact_after:
            return [o.version_id for o in observed]
    from ..workspace import Workspace  # pyarrow: a large change, a new store, or a fold

    with Workspace.open(root) as ws:
        if inline is None:
            done = ws.observe([c.path for c in changes], data=[c.data for c in changes])
        else:
            done = inline[0]
        # Each hook is a new process, and opening the store reads every transaction not
        # yet compacted: without this, every edit of a session made the next one slower.
        ws.store.maybe_compact(ws.config.index.compact_after)
        ws.store.fold()
    return [o.version_id for o in done]


def audit_change(
    root: Path,
    session_id: str | None,
    tool: str,
    tool_input: Mapping[str, Any],
    rel: str,
    old_text: str | None,
    data: bytes,
    intent_id: str | None,
) -> None:
    """The audit line of the edit, as the file tools write one for each call."""
    from ..tools.audit import AuditLog, audit_record

    before = sha256_hex(old_text.encode("utf-8")) if old_text is not None else None
    AuditLog(root / ".ctxnb" / "audit.jsonl").append(
        audit_record(
            caller="claude-code",
            session_id=session_id,
            tool=tool,
            args={"file_path": rel, **{k: v for k, v in tool_input.items() if k != "file_path"}},
            duration_ms=0.0,
            success=True,
            error_code=None,
            before=before,
            after=sha256_hex(data),
            intent_id=intent_id,
        )
    )
