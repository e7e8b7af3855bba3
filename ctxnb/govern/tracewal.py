"""A governed write's trace record, committed in its store transaction's log line.

A governed ``write_file`` makes its store version and its Agent Trace record durable
with one fsync: the recorder prepares the record (validated, redacted) before the
version is committed, and the store writes it in the transaction's log line as an
attachment (``{"kind":"agent-trace","oid":…,"at":…,"record":{…}}``, see
:mod:`ctxnb.store._attach`). The ledger line is then appended, chained as every line is,
with one write and no fsync of its own: the store's log is its write-ahead log.

A record that is in the log but not in the ledger (the page cache lost in a power loss,
or the process killed between the two writes) is restored by :func:`restore`, which
appends the missing ones, chained, exactly once (presence is checked by record id under
the ledger's lock). It runs at the first logged append of each recorder (a kernel's
engine, an MCP server's), before ``ctxnb trace verify`` checks the chain, and before a
compaction rotates the log away (then the ledger is fsynced too, so nothing the log
drops is only in the page cache).

What restoring trusts: an attachment is re-validated against the schema and redacted
again like any record; its ``prev_hash`` and ``version_id`` are replaced (the link by the
ledger's real last line; the version by the attachment's object id and the line's
transaction, which must hold a document of that id); it is written only to the
ledger of the store's workspace, never to a path the log names.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..store._attach import AttachedLine, attached_lines, register_settler
from . import chain
from .ledger import TraceLedger, dump_record

__all__ = [
    "HEAD_KIND",
    "KIND",
    "Logged",
    "append_logged",
    "attachment",
    "checkpoint",
    "ledger_for",
    "restore",
]

KIND = "agent-trace"
HEAD_KIND = "agent-trace-head"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The ledgers of the stores this process wrote attachments to (the settler's answer
# when a compaction of that store asks); else the workspace layout says where.
_LEDGERS: dict[str, Path] = {}


class Logged:
    """A prepared record to append: its id, the version it records, where the ledger
    ended when it was prepared (its line is at or after that offset)."""

    __slots__ = ("at", "record", "version_id")

    def __init__(self, record: dict[str, Any], version_id: str | None, at: int) -> None:
        self.record = record
        self.version_id = version_id
        self.at = at

    @property
    def id(self) -> str:
        return str(self.record["id"])


def attachment(prepared: Mapping[str, Any], oid: str, at: int, head: str | None = None) -> bytes:
    """The bytes the store's log line carries for a prepared record of object ``oid``:
    with ``at`` the ledger's length when it was prepared and ``head`` the hash of its
    last line then (the checkpoint, see :mod:`ctxnb.govern.ledgercheck`)."""
    if head is None:
        return dump_record({"kind": KIND, "oid": oid, "at": at, "record": prepared})
    return dump_record({"kind": KIND, "oid": oid, "at": at, "head": head, "record": prepared})


def checkpoint(at: int, head: str) -> bytes:
    """An attachment that only pins the ledger's first ``at`` bytes (a rotation keeps
    one, taken when it settled the ledger)."""
    return dump_record({"kind": HEAD_KIND, "at": at, "head": head})


_NAMED: dict[str, Path] = {}  # the same, by the name a writer gave (no realpath per write)


def ledger_for(store_dir: str | os.PathLike[str], ledger: Path) -> None:
    """Remember that ``store_dir``'s attachments belong in ``ledger`` (for compaction)."""
    name = os.fspath(store_dir)
    if _NAMED.get(name) != ledger:
        _NAMED[name] = _LEDGERS[os.path.realpath(name)] = ledger


def append_logged(
    ledger: TraceLedger, items: Sequence[Logged], *, durable: bool, anywhere: bool = False
) -> list[str]:
    """Append each item's record unless the ledger has it already; fsync when ``durable``.

    One write under the ledger's lock, chained; returns the ids appended. The ledger is
    searched from the earliest ``at`` on (or from its start, when it is shorter); with
    ``anywhere``, a record not found there is looked for in the whole ledger before it
    is appended (an ``at`` comes from the log: a ledger reset to an older copy has its
    restored records below their offsets, and a forged one may point past them). A
    record counts as present only as a whole line: a line a crash cut short after the
    id does not.
    """
    if not items:
        if durable and ledger.path.exists():
            fd = ledger.open_locked()  # under the lock: a writer's line is whole
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return []
    fd = ledger.open_locked()
    try:
        appended: list[str] = []
        size = os.fstat(fd).st_size
        start = min(min(it.at for it in items), size)
        tail = os.pread(fd, size - start, start) if size > start else b""
        missing = {it.id for it in items if not _whole_line(tail, it.id)}
        if anywhere and missing and start > 0:
            missing -= _whole_lines_in(fd, size, missing)
        todo: list[dict[str, Any]] = []
        for it in items:
            if it.id in appended or it.id not in missing:
                continue
            appended.append(it.id)
            rec = dict(it.record)
            meta = dict(rec.get("metadata") or {})
            meta.pop(chain.PREV_KEY, None)
            if it.version_id is not None:
                meta["version_id"] = it.version_id
            rec["metadata"] = meta
            todo.append(rec)
        if todo:
            ledger.write_locked(fd, todo)
        if durable:
            os.fsync(fd)
        return appended
    finally:
        os.close(fd)  # also releases the lock


def _whole_line(data: bytes, rid: str) -> bool:
    """Whether a complete line of ``data`` is the record ``rid`` (the id of a line cut
    short, or of a line that starts before ``data``, does not count)."""
    mark = b'"id":"%s"' % rid.encode()
    at = data.find(mark)
    while at >= 0:
        end = data.find(b"\n", at)
        if end < 0:
            return False  # the last line is not finished: cut by a crash
        line = data[data.rfind(b"\n", 0, at) + 1 : end]
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if isinstance(rec, dict) and rec.get("id") == rid:
            return True
        at = data.find(mark, end)
    return False


_SCAN = 1 << 20


def _whole_lines_in(fd: int, size: int, ids: set[str]) -> set[str]:
    """Which of ``ids`` are whole lines of the ledger's first ``size`` bytes (read a
    chunk of complete lines at a time)."""
    found: set[str] = set()
    pos, carry = 0, b""
    while pos < size and len(found) < len(ids):
        chunk = os.pread(fd, min(_SCAN, size - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        data, carry = data[:cut], data[cut:]
        found.update(rid for rid in ids - found if _whole_line(data, rid))
    return found


def _trusted(att: Any, line: AttachedLine, ledger: TraceLedger) -> Logged | None:
    """The attachment as a record to restore, or None when it is not one ctxnb wrote."""
    if not isinstance(att, dict) or att.get("kind") != KIND:
        return None
    oid, at, record = att.get("oid"), att.get("at"), att.get("record")
    if not isinstance(oid, str) or type(at) is not int or at < 0 or not isinstance(record, dict):
        return None
    if oid not in line.doc_ids:
        return None  # a record of a version this transaction did not write
    rid = record.get("id")
    if not isinstance(rid, str) or _UUID.fullmatch(rid) is None:
        return None
    try:
        prepared = ledger.prepare([record])[0]  # the schema, and the redaction again
    except Exception:  # noqa: BLE001 - not a record ctxnb wrote: nothing to restore
        return None
    return Logged(prepared, f"{oid}@{line.tx}", at)


def restore(
    store_dir: str | os.PathLike[str],
    ledger: TraceLedger,
    *,
    end: int | None = None,
    durable: bool = False,
) -> list[str]:
    """Append the trace records in the store's log (its first ``end`` bytes) that the
    ledger lacks; fsync the ledger when ``durable``. Returns the ids restored."""
    items = [
        logged
        for line in attached_lines(store_dir, end)
        for att in line.attached
        if (logged := _trusted(att, line, ledger)) is not None
    ]
    return append_logged(ledger, items, durable=durable, anywhere=True)


def _settle(store_dir: str, end: int) -> list[bytes]:
    """Before a compaction rotates the log's first ``end`` bytes away: the ledger made
    whole and durable, and its checkpoint then for the archive to keep (it pins every
    line the ledger had, records with no copy in the log included)."""
    path = _LEDGERS.get(os.path.realpath(store_dir))
    if path is None:
        parent = Path(store_dir).resolve()
        if parent.name != "store" or parent.parent.name != ".ctxnb":
            raise FileNotFoundError(f"no trace ledger is known for the store {store_dir}")
        path = parent.parent.parent / ".orchestration" / "agent_trace.jsonl"
    ledger = TraceLedger(path)
    restore(store_dir, ledger, end=end, durable=True)
    at, head = ledger.checkpoint()
    return [checkpoint(at, head)] if head is not None else []


register_settler(_settle)
