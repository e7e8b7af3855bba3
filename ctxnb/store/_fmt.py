"""Row format of the object store: documents ⇄ Arrow rows, Parquet and doc-cache files.

Private to :mod:`ctxnb.store.objectstore`; the layout is described for outside readers in
``docs/store-format.md``.

A document is stored in one wide row. Known fields get a typed column; a value whose
type does not fit its column (say ``char_count="12"``) and every unknown key go to the
``extra`` JSON column, so any JSON-shaped document round-trips. ``null_fields`` lists
the typed keys that were present with the value ``None``; a typed column that is null
and not listed there means the key was absent.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._util.fsync import background
from ..errors import CorruptStoreError, StoreError

# The format's versions and the JSON of a stored value live with the log (standard
# library only), which commits a transaction without this module's pyarrow.
from ._log import FORMAT_VERSION, dumps

META_KEY = b"ctxnb.store.objectstore.format"

ID_KEY = "xt/id"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Typed payload columns, by kind. The union covers the five object types of model.py.
STR_FIELDS: tuple[str, ...] = (
    "content",
    "file_type",
    "source_hash",
    "content_hash",
    "tool",
    "args_display",
    "status",
    "chat_ref",
    "session_ref",
    "session_id",
    "system_prompt_ref",
)
INT_FIELDS: tuple[str, ...] = ("char_count", "turn_count")
JSON_FIELDS: tuple[str, ...] = ("args", "turns")
LIST_FIELDS: tuple[str, ...] = (
    "file_refs",
    "toolcall_refs",
    "session_index",
    "metadata_pool",
    "active_set",
    "pinned_set",
)
PAYLOAD_COLUMNS: tuple[str, ...] = (
    "content",
    "file_type",
    "char_count",
    "source_hash",
    "content_hash",
    "tool",
    "args",
    "args_display",
    "status",
    "chat_ref",
    "file_refs",
    "turns",
    "turn_count",
    "toolcall_refs",
    "session_ref",
    "session_id",
    "system_prompt_ref",
    "session_index",
    "metadata_pool",
    "active_set",
    "pinned_set",
)
# Keys that have a typed home; anything else lands in ``extra``.
TYPED_KEYS: frozenset[str] = frozenset(
    {ID_KEY, "type", "source", "identity_hash", *PAYLOAD_COLUMNS}
)
_STR_SET = frozenset(STR_FIELDS)
_INT_SET = frozenset(INT_FIELDS)
_JSON_SET = frozenset(JSON_FIELDS)
_LIST_SET = frozenset(LIST_FIELDS)
_SOURCE_KEYS = ("type", "filesystemId", "path")

ENVELOPE_COLUMNS: tuple[str, ...] = (
    "xt_id",
    "type",
    "source_type",
    "source_filesystem_id",
    "source_path",
    "identity_hash",
    "tx_id",
    "tx_time",
)
# Statistics help outside readers prune row groups by id, type, path and tx; content
# statistics would only bloat the footer.
STATS_COLUMNS: list[str] = list(ENVELOPE_COLUMNS)


def _payload_type(name: str) -> pa.DataType:
    if name in _INT_SET:
        return pa.int64()
    if name in _LIST_SET:
        return pa.list_(pa.string())
    if name in ("content", "args", "turns"):
        return pa.large_string()  # may be large; avoids the 2 GiB per-array offset limit
    return pa.string()


SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("xt_id", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("source_type", pa.string()),
        pa.field("source_filesystem_id", pa.string()),
        pa.field("source_path", pa.string()),
        pa.field("identity_hash", pa.string()),
        *(pa.field(name, _payload_type(name)) for name in PAYLOAD_COLUMNS),
        pa.field("extra", pa.large_string()),
        pa.field("null_fields", pa.list_(pa.string())),
        pa.field("tx_id", pa.int64(), nullable=False),
        pa.field("tx_time", pa.timestamp("us", tz="UTC"), nullable=False),
    ],
    metadata={META_KEY: str(FORMAT_VERSION).encode()},
)
DATA_COLUMNS: tuple[str, ...] = tuple(n for n in SCHEMA.names if n not in ("tx_id", "tx_time"))


def check_json(value: Any, where: str) -> None:
    """Refuse what JSON cannot carry back unchanged (non-str keys, NaN, sets, bytes ...)."""
    t = type(value)
    if value is None or t is str or t is bool or t is int:
        return
    if t is float:
        if not math.isfinite(value):
            raise StoreError(f"{where}: {value!r} cannot be stored; use None or a finite number")
        return
    if t is list or t is tuple:
        for i, item in enumerate(value):
            check_json(item, f"{where}[{i}]")
        return
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise StoreError(f"{where}: key {k!r} is not a string; document keys must be str")
            check_json(v, f"{where}.{k}")
        return
    raise StoreError(
        f"{where}: value of type {t.__name__} is not JSON-shaped; "
        "use str, int, float, bool, None, list or dict"
    )


def _is_source(v: Any) -> bool:
    return type(v) is dict and len(v) == 3 and all(type(v.get(k)) is str for k in _SOURCE_KEYS)


def _is_str_list(v: Any) -> bool:
    return (type(v) is list or type(v) is tuple) and all(type(x) is str for x in v)


def validate(doc: Any, index: int) -> str:
    """Check one document for ``put`` and return its id."""
    if not isinstance(doc, Mapping):
        raise StoreError(f"document #{index} is a {type(doc).__name__}, not a dict")
    doc_id = doc.get(ID_KEY)
    if type(doc_id) is not str or not doc_id:
        raise StoreError(
            f"document #{index} has no string 'xt/id' (got {doc_id!r}); every document "
            "needs one, e.g. ctxnb.model.new_id()"
        )
    if type(doc.get("type")) is not str:
        raise StoreError(f"document {doc_id!r} has no string 'type' (got {doc.get('type')!r})")
    for k, v in doc.items():
        if type(k) is not str:
            raise StoreError(f"document {doc_id!r}: key {k!r} is not a string")
        check_json(v, f"document {doc_id!r} key {k!r}")
    return doc_id


def encode(docs: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Documents (already validated) to column lists, without the tx columns."""
    cols: dict[str, list[Any]] = {name: [] for name in DATA_COLUMNS}
    for doc in docs:
        extra: dict[str, Any] = {}
        nulls: list[str] = []
        cols["xt_id"].append(doc[ID_KEY])
        cols["type"].append(doc["type"])
        src = doc.get("source", _ABSENT)
        if src is not _ABSENT and src is not None and not _is_source(src):
            extra["source"] = src
        if _is_source(src):
            cols["source_type"].append(src["type"])
            cols["source_filesystem_id"].append(src["filesystemId"])
            cols["source_path"].append(src["path"])
        else:
            if src is None:
                nulls.append("source")
            cols["source_type"].append(None)
            cols["source_filesystem_id"].append(None)
            cols["source_path"].append(None)
        for name in ("identity_hash", *PAYLOAD_COLUMNS):
            v = doc.get(name, _ABSENT)
            out: Any = None
            if v is _ABSENT:
                pass
            elif v is None:
                nulls.append(name)
            elif name in _JSON_SET:
                out = dumps(v)
            elif name in _LIST_SET:
                if _is_str_list(v):
                    out = list(v)
                else:
                    extra[name] = v
            elif name in _INT_SET:
                if type(v) is int and _INT64_MIN <= v <= _INT64_MAX:
                    out = v
                else:
                    extra[name] = v
            elif type(v) is str:  # str fields and identity_hash
                out = v
            else:
                extra[name] = v
            cols[name].append(out)
        for k, v in doc.items():
            if k not in TYPED_KEYS:
                extra[k] = v
        cols["extra"].append(dumps(extra) if extra else None)
        cols["null_fields"].append(nulls or None)
    return cols


class _Absent:
    __slots__ = ()


_ABSENT: Any = _Absent()


DATA_SCHEMA: pa.Schema = pa.schema([SCHEMA.field(n) for n in DATA_COLUMNS])


def to_table(cols: dict[str, list[Any]]) -> pa.Table:
    """Column lists as an Arrow table of the data columns (no tx columns yet)."""
    arrays = []
    for field in DATA_SCHEMA:
        try:
            arrays.append(column(cols[field.name], field.type))
        except (pa.ArrowException, UnicodeError, OverflowError) as exc:
            raise StoreError(f"cannot store column {field.name!r}: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=DATA_SCHEMA)


def with_tx(table: pa.Table, tx_id: int, tx_time: datetime) -> pa.Table:
    """``table`` with its tx columns filled in, in :data:`SCHEMA`."""
    n = table.num_rows
    time_us = (tx_time - _EPOCH) // timedelta(microseconds=1)
    return with_tx_columns(table, [tx_id] * n, [time_us] * n)


def with_tx_columns(table: pa.Table, tx_ids: list[int], times_us: list[int]) -> pa.Table:
    """``table`` with a tx id and a tx time (microseconds since the epoch) per row."""
    table = table.append_column(SCHEMA.field("tx_id"), column(tx_ids, pa.int64()))
    table = table.append_column(
        SCHEMA.field("tx_time"),
        column(times_us, pa.int64()).view(SCHEMA.field("tx_time").type),
    )
    return table.replace_schema_metadata(SCHEMA.metadata)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def column(values: Sequence[Any], type: pa.DataType) -> pa.Array:
    """An Arrow array of ``values`` (None is null), for the store's column types.

    It is built from buffers, not by ``pa.array``: that one imports pandas on its first
    call (to ask whether the values are a pandas object), a quarter of a second in each
    process that writes to the store without pandas loaded (``ctxnb index``, a hook).
    Types: string, large_string, int64 and list of string.
    """
    n = len(values)
    present = [v is not None for v in values]
    nulls = n - sum(present)
    validity = None
    if nulls:
        bits = "".join("1" if p else "0" for p in reversed(present))
        validity = pa.py_buffer(int(bits, 2).to_bytes((n + 7) // 8, "little"))
    if pa.types.is_int64(type):
        data = array.array("q", [v if v is not None else 0 for v in values])
        out = pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)], nulls)
    elif pa.types.is_list(type):
        items = [x for v in values if v is not None for x in v]
        offsets = _offsets("i", [len(v) if v is not None else 0 for v in values])
        child = column(items, type.value_type)
        out = pa.Array.from_buffers(type, n, [validity, offsets], nulls, children=[child])
    else:
        wide = pa.types.is_large_string(type)
        if not wide and not pa.types.is_string(type):
            raise TypeError(f"no column builder for {type}")
        blobs = [v.encode("utf-8") if v is not None else b"" for v in values]
        offsets = _offsets("q" if wide else "i", [len(b) for b in blobs])
        data = pa.py_buffer(b"".join(blobs))
        out = pa.Array.from_buffers(type, n, [validity, offsets, data], nulls)
    # Structure only: the bytes came from str.encode (valid UTF-8) and the offsets from
    # their lengths; a full check would read every byte of every file's text again.
    out.validate()
    return out


def _offsets(code: str, lengths: list[int]) -> pa.Buffer:
    """The offsets buffer (``i``: int32, ``q``: int64) of items of these lengths."""
    offs = array.array(code, [0])
    offs.extend(itertools.accumulate(lengths))  # OverflowError past the type's range
    return pa.py_buffer(offs)


def decode(table: pa.Table) -> list[dict[str, Any]]:
    """Rows of a store table back to documents, exactly as they were put."""
    names = set(table.column_names)
    lists = {n: table.column(n).to_pylist() for n in DATA_COLUMNS if n in names}
    n = table.num_rows
    empty: list[Any] = [None] * n
    ids, types = lists["xt_id"], lists["type"]
    s_type = lists.get("source_type", empty)
    s_fs = lists.get("source_filesystem_id", empty)
    s_path = lists.get("source_path", empty)
    extras = lists.get("extra", empty)
    nulls_col = lists.get("null_fields", empty)
    fields = [
        (name, lists.get(name, empty), name in _JSON_SET)
        for name in ("identity_hash", *PAYLOAD_COLUMNS)
    ]
    out: list[dict[str, Any]] = []
    for i in range(n):
        nulls = nulls_col[i] or ()
        doc: dict[str, Any] = {ID_KEY: ids[i], "type": types[i]}
        if s_type[i] is not None:
            doc["source"] = {"type": s_type[i], "filesystemId": s_fs[i], "path": s_path[i]}
        elif "source" in nulls:
            doc["source"] = None
        for name, col, is_json in fields:
            v = col[i]
            if v is not None:
                doc[name] = json.loads(v) if is_json else v
            elif name in nulls:
                doc[name] = None
        if extras[i] is not None:
            doc.update(json.loads(extras[i]))
        out.append(doc)
    return out


# --- files -------------------------------------------------------------------------


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename or unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def publishing(tmp: str, final: str) -> Iterator[str]:
    """Write ``tmp`` in the block; on success fsync it and rename it to ``final``.

    A failure anywhere removes ``tmp``: readers only ever see whole files.
    """
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        _unlink_quiet(tmp)
        raise


# Columns whose values repeat across rows; dictionary-encoding the others (content,
# hashes) only costs time before the writer falls back to plain encoding.
_REPEATING = ("file_type", "tool", "status", "chat_ref", "session_ref", "session_id")
DICT_COLUMNS: list[str] = [
    *(c for c in ENVELOPE_COLUMNS if c not in ("tx_id", "tx_time")),
    *_REPEATING,
    "system_prompt_ref",
]


def parquet_writer(path: str, *, compression: str = "zstd") -> pq.ParquetWriter:
    """A writer of store Parquet (envelope statistics, page checksums).

    Snapshots use zstd (small, kept); segments snappy, which writes about twice as
    fast and every Parquet reader knows: a segment lives only until the next compaction.
    """
    return pq.ParquetWriter(
        path,
        SCHEMA,
        compression=compression,
        use_dictionary=DICT_COLUMNS,
        write_statistics=STATS_COLUMNS,
        write_page_checksum=True,
    )


def write_segment(table: pa.Table, tmp: str, final: str) -> int:
    """Write a segment to ``tmp``, rename it to ``final`` and make both durable.

    The file's data and the directory entry are fsynced at the same time (two threads),
    so a commit waits for one journal flush here instead of two in a row. Nothing names
    the segment until the caller's log line, which is written after this returns: a
    crash before then leaves an unreferenced file that the next writer removes.
    Returns the file size.
    """
    try:
        with parquet_writer(tmp, compression="snappy") as writer:
            writer.write_table(table)
        fd = os.open(tmp, os.O_RDONLY)
    except BaseException:
        _unlink_quiet(tmp)
        raise
    try:
        os.replace(tmp, final)
        folder = os.path.dirname(final)
        future = background(os.fsync, fd)
        fsync_dir(folder)
        future.result()
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_parquet_bytes(data: bytes, path: str) -> pa.Table:
    """Read a store Parquet file already read into memory (``path`` names it in errors)."""
    try:
        return _open_parquet(path, pa.BufferReader(data)).read(use_threads=False)
    except CorruptStoreError:
        raise
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
        raise _damaged(path, exc) from exc


def _open_parquet(path: str, source: Any = None) -> pq.ParquetFile:
    pf = pq.ParquetFile(path if source is None else source, page_checksum_verification=True)
    meta = pf.schema_arrow.metadata or {}
    if META_KEY not in meta:
        raise CorruptStoreError(
            f"{path} is a Parquet file but not one ctxnb wrote (no {META_KEY.decode()} "
            "key); move it out of the store directory",
            path=path,
        )
    if not pf.schema_arrow.equals(SCHEMA, check_metadata=False):
        raise CorruptStoreError(
            f"{path} does not have the store's schema; the file is damaged. Restore it "
            "from a backup",
            path=path,
        )
    return pf


def _damaged(path: str, exc: Exception) -> CorruptStoreError:
    return CorruptStoreError(
        f"{path} cannot be read as Parquet ({exc}); the file is damaged. Restore it "
        "from a backup of the store directory",
        path=path,
    )


def file_sha256(path: str) -> str:
    """SHA-256 (hex) of a whole file: recorded in the log line that names a segment or a
    snapshot, checked when the store opens it (a segment) and by ``ctxnb store verify``."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def footer_sha256(path: str) -> str:
    """SHA-256 (hex) of a Parquet file's footer (its metadata, their length and the magic).

    What opening checks of a snapshot, which can be large: a file cut, swapped or
    rewritten has another footer. A bit flipped inside a data page leaves it as it is;
    the page checksums and the whole-file hash (``ctxnb store verify``) catch that.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 8))
        tail = f.read(8)
        n = int.from_bytes(tail[:4], "little") if len(tail) == 8 else size
        start = max(0, size - 8 - n)
        f.seek(start)
        return hashlib.sha256(f.read(size - start)).hexdigest()


def read_parquet(path: str, *, columns: Iterable[str] | None = None) -> pa.Table:
    """Read a store Parquet file, refusing foreign or damaged ones with a clear error."""
    try:
        return _open_parquet(path).read(columns=list(columns) if columns is not None else None)
    except (FileNotFoundError, CorruptStoreError):
        raise
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
        # (a damaged schema's names or metadata fail to decode as UTF-8)
        raise _damaged(path, exc) from exc


def row_groups(path: str) -> Iterator[pa.Table]:
    """A store Parquet file one row group at a time (what keeps compaction's memory flat)."""
    try:
        pf = _open_parquet(path)
        for i in range(pf.num_row_groups):
            yield pf.read_row_group(i, use_threads=False).replace_schema_metadata(SCHEMA.metadata)
    except (FileNotFoundError, CorruptStoreError):
        raise
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
        # (a damaged schema's names or metadata fail to decode as UTF-8)
        raise _damaged(path, exc) from exc


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
