"""Searching files in Python: the walk, the ignores, the decoding and the matching.

The pure-Python backend of :func:`ctxnb.tools.search.search`, and the pieces the
ripgrep backend reuses to confirm what ``rg`` proposes: the race-free walk of the access
layer with git's ignores, the decoding of a file's bytes (UTF-8, else windows-1252) and
the matching of its lines.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctxnb.access.ignore import ALWAYS_SKIP, TreeIgnores
from ctxnb.errors import CtxnbError, NotFoundError

from ._searchpatterns import _GlobFilter

if TYPE_CHECKING:
    from ctxnb.access.fdio import FileEntry, PathPolicy


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


# --------------------------------------------------------------------------- ignores


def _first_root_walk(
    policy: PathPolicy,
    ignores: TreeIgnores,
    skip: Callable[[str, bool], bool],
    on_dir: Callable[[str], None] | None = None,
    on_refused: Callable[[str, str], None] | None = None,
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

    def refused(rel: str, rule: str) -> None:
        if roots_seen == 1 and on_refused is not None:
            on_refused(rel, rule)

    first = policy.roots[0]
    for entry in policy.walk(skip=judged, on_dir=enter, on_refused=refused):
        if roots_seen == 1 and entry.safe.root == first:
            yield entry


def _check_root(root: Path | str) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise NotFoundError(f"search root {str(root)!r} is not a directory; pass a folder")
    return root


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

    return PathPolicy([root], deny=sorted(ALWAYS_SKIP))


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


def _searchable_targets(
    policy: PathPolicy, root: Path, glob_filter: _GlobFilter
) -> tuple[list[str], TreeIgnores]:
    """What ripgrep may open in a search under ``policy``: directories and files.

    :func:`_searchable_dirs`, with this difference: a directory in which the policy
    refused something (a denied name, a hard link of a denied file, a link or a special
    file) is not handed over; the files of it the policy accepted are, one by one
    (ripgrep reads many named files several times slower than a directory, so clean
    directories go whole). So ripgrep opens no file the file tools would refuse, and
    never ``.git/`` or ``.ctxnb/``, which the walk does not enter. Ignores and globs are
    applied to ripgrep's answer, as for directories.
    """
    ignores = _search_ignores(root)
    entered: list[str] = []
    unclean: set[str] = set()
    accepted: dict[str, list[str]] = {}

    def skip(rel: str, is_dir: bool) -> bool:
        if is_dir:
            return ignores.skip(rel, True) or not glob_filter.dir_ok(rel)
        # Asked only for a file the policy accepted; the walk needs none of them.
        accepted.setdefault(rel.rpartition("/")[0], []).append(rel)
        return True

    def refused(rel: str, rule: str) -> None:
        unclean.add(rel.rpartition("/")[0])

    for _ in _first_root_walk(policy, ignores, skip, entered.append, refused):
        pass  # every file is skipped: the walk only enters directories
    targets: list[str] = []
    for d in entered:
        if d in unclean:
            targets += accepted.get(d, [])
        else:
            targets.append(d)
    return targets, ignores


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
