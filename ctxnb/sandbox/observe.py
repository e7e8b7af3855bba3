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
    """Paths under ``dirs`` (workspace-relative) and their stat keys, taken at ``taken_ns``."""

    root: Path
    dirs: tuple[str, ...]
    entries: dict[str, StatKey] = field(default_factory=dict)
    taken_ns: int = 0

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


def _key(st: os.stat_result) -> StatKey:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


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
    entries = snap.entries
    base = os.fspath(root_path)
    stack = list(snap.dirs)
    while stack:
        rel_dir = stack.pop()
        try:
            it = os.scandir(f"{base}/{rel_dir}" if rel_dir else base)
        except OSError:
            continue
        prefix = f"{rel_dir}/" if rel_dir else ""
        with it:
            for e in it:
                rel = prefix + e.name
                if rel in skip:
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                entries[rel] = _key(st)
                if stat_mod.S_ISDIR(st.st_mode):
                    stack.append(rel)
    return snap


def diff_snapshots(before: Snapshot, after: Snapshot) -> list[FileChange]:
    """The entries created, modified or deleted between two snapshots, sorted by path.

    A directory only counts as created or deleted (its own stat changes whenever an
    entry inside it does); an entry whose stat is unchanged but recent is a ``racy``
    modification candidate.
    """
    out: list[FileChange] = []
    b, a = before.entries, after.entries
    racy_after = before.taken_ns - RACY_NS
    for rel, key in a.items():
        old = b.get(rel)
        is_dir = stat_mod.S_ISDIR(key[0])
        if old is None:
            out.append(FileChange(rel, "created", is_dir))
        elif stat_mod.S_ISDIR(old[0]) != is_dir:
            out.append(FileChange(rel, "modified", is_dir))
        elif is_dir:
            continue
        elif old != key:
            out.append(FileChange(rel, "modified"))
        elif key[3] >= racy_after:
            out.append(FileChange(rel, "modified", racy=True))
    for rel, key in b.items():
        if rel not in a:
            out.append(FileChange(rel, "deleted", stat_mod.S_ISDIR(key[0])))
    out.sort(key=lambda c: c.path)
    return out
