"""The reads of an object store: the latest version, history, as-of and scans.

:class:`StoreReader` answers them for :class:`ctxnb.store.objectstore.ObjectStore`,
which passes its read methods on to it. Readers take no file lock: each read refreshes
from the transaction log (a ``stat``) and then reads the snapshot's memory-mapped doc
cache, the live segments and the inline transactions that the store's
:class:`ctxnb.store._open.StoreState` keeps. The examples are on ``ObjectStore``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptStoreError, StoreError
from ..model import OBJECT_TYPES, model_for_type
from . import _compact as compaction
from . import _fmt as fmt
from ._open import _RETRIES, StoreState, TxRecord


@dataclass(frozen=True)
class Version:
    """One version of a document, as returned by :meth:`ObjectStore.history`."""

    doc: dict[str, Any]
    tx_id: int
    tx_time: datetime

    @property
    def version_id(self) -> str:
        """``"<xt/id>@<tx_id>"``, unique per version."""
        return f"{self.doc[fmt.ID_KEY]}@{self.tx_id}"


_SORT_KEYS = compaction.SORT_KEYS
_T = TypeVar("_T")


class StoreReader:
    """The reads of one open store: every method locks its state and follows the log."""

    __slots__ = ("_state",)

    def __init__(self, state: StoreState) -> None:
        self._state = state

    def _read(self, read: Callable[[], _T]) -> _T:
        """Run ``read`` on the state after a refresh, again after a compaction in another
        process removed a segment it was reading (the log then says which snapshot holds
        those versions)."""
        st = self._state
        with st.mu:
            st.check_open()
            gone: FileNotFoundError | None = None
            for attempt in range(_RETRIES):
                st.refresh(force=attempt > 0)
                try:
                    return read()
                except FileNotFoundError as exc:
                    gone = exc
            path = getattr(gone, "filename", None) or st.dir
            raise CorruptStoreError(
                f"{path} is missing, though the store's log names it: the file was removed "
                "by something other than a compaction. Restore the store directory from a "
                "backup",
                path=str(path),
            )

    def get(self, id: str) -> dict[str, Any] | None:
        """The latest version of a document, or None if the store has never seen ``id``."""
        st = self._state

        def read() -> dict[str, Any] | None:
            versions = st.overlay.get(id)
            if versions is not None:
                return json.loads(st.version_json(*versions[-1][:2]))
            snap = st.snap
            if snap is not None:
                k = snap.docs.index.get(id)
                if k is not None:
                    return json.loads(snap.docs.raw(snap.docs.starts[k + 1] - 1))
            return None

        return self._read(read)

    def get_many(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The latest versions of several documents; ids the store lacks are left out."""
        st = self._state
        wanted = list(ids)

        def read() -> dict[str, dict[str, Any]]:
            overlay = st.overlay
            found: dict[str, Any] = {}
            snap = st.snap.docs if st.snap else None
            loads = json.loads
            newer: list[tuple[int, int, str]] = []
            for key in wanted:
                if key in found:
                    continue
                versions = overlay.get(key)
                if versions is not None:
                    found[key] = None
                    newer.append((*versions[-1][:2], key))
                elif snap is not None:
                    k = snap.index.get(key)
                    if k is not None:
                        found[key] = loads(snap.raw(snap.starts[k + 1] - 1))
            # Segment by segment: one whose rows are not held is read from its file once.
            for tx, row, key in sorted(newer, key=lambda v: v[0]):
                found[key] = loads(st.version_json(tx, row))
            return found  # in the order asked

        return self._read(read)

    def latest_tx_of(self, id: str) -> int | None:
        """The transaction of the latest version of ``id`` (None if unknown), without"""
        st = self._state
        with st.mu:
            st.check_open()
            st.refresh()
            versions = st.overlay.get(id)
            if versions:
                return versions[-1][0]
            snap = st.snap.docs if st.snap else None
            if snap is not None:
                k = snap.index.get(id)
                if k is not None:
                    return int(snap.txs[snap.starts[k + 1] - 1])
            return None

    def history(self, id: str) -> list[Version]:
        """Every version of a document, oldest first (empty if the id is unknown)."""
        st = self._state

        def read() -> list[Version]:
            time, out = st.txs.time, []
            snap = st.snap.docs if st.snap else None
            if snap is not None:
                k = snap.index.get(id)
                if k is not None:
                    txs, raw = snap.txs, snap.raw
                    for row in range(snap.starts[k], snap.starts[k + 1]):
                        tx = txs[row]
                        out.append(Version(json.loads(raw(row)), tx, time(tx)))
            for tx, row, _ in st.overlay.get(id, ()):
                out.append(Version(json.loads(st.version_json(tx, row)), tx, time(tx)))
            return out

        return self._read(read)

    def as_of(self, id: str, tx: int | datetime | TxRecord) -> dict[str, Any] | None:
        """The version of ``id`` that was current at a transaction or time."""
        st = self._state

        def read() -> dict[str, Any] | None:
            limit = self.resolve_tx(tx)
            if limit is None:
                return None
            for v_tx, row, _ in reversed(st.overlay.get(id, ())):
                if v_tx <= limit:
                    return json.loads(st.version_json(v_tx, row))
            snap = st.snap.docs if st.snap else None
            if snap is not None:
                k = snap.index.get(id)
                if k is not None:
                    txs = snap.txs
                    for row in range(snap.starts[k + 1] - 1, snap.starts[k] - 1, -1):
                        if txs[row] <= limit:
                            return json.loads(snap.raw(row))
            return None

        return self._read(read)

    def resolve_tx(self, tx: int | datetime | TxRecord | None) -> int | None:
        """A tx reference to a tx id (None: before the first transaction)."""
        st = self._state
        if isinstance(tx, TxRecord):
            return tx.tx_id
        if isinstance(tx, datetime):
            if tx.tzinfo is None:
                raise ValueError(
                    f"as_of needs a timezone-aware datetime, got {tx!r}; "
                    "e.g. datetime.now(timezone.utc)"
                )
            return st.txs.committed_by(tx) or None
        if isinstance(tx, int) and not isinstance(tx, bool):
            return tx if tx >= 1 else None
        raise TypeError(f"expected a tx id, a TxRecord or a datetime, got {tx!r}")

    def ids(self, type: str | None = None) -> list[str]:
        """The ids of all documents (optionally of one type, by latest version), sorted."""
        st = self._state
        with st.mu:
            st.check_open()
            st.refresh()
            out: set[str] = set()
            snap = st.snap.docs if st.snap else None
            if snap is not None:
                if type is None:
                    out.update(snap.index)
                else:
                    latest = pa.array(snap.latest_rows(), pa.int64())
                    mask = pc.equal(snap.types().take(latest), type)
                    ids = snap.ids().take(latest).filter(mask)
                    out.update(ids.to_pylist())
            for key, versions in st.overlay.items():
                if type is None or versions[-1][2] == type:
                    out.add(key)
                else:
                    out.discard(key)
            return sorted(out)

    def latest_tx(self) -> TxRecord | None:
        """The last committed transaction, or None for an empty store."""
        st = self._state
        with st.mu:
            st.check_open()
            st.refresh()
            return st.txs.last()

    def transactions(self) -> list[TxRecord]:
        """Every committed transaction, oldest first."""
        st = self._state
        with st.mu:
            st.check_open()
            st.refresh()
            return st.txs.records()

    def scan(
        self,
        type: str | None = None,
        *,
        as_of: int | datetime | TxRecord | None = None,
        all_versions: bool = False,
        columns: Iterable[str] | None = None,
        format: Literal["pandas", "arrow"] = "pandas",
    ) -> Any:
        """Documents as a table with one typed column per field."""
        st = self._state
        if format not in ("pandas", "arrow"):
            raise ValueError(f"format must be 'pandas' or 'arrow', not {format!r}")
        wanted = _scan_columns(type, columns)
        with st.mu:
            st.check_open()
            for _ in range(_RETRIES):
                st.refresh()
                limit = self.resolve_tx(as_of) if as_of is not None else None
                files = [st.abs_path(st.snap.entry.file)] if st.snap else []
                files += [st.abs_path(s.file) for _, s in sorted(st.segments.items()) if s.file]
                inline = [
                    st.pending[tx]
                    for tx, s in sorted(st.segments.items())
                    if s.file is None and tx in st.pending
                ]
                if as_of is not None and limit is None:
                    files, inline = [], []
                # A snapshot alone is already sorted by id, then tx.
                presorted = st.snap is not None and len(files) == 1 and not inline
                read = sorted(set(wanted) | {"xt_id", "tx_id", "type"}, key=fmt.SCHEMA.names.index)
                try:
                    tables = [fmt.read_parquet(f, columns=read) for f in files]
                except FileNotFoundError:
                    continue  # a compaction replaced the files; the log says with what
                tables += [p.table.select(read) for p in inline]
                break
            else:
                raise StoreError(f"could not read {st.dir}: files kept changing; retry")
        schema = pa.schema([fmt.SCHEMA.field(n) for n in read])
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        if limit is not None:
            table = table.filter(pc.less_equal(table.column("tx_id"), limit))
        if not presorted:
            table = table.take(pc.sort_indices(table, sort_keys=_SORT_KEYS))
        if not all_versions and table.num_rows:
            ids = table.column("xt_id")
            n = table.num_rows
            last = pc.indices_nonzero(pc.not_equal(ids.slice(1), ids.slice(0, n - 1)))
            table = table.take(pa.concat_arrays([last.cast(pa.int64()), pa.array([n - 1])]))
        if type is not None:
            table = table.filter(pc.equal(table.column("type"), type))
        table = table.select(wanted)
        return table if format == "arrow" else table.to_pandas()


def _scan_columns(type: str | None, columns: Iterable[str] | None) -> list[str]:
    if columns is not None:
        wanted = list(columns)
        unknown = [c for c in wanted if c not in fmt.SCHEMA.names]
        if unknown:
            raise ValueError(f"unknown column(s) {unknown}; store columns are {fmt.SCHEMA.names}")
        return wanted
    envelope = [c for c in fmt.ENVELOPE_COLUMNS if c not in ("tx_id", "tx_time")]
    if type in OBJECT_TYPES:
        own = model_for_type(type).PAYLOAD_FIELDS  # type: ignore[arg-type]
        payload = [c for c in fmt.PAYLOAD_COLUMNS if c in own]
    else:
        payload = list(fmt.PAYLOAD_COLUMNS)
    return [*envelope, *payload, "extra", "tx_id", "tx_time"]
