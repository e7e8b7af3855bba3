"""Regular expressions compiled at their first use, not at import.

The redaction tables hold a hundred patterns. Compiling them all costs about ten
milliseconds, paid by every process that imports :mod:`ctxnb.redaction.redactor`, among them
Claude Code's hooks, which run once per edit and usually need a handful: a rule runs only
when one of its keywords occurs in the text. A lazy pattern compiles the first time one
of its methods is asked for and then holds the compiled methods themselves, so later
calls cost what a compiled pattern's cost.

Example:
    >>> word = lazy_compile(r"\\bkey\\b")
    >>> word.search("the api key here").span()
    (8, 11)
    >>> [m.group() for m in word.finditer("key, key")]
    ['key', 'key']
"""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["lazy_compile"]

_METHODS = ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split")


class _LazyPattern:
    __slots__ = ("_args", *_METHODS, "pattern", "flags", "groups", "groupindex")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        # Only called while a slot is unset, i.e. before the first compile.
        if name == "_args":
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for attr in (*_METHODS, "pattern", "flags", "groups", "groupindex"):
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._args[0]!r}, {self._args[1]})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern that behaves as ``re.compile(pattern, flags)`` and compiles on first use."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))
