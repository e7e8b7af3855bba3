"""Denied by identity: a hard link to a denied file is that file, whatever its name.

A deny glob names ``.env``; the bytes it protects live in an inode, and a hard link
(``notes.txt``, made by someone before the agent came) is the same inode under a name
no glob matches. So a denied file is denied by its identity too, ``(st_dev, st_ino)``:
every name of a denied inode is refused to the file tools
(:class:`~ctxnb.access.fdio.PathPolicy`), never stored, and masked in the sandbox.

Finding them is cheap because only an inode with more than one link can have another
name: a file whose ``st_nlink`` is 1 is never checked, and a denied file whose
``st_nlink`` is 1 never enters the set. :func:`scan_denied` walks a root by descriptors
(``O_NOFOLLOW`` at every step, names judged by the caller's deny rule) and ``lstat``\\ s
only the denied files; :func:`denied_inodes` does the same for paths already known to be
denied (the sandbox's masks). When a denied inode has links the walk did not meet among
the denied names, :func:`other_links` finds them by the inode number the directory
listing gives (``d_ino``) and confirms each one with ``lstat``; in a directory whose
listing disagrees with ``lstat`` (some FUSE filesystems number them differently), every
file is ``lstat``\\ ed instead.

git's own directories and ctxnb's (``.git``, ``.ctxnb``) are denied by name; what they
hold is not walked for identity: git's object stores are the sandbox's concern
(:mod:`ctxnb.sandbox.gitstores`), ctxnb's state is its own.

Out of scope: a *copy* of the bytes under another inode is content, not identity (the
redaction at every exit is what stands there); a directory holding a link renamed into
a denied directory while a policy keeps its answer (see :class:`DeniedInodes`).

Example:
    >>> import os, pathlib, tempfile
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / ".env").write_text("TOKEN=1\\n")
    >>> os.link(ws / ".env", ws / "notes.txt")
    >>> found = scan_denied(ws, lambda rel, is_dir: rel.rsplit("/", 1)[-1].startswith(".env"))
    >>> found.name_of(os.lstat(ws / "notes.txt")), found.name_of(os.lstat(ws / ".env"))
    ('.env', '.env')
    >>> other_links(ws, found, skip=lambda rel, is_dir: rel == ".env")
    {'notes.txt': '.env'}
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

__all__ = [
    "OWN_STATE_DIRS",
    "DeniedFile",
    "DeniedInodes",
    "denied_inodes",
    "iter_denied_files",
    "other_links",
    "scan_denied",
]

OWN_STATE_DIRS = frozenset({".git", ".ctxnb"})
"""Directory names (any case) whose content is not walked for identity."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC

Key = tuple[int, int]  # (st_dev, st_ino)
Judge = Callable[[str, bool], bool]  # (workspace-relative name, is a directory) -> denied


class DeniedInodes:
    """The denied files with more than one link, by ``(st_dev, st_ino)``.

    Attributes:
        by_key: a denied path naming each inode (the first the walk met).
        taken_ns: when the walk that found them began (``time.time_ns``).
        seen: how many of each inode's links the walk met among denied names.
        nlink: each inode's ``st_nlink`` when it was met.
    """

    __slots__ = ("by_key", "nlink", "seen", "taken_ns")

    def __init__(self, taken_ns: int | None = None) -> None:
        self.by_key: dict[Key, str] = {}
        self.seen: dict[Key, int] = {}
        self.nlink: dict[Key, int] = {}
        self.taken_ns = time.time_ns() if taken_ns is None else taken_ns

    def __len__(self) -> int:
        return len(self.by_key)

    def __repr__(self) -> str:
        return f"DeniedInodes({sorted(self.by_key.values())!r})"

    def add(self, rel: str, st: os.stat_result) -> None:
        """Count a denied name's ``lstat``."""
        if not stat_mod.S_ISREG(st.st_mode) or st.st_nlink < 2:
            return  # one link: no other name can reach these bytes
        key = (st.st_dev, st.st_ino)
        self.by_key.setdefault(key, rel)
        self.seen[key] = self.seen.get(key, 0) + 1
        self.nlink[key] = st.st_nlink

    def name_of(self, st: os.stat_result) -> str | None:
        """The denied path whose inode ``st`` (an ``lstat`` or ``fstat``) is, or None."""
        if st.st_nlink < 2:
            return None
        return self.by_key.get((st.st_dev, st.st_ino))

    def links_elsewhere(self) -> bool:
        """Whether a denied inode has links that no denied name accounts for."""
        return any(self.seen[k] < self.nlink[k] for k in self.by_key)


def _own_state(name: str) -> bool:
    return name.lower() in OWN_STATE_DIRS


def _scandir(fd: int) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as it:
            return list(it)
    except OSError:
        return []  # removed or unreadable since it was opened


def _subdir(fd: int, name: str) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        return None  # a link now (O_NOFOLLOW), or gone


def _lstat(entry: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


class DeniedFile(NamedTuple):
    """A regular file met among the denied paths: valid while the iteration stands here.

    Attributes:
        rel: its workspace-relative path.
        stat: its ``lstat``.
        dir_fd: an open descriptor of its directory (closed when the iteration moves on).
        name: its name in that directory.
    """

    rel: str
    stat: os.stat_result
    dir_fd: int
    name: str

    def read(self, limit: int) -> bytes | None:
        """Its bytes (opened ``O_NOFOLLOW`` in its directory), None when it is not the
        file met any more or holds more than ``limit`` bytes."""
        try:
            fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC,
                         dir_fd=self.dir_fd)  # fmt: skip
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (self.stat.st_dev, self.stat.st_ino):
                return None
            data = os.read(fd, limit + 1)
            return data if len(data) <= limit else None
        except OSError:
            return None
        finally:
            os.close(fd)


def _files_under(fd: int, base: str) -> Iterator[DeniedFile]:
    """Every regular file below the open directory ``fd`` (not git's or ctxnb's state)."""
    for e in _scandir(fd):
        rel = f"{base}/{e.name}"
        try:
            if e.is_dir(follow_symlinks=False):
                if _own_state(e.name):
                    continue
                sub = _subdir(fd, e.name)
                if sub is not None:
                    try:
                        yield from _files_under(sub, rel)
                    finally:
                        os.close(sub)
            elif e.is_file(follow_symlinks=False):
                st = _lstat(e)
                if st is not None:
                    yield DeniedFile(rel, st, fd, e.name)
        except OSError:
            continue


def _all_under(fd: int, base: str, found: DeniedInodes) -> None:
    """Count every regular file below the open directory ``fd`` (all of it denied)."""
    for f in _files_under(fd, base):
        found.add(f.rel, f.stat)


def _judged_walk(fd: int, base: str, denied: Judge, found: DeniedInodes) -> None:
    for e in _scandir(fd):
        rel = f"{base}/{e.name}" if base else e.name
        try:
            if e.is_dir(follow_symlinks=False):
                inside = not denied(rel, True)
                if not inside and _own_state(e.name):
                    continue
                sub = _subdir(fd, e.name)
                if sub is None:
                    continue
                try:
                    if inside:
                        _judged_walk(sub, rel, denied, found)
                    else:
                        _all_under(sub, rel, found)
                finally:
                    os.close(sub)
            elif e.is_file(follow_symlinks=False) and denied(rel, False):
                st = _lstat(e)
                if st is not None:
                    found.add(rel, st)
        except OSError:
            continue


def _open_root(root: str | os.PathLike[str]) -> int:
    return os.open(os.fspath(root), _DIR_FLAGS)


def scan_denied(
    root: str | os.PathLike[str], denied: Judge, *, root_fd: int | None = None
) -> DeniedInodes:
    """Walk ``root`` and collect the denied files that have other links.

    Args:
        root: the directory to walk (symbolic links below it are never followed).
        denied: ``denied(rel, is_dir)`` for a name whose parent directory is not
            denied; everything below a denied directory is denied without asking.
        root_fd: an open descriptor of ``root`` to walk from instead (not closed).
    """
    found = DeniedInodes()
    fd = _open_root(root) if root_fd is None else root_fd
    try:
        _judged_walk(fd, "", denied, found)
    finally:
        if root_fd is None:
            os.close(fd)
    return found


def _walk_to(fd: int, parts: list[str]) -> int | None:
    """Open the directory ``parts`` below ``fd`` one component at a time, or None."""
    cur = os.dup(fd)
    for name in parts:
        nxt = _subdir(cur, name)
        os.close(cur)
        if nxt is None:
            return None
        cur = nxt
    return cur


def iter_denied_files(
    root: str | os.PathLike[str], files: Iterable[str], dirs: Iterable[str]
) -> Iterator[DeniedFile]:
    """The regular files among ``files`` and below ``dirs`` (workspace-relative paths
    already known to be denied), each reached by descriptors without following a link;
    git's and ctxnb's directories are not entered."""
    fd = _open_root(root)
    try:
        for rel in files:
            head, _, name = rel.rpartition("/")
            parent = _walk_to(fd, head.split("/") if head else [])
            if parent is None:
                continue
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat_mod.S_ISREG(st.st_mode):
                    yield DeniedFile(rel, st, parent, name)
            except OSError:
                continue
            finally:
                os.close(parent)
        for rel in dirs:
            if _own_state(rel.rsplit("/", 1)[-1]):
                continue
            sub = _walk_to(fd, rel.split("/"))
            if sub is None:
                continue
            try:
                yield from _files_under(sub, rel)
            finally:
                os.close(sub)
    finally:
        os.close(fd)


def denied_inodes(
    root: str | os.PathLike[str], files: Iterable[str], dirs: Iterable[str]
) -> DeniedInodes:
    """:func:`scan_denied` for paths already known to be denied: ``lstat`` each of
    ``files`` and every regular file below ``dirs`` (workspace-relative).

    Example:
        >>> import os, pathlib, tempfile
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> (ws / "secrets").mkdir(); _ = (ws / "secrets" / "k").write_text("x")
        >>> os.link(ws / "secrets" / "k", ws / "copy")
        >>> found = denied_inodes(ws, [], ["secrets"])
        >>> found, found.links_elsewhere()
        (DeniedInodes(['secrets/k']), True)
    """
    found = DeniedInodes()
    for f in iter_denied_files(root, files, dirs):
        found.add(f.rel, f.stat)
    return found


def other_links(
    root: str | os.PathLike[str], found: DeniedInodes, *, skip: Judge
) -> dict[str, str]:
    """The names outside the denied ones that are links of a denied inode.

    Walks ``root`` (by descriptors, links never followed), leaving out what ``skip``
    names (the denied paths themselves) and git's and ctxnb's directories. A file is
    ``lstat``\\ ed only when its listing's inode number is one of the denied ones; in a
    directory where the listing's number of its first file is not its ``lstat``'s,
    every file is.

    Returns:
        ``{rel: the denied path of the same inode}``.
    """
    if not found.by_key:
        return {}
    inos = {ino for _, ino in found.by_key}
    out: dict[str, str] = {}

    def walk(fd: int, base: str) -> None:
        trust: bool | None = None  # does this directory's listing number files as lstat?
        for e in _scandir(fd):
            rel = f"{base}/{e.name}" if base else e.name
            try:
                if trust is None and e.is_file(follow_symlinks=False):
                    first = _lstat(e)
                    trust = first is not None and first.st_ino == e.inode()
                if e.is_dir(follow_symlinks=False):
                    if _own_state(e.name) or skip(rel, True):
                        continue
                    sub = _subdir(fd, e.name)
                    if sub is not None:
                        try:
                            walk(sub, rel)
                        finally:
                            os.close(sub)
                elif e.is_file(follow_symlinks=False) and (not trust or e.inode() in inos):
                    if skip(rel, False):
                        continue
                    st = _lstat(e)
                    hit = found.name_of(st) if st is not None else None
                    if hit is not None:
                        out[rel] = hit
            except OSError:
                continue

    fd = _open_root(root)
    try:
        walk(fd, "")
    finally:
        os.close(fd)
    return out
