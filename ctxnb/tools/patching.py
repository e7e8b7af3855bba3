"""Text patching: unified diffs and line-level edits, without touching the disk.

Everything here is a pure function from text to text. The file tools read a file,
call these functions and write the result back after checking the base hash; this
module never sees a path.

Two edit forms are supported:

* **Unified diffs** (``parse_patch``, ``apply_file_patch``, ``apply_unified_diff``):
  the format of ``diff -u`` and ``git diff``. Application follows ``git apply``: each
  hunk may be found at a shifted offset (as GNU ``patch`` and git do) but its context
  and removed lines must match exactly, byte for byte, unless ``fuzz`` is raised.
* **Line edits** (``LineEdit``, ``apply_line_edits``): replace lines ``start_line`` to
  ``end_line`` (1-based, inclusive) after checking that they still read
  ``expected_original_lines``. All line numbers in one call refer to the original text.

Line endings in a diff follow git. A diff line ends at ``\\n``; a ``\\r`` before it is
part of the line, so the diff of a CRLF file carries its CRs, and every line the patch
adds keeps exactly the ending the diff gives it (``\\r\\n``, ``\\n``, or none when
``\\ No newline at end of file`` follows). A line-ending conversion is a diff like any
other. Two leniencies, both for diffs that ``git apply`` would refuse, so they never
change a result git produces:

* a diff whose every line ends in ``\\r\\n`` (headers included) went through a CRLF
  channel: one ``\\r`` is taken off each line before it is read;
* when the hunks do not match byte for byte, they are matched once more ignoring line
  terminators (a diff written from a view that hides CRs, or that forgets a final
  newline): then untouched lines keep their endings, added lines take the file's
  dominant one, and a missing final newline is kept unless a marker says otherwise.

Line edits split on ``\\n`` and ``\\r\\n`` only (never on form feeds or Unicode line
separators, which are content); new lines take the file's dominant style.

Example:
    >>> from ctxnb.tools.patching import apply_unified_diff, unified_diff
    >>> old = "a\\r\\nb\\r\\nc\\n"
    >>> new = "a\\r\\nb\\r\\nC\\n"
    >>> apply_unified_diff(old, unified_diff(old, new)) == new
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ctxnb.errors import PatchConflict, PatchError

from ._textlines import Text as _Text
from ._textlines import changed_line_ranges
from ._textlines import raw_split as _raw_split
from ._textlines import show as _show
from .diffparse import (
    DEV_NULL,
    NO_NEWLINE_MARKER,
    FilePatch,
    Hunk,
    HunkTag,
    _parse,
    _single,
    parse_patch,
    parse_unified_diff,
)
from .lineedits import LineEdit, apply_line_edits

__all__ = [
    "FilePatch",
    "Hunk",
    "LineEdit",
    "apply_file_patch",
    "apply_line_edits",
    "apply_unified_diff",
    "changed_line_ranges",
    "diff_stats",
    "format_unified",
    "parse_patch",
    "parse_unified_diff",
    "unified_diff",
]


# --------------------------------------------------------------------------- apply


def _find(lines: list[str], expected: list[str], pos: int, lo: int) -> int | None:
    """Nearest position >= lo where ``expected`` matches, searching outwards from pos."""
    hi = len(lines) - len(expected)
    pos = max(lo, min(pos, max(hi, lo)))
    if not expected:
        return pos if lo <= pos <= len(lines) else None
    span = max(pos - lo, hi - pos)
    for d in range(span + 1):
        for p in (pos - d, pos + d) if d else (pos,):
            if lo <= p <= hi and lines[p : p + len(expected)] == expected:
                return p
    return None


# A placement: where the hunk's (fuzz-trimmed) old lines start, how many, and how many
# outer context lines fuzz trimmed at each end.
_Placement = tuple[int, int, int, int]


def _place(
    lines: list[str], hunks: Sequence[Hunk], olds: Sequence[list[str]], fuzz: int
) -> list[_Placement]:
    """Find every hunk in ``lines`` (comparing with ``olds``), all or nothing."""
    placements: list[_Placement] = []
    failures: list[dict[str, Any]] = []
    offset = 0
    lo = 0
    for index, (hunk, old) in enumerate(zip(hunks, olds, strict=True)):
        want = (hunk.old_start if hunk.old_count == 0 else hunk.old_start - 1) + offset
        lead_ctx = _count_leading(hunk.lines)
        trail_ctx = _count_leading(reversed(hunk.lines)) if len(old) > lead_ctx else 0
        found_at: int | None = None
        used = (0, 0)
        for f in range(fuzz + 1):
            cut_lead, cut_trail = min(f, lead_ctx), min(f, trail_ctx)
            if f and (cut_lead, cut_trail) == used:
                continue
            core = old[cut_lead : len(old) - cut_trail]
            p = _find(lines, core, want + cut_lead, lo)
            if p is not None:
                found_at, used = p, (cut_lead, cut_trail)
                break
            used = (cut_lead, cut_trail)
        if found_at is None:
            start = min(max(want, 0), len(lines))
            found = lines[start : start + len(old)]
            failures.append(
                {
                    "hunk": index,
                    "header": hunk.header,
                    "reason": _conflict_reason(old, found, start),
                    "expected": old,
                    "found": found,
                }
            )
            continue
        cut_lead, cut_trail = used
        placements.append((found_at, len(old) - cut_lead - cut_trail, cut_lead, cut_trail))
        offset = found_at - cut_lead - (want - offset)
        lo = found_at + len(old) - cut_lead - cut_trail
    if failures:
        raise PatchConflict(
            f"{len(failures)} of {len(hunks)} hunk(s) do not apply: "
            + "; ".join(f"hunk {f['hunk']} {f['header']!r}: {f['reason']}" for f in failures)
            + ". Read the file again and recompute the diff from its current content.",
            failed_hunks=failures,
        )
    return placements


def _apply_exact(original: str, hunks: Sequence[Hunk], fuzz: int) -> str:
    """git's application: lines compared and written with their exact terminators."""
    lines = _raw_split(original)
    bodies = [h.raw_lines() for h in hunks]
    olds = [[r for tag, r in body if tag != "+"] for body in bodies]
    placements = _place(lines, hunks, olds, fuzz)
    out: list[str] = []
    cursor = 0
    for (pos, length, cut_lead, cut_trail), body in zip(placements, bodies, strict=True):
        out.extend(lines[cursor:pos])
        k = pos
        for tag, r in body[cut_lead : len(body) - cut_trail]:
            if tag == " ":
                out.append(lines[k])
                k += 1
            elif tag == "-":
                k += 1
            else:
                out.append(r)
        cursor = pos + length
    out.extend(lines[cursor:])
    return "".join(out)


def _strip_cr(text: str) -> str:
    return text[:-1] if text.endswith("\r") else text


def _apply_lenient(original: str, hunks: Sequence[Hunk], fuzz: int) -> str:
    """Match ignoring terminators; added lines take the file's dominant ending."""
    src = _Text.split(original)
    lines = src.lines
    olds = [[_strip_cr(t) for t in h.old_lines] for h in hunks]
    placements = _place(lines, hunks, olds, fuzz)
    out_lines: list[str] = []
    out_terms: list[str | None] = []
    ends = src.ends_with_newline
    cursor = 0
    for (pos, length, cut_lead, cut_trail), hunk in zip(placements, hunks, strict=True):
        out_lines.extend(lines[cursor:pos])
        out_terms.extend(src.terms[cursor:pos])
        # Fuzz trims outer context only, so the body slice is plain.
        body = hunk.lines[cut_lead : len(hunk.lines) - cut_trail]
        k = pos
        for tag, text in body:
            if tag == " ":
                out_lines.append(lines[k])
                out_terms.append(src.terms[k] or None)
                k += 1
            elif tag == "-":
                k += 1
            else:
                out_lines.append(_strip_cr(text))
                out_terms.append(None)
        cursor = pos + length
        if cursor == len(lines) and cut_trail == 0:
            if hunk.new_missing_newline:
                ends = False
            elif hunk.old_missing_newline:
                ends = True
    out_lines.extend(lines[cursor:])
    out_terms.extend(src.terms[cursor:])
    return src.join(out_lines, out_terms, ends)


def _apply_hunks(original: str, hunks: Sequence[Hunk], fuzz: int) -> str:
    if fuzz < 0:
        raise ValueError(f"fuzz must be >= 0, got {fuzz}")
    try:
        return _apply_exact(original, hunks, fuzz)
    except PatchConflict:
        # Report what the lenient pass found: its lines are the ones a reader sees.
        return _apply_lenient(original, hunks, fuzz)


def apply_file_patch(original: str | None, patch: FilePatch, *, fuzz: int = 0) -> str | None:
    """Apply one file's patch; ``None`` in or out means "no such file".

    A creation needs no file (``original`` None) and returns the new text; a deletion
    must remove the whole text and returns ``None``; a rename or a modification
    returns the patched text (the caller moves the file for a rename).

    Args:
        original: the file's current text, ``None`` when it does not exist.
        patch: one :class:`FilePatch` from :func:`parse_patch`.
        fuzz: how many outer context lines may be ignored per hunk.

    Returns:
        The new text, or ``None`` when the patch deletes the file.

    Raises:
        PatchConflict: a hunk does not apply, the file to create exists, the file to
            patch does not, or a deletion would leave text behind. Nothing is applied.

    Example:
        >>> (fp,) = parse_patch("--- a/x\\n+++ /dev/null\\n@@ -1 +0,0 @@\\n-gone\\n")
        >>> apply_file_patch("gone\\n", fp) is None
        True
    """
    name = patch.path or "the file"
    if patch.created:
        if original is not None:
            raise PatchConflict(
                f"the diff creates {name}, which already exists; read it and diff "
                "against its content instead",
                failed_hunks=[],
            )
        return _apply_hunks("", patch.hunks, fuzz)
    if original is None:
        raise PatchConflict(
            f"the diff changes {name}, which does not exist; give a diff from {DEV_NULL} "
            "to create it",
            failed_hunks=[],
        )
    new = _apply_hunks(original, patch.hunks, fuzz)
    if patch.deleted:
        if new != "":
            left = len(_raw_split(new))
            raise PatchConflict(
                f"the diff deletes {name} but its hunks leave {left} line(s) of it; read "
                "the file again and recompute the diff",
                failed_hunks=[],
            )
        return None
    return new


def apply_unified_diff(original: str, diff: str, *, fuzz: int = 0) -> str:
    """Apply a single-file unified diff to a text, all hunks or nothing.

    Each hunk is looked for at the line its header names, shifted by the offset at
    which the previous hunk was found; if its context and removed lines are not there,
    the nearest position where they match is used (as GNU ``patch`` and ``git apply``
    do). Lines compare with their exact terminators, so the bytes match ``git apply``;
    see the module docs for the leniency when they only match ignoring terminators.
    With ``fuzz=n`` up to ``n`` leading and trailing context lines may be ignored.

    Args:
        original: the current text of the file.
        diff: a unified diff for that one file.
        fuzz: how many outer context lines may be ignored per hunk (0: none).

    Returns:
        The patched text.

    Raises:
        PatchError: the diff is malformed, covers several files, or deletes the file
            (a text cannot express that; use :func:`apply_file_patch`).
        PatchConflict: one or more hunks do not match; ``failed_hunks`` lists each as
            ``{"hunk", "header", "reason", "expected", "found"}``. Nothing is applied.

    Example:
        >>> apply_unified_diff("x\\r\\ny\\r\\n", "@@ -2 +2 @@\\n-y\\r\\n+z\\n")
        'x\\r\\nz\\n'
    """
    patch = _single(_parse(diff))
    if patch.deleted:
        raise PatchError(
            f"the diff deletes {patch.path or 'the file'} (+++ {DEV_NULL}); a text cannot "
            "be deleted: apply it with apply_file_patch or FileTools.apply_patch"
        )
    return _apply_hunks(original, patch.hunks, fuzz)


def _count_leading(body: Iterable[tuple[HunkTag, str]]) -> int:
    count = 0
    for tag, _ in body:
        if tag != " ":
            break
        count += 1
    return count


def _conflict_reason(expected: list[str], found: list[str], start: int) -> str:
    for k, (e, f) in enumerate(zip(expected, found, strict=False)):
        if e != f:
            return (
                f"line {start + k + 1} reads {_show(f)}, the hunk expects {_show(e)}, and the "
                "expected lines are not at any other offset either"
            )
    return (
        f"the hunk expects {len(expected)} lines from line {start + 1} but the text ends "
        f"after {len(found)} of them, and they are not at any other offset either"
    )


# --------------------------------------------------------------------------- diffs


def _diff_lines(text: str) -> list[str]:
    # git's lines: split at "\n" only, so a CR stays in the line it ends.
    return _raw_split(text)


def unified_diff(a: str, b: str, *, fromfile: str = "a", tofile: str = "b", n: int = 3) -> str:
    """A unified diff from ``a`` to ``b`` that ``apply_unified_diff`` accepts.

    Lines are git's (split at ``\\n``, a CR kept in its line), so a change of line
    ending shows as a changed line, as in ``git diff``, and the diff carries each
    line's exact ending. A missing final newline is marked with
    ``\\ No newline at end of file``. Lines are aligned as patience diff aligns them,
    the gaps between its anchors by a longest common subsequence
    (:func:`ctxnb._util.linediff.anchored`): near-linear time, also on texts of
    repeated lines.

    Args:
        a: the old text.
        b: the new text.
        fromfile: name on the ``---`` line.
        tofile: name on the ``+++`` line.
        n: lines of context around each change.

    Returns:
        The diff, or ``""`` when the texts have the same lines.

    Example:
        >>> print(unified_diff("a\\nb\\n", "a\\nc\\n"), end="")
        --- a
        +++ b
        @@ -1,2 +1,2 @@
         a
        -b
        +c
    """
    from .._util.linediff import anchored, grouped_opcodes, intern_lines

    old, new = _diff_lines(a), _diff_lines(b)
    keys_a, keys_b = intern_lines(old, new)
    groups = grouped_opcodes(anchored(keys_a, keys_b).pairs, len(old), len(new), n)
    return format_unified(old, new, groups, fromfile=fromfile, tofile=tofile)


def _range(start: int, stop: int) -> str:
    # A hunk's range as diff -u writes it: "3" for one line, "2,0" before an empty one.
    if stop - start == 1:
        return str(start + 1)
    return f"{start + 1 if stop > start else start},{stop - start}"


def format_unified(
    a: Sequence[str],
    b: Sequence[str],
    groups: Sequence[Sequence[tuple[str, int, int, int, int]]],
    *,
    fromfile: str,
    tofile: str,
) -> str:
    """The unified diff of hunks ``groups`` (:func:`ctxnb._util.linediff.grouped_opcodes`)
    between the lines ``a`` and ``b`` as they are to be shown (each with its ending; a
    line without one gets ``\\ No newline at end of file``); ``""`` with no hunk.

    Example:
        >>> print(format_unified(["x\\n"], ["y"], [[("replace", 0, 1, 0, 1)]],
        ...                      fromfile="a/f", tofile="b/f"), end="")
        --- a/f
        +++ b/f
        @@ -1 +1 @@
        -x
        +y
        \\ No newline at end of file
    """
    if not groups:
        return ""
    out = [f"--- {fromfile}\n", f"+++ {tofile}\n"]

    def emit(mark: str, line: str) -> None:
        out.append(mark + line if line.endswith("\n") else f"{mark}{line}\n{NO_NEWLINE_MARKER}\n")

    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                for line in a[x1:x2]:
                    emit(" ", line)
                continue
            for line in a[x1:x2]:
                emit("-", line)
            for line in b[y1:y2]:
                emit("+", line)
    return "".join(out)


def diff_stats(diff: str) -> tuple[int, int]:
    """Count added and removed lines in a unified diff (one or several files).

    Args:
        diff: the diff text; ``""`` counts as no change.

    Returns:
        ``(added, removed)``.

    Raises:
        PatchError: the diff is malformed.

    Example:
        >>> diff_stats("@@ -1,2 +1,2 @@\\n a\\n-b\\n+B\\n")
        (1, 1)
    """
    if not diff.strip():
        return (0, 0)
    added = removed = 0
    for f in _parse(diff):
        for h in f.hunks:
            added += h.added
            removed += h.removed
    return (added, removed)
