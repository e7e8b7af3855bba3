"""Who wrote each stored version of a file: the history's author column.

The store keeps every version of a file and knows nothing of who made it; the Agent
Trace records do. Nothing new is written to find out: a governed write commits its
version and its trace record in one log line (the record is an ``agent-trace``
attachment naming the version's object, :mod:`ctxnb.store._attach`), so a version's
author is the record attached to its own transaction. A write that stored its version
first and its record after (the Claude Code hook) names the version in the record's
``metadata.version_id``, which the ledger holds. Attachments are read first, as the
ledger check trusts them over the ledger's copy; a ledger record the check finds
tampered with names no author.

A version no record names was not written through ctxnb: the file's first version is
``index`` (the store first saw it as it was), a later one an ``outside edit``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store.objectstore import Version
from .ledgercheck import KIND, TAMPERED, check_ledger

if TYPE_CHECKING:
    from ..access.door import Access

__all__ = ["INDEX", "OUTSIDE_EDIT", "AuthoredVersion", "authored_history", "with_authors"]

#: The author of a file's first version when no trace record names it.
INDEX = "index"
#: The author of a later version no trace record names.
OUTSIDE_EDIT = "outside edit"


@dataclass(frozen=True)
class AuthoredVersion(Version):
    """A stored version (:class:`~ctxnb.store.Version`) and who wrote it.

    Attributes:
        author: the caller of the recorded change (``agent``, ``claude-code`` …), else
            :data:`INDEX` or :data:`OUTSIDE_EDIT`.
        caller: the trace record's ``metadata.caller`` (None: no record).
        contributor: the record's contributor (``{"type": "ai", "model_id": …}``).
        record_id: the trace record's id.
        source: where the record was found: ``attached`` (the version's own log line),
            ``ledger`` (by its ``version_id``) or None.
    """

    author: str = INDEX
    caller: str | None = None
    contributor: Mapping[str, Any] | None = None
    record_id: str | None = None
    source: str | None = None

    @property
    def contributor_label(self) -> str:
        """``ai (anthropic/claude-sonnet-4)``, ``human``, or ``-`` when no record."""
        c = self.contributor or {}
        kind = c.get("type")
        if not isinstance(kind, str):
            return "-"
        model = c.get("model_id")
        return f"{kind} ({model})" if isinstance(model, str) and model else kind


def _from_record(record: Mapping[str, Any], oid_path: str | None) -> dict[str, Any]:
    meta = record.get("metadata")
    caller = meta.get("caller") if isinstance(meta, Mapping) else None
    files = [f for f in record.get("files") or [] if isinstance(f, Mapping)]
    # The file's own entry first; a record names paths from the git root, which may sit
    # above the workspace, so any entry's contributor is the fallback.
    files.sort(key=lambda f: f.get("path") != oid_path)
    contributor: Mapping[str, Any] | None = None
    for f in files:
        for conv in f.get("conversations") or []:
            if isinstance(conv, Mapping) and isinstance(conv.get("contributor"), Mapping):
                contributor = dict(conv["contributor"])
                break
        if contributor is not None:
            break
    rid = record.get("id")
    return {
        "caller": caller if isinstance(caller, str) and caller else None,
        "contributor": contributor,
        "record_id": rid if isinstance(rid, str) else None,
    }


def _attached(store_dir: str, wanted: set[tuple[int, str]]) -> dict[tuple[int, str], Any]:
    """The trace records attached to the wanted (transaction, object id) pairs."""
    from ..store._attach import attached_lines  # only history with authors pays for it

    out: dict[tuple[int, str], Any] = {}
    if not os.path.isdir(store_dir):
        return out
    for line in attached_lines(store_dir, archived=True):
        for att in line.attached:
            if not isinstance(att, dict) or att.get("kind") != KIND:
                continue
            oid, record = att.get("oid"), att.get("record")
            # As the ledger check: an attachment counts only for a document of its line.
            if (line.tx, oid) in wanted and oid in line.doc_ids and isinstance(record, dict):
                out[(line.tx, oid)] = record
    return out


def _ledger(root: Path, wanted: set[str]) -> dict[str, Any]:
    """The ledger's untampered records that name a wanted version in ``version_id``."""
    trace = root / ".orchestration" / "agent_trace.jsonl"
    if not wanted or not trace.is_file():
        return {}

    def names_one(record: dict[str, Any]) -> bool:
        meta = record.get("metadata")
        return isinstance(meta, Mapping) and meta.get("version_id") in wanted

    check = check_ledger(trace, keep=names_one)
    out: dict[str, Any] = {}
    for n, record in check.records:
        if check.integrity.get(n) == TAMPERED:
            continue  # a line someone changed says nothing about who wrote the version
        out[str(record["metadata"]["version_id"])] = record
    return out


def with_authors(
    versions: Sequence[Version], *, store_dir: str, root: Path, rel: str | None = None
) -> list[AuthoredVersion]:
    """``versions`` (one file's, oldest first) each with its author.

    Args:
        versions: the store's history of one object.
        store_dir: the store's directory (its log holds the attachments).
        root: the workspace root (``.orchestration/agent_trace.jsonl`` is the ledger).
        rel: the file's path as trace records name it (picks the file's conversation in
            a record of several files); None takes the record's first.
    """
    if not versions:
        return []
    attached = _attached(store_dir, {(v.tx_id, str(v.doc.get("xt/id"))) for v in versions})
    missing = {v.version_id for v in versions if (v.tx_id, str(v.doc.get("xt/id"))) not in attached}
    ledger = _ledger(root, missing)
    out: list[AuthoredVersion] = []
    for i, v in enumerate(versions):
        record = attached.get((v.tx_id, str(v.doc.get("xt/id"))))
        source = "attached" if record is not None else None
        if record is None and v.version_id in ledger:
            record, source = ledger[v.version_id], "ledger"
        info = _from_record(record, rel) if record is not None else {}
        caller = info.get("caller")
        if record is not None:
            author = caller or "unknown caller"
        else:
            author = INDEX if i == 0 else OUTSIDE_EDIT
        out.append(
            AuthoredVersion(
                doc=v.doc,
                tx_id=v.tx_id,
                tx_time=v.tx_time,
                author=author,
                caller=caller,
                contributor=info.get("contributor"),
                record_id=info.get("record_id"),
                source=source,
            )
        )
    return out


def authored_history(access: Access, path: str | os.PathLike[str]) -> list[AuthoredVersion]:
    """Every stored version of a file, oldest first, each with who wrote it."""
    oid = access.object_id(path)
    versions = access.store.history(oid)
    rel = access.relpath(access.abspath(path))
    return with_authors(versions, store_dir=str(access.store.path), root=Path(access.root), rel=rel)
