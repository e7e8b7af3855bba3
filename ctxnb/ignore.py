"""Walking a workspace tree with ``.gitignore`` ignores, decided exactly as git decides.

``.git`` and ``.ctxnb`` are always skipped. ``.gitignore`` files apply to their own
directory and below (as in git); ``.ctxnbignore`` files work the same way and apply
even when ``use_gitignore`` is off (in one directory they come after the
``.gitignore``, so they win). The walk is the access layer's
(:meth:`ctxnb.access.PathPolicy.walk`, by descriptors): symlinks are not followed, a
link is neither a file nor a directory of the workspace. :class:`TreeIgnores` brings
these rules to any such walk (the indexer's, the rules discovery's).

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
from collections.abc import Callable, Iterator, Sequence

from ._wildmatch import PatternSet, parse_lines

__all__ = ["ALWAYS_SKIP", "IgnoreMatcher", "TreeIgnores", "iter_tree"]

ALWAYS_SKIP = (".git", ".ctxnb")
"""Names never walked, at any depth (deny globs of the walk's path policy)."""


class IgnoreMatcher:
    """git's ignore rules of one ignore file (or of extra patterns) at ``base``."""

    __slots__ = ("base", "patterns")

    def __init__(self, base: str, lines: Sequence[str]) -> None:
        self.base = base  # posix path relative to the root, "" for the root
        self.patterns = PatternSet(parse_lines(list(lines), base=base))

    def state(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a negation; None: no pattern matched."""
        return self.patterns.decide(rel, is_dir=is_dir)


def _ignore_lines(data: bytes) -> list[str]:
    # git splits at LF only; a CR before it is dropped line by line.
    return data.decode("utf-8", "surrogateescape").split("\n")


class TreeIgnores:
    """The ignore state of one walk: ``on_dir`` and ``skip`` for ``PathPolicy.walk``.

    Args:
        extra_ignores: more gitignore-style patterns relative to the root.
        use_gitignore: honour ``.gitignore`` files (``.ctxnbignore`` always counts).
    """

    def __init__(self, extra_ignores: Sequence[str] = (), *, use_gitignore: bool = True) -> None:
        base = [IgnoreMatcher("", list(extra_ignores))] if extra_ignores else []
        self._names = (".gitignore", ".ctxnbignore") if use_gitignore else (".ctxnbignore",)
        self._by_dir: dict[str, list[IgnoreMatcher]] = {"": base}
        self._base = base

    def on_dir(self, rel_dir: str, read: Callable[[str], bytes | None]) -> None:
        """Entering ``rel_dir``: read its ignore files through ``read(name)``."""
        parent = self._base
        if rel_dir:
            parent = self._by_dir.get(rel_dir.rpartition("/")[0], self._base)
        local: list[str] = []
        for name in self._names:
            data = read(name)
            if data:
                local.extend(_ignore_lines(data))
        self._by_dir[rel_dir] = [*parent, IgnoreMatcher(rel_dir, local)] if local else parent

    def skip(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` (in a directory already entered) is ignored."""
        matchers = self._by_dir.get(rel.rpartition("/")[0], self._base)
        return bool(matchers) and _ignored(matchers, rel, is_dir)


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
    from .access.fdio import PathPolicy

    ignores = TreeIgnores(extra_ignores, use_gitignore=use_gitignore)
    policy = PathPolicy([root], deny=ALWAYS_SKIP)
    for entry in policy.walk(skip=ignores.skip, on_dir=ignores.on_dir):
        yield entry.safe.rel, entry.stat


def _ignored(matchers: list[IgnoreMatcher], rel: str, is_dir: bool) -> bool:
    # Later (deeper) files win, as in git: the last matching pattern decides.
    verdict: bool | None = None
    for m in matchers:
        s = m.state(rel, is_dir)
        if s is not None:
            verdict = s
    return bool(verdict)
