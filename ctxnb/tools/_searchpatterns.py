"""Search patterns and globs: the regex dialect both backends share, and glob filters.

A pattern is compiled with Python's ``re`` after a check that it stays inside the
intersection of Python's and ripgrep's dialects (see :mod:`ctxnb.tools.search`); a
glob list becomes a :class:`_GlobFilter` that decides files and directories.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ctxnb.errors import CtxnbError

if TYPE_CHECKING:
    pass


class InvalidPatternError(CtxnbError, ValueError):
    """A search pattern or glob is invalid or outside the supported regex dialect."""


# --------------------------------------------------------------------------- patterns


_REFUSED_TEXT = (
    (re.compile(r"(?<!\\)(?:\\\\)*\{,\d"), "'{,n}' repetition (write '{0,n}')"),
    (re.compile(r"\(\?#"), "'(?#...)' comments"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\N\{"), "'\\N{...}' named characters"),
)


def _compile(pattern: str, *, regex: bool, case_sensitive: bool) -> re.Pattern[str]:
    """Compile a pattern, refusing what the two backends would read differently."""
    if "\n" in pattern or "\r" in pattern:
        raise InvalidPatternError(
            "the pattern contains a line break; search matches one line at a time, so "
            "search for each line separately"
        )
    source = re.escape(pattern) if not regex else pattern
    flags = 0 if case_sensitive else re.IGNORECASE
    if regex:
        for check, what in _REFUSED_TEXT:
            if check.search(pattern):
                raise InvalidPatternError(
                    f"invalid pattern {pattern!r}: {what} are not supported; "
                    "patterns must be valid both in Python's re and in ripgrep"
                )
    try:
        with warnings.catch_warnings():
            # Python warns about '[[', '&&', '--' in classes: ripgrep reads them as
            # POSIX classes and set operations, so the dialects disagree.
            warnings.simplefilter("error", FutureWarning)
            compiled = re.compile(source, flags)
    except FutureWarning as exc:
        raise InvalidPatternError(
            f"invalid pattern {pattern!r}: {exc}; POSIX classes and set operations "
            "inside [...] are not supported, escape the characters to match them literally"
        ) from None
    except re.error as exc:
        raise InvalidPatternError(
            f"invalid regular expression {pattern!r}: {exc}; "
            "pass regex=False to search for the text literally"
        ) from None
    if regex:
        _check_dialect(pattern, flags)
    return compiled


def _check_dialect(pattern: str, flags: int) -> None:
    try:
        from re import _constants as c  # type: ignore[attr-defined]
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - other Python versions; re still validated it
        return
    parsed = parser.parse(pattern, flags)
    if parsed.state.flags & (re.ASCII | re.LOCALE):
        _refuse(pattern, "the 'a' and 'L' flags")
    refused = {
        c.ASSERT: "lookahead/lookbehind",
        c.ASSERT_NOT: "lookahead/lookbehind",
        c.GROUPREF: "backreferences",
        c.GROUPREF_EXISTS: "conditional groups",
        c.ATOMIC_GROUP: "atomic groups",
        c.POSSESSIVE_REPEAT: "possessive quantifiers",
    }

    def walk(items: Any) -> None:
        for op, av in items:
            if op in refused:
                _refuse(pattern, refused[op])
            if op is c.AT and av in (c.AT_BEGINNING_STRING, c.AT_END_STRING):
                _refuse(pattern, "'\\A' and '\\Z' (use ^ and $: each line is searched alone)")
            if op is c.LITERAL and av == 10:
                _refuse(pattern, "a line break (each line is searched alone)")
            if op is c.SUBPATTERN and av[1] & (re.ASCII | re.LOCALE):
                _refuse(pattern, "the 'a' and 'L' flags")
            if op is c.IN:
                for item_op, item_av in av:
                    if item_op is c.LITERAL and item_av == 10:
                        _refuse(pattern, "a line break (each line is searched alone)")
            for part in av if isinstance(av, tuple | list) else ():
                if isinstance(part, parser.SubPattern):
                    walk(part)
                elif isinstance(part, list):
                    for sub in part:
                        if isinstance(sub, parser.SubPattern):
                            walk(sub)

    walk(parsed)


def _refuse(pattern: str, what: str) -> None:
    raise InvalidPatternError(
        f"invalid pattern {pattern!r}: {what} are not supported; patterns must mean the "
        "same in Python's re and in ripgrep"
    )


# --------------------------------------------------------------------------- globs


@lru_cache(maxsize=256)
def _glob_regex(glob: str) -> tuple[re.Pattern[str], bool]:
    """Translate one gitignore-style glob to a regex over a relative posix path.

    Returns the regex and whether the glob only matches directories (trailing ``/``).
    """
    dir_only = glob.endswith("/")
    body = glob.rstrip("/")
    if not body:
        raise InvalidPatternError(f"invalid glob {glob!r}: it names no file")
    anchored = "/" in body
    body = body.lstrip("/")
    out: list[str] = []
    i = 0
    n = len(body)
    depth = 0  # inside {…}
    while i < n:
        ch = body[i]
        if body.startswith("**/", i) and (i == 0 or body[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = body.find("]", i + 2 if body.startswith(("[!", "[^"), i) else i + 1)
            if end == -1:
                raise InvalidPatternError(f"invalid glob {glob!r}: '[' without a closing ']'")
            inner = body[i + 1 : end]
            negate = inner[:1] in ("!", "^")
            inner = inner[1:] if negate else inner
            out.append("[" + ("^" if negate else "") + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        elif ch == "{":
            depth += 1
            out.append("(?:")
            i += 1
        elif ch == "}" and depth:
            depth -= 1
            out.append(")")
            i += 1
        elif ch == "," and depth:
            out.append("|")
            i += 1
        elif ch == "\\" and i + 1 < n:
            out.append(re.escape(body[i + 1]))
            i += 2
        else:
            out.append(re.escape(ch))
            i += 1
    if depth:
        raise InvalidPatternError(f"invalid glob {glob!r}: '{{' without a closing '}}'")
    prefix = "" if anchored else "(?:.*/)?"
    try:
        return re.compile(f"^{prefix}{''.join(out)}$", re.DOTALL), dir_only
    except re.error as exc:
        raise InvalidPatternError(f"invalid glob {glob!r}: {exc}") from None


class _GlobFilter:
    """Include/exclude globs with ripgrep's ``--glob`` precedence."""

    def __init__(self, globs: Sequence[str]) -> None:
        self.rules: list[tuple[re.Pattern[str], bool, bool]] = []  # regex, dir_only, include
        for glob in globs:
            include = not glob.startswith("!")
            regex, dir_only = _glob_regex(glob if include else glob[1:])
            self.rules.append((regex, dir_only, include))
        self.has_includes = any(inc for _, _, inc in self.rules)

    def _last(self, rel: str, is_dir: bool) -> bool | None:
        for regex, dir_only, include in reversed(self.rules):
            if dir_only and not is_dir:
                continue
            if regex.match(rel):
                return include
        return None

    def file_ok(self, rel: str) -> bool:
        verdict = self._last(rel, False)
        return (not self.has_includes) if verdict is None else verdict

    def dir_ok(self, rel: str) -> bool:
        return self._last(rel, True) is not False
