"""What a Claude Code edit changes, and how the post-tool-use hook keeps it.

Before an edit runs, :func:`edit_outcomes` works out the bytes it can leave in a file
whose settings are governance (``[tool.ctxnb]`` in ``pyproject.toml``): the pre-tool-use
hook decides on those bytes, not on the edit's text, and refuses an edit whose result
ctxnb cannot reproduce exactly as Claude Code would make it.

The post-tool-use hook (:mod:`ctxnb.integrations.claude_code`) records each Write, Edit
and MultiEdit with the file's previous text and the line ranges the edit touched. Claude
Code's ``tool_response`` usually says both (``originalFile``, ``structuredPatch``); when
it does not, they are worked out from the edit's own arguments or from a diff. The new
version of the file is stored (:func:`store_versions`) and the edit gets its audit line
(:func:`audit_change`), as the file tools write one for each call.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CtxnbError
from ..hashing import sha256_hex

if TYPE_CHECKING:
    from ..govern.record import FileChange

__all__ = [
    "EditNotReproducible",
    "audit_change",
    "changed_ranges",
    "clamp",
    "edit_outcomes",
    "line_count",
    "original_text",
    "ranges_from_patch",
    "reverse_edits",
    "store_versions",
]


class EditNotReproducible(CtxnbError, ValueError):
    """ctxnb cannot tell which bytes an edit leaves: Claude Code would apply it only by
    normalising it (quotes, line endings, an old string not in the file verbatim)."""


# Line-number prefixes of Claude Code's Read output ("    12\t", "    12→"), which Claude
# Code strips from an edit's strings that carry them.
_LINE_NUMBER = re.compile(r"^ *\d+(?:\t|\u2192)", re.MULTILINE)


def edit_outcomes(tool: str, tool_input: Mapping[str, Any], old: bytes | None) -> list[bytes]:
    """Every content a Write, Edit or MultiEdit can leave in a file that holds ``old``.

    Claude Code applies an Edit to the file's text with its line endings made ``\\n``
    and writes the result with the file's own endings; it strips line-number prefixes
    (copied from its Read output) and, outside Markdown, trailing blanks of the new
    text; and when ``old_string`` is not in the file verbatim it looks for it again
    with quotes and other characters normalised. ctxnb reproduces the first three (each
    way, since which applies depends on the version) and refuses the last: when the old
    string is not found exactly as Claude Code first looks for it (once, or at least
    once with ``replace_all``), the result cannot be told.

    Args:
        tool: ``Write``, ``Edit`` or ``MultiEdit``.
        tool_input: the call's input.
        old: the file's bytes now; None when it does not exist.

    Returns:
        The possible new contents (at least one).

    Raises:
        EditNotReproducible: the result cannot be reproduced; the message says why.

    Example:
        >>> edit_outcomes("Edit", {"old_string": "a", "new_string": "b"}, b"a = 1\\n")
        [b'b = 1\\n']
        >>> edit_outcomes("Edit", {"old_string": "\\u201ca\\u201d", "new_string": "b"},
        ...               b'x = "a"\\n')  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ctxnb.integrations.claude_code_edits.EditNotReproducible: ...not in the file verbatim...
    """
    if old is None:
        text: str | None = None
    else:
        try:
            text = old.decode("utf-8")
        except UnicodeDecodeError:
            raise EditNotReproducible(
                "the file is not UTF-8 text, and Claude Code reads other encodings its own way"
            ) from None
        if text.startswith("\ufeff"):
            raise EditNotReproducible("the file starts with a byte-order mark")
    crlf = False
    if text is not None and "\r" in text:
        lone_lf = text.replace("\r\n", "").count("\n")
        if lone_lf or text.replace("\r\n", "").count("\r"):
            raise EditNotReproducible(
                "the file mixes line endings, and which one Claude Code writes cannot be told"
            )
        crlf = True
    if tool == "Write":
        content = tool_input.get("content")
        if not isinstance(content, str):
            raise EditNotReproducible("a Write needs tool_input.content (a string)")
        forms = {content}
        if crlf:
            forms.add(content.replace("\r\n", "\n").replace("\n", "\r\n"))
        return sorted(f.encode("utf-8") for f in forms)
    if tool == "Edit":
        edits: Any = [tool_input]
    elif tool == "MultiEdit":
        edits = tool_input.get("edits")
    else:
        raise EditNotReproducible(f"ctxnb does not reproduce what {tool} writes")
    if not isinstance(edits, list) or not edits:
        raise EditNotReproducible(f"a {tool} needs its edits")
    steps: list[tuple[str, str, bool]] = []
    for e in edits:
        if not isinstance(e, Mapping):
            raise EditNotReproducible("each edit must be an object")
        a, b = e.get("old_string"), e.get("new_string")
        if not isinstance(a, str) or not isinstance(b, str):
            raise EditNotReproducible("each edit needs old_string and new_string (strings)")
        steps.append((a, b, e.get("replace_all") is True))

    outcomes: set[str] = set()
    # Claude Code's own way first: line endings made \n, the strings as given.
    for lf in (True, False):
        for numbered in (False, True):
            for trimmed in (False, True):
                result = _apply(text, steps, lf=lf, numbered=numbered, trimmed=trimmed)
                if result is None:
                    if lf and not numbered and not trimmed:
                        raise EditNotReproducible(
                            "an old_string is not in the file verbatim (exactly once, or "
                            "with replace_all at least once): Claude Code would apply the "
                            "edit only after normalising it, and ctxnb cannot tell the result"
                        )
                    continue
                if lf and crlf:
                    result = result.replace("\n", "\r\n")
                outcomes.add(result)
    return sorted(o.encode("utf-8") for o in outcomes)


def _apply(
    text: str | None,
    steps: Sequence[tuple[str, str, bool]],
    *,
    lf: bool,
    numbered: bool,
    trimmed: bool,
) -> str | None:
    """The text after ``steps`` in one of the ways Claude Code may apply them, or None
    when an old string is not found as that way requires."""

    def form(s: str, new: bool) -> str:
        if lf:
            s = s.replace("\r\n", "\n")
        if numbered:
            s = _LINE_NUMBER.sub("", s)
        if trimmed and new:
            s = "\n".join(line.rstrip(" \t") for line in s.split("\n"))
        return s

    if text is None:
        # A new file: only an Edit whose old string is empty creates one.
        if len(steps) == 1 and steps[0][0] == "":
            return form(steps[0][1], True)
        return None
    current = text.replace("\r\n", "\n") if lf else text
    for a, b, replace_all in steps:
        old_s, new_s = form(a, False), form(b, True)
        if old_s == "":
            if current.strip():
                return None  # Claude Code refuses to "create" a file that has content
            current = new_s
            continue
        n = current.count(old_s)
        if n == 0 or (n > 1 and not replace_all):
            return None
        current = current.replace(old_s, new_s) if replace_all else current.replace(old_s, new_s, 1)
    return current


def original_text(
    tool: str, tool_input: Mapping[str, Any], response: Mapping[str, Any], new_text: str
) -> str | None:
    """The file's text before the edit: Claude Code's ``originalFile``, else the edits
    undone; None when neither says (a Write of a new file has none)."""
    old = response.get("originalFile")
    if isinstance(old, str):
        return old
    return reverse_edits(tool, tool_input, new_text)


def stored_text(root: Path, rel: str) -> str | None:
    """The text of the newest version of ``rel`` the store holds, None when it holds none.

    What a Write replaced when Claude Code's answer says neither the file before
    (``originalFile``) nor its patch: without it the whole file would be recorded as
    written by Claude Code, lines the store shows were there before included. Opening the
    store loads pyarrow; only this rare answer pays for it.
    """
    if not (root / ".ctxnb" / "store").is_dir():
        return None
    from ..workspace import Workspace

    with Workspace.open(root) as ws:
        doc = ws.store.get(ws.object_id(rel))
    content = doc.get("content") if doc is not None else None
    return content if isinstance(content, str) else None


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
    the store. Every ``FOLD_EVERY_TX`` inline transactions, or once the oldest waited
    the fold interval (``CTXNB_FOLD_AFTER``, 30 s), the store is opened to fold them, so
    outside readers of its Parquet files never lag far behind; what is not due yet is
    handed to a waiting process that folds it when it is (:mod:`ctxnb.store._foldlater`)."""
    from ..access.observe import observe_inline
    from ..resolver import default_filesystem_id, filesystem_of, normalize_path
    from ..store._log import COMPACT_AFTER, FOLD_EVERY_TX, fold_after_seconds

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
        observed, unfolded, uncompacted, oldest_us = inline
        compact_after = int(settings.get("compact_after", COMPACT_AFTER))
        fold_after = fold_after_seconds()
        # No timer outlives this process: the edits it leaves inline are folded by the
        # first hook (or any process opening the store) after the interval.
        overdue = (
            oldest_us is not None
            and fold_after is not None
            and time.time() - oldest_us / 1e6 >= fold_after
        )
        if unfolded < FOLD_EVERY_TX and uncompacted <= compact_after and not overdue:
            if fold_after is not None:
                from ..store._foldlater import hand_off

                # Nothing outlives this process to fold what it leaves within the
                # interval: a waiter does (one per store), unless one is there already.
                hand_off(os.path.join(real, ".ctxnb", "store"))
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
            mutating=True,
        )
    )
