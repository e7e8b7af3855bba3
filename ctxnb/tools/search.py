"""Grep-like search over a workspace, with ripgrep when it is installed.

``search(root, pattern)`` returns every matching line below ``root``. Two backends
give the same answer: ``"ripgrep"`` runs ``rg`` (fast; install ripgrep to use
it) and ``"python"`` walks the tree itself. ``"auto"`` picks ripgrep when
``shutil.which("rg")`` finds it. The rules both follow:

* **Order**: by path, compared component by component (``a/b`` before ``a.txt``), then
  by line number. ``max_results`` keeps the first matches in that order.
* **Files searched**: regular files only; symbolic links are never followed (neither
  linked files nor linked directories). Hidden files and directories are searched,
  except anything named ``.git`` or ``.ctxnb``.
* **Ignores**: ``.gitignore`` files anywhere below ``root`` are honoured (git's rules,
  deeper files overriding shallower ones, whether or not ``root`` is a git
  repository). Nothing else is read: no ``.ignore``/``.rgignore``, no global git
  excludes, no ``.gitignore`` above ``root``. A ``glob`` never re-includes an ignored
  file.
* **Binary files**: a file containing a NUL byte is skipped. Text is decoded as UTF-8;
  invalid bytes become U+FFFD in the returned line.
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

import os
import re
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

import pathspec

from ctxnb.errors import CtxnbError, NotFoundError

__all__ = [
    "InvalidPatternError",
    "Match",
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


def ripgrep_available() -> bool:
    """Whether the ``rg`` executable is on ``PATH``."""
    return shutil.which("rg") is not None


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


class _Ignores:
    """``.gitignore`` files below a root, read once per directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._dir_ignored: dict[str, bool] = {"": False}

    def spec(self, dir_rel: str) -> pathspec.GitIgnoreSpec | None:
        if dir_rel not in self._specs:
            path = self.root / dir_rel / ".gitignore" if dir_rel else self.root / ".gitignore"
            spec = None
            try:
                if path.is_file() and not path.is_symlink():
                    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
                    spec = pathspec.GitIgnoreSpec.from_lines(lines)
            except OSError:
                spec = None
            self._specs[dir_rel] = spec
        return self._specs[dir_rel]

    def ignored_here(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` itself is ignored, assuming its ancestors are not."""
        parts = rel.split("/")
        for k in range(len(parts) - 1, -1, -1):  # deepest .gitignore first
            spec = self.spec("/".join(parts[:k]))
            if spec is None:
                continue
            sub = "/".join(parts[k:]) + ("/" if is_dir else "")
            verdict = spec.check_file(sub).include
            if verdict is not None:
                return verdict
        return False

    def dir_ignored(self, rel: str) -> bool:
        if rel not in self._dir_ignored:
            parent = rel.rpartition("/")[0]
            self._dir_ignored[rel] = self.dir_ignored(parent) or self.ignored_here(rel, True)
        return self._dir_ignored[rel]

    def file_ignored(self, rel: str) -> bool:
        return self.dir_ignored(rel.rpartition("/")[0]) or self.ignored_here(rel, False)


def _check_root(root: Path) -> Path:
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
        matches = _search_ripgrep(
            root, pattern, compiled, regex, case_sensitive, globs or (), glob_filter, exclude
        )
    elif backend == "python":
        matches = _search_python(root, compiled, glob_filter, exclude, max_results)
    else:
        raise ValueError(f"backend must be 'auto', 'ripgrep' or 'python', got {backend!r}")
    return matches if max_results is None else matches[:max_results]


def _walk(
    root: Path, glob_filter: _GlobFilter | None, exclude: Callable[[str], bool] | None
) -> Iterator[tuple[str, Path]]:
    """Yield ``(relative posix path, path)`` of searchable files, in search order."""
    ignores = _Ignores(root)

    def visit(dir_path: Path, dir_rel: str) -> Iterator[tuple[str, Path]]:
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name in ALWAYS_EXCLUDED:
                continue
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if ignores.ignored_here(rel, True):
                    continue
                if glob_filter is not None and not glob_filter.dir_ok(rel):
                    continue
                yield from visit(Path(entry.path), rel)
            elif is_file:
                if ignores.ignored_here(rel, False):
                    continue
                if glob_filter is not None and not glob_filter.file_ok(rel):
                    continue
                if exclude is not None and exclude(rel):
                    continue
                yield rel, Path(entry.path)

    yield from visit(root, "")


def _search_python(
    root: Path,
    compiled: re.Pattern[str],
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
    max_results: int | None,
) -> list[Match]:
    # A whole-file search with MULTILINE finds every file that has a matching line
    # (and maybe a few more, which the per-line pass drops) far faster than line by line.
    prefilter = re.compile(compiled.pattern, compiled.flags | re.MULTILINE)
    matches: list[Match] = []
    for rel, path in _walk(root, glob_filter, exclude):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data:
            continue
        text = data.decode("utf-8", errors="replace")
        if prefilter.search(text) is None:
            continue
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the final newline ends the last line; it does not open one
        for number, line in enumerate(lines, start=1):
            m = compiled.search(line)
            if m is None:
                continue
            shown = line[:-1] if line.endswith("\r") else line
            matches.append(Match(rel, number, shown, m.start() + 1))
            if max_results is not None and len(matches) >= max_results:
                # The walk is already in result order, so the first N are final.
                return matches
    return matches


def _search_ripgrep(
    root: Path,
    pattern: str,
    compiled: re.Pattern[str],
    regex: bool,
    case_sensitive: bool,
    globs: Sequence[str],
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> list[Match]:
    rg = shutil.which("rg")
    if rg is None:
        raise CtxnbError(
            "ripgrep ('rg') is not installed; install it (e.g. 'apt-get install ripgrep' "
            "or 'brew install ripgrep') or pass backend='python'"
        )
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
        "--no-require-git",
        # Only .gitignore files below the root count, as in the Python backend.
        "--no-ignore-dot",
        "--no-ignore-exclude",
        "--no-ignore-global",
        "--no-ignore-parent",
        "--encoding",
        "none",
        "--case-sensitive" if case_sensitive else "--ignore-case",
    ]
    if not regex:
        cmd.append("--fixed-strings")
    for glob in globs:
        cmd += ["--glob", glob]
    for name in sorted(ALWAYS_EXCLUDED):
        cmd += ["--glob", f"!{name}"]  # last, so no include glob can bring them back
    cmd += ["--regexp", pattern, "--", "."]
    # Parse while rg is still searching; stderr goes to a file so that a flood of
    # warnings (unreadable files) cannot fill a pipe and stall rg.
    with (
        tempfile.TemporaryFile() as errors,
        subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=errors) as proc,
    ):
        assert proc.stdout is not None
        by_file, binary = _parse_rg(proc.stdout, root, glob_filter, exclude)
        returncode = proc.wait()
        if returncode not in (0, 1) and not by_file:
            errors.seek(0)
            message = errors.read().decode(errors="replace").strip()
            raise CtxnbError(f"ripgrep failed (exit {returncode}): {message}; try backend='python'")
    for raw in binary:
        by_file.pop(os.fsdecode(raw).removeprefix("./"), None)
    return _in_order(by_file)


def _parse_rg(
    stream: Iterable[bytes],
    root: Path,
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> tuple[dict[str, list[Match]], set[bytes]]:
    """Read rg's ``path NUL line:column:text`` records, grouped by file."""
    ignores = _Ignores(root)
    by_file: dict[str, list[Match]] = {}
    binary: set[bytes] = set()
    current: bytes | None = None
    rel = ""
    ok = False
    bucket: list[Match] = []
    new_match = Match._make
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
        if not ok:
            continue
        number, column, text = rest.split(b":", 2)
        # Drop "\n", and the "\r" of "\r\n" (only one, as the Python backend does).
        text = text[:-2] if text.endswith(b"\r\n") else text[:-1]
        if text.isascii():
            bucket.append(new_match((rel, int(number), text.decode("ascii"), int(column))))
        else:
            col = len(text[: int(column) - 1].decode("utf-8", errors="replace")) + 1
            bucket.append(new_match((rel, int(number), text.decode("utf-8", "replace"), col)))
    return by_file, binary


def _in_order(by_file: dict[str, list[Match]]) -> list[Match]:
    """Concatenate per-file matches (each already in line order) in path order."""
    out: list[Match] = []
    for path in sorted(by_file, key=lambda p: p.split("/")):
        out.extend(by_file[path])
    return out


_RG_BINARY_WARNING = re.compile(rb"^(.*): WARNING: stopped searching binary file", re.DOTALL)


def _rg_keep(
    rel: str,
    ignores: _Ignores,
    glob_filter: _GlobFilter,
    exclude: Callable[[str], bool] | None,
) -> bool:
    """Apply the rules ripgrep reads differently (an include glob beats .gitignore)."""
    parts = rel.split("/")
    if any(p in ALWAYS_EXCLUDED for p in parts):
        return False
    if ignores.file_ignored(rel):
        return False
    if not glob_filter.file_ok(rel):
        return False
    for k in range(1, len(parts)):
        if not glob_filter.dir_ok("/".join(parts[:k])):
            return False
    return not (exclude is not None and exclude(rel))


def glob_files(root: Path | str, pattern: str) -> list[str]:
    """List the files below ``root`` that match a gitignore-style glob.

    Follows the same rules as ``search`` (``.gitignore`` honoured, symlinks not
    followed, ``.git``/``.ctxnb`` skipped; binary files are listed).

    Args:
        root: the directory.
        pattern: a glob such as ``"**/*.py"``, ``"src/*.{js,ts}"`` or ``"README*"``.

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
    return [rel for rel, _ in _walk(root, glob_filter, None)]
