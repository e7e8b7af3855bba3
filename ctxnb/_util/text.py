"""Small text helpers shared by several modules."""

from __future__ import annotations

__all__ = ["common_prefix_len"]


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
