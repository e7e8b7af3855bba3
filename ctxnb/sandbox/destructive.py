"""What makes a change to a file destructive: it waits for a human's approval of its diff.

Judged on the bytes a command left, never on its text (see docs/sandbox.md,
"Destructive changes wait for a human"). Pure functions: the commit
(:mod:`ctxnb.sandbox.commit`) asks the approver.

The lines a change keeps are a longest common subsequence of the old and new lines
(:mod:`ctxnb._util.linediff`: bit-parallel, milliseconds for thousands of lines, where
difflib's matcher took minutes on a rewrite of repeated lines). The search is bounded
(:data:`~ctxnb._util.linediff.MAX_CELLS` pairs of lines, :data:`DIFF_DEADLINE_MS`):
past the bound a change is judged on the lines it is known to keep, and one that cannot
be shown to keep enough is destructive ("too large to compare"), so a large rewrite waits
for a human rather than passing unchecked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

__all__ = ["DIFF_DEADLINE_MS", "MIN_DESTRUCTIVE_BYTES", "destructive_reason"]

MIN_DESTRUCTIVE_BYTES = 64
"""A file this size or larger is judged by its bytes as well as its lines: a write that
keeps less than half of them is destructive, whatever its line count."""

DIFF_DEADLINE_MS = 1000
"""How long the lines of one file's change are compared at most; a change that has not
been shown to keep enough by then is destructive (it waits for a human)."""


def destructive_reason(
    rel: str, old: bytes | None, new: bytes | None, *, deadline_ms: float = DIFF_DEADLINE_MS
) -> str | None:
    """Why a change to ``rel`` from ``old`` to ``new`` bytes is destructive, or None.

    Destructive: deleting a file that existed; truncating a non-empty file to zero
    bytes; replacing a text file with bytes that are not text (a NUL byte or invalid
    UTF-8: every line of it is gone); a write that keeps less than half of the old
    file's lines (a text file of at least 4 lines); a write that keeps less than half
    of the old file's bytes (a file of at least :data:`MIN_DESTRUCTIVE_BYTES` bytes,
    text or binary). What counts as kept is measured by :func:`_kept`. A new file, an
    append or an edit that keeps most of a file is not destructive. A text change whose
    lines cannot be compared within ``deadline_ms`` (or the cell bound) is destructive
    unless the lines found by then already keep enough.

    Example:
        >>> destructive_reason("a.py", b"x\\n" * 10, None)
        'deletes a.py'
        >>> destructive_reason("a.py", b"a\\nb\\nc\\nd\\n", b"a\\nb\\nc\\nd\\ne\\n") is None
        True
        >>> destructive_reason("a.py", b"a\\nb\\nc\\nd\\n", b"z\\n")
        'removes 4 of the 4 lines of a.py'
        >>> destructive_reason("a.py", b"a = 1\\n", b"\\x00" * 6)
        'replaces the text of a.py with binary bytes'
    """
    if old is None:
        return None
    if new is None:
        return f"deletes {rel}"
    if old and not new:
        return f"truncates {rel} to 0 bytes"
    from ..access.observe import decode_bytes

    old_text, new_text = decode_bytes(old), decode_bytes(new)
    if old_text and new_text is None:
        return f"replaces the text of {rel} with binary bytes"
    if old_text is not None and new_text is not None:
        return _text_reason(rel, len(old), old_text, new_text, deadline_ms)
    kept, total = _kept(old, new), len(old)
    if len(old) >= MIN_DESTRUCTIVE_BYTES and kept * 2 < total:
        return f"removes {total - kept} of the {total} bytes of {rel}"
    return None


def _text_reason(
    rel: str, size: int, old_text: str, new_text: str, deadline_ms: float
) -> str | None:
    """:func:`destructive_reason` of a text file's change (``size``: its old bytes)."""
    from .._util.linediff import anchored, intern_lines, lcs

    old_lines = old_text.splitlines(keepends=True)
    a, b = intern_lines(old_lines, new_text.splitlines(keepends=True))
    deadline = time.monotonic() + deadline_ms / 1000
    n, total = len(a), len(old_text)
    by_lines, by_size = n >= 4, size >= MIN_DESTRUCTIVE_BYTES

    def chars(pairs: list[tuple[int, int]]) -> int:
        return sum(len(old_lines[i]) for i, _ in pairs)

    # The most lines any diff keeps. Which lines (for their characters) depends on the
    # alignment: the anchored one (patience) is tried too when this one keeps too few.
    best = lcs(a, b, deadline=deadline)
    kept_lines = len(best.pairs)
    if best.exact and by_lines and kept_lines * 2 < n:
        return f"removes {n - kept_lines} of the {n} lines of {rel}"
    kept = max(chars(best.pairs), _kept(old_text, new_text)) if by_size else total
    if not best.exact or (by_size and kept * 2 < total):
        shape = anchored(a, b, deadline=deadline)
        kept_lines = max(kept_lines, len(shape.pairs))
        kept = max(kept, chars(shape.pairs))
        if not best.exact and ((by_lines and kept_lines * 2 < n) or (by_size and kept * 2 < total)):
            # Neither alignment finished and what they found does not keep enough: the
            # change is not shown to be harmless, so it waits for a human.
            return (
                f"the diff of {rel} ({n} lines) is too large to compute within {deadline_ms:g} ms"
            )
    if by_size and kept * 2 < total:
        return f"removes {total - kept} of the {total} characters of {rel}"
    return None


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common prefix of two strings or byte strings (binary search over
    slice comparisons, which run in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _kept(old: Any, new: Any) -> int:
    """How much of ``old`` (str or bytes) is still in ``new``, at least.

    The larger of two measures: the common prefix plus the common suffix (an edit,
    insertion or deletion in one place keeps the rest), and the blocks that are equal
    at the same offset counted from the start or from the end (in-place edits spread
    over a file, such as a database's pages). At most ~4,096 blocks are compared each
    way, so a large file costs a few slice comparisons, not a diff. It does not see
    content that moved by an unaligned offset in several places, so such a rewrite
    counts as a loss (it asks).
    """
    n, m = len(old), len(new)
    pre = _common_prefix(old, new)
    suf = _common_prefix(old[pre:][::-1], new[pre:][::-1])
    best = pre + suf
    block = max(64, n // 4096)
    head = tail = 0
    for i in range(0, min(n, m), block):
        if old[i : i + block] == new[i : i + block]:
            head += min(block, n - i)
        lo_old, lo_new = max(0, n - i - block), max(0, m - i - block)
        if old[lo_old : n - i] == new[lo_new : m - i]:
            tail += n - i - lo_old
    return max(best, head, tail)
