"""Grep-like search over a workspace, with ripgrep.

``search(root, pattern)`` returns every matching line below ``root``. Two backends
give the same answer: ``"ripgrep"`` runs ``rg`` (fast; the ``ripgrep`` wheel is a
dependency of ctxnb, so ``rg`` is installed next to Python) and ``"python"`` walks the
tree itself. ``"auto"`` picks ripgrep when :func:`find_ripgrep` finds it. The answer
is one by construction: ripgrep only proposes lines (every line it matches, plus
every line holding a non-ASCII byte or a control character where the two regex
engines differ), and Python's ``re`` decides each, with the decoding below. The
rules both follow:

* **Order**: by path, compared component by component (``a/b`` before ``a.txt``), then
  by line number. ``max_results`` keeps the first matches in that order.
* **Files searched**: regular files only; symbolic links are never followed (neither
  linked files nor linked directories). The Python backend walks by descriptors (the
  access layer's walk, with ``policy`` or with one that accepts every file), so a
  directory swapped for a link while it runs is never entered either. ripgrep opens
  directories by name: with a ``policy`` (as the agent's file tools always pass) every
  line it proposes is matched again on a race-free read; without one, its answer is
  trusted, which is right for a tree nobody changes under the search and several times
  faster. Hidden files and directories are searched,
  except anything named ``.git`` or ``.ctxnb``.
* **Ignores**: git's, decided by ctxnb for both backends (:mod:`ctxnb.ignore`):
  ``.gitignore`` files anywhere below ``root`` (deeper files overriding shallower ones,
  whether or not ``root`` is a git repository; one that is a symbolic link is not
  read, as in git), and when ``root`` is in a repository, the ``.gitignore`` files above
  it up to the repository's top, ``info/exclude`` and ``core.excludesFile``. ripgrep
  reads no ignore file itself (no ``.ignore``/``.rgignore`` either). A ``glob`` never
  re-includes an ignored file.
* **Binary files**: a file containing a NUL byte is skipped.
* **Decoding**: a file that is valid UTF-8 is read as UTF-8; any other file is read as
  windows-1252 (the WHATWG "latin1": every byte is a character, so a Latin-1 ``café``
  is found by ``caf.`` and shown as ``café``).
* **Case folding** (``case_sensitive=False``): Python's ``re.IGNORECASE`` on Unicode
  text: simple lowercase mappings plus Python's equivalence sets, so ``i`` also
  matches ``İ`` and ``ı``, ``s`` matches ``ſ``, ``k`` matches the Kelvin sign.
* **Globs** (``globs``): gitignore-style globs matched against each file's path
  relative to ``root`` (``*`` and ``?`` stop at ``/``, ``**`` crosses directories,
  ``{a,b}`` alternatives, a glob without ``/`` matches the file name at any depth).
  A glob starting with ``!`` excludes; the last glob that matches decides; when there
  are include globs, a file must match one. An exclude glob that matches a directory
  skips the directory.
* **Lines**: split on ``\\n``; ``line`` is returned without its ``\\n`` or ``\\r\\n``.
  Matching sees the line without ``\\n`` (a ``\\r`` before it is part of the line).
* **Regex dialect**: the intersection of Python's ``re`` and ripgrep's Rust regex.
  Patterns are checked before searching and these are refused with
  ``InvalidPatternError``: lookaround, backreferences, conditionals, atomic groups
  and possessive quantifiers, ``\\A``/``\\Z``, the ``a``/``L`` flags, ``{,n}``,
  ``(?#…)`` comments, ``\\N{…}``, ``\\p{…}``, POSIX classes and set operations, and
  anything that can only match a line break. With ``regex=False`` the pattern is a
  fixed string (metacharacters are literal).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "app.py").write_text("import os\\nprint(os.sep)\\n")
    >>> [(m.path, m.line_number, m.line) for m in search(root, r"os\\.")]
    [('app.py', 2, 'print(os.sep)')]
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple

from ctxnb.errors import CtxnbError, NotFoundError
from ctxnb.ignore import TreeIgnores

if TYPE_CHECKING:
    from ctxnb.access.fdio import FileEntry, PathPolicy

__all__ = [
    "InvalidPatternError",
    "Match",
    "find_ripgrep",
    "glob_files",
    "ripgrep_available",
    "search",
]

Backend = Literal["auto", "ripgrep", "python"]

#: Names never searched, at any depth.
ALWAYS_EXCLUDED = frozenset({".git", ".ctxnb"})


class InvalidPatternError(CtxnbError, ValueError):
    """A search pattern or glob is invalid or outside the supported regex dialect."""


class Match(NamedTuple):
    """One matching line.

    A named tuple (cheap to create by the ten thousand; compares as a tuple).

    Attributes:
        path: the file, relative to the search root, with ``/`` separators.
        line_number: 1-based line number.
        line: the line's text without its line terminator.
        column: 1-based character column where the first match on the line starts.
    """

    path: str
    line_number: int
    line: str
    column: int = 1


RG_ENV = "CTXNB_RG"


def find_ripgrep() -> str | None:
    """The ``rg`` to run: ``$CTXNB_RG`` if set (empty: none), else the ``ripgrep``
    wheel's (installed beside the running Python), else the first on ``PATH``.

    Example:
        >>> find_ripgrep() is None or find_ripgrep().endswith("rg")
        True
    """
    chosen = os.environ.get(RG_ENV)
    if chosen is not None:
        return chosen or None
    for scripts in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(scripts, "rg")
        if os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    return shutil.which("rg")


def ripgrep_available() -> bool:
    """Whether :func:`find_ripgrep` finds an ``rg`` executable."""
    return find_ripgrep() is not None


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


# --------------------------------------------------------------------------- ignores


def _first_root_walk(
    policy: PathPolicy,
    ignores: TreeIgnores,
    skip: Callable[[str, bool], bool],
    on_dir: Callable[[str], None] | None = None,
) -> Iterator[FileEntry]:
    """The policy's descriptor walk of its first root only, deciding ``ignores`` on the way.

    The ignore state is keyed by paths relative to a root, so the walk stops being
    judged once a second root begins (its entries are skipped, never entered).
    """
    roots_seen = 0

    def enter(rel_dir: str, read: Callable[[str], bytes | None]) -> None:
        nonlocal roots_seen
        if rel_dir == "":
            roots_seen += 1
        if roots_seen == 1:
            ignores.on_dir(rel_dir, read)
            if on_dir is not None:
                on_dir(rel_dir)

    def judged(rel: str, is_dir: bool) -> bool:
        return roots_seen > 1 or skip(rel, is_dir)

    first = policy.roots[0]
    for entry in policy.walk(skip=judged, on_dir=enter):
        if roots_seen == 1 and entry.safe.root == first:
            yield entry


def _check_root(root: Path | str) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise NotFoundError(f"search root {str(root)!r} is not a directory; pass a folder")
    return root


# --------------------------------------------------------------------------- search


def search(
    root: Path | str,
    pattern: str,
    *,
    globs: Sequence[str] | None = None,
    regex: bool = True,
    case_sensitive: bool = True,
    max_results: int | None = None,
    exclude: Callable[[str], bool] | None = None,
    backend: Backend = "auto",
    policy: PathPolicy | None = None,
) -> list[Match]:
    """Find the lines matching ``pattern`` in the files below ``root``.

    Args:
        root: the directory to search.
        pattern: a regular expression (the dialect shared by Python and ripgrep), or
            a fixed string with ``regex=False``.
        globs: gitignore-style globs selecting files; ``!glob`` excludes.
        regex: whether ``pattern`` is a regular expression.
        case_sensitive: whether case must match.
        max_results: keep only the first matches (in path/line order); ``None``: all.
        exclude: called with each file's relative posix path; ``True`` skips the file
            (for example a path policy's deny rules).
        backend: ``"ripgrep"``, ``"python"`` or ``"auto"`` (ripgrep when installed).
        policy: read only through this path policy (its first root must be ``root``):
            the Python backend walks by descriptors, and ripgrep only nominates files,
            which are then read race-free and matched again here, so every byte
            returned comes from a file the policy accepts, even while directories are
            swapped for symbolic links during the search.

    Returns:
        The matches, sorted by path (component-wise) then line number.

    Raises:
        InvalidPatternError: the pattern or a glob is invalid or not in the dialect.
        NotFoundError: ``root`` is not a directory.
        CtxnbError: ``backend="ripgrep"`` but ``rg`` is not installed, or it failed.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "notes.md").write_text("a+b\\nA+B\\n")
        >>> [m.line for m in search(root, "a+b", regex=False, case_sensitive=False)]
        ['a+b', 'A+B']
    """
    root = _check_root(root)
    compiled = _compile(pattern, regex=regex, case_sensitive=case_sensitive)
    if max_results is not None and max_results < 0:
        raise ValueError(f"max_results must be >= 0 or None, got {max_results}")
    glob_filter = _GlobFilter(list(globs or ()))
    if backend == "auto":
        backend = "ripgrep" if ripgrep_available() else "python"
    if backend == "ripgrep":
        try:
            matches = _search_ripgrep(
                root,
                pattern,
                compiled,
                regex,
                case_sensitive,
                globs or (),
                glob_filter,
                exclude,
                policy,
            )
        except CtxnbError:
            if find_ripgrep() is None:
                raise
            # rg trips over a tree that changes while it runs; the descriptor walk does not.
            backend = "python"
        else:
            if policy is not None:
                # rg opens directories by name, so one swapped for a link during the
                # search is followed: only what a race-free read matches again counts.
                matches = _confirm(policy, compiled, matches, max_results)
    if backend == "python":
        matches = _search_python(root, compiled, glob_filter, exclude, max_results, policy)
    elif backend != "ripgrep":
        raise ValueError(f"backend must be 'auto', 'ripgrep' or 'python', got {backend!r}")
    return matches if max_results is None else matches[:max_results]


# windows-1252 as WHATWG defines it: cp1252, with its five unassigned bytes read as the
# C1 controls of the same value (so every byte is one character, as in Latin-1).
_WIN1252 = {
    0x80 + k: ch
    for k, ch in enumerate(bytes(range(0x80, 0xA0)).decode("cp1252", errors="replace"))
    if ch != "\ufffd"
}


def decode_text(data: bytes) -> str:
    """A file's text as search reads it: UTF-8 if valid, else windows-1252.

    Example:
        >>> decode_text("café".encode()), decode_text("café".encode("latin-1"))
        ('café', 'café')
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1").translate(_WIN1252)


def _file_matches(
    rel: str, text: str, compiled: re.Pattern[str], prefilter: re.Pattern[str] | None
) -> list[Match]:
    """The matching lines of one file's text, in line order."""
    if prefilter is not None and prefilter.search(text) is None:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not open one
    out = []
    for number, line in enumerate(lines, start=1):
        m = compiled.search(line)
        if m is not None:
            shown = line[:-1] if line.endswith("\r") else line
            out.append(Match(rel, number, shown, m.start() + 1))
    return out


def _search_python(
    root: Path,
    compiled: re.Pattern[str],
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
    max_results: int | None,
    policy: PathPolicy | None = None,
) -> list[Match]:
    files = _policy_walk(policy or _whole_tree(root), root, glob_filter, exclude)
    return _search_files(files, compiled, max_results)


@lru_cache(maxsize=16)
def _whole_tree(root: Path) -> PathPolicy:
    """The policy of a search given none: every file below ``root`` but ``.git``/``.ctxnb``.

    The walk is the access layer's all the same (descriptors, ``O_NOFOLLOW``), so a
    directory swapped for a symbolic link while the search runs is never entered. One
    policy per root is kept: it remembers each name's judgment across searches.
    """
    from ctxnb.access.fdio import PathPolicy

    return PathPolicy([root], deny=sorted(ALWAYS_EXCLUDED))


def _search_files(
    files: Iterable[tuple[str, Callable[[], str | None]]],
    compiled: re.Pattern[str],
    max_results: int | None,
) -> list[Match]:
    """The matches in ``(rel, read text)`` pairs given in result order."""
    prefilter = re.compile(compiled.pattern, compiled.flags | re.MULTILINE)
    matches: list[Match] = []
    for rel, read in files:
        text = read()
        if text is None:
            continue
        matches.extend(_file_matches(rel, text, compiled, prefilter))
        if max_results is not None and len(matches) >= max_results:
            # The walk is already in result order, so the first N are final.
            return matches[:max_results]
    return matches


def _policy_text(read: Callable[[], bytes]) -> str | None:
    """Text of a file read through a path policy; None when refused, gone or binary."""
    try:
        data = read()
    except (OSError, CtxnbError):
        return None  # gone, or refused by the policy (swapped for a link) since the walk
    if b"\0" in data:
        return None
    return decode_text(data)


def _policy_walk(
    policy: PathPolicy,
    root: Path,
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> Iterator[tuple[str, Callable[[], str | None]]]:
    """Searchable files by the policy's descriptor walk (its first root only)."""
    ignores = _search_ignores(root)

    def skip(rel: str, is_dir: bool) -> bool:
        if is_dir:
            return ignores.skip(rel, True) or not glob_filter.dir_ok(rel)
        return (
            ignores.skip(rel, False)
            or not glob_filter.file_ok(rel)
            or (exclude is not None and exclude(rel))
        )

    for entry in _first_root_walk(policy, ignores, skip):
        yield entry.safe.rel, functools.partial(_policy_text, entry.read)


def _search_ignores(root: Path) -> TreeIgnores:
    """git's ignores below ``root`` and from outside it (no ``.ctxnbignore``)."""
    return TreeIgnores(root=root, ctxnbignore=False)


def _searchable_dirs(
    policy: PathPolicy, root: Path, glob_filter: _GlobFilter
) -> tuple[list[str], TreeIgnores]:
    """The directories a search enters (``""`` for the root), decided by ctxnb.

    ripgrep is handed these and told to read no ignore file itself: it would follow a
    ``.gitignore`` that is a symbolic link (git does not) and knows none of git's
    other sources, so ignoring is decided here, once, for both backends.
    """
    ignores = _search_ignores(root)
    dirs: list[str] = []

    def skip(rel: str, is_dir: bool) -> bool:
        return not is_dir or ignores.skip(rel, True) or not glob_filter.dir_ok(rel)

    for _ in _first_root_walk(policy, ignores, skip, dirs.append):
        pass  # every file is skipped: the walk only enters directories
    return dirs, ignores


def _confirm(
    policy: PathPolicy, compiled: re.Pattern[str], matches: list[Match], limit: int | None
) -> list[Match]:
    """Match again on race-free reads of the files ripgrep nominated (in order); with a
    ``limit``, files after the one that fills it are not read at all."""
    paths = list(dict.fromkeys(m.path for m in matches))
    files = ((rel, lambda rel=rel: _policy_text(lambda: policy.read_bytes(rel))) for rel in paths)
    return _search_files(files, compiled, limit)


# Lines ripgrep must also propose, so that Python decides them: any non-ASCII byte
# (invalid UTF-8, and Unicode case folding, which differ between the engines) and the
# controls Python's \s matches but Rust's does not.
_RG_ALSO = r"(?-u)[\x1c-\x1f\x80-\xff]"
# Characters Python folds to an ASCII letter when ignoring case and Rust's regex does
# not: with one of them, an ASCII-only line can match in Python alone.
_FOLDS_TO_ASCII = frozenset("\u0130\u0131")
# ASCII letters whose case-insensitive class in Python holds a non-ASCII character
# (İ ı, ſ, the Kelvin sign).
_FOLDS_FROM_ASCII = frozenset(map(ord, "iIsSkK"))


def _ascii_only(compiled: re.Pattern[str]) -> bool:
    """Whether every match of the pattern is ASCII text and depends on nothing else.

    Then a line Python matches holds the same ASCII bytes whatever the decoding, and
    ripgrep finds it with the pattern alone; otherwise ripgrep must also propose the
    lines Python may read differently (``_RG_ALSO``).
    """
    try:
        from re import _constants as c  # type: ignore[attr-defined]
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - other Python versions: take the safe path
        return False

    def char_ok(code: int, fold: bool) -> bool:
        return code < 0x80 and not 0x1C <= code <= 0x1F and not (fold and code in _FOLDS_FROM_ASCII)

    def ok(items: Any, fold: bool) -> bool:
        for op, av in items:
            if op is c.LITERAL:
                if not char_ok(av, fold):
                    return False
            elif op is c.IN:
                for item_op, item_av in av:
                    if item_op is c.LITERAL and char_ok(item_av, fold):
                        continue
                    if item_op is c.RANGE and all(
                        char_ok(k, fold) for k in range(item_av[0], item_av[1] + 1)
                    ):
                        continue
                    return False  # a negated set, \w, \d, \s …
            elif op is c.AT:
                if av not in (c.AT_BEGINNING, c.AT_END):
                    return False  # \b and \B look at a neighbour that may not be ASCII
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
                if not ok(av[2], fold):
                    return False
            elif op is c.SUBPATTERN:
                _group, add, remove, sub = av
                inner = (fold or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE
                if not ok(sub, inner):
                    return False
            elif op is c.BRANCH:
                if not all(ok(branch, fold) for branch in av[1]):
                    return False
            else:
                return False  # ".", a negated literal, anything else: not provably ASCII
        return True

    return ok(parser.parse(compiled.pattern, compiled.flags), bool(compiled.flags & re.IGNORECASE))


def _search_ripgrep(
    root: Path,
    pattern: str,
    compiled: re.Pattern[str],
    regex: bool,
    case_sensitive: bool,
    globs: Sequence[str],
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
    policy: PathPolicy | None,
) -> list[Match]:
    rg = find_ripgrep()
    if rg is None:
        raise CtxnbError(
            "ripgrep ('rg') is not installed; reinstall ctxnb (its 'ripgrep' dependency "
            f"ships rg), put rg on PATH or name it in ${RG_ENV}, or pass backend='python'"
        )
    if _FOLDS_TO_ASCII & set(pattern):  # (an inline "(?i)" may turn folding on)
        return _search_python(root, compiled, glob_filter, exclude, None, policy)
    walker = policy or _whole_tree(root)
    dirs, ignores = _searchable_dirs(walker, root, glob_filter)
    cmd = [
        rg,
        # Plain "path NUL line:column:text" records: parsing them is several times
        # faster than --json when there are many matches.
        "--no-heading",
        "--with-filename",
        "--line-number",
        "--column",
        "--null",
        "--color",
        "never",
        "--no-config",
        "--hidden",
        # rg reads no ignore file: it searches the files directly in each directory
        # ctxnb entered, and ctxnb drops the files git ignores from its answer.
        "--no-ignore",
        "--max-depth",
        "1",
        "--encoding",
        "none",
        "--case-sensitive" if case_sensitive else "--ignore-case",
    ]
    for glob in globs:
        cmd += ["--glob", glob]
    for name in sorted(ALWAYS_EXCLUDED):
        cmd += ["--glob", f"!{name}"]  # last, so no include glob can bring them back
    cmd += ["--regexp", pattern if regex else re.escape(pattern)]
    if not _ascii_only(compiled):
        cmd += ["--regexp", _RG_ALSO]
    if policy is not None:
        # Every file rg nominates is read again race-free and matched in Python
        # (_confirm), in path order until the answer is full: rg's lines would only be
        # parsed to be thrown away, so it names the files alone.
        cmd += ["--files-with-matches"]
    cmd += ["--"]
    by_file: dict[str, list[Match]] = {}
    binary: set[bytes] = set()
    other: set[str] = set()
    # "./" first: a directory named "-" is not rg's standard input, and none starts an
    # option (the "--" above covers that too).
    for chunk in _arg_chunks([f"./{d}" if d else "." for d in dirs]):
        # Parse while rg is still searching; stderr goes to a file so that a flood of
        # warnings (unreadable files) cannot fill a pipe and stall rg.
        with (
            tempfile.TemporaryFile() as errors,
            subprocess.Popen(
                [*cmd, *chunk], cwd=root, stdout=subprocess.PIPE, stderr=errors
            ) as proc,
        ):
            assert proc.stdout is not None
            if policy is not None:
                found, bin_, oth = _parse_rg_files(proc.stdout, ignores, glob_filter, exclude)
            else:
                found, bin_, oth = _parse_rg(proc.stdout, ignores, compiled, glob_filter, exclude)
            returncode = proc.wait()
            if returncode not in (0, 1) and not found:
                errors.seek(0)
                message = errors.read().decode(errors="replace").strip()
                raise CtxnbError(
                    f"ripgrep failed (exit {returncode}): {message}; try backend='python'"
                )
        by_file.update(found)
        binary |= bin_
        other |= oth
    for raw in binary:
        by_file.pop(os.fsdecode(raw).removeprefix("./"), None)
    for rel in other:  # not UTF-8: Python reads the whole file as windows-1252
        text = _policy_text(functools.partial(walker.read_bytes, rel))
        by_file[rel] = [] if text is None else _file_matches(rel, text, compiled, None)
    return _in_order({rel: found for rel, found in by_file.items() if found})


_RG_ARGS_BUDGET = 256 * 1024  # bytes of directory arguments per rg run


def _arg_chunks(paths: list[str]) -> Iterator[list[str]]:
    """``paths`` in runs whose command-line size stays well below the system's limit."""
    budget = _RG_ARGS_BUDGET
    chunk: list[str] = []
    size = 0
    for path in paths:
        n = len(os.fsencode(path)) + 9  # the NUL and the argv pointer
        if chunk and size + n > budget:
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += n
    if chunk:
        yield chunk


def _parse_rg(
    stream: Iterable[bytes],
    ignores: TreeIgnores,
    compiled: re.Pattern[str],
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> tuple[dict[str, list[Match]], set[bytes], set[str]]:
    """Read rg's ``path NUL line:column:text`` records and let Python decide each line.

    Returns the matches by file, the files rg found binary, and the files that are
    not UTF-8 (searched again whole by the caller).
    """
    by_file: dict[str, list[Match]] = {}
    binary: set[bytes] = set()
    other: set[str] = set()
    current: bytes | None = None
    rel = ""
    ok = False
    bucket: list[Match] = []
    new_match = Match._make
    search_line = compiled.search
    for line in stream:
        raw_path, nul, rest = line.partition(b"\0")
        if not nul:
            # rg reports matches it saw before it noticed a NUL byte, then says so on a
            # line of its own; such a file is binary and skipped, as in the Python backend.
            warned = _RG_BINARY_WARNING.match(line)
            if warned:
                binary.add(warned.group(1))
            continue
        if raw_path != current:  # rg writes each file's matches together
            current = raw_path
            rel = os.fsdecode(raw_path).removeprefix("./")
            ok = _rg_keep(rel, ignores, glob_filter, exclude)
            bucket = by_file.setdefault(rel, [])
        if not ok or rel in other:
            continue
        number, _column, raw = rest.split(b":", 2)
        raw = raw[:-1] if raw.endswith(b"\n") else raw  # the "\r" of "\r\n" stays, as in Python
        try:
            text = raw.decode("ascii") if raw.isascii() else raw.decode("utf-8")
        except UnicodeDecodeError:
            other.add(rel)
            continue
        m = search_line(text)
        if m is not None:
            shown = text[:-1] if text.endswith("\r") else text
            bucket.append(new_match((rel, int(number), shown, m.start() + 1)))
    return by_file, binary, other


def _parse_rg_files(
    stream: IO[bytes],
    ignores: TreeIgnores,
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> tuple[dict[str, list[Match]], set[bytes], set[str]]:
    """Read rg's ``--files-with-matches --null`` answer: one placeholder match per file
    kept (its lines are found again by :func:`_confirm`), as :func:`_parse_rg` returns."""
    by_file: dict[str, list[Match]] = {}
    for raw in stream.read().split(b"\0"):
        if not raw:
            continue
        rel = os.fsdecode(raw).removeprefix("./")
        if _rg_keep(rel, ignores, glob_filter, exclude):
            by_file[rel] = [Match(rel, 0, "", 0)]
    return by_file, set(), set()


def _in_order(by_file: dict[str, list[Match]]) -> list[Match]:
    """Concatenate per-file matches (each already in line order) in path order."""
    out: list[Match] = []
    for path in sorted(by_file, key=lambda p: p.split("/")):
        out.extend(by_file[path])
    return out


_RG_BINARY_WARNING = re.compile(rb"^(.*): WARNING: stopped searching binary file", re.DOTALL)


def _rg_keep(
    rel: str,
    ignores: TreeIgnores,
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> bool:
    """Apply the rules ripgrep reads differently (an include glob beats .gitignore)."""
    parts = rel.split("/")
    if any(p in ALWAYS_EXCLUDED for p in parts):
        return False
    if ignores.ignored(rel):
        return False
    if not glob_filter.file_ok(rel):
        return False
    for k in range(1, len(parts)):
        if not glob_filter.dir_ok("/".join(parts[:k])):
            return False
    return not (exclude is not None and exclude(rel))


def glob_files(root: Path | str, pattern: str, *, policy: PathPolicy | None = None) -> list[str]:
    """List the files below ``root`` that match a gitignore-style glob.

    Follows the same rules as ``search`` (``.gitignore`` honoured, symlinks not
    followed, ``.git``/``.ctxnb`` skipped; binary files are listed).

    Args:
        root: the directory.
        pattern: a glob such as ``"**/*.py"``, ``"src/*.{js,ts}"`` or ``"README*"``.
        policy: list only what this path policy accepts (its first root must be
            ``root``); by default every file but ``.git`` and ``.ctxnb``.

    Returns:
        Relative posix paths, sorted component-wise.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "pkg").mkdir()
        >>> _ = (root / "pkg" / "a.py").write_text("")
        >>> _ = (root / "setup.cfg").write_text("")
        >>> glob_files(root, "*.py")
        ['pkg/a.py']
    """
    root = _check_root(root)
    glob_filter = _GlobFilter([pattern])
    return [rel for rel, _ in _policy_walk(policy or _whole_tree(root), root, glob_filter, None)]
