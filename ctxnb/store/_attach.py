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

The attachments outlive the lines that carried them: the rotation copies them (with
their transaction and its documents' ids, one sealed ``att`` line each, without the
documents) into ``snapshots/att-<upto>-<hex>.jsonl``, with the ones of every earlier
rotation and whatever the settler hands back to keep (the ledger's head when it was
settled), and the base line names that archive with its size and SHA-256. So a copy
the other log is checked against is never rotated away: :func:`attached_lines` with
``archived=True`` reads the archive, checked, before the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Callable
from typing import Any

from ..errors import CorruptStoreError
from . import _log as tlog

__all__ = ["AttachedLine", "archive_lines", "attached_lines", "register_settler", "settle"]

# Whether a line carries attachments, without decoding it (a document's text is a JSON
# string, where a quote is escaped: the key cannot appear inside one).
_MARK = tlog.ATTACHED_KEY
_SETTLER: list[Callable[[str, int], list[bytes]]] = []


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


def attached_lines(
    store_dir: str | os.PathLike[str], end: int | None = None, *, archived: bool = False
) -> list[AttachedLine]:
    """The attachments in the store's log (its bytes up to ``end``), oldest first; with
    ``archived``, those of the lines earlier rotations dropped first.

    Only complete lines whose checksum holds count; a line that is not is left to the
    store to report (it never reached its commit point, or it was damaged).

    Raises:
        CorruptStoreError: (``archived``) the archive the base line names is missing or
            is not the file it committed (its size or SHA-256 differs).
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
    out = _archived(os.fspath(store_dir), data) if archived else []
    return out + parse_lines(data)


def parse_lines(data: bytes) -> list[AttachedLine]:
    """The attachments of complete, sealed lines of ``data`` (a log's or an archive's)."""
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


def archive_lines(lines: list[AttachedLine]) -> bytes:
    """The archive's lines for ``lines``: sealed ``att`` lines, without documents."""
    out = []
    for line in lines:
        body = json.dumps(
            {"tx": line.tx, "ids": sorted(line.doc_ids)},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()[1:-1]
        attached = json.dumps(line.attached, ensure_ascii=False, separators=(",", ":"))
        out.append(tlog._sealed("att", body + _MARK + attached.encode()[1:] + b"}"))
    return b"".join(out)


def read_archive(store_dir: str, name: str, size: int, sha: str) -> bytes:
    """The archive of attachments ``name`` (relative to the store), checked.

    Raises:
        CorruptStoreError: it is missing, or not the file the log committed.
    """
    path = os.path.join(store_dir, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise CorruptStoreError(
            f"{path} is named by the committed log but is missing; it holds the copies of "
            "the trace records of every rotated transaction. Restore it from a backup",
            path=path,
        ) from None
    try:
        data = os.pread(fd, size + 1, 0)
    finally:
        os.close(fd)
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
        raise CorruptStoreError(
            f"{path} is not the archive of attachments the log committed (its size or "
            "SHA-256 differs): the copies of rotated trace records are damaged. Restore "
            "it from a backup; `ctxnb store verify` checks every file",
            path=path,
        )
    return data


def _archived(store_dir: str, data: bytes) -> list[AttachedLine]:
    """The attachments of the archive the log's base line names (none without one)."""
    first = data[: data.find(b"\n") + 1]
    if not first.startswith(b'{"op":"base",'):
        return []
    try:
        base = tlog._entry(json.loads(first))
    except (ValueError, KeyError, TypeError):
        return []  # the store refuses a damaged base line itself, naming the log
    if not isinstance(base, tlog.BaseEntry) or base.att is None or base.att_sha is None:
        return []
    return parse_lines(read_archive(store_dir, base.att, base.att_size, base.att_sha))


def register_settler(fn: Callable[[str, int], list[bytes]]) -> None:
    """Set the function that makes the attachments in a store's log (its first ``end``
    bytes) durable where they belong: ``fn(store_dir, end)``; it raises when it
    cannot, and returns attachments (JSON objects' bytes) for the archive to keep."""
    _SETTLER[:] = [fn]


def settle(store_dir: str, end: int) -> list[bytes] | None:
    """Before the log's first ``end`` bytes are rotated away: whether they may be.

    The attachments to keep in the archive besides the dropped lines' (empty when
    those hold none, or the settler gave none) when they may; None (the log must be
    kept) when no settler is registered or it failed.
    """
    path = os.path.join(store_dir, tlog.TXLOG)
    try:
        with open(path, "rb") as f:
            if _MARK not in f.read(end):
                return []
    except OSError:
        return None
    if not _SETTLER:
        return None
    try:
        return list(_SETTLER[0](store_dir, end))
    except Exception:  # noqa: BLE001 - the log is kept; the next compaction retries
        import logging

        logging.getLogger("ctxnb.store.objectstore").warning(
            "could not settle the attachments of %s; the log is kept", path, exc_info=True
        )
        return None
