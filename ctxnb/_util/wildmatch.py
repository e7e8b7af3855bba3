"""git's ignore patterns, compiled to regular expressions with git's exact semantics.

This follows git's ``dir.c`` (how a ``.gitignore`` line becomes a pattern and which
pattern decides) and ``wildmatch.c`` (how a pattern matches a path), byte for byte:
paths are matched as UTF-8 bytes, so ``?`` is one byte as in git. Every line git
accepts compiles; a line git can never match (``foo\\``, a lone ``!``, ``[z-a]``, an
unclosed ``[``) compiles to a pattern that matches nothing, as in git.

Example:
    >>> p = parse_line("!/src/**/*.py", base="")
    >>> p is not None and p.negative and p.matches("src/a/b.py", is_dir=False)
    True
    >>> parse_line("foo\\\\", base="").matches("foo", is_dir=False)
    False
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["GlobList", "Pattern", "PatternSet", "compile_glob", "parse_line", "parse_lines"]

_NEVER = re.compile(rb"(?!)")
_GLOB_SPECIAL = b"*?[\\"


def _ascii(pred: object) -> frozenset[int]:
    return frozenset(c for c in range(128) if pred(chr(c)))  # type: ignore[operator]


_SPACE = frozenset(b" \t\n\r")  # git's own isspace (sane_ctype): no \v, no \f
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _ascii(str.isalnum),
    b"alpha": _ascii(str.isalpha),
    b"blank": frozenset(b" \t"),
    b"cntrl": frozenset([*range(32), 127]),
    b"digit": _ascii(str.isdigit),
    b"graph": frozenset(range(33, 127)),
    b"lower": _ascii(str.islower),
    b"print": frozenset(range(32, 127)),
    b"punct": frozenset(c for c in range(33, 127) if not chr(c).isalnum()),
    b"space": _SPACE,
    b"upper": _ascii(str.isupper),
    b"xdigit": frozenset(b"0123456789abcdefABCDEF"),
}


class _Malformed(Exception):
    """The pattern can never match (git's WM_ABORT_ALL on every attempt)."""


def _bracket(p: bytes, i: int) -> tuple[str, int]:
    """Translate the bracket expression starting after ``[`` at ``i``; return (regex, end)."""
    n = len(p)
    negated = False
    if i < n and p[i] in b"!^":
        negated = True
        i += 1
    chars: set[int] = set()
    prev = 0
    first = True
    while True:
        if i >= n:
            raise _Malformed
        c = p[i]
        if c == ord("]") and not first:
            break
        first = False
        if c == ord("\\"):
            i += 1
            if i >= n:
                raise _Malformed
            c = p[i]
            chars.add(c)
        elif c == ord("-") and prev and i + 1 < n and p[i + 1] != ord("]"):
            i += 1
            hi = p[i]
            if hi == ord("\\"):
                i += 1
                if i >= n:
                    raise _Malformed
                hi = p[i]
            chars.update(range(prev, hi + 1))  # empty when reversed, as in git
            c = 0
        elif c == ord("[") and i + 1 < n and p[i + 1] == ord(":"):
            end = p.find(b"]", i + 2)
            if end < 0:
                raise _Malformed
            if end - 1 < i + 2 or p[end - 1] != ord(":"):
                chars.add(c)  # no ":]": a plain "[" in the set
            else:
                name = p[i + 2 : end - 1]
                if name not in _CLASSES:
                    raise _Malformed
                chars.update(_CLASSES[name])
                i = end
                c = 0
        else:
            chars.add(c)
        prev = c
        i += 1
    if negated:
        chars = set(range(1, 256)) - chars
    chars.discard(ord("/"))  # WM_PATHNAME: a bracket never matches a slash
    if not chars:
        return "(?!)", i + 1
    return "[" + "".join(f"\\x{c:02x}" for c in sorted(chars)) + "]", i + 1


def compile_glob(pattern: bytes) -> re.Pattern[bytes]:
    """A regex matching exactly what ``wildmatch(pattern, text, WM_PATHNAME)`` matches.

    Example:
        >>> bool(compile_glob(b"a/**/b").fullmatch(b"a/x/y/b"))
        True
    """
    source = _glob_source(pattern)
    return _NEVER if source is None else re.compile(source, re.DOTALL)


def _glob_source(pattern: bytes) -> bytes | None:
    """The source of :func:`compile_glob`'s regex; None for a glob that never matches."""
    out: list[str] = []
    i, n = 0, len(pattern)
    try:
        while i < n:
            c = pattern[i]
            if c == ord("\\"):
                if i + 1 >= n:
                    raise _Malformed  # a trailing backslash never matches in git
                out.append(f"\\x{pattern[i + 1]:02x}")
                i += 2
            elif c == ord("?"):
                out.append("[^/]")
                i += 1
            elif c == ord("["):
                regex, i = _bracket(pattern, i + 1)
                out.append(regex)
            elif c == ord("*"):
                j = i
                while j < n and pattern[j] == ord("*"):
                    j += 1
                double = j - i >= 2
                at_start = i == 0 or pattern[i - 1] == ord("/")
                if double and at_start and j < n and pattern[j] == ord("/"):
                    out.append("(?:.*/)?")  # "**/": zero or more directories
                    i = j + 1
                elif double and at_start and (j == n or pattern[j : j + 2] == b"\\/"):
                    out.append(".*")
                    i = j
                else:
                    out.append("[^/]*")
                    i = j
            else:
                out.append(f"\\x{c:02x}")
                i += 1
    except _Malformed:
        return None
    return "".join(out).encode("ascii")


class Pattern:
    """One ``.gitignore`` line, ready to match paths relative to the workspace root.

    Attributes:
        text: the line as written (trailing spaces trimmed as git does).
        base: the directory of the ignore file, relative to the root ("" for the root).
        negative: a ``!`` line (re-includes).
        dir_only: the line ends in ``/``: it matches directories only.
        basename: the line has no other ``/``: it matches the last path component at
            any depth below ``base``.
    """

    # A plain class, not a dataclass: the Claude Code hook process imports this module,
    # and ``dataclasses`` (with ``inspect``) would cost it milliseconds at start-up.
    __slots__ = ("_regex", "base", "basename", "dir_only", "negative", "source", "text")

    def __init__(
        self,
        text: str,
        base: str,
        negative: bool,
        dir_only: bool,
        basename: bool,
        source: bytes | None,
    ) -> None:
        self.text = text
        self.base = base
        self.negative = negative
        self.dir_only = dir_only
        self.basename = basename
        # The regex's source (None: the line never matches). A PatternSet compiles the
        # sources of a file's lines together, so each line's own regex is compiled only
        # when it is asked for: a process that checks one path (the Claude Code hook)
        # does not compile every glob twice.
        self.source = source
        self._regex: re.Pattern[bytes] | None = None

    @property
    def regex(self) -> re.Pattern[bytes]:
        """The line's regex on its own (what :func:`compile_glob` gives)."""
        if self._regex is None:
            self._regex = _NEVER if self.source is None else re.compile(self.source, re.DOTALL)
        return self._regex

    def __repr__(self) -> str:
        return f"Pattern({self.text!r}, base={self.base!r})"

    def matches(self, rel: str, *, is_dir: bool) -> bool:
        """Whether the pattern matches ``rel`` (a path relative to the workspace root)."""
        if self.dir_only and not is_dir:
            return False
        if self.base:
            if not rel.startswith(self.base) or rel[len(self.base) : len(self.base) + 1] != "/":
                return False
            rel = rel[len(self.base) + 1 :]
        target = rel.rsplit("/", 1)[-1] if self.basename else rel
        return self.regex.fullmatch(target.encode("utf-8", "surrogateescape")) is not None


def _trim_trailing_spaces(line: str) -> str:
    # git's trim_trailing_spaces: unescaped trailing spaces (not tabs) go.
    last_space = None
    i = 0
    while i < len(line):
        c = line[i]
        if c == " ":
            if last_space is None:
                last_space = i
        elif c == "\\":
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def parse_line(line: str, *, base: str) -> Pattern | None:
    """One ignore-file line as git reads it, or None for a blank or comment line.

    Args:
        line: the line, without its ``\\n`` (a ``\\r`` before it is dropped here).
        base: the directory of the ignore file, relative to the root, ``""`` for the root.
    """
    if line.endswith("\r"):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    text = _trim_trailing_spaces(line)
    p = text
    negative = p.startswith("!")
    if negative:
        p = p[1:]
    dir_only = p.endswith("/")
    if dir_only:
        p = p[:-1]
    basename = "/" not in p
    if p.startswith("/"):
        p = p[1:]  # anchored to the ignore file's directory
    raw = p.encode("utf-8", "surrogateescape")
    return Pattern(text, base, negative, dir_only, basename, _glob_source(raw) if raw else None)


def parse_lines(lines: list[str], *, base: str) -> list[Pattern]:
    """Every pattern of an ignore file's lines (blank lines and comments dropped)."""
    if lines and lines[0].startswith("\ufeff"):
        lines = [lines[0][1:], *lines[1:]]  # git skips a UTF-8 byte-order mark
    out = []
    for line in lines:
        pat = parse_line(line, base=base)
        if pat is not None:
            out.append(pat)
    return out


class PatternSet:
    """The patterns of one ignore file, deciding as git does with few regex calls.

    The patterns are grouped by kind (basename or path, any entry or directories only)
    into one alternation per kind, last pattern first: the first alternative that
    matches is then the last matching line of that kind, and the latest line over the
    kinds decides.

    Example:
        >>> ps = PatternSet(parse_lines(["*.log", "!keep.log"], base=""))
        >>> ps.decide("a/x.log", is_dir=False), ps.decide("keep.log", is_dir=False)
        (True, False)
    """

    __slots__ = ("_compiled", "base", "patterns")

    def __init__(self, patterns: list[Pattern]) -> None:
        self.patterns = patterns
        bases = {p.base for p in patterns}
        self.base = bases.pop() if len(bases) == 1 else ""
        if bases:
            raise ValueError("a PatternSet holds the patterns of one ignore file (one base)")
        # Compiled on the first match: a walk whose names were all judged before (the
        # kept judgments of ctxnb.access._judgments) never matches the deny globs.
        self._compiled: list[tuple[bool, bool, re.Pattern[bytes], list[int]]] | None = None

    @property
    def _groups(self) -> list[tuple[bool, bool, re.Pattern[bytes], list[int]]]:
        """(basename?, dir_only?, regex, pattern index of each group)."""
        if self._compiled is None:
            self._compiled = self._compile()
        return self._compiled

    def _compile(self) -> list[tuple[bool, bool, re.Pattern[bytes], list[int]]]:
        patterns = self.patterns
        groups: list[tuple[bool, bool, re.Pattern[bytes], list[int]]] = []
        for basename in (True, False):
            for dir_only in (False, True):
                picked = [
                    k
                    for k in range(len(patterns) - 1, -1, -1)
                    if patterns[k].basename is basename
                    and patterns[k].dir_only is dir_only
                    and patterns[k].source is not None
                ]
                if picked:
                    alt = b"|".join(b"(" + (patterns[k].source or b"") + b")" for k in picked)
                    regex = re.compile(alt, re.DOTALL)
                    groups.append((basename, dir_only, regex, picked))
        return groups

    def decide(self, rel: str, *, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a ``!`` line; None: no line matched."""
        best = self.last_match(rel, is_dir=is_dir)
        if best is None:
            return None
        return not self.patterns[best].negative

    def last_match(self, rel: str, *, is_dir: bool) -> int | None:
        """The index in :attr:`patterns` of the last line matching ``rel``, or None."""
        if self.base:
            if not rel.startswith(self.base) or rel[len(self.base) : len(self.base) + 1] != "/":
                return None
            rel = rel[len(self.base) + 1 :]
        path = rel.encode("utf-8", "surrogateescape")
        name = path.rsplit(b"/", 1)[-1]
        best = -1
        for basename, dir_only, regex, picked in self._groups:
            if dir_only and not is_dir:
                continue
            m = regex.fullmatch(name if basename else path)
            if m is not None and m.lastindex is not None:
                best = max(best, picked[m.lastindex - 1])
        return best if best >= 0 else None


class GlobList:
    """Gitignore globs as a deny, allow or scope list: which line decides for a path.

    A path is decided as git decides whether it is ignored: each directory above it
    first, from the top, and a directory that a line includes includes everything
    below it (a ``!`` line cannot take a file back out of it); otherwise the last line
    matching the path itself decides. Lines are matched case-sensitively; blank lines
    and ``#`` comments are skipped.

    Example:
        >>> globs = GlobList(["docs/", "*.pem", "!keep.pem"])
        >>> globs.match("docs/a/b.md"), globs.match("x/y.pem"), globs.match("keep.pem")
        (0, 1, None)
        >>> globs.match_file("src/app.py")
        False
    """

    __slots__ = ("_index", "_set", "lines")

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        patterns: list[Pattern] = []
        index: list[int] = []  # pattern -> its line
        for i, line in enumerate(self.lines):
            pat = parse_line(line, base="")
            if pat is not None:
                patterns.append(pat)
                index.append(i)
        self._set = PatternSet(patterns)
        self._index = index

    def malformed(self) -> list[str]:
        """The lines git can never match (``foo\\``, a lone ``!``, an unclosed ``[``)."""
        pairs = zip(self._index, self._set.patterns, strict=True)
        return [self.lines[i] for i, p in pairs if p.source is None]

    def match(
        self, path: str, *, is_dir: bool | None = False, ancestors: bool = True
    ) -> int | None:
        """The line that includes ``path`` (its index in :attr:`lines`), or None.

        Args:
            path: a relative path with ``/`` separators.
            is_dir: whether ``path`` is a directory; ``None`` when that is not known
                (the path is then tried as a file, then as a directory).
            ancestors: judge the directories above ``path`` first; ``False`` when the
                caller knows none of them is included (a walk entered them).
        """
        patterns = self._set.patterns
        if not patterns:
            return None
        parts = path.split("/") if ancestors else ()
        for i in range(1, len(parts)):
            k = self._set.last_match("/".join(parts[:i]), is_dir=True)
            if k is not None and not patterns[k].negative:
                return self._index[k]
        for kind in (False, True) if is_dir is None else (is_dir,):
            k = self._set.last_match(path, is_dir=kind)
            if k is not None and not patterns[k].negative:
                return self._index[k]
        return None

    def match_file(self, path: str) -> bool:
        """Whether a line includes the file ``path``."""
        return self.match(path) is not None

    def match_files(self, paths: Iterable[str]) -> list[str]:
        """The files of ``paths`` a line includes, in their order: :meth:`match_file`
        of each, with each directory judged once (many files share a few directories).

        Example:
            >>> GlobList(["src/", "*.md", "!b.md"]).match_files(["src/a/x.py", "b.md", "c.md"])
            ['src/a/x.py', 'c.md']
        """
        patterns = self._set.patterns
        if not patterns:
            return []
        last_match = self._set.last_match
        # A directory includes what is below it when it, or one above it, is included
        # (match's walk over the ancestors, remembered per directory).
        dirs: dict[str, bool] = {"": False}

        def included(d: str) -> bool:
            known = dirs.get(d)
            if known is not None:
                return known
            unknown = []  # d and the directories above it not judged yet, deepest first
            while known is None:
                unknown.append(d)
                d = d.rpartition("/")[0]
                known = dirs.get(d)
            for d in reversed(unknown):
                if not known:
                    k = last_match(d, is_dir=True)
                    known = k is not None and not patterns[k].negative
                dirs[d] = known
            return known

        out = []
        for path in paths:
            if included(path.rpartition("/")[0]):
                out.append(path)
                continue
            k = last_match(path, is_dir=False)
            if k is not None and not patterns[k].negative:
                out.append(path)
        return out

    def by_name_only(self) -> bool:
        """Whether every line matches a path by its last component alone (a line with
        no ``/`` but a trailing one, or one that starts with ``**/`` and has no other):
        then, its directories judged, a path's answer depends on its name only.

        Example:
            >>> GlobList([".env*", "**/*.pem", "build/"]).by_name_only()
            True
            >>> GlobList(["/ctxnb.toml"]).by_name_only(), GlobList(["a/b"]).by_name_only()
            (False, False)
        """
        for p in self._set.patterns:
            if p.base or not (p.basename or _any_depth(p.text)):
                return False
        return True


def _any_depth(text: str) -> bool:
    # "**/name" (git: "in all directories") with no other separator in the name.
    rest = text.removeprefix("!").removeprefix("**/")
    return text.removeprefix("!").startswith("**/") and "/" not in rest.rstrip("/")
