"""Tests of the object store on real Parquet files and real processes."""

from __future__ import annotations

import base64
import doctest
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import zstandard
from _paths import REPO, TESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxnb.store._cache
import ctxnb.store._fmt
import ctxnb.store._log
import ctxnb.store.objectstore
from ctxnb.errors import CorruptStoreError, StoreError
from ctxnb.model import (
    ChatObject,
    FileObject,
    FilesystemSource,
    SessionObject,
    SystemPromptObject,
    ToolCallObject,
)
from ctxnb.store.objectstore import ObjectStore, TxRecord, Version

WORKER = TESTS / "store_worker.py"


class StepClock:
    """A clock that moves one second per call (the part under test is the store)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    s = ObjectStore(tmp_path / "store", clock=StepClock())
    yield s
    s.close()


@pytest.fixture
def segment_store(tmp_path: Path) -> ObjectStore:
    """A store that writes every transaction as a Parquet segment (none inline)."""
    s = ObjectStore(tmp_path / "store", clock=StepClock(), inline_max_bytes=0)
    yield s
    s.close()


def model_docs() -> list[dict[str, Any]]:
    src = FilesystemSource(filesystem_id="fs1", path="/ws/a.py")
    file = FileObject.new(src, content="x = 1\n", file_type="python", data=b"x = 1\n")
    deleted = FileObject.new(
        FilesystemSource(filesystem_id="fs1", path="/ws/gone.py"),
        content=None,
        file_type="python",
        data=None,
    )
    tool = ToolCallObject(
        id="tc1",
        tool="read_file",
        args={"path": "/ws/a.py", "range": [1, 3], "opts": {"x": None}},
        args_display="read_file a.py",
        file_refs=[file.id],
        content="x = 1",
    )
    chat = ChatObject(
        id="chat1",
        turns=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        turn_count=2,
        toolcall_refs=["tc1"],
    )
    session = SessionObject(
        id="s1",
        session_id="sess-1",
        chat_ref="chat1",
        session_index=[file.id, "tc1"],
        active_set=[file.id],
        pinned_set=[],
    )
    prompt = SystemPromptObject(id="sp1", content="be brief")
    return [o.to_doc() for o in (file, deleted, tool, chat, session, prompt)]


# --- round trips ------------------------------------------------------------------------


def test_model_documents_round_trip_and_load_back(store: ObjectStore) -> None:
    docs = model_docs()
    store.put(docs)
    for doc in docs:
        assert store.get(doc["xt/id"]) == doc
    reopened = ObjectStore(store.path)
    assert all(reopened.get(d["xt/id"]) == d for d in docs)
    assert isinstance(FileObject.from_doc(reopened.get(docs[0]["xt/id"])), FileObject)
    reopened.close()


def test_absent_and_none_are_kept_apart(store: ObjectStore) -> None:
    store.put(
        [
            {"xt/id": "none", "type": "file", "content": None, "source": None, "file_refs": None},
            {"xt/id": "absent", "type": "file"},
        ]
    )
    assert store.get("none") == {
        "xt/id": "none",
        "type": "file",
        "content": None,
        "source": None,
        "file_refs": None,
    }
    assert store.get("absent") == {"xt/id": "absent", "type": "file"}


def test_values_that_do_not_fit_their_column_and_unknown_types_round_trip(
    store: ObjectStore,
) -> None:
    odd = {
        "xt/id": "odd",
        "type": "file",
        "char_count": "12",  # not an int
        "turn_count": True,  # bool is not an int here
        "file_refs": ["a", 1],  # not all strings
        "content": 3.5,
        "source": {"type": "filesystem", "path": "/p"},  # no filesystemId
        "status": ["ok"],
        "args": "just a string",
        "huge": 2**80,
        "tx_id": "a field named like a column",
    }
    relations = {
        "xt/id": "rel-1",
        "type": "relations",
        "edges": [["a", "b"], ["b", "c", {"w": 0.5}]],
        "meta": {"nested": {"deeper": [None, True, -0.0, 1e300]}},
        "unicode": "naïve ☃ \U0001f600",
    }
    store.put([odd, relations])
    assert store.get("odd") == odd
    assert store.get("rel-1") == relations
    got = store.get("odd")
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in odd.items()}


def test_tuples_come_back_as_lists(store: ObjectStore) -> None:
    store.put([{"xt/id": "t", "type": "x", "file_refs": ("a", "b"), "pair": (1, 2)}])
    assert store.get("t") == {"xt/id": "t", "type": "x", "file_refs": ["a", "b"], "pair": [1, 2]}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(
    ["content", "char_count", "args", "turns", "file_refs", "source", "identity_hash"]
    + ["status", "active_set", "turn_count", "extra", "null_fields", "other", "xt_id"]
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "xt/id": draw(st.text(min_size=1, max_size=8)),
        "type": draw(st.sampled_from(["file", "toolcall", "chat", "session", "relations"])),
    }
    for name in draw(st.lists(field_names, max_size=6, unique=True)):
        if name in ("file_refs", "active_set") and draw(st.booleans()):
            doc[name] = draw(st.lists(st.text(max_size=5), max_size=3))
        elif name == "source" and draw(st.booleans()):
            doc[name] = {"type": "filesystem", "filesystemId": "fs", "path": draw(st.text())}
        else:
            doc[name] = draw(json_values)
    return doc


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(documents(), min_size=1, max_size=5), inline=st.booleans())
def test_property_any_json_document_round_trips(tmp_path_factory, docs, inline) -> None:
    # Inline (in the log line) and as a Parquet segment; read back by the writer, by a
    # fresh reader of the log, from a scan, and after compaction folds them into Parquet.
    path = tmp_path_factory.mktemp("prop")
    limit = ctxnb.store.objectstore.INLINE_MAX_BYTES if inline else 0
    with ObjectStore(path, inline_max_bytes=limit) as store:
        store.put(docs)
        expected = {d["xt/id"]: d for d in docs}  # the last of a repeated id wins
        assert store.get_many(expected) == expected
        with ObjectStore(path) as reader:
            assert reader.get_many(expected) == expected
            assert sorted(reader.scan(format="arrow").column("xt_id").to_pylist()) == sorted(
                expected
            )
        store.compact()
        assert {i: store.get(i) for i in expected} == expected
    with ObjectStore(path) as reopened:
        assert reopened.get_many(expected) == expected


# --- transactions -----------------------------------------------------------------------


def test_put_returns_tx_records_and_repeated_ids_last_wins(store: ObjectStore) -> None:
    tx = store.put([{"xt/id": "a", "type": "n", "v": 1}, {"xt/id": "a", "type": "n", "v": 2}])
    assert isinstance(tx, TxRecord)
    assert (tx.tx_id, tx.count) == (1, 1)
    assert tx.tx_time.tzinfo is not None and tx.tx_time.utcoffset() == timedelta(0)
    assert store.get("a")["v"] == 2
    assert len(store.history("a")) == 1
    empty = store.put([])
    assert (empty.tx_id, empty.count) == (2, 0)
    assert store.transactions() == [tx, empty]
    assert store.latest_tx() == empty


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"type": "n"}, "xt/id"),
        ({"xt/id": 5, "type": "n"}, "xt/id"),
        ({"xt/id": "a"}, "'type'"),
        ({"xt/id": "a", "type": "n", "x": float("nan")}, "'x'"),
        ({"xt/id": "a", "type": "n", "x": {1: "int key"}}, "not a string"),
        ({"xt/id": "a", "type": "n", "x": {1, 2}}, "set"),
        ({"xt/id": "a", "type": "n", "content": "\udc80"}, "content"),
    ],
)
def test_bad_documents_are_refused_and_nothing_is_committed(
    store: ObjectStore, doc: dict, needle: str
) -> None:
    store.put([{"xt/id": "ok", "type": "n"}])
    with pytest.raises(StoreError, match=needle):
        store.put([{"xt/id": "fine", "type": "n"}, doc])
    assert len(store.transactions()) == 1
    assert store.get("fine") is None


def test_history_and_as_of_by_tx_time_and_record(store: ObjectStore) -> None:
    t1 = store.put([{"xt/id": "a", "type": "n", "v": 1}])
    t2 = store.put([{"xt/id": "b", "type": "n"}])
    t3 = store.put([{"xt/id": "a", "type": "n", "v": 3}])
    hist = store.history("a")
    assert [(v.tx_id, v.tx_time, v.doc["v"]) for v in hist] == [
        (1, t1.tx_time, 1),
        (3, t3.tx_time, 3),
    ]
    assert isinstance(hist[0], Version) and hist[1].version_id == "a@3"
    assert store.as_of("a", 1)["v"] == 1
    assert store.as_of("a", t2)["v"] == 1
    assert store.as_of("a", 3)["v"] == 3
    assert store.as_of("a", 99)["v"] == 3
    assert store.as_of("a", 0) is None
    assert store.as_of("b", t1) is None
    assert store.as_of("a", t2.tx_time + timedelta(milliseconds=500))["v"] == 1
    assert store.as_of("a", t3.tx_time)["v"] == 3
    assert store.as_of("a", t1.tx_time - timedelta(seconds=1)) is None
    with pytest.raises(ValueError, match="timezone-aware"):
        store.as_of("a", datetime(2025, 1, 1))
    assert store.history("missing") == [] and store.get("missing") is None


def test_tx_times_never_go_backwards(tmp_path: Path) -> None:
    times = iter(
        [datetime(2025, 1, 2, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)]
    )  # the wall clock steps back
    with ObjectStore(tmp_path, clock=lambda: next(times)) as store:
        a = store.put([{"xt/id": "a", "type": "n"}])
        b = store.put([{"xt/id": "b", "type": "n"}])
    assert b.tx_time == a.tx_time


def test_naive_clock_is_refused(tmp_path: Path) -> None:
    with ObjectStore(tmp_path, clock=lambda: datetime(2025, 1, 1)) as store:
        with pytest.raises(StoreError, match="aware"):
            store.put([{"xt/id": "a", "type": "n"}])


# --- compaction -------------------------------------------------------------------------


def _answers(store: ObjectStore, ids: list[str]) -> Any:
    txs = store.transactions()
    return (
        [store.get(i) for i in ids],
        [[(v.tx_id, v.tx_time, v.doc) for v in store.history(i)] for i in ids],
        [[store.as_of(i, t) for t in txs] for i in ids],
        [[store.as_of(i, t.tx_time) for t in txs] for i in ids],
        store.ids(),
        store.ids("file"),
        txs,
        store.scan(all_versions=True, format="arrow").to_pylist(),
        store.scan("file", as_of=2, format="arrow").to_pylist(),
    )


def test_compaction_keeps_every_version_and_every_answer(store: ObjectStore) -> None:
    for k in range(6):
        docs = [{"xt/id": f"f{i}", "type": "file", "content": f"v{k}"} for i in range(k % 3 + 1)]
        docs.append({"xt/id": f"t{k}", "type": "toolcall", "tool": "x", "args": {"k": k}})
        store.put(docs)
    ids = store.ids()
    before = _answers(store, ids)
    report = store.compact()
    assert (report.upto_tx, report.segments_merged, report.versions) == (6, 6, 18)
    assert _answers(store, ids) == before
    assert list((store.path / "segments").iterdir()) == []
    # more writes, then a second compaction that folds the old snapshot in
    store.put([{"xt/id": "f0", "type": "file", "content": "v6"}])
    before = _answers(store, ids)
    again = store.compact()
    assert (again.upto_tx, again.segments_merged, again.versions) == (7, 1, 19)
    assert _answers(store, ids) == before
    with ObjectStore(store.path) as reopened:
        assert _answers(reopened, ids) == before
    # parquet, doc cache, and the archive of the transactions the log rotated out
    kinds = sorted(p.name.split("-")[0] + p.suffix for p in (store.path / "snapshots").iterdir())
    assert kinds == ["snap.arrow", "snap.parquet", "txs.arrow"]
    assert store.compact().segments_merged == 0


def test_streaming_compaction_merges_row_group_by_row_group(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Groups of 7 rows make every case of the merge happen with a few hundred versions:
    # ids whose versions straddle groups, new versions of an id in the old snapshot's
    # last group, ids that sort before, between and after the old ones.
    monkeypatch.setattr(ctxnb.store._cache, "BATCH_ROWS", 7)
    rng = random.Random(3)
    expected: dict[str, list[int]] = {}
    for round_ in range(4):
        for _ in range(5):
            keys = rng.sample([f"k{n:03d}" for n in range(60)], rng.randint(1, 25))
            tx = store.put([{"xt/id": k, "type": "n", "r": round_} for k in keys]).tx_id
            for k in keys:
                expected.setdefault(k, []).append(tx)
        report = store.compact()
        assert report.versions == sum(map(len, expected.values()))
        snap = Path(report.snapshot)
        groups = [
            pq.ParquetFile(snap).metadata.row_group(i).num_rows
            for i in range(pq.ParquetFile(snap).num_row_groups)
        ]
        assert groups[:-1] == [7] * (len(groups) - 1) and 0 < groups[-1] <= 7
        with ObjectStore(store.path) as fresh:
            assert {k: [v.tx_id for v in fresh.history(k)] for k in fresh.ids()} == expected
        rows = pq.read_table(snap, columns=["xt_id", "tx_id"]).to_pylist()
        assert rows == sorted(rows, key=lambda r: (r["xt_id"], r["tx_id"]))


def test_doc_cache_is_compressed_and_readable_without_ctxnb(store: ObjectStore) -> None:
    rng = random.Random(5)
    words = "def return self import class value data path file read write index".split()
    for t in range(6):
        store.put(
            [
                {"xt/id": f"f{i}", "type": "file", "content": " ".join(rng.choices(words, k=80))}
                for i in range(t * 150, t * 150 + 600)
            ]
        )
    store.compact()
    snapshots = store.path / "snapshots"
    parquet = next(snapshots.glob("*.parquet")).stat().st_size
    cache_file = next(snapshots.glob("*.docs.arrow"))
    assert cache_file.stat().st_size <= 2 * parquet
    # What docs/store-format.md tells an outside reader to do:
    table = pa.ipc.open_file(pa.memory_map(str(cache_file))).read_all()
    zdict = zstandard.ZstdCompressionDict(
        base64.b64decode(table.schema.metadata[b"ctxnb.docs.zstd_dict"])
    )
    dctx = zstandard.ZstdDecompressor(dict_data=zdict)
    rows = table.to_pylist()
    assert {r["xt_id"] for r in rows} == set(store.ids())
    for r in rows[::97]:
        assert json.loads(dctx.decompress(r["doc_zstd"])) == store.as_of(r["xt_id"], r["tx_id"])
    # A small compaction on top keeps the dictionary and copies the old frames as they are.
    ids = store.ids()
    store.put(
        [{"xt/id": "f7", "type": "file", "content": "changed"}, {"xt/id": "new", "type": "n"}]
    )
    before = _answers(store, ids + ["new"])
    store.compact()
    again = next(snapshots.glob("*.docs.arrow"))
    assert again != cache_file
    table2 = pa.ipc.open_file(pa.memory_map(str(again))).read_all()
    assert (
        table2.schema.metadata[b"ctxnb.docs.zstd_dict"]
        == table.schema.metadata[b"ctxnb.docs.zstd_dict"]
    )
    assert table2.num_rows == table.num_rows + 2
    with ObjectStore(store.path) as fresh:
        assert _answers(fresh, ids + ["new"]) == before


def _compacted_model_store(store: ObjectStore) -> tuple[list[str], Any]:
    """Model documents and a tool call, compacted; their ids and every answer."""
    store.put(model_docs())
    store.put([{"xt/id": "tc1", "type": "toolcall", "tool": "t", "status": "fail"}])
    store.compact()
    ids = store.ids()
    return ids, _answers(store, ids)


def _write_layout1_cache(store_dir: Path) -> None:
    """Replace the doc cache with what ctxnb wrote before layout 2 (plain JSON)."""
    with ObjectStore(store_dir) as s:
        rows = [
            (k, v.tx_id, v.doc["type"], json.dumps(v.doc, separators=(",", ":")).encode())
            for k in s.ids()
            for v in s.history(k)
        ]
    schema = pa.schema(
        [
            pa.field("xt_id", pa.string(), nullable=False),
            pa.field("tx_id", pa.int64(), nullable=False),
            pa.field("type", pa.string(), nullable=False),
            pa.field("doc", pa.large_binary(), nullable=False),
        ],
        metadata={b"ctxnb.store.objectstore.format": b"1"},
    )
    table = pa.Table.from_arrays(
        [pa.array(c, t.type) for c, t in zip(zip(*rows, strict=True), schema, strict=True)],
        schema=schema,
    )
    cache_file = next((store_dir / "snapshots").glob("*.docs.arrow"))
    with pa.OSFile(str(cache_file), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        w.write_table(table)
    log = store_dir / "txlog"
    lines = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["op"] in ("compact", "base"):
            entry["docs_size"] = cache_file.stat().st_size
            del entry["crc"]  # an older ctxnb's line, without a checksum
        lines.append(json.dumps(entry, separators=(",", ":")))
    log.write_text("\n".join(lines) + "\n")
    (store_dir / "writer.lock").write_bytes(b"")  # an older ctxnb kept no mark there


def test_store_with_a_layout1_doc_cache_opens_and_compacts(store: ObjectStore, caplog) -> None:
    ids, before = _compacted_model_store(store)
    store.close()
    _write_layout1_cache(store.path)
    with ObjectStore(store.path) as old:
        assert _answers(old, ids) == before
        old.put([{"xt/id": "tc1", "type": "toolcall", "tool": "t", "status": "ok"}])
        old.compact()
        cache_file = next((store.path / "snapshots").glob("*.docs.arrow"))
        schema = pa.ipc.open_file(pa.memory_map(str(cache_file))).schema
        assert "doc_zstd" in schema.names
        assert old.get("tc1")["status"] == "ok" and len(old.history("tc1")) == 3
    assert "rebuilding" not in caplog.text


def test_other_process_sees_commits_and_compactions(store: ObjectStore) -> None:
    store.put([{"xt/id": "a", "type": "n", "v": 1}])
    reader = ObjectStore(store.path)
    assert reader.get("a")["v"] == 1
    store.put([{"xt/id": "a", "type": "n", "v": 2}])
    assert reader.get("a")["v"] == 2
    store.compact()
    store.put([{"xt/id": "a", "type": "n", "v": 3}])
    assert [v.doc["v"] for v in reader.history("a")] == [1, 2, 3]
    assert reader.scan("n", columns=["xt_id", "tx_id"], format="arrow").num_rows == 1
    reader.close()


# --- scan and outside readers -----------------------------------------------------------


def test_scan_typed_columns(store: ObjectStore) -> None:
    docs = model_docs()
    store.put(docs)
    store.put([{**docs[0], "content": "x = 2\n", "char_count": 6}])
    files = store.scan("file")
    assert list(files.columns) == [
        "xt_id",
        "type",
        "source_type",
        "source_filesystem_id",
        "source_path",
        "identity_hash",
        "content",
        "file_type",
        "char_count",
        "source_hash",
        "content_hash",
        "extra",
        "tx_id",
        "tx_time",
    ]
    assert len(files) == 2 and str(files["char_count"].dtype) == "int64"
    assert set(files["content"].dropna()) == {"x = 2\n"}
    assert str(files["tx_time"].dtype) == "datetime64[us, UTC]"
    assert len(store.scan("file", all_versions=True)) == 3
    assert set(store.scan("file", as_of=1)["content"].dropna()) == {"x = 1\n"}
    tools = store.scan("toolcall", format="arrow")
    assert tools.column("file_refs").to_pylist() == [[docs[0]["xt/id"]]]
    assert json.loads(tools.column("args")[0].as_py()) == docs[2]["args"]
    assert len(store.scan()) == 6
    assert list(store.scan(columns=["xt_id", "null_fields"]).columns) == ["xt_id", "null_fields"]
    with pytest.raises(ValueError, match="unknown column"):
        store.scan(columns=["nope"])


def test_empty_store_scans_and_reads(store: ObjectStore) -> None:
    assert store.scan().empty and store.scan(format="arrow").num_rows == 0
    assert store.ids() == [] and store.latest_tx() is None and store.transactions() == []
    report = store.compact()
    assert (report.upto_tx, report.segments_merged, report.snapshot) == (None, 0, None)


@pytest.mark.parametrize("compacted", [False, True])
def test_files_are_plain_parquet_for_outside_readers(
    segment_store: ObjectStore, compacted: bool
) -> None:
    store = segment_store
    store.put(model_docs())
    store.put([{"xt/id": "tc1", "type": "toolcall", "tool": "read_file", "status": "fail"}])
    if compacted:
        store.compact()
    files = sorted(str(p) for p in store.path.rglob("*.parquet"))
    assert len(files) == (1 if compacted else 2)
    frame = pd.concat([pd.read_parquet(f) for f in files])
    assert len(frame) == 7
    assert sorted(frame.loc[frame["xt_id"] == "tc1", "status"]) == ["fail", "ok"]
    table = pads.dataset(files, format="parquet").to_table(filter=pads.field("type") == "chat")
    assert table.column("turn_count").to_pylist() == [2]
    con = duckdb.connect()
    rows = con.execute(
        "SELECT xt_id, max(tx_id) FROM read_parquet(?) WHERE type = 'toolcall' GROUP BY xt_id",
        [files],
    ).fetchall()
    assert rows == [("tc1", 2)]
    paths = con.execute(
        "SELECT source_path FROM read_parquet(?) WHERE source_path IS NOT NULL ORDER BY 1",
        [files],
    ).fetchall()
    assert paths == [("/ws/a.py",), ("/ws/gone.py",)]
    con.close()
    meta = pq.ParquetFile(files[0]).metadata
    stats = {
        meta.schema.column(i).path: meta.row_group(0).column(i).is_stats_set
        for i in range(meta.num_columns)
    }
    assert stats["xt_id"] and stats["tx_id"] and stats["type"]
    assert not stats["content"] and not stats["extra"]


# --- damage and foreign files -----------------------------------------------------------


def _segments(store: ObjectStore) -> list[Path]:
    return sorted((store.path / "segments").iterdir())


def test_foreign_file_is_named(store: ObjectStore) -> None:
    store.put([{"xt/id": "a", "type": "n"}])
    (store.path / "notes.txt").write_text("mine")
    with pytest.raises(CorruptStoreError) as err:
        ObjectStore(store.path)
    assert err.value.path == str(store.path / "notes.txt")
    assert "notes.txt" in str(err.value) and "move it out" in str(err.value)
    (store.path / "notes.txt").unlink()
    stray = store.path / "segments" / "data.parquet"
    pq.write_table(
        pd.DataFrame({"x": [1]}).pipe(lambda f: __import__("pyarrow").Table.from_pandas(f)), stray
    )
    with pytest.raises(CorruptStoreError) as err:
        ObjectStore(store.path)
    assert err.value.path == str(stray)


def test_directory_with_other_files_is_not_taken_over(tmp_path: Path) -> None:
    (tmp_path / "report.csv").write_text("a,b\n")
    with pytest.raises(CorruptStoreError, match="not a ctxnb store") as err:
        ObjectStore(tmp_path)
    assert err.value.path == str(tmp_path / "report.csv")
    with pytest.raises(StoreError, match="no ctxnb store"):
        ObjectStore(tmp_path / "missing", create=False)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete"])
def test_damaged_committed_segment_is_named(segment_store: ObjectStore, damage: str) -> None:
    store = segment_store
    store.put([{"xt/id": "a", "type": "n", "text": "x" * 1000}])
    store.put([{"xt/id": "b", "type": "n"}])
    seg = _segments(store)[0]
    data = seg.read_bytes()
    if damage == "truncate":
        seg.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        seg.write_bytes(data[:100] + bytes(len(data) - 200) + data[-100:])
    else:
        seg.unlink()
    with pytest.raises(CorruptStoreError) as err:
        ObjectStore(store.path)
    assert err.value.path == str(seg)
    assert seg.name in str(err.value)


def test_damaged_log_line_is_named_not_skipped(store: ObjectStore) -> None:
    for k in range(3):
        store.put([{"xt/id": f"a{k}", "type": "n"}])
    log = store.path / "txlog"
    lines = log.read_bytes().split(b"\n")
    lines[1] = lines[1][:20] + b"#" + lines[1][21:]
    log.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptStoreError, match="line 2") as err:
        ObjectStore(store.path)
    assert err.value.path == str(log)


def test_torn_last_line_and_unlogged_segment_are_invisible_then_cleaned(
    segment_store: ObjectStore,
) -> None:
    store = segment_store
    store.put([{"xt/id": "a", "type": "n", "v": 1}])
    seg = _segments(store)[0]
    log = store.path / "txlog"
    committed = log.read_bytes()
    # What a writer killed mid-commit leaves: a renamed segment and half a log line.
    orphan = store.path / "segments" / "seg-000000000002-0123abcd.parquet"
    orphan.write_bytes(seg.read_bytes())
    tmp = store.path / "segments" / ".tmp-deadbeef-seg-000000000002-0123abcd.parquet"
    tmp.write_bytes(b"PAR1 half")
    with log.open("ab") as f:
        f.write(b'{"op":"tx","tx":2,"t":17356')
    reader = ObjectStore(store.path)
    assert [t.tx_id for t in reader.transactions()] == [1]
    assert reader.get("a")["v"] == 1
    tx = reader.put([{"xt/id": "a", "type": "n", "v": 2}])
    assert tx.tx_id == 2
    assert not orphan.exists() and not tmp.exists()
    assert log.read_bytes().startswith(committed) and log.read_bytes().count(b"\n") == 2
    assert store.get("a")["v"] == 2
    reader.close()


def test_damaged_doc_cache_is_rebuilt_from_parquet(store: ObjectStore, caplog) -> None:
    ids, before = _compacted_model_store(store)
    cache = next((store.path / "snapshots").glob("*.docs.arrow"))
    cache.write_bytes(b"\0" * cache.stat().st_size)
    with ObjectStore(store.path) as reopened:
        assert _answers(reopened, ids) == before
    assert "rebuilding the doc cache" in caplog.text


def test_damaged_snapshot_parquet_is_named(store: ObjectStore) -> None:
    store.put(model_docs())
    store.compact()
    snap = next((store.path / "snapshots").glob("*.parquet"))
    snap.write_bytes(snap.read_bytes()[:-10])
    with pytest.raises(CorruptStoreError) as err:
        ObjectStore(store.path)
    assert err.value.path == str(snap)


# --- processes --------------------------------------------------------------------------


def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    store_dir, go = tmp_path / "store", tmp_path / "go"
    ObjectStore(store_dir).close()
    n, names = 25, ["w0", "w1", "w2"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "writer", str(store_dir), name, str(n), str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    go.touch()
    store = ObjectStore(store_dir)
    compacted = 0
    while any(p.poll() is None for p in procs):
        # Read and compact while they write; every visible tx must be whole.
        latest = store.latest_tx()
        if latest is not None:
            rows = store.scan(as_of=latest, all_versions=True, columns=["tx_id"], format="arrow")
            assert rows.num_rows == sum(t.count for t in store.transactions()[: latest.tx_id])
        if compacted < 3:
            store.compact()
            compacted += 1
        time.sleep(0.01)
    reported: dict[str, list[int]] = {}
    for name, p in zip(names, procs, strict=True):
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        reported[name] = [json.loads(line)["tx"] for line in out.splitlines()]
    all_txs = sorted(tx for txs in reported.values() for tx in txs)
    assert all_txs == list(range(1, 3 * n + 1))  # every tx kept, ids unique and dense
    assert [t.tx_id for t in store.transactions()] == all_txs
    for name in names:
        assert [v.tx_id for v in store.history(f"{name}-latest")] == reported[name]
        for i in range(n):
            for j in range(3):
                doc = store.get(f"{name}-{i}-{j}")
                assert doc == {
                    "xt/id": f"{name}-{i}-{j}",
                    "type": "note",
                    "writer": name,
                    "i": i,
                    "j": j,
                }
    store.close()


# --- surface ----------------------------------------------------------------------------


def test_for_workspace_repr_and_close(tmp_path: Path) -> None:
    store = ObjectStore.for_workspace(tmp_path)
    assert store.path == tmp_path / ".ctxnb" / "store"
    store.put([{"xt/id": "a", "type": "n"}])
    assert repr(store) == f"ObjectStore({str(store.path)!r}, latest_tx=1)"
    store.close()
    store.close()
    assert "closed" in repr(store)
    with pytest.raises(StoreError, match="closed"):
        store.get("a")
    with ObjectStore.for_workspace(tmp_path, create=False) as again:
        assert again.get("a") == {"xt/id": "a", "type": "n"}


def test_docstring_examples_run() -> None:
    result = doctest.testmod(ctxnb.store.objectstore, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 20 and result.failed == 0


def test_store_files_are_created_with_expected_layout(store: ObjectStore) -> None:
    store.put([{"xt/id": "a", "type": "n"}])
    names = sorted(os.listdir(store.path))
    assert names == ["ctxnb-store.json", "segments", "snapshots", "txlog", "writer.lock"]
    marker = json.loads((store.path / "ctxnb-store.json").read_text())
    assert marker == {"format": "ctxnb-store", "version": ctxnb.store._log.FORMAT_VERSION}


def test_format_doc_snippets_read_a_real_store(store: ObjectStore) -> None:
    """The outside-reader examples in docs/store-format.md work on a real store."""
    store.put([{"xt/id": "a", "type": "file", "content": "1"}, {"xt/id": "b", "type": "file"}])
    store.put([{"xt/id": "a", "type": "file", "content": "2"}])
    store.compact()
    store.put([{"xt/id": "a", "type": "file", "content": "3"}])  # inline, in the log
    store.put([{"xt/id": "c", "type": "file", "content": "x" * 40_000}])  # a segment
    text = (REPO / "docs" / "store-format.md").read_text()
    py_blocks = [b.split("```")[0] for b in text.split("```python\n")[1:]]
    ns: dict[str, Any] = {}
    exec(py_blocks[2], ns)
    files, docs = ns["live_data"](str(store.path))
    assert sorted(files) == sorted(str(p) for p in store.path.rglob("*.parquet"))
    assert len(files) == 2
    assert docs == [{"xt/id": "a", "type": "file", "content": "3", "tx_id": 3}]
    # After a compaction every version is in Parquet: globbing the files is enough.
    store.compact()
    glob_pattern = repr(str(store.path) + "/**/*.parquet")
    code = py_blocks[1].replace('f"{root}/.ctxnb/store/**/*.parquet"', glob_pattern)
    assert glob_pattern in code, "the pandas example in docs/store-format.md changed shape"
    exec(code, ns)
    assert dict(zip(ns["latest"]["xt_id"], ns["latest"]["content"], strict=True))["a"] == "3"
    sql = text.split("```sql\n")[1].split("```")[0]
    sql = sql.replace(".ctxnb/store", str(store.path)).replace("SELECT *", "SELECT xt_id, content")
    assert sorted(duckdb.sql(sql).fetchall()) == [("a", "3"), ("b", None), ("c", "x" * 40_000)]


_cells = st.one_of(st.none(), st.text())


@given(
    st.lists(_cells, max_size=40),
    st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=40),
    st.lists(st.none() | st.lists(st.text(), max_size=4), max_size=40),
)
def test_store_columns_are_what_pyarrow_builds(strs, ints, lists) -> None:
    column = ctxnb.store._fmt.column
    for typ in (pa.string(), pa.large_string()):
        assert column(strs, typ).equals(pa.array(strs, typ))
    assert column(ints, pa.int64()).equals(pa.array(ints, pa.int64()))
    typ = pa.list_(pa.string())
    assert column(lists, typ).equals(pa.array(lists, typ))


def test_writing_to_the_store_does_not_import_pandas(tmp_path: Path) -> None:
    # pa.array imports pandas on first use (0.2 s); ctxnb index and the hooks write
    # without it.
    code = (
        "import sys\n"
        "from ctxnb import Workspace\n"
        f"root = {str(tmp_path)!r}\n"
        # Large enough to be written as a Parquet segment, not inline in the log.
        "open(root + '/a.py', 'w').write('x = 1\\n' * 8000)\n"
        "assert Workspace.open(root).index(progress=False).created == 1\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --- inline transactions ----------------------------------------------------------------


def test_small_transactions_commit_inline_and_compaction_folds_them(store: ObjectStore) -> None:
    small = store.put([{"xt/id": "a", "type": "file", "content": "x = 1\n"}])
    big = store.put([{"xt/id": "b", "type": "file", "content": "y" * 40_000}])
    log = (store.path / "txlog").read_bytes().split(b"\n")
    head = [json.loads(line) for line in log[:2]]
    assert [(h["op"], h["tx"]) for h in head] == [("txdocs", 1), ("tx", 2)]
    assert log[0].startswith(b'{"op":"txdocs",') and b'"content":"x = 1\\n"' in log[0]
    assert len(_segments(store)) == 1  # the big one only
    with ObjectStore(store.path) as reader:  # another reader, from the log alone
        assert reader.get("a") == {"xt/id": "a", "type": "file", "content": "x = 1\n"}
        assert [v.tx_id for v in reader.history("a")] == [small.tx_id]
        scan = reader.scan("file", columns=["xt_id", "char_count", "tx_id"], format="arrow")
        assert scan.column("tx_id").to_pylist() == [small.tx_id, big.tx_id]
    report = store.compact()
    assert (report.segments_merged, report.versions) == (2, 2)
    assert _segments(store) == []
    frame = pd.read_parquet(next((store.path / "snapshots").glob("*.parquet")))
    assert sorted(frame["xt_id"]) == ["a", "b"]
    store.put([{"xt/id": "a", "type": "file", "content": "x = 2\n"}])
    with ObjectStore(store.path) as reader:
        assert [v.doc["content"] for v in reader.history("a")] == ["x = 1\n", "x = 2\n"]
        assert reader.as_of("a", small)["content"] == "x = 1\n"


def test_inline_documents_are_copied_at_put(store: ObjectStore) -> None:
    doc = {"xt/id": "a", "type": "n", "tags": ["x"]}
    store.put([doc])
    doc["tags"].append("changed after put")
    store.compact()  # built from what was committed, not from the caller's dict
    assert store.get("a") == {"xt/id": "a", "type": "n", "tags": ["x"]}


def test_torn_inline_line_is_invisible_then_dropped(store: ObjectStore) -> None:
    store.put([{"xt/id": "a", "type": "n", "v": 1}])
    log = store.path / "txlog"
    committed = log.read_bytes()
    line = committed.replace(b'"tx":1', b'"tx":2').replace(b'"v":1', b'"v":2')
    with log.open("ab") as f:  # a writer killed mid-line: no newline yet
        f.write(line[: len(line) // 2])
    # No fold at open: tx 1's time comes from the fixture's clock, long past by the
    # reader's, and opening folds inline transactions older than the interval.
    with ObjectStore(store.path, fold_after=None) as reader:
        assert reader.get("a")["v"] == 1 and len(reader.transactions()) == 1
        assert reader.put([{"xt/id": "a", "type": "n", "v": 3}]).tx_id == 2
    lines = log.read_bytes().splitlines()
    assert log.read_bytes().startswith(committed)
    assert [json.loads(line)["op"] for line in lines] == ["txdocs", "txdocs", "fold"]
    assert store.get("a")["v"] == 3


@pytest.mark.parametrize(
    "damage",
    [
        (b'"n":1', b'"n":2'),  # the count does not match the documents
        (b'"xt/id":"a"', b'"xt/id":7'),  # a document without a string id
        (b'"v":1}]}', b'"v":1}}'),  # not JSON
    ],
)
def test_damaged_inline_line_is_named_not_skipped(
    store: ObjectStore, damage: tuple[bytes, bytes]
) -> None:
    store.put([{"xt/id": "a", "type": "n", "v": 1}])
    store.put([{"xt/id": "b", "type": "n"}])
    log = store.path / "txlog"
    data = log.read_bytes()
    assert damage[0] in data
    log.write_bytes(data.replace(*damage))
    with pytest.raises(CorruptStoreError, match="line 1") as err:
        ObjectStore(store.path)
    assert err.value.path == str(log)


def test_compacted_inline_lines_are_read_by_their_header(store: ObjectStore) -> None:
    # A log from before rotation (format 3) keeps its compacted inline lines.
    for k in range(3):
        store.put([{"xt/id": f"a{k}", "type": "n", "text": "t" * 100}])
    log = (store.path / "txlog").read_bytes()
    store.compact()
    base = (store.path / "txlog").read_bytes()
    store.put([{"xt/id": "a0", "type": "n", "text": "new"}])
    after = (store.path / "txlog").read_bytes()[len(base) :]
    entry = ctxnb.store._log.parse(base, log_path="txlog", first_line=0, next_tx=1)[0]
    assert isinstance(entry, ctxnb.store._log.BaseEntry) and entry.upto == 3
    log += ctxnb.store._log.compact_line(entry.compact) + after
    parsed = ctxnb.store._log.parse(log, log_path="txlog", first_line=0, next_tx=1)
    docs = [e.docs for e in parsed if isinstance(e, ctxnb.store._log.TxEntry)]
    # The folded ones are not decoded; the one after the compaction is.
    assert docs == [None, None, None, [{"xt/id": "a0", "type": "n", "text": "new"}]]
    store.close()
    (store.path / "txlog").write_bytes(log)
    (store.path / "writer.lock").write_bytes(b"")  # a format-3 writer's mark was for this log
    with ObjectStore(store.path) as reader:
        assert [v.doc["text"] for v in reader.history("a0")] == ["t" * 100, "new"]
        assert reader.get("a2")["text"] == "t" * 100


def test_format1_store_is_marked_current_at_its_first_inline_transaction(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with ObjectStore(path, inline_max_bytes=0) as old:
        old.put([{"xt/id": "a", "type": "n"}])
    marker = path / "ctxnb-store.json"
    marker.write_text(json.dumps({"format": "ctxnb-store", "version": 1}) + "\n")
    with ObjectStore(path, inline_max_bytes=0) as segments_only:
        segments_only.put([{"xt/id": "b", "type": "n"}])
    assert json.loads(marker.read_text())["version"] == 1  # nothing inline yet
    with ObjectStore(path) as store:
        store.put([{"xt/id": "c", "type": "n"}])
        assert json.loads(marker.read_text())["version"] == ctxnb.store._log.FORMAT_VERSION
        assert store.ids() == ["a", "b", "c"]
    newer = ctxnb.store._log.FORMAT_VERSION + 1
    marker.write_text(json.dumps({"format": "ctxnb-store", "version": newer}) + "\n")
    with pytest.raises(StoreError, match="Upgrade ctxnb"):
        ObjectStore(path)


def test_a_store_half_created_by_another_process_is_finished_not_refused(tmp_path: Path) -> None:
    # What another process's creation leaves before its marker is renamed into place.
    path = tmp_path / "store"
    (path / "segments").mkdir(parents=True)
    (path / "snapshots").mkdir()
    (path / "txlog").touch()
    with ObjectStore(path) as store:
        store.put([{"xt/id": "a", "type": "n"}])
    assert (
        json.loads((path / "ctxnb-store.json").read_text())["version"]
        == ctxnb.store._log.FORMAT_VERSION
    )
    # Anything more than that is not a store in the making: refused, as before.
    other = tmp_path / "other"
    (other / "segments").mkdir(parents=True)
    (other / "segments" / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(CorruptStoreError, match="not a ctxnb store"):
        ObjectStore(other)
    with pytest.raises(StoreError, match="no ctxnb store"):
        ObjectStore(path.with_name("missing"), create=False)


def test_a_file_where_the_store_should_be_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "store"
    path.write_bytes(b"not a store")
    with pytest.raises(StoreError, match="exists and is not a directory"):
        ObjectStore(path)
    assert path.read_bytes() == b"not a store"
    with pytest.raises(StoreError, match="no ctxnb store"):
        ObjectStore(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()


def test_processes_creating_one_store_at_once_all_open_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    code = (
        "import sys, time\n"
        "from ctxnb.store.objectstore import ObjectStore\n"
        "while time.time() < float(sys.argv[2]): pass\n"
        "with ObjectStore(sys.argv[1]) as s:\n"
        "    s.put([{'xt/id': sys.argv[3], 'type': 'n'}])\n"
    )
    start = time.time() + 3
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path), str(start), f"p{k}"])
        for k in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with ObjectStore(path) as store:
        assert store.ids() == ["p0", "p1", "p2", "p3"]


def test_a_store_dropped_without_close_releases_its_descriptors(tmp_path: Path) -> None:
    """Old leak: a store nobody closed kept its log and lock descriptors for the life of
    the process (its fold timer kept it alive, and its descriptors were bare integers),
    so a long session that opened many workspaces ran out of descriptors."""
    import gc

    def open_fds() -> set[str]:
        links = set()
        for f in os.listdir("/proc/self/fd"):
            try:
                links.add(os.readlink(f"/proc/self/fd/{f}"))
            except OSError:
                pass  # the descriptor listdir itself used
        return links

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to count descriptors")
    paths = [tmp_path / f"s{i}" for i in range(5)]
    for p in paths:
        s = ObjectStore(p)  # fold timer on (the default): the case that leaked
        s.put([{"xt/id": "a", "type": "file", "content": "x = 1\n"}])
        assert any(link.startswith(str(p)) for link in open_fds())
        del s
    gc.collect()
    assert not [link for link in open_fds() if link.startswith(str(tmp_path))]
    # Nothing is lost: the inline commits are in the log, and the next open reads them.
    for p in paths:
        with ObjectStore(p) as again:
            assert again.get("a") == {"xt/id": "a", "type": "file", "content": "x = 1\n"}
