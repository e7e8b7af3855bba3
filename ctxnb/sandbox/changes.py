"""What a command changed, read from its overlay: changes to commit, and what is dropped.

:func:`classify` turns the entries of the upper layer (:func:`~ctxnb.sandbox.upper.walk_upper`)
into regular-file changes of the workspace — created, modified, deleted (a rename is a
deletion and a creation) — and the list of everything that will not be committed, each
with its reason: symlinks, hard links, FIFOs, sockets and devices, changes outside the
scope or to a denied or governance path, a file that replaces a directory or a link.
The lower layer (the workspace) is only ``lstat``-ed here, and only where the upper
layer has an entry; a removed directory is listed below to name the files it held.

Example:
    >>> import tempfile, os, pathlib
    >>> ws, up = pathlib.Path(tempfile.mkdtemp()), pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / "a.txt").write_text("1"); _ = (up / "b.txt").write_text("2")
    >>> os.mknod(up / "a.txt", 0o600 | 0o020000, 0)  # a whiteout: a.txt was deleted
    >>> from ctxnb.sandbox.upper import walk_upper
    >>> ch, dropped = classify(ws, walk_upper(up), keep=lambda rel: None)
    >>> [(c.path, c.kind) for c in ch], dropped
    ([('a.txt', 'deleted'), ('b.txt', 'created')], [])
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .upper import UpperEntry

__all__ = ["Dropped", "FileChange", "classify"]


@dataclass(frozen=True)
class FileChange:
    """One regular file a command changed, to be committed.

    Attributes:
        path: workspace-relative path.
        kind: ``created``, ``modified`` or ``deleted``.
        mode: the new file's ``st_mode`` (0 for a deletion).
    """

    path: str
    kind: Literal["created", "modified", "deleted"]
    mode: int = 0


@dataclass(frozen=True)
class Dropped:
    """A change that is not committed, and why."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        # A name the command made need not be UTF-8; its bytes are shown escaped
        # (``\\xff``), so the report can be stored and sent as text.
        shown = os.fsencode(self.path).decode("utf-8", "backslashreplace")
        return {"path": shown, "reason": self.reason}


_WHAT = {"symlink": "a symlink", "special": "a FIFO, socket or device", "hardlink": "a hard link"}


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _lower_files(base: str, rel_dir: str) -> Iterator[tuple[str, int]]:
    """(rel, mode) of every entry below the lower directory ``rel_dir`` (links not followed)."""
    stack = [rel_dir]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(f"{base}/{d}")
        except OSError:
            continue
        with it:
            for e in it:
                rel = f"{d}/{e.name}"
                try:
                    mode = e.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat_mod.S_ISDIR(mode):
                    stack.append(rel)
                else:
                    yield rel, mode


def classify(
    root: str | os.PathLike[str],
    entries: Iterable[UpperEntry],
    *,
    keep: Callable[[str], str | None],
) -> tuple[list[FileChange], list[Dropped]]:
    """Split the upper layer's entries into file changes and dropped entries.

    Args:
        root: the workspace (the lower layer).
        entries: the upper layer's entries, parents before children.
        keep: ``None`` when a change to this path may be committed, else the reason
            it may not (outside the scope, denied, governance).

    Returns:
        the changes sorted by path, and the dropped entries.
    """
    base = os.fspath(Path(root))
    entries = list(entries)
    in_upper = {e.rel for e in entries}
    changes: list[FileChange] = []
    dropped: list[Dropped] = []

    def delete(rel: str, mode: int) -> None:
        if not stat_mod.S_ISREG(mode):
            kind = "symlink" if stat_mod.S_ISLNK(mode) else "special"
            dropped.append(Dropped(rel, f"removes {_WHAT[kind]}"))
            return
        reason = keep(rel)
        if reason is not None:
            dropped.append(Dropped(rel, reason))
        else:
            changes.append(FileChange(rel, "deleted"))

    def delete_below(rel_dir: str) -> None:
        for rel, mode in _lower_files(base, rel_dir):
            if rel not in in_upper:
                delete(rel, mode)

    for e in entries:
        rel = e.rel
        low = _lstat(f"{base}/{rel}")
        if e.kind == "dir":
            if low is None:
                continue
            if not stat_mod.S_ISDIR(low.st_mode):
                delete(rel, low.st_mode)  # a file below was replaced by a directory
            elif e.opaque:
                delete_below(rel)
            continue
        if e.kind == "whiteout":
            if low is None:
                continue
            if stat_mod.S_ISDIR(low.st_mode):
                delete_below(rel)
            else:
                delete(rel, low.st_mode)
            continue
        if e.kind != "file":
            dropped.append(Dropped(rel, f"{_WHAT[e.kind]}: only regular files are committed"))
            continue
        if low is not None and not stat_mod.S_ISREG(low.st_mode):
            what = "a directory" if stat_mod.S_ISDIR(low.st_mode) else "a symlink or special file"
            dropped.append(Dropped(rel, f"a regular file in place of {what}"))
            continue
        reason = keep(rel)
        if reason is not None:
            dropped.append(Dropped(rel, reason))
            continue
        changes.append(FileChange(rel, "created" if low is None else "modified", e.mode))
    changes.sort(key=lambda c: c.path)
    dropped.sort(key=lambda d: d.path)
    return changes, dropped
