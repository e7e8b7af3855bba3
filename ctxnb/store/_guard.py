"""Evidence, outside the transaction log, that the log lost committed lines.

Private to :mod:`ctxnb.store.objectstore`. The log is the only record of what was committed; a log
cut short, emptied or replaced by an older copy would otherwise open as a smaller (or
empty) store, and the next compaction would delete the snapshot it no longer names.
Two witnesses say so instead:

- the *mark*: after every commit the writer writes the end offset of its log line into
  ``writer.lock`` (which it holds open anyway; no fsync: it is written after the log's
  fsync, so it is never ahead of a durable log, only sometimes behind it);
- the data files' names: a snapshot ``snap-<upto>-…`` or segment ``seg-<tx>-…`` is only
  ever written for a transaction the log already holds (a segment for the next one, by
  a writer that crashed before its line).

A rotated log (see ``_storerotate``) starts over at byte 0, so the mark also names the
log's generation (how many rotations it went through): a mark of an older generation
says nothing about the new log, one of a newer generation than the log proves the log
was replaced by an older copy.

A damaged mark is ignored (the log alone is then the evidence); a mark ahead of the log,
or a file ahead of it, makes the store refuse to open, naming the file. A missing
``writer.lock`` is recreated by the next writer (see :func:`lock_file`), but never taken
as evidence that the log is whole: while it is missing, a segment written for the
transaction after the log's last one (a writer killed before its line, or the line the
log lost) makes the store refuse to open, and without a mark no segment ahead of the
log is removed.
"""

from __future__ import annotations

import fcntl
import os
import zlib

from . import _log as tlog

_PREFIX = b"ctxnb-txlog-end "


def mark(end: int, gen: int = 0) -> bytes:
    """The mark for a log of generation ``gen`` whose last commit ends at byte ``end``.

    Fixed width, so that a newer mark always overwrites an older one whole.
    """
    body = b"%s%020d g%010d" % (_PREFIX, end, gen)
    return b"%s %08x\n" % (body, zlib.crc32(body))


def read_mark(path: str) -> tuple[int, int]:
    """(end offset, generation) a lock file records; (0, 0) when absent or damaged.

    A mark written before logs were rotated has no generation: it is of generation 0.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0, 0
    try:
        return read_mark_fd(fd)
    finally:
        os.close(fd)


def read_mark_fd(fd: int) -> tuple[int, int]:
    """:func:`read_mark` of a lock file already open."""
    raw = os.pread(fd, 64, 0)
    line = raw.split(b"\n", 1)[0]
    body, _, crc = line.rpartition(b" ")
    if not body.startswith(_PREFIX):
        return 0, 0
    try:
        if int(crc, 16) != zlib.crc32(body):
            return 0, 0
        end, _, gen = body[len(_PREFIX) :].partition(b" g")
        return int(end), int(gen) if gen else 0
    except ValueError:
        return 0, 0


def lock_file(path: str, fd: int | None = None) -> int:
    """``flock`` the lock file at ``path`` (created when missing) and return its descriptor.

    A lock held on a file that was removed or replaced while this process waited for it
    (or kept it open) locks nothing another process can see: a writer that opens the
    path anew would lock another inode and commit beside it. So the lock is taken again
    on the file now at ``path`` until the two are the same. ``fd``: a descriptor of the
    file opened earlier (kept open between commits); it may be closed and replaced.
    """
    while True:
        if fd is None:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            here = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            here = None
        mine = os.fstat(fd)
        if here is not None and (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
            return fd
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        fd = None


def data_files(store_dir: str) -> list[tuple[str, int, int]]:
    """(path, tx in its name, slack) of every snapshot and segment file.

    List them *before* reading the log: a legitimate file is then either covered by
    the log that is read next or it is the one segment whose line is being written.
    """
    out = []
    for sub, patterns, slack in (
        ("snapshots", (tlog.SNAP_RE, tlog.DOCS_RE, tlog.TXS_RE, tlog.ATT_RE), 0),
        ("segments", (tlog.SEG_RE,), 1),
    ):
        folder = os.path.join(store_dir, sub)
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            continue  # no file there to be ahead of the log (a write there fails on its own)
        for name in names:
            for pattern in patterns:
                m = pattern.fullmatch(name)
                if m is not None:
                    out.append((os.path.join(folder, name), int(m.group(1)), slack))
    return out


def ahead_of_log(files: list[tuple[str, int, int]], latest_tx: int) -> str | None:
    """The first of ``files`` written for a transaction the log does not hold.

    Such a file proves that the log lost lines: nothing writes one before the log
    holds the transactions it covers (but the one being committed).
    """
    for path, tx, slack in files:
        if tx > latest_tx + slack:
            return path
    return None
