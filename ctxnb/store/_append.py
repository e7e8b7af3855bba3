"""Commit one small transaction to a store without opening it (standard library only).

Private to :mod:`ctxnb.access.observe`. A short-lived process that writes one version
and exits (the Claude Code post hook, after every edit) would spend most of its life
importing pyarrow to open the store. This writes the same sealed ``txdocs`` line under
the same writer lock, with the same guard mark, that :meth:`ObjectStore.put
<ctxnb.store.objectstore.ObjectStore.put>` writes for a small transaction, so every reader, in this
process or another, applies it as its own.

It commits nothing and returns None whenever the store needs what only
:class:`~ctxnb.store.objectstore.ObjectStore` does: no store yet, a marker of another format or
version, documents too large to go inline, a log whose last transaction it cannot
read, a log shorter than its guard mark (damage, which ObjectStore reports), or no
``writer.lock`` beside a log that has lines (see :mod:`ctxnb.store._guard`). The
caller then opens the store.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import _guard as guard
from . import _log as tlog

__all__ = ["InlineCommit", "append_inline"]

# The head of a transaction line: ``{"op":"tx"`` or ``{"op":"txdocs"``, sealed, then
# its id and time (tx_line and txdocs_line write these keys first); a rotated log's base
# line starts the same way, with the last transaction it archived.
_TX_HEAD = re.compile(rb'\{"op":"(?:tx|txdocs|base)","crc":"[0-9a-f]{8}","tx":(\d+),"t":(\d+)[,}]')
_GEN = re.compile(rb'\{"op":"base","crc":"[0-9a-f]{8}","tx":\d+,"t":\d+,"gen":(\d+)[,}]')
_TX_START = b'\n{"op":"tx'
_BASE = b'{"op":"base"'
_FOLD_START = b'\n{"op":"fold"'
_TXDOCS_START = b'\n{"op":"txdocs"'
_COMPACT_START = b'\n{"op":"compact"'
_CHUNK = 64 * 1024
# How far back the counts of transactions waiting for a fold or a compaction look (a
# fold every FOLD_EVERY_TX inline transactions of at most INLINE_MAX_BYTES each).
_MAX_SCAN = tlog.FOLD_EVERY_TX * (tlog.INLINE_MAX_BYTES + 4096)


class InlineCommit:
    """A committed inline transaction: its id; how many inline transactions wait for a
    fold into Parquet, and how many transactions for a compaction (this one included;
    each at least that many when the log's tail did not reach the last fold or
    compaction)."""

    __slots__ = ("oldest_unfolded_us", "tx_id", "uncompacted", "unfolded")

    def __init__(
        self, tx_id: int, unfolded: int, uncompacted: int, oldest_unfolded_us: int | None = None
    ) -> None:
        self.tx_id = tx_id
        self.unfolded = unfolded
        self.uncompacted = uncompacted
        # When the oldest inline transaction that waits for a fold was committed (µs
        # since 1970), or None: the caller folds once it is older than the interval.
        self.oldest_unfolded_us = oldest_unfolded_us

    def __repr__(self) -> str:
        return (
            f"InlineCommit(tx_id={self.tx_id}, unfolded={self.unfolded}, "
            f"uncompacted={self.uncompacted})"
        )


def append_inline(
    store_dir: str | os.PathLike[str],
    docs: Sequence[dict[str, Any]],
    *,
    clock: Callable[[], float] = time.time,
    max_bytes: int = tlog.INLINE_MAX_BYTES,
) -> InlineCommit | None:
    """Commit ``docs`` as one inline transaction, or return None (nothing written).

    ``docs`` must be valid store documents (a string ``xt/id`` and ``type``,
    JSON-shaped values, valid Unicode); the caller builds them.
    """
    d = os.fspath(store_dir)
    if not docs or not _current_format(os.path.join(d, tlog.MARKER)):
        return None
    blobs = [tlog.dumps(doc).encode("utf-8") for doc in docs]
    if sum(map(len, blobs)) > max_bytes:
        return None
    lock_path = os.path.join(d, tlog.WRITER_LOCK)
    if not os.path.exists(lock_path) and _size(os.path.join(d, tlog.TXLOG)):
        # Its mark is the evidence that the log is whole: without it, ObjectStore
        # decides (and refuses when a segment may hold a transaction the log lost).
        return None
    try:
        lock_fd = guard.lock_file(lock_path)
    except OSError:
        return None
    try:
        return _append_locked(d, lock_fd, blobs, clock)
    finally:
        os.close(lock_fd)  # releases the lock


def _append_locked(
    d: str, lock_fd: int, blobs: list[bytes], clock: Callable[[], float]
) -> InlineCommit | None:
    log_path = os.path.join(d, tlog.TXLOG)
    try:
        fd = os.open(log_path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        committed, committed_gen = guard.read_mark(os.path.join(d, tlog.WRITER_LOCK))
        end = _last_line_end(fd, size)
        gen = _generation(fd, end)
        if gen is None or committed_gen > gen or (committed_gen == gen and end < committed):
            return None  # the log lost committed lines: ObjectStore says so
        last = _last_tx(fd, end)
        if last is None:
            return None
        tx_id, last_us = last[0] + 1, last[1]
        now_us = max(int(clock() * 1_000_000), last_us)  # tx times never go backwards
        line = tlog.txdocs_line(tx_id, now_us, blobs)
        if size > end:
            # A line a crashed writer never finished: never acknowledged, so dropped.
            os.ftruncate(fd, end)
        os.lseek(fd, end, os.SEEK_SET)
        try:
            tlog.append(fd, line)
        except BaseException:
            os.ftruncate(fd, end)
            raise
        # After the log's fsync, so never ahead of a durable log (see _storeguard).
        os.pwrite(lock_fd, guard.mark(end + len(line), gen), 0)
        return InlineCommit(tx_id, *_waiting(fd, end + len(line)))
    finally:
        os.close(fd)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _current_format(marker: str) -> bool:
    """Whether the store is of the format this module writes (older ones are upgraded,
    and newer ones refused, by ObjectStore)."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        info = json.loads(os.read(fd, 4096))
    except ValueError:
        return False
    finally:
        os.close(fd)
    # A format-3 log takes the same lines (rotation, format 4, only adds a first line;
    # format 5 only an archive that the base line names).
    version = info.get("version") if isinstance(info, dict) else None
    return (
        isinstance(info, dict)
        and info.get("format") == tlog.FORMAT_NAME
        and type(version) is int
        and tlog.FOLD_FORMAT_VERSION <= version <= tlog.FORMAT_VERSION
    )


def _generation(fd: int, end: int) -> int | None:
    """The log's generation: its base line's, 0 for a log never rotated (None: a base
    line this module cannot read, which ObjectStore reports)."""
    head = os.pread(fd, min(end, 160), 0)
    if not head.startswith(_BASE):
        return 0
    m = _GEN.match(head)
    return int(m.group(1)) if m is not None else None


def _last_line_end(fd: int, size: int) -> int:
    """The offset just after the log's last newline (0 when it has none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - _CHUNK)
        chunk = os.pread(fd, pos - start, start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        pos = start
    return 0


def _last_tx(fd: int, end: int) -> tuple[int, int] | None:
    """(id, time in µs) of the last transaction before ``end``; (0, 0) for an empty log;
    None when its line cannot be read (an older, unsealed log: ObjectStore reads it)."""
    if end == 0:
        return (0, 0)
    pos, tail = end, b""
    while pos > 0:
        start = max(0, pos - _CHUNK)
        tail = os.pread(fd, pos - start, start) + tail
        pos = start
        at = tail.rfind(_TX_START)
        if at < 0 and pos == 0 and tail.startswith((_TX_START[1:], _BASE)):
            at = -1  # the first line
        elif at < 0:
            continue
        head = tail[at + 1 : at + 1 + 160]
        m = _TX_HEAD.match(head)
        return (int(m.group(1)), int(m.group(2))) if m is not None else None
    return None


def _waiting(fd: int, end: int) -> tuple[int, int, int | None]:
    """(inline transactions after the last fold or compaction, transactions after the
    last compaction, the time of the first of those inline ones), counted in the log's
    last ``_MAX_SCAN`` bytes."""
    start = max(0, end - _MAX_SCAN)
    data = b"\n" + os.pread(fd, end - start, start)
    compacted = max(data.rfind(_COMPACT_START), data.rfind(b"\n" + _BASE))
    folded = max(data.rfind(_FOLD_START), compacted)
    unfolded = data.count(_TXDOCS_START, max(folded, 0))
    oldest = None
    first = data.find(_TXDOCS_START, max(folded, 0))
    if first >= 0:
        m = _TX_HEAD.match(data, first + 1)
        oldest = int(m.group(2)) if m is not None else None
    return unfolded, data.count(_TX_START, max(compacted, 0)), oldest
