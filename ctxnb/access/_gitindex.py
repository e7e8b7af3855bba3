"""The paths git tracks, read from a repository's index file as data.

git never ignores a tracked file: ``git status`` and ``git check-ignore`` judge only
untracked paths against the ignore patterns. :func:`tracked_paths` reads the index
(``$GIT_DIR/index``, format versions 2 to 4, as ``read-cache.c`` writes it) and returns
its paths; nothing is run and the file's checksum is not verified. An index this
reader cannot follow (a split index, an unknown version, a truncated file) gives None,
and the caller judges every path by the patterns alone.

Example:
    >>> import os, subprocess, tempfile
    >>> top = tempfile.mkdtemp()
    >>> _ = subprocess.run(["git", "init", "-q", top], check=True)
    >>> with open(os.path.join(top, "kept.log"), "w") as f:
    ...     _ = f.write("x\\n")
    >>> _ = subprocess.run(["git", "-C", top, "add", "kept.log"], check=True)
    >>> with open(os.path.join(top, ".git", "index"), "rb") as f:
    ...     sorted(tracked_paths(f.read()))
    ['kept.log']
"""

from __future__ import annotations

import struct

__all__ = ["tracked_paths"]

_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF


def tracked_paths(data: bytes, *, hash_size: int = 20) -> set[str] | None:
    """The paths of an index file's entries (every stage), or None when unreadable.

    Args:
        data: the index file's bytes.
        hash_size: 20 for SHA-1 repositories, 32 for SHA-256 ones.
    """
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        return None
    paths: set[str] = set()
    pos = 12
    previous = b""
    flags_at = 40 + hash_size  # ctime, mtime, dev, ino, mode, uid, gid, size; the hash
    try:
        for _ in range(count):
            start = pos
            (flags,) = struct.unpack(">H", data[pos + flags_at : pos + flags_at + 2])
            pos += flags_at + 2
            if version >= 3 and flags & _EXTENDED:
                pos += 2
            if version == 4:
                strip, pos = _varint(data, pos)
                end = data.index(b"\0", pos)
                if strip > len(previous):
                    return None
                name = previous[: len(previous) - strip] + data[pos:end]
                pos = end + 1
            else:
                length = flags & _NAME_MASK
                end = data.index(b"\0", pos) if length == _NAME_MASK else pos + length
                name = data[pos:end]
                # Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
                pos = start + ((end - start + 8) & ~7)
            if pos > len(data):
                return None
            previous = name
            if not name.endswith(b"/"):  # a sparse index's directory entry
                paths.add(name.decode("utf-8", "surrogateescape"))
    except (struct.error, ValueError):
        return None
    if _has_split_index(data, pos, hash_size):
        return None  # the shared index holds the rest of the entries
    return paths


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (``varint.c``): returns (value, next position)."""
    c = data[pos]
    pos += 1
    value = c & 0x7F
    while c & 0x80:
        value += 1
        c = data[pos]
        pos += 1
        value = (value << 7) + (c & 0x7F)
    return value, pos


def _has_split_index(data: bytes, pos: int, hash_size: int) -> bool:
    end = len(data) - hash_size  # the trailing checksum
    while pos + 8 <= end:
        sig = data[pos : pos + 4]
        (size,) = struct.unpack(">I", data[pos + 4 : pos + 8])
        if sig == b"link":
            return True
        pos += 8 + size
    return False
