"""What a compaction does after its line: rotate the log, remove what is not live.

Private to :mod:`ctxnb.store.objectstore`; each function works on the store's
:class:`~ctxnb.store._open.StoreState`. Without rotation the log keeps a line for every
transaction ever committed, and opening a store reads them all. After a compaction's
line is durable, the log is replaced (one atomic rename) by a new one whose first line,
the *base*, names the new snapshot and an archive of the transactions it covers
(``snapshots/txs-<upto>-<hex>.arrow``: their ids, times and counts), followed by the
lines of the transactions committed while the compaction ran, copied byte for byte.
The attachments of the lines it drops move to the archive of attachments
(``snapshots/att-<upto>-<hex>.jsonl``, see :mod:`ctxnb.store._attach`), which the base
line names too: a trace record's copy outlives the rotation.

Crash safety: until the rename the old log is the truth (and the archive an
unreferenced file that the next compaction removes); after it, the new one. The guard
mark in ``writer.lock`` names the log's generation, so a mark of the old log is not
read against the new one, and a log swapped back for the old one is refused.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets

from ..errors import CorruptStoreError
from . import _fmt as fmt
from . import _guard as guard
from . import _log as tlog
from ._attach import archive_lines, parse_lines, read_archive, settle
from ._open import SEGMENTS, SNAPSHOTS, StoreState, _unlink
from ._txs import write_archive

log = logging.getLogger("ctxnb.store.objectstore")


def rotate(state: StoreState, entry: tlog.CompactEntry, start: int, end: int) -> bool:
    """Replace the log after ``entry``'s line is durable (needs both locks).

    The log's bytes ``start:end`` hold the lines of the transactions (and folds)
    committed after ``entry.upto`` and before ``entry``'s line; the new log keeps them.
    Returns whether the log was rotated: a failure (a full disk, say) leaves the old
    log, which is complete, for the next compaction to rotate. So does a log whose
    dropped lines carry attachments (trace records) that cannot be made durable in
    their ledger first (see :mod:`ctxnb.store._attach`): rotation never loses one.
    """
    kept = settle(state.dir, start)
    if kept is None:
        return False
    try:
        with open(state.log_path, "rb") as f:
            dropped = f.read(start)
            carried = f.read(end - start)
        _rotate(state, entry, carried, _attachments(state, entry, dropped, kept))
    except (OSError, CorruptStoreError) as exc:
        # A damaged archive of attachments is not made worse: the log, which still
        # holds the dropped lines' attachments, is kept; ``store verify`` names it.
        log.warning("could not rotate %s (%s); the next compaction will", state.log_path, exc)
        state.refresh(force=True)  # whichever log is in place now
        return False
    return True


def _attachments(
    state: StoreState, entry: tlog.CompactEntry, dropped: bytes, kept: list[bytes]
) -> tuple[str, int, str] | None:
    """Write the archive of attachments the new base line names: the previous one's
    lines (checked), the dropped lines', and ``kept`` (the settler's) in a line of its
    own. Returns its name, size and SHA-256; None when there is nothing to keep."""
    base = state.base
    old = b""
    if base is not None and base.att is not None and base.att_sha is not None:
        old = read_archive(state.dir, base.att, base.att_size, base.att_sha)
    new = archive_lines(parse_lines(dropped))
    if kept:
        # The settler's own line: the last transaction it settled, no documents.
        body = b'"tx":%d,"ids":[]' % entry.upto + tlog.ATTACHED_KEY + b",".join(kept) + b"]}"
        new += tlog._sealed("att", body)
    if not old and not new:
        return None
    data = old + new
    name = f"att-{entry.upto:012d}-{secrets.token_hex(4)}.jsonl"
    final = os.path.join(state.dir, SNAPSHOTS, name)
    with fmt.publishing(state.tmp_name(SNAPSHOTS, name), final) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return f"{SNAPSHOTS}/{name}", len(data), hashlib.sha256(data).hexdigest()


def _rotate(
    state: StoreState,
    entry: tlog.CompactEntry,
    carried: bytes,
    att: tuple[str, int, str] | None,
) -> None:
    if state.marker_version < (tlog.ATT_FORMAT_VERSION if att else tlog.ROTATE_FORMAT_VERSION):
        state.upgrade_marker()
    times, counts = state.txs.columns(entry.upto)
    name = f"txs-{entry.upto:012d}-{secrets.token_hex(4)}.arrow"
    final = os.path.join(state.dir, SNAPSHOTS, name)
    with fmt.publishing(state.tmp_name(SNAPSHOTS, name), final) as tmp:
        crc = write_archive(tmp, times, counts)
    fmt.fsync_dir(os.path.join(state.dir, SNAPSHOTS))
    base = tlog.BaseEntry(
        gen=state.gen + 1,
        upto=entry.upto,
        last_us=times[-1],
        last_count=counts[-1],
        txs=f"{SNAPSHOTS}/{name}",
        txs_size=os.path.getsize(final),
        txs_crc=crc,
        compact=entry,
        att=att[0] if att else None,
        att_size=att[1] if att else 0,
        att_sha=att[2] if att else None,
    )
    log_tmp = os.path.join(state.dir, f"{tlog.TMP_PREFIX}{secrets.token_hex(4)}-{tlog.TXLOG}")
    fd = os.open(log_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        try:
            tlog.append(fd, tlog.base_line(base) + carried)  # one write, fsynced
        finally:
            os.close(fd)
        os.replace(log_tmp, state.log_path)
    except BaseException:
        if os.path.exists(log_tmp):
            os.unlink(log_tmp)
        raise
    fmt.fsync_dir(state.dir)  # the commit point of the rotation
    state.refresh(force=True)  # another inode: read from the base line on
    if state.writer_fd is not None:
        os.pwrite(state.writer_fd, guard.mark(state.log_offset, state.gen), 0)


def remove_unlogged_segments(state: StoreState) -> None:
    """Remove segment files the log does not reference (needs the writer lock).

    Only those whose transactions the log accounts for: a segment of a transaction the
    log holds (the log's line for it is the truth: the file is a failed or killed
    commit's, or one a compaction replaced), or of the one after its last when the
    mark in ``writer.lock`` proves the log whole (a killed writer's). Without a mark
    (the lock file was missing and has just been recreated) such a file is kept.
    """
    live = {os.path.basename(e.file) for e in state.segments.values() if e.file}
    live |= {os.path.basename(f) for f in state.folds}
    folder = os.path.join(state.dir, SEGMENTS)
    end, gen = guard.read_mark(os.path.join(state.dir, tlog.WRITER_LOCK))
    witnessed = end > 0 and gen == state.gen
    removed = 0
    for name in os.listdir(folder):
        if name in live:
            continue
        m = tlog.SEG_RE.fullmatch(name)
        if m is not None and int(m.group(1)) > len(state.txs) and not witnessed:
            log.warning(
                "keeping %s: it holds a transaction the log does not name, and no mark in "
                "%s says whether the log lost it",
                os.path.join(folder, name),
                tlog.WRITER_LOCK,
            )
            continue
        _unlink(os.path.join(folder, name))
        removed += 1
    if removed:
        fmt.fsync_dir(folder)


def remove_old_snapshots(state: StoreState) -> None:
    """Remove snapshot files and archives no longer current (needs the compaction lock).

    Never one that the log cannot account for: that one holds data the log lost.
    """
    files = [f for f in guard.data_files(state.dir) if f[2] == 0]
    state.refresh()
    state.refuse_files_ahead(files)
    snap = state.snap
    live = {os.path.basename(snap.entry.file), os.path.basename(snap.entry.docs)} if snap else set()
    if state.archive is not None:
        live.add(os.path.basename(state.archive))
    if state.base is not None and state.base.att is not None:
        live.add(os.path.basename(state.base.att))
    folder = os.path.join(state.dir, SNAPSHOTS)
    for name in os.listdir(folder):
        if name not in live:
            _unlink(os.path.join(folder, name))
    fmt.fsync_dir(folder)
