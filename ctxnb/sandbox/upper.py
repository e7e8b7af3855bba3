"""What a command changed: the upper layer of its overlay, read entry by entry.

A command runs on an overlay whose lower layer is the workspace (see
:mod:`ctxnb.sandbox.runner`); everything it wrote is in the upper directory, and
nothing else. So finding the changes costs one directory entry per *change*, not one
``lstat`` per file of the scope. The upper layer was written by the command, so it is
untrusted: it is opened from a descriptor of its root with ``O_NOFOLLOW`` at every
component, and symlinks in it are reported, never followed.

What an entry of the upper layer means (overlayfs, as bubblewrap mounts it):

* a regular file: created (nothing below) or modified (a file below, copied up);
* a whiteout, a character device 0/0: the file or directory below was deleted (also
  the old name of a rename);
* a directory with ``user.overlay.opaque = y`` (``trusted.`` when the mount is not in a
  user namespace): the directory below was removed and made again; nothing of the
  lower directory shows through it;
* anything else (a symlink, a FIFO, a socket, a device, a hard link) is reported as
  such and never committed.

Example:
    >>> import tempfile, os, pathlib
    >>> up = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (up / "a.txt").write_text("x"); os.symlink("/etc", up / "l")
    >>> [(e.rel, e.kind) for e in walk_upper(up)]
    [('a.txt', 'file'), ('l', 'symlink')]
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["UpperEntry", "walk_upper"]

EntryKind = Literal["file", "whiteout", "dir", "symlink", "special", "hardlink"]
_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class UpperEntry:
    """One entry of the upper layer.

    Attributes:
        rel: workspace-relative path.
        kind: ``file``, ``whiteout``, ``dir``, ``symlink``, ``special`` (FIFO, socket,
            device) or ``hardlink`` (a regular file with more than one link).
        opaque: a directory that hides the lower one (it was removed and made again).
        mode: the entry's ``st_mode``.
        size: its size in bytes.
    """

    rel: str
    kind: EntryKind
    opaque: bool = False
    mode: int = 0
    size: int = 0


def _is_opaque(dir_fd: int, name: str) -> bool:
    for attr in _OPAQUE:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            return False
        try:
            if os.getxattr(fd, attr) == b"y":
                return True
        except OSError:
            pass
        finally:
            os.close(fd)
    return False


def walk_upper(upper: str | os.PathLike[str]) -> list[UpperEntry]:
    """Every entry of the upper directory ``upper``, sorted by path (parents first).

    Directories are listed too (``dir``), so that an opaque one can be told apart.
    """
    root_fd = os.open(os.fspath(upper), _DIR_FLAGS)
    try:
        out = list(_walk(root_fd, ""))
    finally:
        os.close(root_fd)
    out.sort(key=lambda e: e.rel)
    return out


def _walk(dir_fd: int, prefix: str) -> Iterator[UpperEntry]:
    with os.scandir(dir_fd) as it:
        entries = list(it)
    for e in entries:
        rel = prefix + e.name
        st = e.stat(follow_symlinks=False)
        mode = st.st_mode
        if stat_mod.S_ISDIR(mode):
            yield UpperEntry(rel, "dir", _is_opaque(dir_fd, e.name), mode)
            try:
                fd = os.open(e.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue  # replaced under us: the command is over, so only by ctxnb
            try:
                yield from _walk(fd, rel + "/")
            finally:
                os.close(fd)
        elif stat_mod.S_ISREG(mode):
            kind: EntryKind = "hardlink" if st.st_nlink > 1 else "file"
            yield UpperEntry(rel, kind, mode=mode, size=st.st_size)
        elif stat_mod.S_ISCHR(mode) and st.st_rdev == 0:
            yield UpperEntry(rel, "whiteout", mode=mode)
        elif stat_mod.S_ISLNK(mode):
            yield UpperEntry(rel, "symlink", mode=mode)
        else:
            yield UpperEntry(rel, "special", mode=mode)


def read_upper(upper: str | os.PathLike[str], rel: str) -> bytes:
    """The bytes of the regular file ``rel`` of the upper layer (no link followed).

    Raises:
        OSError: it is gone or not a regular file.
    """
    parts = rel.split("/")
    fd = os.open(os.fspath(upper), _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        ffd = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
        )
    finally:
        os.close(fd)
    try:
        if not stat_mod.S_ISREG(os.fstat(ffd).st_mode):
            raise OSError(f"{rel} is not a regular file")
        chunks = []
        while True:
            b = os.read(ffd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(ffd)
