"""Where a workspace's rules files are: one walk, and no second one while nothing moved.

:func:`rules_file_paths` walks the workspace (by descriptors, with its ignores) for the
names of rules files, as :meth:`RulesIndex.discover` always did, and remembers for the
workspace's path policy which directories it entered with their ``lstat``, taken on
entering, before the listing. The next discovery ``stat``\\s those directories again in
one batch instead of walking: a file or directory added, removed or renamed anywhere
changes its directory's mtime and ctime (a new directory, however deep, changes its
parent's), and ctime cannot be set back. The ignore files read on the way are checked
the same way, and git's ignores from outside the tree (``info/exclude``, the files git
tracks ...) are compared whole. A directory that differs, or is too recent to be sure of
(within :data:`~ctxnb.access.observe.RACY_NS` of the walk, where a change in the same
clock tick could hide, as git's racily clean entries), is listed again with every
directory above it; an unchanged subdirectory gives what the last walk found in it
without being entered; below a changed ignore file, and in a new directory, everything
is walked. A change to git's outer ignores walks the whole tree. The rules files
themselves are read every time, so an edit of one is seen whatever its stat says.

A workspace's walk is also kept for the next process (``keep``: in
``.ctxnb/sessions/rules-walk.json``, sealed by :func:`ctxnb.session._cold.write_sealed`
under the workspace's secret: a file forged without it, copied from another workspace,
behind a link or writable by others is not used), keyed by a digest of the walk's inputs
(names, rules root, ignores, git's outer ignores and tracked files), of the walking
code's bytes and of the workspace (root, settings): a fresh
process that resumes a session checks those directories' stats as above instead of
walking the tree. A file that is missing, damaged or of another key is a fresh walk; what
it lists is only where to look (each rules file found is read through the path policy),
and it lives in ctxnb's own directory, as the store and the stat cache do.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..access import observe
from ..access.fdio import PathPolicy
from ..access.ignore import TreeIgnores
from ..errors import NotFoundError

__all__ = ["rules_file_paths"]


class _Walked:
    """What one walk saw: its inputs, the directories it entered and what it found.

    ``recs`` are in walk order (depth first): each directory entered, then the ignore
    files read in it, as ``(directory, absolute path, is the directory itself)`` with
    their stat in ``stats``; ``found`` the accepted files in walk order. A directory's
    subtree is one run of each (``spans``).
    """

    __slots__ = ("at", "found", "key", "outer", "recs", "spans", "stats", "sure")

    def __init__(self, key: tuple[Any, ...], outer: tuple[Any, ...], at: int) -> None:
        self.key = key
        self.outer = outer
        self.at = at
        self.recs: list[tuple[str, str, bool]] = []
        self.stats: list[tuple[int, int, int, int]] = []
        self.found: list[str] = []
        self.spans: dict[str, tuple[int, int, int, int]] = {}
        self.sure = True  # False: something could not be looked at; do not remember

    def close(self) -> None:
        """Work out each directory's runs of records and found files."""
        recs, found = self.recs, self.found
        f = 0
        for i, (rel, _, is_dir) in enumerate(recs):
            if not is_dir:
                continue
            below = rel + "/" if rel else ""
            j = i + 1
            while j < len(recs) and (recs[j][0] == rel or recs[j][0].startswith(below)):
                j += 1
            while f < len(found) and not found[f].startswith(below) and _before(found[f], rel):
                f += 1
            g = f
            while g < len(found) and found[g].startswith(below):
                g += 1
            self.spans[rel] = (i, j, f, g)


def _before(path: str, rel: str) -> bool:
    """Whether the walk yields ``path`` before it enters the directory ``rel``."""
    return path.split("/") < rel.split("/")


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


def _canon(value: Any) -> Any:
    """``value`` as JSON the same in every process (sets sorted: their order is not)."""
    if isinstance(value, set | frozenset):
        return sorted((_canon(v) for v in value), key=repr)
    if isinstance(value, tuple | list):
        return [_canon(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    return repr(value)


def _digest(key: tuple[Any, ...], outer: tuple[Any, ...], extra: str) -> str:
    from .._util.seal import code_key
    from ..access import _fdwalk, ignore

    # The code that decides what a walk finds: an edited or upgraded ctxnb walks again.
    code = code_key((sys.modules[__name__], _fdwalk, ignore))
    text = json.dumps([_canon(key), _canon(outer), extra, code])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _load(path: Path, digest: str) -> _Walked | None:
    """The walk kept at ``path`` if it is whole and of ``digest``; else None."""
    from ..session._cold import read_sealed

    doc = read_sealed(path)
    if not (isinstance(doc, dict) and doc.get("digest") == digest):
        return None
    at, recs, stats, found = doc.get("at"), doc.get("recs"), doc.get("stats"), doc.get("found")
    if type(at) is not int or not isinstance(recs, list) or not isinstance(stats, list):
        return None
    if not isinstance(found, list):
        return None
    if len(recs) != len(stats) or not all(type(f) is str for f in found):
        return None
    for r, st in zip(recs, stats, strict=True):
        if not (isinstance(r, list) and len(r) == 3 and isinstance(st, list) and len(st) == 4):
            return None
        if not (type(r[0]) is str and type(r[1]) is str and type(r[2]) is bool):
            return None
        if not all(type(v) is int for v in st):
            return None
    walked = _Walked((), (), at)
    walked.recs = [(r[0], r[1], r[2]) for r in recs]
    walked.stats = [(st[0], st[1], st[2], st[3]) for st in stats]
    walked.found = list(found)
    walked.close()
    return walked


def _keep(path: Path, digest: str, walked: _Walked) -> None:
    from ..session._cold import write_sealed

    if not path.parent.parent.is_dir():
        # No .ctxnb/ yet (no store): making it would change the root's listing, which
        # the next discovery would then list again.
        return
    doc = {"digest": digest, "at": walked.at, "recs": walked.recs, "stats": walked.stats}
    write_sealed(path, {**doc, "found": walked.found})


def _changed(policy: PathPolicy, walked: _Walked) -> tuple[set[str], set[str]]:
    """The directories whose listing changed (or may have: racy), and those whose
    ignore files changed (everything below them may be judged otherwise)."""
    racy = walked.at - observe.RACY_NS
    sr = os.stat_result
    listing: set[str] = set()
    ignores: set[str] = set()
    paths = [path for _, path, _ in walked.recs]
    for (rel, _, is_dir), st, was in zip(
        walked.recs, policy.stat_many(paths), walked.stats, strict=True
    ):
        if type(st) is not sr or _key(st) != was or max(was[1], was[2]) >= racy:
            (listing if is_dir else ignores).add(rel)
    return listing, ignores


def _within(rel: str, dirs: set[str]) -> bool:
    """Whether ``rel`` is one of ``dirs`` or below one."""
    if not dirs:
        return False
    if "" in dirs or rel in dirs:
        return True
    parts = rel.split("/")
    return any("/".join(parts[:k]) in dirs for k in range(1, len(parts)))


def rules_file_paths(
    policy: PathPolicy,
    tree: TreeIgnores,
    accept: Callable[[str, Any], bool],
    key: tuple[Any, ...],
    *,
    keep: tuple[Path, str] | None = None,
) -> list[str]:
    """The workspace-relative paths, in walk order, of the files ``accept(rel, root)``
    takes, below the first root of ``policy`` with ``tree``'s ignores.

    ``key`` holds whatever else decides the answer (names, the rules root, the
    ignore settings): a different key walks again. ``keep``: where to keep the walk
    for the next process, and a digest of what else it depends on (the workspace's).
    """
    outer = _outer(tree)
    old = _WALKS.get(policy)
    listing: set[str] = set()
    ignores: set[str] = set()
    if old is not None and (old.key != key or old.outer != outer):
        old = None
    digest = _digest(key, outer, keep[1]) if keep is not None else ""
    if old is None and keep is not None:
        old = _load(keep[0], digest)
        if old is not None:
            old.key, old.outer = key, outer
    if old is not None:
        listing, ignores = _changed(policy, old)
        if not listing and not ignores:
            _WALKS[policy] = old
            return list(old.found)
    # The directories to list again: those that changed and every one above them.
    # Below a changed ignore file, everything is judged again.
    listed = {""}
    for rel in listing | ignores:
        parts = rel.split("/") if rel else []
        listed.update("/".join(parts[:k]) for k in range(len(parts) + 1))
    walked = _Walked(key, outer, time.time_ns())
    base = str(policy.roots[0])
    names = tree._names
    # The ignore files each directory had: one added since (its directory changed, and
    # is listed again) judges everything below it again, as one edited or removed does.
    had: dict[str, list[tuple[str, tuple[int, int, int, int]]]] = {}
    if old is not None:
        for (rel, path, is_dir), was in zip(old.recs, old.stats, strict=True):
            if not is_dir:
                had.setdefault(rel, []).append((path, was))

    def on_dir(rel: str, read: Callable[[str], bytes | None]) -> None:
        where = posixpath.join(base, rel) if rel else base
        # Before the listing: a change made after this stat changes it.
        paths = [where, *(posixpath.join(where, n) for n in names)]
        found: list[tuple[str, tuple[int, int, int, int]]] = []
        for n, (path, st) in enumerate(zip(paths, policy.stat_many(paths), strict=True)):
            if type(st) is os.stat_result:
                walked.recs.append((rel, path, n == 0))
                walked.stats.append(_key(st))
                if n:
                    found.append((path, _key(st)))
            elif n == 0 or not isinstance(st, NotFoundError):
                walked.sure = False  # a directory or an ignore file the policy refuses
        if old is not None and found != had.get(rel, []):
            ignores.add(rel)
        tree.on_dir(rel, read)

    def skip(rel: str, is_dir: bool) -> bool:
        if tree.skip(rel, is_dir):
            return True
        if old is None or not is_dir or rel in listed or _within(rel, ignores):
            return False
        span = old.spans.get(rel)
        if span is None:  # a new directory: walked
            return False
        # Unchanged, as everything below it: what the last walk saw there, unentered.
        r0, r1, f0, f1 = span
        walked.recs.extend(old.recs[r0:r1])
        walked.stats.extend(old.stats[r0:r1])
        walked.found.extend(old.found[f0:f1])
        return True

    for entry in policy.walk(skip=skip, on_dir=on_dir):
        if accept(entry.rel, entry.root):
            walked.found.append(entry.rel)
    walked.close()
    if walked.sure:
        _WALKS[policy] = walked
        if keep is not None:
            _keep(keep[0], digest, walked)
    else:
        _WALKS.pop(policy, None)
        if keep is not None:
            keep[0].unlink(missing_ok=True)
    return list(walked.found)
