"""The trace ledger, the audit log and the store as pandas frames.

The Agent Trace ledger nests records → files → conversations → ranges; :func:`load_trace`
flattens it with Arrow's multi-threaded JSON reader and list kernels (one row per range),
and gives every row its record's verdict from the ledger verifier
(:mod:`ctxnb.govern.ledgercheck`) in the ``integrity`` column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._util.jsonl import SkippedLine, iter_jsonl
from ..govern import ledgercheck

if TYPE_CHECKING:
    from ..govern.ledger import TraceLedger
    from ..store.objectstore import ObjectStore
    from ..workspace import Workspace

__all__ = [
    "TRACE_COLUMNS",
    "audit",
    "load_trace",
    "scan",
    "trace_to_parquet",
]

TRACE_COLUMNS = (
    "record_id",
    "timestamp",
    "vcs_type",
    "revision",
    "file",
    "conversation_index",
    "contributor_type",
    "model_id",
    "intent_id",
    "session_id",
    "start_line",
    "end_line",
    "lines",
    "content_hash",
    "tool",
    "mutation_class",
    "approval",
    "integrity",
)
# The verdicts of ctxnb.govern.ledgercheck, as the categories of the integrity column.
INTEGRITY = pa.array(ledgercheck.INTEGRITY, pa.string())

INTENT_URN = "urn:ctxnb:intent:"
SESSION_URN = "urn:ctxnb:session:"

# Columns with few distinct values become categoricals: less memory, faster filters.
_CATEGORICAL = (
    "vcs_type",
    "revision",
    "file",
    "contributor_type",
    "model_id",
    "intent_id",
    "session_id",
    "tool",
    "mutation_class",
    "approval",
)

_CONTRIBUTOR = pa.struct([("type", pa.string()), ("model_id", pa.string())])
_RANGE = pa.struct(
    [
        ("start_line", pa.int64()),
        ("end_line", pa.int64()),
        ("content_hash", pa.string()),
        ("contributor", _CONTRIBUTOR),
    ]
)
_CONVERSATION = pa.struct(
    [
        ("url", pa.string()),
        ("contributor", _CONTRIBUTOR),
        ("ranges", pa.list_(_RANGE)),
        ("related", pa.list_(pa.struct([("type", pa.string()), ("url", pa.string())]))),
    ]
)
_FILE = pa.struct([("path", pa.string()), ("conversations", pa.list_(_CONVERSATION))])
# The part of the Agent Trace 0.1.0 schema that analysis reads; other keys are ignored.
RECORD_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("timestamp", pa.string()),
        ("vcs", pa.struct([("type", pa.string()), ("revision", pa.string())])),
        ("files", pa.list_(_FILE)),
        (
            "metadata",
            pa.struct(
                [
                    ("intent_id", pa.string()),
                    ("session_id", pa.string()),
                    ("tool", pa.string()),
                    ("mutation_class", pa.string()),
                    ("prev_hash", pa.string()),
                    # A human's answer to the approval question (engine and sandbox).
                    ("approval", pa.struct([("approved", pa.bool_()), ("by", pa.string())])),
                ]
            ),
        ),
    ]
)


# -- reading JSONL -------------------------------------------------------------------------
def _split_cut_tail(data: bytes) -> tuple[bytes, int]:
    """Drop a last line a crash cut short (no newline and not valid JSON)."""
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    if not tail.strip():
        return data, 0
    try:
        json.loads(tail)
    except ValueError:
        return data[:end], 1
    return data + b"\n", 0


def _records_table_fast(data: bytes) -> pa.Table:
    import pyarrow.json as pj

    opts = pj.ParseOptions(explicit_schema=RECORD_SCHEMA, unexpected_field_behavior="ignore")
    # Big blocks: fewer chunks to stitch; Arrow still parses them on every core.
    read = pj.ReadOptions(block_size=1 << 24)
    return pj.read_json(pa.py_buffer(data), read_options=read, parse_options=opts)


def _str(x: Any) -> str | None:
    if x is None or isinstance(x, (dict, list)):
        return None
    return x if isinstance(x, str) else json.dumps(x)


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _contrib(x: Any) -> dict[str, Any] | None:
    if not isinstance(x, Mapping):
        return None
    return {"type": _str(x.get("type")), "model_id": _str(x.get("model_id"))}


def _coerce(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A record reduced to :data:`RECORD_SCHEMA`, dropping values of the wrong shape."""

    def lst(x: Any) -> list[Any]:
        return [v for v in x if isinstance(v, Mapping)] if isinstance(x, list) else []

    vcs = rec.get("vcs")
    meta = rec.get("metadata")
    return {
        "id": _str(rec.get("id")),
        "timestamp": _str(rec.get("timestamp")),
        "vcs": (
            {"type": _str(vcs.get("type")), "revision": _str(vcs.get("revision"))}
            if isinstance(vcs, Mapping)
            else None
        ),
        "files": [
            {
                "path": _str(f.get("path")),
                "conversations": [
                    {
                        "url": _str(c.get("url")),
                        "contributor": _contrib(c.get("contributor")),
                        "ranges": [
                            {
                                "start_line": _int(r.get("start_line")),
                                "end_line": _int(r.get("end_line")),
                                "content_hash": _str(r.get("content_hash")),
                                "contributor": _contrib(r.get("contributor")),
                            }
                            for r in lst(c.get("ranges"))
                        ],
                        "related": [
                            {"type": _str(x.get("type")), "url": _str(x.get("url"))}
                            for x in lst(c.get("related"))
                        ],
                    }
                    for c in lst(f.get("conversations"))
                ],
            }
            for f in lst(rec.get("files"))
        ],
        "metadata": (
            {
                **{
                    k: _str(meta.get(k))
                    for k in ("intent_id", "session_id", "tool", "mutation_class", "prev_hash")
                },
                "approval": _approval(meta.get("approval")),
            }
            if isinstance(meta, Mapping)
            else None
        ),
    }


def _approval(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("approved"), bool):
        return None
    return {"approved": value["approved"], "by": _str(value.get("by"))}


def _json_objects(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSON-lines text, and how many lines were not one."""
    skipped: list[SkippedLine] = []
    rows = [rec for _, rec in iter_jsonl(data, skipped=skipped)]
    return rows, len(skipped)


def _records_table_slow(data: bytes) -> tuple[pa.Table, int, list[int]]:
    """Line by line: skips lines that are not JSON objects, coerces odd field shapes."""
    skipped: list[SkippedLine] = []
    pairs = list(iter_jsonl(data, skipped=skipped))
    table = pa.Table.from_pylist([_coerce(r) for _, r in pairs], schema=RECORD_SCHEMA)
    return table, len(skipped), [n for n, _ in pairs]


def _read_records(data: bytes) -> tuple[pa.Table, int, list[int]]:
    """The records, the lines skipped, and each record's line number."""
    data, skipped = _split_cut_tail(data)
    if not data.strip():
        return RECORD_SCHEMA.empty_table(), skipped, []
    try:
        table = _records_table_fast(data)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # A damaged line in the middle or a field of an unexpected type: the slow path
        # reads what it can instead of failing the whole ledger.
        table, more, linenos = _records_table_slow(data)
        return table, skipped + more, linenos
    # Arrow reads every line that is not blank, in order, or fails.
    linenos = [n for n, raw in enumerate(data.split(b"\n"), 1) if raw.strip()]
    if len(linenos) != table.num_rows:  # not expected; the line-by-line reader decides
        table, more, linenos = _records_table_slow(data)
        return table, skipped + more, linenos
    return table, skipped, linenos


def _verdicts(path: Path, data: bytes, table: pa.Table, linenos: list[int]) -> Any:
    """The ledger verifier's check of a ledger whose records Arrow has read: the links
    and ids come from Arrow's columns, so no line is parsed twice (a line with a copy in
    the store's log is parsed again to be compared)."""
    raws = ledgercheck.split_lines(data)
    links: list[Any] = [ledgercheck.NOT_A_RECORD] * len(raws)
    ids: list[str | None] = [None] * len(raws)
    rec = table.combine_chunks()
    prevs = _field(_column(rec, "metadata"), "prev_hash").to_pylist()
    for n, rid, prev in zip(linenos, _column(rec, "id").to_pylist(), prevs, strict=True):
        links[n - 1], ids[n - 1] = prev, rid
    anchors = ledgercheck.store_anchors(ledgercheck.default_store_dir(path))
    return ledgercheck.check_data(path, data, raws, links, ids=ids, anchors=anchors)


# -- flattening ------------------------------------------------------------------------------
def _explode(lists: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """One output row per list element, and one (null) row for an empty or null list.

    Returns the parent row of every output row, the element (null for the stand-in
    rows) and each element's position within its list.
    """
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    n = len(lists)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    eff = np.maximum(lengths, 1)
    parent = np.repeat(np.arange(n, dtype=np.int64), eff)
    first = np.cumsum(eff) - eff
    pos = np.arange(len(parent), dtype=np.int64) - np.repeat(first, eff)
    starts = np.asarray(lists.offsets)[:n].astype(np.int64)
    child = np.repeat(starts, eff) + pos
    empty = np.repeat(lengths == 0, eff)
    if not empty.any():
        # No empty lists: the elements are one contiguous run of the child array, and a
        # zero-copy slice avoids a deep copy of every nested level below.
        first_child = int(starts[0]) if n else 0
        return parent, lists.values.slice(first_child, len(parent)), pos
    values = lists.values.take(pa.array(child, mask=empty))
    return parent, values, pos


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _field(struct: pa.Array, name: str) -> pa.Array:
    return pc.struct_field(struct, name)


def _first_urn(related: pa.Array, prefix: str) -> pa.Array:
    """Per conversation, the id of its first ``related`` URL with this prefix (or null)."""
    if isinstance(related, pa.ChunkedArray):
        related = related.combine_chunks()
    n = len(related)
    if n == 0 or related.null_count == n:
        return pa.nulls(n, pa.string())
    parents = pc.list_parent_indices(related).to_numpy()
    urls = _field(related.flatten(), "url")
    hit = pc.fill_null(pc.starts_with(urls, prefix), False).to_numpy(zero_copy_only=False)
    if not hit.any():
        return pa.nulls(n, pa.string())
    hit_rows = np.flatnonzero(hit)
    conv, first = np.unique(parents[hit_rows], return_index=True)
    ids = pc.utf8_slice_codeunits(urls.take(pa.array(hit_rows[first])), len(prefix))
    if pc.any(pc.match_substring(ids, "%")).as_py():
        # URNs carry ids percent-encoded; decode each distinct id once.
        enc = ids.dictionary_encode()
        decoded = pa.array([unquote(x) for x in enc.dictionary.to_pylist()], pa.string())
        ids = decoded.take(enc.indices)
    where = np.full(n, -1, dtype=np.int64)
    where[conv] = np.arange(len(conv))
    return ids.take(pa.array(where, mask=where < 0))


def _timestamps(ts: pa.Array) -> pa.Array:
    try:
        return pc.cast(ts, pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Naive or unusual timestamps: pandas' ISO 8601 parser, naive read as UTC.
        parsed = pd.to_datetime(
            pd.Series(ts.to_pylist(), dtype=object), utc=True, format="ISO8601", errors="coerce"
        )
        return pa.array(parsed.dt.as_unit("us"), pa.timestamp("us", tz="UTC"))


def _integrity(verdicts: list[str | None]) -> pa.Array:
    """Per record, its verdict as a dictionary array over every verdict (a categorical
    with all four categories in pandas, whichever occur)."""
    index = {v: i for i, v in enumerate(ledgercheck.INTEGRITY)}
    codes = pa.array([index.get(v) if v else None for v in verdicts], pa.int8())
    return pa.DictionaryArray.from_arrays(codes, INTEGRITY)


def _approval_text(approval: pa.Array) -> pa.Array:
    """Per record, ``approved by NAME`` or ``rejected by NAME`` (null: nobody was asked)."""
    verdict = pc.if_else(_field(approval, "approved"), "approved", "rejected")
    by = pc.fill_null(_field(approval, "by"), "")
    text = pc.binary_join_element_wise(verdict, by, " by ")
    # "approved by " when the decision names nobody: the verdict alone.
    return pc.if_else(pc.equal(by, ""), verdict, text)


def _flatten(records: pa.Table, integrity: pa.Array) -> pa.Table:
    """Records → one row per (file, conversation, range); see :data:`TRACE_COLUMNS`.
    ``integrity`` holds each record's verdict."""
    rec = records.combine_chunks()
    rec_parent, files, _ = _explode(_column(rec, "files"))
    file_parent, convs, conv_pos = _explode(_field(files, "conversations"))
    conv_parent, ranges, _ = _explode(_field(convs, "ranges"))

    # Row r of the result → its conversation, file and record rows.
    conv_of_row = conv_parent
    file_of_row = file_parent[conv_of_row]
    rec_of_row = rec_parent[file_of_row]
    take_rec = pa.array(rec_of_row)

    def rec_col(*path: str) -> pa.Array:
        arr = _column(rec, path[0])
        for name in path[1:]:
            arr = _field(arr, name)
        return arr

    conv_contrib = _field(convs, "contributor").take(pa.array(conv_of_row))
    range_contrib = _field(ranges, "contributor")
    # A range's own contributor replaces the conversation's as a whole (type and model).
    has_own = pc.is_valid(range_contrib)
    contrib_type = pc.if_else(has_own, _field(range_contrib, "type"), _field(conv_contrib, "type"))
    model_id = pc.if_else(
        has_own, _field(range_contrib, "model_id"), _field(conv_contrib, "model_id")
    )

    related = _field(convs, "related")
    meta_intent = rec_col("metadata", "intent_id")
    meta_session = rec_col("metadata", "session_id")
    take_conv = pa.array(conv_of_row)
    # The conversation's own related URN is the most specific; metadata fills the gaps.
    intent = pc.coalesce(
        _first_urn(related, INTENT_URN).take(take_conv), meta_intent.take(take_rec)
    )
    session = pc.coalesce(
        _first_urn(related, SESSION_URN).take(take_conv), meta_session.take(take_rec)
    )
    start = _field(ranges, "start_line")
    end = _field(ranges, "end_line")
    lines = pc.add(pc.subtract(end, start), 1)
    approval = _approval_text(rec_col("metadata", "approval")).take(take_rec)
    return pa.table(
        {
            "record_id": rec_col("id").take(take_rec),
            "timestamp": _timestamps(rec_col("timestamp")).take(take_rec),
            "vcs_type": rec_col("vcs", "type").take(take_rec),
            "revision": rec_col("vcs", "revision").take(take_rec),
            "file": _field(files, "path").take(pa.array(file_of_row)),
            "conversation_index": pa.array(conv_pos[conv_of_row]).cast(pa.int32()),
            "contributor_type": contrib_type,
            "model_id": model_id,
            "intent_id": intent,
            "session_id": session,
            "start_line": start,
            "end_line": end,
            "lines": lines,
            "content_hash": _field(ranges, "content_hash"),
            "tool": rec_col("metadata", "tool").take(take_rec),
            "mutation_class": rec_col("metadata", "mutation_class").take(take_rec),
            "approval": approval,
            "integrity": integrity.take(take_rec),
        }
    )


def _encode(table: pa.Table) -> pa.Table:
    for name in _CATEGORICAL:
        i = table.schema.get_field_index(name)
        enc = pc.dictionary_encode(table.column(name)).combine_chunks()
        # Mostly distinct values gain nothing from a dictionary and cost a slow categorical.
        if len(enc.dictionary) <= max(1000, table.num_rows // 4):
            table = table.set_column(i, name, enc)
    return table


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    df = table.to_pandas(
        # Nullable integers keep "no range" apart from line 0.
        types_mapper={pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}.get,
    )
    return df


def _trace_table(path: Path) -> tuple[pa.Table, int, ledgercheck.LedgerCheck | None]:
    """The flattened table, the lines skipped, and the verifier's check (None for a
    Parquet file, whose ``integrity`` column was filled when it was written)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if "approval" not in table.column_names:  # written before it was a column
            at = table.column_names.index("mutation_class") + 1
            table = table.add_column(at, "approval", pa.nulls(table.num_rows, pa.string()))
        if "integrity" not in table.column_names:  # written before ctxnb checked
            table = table.append_column("integrity", _integrity([None] * table.num_rows))
        return table, 0, None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no trace ledger at {str(path)!r}; a governed workspace keeps it in "
            ".orchestration/agent_trace.jsonl"
        ) from None
    records, skipped, linenos = _read_records(data)
    check = _verdicts(path, data, records, linenos)
    verdicts = [check.integrity.get(n) for n in linenos]
    return _encode(_flatten(records, _integrity(verdicts))), skipped, check


def trace_frame_from_jsonl(data: bytes, integrity: list[str | None] | None = None) -> pd.DataFrame:
    """:func:`load_trace`'s frame of ledger records given as JSON-lines bytes, with each
    record's verdict given in ``integrity`` (in line order; null when not given)."""
    records, skipped, linenos = _read_records(data)
    if integrity is None:
        verdicts: list[str | None] = [None] * len(linenos)
    else:
        verdicts = [integrity[n - 1] if n <= len(integrity) else None for n in linenos]
    df = _to_pandas(_encode(_flatten(records, _integrity(verdicts))))
    df.attrs["skipped_lines"] = skipped
    return df


def _ledger_path(source: str | os.PathLike[str] | TraceLedger | Workspace) -> Path:
    if hasattr(source, "root") and not isinstance(source, (str, os.PathLike)):
        return Path(source.root) / ".orchestration" / "agent_trace.jsonl"
    if hasattr(source, "path") and not isinstance(source, (str, os.PathLike)):
        return Path(source.path)
    p = Path(source)  # type: ignore[arg-type]
    return p / ".orchestration" / "agent_trace.jsonl" if p.is_dir() else p


def load_trace(
    source: str | os.PathLike[str] | TraceLedger | Workspace,
    *,
    on_tampered: Literal["mark", "raise"] = "mark",
) -> pd.DataFrame:
    """The trace ledger as a DataFrame with one row per attributed range.

    Every field shape the Agent Trace 0.1.0 schema allows is handled: a record
    without ``vcs`` or ``metadata``, a range with its own contributor (it overrides the
    conversation's type and model), a conversation with no ranges or a file with no
    conversations (one row with null lines). ``intent_id`` and ``session_id`` come from
    the conversation's ``related`` URNs (``urn:ctxnb:intent:<id>``,
    ``urn:ctxnb:session:<id>``), else from the record's ``metadata``; ``tool`` and
    ``mutation_class`` from ``metadata``, and ``approval`` from its human decision
    (``approved by NAME`` or ``rejected by NAME``; null when nobody was asked).

    A line cut by a crash (or any line that is not a JSON object) is skipped; the count
    is in ``df.attrs["skipped_lines"]``.

    The ledger is checked as it is read, by the verifier every reader of it uses
    (:mod:`ctxnb.govern.ledgercheck`: the hash chain, and each record against its copy in
    the store's log). Like ``on_bad_lines`` of :func:`pandas.read_csv`, ``on_tampered``
    says what a changed record does: by default every row carries its record's verdict
    in the ``integrity`` column (a categorical: ``verified``, ``chained``, ``unchained``,
    ``tampered``), so ``df[df.integrity != "tampered"]`` keeps the evidence, and
    ``df.attrs["ledger_problems"]`` lists what is wrong, ``(line, message)``, and
    ``df.attrs["missing_records"]`` the ids of records the store's log holds and the
    ledger lacks. A ``.parquet`` file keeps the verdicts found when it was written.

    Args:
        source: a ``.jsonl`` ledger, a ``.parquet`` file made by
            :func:`trace_to_parquet`, a :class:`~ctxnb.govern.ledger.TraceLedger`, a
            workspace or its directory.
        on_tampered: ``"mark"`` (the ``integrity`` column) or ``"raise"``.

    Raises:
        TamperedTraceError: with ``on_tampered="raise"``, when a line was changed
            outside ctxnb.
        ValueError: ``on_tampered`` is neither.

    Returns:
        A DataFrame with the columns of :data:`TRACE_COLUMNS`; ``timestamp`` is
        ``datetime64[us, UTC]``, repetitive text columns are categoricals and line
        numbers nullable integers.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = p.write_text('{"version":"0.1.0","id":"r1","timestamp":"2025-01-01T00:00:00Z",'
        ...                  '"files":[{"path":"a.py","conversations":[{"ranges":[]}]}]}\\n'
        ...                  '{"version":"0.1.0","id":"r2","tim')
        >>> df = load_trace(p)
        >>> (len(df), df.attrs["skipped_lines"], bool(df["start_line"].isna().all()))
        (1, 1, True)
    """
    if on_tampered not in ("mark", "raise"):
        raise ValueError(f"on_tampered={on_tampered!r}: use 'mark' (the default) or 'raise'")
    path = _ledger_path(source)
    table, skipped, check = _trace_table(path)
    if on_tampered == "raise":
        if check is not None:
            check.raise_if_tampered()
        elif pc.any(pc.equal(pc.cast(table.column("integrity"), pa.string()), "tampered")).as_py():
            from ..errors import TamperedTraceError

            raise TamperedTraceError(
                f"{path} holds rows of records found tampered when it was written; "
                "read it with on_tampered='mark' and filter the integrity column",
                path=str(path),
            )
    df = _to_pandas(table)
    df.attrs["skipped_lines"] = skipped
    df.attrs["ledger_problems"] = [] if check is None else list(check.problems)
    df.attrs["missing_records"] = (
        [] if check is None else [str(a.record.get("id")) for a in check.missing]
    )
    return df


def trace_to_parquet(
    jsonl: str | os.PathLike[str] | TraceLedger | Workspace,
    parquet: str | os.PathLike[str],
) -> int:
    """Flatten a ledger once and write it to Parquet; returns the lines skipped.

    ``load_trace`` on the Parquet file then takes a fraction of a second even for a
    million records, and pandas, DuckDB or Polars read it without ctxnb.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "t.jsonl").write_text('{"version":"0.1.0","id":"r1",'
        ...     '"timestamp":"2025-01-01T00:00:00Z","files":[]}\\n')
        >>> trace_to_parquet(d / "t.jsonl", d / "t.parquet")
        0
        >>> load_trace(d / "t.parquet")["record_id"].tolist()
        ['r1']
    """
    import pyarrow.parquet as pq

    table, skipped, _ = _trace_table(_ledger_path(jsonl))
    out = Path(parquet)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    # LZ4 decodes fastest; unique text columns skip Parquet's dictionary pages, which
    # would only be abandoned half-way and slow the read.
    unique = {"record_id", "content_hash"}
    pq.write_table(
        table,
        tmp,
        compression="lz4",
        use_dictionary=[c for c in table.column_names if c not in unique],
    )
    os.replace(tmp, out)  # readers never see a half-written file
    return skipped


# -- audit log and store ----------------------------------------------------------------------
AUDIT_COLUMNS = (
    "ts",
    "caller",
    "session_id",
    "tool",
    "args",
    "duration_ms",
    "success",
    "error_code",
    "before_sha256",
    "after_sha256",
)


def audit(source: str | os.PathLike[str] | Workspace) -> pd.DataFrame:
    """The audit log (``.ctxnb/audit.jsonl``) as a DataFrame, one row per tool call.

    ``ts`` is parsed to UTC datetimes, ``args`` stays a dict per row. A line cut by a
    crash is skipped and counted in ``df.attrs["skipped_lines"]``.

    Args:
        source: the log file, a workspace, or a workspace directory.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "audit.jsonl").write_text(
        ...     '{"ts":"2025-01-01T00:00:00Z","tool":"read_file","success":true}\\n{"ts":')
        >>> df = audit(d / "audit.jsonl")
        >>> (df["tool"].tolist(), df.attrs["skipped_lines"])
        (['read_file'], 1)
    """
    if hasattr(source, "root") and not isinstance(source, (str, os.PathLike)):
        path = Path(source.root) / ".ctxnb" / "audit.jsonl"
    else:
        path = Path(source)  # type: ignore[arg-type]
        if path.is_dir():
            path = path / ".ctxnb" / "audit.jsonl"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    rows, skipped = _json_objects(data)
    extra = sorted({k for r in rows for k in r} - set(AUDIT_COLUMNS))
    df = pd.DataFrame(rows, columns=[*AUDIT_COLUMNS, *extra])
    df["ts"] = pd.to_datetime(df["ts"], utc=True, format="ISO8601", errors="coerce")
    df.attrs["skipped_lines"] = skipped
    return df


def scan(store: ObjectStore | Workspace, type: str | None = None, **kwargs: Any) -> pd.DataFrame:
    """The store's objects of one type as a DataFrame (see ``ObjectStore.scan``).

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.py").write_text("x = 1\\n")
        >>> ws = Workspace.open(root)
        >>> _ = ws.index()
        >>> scan(ws, "file")["char_count"].tolist()
        [6]
    """
    st: Any = getattr(store, "store", store)  # a workspace holds its store
    return st.scan(type, format="pandas", **kwargs)
