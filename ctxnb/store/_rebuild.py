"""Rebuilding a snapshot's doc cache from its Parquet file.

Private to :mod:`ctxnb.store.objectstore`. The doc cache is derived data: when it is missing or
damaged, opening the store writes it again, one row group at a time.
"""

from __future__ import annotations

import pyarrow as pa

from . import _cache as cache
from . import _fmt as fmt
from . import _log as tlog


def rebuild_docs(parquet: str, docs_path: str, tmp: str) -> None:
    """Write the doc cache of a snapshot from its Parquet (through ``tmp``)."""
    groups = fmt.row_groups(parquet)
    first = next(groups, None)
    chunks = [] if first is None else [first]

    def blobs(chunk: pa.Table) -> list[bytes]:
        return [tlog.dumps(d).encode() for d in fmt.decode(chunk)]

    first_blobs = blobs(first) if first is not None else []

    with (
        fmt.publishing(tmp, docs_path),
        cache.writing(tmp, cache.train_dict(first_blobs)) as writer,
    ):
        for chunk in [*chunks, *groups]:
            data = first_blobs if chunk is first else blobs(chunk)
            writer.write(*_cache_columns(chunk), [writer.compress(b) for b in data])


def _cache_columns(table: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    return tuple(  # type: ignore[return-value]
        table.column(c).combine_chunks() for c in ("xt_id", "tx_id", "type")
    )
