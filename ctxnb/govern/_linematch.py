"""Lines of a file today matched to the ranges trace records wrote (for :mod:`.why`).

A range names its lines by position and by ``content_hash``
(:func:`~ctxnb.govern.ledger.normalized_content_hash`). :class:`LineMatcher` finds the
stored version a record was made on and carries the range's lines over to the file as
it is now with a patience diff; without a stored version it trusts the hash, in place
or at the nearest window with the same hash. The rules are told in :mod:`.why`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from ._tracerecord import _LINE_END, normalized_content_hash

if TYPE_CHECKING:
    from ..store.objectstore import Version

__all__ = ["LineMatcher", "MatchKind", "Range", "line_key", "split_lines"]

MatchKind = Literal["in place", "moved", "partial"]


def split_lines(text: str) -> list[str]:
    """Lines as the ranges count them (:func:`ctxnb.govern.ledger.build_trace_record`)."""
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _window_hash(lines: Sequence[str], start: int, end: int) -> str | None:
    """The ``content_hash`` of 1-based inclusive lines ``start..end``, None outside."""
    if not 1 <= start <= end <= len(lines):
        return None
    return normalized_content_hash("".join(line + "\n" for line in lines[start - 1 : end]))


def line_key(line: str) -> str:
    """A line as the content hash sees it (line endings, trailing blanks ignored)."""
    if "\r" not in line:  # nearly always: a lone CR splits a line only for the hash
        return line.rstrip(" \t")
    return "\n".join(p.rstrip(" \t") for p in line.replace("\r", "\n").split("\n"))


def _line_map(old: list[str], new: list[str]) -> dict[int, int]:
    """0-based lines of ``old`` → lines of ``new`` that a line diff keeps.

    Patience diff (``patiencediff``, Breezy's): lines that occur once in both texts
    anchor the alignment, and the runs between anchors are matched in turn. A line
    written by a record is carried over when it sits among lines that still match,
    and a repeated line (a blank line, a closing bracket) follows its neighbours rather
    than the first copy of it. difflib on two long files full of such lines costs
    quadratic time; this costs a few milliseconds.

    A line with no letter or digit (a blank line, a lone bracket) never anchors: one
    that happens to occur once in both texts would otherwise compete with the lines
    around it, and the alignment may keep the blank line and drop a written one. Such
    lines are matched afterwards, inside the gaps the real anchors leave.
    """
    import patiencediff  # a Rust extension, loaded when a diff is needed

    matcher = patiencediff.PatienceSequenceMatcher
    # An object equals only itself: such a line matches nothing in the first pass.
    o: list[object] = [k if _anchors(k) else object() for k in old]
    n: list[object] = [k if _anchors(k) else object() for k in new]
    out: dict[int, int] = {}
    pa = pb = 0
    for a, b, size in matcher(None, o, n).get_matching_blocks():
        if a > pa and b > pb:  # a gap on both sides: match what is left in it
            for sa, sb, ss in matcher(None, old[pa:a], new[pb:b]).get_matching_blocks():
                out.update((pa + sa + k, pb + sb + k) for k in range(ss))
        out.update((a + k, b + k) for k in range(size))
        pa, pb = a + size, b + size
    return out


def _anchors(key: str) -> bool:
    """Whether a line may anchor the alignment: it holds a letter or a digit."""
    return any(c.isalnum() for c in key)


@dataclass
class Range:
    """One range of one record (of one conversation of it)."""

    order: int  # the record's place in the ledger: later is newer
    key: str
    start: int
    end: int
    content_hash: str


class LineMatcher:
    """Finds, for each range of each record, the lines of today's file it wrote."""

    def __init__(self, current: list[str], versions: list[Version]) -> None:
        self.current = current
        self._memo: dict[str, str] = {}
        self.cur_keys = self._keys(current)
        self._versions = [
            (v.tx_time, v.doc["content"]) for v in versions if isinstance(v.doc.get("content"), str)
        ]
        self._lines: dict[int, list[str]] = {}
        self._maps: dict[int, dict[int, int]] = {}
        self._windows: dict[int, dict[str, list[int]]] = {}

    def _keys(self, lines: list[str]) -> list[str]:
        # Versions of one file share most of their lines: each text is normalized once.
        memo = self._memo
        out = []
        for line in lines:
            key = memo.get(line)
            if key is None:
                key = memo[line] = line_key(line)
            out.append(key)
        return out

    def lines(self, version: int) -> list[str]:
        """The lines of a stored version (split when first needed)."""
        if version not in self._lines:
            self._lines[version] = split_lines(self._versions[version][1])
        return self._lines[version]

    def version_for(self, when: datetime | None, ranges: Sequence[Range]) -> int | None:
        """The stored version a record was made on: every range hashes alike there;
        the closest in time when several do."""
        order: Sequence[int] = range(len(self._versions))
        if when is not None:
            order = sorted(order, key=lambda i: abs((self._versions[i][0] - when).total_seconds()))
        for i in order:
            lines = self.lines(i)
            if all(_window_hash(lines, r.start, r.end) == r.content_hash for r in ranges):
                return i
        return None

    def mapping(self, version: int) -> dict[int, int]:
        """0-based line of the version → 0-based line today, for lines a diff keeps."""
        if version not in self._maps:
            old = self._keys(self.lines(version))
            if old == self.cur_keys:  # unchanged since: no diff needed
                self._maps[version] = {i: i for i in range(len(old))}
            else:
                self._maps[version] = _line_map(old, self.cur_keys)
        return self._maps[version]

    def occurrences(self, length: int, content_hash: str) -> list[int]:
        """1-based starts of today's windows of ``length`` lines with that hash."""
        if length not in self._windows:
            index: dict[str, list[int]] = {}
            for s in range(1, len(self.current) - length + 2):
                h = _window_hash(self.current, s, s + length - 1)
                index.setdefault(h or "", []).append(s)
            self._windows[length] = index
        return self._windows[length].get(content_hash, [])

    def lines_of(self, r: Range, version: int | None) -> list[tuple[int, MatchKind]]:
        """Today's 1-based lines that ``r`` wrote, and how they were found."""
        length = r.end - r.start + 1
        if version is not None:
            # The diff with the version the record was made on decides, even where the
            # range's hash matches in place: the same text at the same line number may be
            # another copy (a blank line, a closing brace) after lines moved.
            m = self.mapping(version)
            got = [m[i] + 1 for i in range(r.start - 1, r.end) if i in m]
            if not got:
                return []
            kind: MatchKind = "partial"
            if len(got) == length and got[-1] - got[0] == length - 1:
                kind = "in place" if got[0] == r.start else "moved"
            return [(n, kind) for n in got]
        if _window_hash(self.current, r.start, r.end) == r.content_hash:
            return [(n, "in place") for n in range(r.start, r.end + 1)]
        starts = self.occurrences(length, r.content_hash)
        # Every occurrence has the same content: a blank range would match anywhere.
        first = starts[0] - 1 if starts else 0
        if not starts or not any(self.cur_keys[i].strip() for i in range(first, first + length)):
            return []
        s = min(starts, key=lambda x: abs(x - r.start))
        return [(n, "moved") for n in range(s, s + length)]
