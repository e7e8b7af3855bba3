"""What a store's log says about its tip, read without opening the store (standard library).

Private to the store's callers that can answer "has anything been committed since?" from
the log alone (the indexer of an unchanged tree, a resume that finds nothing to do):
opening an :class:`~ctxnb.store.objectstore.ObjectStore` imports pyarrow and reads every
segment, which a fresh ``ctxnb index`` process would otherwise pay for nothing.

:func:`read_tip` reads the log's last sealed transaction line and counts, in its tail,
the transactions that wait for a fold into Parquet and for a compaction, by the same
rules :mod:`ctxnb.store._append` uses to commit without opening. It answers None
whenever only ``ObjectStore`` can: no store yet, a marker of another format or version,
a log shorter than its guard mark (damage, which ``ObjectStore`` reports), no
``writer.lock`` beside a log that has lines, a last line it cannot read. A count it
could not see whole (the tail it reads did not reach the last fold or compaction) is
None too: the caller then opens the store and asks it.
"""

from __future__ import annotations

import os

from . import _guard as guard
from . import _log as tlog
from ._append import _current_format, _generation, _last_line_end, _last_tx

__all__ = ["LogTip", "read_tip"]

_TX_START = b'\n{"op":"tx'
_BASE = b'\n{"op":"base"'
_FOLD_START = b'\n{"op":"fold"'
_TXDOCS_START = b'\n{"op":"txdocs"'
_COMPACT_START = b'\n{"op":"compact"'
# The tail read for the counts: the same window the inline committer scans.
_MAX_SCAN = tlog.FOLD_EVERY_TX * (tlog.INLINE_MAX_BYTES + 4096)


class LogTip:
    """The last committed transaction of a store and what waits behind it.

    Attributes:
        tx_id: the last committed transaction's id; 0 for an empty store.
        unfolded: inline transactions not yet in a Parquet file (None: not seen whole).
        uncompacted: transactions after the last compaction, as
            :meth:`~ctxnb.store.objectstore.ObjectStore.pending_segments` counts them
            (None: not seen whole).
        tx_time: the last transaction's time in µs since the epoch (0 for an empty
            store): with its id, it tells a store made again apart from the old one.
    """

    __slots__ = ("tx_id", "tx_time", "uncompacted", "unfolded")

    def __init__(
        self, tx_id: int, unfolded: int | None, uncompacted: int | None, tx_time: int = 0
    ) -> None:
        self.tx_id = tx_id
        self.unfolded = unfolded
        self.uncompacted = uncompacted
        self.tx_time = tx_time

    def __repr__(self) -> str:
        return (
            f"LogTip(tx_id={self.tx_id}, unfolded={self.unfolded}, uncompacted={self.uncompacted})"
        )


def read_tip(store_dir: str | os.PathLike[str]) -> LogTip | None:
    """The tip of the store in ``store_dir`` from its log, or None (open the store).

    Example:
        >>> import tempfile
        >>> from ctxnb.store import ObjectStore
        >>> d = tempfile.mkdtemp()
        >>> read_tip(d) is None  # no store there yet
        True
        >>> with ObjectStore(d, fold_after=None) as store:
        ...     _ = store.put([{"xt/id": "a", "type": "note"}])
        ...     read_tip(d)
        LogTip(tx_id=1, unfolded=1, uncompacted=1)
    """
    d = os.fspath(store_dir)
    if not _current_format(os.path.join(d, tlog.MARKER)):
        return None
    log_path = os.path.join(d, tlog.TXLOG)
    try:
        fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        lock_path = os.path.join(d, tlog.WRITER_LOCK)
        if size and not os.path.exists(lock_path):
            return None  # without its mark the log is not known whole: ObjectStore decides
        committed, committed_gen = guard.read_mark(lock_path)
        # A line past the last newline is one a crashed writer never finished: it was
        # never acknowledged, so it is not part of the tip.
        end = _last_line_end(fd, size)
        gen = _generation(fd, end)
        if gen is None or committed_gen > gen or (committed_gen == gen and end < committed):
            return None  # the log lost committed lines: ObjectStore says so
        last = _last_tx(fd, end)
        if last is None:
            return None
        start = max(0, end - _MAX_SCAN)
        data = b"\n" + os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    whole = start == 0
    compacted = max(data.rfind(_COMPACT_START), data.rfind(_BASE))
    folded = max(data.rfind(_FOLD_START), compacted)
    uncompacted = data.count(_TX_START, max(compacted, 0)) if whole or compacted >= 0 else None
    unfolded = data.count(_TXDOCS_START, max(folded, 0)) if whole or folded >= 0 else None
    return LogTip(last[0], unfolded, uncompacted, last[1])
