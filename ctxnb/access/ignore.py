"""Walking a workspace tree with ``.gitignore`` ignores, decided exactly as git decides.

``.git`` and ``.ctxnb`` are always skipped. ``.gitignore`` files apply to their own
directory and below (as in git); ``.ctxnbignore`` files work the same way and apply
even when ``use_gitignore`` is off (in one directory they come after the
``.gitignore``, so they win). git's ignores from outside the tree apply below all of
them: the ``.gitignore`` files of a repository the workspace is a subdirectory of,
``info/exclude`` and ``core.excludesFile`` (:mod:`ctxnb.access._gitsources`). The walk is
the access layer's (:meth:`ctxnb.access.PathPolicy.walk`, by descriptors): symlinks
are not followed, a link is neither a file nor a directory of the workspace.
:class:`TreeIgnores` brings these rules to any such walk (the indexer's, the rules
discovery's, search's).

The rules are git's (see :mod:`ctxnb._util.wildmatch`): the last matching line decides, a
deeper ignore file beats a shallower one, an ignored directory is not entered (so
nothing below it can be re-included), and every line git accepts is accepted. The
walk gives the same files as ``git ls-files --others --exclude-standard`` in a
repository without commits (a test compares them on thousands of pattern sets, with
the workspace at the top of its repository and in a subdirectory). A ``.gitignore``
that is a symbolic link is not read, as git does not read it.

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

import functools
import os
import warnings
from collections.abc import Callable, Iterator, Sequence

from .._util.wildmatch import PatternSet, parse_lines
from ._gitsources import git_sources, ignore_lines, tracked_dirs

__all__ = ["ALWAYS_SKIP", "IgnoreMatcher", "IgnoredWorkspaceWarning", "TreeIgnores", "iter_tree"]

ALWAYS_SKIP: frozenset[str] = frozenset({".git", ".ctxnb"})
"""Names never walked, indexed or searched, at any depth: git's own data and ctxnb's."""


class IgnoredWorkspaceWarning(UserWarning):
    """git ignores the workspace's own directory, so every untracked file in it is ignored."""


class IgnoreMatcher:
    """git's ignore rules of one ignore file (or of extra patterns) at ``base``.

    Args:
        base: the ignore file's directory, a posix path relative to the root (or, with
            ``prefix``, to the repository's top), ``""`` for the root.
        lines: the file's lines.
        prefix: the workspace root relative to the repository's top, for a file above
            the root (a parent ``.gitignore``, ``info/exclude``, ``core.excludesFile``):
            paths are matched as ``prefix/rel``, where git anchors its patterns.
        git: git's patterns (which never ignore a tracked file), not ctxnb's own.
    """

    __slots__ = ("base", "git", "patterns", "prefix")

    def __init__(
        self, base: str, lines: Sequence[str], *, prefix: str = "", git: bool = True
    ) -> None:
        self.base = base
        self.git = git
        self.prefix = prefix + "/" if prefix else ""
        self.patterns = PatternSet(parse_lines(list(lines), base=base))

    def state(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a negation; None: no pattern matched."""
        return self.patterns.decide(self.prefix + rel if rel else self.prefix[:-1], is_dir=is_dir)


class TreeIgnores:
    """The ignore state of one walk: ``on_dir`` and ``skip`` for ``PathPolicy.walk``.

    Args:
        extra_ignores: more gitignore-style patterns relative to the root.
        use_gitignore: honour git's ignores (``.ctxnbignore`` always counts).
        root: the workspace root; given, git's ignores from outside the tree apply
            too (``core.excludesFile``, ``info/exclude``, the ``.gitignore`` files of
            a repository the root is a subdirectory of; see :mod:`ctxnb.access._gitsources`).
        ctxnbignore: honour ``.ctxnbignore`` files.
    """

    def __init__(
        self,
        extra_ignores: Sequence[str] = (),
        *,
        use_gitignore: bool = True,
        root: str | os.PathLike[str] | None = None,
        ctxnbignore: bool = True,
    ) -> None:
        outer: list[IgnoreMatcher] = []
        self.workspace_ignored = False
        tracked: frozenset[str] = frozenset()
        if use_gitignore and root is not None:
            outer, self.workspace_ignored, tracked = _outer_matchers(root)
        # git never ignores a tracked file, and enters an ignored directory that holds
        # one (for its tracked files only).
        self._tracked = tracked
        self._tracked_dirs = tracked_dirs(tracked) if tracked else frozenset()
        self._ignored_entered: set[str] = {""} if self.workspace_ignored else set()
        extra = [IgnoreMatcher("", list(extra_ignores), git=False)] if extra_ignores else []
        base = [*outer, *extra]
        names = (".gitignore",) if use_gitignore else ()
        self._names = (*names, ".ctxnbignore") if ctxnbignore else names
        self._by_dir: dict[str, list[IgnoreMatcher]] = {"": base}
        self._base = base
        self._entered: set[str] = set()  # directories whose ignore files were read

    def on_dir(self, rel_dir: str, read: Callable[[str], bytes | None]) -> None:
        """Entering ``rel_dir``: read its ignore files through ``read(name)``."""
        parent = self._base
        if rel_dir:
            parent = self._by_dir.get(rel_dir.rpartition("/")[0], self._base)
        local = []
        for name in self._names:  # .ctxnbignore last: its lines win
            data = read(name)
            if data:
                git = name == ".gitignore"
                local.append(IgnoreMatcher(rel_dir, ignore_lines(data), git=git))
        self._by_dir[rel_dir] = [*parent, *local] if local else parent
        self._entered.add(rel_dir)

    def skip(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` (in a directory already entered) is ignored."""
        parent = rel.rpartition("/")[0]
        if rel not in (self._tracked_dirs if is_dir else self._tracked):
            return parent in self._ignored_entered or self._patterns_ignore(parent, rel, is_dir)
        # Tracked (or holding tracked files): git's patterns do not apply, ctxnb's do.
        if self._patterns_ignore(parent, rel, is_dir, git=False):
            return True
        if is_dir and (parent in self._ignored_entered or self._patterns_ignore(parent, rel, True)):
            self._ignored_entered.add(rel)  # entered for its tracked files only
        return False

    def _patterns_ignore(self, parent: str, rel: str, is_dir: bool, *, git: bool = True) -> bool:
        matchers = self._by_dir.get(parent, self._base)
        if not git:
            matchers = [m for m in matchers if not m.git]
        return bool(matchers) and _ignored(matchers, rel, is_dir)

    def decide(self, rel: str, read: Callable[[str], bytes | None]) -> bool:
        """Whether the file ``rel`` is ignored, without a walk: the ignore files of its
        directories are read on demand through ``read(path relative to the root)``.

        Example:
            >>> t = TreeIgnores(["build/"])
            >>> t.decide("build/out/a.o", lambda path: None), t.decide("a.py", lambda p: None)
            (True, False)
        """
        parts = rel.split("/")
        for depth in range(len(parts)):
            rel_dir = "/".join(parts[:depth])
            if rel_dir not in self._entered:
                self.on_dir(rel_dir, functools.partial(_read_in, read, rel_dir))
            below = "/".join(parts[: depth + 1])
            if self.skip(below, depth < len(parts) - 1):
                return True
        return False

    def entered(self, rel_dir: str) -> bool:
        """Whether the walk entered ``rel_dir`` (``""``: the root), so it is not ignored."""
        return rel_dir in self._entered

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        """Whether ``rel`` is ignored, after a walk: below a directory not entered, it is."""
        return not self.entered(rel.rpartition("/")[0]) or self.skip(rel, is_dir)


def _read_in(read: Callable[[str], bytes | None], rel_dir: str, name: str) -> bytes | None:
    return read(f"{rel_dir}/{name}" if rel_dir else name)


def _outer_matchers(
    root: str | os.PathLike[str],
) -> tuple[list[IgnoreMatcher], bool, frozenset[str]]:
    """git's ignore files from outside the tree, whether they ignore the root, and the
    files git tracks below it.

    git ignores everything below an ignored directory, so a workspace that is (or is
    below) a directory its repository ignores has every untracked file ignored.
    """
    from ..errors import CtxnbError
    from .fdio import PathPolicy

    policy = PathPolicy([root], deny=())

    def read_inside(rel: str, limit: int) -> bytes | None:
        try:
            return policy.read_bytes(rel, max_bytes=limit)
        except (CtxnbError, OSError):
            return None  # absent, a link (not followed), or not a regular file

    src = git_sources(root, read_inside=read_inside)
    tracked = src.tracked or frozenset()
    matchers = [IgnoreMatcher(base, lines, prefix=src.prefix) for base, lines in src.files]
    parts = src.prefix.split("/") if src.prefix else []
    for depth in range(1, len(parts) + 1):
        above = "/".join(parts[:depth])  # relative to the repository's top
        verdict: tuple[bool, str] | None = None
        for m in matchers:
            k = m.patterns.last_match(above, is_dir=True)
            if k is not None:
                pattern = m.patterns.patterns[k]
                verdict = (not pattern.negative, pattern.text)
        if verdict is not None and verdict[0]:
            # As git: nothing below an ignored directory counts. Said out loud, since
            # an empty workspace is otherwise a puzzle.
            from ..redaction.redactor import redact_text  # the line is text an agent can write

            warnings.warn(
                redact_text(
                    f"git ignores {above + '/'!r} (the line {verdict[1]!r}), so every "
                    f"untracked file in the workspace {os.fspath(root)!r} is ignored; set "
                    "[index] use_gitignore = false in ctxnb.toml to index it anyway"
                ),
                IgnoredWorkspaceWarning,
                stacklevel=4,
            )
            return matchers, True, tracked
    return matchers, False, tracked


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
    from .fdio import PathPolicy

    ignores = TreeIgnores(extra_ignores, use_gitignore=use_gitignore, root=root)
    policy = PathPolicy([root], deny=sorted(ALWAYS_SKIP))
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
