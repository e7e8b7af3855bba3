"""Where a workspace's rules files are: one walk, and no second one while nothing moved.

:func:`rules_file_paths` walks the workspace (by descriptors, with its ignores) for the
names of rules files, as :meth:`RulesIndex.discover` always did, and remembers for the
workspace's path policy which directories it entered with their ``lstat``, taken on
entering, before the listing. The next discovery ``stat``\\s those directories again in
one batch instead of walking: a file or directory added, removed or renamed anywhere
changes its directory's mtime and ctime (a new directory, however deep, changes its
parent's), and ctime cannot be set back. The ignore files read on the way are checked
the same way, and git's ignores from outside the tree (``info/exclude``, the files git
tracks ...) are compared whole. Anything different, missing, or too recent to be sure
of (within :data:`~ctxnb.access.observe.RACY_NS` of the walk, where a change in the same
clock tick could hide, as git's racily clean entries) walks again. The rules files
themselves are read every time, so an edit of one is seen whatever its stat says.
"""

from __future__ import annotations

import os
import posixpath
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..access import observe
from ..access.fdio import PathPolicy
from ..errors import NotFoundError
from ..ignore import TreeIgnores

__all__ = ["rules_file_paths"]


class _Walked:
    """What one walk saw: its inputs, the directories it entered and what it found."""

    __slots__ = ("at", "dirs", "found", "key", "outer", "stats", "sure")

    def __init__(self, key: tuple[Any, ...], outer: tuple[Any, ...], at: int) -> None:
        self.key = key
        self.outer = outer
        self.at = at
        self.dirs: list[str] = []  # absolute: directories entered, then ignore files read
        self.stats: list[tuple[int, int, int, int]] = []
        self.found: list[str] = []
        self.sure = True  # False: something could not be looked at; do not remember


# By path policy (a workspace's), so that nothing outlives it or is shared between two.
_WALKS: weakref.WeakKeyDictionary[PathPolicy, _Walked] = weakref.WeakKeyDictionary()


def _key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_mode, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _outer(tree: TreeIgnores) -> tuple[Any, ...]:
    """git's ignores from outside the tree and ctxnb's extra ones, as comparable values."""
    return (
        tree.workspace_ignored,
        tree._tracked,
        tuple(
            (m.base, m.prefix, m.git, tuple((p.text, p.base) for p in m.patterns.patterns))
            for m in tree._base
        ),
    )


def _still(policy: PathPolicy, walked: _Walked, outer: tuple[Any, ...]) -> bool:
    """Whether nothing the walk depended on changed since it ran."""
    if walked.outer != outer:
        return False
    racy = walked.at - observe.RACY_NS
    sr = os.stat_result
    for st, was in zip(policy.stat_many(walked.dirs), walked.stats, strict=True):
        if type(st) is not sr or _key(st) != was or max(was[1], was[2]) >= racy:
            return False
    return True


def rules_file_paths(
    policy: PathPolicy,
    tree: TreeIgnores,
    accept: Callable[[str, Any], bool],
    key: tuple[Any, ...],
) -> list[str]:
    """The workspace-relative paths, in walk order, of the files ``accept(rel, root)``
    takes, below the first root of ``policy`` with ``tree``'s ignores.

    ``key`` holds whatever else decides the answer (names, the rules root, the
    ignore settings): a different key walks again.
    """
    outer = _outer(tree)
    walked = _WALKS.get(policy)
    if walked is not None and walked.key == key and _still(policy, walked, outer):
        return list(walked.found)
    walked = _Walked(key, outer, time.time_ns())
    base = str(policy.roots[0])
    names = tree._names

    def on_dir(rel: str, read: Callable[[str], bytes | None]) -> None:
        where = posixpath.join(base, rel) if rel else base
        # Before the listing: a change made after this stat changes it.
        paths = [where, *(posixpath.join(where, n) for n in names)]
        for n, (path, st) in enumerate(zip(paths, policy.stat_many(paths), strict=True)):
            if type(st) is os.stat_result:
                walked.dirs.append(path)
                walked.stats.append(_key(st))
            elif n == 0 or not isinstance(st, NotFoundError):
                walked.sure = False  # a directory or an ignore file the policy refuses
        tree.on_dir(rel, read)

    for entry in policy.walk(skip=tree.skip, on_dir=on_dir):
        if accept(entry.rel, entry.root):
            walked.found.append(entry.rel)
    if walked.sure:
        _WALKS[policy] = walked
    else:
        _WALKS.pop(policy, None)
    return list(walked.found)
