"""The store's doc cache: each snapshot version as one zstd-compressed JSON document.

Private to :mod:`ctxnb.store`; described for outside readers in ``docs/store-format.md``.

Next to each snapshot Parquet file ctxnb keeps an Arrow IPC file with one row per
version, in the snapshot's row order: ``xt_id``, ``tx_id``, ``type`` and the document
as compact JSON. The file is memory-mapped, so ``get`` and ``history`` read one row
without decoding Parquet. Since layout 2 every document is its own zstd frame,
compressed with a dictionary trained on the snapshot's documents (kept, base64, in the
schema metadata): a frame decompresses in about a microsecond, and the cache is about
the size of the zstd-compressed Parquet instead of several times it. Layout 1 (plain
JSON in a ``doc`` column, one record batch) is still read.
"""

from __future__ import annotations

import base64
import bisect
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from ..errors import CorruptStoreError

FORMAT_META = b"ctxnb.store.objectstore.format"
LAYOUT_META = b"ctxnb.docs.layout"
DICT_META = b"ctxnb.docs.zstd_dict"
LAYOUT = 2
LEVEL = 3
BATCH_ROWS = 65536  # the snapshot's row-group size: batch i holds row group i's rows
_DICT_SIZE = 32768
# Training on 1,000 documents compresses as well as on 4,000 (measured) in a quarter of
# the time.
_SAMPLES = 1000
_SAMPLE_BYTES = 2 << 20

_FIELDS = [
    pa.field("xt_id", pa.string(), nullable=False),
    pa.field("tx_id", pa.int64(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
]
# Layout 1: uncompressed JSON. Read only.
V1_SCHEMA = pa.schema([*_FIELDS, pa.field("doc", pa.large_binary(), nullable=False)])
V2_SCHEMA = pa.schema([*_FIELDS, pa.field("doc_zstd", pa.large_binary(), nullable=False)])


def train_dict(samples: Sequence[bytes]) -> bytes:
    """A zstd dictionary for documents like ``samples`` (b"" when there are too few)."""
    if len(samples) > _SAMPLES:
        samples = random.Random(len(samples)).sample(list(samples), _SAMPLES)
    picked, total = [], 0
    for s in samples:
        if total + len(s) > _SAMPLE_BYTES:
            break
        picked.append(bytes(s))
        total += len(s)
    # Below a few hundred documents a dictionary saves little and training may fail.
    if len(picked) < 200 or total < 64 << 10:
        return b""
    try:
        size = min(_DICT_SIZE, total // 8)  # zstd's advice: samples ~100x the dictionary
        return zstandard.train_dictionary(size, picked, level=LEVEL).as_bytes()
    except zstandard.ZstdError:
        return b""


def _zdict(raw: bytes) -> zstandard.ZstdCompressionDict | None:
    return zstandard.ZstdCompressionDict(raw) if raw else None


def compressor(zdict: bytes) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(
        level=LEVEL,
        dict_data=_zdict(zdict),
        write_content_size=True,
        # 4 bytes a frame: a flipped bit is an error, not a silently different document.
        write_checksum=True,
        write_dict_id=False,
    )


class DocsWriter:
    """Writes a layout-2 doc cache batch by batch (so a compaction can stream)."""

    def __init__(self, sink: pa.NativeFile, zdict: bytes) -> None:
        meta = {FORMAT_META: b"1", LAYOUT_META: str(LAYOUT).encode()}
        if zdict:
            meta[DICT_META] = base64.b64encode(zdict)
        self.schema = V2_SCHEMA.with_metadata(meta)
        self._writer = pa.ipc.new_file(sink, self.schema)
        self.compress = compressor(zdict).compress
        self.zdict = zdict
        self.rows = 0

    def write(
        self, ids: pa.Array, txs: pa.Array, types: pa.Array, frames: pa.Array | list[bytes]
    ) -> None:
        """One batch: ``frames`` are the rows' documents, each compressed by ``compress``."""
        column = frames if isinstance(frames, pa.Array) else pa.array(frames, pa.large_binary())
        batch = pa.RecordBatch.from_arrays([ids, txs, types, column], schema=self.schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        self._writer.close()


@contextmanager
def writing(path: str, zdict: bytes) -> Iterator[DocsWriter]:
    """A :class:`DocsWriter` on ``path``; the file is complete when the block exits."""
    with pa.OSFile(path, "wb") as sink:
        writer = DocsWriter(sink, zdict)
        yield writer
        writer.close()


class DocsFile:
    """A memory-mapped doc cache: rows sorted by (xt_id, tx_id), one document each.

    ``index`` maps an id to its position k; its versions are rows ``starts[k]`` to
    ``starts[k + 1] - 1``. Lookups go through plain memoryviews, which is what keeps
    ``get`` and ``history`` fast without a Python object per version.
    """

    __slots__ = (
        "path",
        "rows",
        "index",
        "starts",
        "txs",
        "_mm",
        "_batches",
        "_first",
        "_offsets",
        "_data",
        "_decompress",
        "_tx_array",
        "zdict",
    )

    def __init__(self, path: str, expected_rows: int, max_tx: int = 2**62) -> None:
        self.path = path
        try:
            self._mm = pa.memory_map(path, "r")
            reader = pa.ipc.open_file(self._mm)
            schema = reader.schema
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
            for b in batches:
                # Damaged offsets would otherwise be followed out of the mapping.
                b.validate(full=True)
        except (OSError, pa.ArrowException) as exc:
            raise CorruptStoreError(f"{path} cannot be read ({exc})", path=path) from exc
        meta = schema.metadata or {}
        self.zdict: bytes | None = None  # None: layout 1, no frames to copy
        if schema.equals(V2_SCHEMA, check_metadata=False):
            raw_dict = base64.b64decode(meta[DICT_META]) if DICT_META in meta else b""
            self.zdict = raw_dict
            try:
                self._decompress: Any = zstandard.ZstdDecompressor(
                    dict_data=_zdict(raw_dict)
                ).decompress
            except zstandard.ZstdError as exc:
                raise CorruptStoreError(f"{path}: bad zstd dictionary ({exc})", path=path) from exc
        elif schema.equals(V1_SCHEMA, check_metadata=False):
            self._decompress = bytes
        else:
            raise CorruptStoreError(f"{path} has an unexpected schema", path=path)
        self._batches = batches
        self.rows = sum(b.num_rows for b in batches)
        if self.rows != expected_rows:
            raise CorruptStoreError(
                f"{path} has {self.rows} rows, the transaction log says {expected_rows}",
                path=path,
            )
        self._first: list[int] = []
        self._offsets: list[memoryview] = []
        self._data: list[memoryview] = []
        row = 0
        for b in batches:
            doc = b.column(3)
            if doc.offset != 0:
                raise CorruptStoreError(f"{path}: unexpected array offset", path=path)
            bufs = doc.buffers()
            self._first.append(row)
            self._offsets.append(memoryview(bufs[1]).cast("B").cast("q"))  # type: ignore[arg-type]
            self._data.append(memoryview(bufs[2]) if bufs[2] is not None else memoryview(b""))  # type: ignore[arg-type]
            row += b.num_rows
        txs = [b.column(1) for b in batches]
        self._tx_array = (
            txs[0] if len(txs) == 1 else pa.concat_arrays(txs) if txs else pa.array([], pa.int64())
        )
        self.txs = _values_view(self._tx_array, "q")
        if self.rows:
            ids = self.ids()
            prev, nxt = ids.slice(0, self.rows - 1), ids.slice(1)
            same = pc.equal(prev, nxt)
            later = pc.less(self._tx_array.slice(0, self.rows - 1), self._tx_array.slice(1))
            # Rows sorted by id, then tx, with txs in the log's range: cheap checks that
            # a damaged id or tx column is refused (and rebuilt) instead of misread.
            if not (
                pc.all(pc.less_equal(prev, nxt)).as_py() is not False
                and pc.all(pc.or_(pc.invert(same), later)).as_py() is not False
                and 1 <= pc.min(self._tx_array).as_py() <= pc.max(self._tx_array).as_py() <= max_tx
            ):
                raise CorruptStoreError(f"{path}: its rows are out of order", path=path)
            change = pc.invert(same)
            bounds = pc.add(pc.indices_nonzero(change), 1).to_pylist()
            uniq = pc.take(ids, pa.array([0, *bounds], pa.int64())).to_pylist()
            self.starts: list[int] = [0, *bounds, self.rows]
            self.index: dict[str, int] = dict(zip(uniq, range(len(uniq)), strict=True))
        else:
            self.starts, self.index = [0], {}

    def ids(self) -> pa.Array:
        return _column(self._batches, 0, pa.string())

    def tx_array(self) -> pa.Array:
        return self._tx_array

    def types(self) -> pa.Array:
        return _column(self._batches, 2, pa.string())

    def decompressor(self) -> Any:
        """Stored frame -> JSON bytes."""
        return self._decompress

    def raw(self, row: int) -> bytes:
        """The JSON bytes of one row."""
        try:
            return self._decompress(self.stored(row))  # type: ignore[no-any-return]
        except zstandard.ZstdError as exc:
            raise CorruptStoreError(
                f"{self.path} row {row} is damaged ({exc}); delete this file and reopen the "
                "store to rebuild it from its snapshot",
                path=self.path,
            ) from exc

    def stored(self, row: int) -> memoryview:
        """One row's document as stored (a zstd frame in layout 2)."""
        b = bisect.bisect_right(self._first, row) - 1 if len(self._first) > 1 else 0
        offsets = self._offsets[b]
        r = row - self._first[b]
        return self._data[b][offsets[r] : offsets[r + 1]]

    def latest_rows(self) -> list[int]:
        return [s - 1 for s in self.starts[1:]]

    def close(self) -> None:
        for view in (self.txs, *self._offsets, *self._data):
            view.release()
        self._batches = []
        self._tx_array = None
        self._mm.close()


def _column(batches: list[pa.RecordBatch], i: int, type: pa.DataType) -> pa.Array:
    cols = [b.column(i) for b in batches]
    if len(cols) == 1:
        return cols[0]
    return pa.concat_arrays(cols) if cols else pa.array([], type)


def _values_view(arr: pa.Array, fmt: str) -> memoryview:
    buf = arr.buffers()[1]
    start = arr.offset
    if buf is None:
        return memoryview(b"").cast("B").cast(fmt)
    view = memoryview(buf).cast("B").cast(fmt)  # type: ignore[arg-type]
    return view[start : start + len(arr)]
