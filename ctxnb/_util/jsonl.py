"""Reading JSON lines: the one reader behind every JSONL file ctxnb reads.

The trace ledger, the audit log, Claude Code transcripts and ctxnb trajectories are all
JSON lines, and all are appended to by processes that may be killed mid-line. So every
reader needs the same rules, and they live here once:

- lines are split on ``\\n`` only (JSON text can hold a raw U+2028, which
  :meth:`str.splitlines` would split);
- a blank line is ignored;
- a line that is not JSON is skipped and reported as a :class:`SkippedLine` — a last line
  without its newline is a *cut line* (a crash during an append), any other a damaged
  one; a valid last line whose newline is missing is read;
- with ``objects=True`` (the default) a JSON value that is not an object is skipped too.

Example:
    >>> skipped: list[SkippedLine] = []
    >>> list(iter_jsonl(b'{"a": 1}\\n\\n[2]\\n{"b": 2}\\n{"c":', skipped=skipped))
    [(1, {'a': 1}), (4, {'b': 2})]
    >>> [(s.lineno, s.reason) for s in skipped]
    [(3, 'not a JSON object'), (5, 'cut line (no newline at end of file)')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from .record import FrozenRecord

__all__ = ["SkippedLine", "iter_jsonl"]


class SkippedLine(FrozenRecord):
    """A JSON line that could not be read.

    Attributes:
        lineno: 1-based line number in the file.
        reason: why it was skipped.
        preview: the start of the line, for a human to look at.
    """

    __slots__ = ("lineno", "reason", "preview")
    lineno: int
    reason: str
    preview: str

    def __init__(self, lineno: int, reason: str, preview: str) -> None:
        self._fill(lineno, reason, preview)


def _preview(raw: bytes | str, width: int = 80) -> str:
    raw = raw[: width * 4 + 1]  # a line may be huge: decode no more than is shown
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\n")
    return text if len(text) <= width else text[:width] + "…"


def _lines(data: bytes) -> Iterator[bytes]:
    parts = data.split(b"\n")
    for part in parts[:-1]:
        yield part + b"\n"
    if parts[-1]:
        yield parts[-1]  # the last line, without its newline


def iter_jsonl(
    source: bytes | str | Iterable[bytes] | Iterable[str],
    *,
    skipped: list[SkippedLine] | None = None,
    objects: bool = True,
) -> Iterator[tuple[int, Any]]:
    """Each readable line of a JSON-lines text as ``(line number, value)``.

    Args:
        source: the whole text (bytes or str), or its lines as a binary file or any
            iterable of lines that keep their ``\\n``.
        skipped: a list that receives a :class:`SkippedLine` for each line not read.
        objects: skip (and report) values that are not JSON objects.

    Example:
        >>> list(iter_jsonl('{"x": "a\\u2028b"}\\n'))
        [(1, {'x': 'a\\u2028b'})]
    """
    if isinstance(source, str):
        source = source.encode("utf-8")
    lines: Iterable[bytes | str] = (
        _lines(bytes(source)) if isinstance(source, (bytes, bytearray)) else source
    )
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:  # also a line that is not UTF-8
            if skipped is not None:
                complete = raw.endswith(b"\n") if isinstance(raw, bytes) else raw.endswith("\n")
                reason = "not valid JSON" if complete else "cut line (no newline at end of file)"
                skipped.append(SkippedLine(lineno, reason, _preview(raw)))
            continue
        except RecursionError:  # the parser recurses per level: one bad line, not a crash
            if skipped is not None:
                skipped.append(SkippedLine(lineno, "nested too deeply", _preview(raw)))
            continue
        if objects and not isinstance(value, dict):
            if skipped is not None:
                skipped.append(SkippedLine(lineno, "not a JSON object", _preview(raw)))
            continue
        yield lineno, value
