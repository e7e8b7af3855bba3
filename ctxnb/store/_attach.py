"""Attachments: what a transaction's log line carries for another log (standard library).

Private to the store. A governed write commits its store version and its Agent Trace
record in one log line (``"attached":[…]`` after the documents, see
:func:`ctxnb.store._log.txdocs_line`), so one fsync makes both durable; the ledger line
written after it is a copy that a crash or a power loss may lose, and that the log
restores. The store never reads an attachment as a document and does not know what it
holds: the ledger's side (:mod:`ctxnb.govern.tracewal`) reads them with
:func:`attached_lines` and registers, with :func:`register_settler`, the function that
makes them durable in the ledger.

A compaction rotates the log away (see :mod:`ctxnb.store._rotate`); before it does, it
calls :func:`settle` on the lines it drops. With no settler registered in the process
(nothing of the ledger imported) a log that holds attachments is not rotated: it is
kept whole until a compaction in a process that can settle them.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from typing import Any

from . import _log as tlog

__all__ = ["AttachedLine", "attached_lines", "register_settler", "settle"]

# Whether a line carries attachments, without decoding it (a document's text is a JSON
# string, where a quote is escaped: the key cannot appear inside one).
_MARK = tlog.ATTACHED_KEY
_SETTLER: list[Callable[[str, int], None]] = []


class AttachedLine:
    """One committed transaction's attachments: its id, its documents' ids (what an
    attachment may name), and the attachments (decoded JSON objects)."""

    __slots__ = ("attached", "doc_ids", "tx")

    def __init__(self, tx: int, doc_ids: frozenset[str], attached: list[Any]) -> None:
        self.tx = tx
        self.doc_ids = doc_ids
        self.attached = attached

    def __repr__(self) -> str:
        return f"AttachedLine(tx={self.tx}, {len(self.attached)} attached)"


def attached_lines(store_dir: str | os.PathLike[str], end: int | None = None) -> list[AttachedLine]:
    """The attachments in the store's log (its bytes up to ``end``), oldest first.

    Only complete lines whose checksum holds count; a line that is not is left to the
    store to report (it never reached its commit point, or it was damaged).
    """
    path = os.path.join(os.fspath(store_dir), tlog.TXLOG)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        size = os.fstat(fd).st_size if end is None else end
        data = os.pread(fd, size, 0) if size else b""
    finally:
        os.close(fd)
    if _MARK not in data:
        return []
    out = []
    for raw in data.split(b"\n")[:-1]:  # the last piece is not a complete line
        if _MARK not in raw:
            continue
        sealed = tlog._SEALED.match(raw)
        if sealed is None or int(sealed.group(1), 16) != zlib.crc32(raw[sealed.end() :]):
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict) or type(obj.get("tx")) is not int:
            continue
        attached = obj.get("attached")
        if not isinstance(attached, list):
            continue
        named: list[Any] = []
        if obj.get("op") == "txdocs":
            docs = obj.get("docs")
            if isinstance(docs, list):
                named = [d.get("xt/id") for d in docs if isinstance(d, dict)]
        elif isinstance(obj.get("ids"), list):  # a segment's line names its documents
            named = obj["ids"]
        ids = frozenset(i for i in named if isinstance(i, str))
        out.append(AttachedLine(obj["tx"], ids, attached))
    return out


def register_settler(fn: Callable[[str, int], None]) -> None:
    """Set the function that makes the attachments in a store's log (its first ``end``
    bytes) durable where they belong: ``fn(store_dir, end)``; it raises when it
    cannot."""
    _SETTLER[:] = [fn]


def settle(store_dir: str, end: int) -> bool:
    """Before the log's first ``end`` bytes are rotated away: whether they may be.

    True when they hold no attachment or the registered settler made them durable;
    False (the log must be kept) when no settler is registered or it failed.
    """
    path = os.path.join(store_dir, tlog.TXLOG)
    try:
        with open(path, "rb") as f:
            if _MARK not in f.read(end):
                return True
    except OSError:
        return False
    if not _SETTLER:
        return False
    try:
        _SETTLER[0](store_dir, end)
    except Exception:  # noqa: BLE001 - the log is kept; the next compaction retries
        import logging

        logging.getLogger("ctxnb.store.objectstore").warning(
            "could not settle the attachments of %s; the log is kept", path, exc_info=True
        )
        return False
    return True
