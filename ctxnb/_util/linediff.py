"""Which lines of one text another keeps, in bounded time: the line diff behind the
destructive check and the diffs ctxnb shows.

difflib's ``SequenceMatcher`` looks for the longest matching block and recurses on both
sides of it; on texts of repeated lines (blank lines, braces, the rows of a data file)
each search visits every pair of equal lines, and one 2,000-line rewrite costs minutes.
Here:

* lines are interned to small ints (:func:`intern_lines`) and the common prefix and
  suffix, which every longest alignment keeps, are set aside;
* :func:`lcs` finds a longest common subsequence of the rest with the bit-parallel
  algorithm of Allison and Dix (1986) in the form of Crochemore et al. (2001): one
  Python-int step per line of the new text over a bit vector of the old, n·m/64 machine
  words in all (2,000 by 2,000 lines in a few milliseconds); the vectors are kept to
  trace one alignment back. It is the most lines any diff can keep;
* :func:`anchored` aligns as patience diff does (``patiencediff``, Breezy's: lines that
  occur once on each side anchor the alignment), and fills each gap between anchors
  with :func:`lcs`: the diff a human reads, where a moved block does not drag blank
  lines along.

Both are bounded: at most :data:`MAX_CELLS` pairs of lines are compared bit-parallel (the
vectors kept cost one bit per pair), and an optional deadline (a ``time.monotonic()``
value) is checked as the vectors go. Past a bound the answer is incomplete
(``exact`` false: more lines may be kept than it found), never late; the caller decides
what that means (the destructive check holds the change).

Example:
    >>> a, b = intern_lines(["x\\n", "y\\n", "x\\n"], ["y\\n", "x\\n", "z\\n"])
    >>> lcs(a, b)
    Alignment(pairs=[(1, 0), (2, 1)], exact=True)
    >>> runs(lcs(a, b).pairs)
    [(1, 0, 2)]
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import NamedTuple

__all__ = [
    "MAX_CELLS",
    "Alignment",
    "anchored",
    "grouped_opcodes",
    "intern_lines",
    "lcs",
    "runs",
]

MAX_CELLS = 1 << 28
"""The most pairs of lines one alignment compares bit-parallel (32 MB of kept vectors,
about a quarter of a second): 16,000 by 16,000 lines of a rewrite with no common prefix
or suffix. Larger gaps are left unaligned, and the answer says it is not exact."""

_CHECK_EVERY = 128  # rows between two looks at the clock


class Alignment(NamedTuple):
    """Pairs ``(i, j)`` of equal lines, increasing on both sides.

    Attributes:
        pairs: ``a[i] == b[j]`` for each pair; ``i`` and ``j`` both increase.
        exact: False when a bound (cells or deadline) cut the search: more lines may be
            kept than ``pairs`` holds.
    """

    pairs: list[tuple[int, int]]
    exact: bool


def intern_lines(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[list[int], list[int]]:
    """Both texts' lines as small ints, equal lines as equal ints (compared and hashed once).

    Example:
        >>> intern_lines(["a", "b", "a"], ["b", "c"])
        ([0, 1, 0], [1, 2])
    """
    ids: dict[Hashable, int] = {}
    return [ids.setdefault(x, len(ids)) for x in a], [ids.setdefault(y, len(ids)) for y in b]


def _affixes(
    a: Sequence[int], b: Sequence[int], alo: int, ahi: int, blo: int, bhi: int
) -> tuple[int, int]:
    """Lengths of the common prefix and suffix of ``a[alo:ahi]`` and ``b[blo:bhi]``."""
    pre = 0
    top = min(ahi - alo, bhi - blo)
    while pre < top and a[alo + pre] == b[blo + pre]:
        pre += 1
    suf = 0
    top -= pre
    while suf < top and a[ahi - 1 - suf] == b[bhi - 1 - suf]:
        suf += 1
    return pre, suf


class _Budget:
    """What is left of one alignment's bounds (cells, deadline)."""

    __slots__ = ("cells", "deadline", "cut")

    def __init__(self, cells: int, deadline: float | None) -> None:
        self.cells = cells
        self.deadline = deadline
        self.cut = False

    def late(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.cut = True
        return self.cut


def _bitparallel(
    a: Sequence[int], b: Sequence[int], alo: int, ahi: int, blo: int, bhi: int, budget: _Budget
) -> list[tuple[int, int]] | None:
    """A longest common subsequence of ``a[alo:ahi]`` and ``b[blo:bhi]`` (absolute
    indices), or None when the bounds do not allow it.

    Bit ``i`` of the vector ``v`` after ``j`` lines of ``b`` is 0 where the LCS of
    ``a[:i+1]`` and ``b[:j]`` is one longer than that of ``a[:i]`` and ``b[:j]``; a line
    ``y`` of ``b`` moves it by ``v' = (v + u) | (v - u)`` with ``u = v & match[y]``.
    """
    n, m = ahi - alo, bhi - blo
    if n == 0 or m == 0:
        return []
    if n * m > budget.cells:
        budget.cut = True
        return None
    budget.cells -= n * m
    # One bit mask per line value: where it occurs in a[alo:ahi]. Built from the
    # positions at once, so that a value occurring often costs one int, not one per copy.
    where: dict[int, list[int]] = {}
    for i in range(alo, ahi):
        where.setdefault(a[i], []).append(i - alo)
    masks: dict[int, int] = {}
    for key, positions in where.items():
        if len(positions) < 64:
            mask = 0
            for p in positions:
                mask |= 1 << p
        else:
            bits = bytearray((n + 7) // 8)
            for p in positions:
                bits[p >> 3] |= 1 << (p & 7)
            mask = int.from_bytes(bits, "little")
        masks[key] = mask
    full = (1 << n) - 1
    v = full
    rows: list[int] = []
    for j in range(blo, bhi):
        match = masks.get(b[j])
        if match is not None:
            u = v & match
            v = ((v + u) | (v - u)) & full
        rows.append(v)
        if not (j - blo) % _CHECK_EVERY and budget.late():
            return None
    pairs: list[tuple[int, int]] = []
    i, j = n, m
    while i and j:
        if a[alo + i - 1] == b[blo + j - 1]:
            pairs.append((alo + i - 1, blo + j - 1))
            i -= 1
            j -= 1
        elif rows[j - 1] >> (i - 1) & 1:  # the LCS of a[:i-1], b[:j] is as long
            i -= 1
        else:
            j -= 1
    pairs.reverse()
    return pairs


def _fill(
    a: Sequence[int],
    b: Sequence[int],
    alo: int,
    ahi: int,
    blo: int,
    bhi: int,
    budget: _Budget,
    out: list[tuple[int, int]],
) -> None:
    """Append a longest alignment of ``a[alo:ahi]`` and ``b[blo:bhi]`` to ``out`` (its
    common prefix and suffix at least, when the bounds stop the rest)."""
    pre, suf = _affixes(a, b, alo, ahi, blo, bhi)
    out.extend((alo + k, blo + k) for k in range(pre))
    mid = _bitparallel(a, b, alo + pre, ahi - suf, blo + pre, bhi - suf, budget)
    if mid:
        out.extend(mid)
    out.extend((ahi - suf + k, bhi - suf + k) for k in range(suf))


def lcs(
    a: Sequence[int],
    b: Sequence[int],
    *,
    deadline: float | None = None,
    max_cells: int = MAX_CELLS,
) -> Alignment:
    """A longest common subsequence of two interned texts: the most lines any diff keeps.

    Args:
        a: the old text's lines (:func:`intern_lines`).
        b: the new text's lines.
        deadline: a ``time.monotonic()`` value; past it the answer is not exact.
        max_cells: the most pairs of lines compared bit-parallel.

    Returns:
        The alignment; not ``exact`` when a bound stopped it (then it holds the common
        prefix and suffix only).

    Example:
        >>> lcs([0, 1, 2, 3], [3, 1, 2, 0])
        Alignment(pairs=[(1, 1), (2, 2)], exact=True)
    """
    budget = _Budget(max_cells, deadline)
    out: list[tuple[int, int]] = []
    _fill(a, b, 0, len(a), 0, len(b), budget, out)
    return Alignment(out, not budget.cut)


def anchored(
    a: Sequence[int],
    b: Sequence[int],
    *,
    deadline: float | None = None,
    max_cells: int = MAX_CELLS,
) -> Alignment:
    """An alignment anchored on lines unique to both texts (patience diff), each gap
    between anchors filled by :func:`lcs`: the alignment a diff shows.

    Example:
        >>> anchored([7, 0, 1, 2, 7], [7, 0, 9, 2, 7, 7]).pairs
        [(0, 0), (1, 1), (3, 3), (4, 5)]
    """
    budget = _Budget(max_cells, deadline)
    out: list[tuple[int, int]] = []
    pre, suf = _affixes(a, b, 0, len(a), 0, len(b))
    out.extend((k, k) for k in range(pre))
    ahi, bhi = len(a) - suf, len(b) - suf
    anchors: list[tuple[int, int, int]] = []
    if pre < ahi and pre < bhi:
        import patiencediff  # a Rust extension, loaded when a diff is needed

        try:
            found = patiencediff.PatienceSequenceMatcher(
                None, a[pre:ahi], b[pre:bhi]
            ).get_matching_blocks()
            anchors = [(pre + x, pre + y, size) for x, y, size in found if size]
        except Exception:  # a recursion limit: the gaps below align without anchors
            anchors = []
    i, j = pre, pre
    for x, y, size in [*anchors, (ahi, bhi, 0)]:
        if x < i or y < j:  # not increasing: ignore a bad anchor rather than trust it
            continue
        _fill(a, b, i, x, j, y, budget, out)
        out.extend((x + k, y + k) for k in range(size))
        i, j = x + size, y + size
    out.extend((ahi + k, bhi + k) for k in range(suf))
    return Alignment(out, not budget.cut)


def runs(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """The pairs as runs ``(i, j, size)`` of consecutive lines on both sides.

    Example:
        >>> runs([(0, 0), (1, 1), (3, 2)])
        [(0, 0, 2), (3, 2, 1)]
    """
    out: list[tuple[int, int, int]] = []
    for i, j in pairs:
        if out:
            x, y, size = out[-1]
            if x + size == i and y + size == j:
                out[-1] = (x, y, size + 1)
                continue
        out.append((i, j, 1))
    return out


Opcode = tuple[str, int, int, int, int]


def grouped_opcodes(
    pairs: Sequence[tuple[int, int]], n_a: int, n_b: int, context: int = 3
) -> list[list[Opcode]]:
    """The hunks of a unified diff: groups of difflib-style opcodes (``equal``,
    ``replace``, ``delete``, ``insert``) with ``context`` lines around each change, as
    ``difflib.SequenceMatcher.get_grouped_opcodes`` makes them.

    Example:
        >>> grouped_opcodes([(0, 0), (2, 2)], 3, 3)
        [[('equal', 0, 1, 0, 1), ('replace', 1, 2, 1, 2), ('equal', 2, 3, 2, 3)]]
    """
    codes: list[Opcode] = []
    i = j = 0
    for x, y, size in [*runs(pairs), (n_a, n_b, 0)]:
        if i < x and j < y:
            codes.append(("replace", i, x, j, y))
        elif i < x:
            codes.append(("delete", i, x, j, j))
        elif j < y:
            codes.append(("insert", i, i, j, y))
        if size:
            codes.append(("equal", x, x + size, y, y + size))
        i, j = x + size, y + size
    if not codes:
        codes = [("equal", 0, 1, 0, 1)]
    # Trim the context of the first and last equal runs, then cut at long equal runs
    # (difflib's grouping, so that hunks look as they always have).
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups
