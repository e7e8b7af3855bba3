"""What a command changed: a stat snapshot of the writable directories, before and after.

A snapshot maps each workspace-relative path under the writable directories to its
``lstat`` key (type and mode, size, mtime, ctime, inode). Any write changes the ctime
(which a process cannot set back), a replacement changes the inode, so comparing two
snapshots finds every created, modified and deleted entry without reading a byte.
The only blind spot is a write within the same clock tick as the first snapshot of a
file that was itself written in that tick ("racily clean", as git calls it); such
entries are reported as *candidates* and the caller compares their bytes.

Example:
    >>> import tempfile, pathlib
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / "a.txt").write_text("1")
    >>> before = take_snapshot(ws, [""])
    >>> _ = (ws / "b.txt").write_text("2"); (ws / "a.txt").unlink()
    >>> [(c.path, c.kind) for c in diff_snapshots(before, take_snapshot(ws, [""]))]
    [('a.txt', 'deleted'), ('b.txt', 'created')]
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["FileChange", "Snapshot", "diff_snapshots", "take_snapshot"]

StatKey = tuple[int, int, int, int, int]
# A write in the same coarse clock tick as the snapshot keeps the ctime; ticks are at
# most 10 ms (HZ=100), so anything newer than this is compared by content.
RACY_NS = 50_000_000


@dataclass
class Snapshot:
    """Paths under ``dirs`` (workspace-relative) and their stat keys, taken at ``taken_ns``.

    Kept per directory (``tree[rel_dir][name]``), so that comparing two snapshots joins
    names, not whole paths; :attr:`entries` is the flat view.
    """

    root: Path
    dirs: tuple[str, ...]
    tree: dict[str, dict[str, StatKey]] = field(default_factory=dict)
    taken_ns: int = 0
    _flat: dict[str, StatKey] | None = field(default=None, repr=False)

    @property
    def entries(self) -> dict[str, StatKey]:
        """Workspace-relative path -> stat key, for every entry."""
        if self._flat is None:
            flat: dict[str, StatKey] = {}
            for rel_dir, names in self.tree.items():
                prefix = f"{rel_dir}/" if rel_dir else ""
                for name, key in names.items():
                    flat[prefix + name] = key
            self._flat = flat
        return self._flat

    def is_dir(self, rel: str) -> bool:
        key = self.entries.get(rel)
        return key is not None and stat_mod.S_ISDIR(key[0])

    def is_file(self, rel: str) -> bool:
        key = self.entries.get(rel)
        return key is not None and stat_mod.S_ISREG(key[0])


@dataclass(frozen=True)
class FileChange:
    """One entry a command changed.

    Attributes:
        path: workspace-relative path.
        kind: ``created``, ``modified`` or ``deleted``.
        is_dir: the entry is (or was) a directory.
        racy: the stat did not change but could hide a write; compare the bytes.
    """

    path: str
    kind: Literal["created", "modified", "deleted"]
    is_dir: bool = False
    racy: bool = False


def take_snapshot(
    root: str | os.PathLike[str], dirs: Iterable[str], *, skip: Collection[str] = ()
) -> Snapshot:
    """Stat every entry under ``dirs`` of ``root`` (not following symlinks).

    Args:
        root: the workspace root.
        dirs: workspace-relative directories (``""`` is the root).
        skip: workspace-relative paths not to enter or list (protected, masked).
    """
    root_path = Path(root)
    snap = Snapshot(root_path, tuple(dirs), taken_ns=time.time_ns())
    tree = snap.tree
    base = os.fspath(root_path)
    stack = list(snap.dirs)
    while stack:
        rel_dir = stack.pop()
        try:
            it = os.scandir(f"{base}/{rel_dir}" if rel_dir else base)
        except OSError:
            continue
        prefix = f"{rel_dir}/" if rel_dir else ""
        names: dict[str, StatKey] = {}
        tree[rel_dir] = names
        with it:
            for e in it:
                name = e.name
                if skip and prefix + name in skip:
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                # This loop runs once per entry of the scope, twice per command.
                mode = st.st_mode
                names[name] = (mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                if mode & 0o170000 == 0o040000:  # a directory
                    stack.append(prefix + name)
    return snap


def diff_snapshots(before: Snapshot, after: Snapshot) -> list[FileChange]:
    """The entries created, modified or deleted between two snapshots, sorted by path.

    A directory only counts as created or deleted (its own stat changes whenever an
    entry inside it does); an entry whose stat is unchanged but recent is a ``racy``
    modification candidate.
    """
    out: list[FileChange] = []
    racy_after = before.taken_ns - RACY_NS
    empty: dict[str, StatKey] = {}
    for rel_dir, a in after.tree.items():
        b = before.tree.get(rel_dir, empty)
        prefix = f"{rel_dir}/" if rel_dir else ""
        if a == b:
            # Same names, same keys: only racy candidates can hide here.
            for name, key in a.items():
                if key[3] >= racy_after and not stat_mod.S_ISDIR(key[0]):
                    out.append(FileChange(prefix + name, "modified", racy=True))
            continue
        for name, key in a.items():
            old = b.get(name)
            is_dir = stat_mod.S_ISDIR(key[0])
            if old is None:
                out.append(FileChange(prefix + name, "created", is_dir))
            elif stat_mod.S_ISDIR(old[0]) != is_dir:
                out.append(FileChange(prefix + name, "modified", is_dir))
            elif is_dir:
                continue
            elif old != key:
                out.append(FileChange(prefix + name, "modified"))
            elif key[3] >= racy_after:
                out.append(FileChange(prefix + name, "modified", racy=True))
        for name, key in b.items():
            if name not in a:
                out.append(FileChange(prefix + name, "deleted", stat_mod.S_ISDIR(key[0])))
    for rel_dir, b in before.tree.items():
        if rel_dir in after.tree:
            continue
        prefix = f"{rel_dir}/" if rel_dir else ""
        for name, key in b.items():  # a directory that is gone: all it held is deleted
            out.append(FileChange(prefix + name, "deleted", stat_mod.S_ISDIR(key[0])))
    out.sort(key=lambda c: c.path)
    return out
