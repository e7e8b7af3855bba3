"""The destructive check as it was before its line diff became bounded: the baseline.

``ctxnb.sandbox.destructive.destructive_reason`` once matched lines with difflib's
``SequenceMatcher`` (``autojunk=False``), which costs cubic time on rewrites of repeated
lines (a 2,000-line one took minutes). This copy of that version (the text branch only
differs) is kept for two readers: the differential test, which compares its verdicts
with today's on generated and real rewrites (tests/test_sandbox_destructive.py), and
``bench/sandbox.py``, which times it beside today's check. It is never used by ctxnb.
"""

from __future__ import annotations

import difflib

from ctxnb.access.observe import decode_bytes
from ctxnb.sandbox.destructive import MIN_DESTRUCTIVE_BYTES, _kept


def difflib_kept(old_text: str, new_text: str) -> tuple[int, int]:
    """(lines, characters) of ``old_text`` that difflib's matching blocks keep."""
    old_lines = old_text.splitlines(keepends=True)
    new_lines = new_text.splitlines(keepends=True)
    blocks = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    matched = blocks.get_matching_blocks()
    lines = sum(b.size for b in matched)
    chars = sum(len(old_lines[i]) for b in matched for i in range(b.a, b.a + b.size))
    return lines, chars


def difflib_destructive_reason(rel: str, old: bytes | None, new: bytes | None) -> str | None:
    """``destructive_reason`` as it was, line for line."""
    if old is None:
        return None
    if new is None:
        return f"deletes {rel}"
    if old and not new:
        return f"truncates {rel} to 0 bytes"
    old_text, new_text = decode_bytes(old), decode_bytes(new)
    if old_text and new_text is None:
        return f"replaces the text of {rel} with binary bytes"
    if old_text is not None and new_text is not None:
        n = len(old_text.splitlines(keepends=True))
        kept_lines, kept_chars = difflib_kept(old_text, new_text)
        if n >= 4 and kept_lines * 2 < n:
            return f"removes {n - kept_lines} of the {n} lines of {rel}"
        kept = max(kept_chars, _kept(old_text, new_text))
        total = len(old_text)
        unit = "characters"
    else:
        kept, total, unit = _kept(old, new), len(old), "bytes"
    if len(old) >= MIN_DESTRUCTIVE_BYTES and kept * 2 < total:
        return f"removes {total - kept} of the {total} {unit} of {rel}"
    return None
