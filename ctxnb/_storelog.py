"""The store's transaction log: parsing, validating and appending ``txlog`` lines.

Private to :mod:`ctxnb.store`. One JSON object per line; a line counts once its
trailing newline is in the file. Appending one line and fsyncing it is the commit
point of every transaction and every compaction.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import CorruptStoreError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)

SEG_RE = re.compile(r"seg-(\d{12})-([0-9a-f]{8})\.parquet")
SNAP_RE = re.compile(r"snap-(\d{12})-([0-9a-f]{8})\.parquet")
DOCS_RE = re.compile(r"snap-(\d{12})-([0-9a-f]{8})\.docs\.arrow")
TMP_PREFIX = ".tmp-"


def to_us(dt: datetime) -> int:
    return (dt - EPOCH) // _US


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


@dataclass(frozen=True)
class TxEntry:
    """A committed transaction as the log records it."""

    tx: int
    time_us: int
    count: int
    file: str | None  # relative to the store directory; None for an empty transaction
    size: int


@dataclass(frozen=True)
class CompactEntry:
    """A committed compaction: ``file`` and ``docs`` replace everything up to ``upto``."""

    upto: int
    file: str
    size: int
    docs: str
    docs_size: int
    rows: int
    replaces: tuple[str, ...]


Entry = TxEntry | CompactEntry


def tx_line(e: TxEntry) -> bytes:
    obj = {"op": "tx", "tx": e.tx, "t": e.time_us, "n": e.count, "file": e.file, "size": e.size}
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def compact_line(e: CompactEntry) -> bytes:
    obj = {
        "op": "compact",
        "upto": e.upto,
        "file": e.file,
        "size": e.size,
        "docs": e.docs,
        "docs_size": e.docs_size,
        "rows": e.rows,
        "replaces": list(e.replaces),
    }
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def parse(data: bytes, *, log_path: str, first_line: int, next_tx: int) -> list[Entry]:
    """Parse complete lines (``data`` ends at a newline). Tx ids must run on densely."""
    out: list[Entry] = []
    lineno = first_line
    for raw in data.split(b"\n")[:-1]:
        lineno += 1
        try:
            obj = json.loads(raw)
            entry = _entry(obj)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptStoreError(
                f"{log_path} line {lineno} is not a valid log entry ({exc}): {raw[:120]!r}. "
                "The transaction log is damaged; restore the store directory from a backup",
                path=log_path,
            ) from exc
        if isinstance(entry, TxEntry):
            if entry.tx != next_tx:
                raise CorruptStoreError(
                    f"{log_path} line {lineno}: transaction {entry.tx} follows "
                    f"{next_tx - 1}; the transaction log is damaged",
                    path=log_path,
                )
            next_tx += 1
        elif entry.upto >= next_tx:
            raise CorruptStoreError(
                f"{log_path} line {lineno}: compaction up to tx {entry.upto} names a "
                "transaction that is not in the log; the transaction log is damaged",
                path=log_path,
            )
        out.append(entry)
    return out


def _entry(obj: Any) -> Entry:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    op = obj["op"]
    if op == "tx":
        file = obj["file"]
        if file is not None:
            _check_name(file, "segments/", SEG_RE)
        return TxEntry(
            tx=_int(obj["tx"]),
            time_us=_int(obj["t"]),
            count=_int(obj["n"]),
            file=file,
            size=_int(obj["size"]),
        )
    if op == "compact":
        _check_name(obj["file"], "snapshots/", SNAP_RE)
        _check_name(obj["docs"], "snapshots/", DOCS_RE)
        replaces = obj["replaces"]
        for name in replaces:
            if not isinstance(name, str) or not (
                _matches(name, "segments/", SEG_RE)
                or _matches(name, "snapshots/", SNAP_RE)
                or _matches(name, "snapshots/", DOCS_RE)
            ):
                raise ValueError(f"bad file name {name!r}")
        return CompactEntry(
            upto=_int(obj["upto"]),
            file=obj["file"],
            size=_int(obj["size"]),
            docs=obj["docs"],
            docs_size=_int(obj["docs_size"]),
            rows=_int(obj["rows"]),
            replaces=tuple(replaces),
        )
    raise ValueError(f"unknown op {op!r}")


def _int(v: Any) -> int:
    if type(v) is not int:
        raise ValueError(f"expected an integer, got {v!r}")
    return v


def _matches(name: Any, folder: str, pattern: re.Pattern[str]) -> bool:
    return (
        isinstance(name, str)
        and name.startswith(folder)
        and pattern.fullmatch(name[len(folder) :]) is not None
    )


def _check_name(name: Any, folder: str, pattern: re.Pattern[str]) -> None:
    # Log entries name files; refusing anything else keeps a damaged log from
    # pointing the store outside its directory.
    if not _matches(name, folder, pattern):
        raise ValueError(f"bad file name {name!r}")


def append(fd: int, line: bytes) -> None:
    """Write one line completely and fsync it: the commit point."""
    view = memoryview(line)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fsync(fd)
