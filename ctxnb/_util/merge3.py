"""Three-way line merge with ``git merge-file -p --diff3`` semantics.

A stale edit has three texts: the *base* the agent read, *ours* (the agent's edit of
it) and *theirs* (the file now, changed by someone else since). Each side's change
against the base is a list of hunks; a hunk only one side made is taken, a hunk both
sides made identically is taken once, and hunks of the two sides that overlap **or
touch** (one ends on the line where the other starts) form a conflict, as git's
``xdl_do_merge`` decides at its ``EAGER`` level (the level ``--diff3`` output uses: a
conflict shows the base, so it is never narrowed).

The side diffs are longest common subsequences (:func:`ctxnb._util.linediff.lcs`, a
minimal diff as Myers' is), whose change groups are then slid as git's
``xdl_change_compact`` slides them: as far down as the equal lines allow, unless a
position lines up with a change of the other file. Where several minimal diffs exist,
this picks the one git picks in the cases the tests compare (``tests/_util/
test_merge3.py`` runs ``git merge-file`` on generated and real files). A diff too large
to align exactly is never guessed: the whole differing region is one conflict.

Lines keep their endings (``"x\\n"`` and a last ``"x"`` differ, as in git).

Example:
    >>> base = "a\\nb\\nc\\nd\\n"
    >>> r = merge3(base, "A\\nb\\nc\\nd\\n", "a\\nb\\nc\\nD\\n")
    >>> r.clean, r.text()
    (True, 'A\\nb\\nc\\nD\\n')
    >>> r = merge3(base, "a\\nB\\nc\\nd\\n", "a\\nX\\nc\\nd\\n")
    >>> r.clean, [(c.base, c.ours, c.theirs) for c in r.conflicts()]
    (False, [(['b\\n'], ['B\\n'], ['X\\n'])])
    >>> r.text().splitlines()  # doctest: +NORMALIZE_WHITESPACE
    ['a', '<<<<<<< ours', 'B', '||||||| base', 'b', '=======', 'X', '>>>>>>> theirs',
     'c', 'd']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .linediff import intern_lines, lcs

__all__ = ["Chunk", "Merge", "merge3", "split_lines"]


def split_lines(text: str) -> list[str]:
    """``text`` as lines, each with its ending (only ``\\n`` ends a line, as in git)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


@dataclass(frozen=True)
class Chunk:
    """One stretch of the merge: taken lines (``conflict`` false, in ``lines``), or a
    conflict with each side's lines and where it lies in the base (0-based, end
    excluded)."""

    lines: list[str] = field(default_factory=list)
    conflict: bool = False
    base: list[str] = field(default_factory=list)
    ours: list[str] = field(default_factory=list)
    theirs: list[str] = field(default_factory=list)
    base_start: int = 0
    base_end: int = 0


@dataclass(frozen=True)
class Merge:
    """A three-way merge: its chunks in order."""

    chunks: list[Chunk]

    @property
    def clean(self) -> bool:
        return not any(c.conflict for c in self.chunks)

    def conflicts(self) -> list[Chunk]:
        return [c for c in self.chunks if c.conflict]

    def text(
        self,
        resolved: Sequence[Sequence[str]] | None = None,
        *,
        labels: tuple[str, str, str] = ("ours", "base", "theirs"),
    ) -> str:
        """The merged text; each conflict is replaced by its entry of ``resolved`` (lines),
        or shown with ``--diff3`` markers when ``resolved`` is None.

        Raises:
            ValueError: ``resolved`` does not have one entry per conflict.
        """
        conflicts = self.conflicts()
        if resolved is not None and len(resolved) != len(conflicts):
            raise ValueError(f"{len(resolved)} resolutions for {len(conflicts)} conflicts")
        out: list[str] = []
        k = 0
        for c in self.chunks:
            if not c.conflict:
                out.extend(c.lines)
                continue
            if resolved is not None:
                out.extend(resolved[k])
                k += 1
                continue
            ours_l, base_l, theirs_l = labels
            out.append(f"<<<<<<< {ours_l}\n")
            out.extend(_ended(c.ours))
            out.append(f"||||||| {base_l}\n")
            out.extend(_ended(c.base))
            out.append("=======\n")
            out.extend(_ended(c.theirs))
            out.append(f">>>>>>> {theirs_l}\n")
        return "".join(out)


def _ended(lines: list[str]) -> list[str]:
    # A side whose last line has no newline still leaves the marker on its own line.
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + "\n"]
    return lines


# A change of one side against the base: base[i1:i1+n1] became side[i2:i2+n2].
_Hunk = tuple[int, int, int, int]


def _changed(a: list[int], b: list[int], *, late: bool) -> tuple[list[bool], list[bool]] | None:
    """Which lines of ``a`` and of ``b`` a minimal diff changes (``late``: the one found
    from the ends); None when the aligner could not give an exact answer (the caller does
    not guess)."""
    found = lcs(a[::-1], b[::-1]) if late else lcs(a, b)
    if not found.exact:
        return None
    ca, cb = [True] * len(a), [True] * len(b)
    for i, j in found.pairs:
        if late:
            i, j = len(a) - 1 - i, len(b) - 1 - j
        ca[i] = cb[j] = False
    return ca, cb


def _compact(recs: list[int], chg: list[bool], orecs: list[int], ochg: list[bool]) -> None:
    """Slide the change groups of one file as git's ``xdl_change_compact`` does: each
    group as far up, then as far down, as equal lines allow (merging with groups it
    meets); then back up to line up with a change group of the other file, if one was
    passed."""
    n, on = len(recs), len(orecs)
    # Group cursors: [start, end) of the current group in this file and the other.
    start = end = 0
    ostart = oend = 0

    def grow(s: int) -> int:
        e = s
        while e < n and chg[e]:
            e += 1
        return e

    def ogrow(s: int) -> int:
        e = s
        while e < on and ochg[e]:
            e += 1
        return e

    end = grow(start)
    oend = ogrow(ostart)
    while True:
        if end != start:
            while True:
                size = end - start
                end_matching_other = -1
                # Up as far as possible.
                while start > 0 and recs[start - 1] == recs[end - 1]:
                    start -= 1
                    end -= 1
                    chg[start], chg[end] = True, False
                    while start > 0 and chg[start - 1]:
                        start -= 1
                    # the other file's previous group
                    oend = ostart - 1
                    ostart = oend
                    while ostart > 0 and ochg[ostart - 1]:
                        ostart -= 1
                earliest_end = end
                if oend > ostart:
                    end_matching_other = end
                # Down as far as possible.
                while end < n and recs[start] == recs[end]:
                    chg[start], chg[end] = False, True
                    start += 1
                    end = grow(end)
                    ostart = oend + 1
                    oend = ogrow(ostart)
                    if oend > ostart:
                        end_matching_other = end
                if size == end - start:
                    break
            if end != earliest_end and end_matching_other != -1:
                # Back up to line up with the last change group of the other file.
                while oend == ostart:
                    start -= 1
                    end -= 1
                    chg[start], chg[end] = True, False
                    while start > 0 and chg[start - 1]:
                        start -= 1
                    oend = ostart - 1
                    ostart = oend
                    while ostart > 0 and ochg[ostart - 1]:
                        ostart -= 1
        # Next group in both files (an unchanged line pairs the two).
        if end >= n:
            break
        start = end + 1
        end = grow(start)
        ostart = oend + 1
        oend = ogrow(ostart)


def _hunks(base: list[int], side: list[int], *, late: bool) -> list[_Hunk] | None:
    found = _changed(base, side, late=late)
    if found is None:
        return None
    cb, cs = found
    _compact(base, cb, side, cs)
    _compact(side, cs, base, cb)
    hunks: list[_Hunk] = []
    i = j = 0
    nb, ns = len(base), len(side)
    while i < nb or j < ns:
        if i < nb and j < ns and not cb[i] and not cs[j]:
            i += 1
            j += 1
            continue
        i0, j0 = i, j
        while i < nb and cb[i]:
            i += 1
        while j < ns and cs[j]:
            j += 1
        hunks.append((i0, i - i0, j0, j - j0))
    return hunks


def merge3(base: str, ours: str, theirs: str) -> Merge:
    """Merge ``ours`` and ``theirs``, both edits of ``base`` (see the module)."""
    b, o, t = split_lines(base), split_lines(ours), split_lines(theirs)
    if o == t or t == b:
        return Merge([Chunk(lines=o)] if o else [])
    if o == b:
        return Merge([Chunk(lines=t)] if t else [])
    whole = Merge([Chunk(conflict=True, base=b, ours=o, theirs=t, base_end=len(b))])
    kb, ko = intern_lines(b, o)
    kb2, kt = intern_lines(b, t)
    ours_h = [_hunks(kb, ko, late=False), _hunks(kb, ko, late=True)]
    theirs_h = [_hunks(kb2, kt, late=False), _hunks(kb2, kt, late=True)]
    merges = []
    for h1 in ours_h:
        for h2 in theirs_h:
            if h1 is None or h2 is None:
                return whole  # too large to align exactly: not guessed
            merges.append(_merge(b, o, t, h1, h2))
    # Where minimal diffs of a side disagree (repeated lines), the clean merge of one may
    # differ from git's: a merge is clean only when every pairing agrees on it.
    conflicted = [m for m in merges if not m.clean]
    if conflicted:
        return conflicted[0]
    if len({m.text() for m in merges}) != 1:
        return whole
    h1, h2 = ours_h[0], theirs_h[0]
    assert h1 is not None and h2 is not None
    # Nor when a change of one side could be drawn onto equal lines next to it and meet
    # a change of the other side: another minimal diff (git's) may make them one conflict.
    r1, r2 = _reach(kb, ko, h1), _reach(kb2, kt, h2)
    if any(a[0] <= c[1] and c[0] <= a[1] for a in r1 for c in r2):
        return _merge(b, o, t, _widened(h1, r1), _widened(h2, r2))
    return merges[0]


def _reach(base: list[int], side: list[int], hunks: list[_Hunk]) -> list[tuple[int, int]]:
    """The base lines each hunk could cover in another minimal diff: its own, and the
    neighbours equal to a line it removes or adds."""
    out = []
    for i, n, j, m in hunks:
        own = set(base[i : i + n]) | set(side[j : j + m])
        lo, hi = i, i + n
        while lo > 0 and base[lo - 1] in own:
            lo -= 1
        while hi < len(base) and base[hi] in own:
            hi += 1
        out.append((lo, hi))
    return out


def _widened(hunks: list[_Hunk], reach: list[tuple[int, int]]) -> list[_Hunk]:
    """Each hunk over its reach (the equal lines it takes in are on both sides of it),
    touching neighbours joined."""
    out: list[_Hunk] = []
    for (i, n, j, m), (lo, hi) in zip(hunks, reach, strict=True):
        before, after = i - lo, hi - (i + n)
        hunk = (lo, hi - lo, j - before, m + before + after)
        if out and out[-1][0] + out[-1][1] >= hunk[0]:
            p = out[-1]
            end0, end1 = max(p[0] + p[1], hunk[0] + hunk[1]), max(p[2] + p[3], hunk[2] + hunk[3])
            hunk = (p[0], end0 - p[0], p[2], end1 - p[2])
            out.pop()
        out.append(hunk)
    return out


def _merge(b: list[str], o: list[str], t: list[str], h1: list[_Hunk], h2: list[_Hunk]) -> Merge:
    # Merge regions as xdl_do_merge builds them: (mode, i0, n0, i1, n1, i2, n2) with 1 =
    # ours only, 2 = theirs only, 0 = conflict; positions in base, ours, theirs.
    regions: list[list[int]] = []

    def append(mode: int, i0: int, n0: int, i1: int, n1: int, i2: int, n2: int) -> None:
        if regions:
            m = regions[-1]
            if i1 <= m[3] + m[4] or i2 <= m[5] + m[6]:
                if mode != m[0]:
                    m[0] = 0
                m[2] = i0 + n0 - m[1]
                m[4] = i1 + n1 - m[3]
                m[6] = i2 + n2 - m[5]
                return
        regions.append([mode, i0, n0, i1, n1, i2, n2])

    a, c = 0, 0
    while a < len(h1) and c < len(h2):
        x1, y1 = h1[a], h2[c]
        if x1[0] + x1[1] < y1[0]:
            append(1, x1[0], x1[1], x1[2], x1[3], y1[2] - y1[0] + x1[0], x1[1])
            a += 1
            continue
        if y1[0] + y1[1] < x1[0]:
            append(2, y1[0], y1[1], x1[2] - x1[0] + y1[0], y1[1], y1[2], y1[3])
            c += 1
            continue
        if (
            x1[0] != y1[0]
            or x1[1] != y1[1]
            or x1[3] != y1[3]
            or o[x1[2] : x1[2] + x1[3]] != (t[y1[2] : y1[2] + y1[3]])
        ):
            off = x1[0] - y1[0]
            ffo = off + x1[1] - y1[1]
            i0, i1, i2 = x1[0], x1[2], y1[2]
            if off > 0:
                i0 -= off
                i1 -= off
            else:
                i2 += off
            n0 = x1[0] + x1[1] - i0
            n1 = x1[2] + x1[3] - i1
            n2 = y1[2] + y1[3] - i2
            if ffo < 0:
                n0 -= ffo
                n1 -= ffo
            else:
                n2 += ffo
            append(0, i0, n0, i1, n1, i2, n2)
        e1 = x1[0] + x1[1]
        e2 = y1[0] + y1[1]
        if e1 >= e2:
            c += 1
        if e2 >= e1:
            a += 1
    for x1 in h1[a:]:
        append(1, x1[0], x1[1], x1[2], x1[3], x1[0] + len(t) - len(b), x1[1])
    for y1 in h2[c:]:
        append(2, y1[0], y1[1], y1[0] + len(o) - len(b), y1[1], y1[2], y1[3])
    # The output walks ours: its lines outside the regions are taken as they are.
    chunks: list[Chunk] = []
    at = 0
    for mode, i0, n0, i1, n1, i2, n2 in regions:
        if i1 > at:
            chunks.append(Chunk(lines=o[at:i1]))
        if mode == 0:
            chunks.append(
                Chunk(
                    conflict=True,
                    base=b[i0 : i0 + n0],
                    ours=o[i1 : i1 + n1],
                    theirs=t[i2 : i2 + n2],
                    base_start=i0,
                    base_end=i0 + n0,
                )
            )
        elif mode == 1:
            chunks.append(Chunk(lines=o[i1 : i1 + n1]))
        else:
            chunks.append(Chunk(lines=t[i2 : i2 + n2]))
        at = i1 + n1
    if at < len(o):
        chunks.append(Chunk(lines=o[at:]))
    return Merge([ch for ch in chunks if ch.conflict or ch.lines])
