"""Comparisons for hidden checks that an object built to pass them does not pass.

``assert add(2, 3) == 5`` asks the *result* whether it equals 5, and a result whose
``__eq__`` always answers True says yes. :func:`same` asks the types first (``type()``
cannot be faked by a ``__class__`` property; ``int`` and ``float`` count as one, so
``2.0`` is the same result as ``2``), then compares element by element, and compares
``repr`` as well as ``==``.

This file imports nothing but the standard library: ctxnb's test runner
(``_testrunner.py``) loads it by path and gives every hidden check ``same`` and
``assert_same`` as globals, in environments where ctxnb itself is not installed.

Example:
    >>> class Liar:
    ...     def __eq__(self, other): return True
    >>> Liar() == 5, same(Liar(), 5), same(5, 5), same([1, (2, "x")], [1, (2, "x")])
    (True, False, True, True)
    >>> same(2, 2.0), same(True, 1), same(float("nan"), float("nan"))
    (True, False, True)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["assert_same", "same"]


def same(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` is ``expected``'s exact type and value (see the module docstring)."""
    if type(actual) is not type(expected) and {type(actual), type(expected)} != {int, float}:
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(
            same(a, e) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(expected, dict):
        if len(actual) != len(expected):
            return False
        # Keys are looked up by the expected side's (trusted) hashing and equality.
        keys = list(actual)
        return all(
            any(same(k, e) for k in keys) and same(actual[e], v) for e, v in expected.items()
        )
    if type(expected) in (int, float) and type(actual) in (int, float):
        # Numbers compare as numbers (2 and 2.0 are the same result); bool is not one.
        return actual == expected or (math.isnan(actual) and math.isnan(expected))
    return bool(expected == actual) and repr(actual) == repr(expected)


def assert_same(actual: Any, expected: Any) -> None:
    """Raise ``AssertionError`` (naming both) unless :func:`same` holds.

    Example:
        >>> assert_same(2 + 3, 5)
    """
    if not same(actual, expected):
        raise AssertionError(
            f"expected {expected!r} ({type(expected).__name__}), "
            f"got {actual!r} ({type(actual).__name__})"
        )
