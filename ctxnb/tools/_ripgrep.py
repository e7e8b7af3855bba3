"""The ripgrep backend of :func:`ctxnb.tools.search.search`.

Finding ``rg``, running it over the searchable directories in argument-sized chunks,
reading its output, and proposing lines that Python's ``re`` then decides, so both
backends give one answer.
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ctxnb.access.ignore import ALWAYS_SKIP, TreeIgnores
from ctxnb.errors import CtxnbError

from ._searchfiles import (
    Match,
    _confirm,
    _file_matches,
    _policy_text,
    _search_python,
    _searchable_dirs,
    _searchable_targets,
    _whole_tree,
)
from ._searchpatterns import _GlobFilter

if TYPE_CHECKING:
    from ctxnb.access.fdio import PathPolicy

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
    *,
    enough: int | None = None,
    start: str | None = None,
) -> list[Match]:
    """The matches, in result order; under a ``policy``, already read again race-free.

    ``enough``: with a policy, rg runs over the directories in walk order, a small group
    first and groups eight times as large after, and stops once that many matches are final
    (no directory left can hold a file before them): the first page of a search with
    many hits reads a few directories, not the tree. ``start``: a path; directories
    whose files all come before it are not searched (the next page of a search).
    """
    rg = find_ripgrep()
    if rg is None:
        raise CtxnbError(
            "ripgrep ('rg') is not installed; reinstall ctxnb (its 'ripgrep' dependency "
            f"ships rg), put rg on PATH or name it in ${RG_ENV}, or pass backend='python'"
        )
    if _FOLDS_TO_ASCII & set(pattern):  # (an inline "(?i)" may turn folding on)
        return _search_python(root, compiled, glob_filter, exclude, None, policy)
    walker = policy or _whole_tree(root)
    if policy is not None:
        # Directories the policy refused nothing in, and the accepted files of the
        # others: rg opens nothing the file tools would refuse (denied names, their hard
        # links, .git/, .ctxnb/).
        targets, ignores = _searchable_targets(policy, root, glob_filter)
    else:
        dirs, ignores = _searchable_dirs(walker, root, glob_filter)
        targets = dirs
    if start is not None:
        targets = [t for t in targets if not _all_before(t, start.split("/"))]
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
    # (Globs narrow the directories rg reads; rg applies none to a file it is named.)
    for glob in globs:
        cmd += ["--glob", glob]
    for name in sorted(ALWAYS_SKIP):
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
    if not targets:
        return []
    if policy is not None:

        def nominated(stream: IO[bytes]) -> _Parsed:
            return _parse_rg_files(stream, ignores, glob_filter, exclude)

        return _confirmed_in_groups(cmd, root, targets, nominated, policy, compiled, enough)
    by_file, binary, other = _rg_over(
        cmd,
        root,
        targets,
        lambda stream: _parse_rg(stream, ignores, compiled, glob_filter, exclude),
    )
    for raw in binary:
        by_file.pop(os.fsdecode(raw).removeprefix("./"), None)
    for rel in other:  # not UTF-8: Python reads the whole file as windows-1252
        text = _policy_text(functools.partial(walker.read_bytes, rel))
        by_file[rel] = [] if text is None else _file_matches(rel, text, compiled, None)
    return _in_order({rel: found for rel, found in by_file.items() if found})


_Parsed = tuple[dict[str, list[Match]], set[bytes], set[str]]
_FIRST_GROUP = 16  # directories (or files) in the first run of rg of a capped search
_GROWTH = 8  # each run after it that many times the last


def _all_before(target: str, start: list[str]) -> bool:
    """Whether every file a target (a directory searched one level deep, or a file)
    can hold comes before the path ``start`` in result order."""
    parts = target.split("/") if target else []
    return parts < start and parts != start[: len(parts)]


def _confirmed_in_groups(
    cmd: list[str],
    root: Path,
    targets: list[str],
    nominated: Callable[[IO[bytes]], _Parsed],
    policy: PathPolicy,
    compiled: re.Pattern[str],
    enough: int | None,
) -> list[Match]:
    """rg names the files with matches, group by group in walk order; each is read
    again race-free and matched here (every byte returned comes from a file the policy
    accepts). With ``enough``, stop once that many matches come before every file of
    the directories left (the walk is in result order, so they can only come after)."""
    out: list[Match] = []
    i, size = 0, len(targets) if enough is None else _FIRST_GROUP
    while i < len(targets):
        group = targets[i : i + size]
        # Each group eight times the last: a search that finds little pays for few rg starts.
        i, size = i + size, size * _GROWTH
        found, _, _ = _rg_over(cmd, root, group, nominated)
        # At most ``enough`` of a group's matches can be in the answer: the rest unread.
        out.extend(_confirm(policy, compiled, _in_order(found), enough))
        if enough is not None and i < len(targets):
            left = targets[i].split("/") if targets[i] else []
            if sum(1 for m in out if m.path.split("/") < left) >= enough:
                break
    out.sort(key=lambda m: (m.path.split("/"), m.line_number))
    return out


def _rg_over(
    cmd: list[str], root: Path, targets: list[str], parse: Callable[[IO[bytes]], _Parsed]
) -> _Parsed:
    """One run of rg over ``targets`` (several when the arguments are too long)."""
    by_file: dict[str, list[Match]] = {}
    binary: set[bytes] = set()
    other: set[str] = set()
    # "./" first: a directory named "-" is not rg's standard input, and none starts an
    # option (the "--" above covers that too).
    for chunk in _arg_chunks([f"./{t}" if t else "." for t in targets]):
        # Parse while rg is still searching; stderr goes to a file so that a flood of
        # warnings (unreadable files) cannot fill a pipe and stall rg.
        with (
            tempfile.TemporaryFile() as errors,
            subprocess.Popen(
                [*cmd, *chunk], cwd=root, stdout=subprocess.PIPE, stderr=errors
            ) as proc,
        ):
            assert proc.stdout is not None
            found, bin_, oth = parse(proc.stdout)
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
    return by_file, binary, other


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
    if any(p in ALWAYS_SKIP for p in parts):
        return False
    if ignores.ignored(rel):
        return False
    if not glob_filter.file_ok(rel):
        return False
    for k in range(1, len(parts)):
        if not glob_filter.dir_ok("/".join(parts[:k])):
            return False
    return not (exclude is not None and exclude(rel))
