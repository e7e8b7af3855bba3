"""Walking a workspace tree with ``.gitignore`` ignores, decided exactly as git decides.

``.git/`` and ``.ctxnb/`` are always skipped. ``.gitignore`` files apply to their own
directory and below (as in git); ``.ctxnbignore`` files work the same way and apply
even when ``use_gitignore`` is off (in one directory they come after the
``.gitignore``, so they win). Symlinks are not followed: a link is neither a file nor a
directory of the workspace as far as the walk is concerned.

The rules are git's (see :mod:`ctxnb._wildmatch`): the last matching line decides, a
deeper ignore file beats a shallower one, an ignored directory is not entered (so
nothing below it can be re-included), and every line git accepts is accepted. The
walk gives the same files as ``git ls-files --others --exclude-standard`` in a
repository without commits (a test compares them on thousands of pattern sets).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / ".gitignore").write_text("*.log\\n")
    >>> _ = (root / "a.py").write_text("x = 1\\n")
    >>> _ = (root / "b.log").write_text("noise\\n")
    >>> [rel for rel, _ in iter_tree(root)]
    ['.gitignore', 'a.py']
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterator, Sequence

from ._wildmatch import PatternSet, parse_lines

__all__ = ["ALWAYS_SKIP", "IgnoreMatcher", "iter_tree"]

ALWAYS_SKIP = frozenset({".git", ".ctxnb"})


class IgnoreMatcher:
    """git's ignore rules of one ignore file (or of extra patterns) at ``base``."""

    __slots__ = ("base", "patterns")

    def __init__(self, base: str, lines: Sequence[str]) -> None:
        self.base = base  # posix path relative to the root, "" for the root
        self.patterns = PatternSet(parse_lines(list(lines), base=base))

    def state(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a negation; None: no pattern matched."""
        return self.patterns.decide(rel, is_dir=is_dir)


def _read_ignore_file(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            # git splits at LF only; a CR before it is dropped line by line.
            return f.read().decode("utf-8", "surrogateescape").split("\n")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None


def iter_tree(
    root: str | os.PathLike[str],
    *,
    extra_ignores: Sequence[str] = (),
    use_gitignore: bool = True,
) -> Iterator[tuple[str, os.stat_result]]:
    """Yield ``(relative posix path, lstat)`` of every regular file not ignored, sorted.

    Args:
        root: the workspace root.
        extra_ignores: more gitignore-style patterns relative to the root.
        use_gitignore: honour ``.gitignore`` files (``.ctxnbignore`` always counts).
    """
    root = os.fspath(root)
    base_matchers: list[IgnoreMatcher] = []
    if extra_ignores:
        base_matchers.append(IgnoreMatcher("", list(extra_ignores)))
    yield from _walk(root, "", base_matchers, use_gitignore)


def _ignored(matchers: list[IgnoreMatcher], rel: str, is_dir: bool) -> bool:
    # Later (deeper) files win, as in git: the last matching pattern decides.
    verdict: bool | None = None
    for m in matchers:
        s = m.state(rel, is_dir)
        if s is not None:
            verdict = s
    return bool(verdict)


def _walk(
    root: str, rel_dir: str, matchers: list[IgnoreMatcher], use_gitignore: bool
) -> Iterator[tuple[str, os.stat_result]]:
    directory = f"{root}/{rel_dir}" if rel_dir else root
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except (PermissionError, FileNotFoundError, NotADirectoryError):
        return
    local: list[str] = []
    names = (".gitignore", ".ctxnbignore") if use_gitignore else (".ctxnbignore",)
    present = {e.name for e in entries if e.name in names}
    for name in names:
        if name in present:
            lines = _read_ignore_file(f"{directory}/{name}")
            if lines:
                local.extend(lines)
    if local:
        matchers = [*matchers, IgnoreMatcher(rel_dir, local)]
    for entry in entries:
        if entry.name in ALWAYS_SKIP:
            continue
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat_mod.S_ISDIR(st.st_mode):
            if matchers and _ignored(matchers, rel, True):
                continue
            yield from _walk(root, rel, matchers, use_gitignore)
        elif stat_mod.S_ISREG(st.st_mode):
            if matchers and _ignored(matchers, rel, False):
                continue
            yield rel, st
