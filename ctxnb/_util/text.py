"""Small text helpers shared by several modules."""

from __future__ import annotations

import re

__all__ = ["common_prefix_len", "visible"]

# Terminal controls, bidirectional overrides, invisible and line-separator characters: in
# a question put to a human they could redraw, reorder or hide part of what is asked.
# Newline and tab stay (a diff is many lines). The same set the Claude Code hook escapes.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2069\ufeff\U000e0000-\U000e007f]"
)


def _escape(m: re.Match[str]) -> str:
    o = ord(m.group())
    return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"


def visible(text: str) -> str:
    r"""``text`` with control, bidi and invisible characters shown as escapes (newlines
    and tabs kept).

    Example:
        >>> print(visible("rm a\x1b[2K\rb \u202etxt.exe"))
        rm a\u001b[2K\u000db \u202etxt.exe
    """
    return _CONTROL.sub(_escape, text)


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings.

    Slices are compared in C, in windows that halve around the first difference, so two
    100,000-character prompts are compared in microseconds.

    Example:
        >>> common_prefix_len("system: x; user: a", "system: x; user: b")
        17
    """
    n = min(len(a), len(b))
    lo, step = 0, 1 << 15
    while lo < n:
        hi = min(n, lo + step)
        if a[lo:hi] == b[lo:hi]:
            lo = hi
            continue
        # The first difference is in [lo, hi): halve the window until it is found.
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid
        return lo
    return lo
