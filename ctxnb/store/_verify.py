"""``ObjectStore.verify()``: every live file of a store read whole and checked.

Private to :mod:`ctxnb.store.objectstore`. Opening a store checks each file cheaply: the
size of every file the log names, the SHA-256 of every segment (small, and a
transaction segment is read anyway), and the footer's SHA-256 of the snapshot, which
can be large. A bit flipped inside one of the snapshot's data pages passes those
checks (Parquet's page checksums catch it when the page is read). ``verify`` reads
every file the log names, whole: segments, folds and the snapshot against the SHA-256
their log lines recorded (files written before digests were recorded are read through
Parquet's page checksums instead), the doc cache frame by frame, the archive of
transactions against its CRC-32, and the archive of attachments (rotated trace
records' copies) against its SHA-256. ``ctxnb store verify`` is the command line's door.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import _fmt as fmt
from ._open import StoreState, check_file


@dataclass(frozen=True)
class VerifyReport:
    """What :meth:`ObjectStore.verify <ctxnb.store.objectstore.ObjectStore.verify>` checked.

    Attributes:
        files: every file read whole, relative to the store directory.
        bytes: their total size.
        by_page_checksums: those with no SHA-256 in the log (written by an older ctxnb),
            checked by reading every Parquet page with its checksum instead.
    """

    files: list[str] = field(default_factory=list)
    bytes: int = 0
    by_page_checksums: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        older = (
            f" ({len(self.by_page_checksums)} without a recorded SHA-256, checked by their "
            "Parquet page checksums)"
            if self.by_page_checksums
            else ""
        )
        return f"{len(self.files)} files, {self.bytes} bytes: every one as committed{older}"


def verify_state(st: StoreState) -> VerifyReport:
    """Read every file ``st``'s log names and check it (see the module).

    Raises:
        CorruptStoreError: a file is damaged, naming it; nothing is changed.
    """
    report = VerifyReport()
    named: list[tuple[str, int, str | None, str]] = []
    snap = st.snap
    if snap is not None:
        named.append((snap.entry.file, snap.entry.size, snap.entry.sha, "snapshot"))
    named += [(e.file, e.size, e.sha, "segment") for e in st.segments.values() if e.file]
    named += [(f, e.size, e.sha, "fold segment") for f, e in st.folds.items()]
    base = st.base
    if base is not None and base.att is not None:
        named.append((base.att, base.att_size, base.att_sha, "archive of attachments"))
    for rel, size, sha, what in sorted(named):
        path = st.abs_path(rel)
        check_file(path, size, sha, what)
        if sha is None and what != "archive of attachments":
            # Every page read with its checksum verified (fmt's reader asks for that).
            fmt.read_parquet(path)
            report.by_page_checksums.append(rel)
        report.files.append(rel)
        object.__setattr__(report, "bytes", report.bytes + size)
    if snap is not None:
        # The doc cache: its every zstd frame carries a checksum; reading them all
        # checks them (the cache is derived, rebuilt from the snapshot when damaged).
        for row in range(snap.entry.rows):
            snap.docs.raw(row)
        report.files.append(snap.entry.docs)
        object.__setattr__(report, "bytes", report.bytes + snap.entry.docs_size)
    if st.archive is not None:
        st.txs.record(1)  # loads the archive, checking its size and CRC-32
        report.files.append(st.archive)
        size = os.path.getsize(st.abs_path(st.archive))
        object.__setattr__(report, "bytes", report.bytes + size)
    return report
