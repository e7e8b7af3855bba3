"""A session's files as columns: what a resume compares with one batched ``stat``.

Two things make resuming a session of thousands of files cost about one ``stat`` per
file and nothing else in Python when nothing changed:

- :func:`file_columns`: the store's light file columns (path, filesystem, hashes, type,
  size in characters), aligned with the session's index in one ``take``. The scan is
  the store's own (it is the authority on every version); a process keeps the last
  scans by the store's tip, so a second resume against an unchanged store reads none.
- :class:`ResumeBlock`: the stat-cache entries of the session's files (size, mtime,
  ctime, inode, the source hash recorded for that stat, and whether the record was
  racily clean), one array per field, in ``.ctxnb/sessions/<digest>.resume.arrow``,
  written after a resume that had to look at a file and read back in one read. A
  resume compares the batched stat with it as vectors (:meth:`ResumeBlock.unchanged`);
  only the rows that differ go through the per-file path (the stat cache, a read, a
  hash, :func:`~ctxnb.access.observe.observe_bytes`).

The block is a cache, as ``statcache.json`` is, and holds nothing the store does not
vouch for but "this stat was seen with this hash": a block that is missing, torn,
corrupt, from another session or filesystem, newer than the store, or in any way
unexpected is ignored (the full per-file path runs and writes a fresh one), never
trusted in part and never an error.

:class:`~ctxnb.session.state.LazyRows` holds a session's documents and metadata entries:
the rows of the columns are made into a document or a :class:`~ctxnb.context.MetaEntry`
when first asked for, so a resume builds no object per file.
"""

from __future__ import annotations

import contextlib
import operator
import os
import stat as stat_mod
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..access._gitsources import _read_host
from ..access.observe import RACY_NS
from ..errors import NotFoundError
from ._cold import LIGHT_COLUMNS, session_digest

if TYPE_CHECKING:
    from ..store.objectstore import ObjectStore


# -- the store's file columns -----------------------------------------------------------
# The last few scans, by the store's directory and tip: a store with the same last
# transaction (id and time; ids are never reused) holds the same latest versions.
_SCANS: dict[str, tuple[tuple[int, Any], pa.Table]] = {}
_SCANS_MAX = 4


def _file_table(store: ObjectStore) -> pa.Table | None:
    tip = store.latest_tx()
    if tip is None:
        return None
    key, mark = str(store.path), (tip.tx_id, tip.tx_time)
    hit = _SCANS.get(key)
    if hit is not None and hit[0] == mark:
        return hit[1]
    table = store.scan("file", columns=LIGHT_COLUMNS, format="arrow")
    if not isinstance(table, pa.Table) or table.num_rows == 0:
        return None
    table = table.select(list(LIGHT_COLUMNS))
    if len(_SCANS) >= _SCANS_MAX:
        _SCANS.clear()
    _SCANS[key] = (mark, table)
    return table


class FileColumns:
    """The light columns of a session's files, row ``i`` for ``session_index[i]``.

    Rows of objects that are not stored files (tool calls, lost ids) are null.

    Attributes:
        ids: the session index as an Arrow array.
        found: a bool vector, true where the row is a stored file.
    """

    def __init__(self, ids: pa.Array, table: pa.Table, pos: pa.Array | None) -> None:
        self.ids = ids
        self._table = table  # the store's rows; ``pos``: each id's row there, or null
        self._pos = pos
        self.found = (
            np.zeros(len(ids), dtype=bool)
            if pos is None
            else pc.is_valid(pos).to_numpy(zero_copy_only=False)
        )
        self._cols: dict[str, pa.Array] = {}
        self._lists: dict[str, list[Any]] | None = None

    def column(self, name: str) -> pa.Array:
        """One column, aligned with the session (taken when first asked for)."""
        col = self._cols.get(name)
        if col is None:
            if self._pos is None:
                col = pa.nulls(len(self.ids), _type_of(name))
            else:
                col = self._table.column(name).take(self._pos).combine_chunks()
            self._cols[name] = col
        return col

    def lists(self) -> dict[str, list[Any]]:
        """The columns as Python lists (made once, when a row is first built)."""
        if self._lists is None:
            self._lists = {n: self.column(n).to_pylist() for n in LIGHT_COLUMNS}
        return self._lists


def file_columns(store: ObjectStore, session_index: Sequence[str]) -> FileColumns:
    """The store's latest file columns for each id of ``session_index``, in its order."""
    ids = pa.array(session_index, type=pa.string())
    table = _file_table(store)
    if table is None:
        return FileColumns(ids, pa.table({}), None)
    return FileColumns(ids, table, pc.index_in(ids, value_set=table.column("xt_id")))


def pick(values: Any, rows: np.ndarray) -> Any:
    """``values`` at ``rows`` (sorted, distinct): the same vector when that is all of them."""
    if len(rows) == len(values):
        return values
    return values.take(rows) if isinstance(values, pa.Array) else values[rows]


def _type_of(name: str) -> pa.DataType:
    return pa.int64() if name == "char_count" else pa.string()


# -- the block of stat-cache entries ----------------------------------------------------
_MAGIC = b"CTXNBRS1"
_STAT_FIELDS = ("size", "mtime_ns", "ctime_ns", "ino")
_STAT_TYPES = (np.int64, np.int64, np.int64, np.uint64)  # a time before 1970 is negative
_SCHEMA = pa.schema(
    [
        ("xt_id", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("ctime_ns", pa.int64()),
        ("ino", pa.uint64()),
        ("clean", pa.bool_()),
        ("source_hash", pa.string()),
    ]
)
_BOUNDS = ((-(1 << 63), (1 << 63) - 1),) * 3 + ((0, (1 << 64) - 1),)
# What a block row may take on disk, at most (a hostile file is not read whole).
_ROW_BYTES_MAX = 512


def _bounded(stat: list[Any]) -> zip[tuple[Any, tuple[int, int]]]:
    return zip(stat, _BOUNDS, strict=False)


# Stand-ins in the stat vectors for a path with no stat: mode 0 is nothing there (or
# gone), an impossible file type is refused by the policy (st_mode, ino, dev, nlink,
# uid, gid, size, and the three times).
_NS = {"st_atime_ns": 0, "st_mtime_ns": 0, "st_ctime_ns": 0}
_GONE = os.stat_result((0,) * 10, _NS)
_REFUSED = os.stat_result((0o170000,) + (0,) * 9, _NS)
_FIELDS = tuple(operator.attrgetter(f"st_{f}") for f in _STAT_FIELDS)


def block_path(root: str | os.PathLike[str], session_id: str) -> Path:
    """Where the block of ``session_id`` lives: under ``.ctxnb/sessions`` by a digest."""
    return Path(root) / ".ctxnb" / "sessions" / f"{session_digest(session_id)}.resume.arrow"


class StatRows:
    """The batched stat of a session's files as vectors, one per field."""

    def __init__(self, stats: Sequence[object]) -> None:
        sr, nf = os.stat_result, NotFoundError
        n = len(stats)
        plain = stats
        if set(map(type, stats)) - {sr}:  # a path with no stat: a stand-in for its row
            plain = [s if type(s) is sr else (_GONE if type(s) is nf else _REFUSED) for s in stats]
        mode = np.fromiter(map(_MODE, plain), dtype=np.int64, count=n)
        self.keys = [
            np.fromiter(map(get, plain), dtype=t, count=n)
            for get, t in zip(_FIELDS, _STAT_TYPES, strict=True)
        ]
        fmt = mode & stat_mod.S_IFMT(0o170000)
        self.regular = fmt == stat_mod.S_IFREG
        # Nothing there, or a directory now: the file is gone.
        self.gone = (mode == 0) | (fmt == stat_mod.S_IFDIR)


_MODE = operator.attrgetter("st_mode")


class ResumeBlock:
    """The stat-cache entries of a session's files, one array per field.

    Row ``i`` is ``session_index[i]``: the ``(size, mtime_ns, ctime_ns, ino)`` of the
    file when it was last hashed, the source hash found then, and ``clean``: the stat
    was not racy (the file's mtime was more than :data:`RACY_NS` before the hash).
    """

    def __init__(
        self, ids: pa.Array, keys: list[np.ndarray], clean: np.ndarray, hashes: pa.Array, tx: int
    ) -> None:
        self.ids = ids
        self.keys = keys
        self.clean = clean
        self.hashes = hashes
        self.tx = tx

    @classmethod
    def empty(cls, ids: pa.Array) -> ResumeBlock:
        n = len(ids)
        keys = [np.zeros(n, dtype=t) for t in _STAT_TYPES]
        return cls(ids, keys, np.zeros(n, dtype=bool), pa.nulls(n, pa.string()), 0)

    def unchanged(self, st: StatRows, rows: np.ndarray, doc_hash: pa.Array) -> np.ndarray:
        """Which of ``rows`` (indexes into the session) are unchanged on disk.

        As :meth:`ctxnb.access.observe.StatCache.lookup` answers for each, plus the
        hash recorded being the stored version's: the same stat as recorded, a clean
        record, and a recorded hash equal to the latest stored ``source_hash``.
        """
        if not len(rows):
            return np.zeros(0, dtype=bool)
        same = st.regular & pick(self.clean, rows)
        for now, was in zip(st.keys, self.keys, strict=True):
            same &= now == pick(was, rows)
        hashes = pc.equal(pick(self.hashes, rows), pick(doc_hash, rows))
        return same & pc.fill_null(hashes, False).to_numpy(zero_copy_only=False)

    # -- on disk ----------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path, ids: pa.Array, fs_id: str, latest_tx: int) -> ResumeBlock | None:
        """The block at ``path`` if it is whole and belongs to this session, else None."""
        n = len(ids)
        # O_NOFOLLOW, O_NONBLOCK, a regular file no longer than a block of n rows can be.
        data = _read_host(str(path), follow=False, limit=4096 + _ROW_BYTES_MAX * max(n, 1))
        if data is None:
            return None
        if len(data) < 12 or data[:8] != _MAGIC:
            return None
        body = memoryview(data)[12:]
        if int.from_bytes(data[8:12], "little") != zlib.crc32(body):
            return None
        try:
            table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
            # Offsets and lengths checked against the buffers before anything reads
            # them: a crafted string column must not send a compare out of bounds.
            table.validate(full=True)
            meta = table.schema.metadata or {}
            tx = int(meta.get(b"tx", b"-1"))
            if (
                table.schema.remove_metadata() != _SCHEMA
                or meta.get(b"filesystem_id") != fs_id.encode()
                or not 0 <= tx <= latest_tx  # a store older than the block: stale
                or table.num_rows != n
            ):
                return None
            cols = {f: table.column(f).combine_chunks() for f in _SCHEMA.names}
            if any(cols[f].null_count for f in ("xt_id", *_STAT_FIELDS, "clean")):
                return None
            if not cols["xt_id"].equals(ids):
                return None
            keys = [cols[f].to_numpy() for f in _STAT_FIELDS]
            clean = cols["clean"].to_numpy(zero_copy_only=False)
        except (pa.ArrowException, OSError, ValueError, TypeError, LookupError, MemoryError):
            return None  # pyarrow says a broken stream with OSError or ArrowInvalid
        return cls(ids, keys, clean, cols["source_hash"], tx)

    def save(self, path: Path, fs_id: str, tx: int) -> None:
        """Write the block (temp file and rename: a reader sees all of it or the old one)."""
        cols: dict[str, Any] = {"xt_id": self.ids}
        for name, col in zip(_STAT_FIELDS, self.keys, strict=True):
            cols[name] = pa.array(col, type=_SCHEMA.field(name).type)
        cols["clean"] = pa.array(self.clean, type=pa.bool_())
        cols["source_hash"] = self.hashes
        meta = {"format": "1", "filesystem_id": fs_id, "tx": str(tx)}
        table = pa.table(cols, schema=_SCHEMA.with_metadata(meta))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        body = sink.getvalue().to_pybytes()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as out:
            out.write(_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body)
        os.replace(tmp, path)
        _remove_orphans(path)

    def record(self, rows: Sequence[int], entries: Sequence[list[Any] | None]) -> None:
        """Take the stat-cache entries (``[size, mtime, ctime, ino, hash, at]``) of ``rows``."""
        hashes = self.hashes.to_pylist()
        keys = [k.copy() for k in self.keys]  # loaded ones may be read-only views
        clean = self.clean.copy()
        for i, e in zip(rows, entries, strict=True):
            # The stat cache is a file too: an entry of another shape records nothing.
            stat = e[:4] if isinstance(e, list) and len(e) == 6 else []
            ok = (
                e is not None
                and len(stat) == 4
                and all(type(v) is int and lo <= v <= hi for v, (lo, hi) in _bounded(stat))
                and type(e[5]) is int
                and isinstance(e[4], str)
            )
            if not ok or e is None:
                hashes[i], clean[i] = None, False
                continue
            hashes[i], clean[i] = e[4], e[1] + RACY_NS < e[5]
            for k, v in zip(keys, stat, strict=True):
                k[i] = v
        self.keys, self.clean = keys, clean
        self.hashes = pa.array(hashes, type=pa.string())


def _remove_orphans(path: Path) -> None:
    """Remove the temp files of ``path``'s block that a killed process left behind.

    Only the names this module writes (``.<name>.<pid>.tmp``) whose process is gone: a
    live process (another kernel saving the same session) keeps its own.
    """
    prefix, suffix = f".{path.name}.", ".tmp"
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) : -len(suffix)]
        if not (name.startswith(prefix) and name.endswith(suffix) and pid.isdigit()):
            continue
        if int(pid) == os.getpid() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path.parent / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process, or not a pid we can ask about: keep it
    return True
