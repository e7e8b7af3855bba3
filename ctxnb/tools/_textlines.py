"""Lines of a text with their terminators: the one splitting rule patches and edits share.

Private to ``ctxnb.tools``: :mod:`ctxnb.tools.patching` and :mod:`ctxnb.tools.lineedits`
use it, and the trace records take their changed line ranges from here.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_LINE_SPLIT = re.compile(r"\r\n|\n")


@dataclass
class Text:
    """A text split into line contents and their terminators."""

    lines: list[str]
    terms: list[str]
    newline: str
    ends_with_newline: bool

    @classmethod
    def split(cls, text: str) -> Text:
        lines: list[str] = []
        terms: list[str] = []
        pos = 0
        crlf = lf = 0
        for m in _LINE_SPLIT.finditer(text):
            lines.append(text[pos : m.start()])
            terms.append(m.group())
            if m.group() == "\r\n":
                crlf += 1
            else:
                lf += 1
            pos = m.end()
        if pos < len(text):
            lines.append(text[pos:])
            terms.append("")
        # An empty file counts as newline-terminated so that text added to it ends
        # with a newline, as editors do.
        ends = text == "" or bool(terms and terms[-1])
        return cls(lines, terms, "\r\n" if crlf > lf else "\n", ends)

    def join(self, lines: Sequence[str], terms: Sequence[str | None], ends: bool) -> str:
        """Join lines; a ``None`` terminator means "new line, use the file's style"."""
        if not lines:
            return ""
        out: list[str] = []
        last = len(lines) - 1
        for i, (line, term) in enumerate(zip(lines, terms, strict=True)):
            t = term or self.newline
            if i == last and not ends:
                t = ""
            out.append(line + t)
        return "".join(out)


def strip_terminator(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n"):
        return line[:-1]
    return line


def raw_split(text: str) -> list[str]:
    """Lines with their terminators, split at ``\\n`` only (git's notion of a line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def show(line: str, limit: int = 60) -> str:
    from ctxnb.redaction.redactor import redact_text  # not for changed_line_ranges' importers

    # Redacted whole, then cut: a secret cut in half is no longer recognisable.
    line = redact_text(line)
    return repr(line if len(line) <= limit else line[:limit] + "…")


def _lines(text: str) -> list[str]:
    """``Text.split(text).lines``: the lines without their terminators, split in C."""
    lines = text.split("\n") if "\r" not in text else _LINE_SPLIT.split(text)
    if lines[-1] == "":
        lines.pop()  # the text ends with a terminator (or is empty): no last line
    return lines


def changed_line_ranges(old: str, new: str) -> list[tuple[int, int]]:
    """Line ranges of ``new`` that were added or changed relative to ``old``.

    Pure deletions leave nothing in ``new`` to point to and are not reported.
    Adjacent ranges are merged.

    Args:
        old: the text before.
        new: the text after.

    Returns:
        1-based inclusive ``(start, end)`` ranges in ``new``, in order.

    Example:
        >>> changed_line_ranges("a\\nb\\nc\\n", "a\\nB\\nc\\nd\\n")
        [(2, 2), (4, 4)]
    """
    a, b = _lines(old), _lines(new)
    if a == b:
        return []
    if not a or b and set(a).isdisjoint(b):
        # No line of ``new`` is in ``old``: SequenceMatcher finds no matching block (a
        # block is a run of equal lines; there is no junk), so its opcodes are one
        # replace or insert of all of ``new``. A rewritten file is often this case.
        return [(1, len(b))] if b else []
    try:
        return _matched_ranges(a, b, steps=max(MATCH_STEPS, 20 * (len(a) + len(b))))
    except _TooCostly:
        return _aligned_ranges(a, b)


MATCH_STEPS = 1_000_000
"""The most steps difflib's matcher takes for :func:`changed_line_ranges` (a tenth of a
second or so) before the bounded alignment of :mod:`ctxnb._util.linediff` takes over:
on a rewrite of repeated lines the matcher's steps grow with the cube of the lines."""


class _TooCostly(Exception):
    pass


class _BoundedMatcher(difflib.SequenceMatcher[str]):
    """difflib's matcher that gives up after ``steps`` steps of its inner loop.

    Each search for a longest block visits, for every line of ``a`` in its range, the
    positions of that line in ``b`` (no line is junk): that is charged before it runs.
    """

    def __init__(self, a: Sequence[str], b: Sequence[str], steps: int) -> None:
        super().__init__(None, a, b, autojunk=False)
        self.left = steps
        in_b = Counter(b)
        self._cost = [0]
        for x in a:
            self._cost.append(self._cost[-1] + 1 + in_b.get(x, 0))

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        top = len(self._cost) - 1 if ahi is None else ahi
        self.left -= self._cost[top] - self._cost[alo]
        if self.left < 0:
            raise _TooCostly
        return super().find_longest_match(alo, ahi, blo, bhi)


def _matched_ranges(
    a: list[str], b: list[str], *, steps: int | None = None
) -> list[tuple[int, int]]:
    """:func:`changed_line_ranges` of two line lists, by difflib's matcher alone (within
    ``steps`` steps of it when given; over them, :class:`_TooCostly`)."""
    ranges: list[tuple[int, int]] = []
    matcher = (
        difflib.SequenceMatcher(None, a, b, autojunk=False)
        if steps is None
        else _BoundedMatcher(a, b, steps)
    )
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert") and j2 > j1:
            if ranges and ranges[-1][1] >= j1:
                ranges[-1] = (ranges[-1][0], j2)
            else:
                ranges.append((j1 + 1, j2))
    return ranges


def _aligned_ranges(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """:func:`changed_line_ranges` by the bounded alignment: the lines of ``b`` it does
    not pair with a line of ``a``."""
    from .._util.linediff import anchored, intern_lines

    keys_a, keys_b = intern_lines(a, b)
    kept = {j for _, j in anchored(keys_a, keys_b).pairs}
    ranges: list[tuple[int, int]] = []
    for j in range(len(b)):
        if j in kept:
            continue
        if ranges and ranges[-1][1] == j:
            ranges[-1] = (ranges[-1][0], j + 1)
        else:
            ranges.append((j + 1, j + 1))
    return ranges
