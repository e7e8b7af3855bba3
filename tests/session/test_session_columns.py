"""Resume by columns: one batched stat compared with the session's block of stat-cache
entries, and the same answers as looking at every file.

The block (``.ctxnb/sessions/<digest>.resume.arrow``) is a cache: these tests break it
every way a file can be broken and check that the resume still sees a file edited with
the same size and mtime, never crashes, and writes a good block again.
"""

import hashlib
import os
import zlib

import pyarrow as pa
import pytest
from _data import age_files, swap_inode_keeping_stat

from ctxnb import Workspace
from ctxnb.errors import PolicyError
from ctxnb.session._columns import ResumeBlock, block_path

FILES = ("inventory/models.py", "README.md", "config/settings.toml", "web/app.js")


def _session(sample_ws, sid="cols"):
    """A saved session of a few files, aged out of the racy window, resumed once so
    that its block holds every file."""
    ws = Workspace.open(sample_ws)
    s = ws.session(sid, rules=False)
    ids = {rel: s.add_path(rel, activate=rel == "README.md") for rel in FILES}
    s.save()
    age_files(sample_ws)
    first = ws.session(sid, rules=False)
    assert first.last_resume.hashed == len(FILES)  # new stats: each file hashed once
    return ws, ids


def _block(ws, sid="cols"):
    tip = ws.store.latest_tx().tx_id
    fs_id = ws.resolver.filesystem_of(str(ws.root))
    ids = pa.array(ws.store.get(sid)["session_index"], type=pa.string())
    return block_path(ws.root, sid), ids, fs_id, tip


def test_nothing_changed_is_one_compare_and_the_same_answers(sample_ws):
    ws, ids = _session(sample_ws)
    path, *_ = _block(ws)
    assert path.is_file()
    again = ws.session("cols", rules=False)
    rep = again.last_resume
    assert (rep.unchanged, rep.hashed, rep.updated, rep.deleted) == (len(FILES), 0, [], [])
    # Nothing was made per file: entries and documents are built when asked for.
    assert again.state.meta.pending() == len(FILES) - 1  # the active README is whole
    # ... and then say what the documents say, as a session that read every file.
    fresh = ws.session("fresh", rules=False)
    for rel in FILES:
        fresh.add_path(rel, activate=False)
    cols = ["id", "type", "path", "file_type", "char_count", "deleted", "orphaned"]
    mine = again.metadata_frame()[cols].sort_values("id").reset_index(drop=True)
    theirs = fresh.metadata_frame()[cols].sort_values("id").reset_index(drop=True)
    assert mine.equals(theirs)
    oid = ids["config/settings.toml"]
    disk = (sample_ws / "config" / "settings.toml").read_bytes()
    assert again.get(oid)["content"] == disk.decode()
    assert again.get(oid)["source_hash"] == hashlib.sha256(disk).hexdigest()


def test_every_change_is_seen_through_the_block(sample_ws):
    ws, ids = _session(sample_ws)
    swap_inode_keeping_stat(sample_ws / "config" / "settings.toml", "EUR", "USD")
    p = sample_ws / "web" / "app.js"
    st = p.stat()
    p.write_bytes(p.read_bytes().replace(b"a", b"b", 1))  # same size, same inode
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    (sample_ws / "README.md").unlink()
    r = ws.session("cols", rules=False)
    rep = r.last_resume
    assert sorted(rep.updated) == sorted([ids["config/settings.toml"], ids["web/app.js"]])
    assert rep.deleted == [ids["README.md"]]
    assert rep.unchanged == 1 and rep.hashed == 2
    for rel in ("config/settings.toml", "web/app.js"):
        want = hashlib.sha256((sample_ws / rel).read_bytes()).hexdigest()
        assert ws.store.get(ids[rel])["source_hash"] == want
    assert r.metadata(ids["README.md"]).deleted
    # The new stats are in the block: the next resume hashes nothing and writes nothing.
    versions = {rel: len(ws.store.history(oid)) for rel, oid in ids.items()}
    again = ws.session("cols", rules=False).last_resume
    assert (again.unchanged, again.hashed, again.updated, again.deleted) == (4, 0, [], [])
    assert {rel: len(ws.store.history(oid)) for rel, oid in ids.items()} == versions


def test_a_session_saved_without_a_block_resumes_and_gets_one(sample_ws):
    # Sessions saved before the block existed have none: the resume looks at every file.
    ws, ids = _session(sample_ws)
    path, *_ = _block(ws)
    path.unlink()
    swap_inode_keeping_stat(sample_ws / "config" / "settings.toml", "EUR", "USD")
    rep = ws.session("cols", rules=False).last_resume
    assert rep.updated == [ids["config/settings.toml"]] and rep.unchanged == 3
    assert path.is_file()
    assert ws.session("cols", rules=False).last_resume.hashed == 0


def _lying_block(ws, rel):
    """A block that says ``rel`` (edited since) is unchanged: its row holds the file's
    current stat with the stored hash, marked clean. Trusted, it would hide the edit."""
    path, ids, fs_id, tip = _block(ws)
    block = ResumeBlock.load(path, ids, fs_id, tip)
    assert block is not None
    st = (ws.root / rel).stat()
    row = ids.to_pylist().index(ws.object_id(rel))
    entry = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    block.record([row], [[*entry, ws.store.get(ws.object_id(rel))["source_hash"], 1 << 62]])
    return block, path, ids, fs_id, tip


def _rewrap(path, body):
    path.write_bytes(b"CTXNBRS1" + zlib.crc32(body).to_bytes(4, "little") + body)


def _break(kind, block, path, ids, fs_id, tip, tmp_path):
    if kind == "store-is-older":
        block.save(path, fs_id, tip + 5)
    elif kind == "other-filesystem":
        block.save(path, "another-filesystem", tip)
    elif kind == "rows-of-another-order":
        block.ids = pa.array(list(reversed(ids.to_pylist())), type=pa.string())
        block.save(path, fs_id, tip)
    elif kind == "flipped-byte":
        block.save(path, fs_id, tip)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))
    elif kind == "truncated":
        block.save(path, fs_id, tip)
        path.write_bytes(path.read_bytes()[:-100])
    elif kind == "garbage-with-good-checksum":
        _rewrap(path, os.urandom(4096))
    elif kind == "other-schema":
        table = pa.table({"xt_id": ids, "size": pa.array(["big"] * len(ids))})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        _rewrap(path, sink.getvalue().to_pybytes())
    elif kind == "symlink":
        elsewhere = tmp_path / "planted.arrow"
        block.save(elsewhere, fs_id, tip)
        path.unlink()
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "huge":
        path.write_bytes(b"CTXNBRS1" + b"\0" * (4 << 20))
    elif kind == "directory":
        path.unlink()
        path.mkdir()
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = [
    "store-is-older",
    "other-filesystem",
    "rows-of-another-order",
    "flipped-byte",
    "truncated",
    "garbage-with-good-checksum",
    "other-schema",
    "symlink",
    "fifo",
    "huge",
    "directory",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_or_planted_block_falls_back_to_every_file(sample_ws, tmp_path, kind):
    ws, ids = _session(sample_ws)
    rel = "config/settings.toml"
    swap_inode_keeping_stat(sample_ws / rel, "EUR", "USD")
    block, path, row_ids, fs_id, tip = _lying_block(ws, rel)
    _break(kind, block, path, row_ids, fs_id, tip, tmp_path)
    r = ws.session("cols", rules=False)
    assert r.last_resume.updated == [ids[rel]]
    assert "USD" in r.get(ids[rel])["content"]
    if kind != "directory":  # a directory there is not replaced; the resume goes on
        assert ws.session("cols", rules=False).last_resume.hashed == 0


def test_the_agent_cannot_write_the_block(sample_ws):
    # The block has the standing of statcache.json: under .ctxnb/, which the path
    # policy refuses to every tool, however the path is spelled.
    ws, _ = _session(sample_ws)
    path, *_ = _block(ws)
    for spelling in (str(path), os.path.relpath(path, sample_ws), "./.ctxnb/sessions/x"):
        with pytest.raises(PolicyError):
            ws.policy.check(spelling, for_write=True)


def test_a_stat_cache_entry_of_another_shape_records_nothing(sample_ws):
    ws, _ = _session(sample_ws)
    path, ids, fs_id, tip = _block(ws)
    block = ResumeBlock.load(path, ids, fs_id, tip)
    assert block is not None
    bad = [[1, 2, 3], ["a", 0, 0, 0, "h", 9], [1 << 70, 0, 0, 0, "h", 9], [0, 0, 0, -1, "h", 9]]
    block.record(list(range(len(bad))), bad)
    assert not block.clean[: len(bad)].any()
    assert block.hashes.to_pylist()[: len(bad)] == [None] * len(bad)


def test_any_byte_of_a_block_changed_under_a_good_checksum_is_survived(sample_ws):
    # The checksum only catches accidents: a block rewritten with one byte changed and
    # a checksum to match must still be read safely (validated before any compare).
    ws, ids = _session(sample_ws)
    rel = "config/settings.toml"
    swap_inode_keeping_stat(sample_ws / rel, "EUR", "USD")
    block, path, row_ids, fs_id, tip = _lying_block(ws, rel)
    block.save(path, "another-filesystem", tip)  # the lie is refused as a whole ...
    body = path.read_bytes()[12:]
    for at in range(0, len(body), max(1, len(body) // 60)):
        for bit in (0x01, 0x80):
            mutated = bytearray(body)
            mutated[at] ^= bit
            _rewrap(path, bytes(mutated))  # ... and so is every block one bit from it
            assert ResumeBlock.load(path, row_ids, fs_id, tip) is None
    r = ws.session("cols", rules=False)  # the last of them there
    assert r.last_resume.updated == [ids[rel]]


def test_lazy_rows_answer_as_a_dict_holding_every_value():
    from ctxnb.session.state import LazyRows

    made = []

    def make(row):
        made.append(row)
        return f"value {row}"

    rows = LazyRows({"a": "built"}, {"b": 0, "c": 1}, make)
    want = {"a": "built", "b": "value 0", "c": "value 1"}
    assert len(rows) == 3 and set(rows) == set(want) and "c" in rows and "z" not in rows
    assert made == []  # nothing made by asking what is there
    assert rows.get("z", "none") == "none" and rows["b"] == "value 0" and made == [0]
    rows["c"] = "replaced"  # a row replaced before it was made is never made
    del rows["a"]
    assert dict(rows) == {"b": "value 0", "c": "replaced"} and made == [0]
    with pytest.raises(KeyError):
        rows["a"]


@pytest.mark.parametrize("seed", range(8))
def test_the_block_answers_as_looking_at_every_file(sample_ws, tmp_path, seed):
    # A skeptic's reference: the same tree and store put back (new inodes: nothing in a
    # stat cache matches) without a block, so that its resume reads and hashes every file.
    import random
    import shutil

    rng = random.Random(seed)
    ws, ids = _session(sample_ws)
    for rel in FILES:
        p = sample_ws / rel
        st = p.stat()
        what = rng.choice(["same", "same-size-same-mtime", "append", "touch", "delete", "dir"])
        if what == "same-size-same-mtime":
            data = p.read_bytes()
            p.write_bytes(data[::-1])
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif what == "append":
            p.write_bytes(p.read_bytes() + b"\n# more\n")
        elif what == "touch":
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        elif what == "delete":
            p.unlink()
        elif what == "dir":
            p.unlink()
            p.mkdir()
    backup = tmp_path / "backup"
    shutil.copytree(sample_ws, backup, symlinks=True)
    mine = ws.session("cols", rules=False)
    mine_hashes = {oid: ws.store.get(oid)["source_hash"] for oid in ids.values()}
    # The same tree and store again, at the same paths: new inodes, so no stat cache
    # entry matches, and no block.
    shutil.rmtree(sample_ws)
    shutil.copytree(backup, sample_ws, symlinks=True)
    block_path(sample_ws, "cols").unlink()
    ref_ws = Workspace.open(sample_ws)
    ref = ref_ws.session("cols", rules=False)
    a, b = mine.last_resume, ref.last_resume
    assert (sorted(a.updated), sorted(a.deleted), sorted(a.orphaned), a.unchanged) == (
        sorted(b.updated),
        sorted(b.deleted),
        sorted(b.orphaned),
        b.unchanged,
    )
    assert b.hashed == sum(1 for rel in FILES if (sample_ws / rel).is_file())
    assert mine_hashes == {oid: ref_ws.store.get(oid)["source_hash"] for oid in ids.values()}


def test_temp_files_a_killed_save_left_are_removed_and_live_ones_kept(sample_ws):
    import subprocess
    import sys

    ws, _ = _session(sample_ws)
    path, *_ = _block(ws)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = path.with_name(f".{path.name}.{int(gone.stdout)}.tmp")
    live = path.with_name(f".{path.name}.{os.getppid()}.tmp")  # a process still running
    other = path.with_name(f".{path.name}.x1.tmp")  # not a name a save writes
    for f in (dead, live, other):
        f.write_bytes(b"half a block")
    (sample_ws / "README.md").write_text("changed\n")
    age_files(sample_ws)
    again = ws.session("cols", rules=False)
    assert again.last_resume.updated  # the block was written again
    assert not dead.exists()
    assert live.read_bytes() == other.read_bytes() == b"half a block"
    assert ws.session("cols", rules=False).last_resume.unchanged == len(FILES)


def test_a_secret_in_a_resumed_file_name_is_redacted_as_a_fresh_read_shows_it(sample_ws):
    """A resume builds its metadata entries from the block's columns, not from the
    documents: a token in a file's name leaves redacted there too."""
    token = "gh" + "p_" + "R3sum" + "e8Qz2Lw7Rt5Vx1Yb9Hd3Fs6Gj0Pm4Kc"  # generated, not real
    rel = f"keys/{token}.txt"
    (sample_ws / "keys").mkdir()
    (sample_ws / rel).write_text("a note\n", encoding="utf-8")
    ws = Workspace.open(sample_ws)
    s = ws.session("names", rules=False)
    s.add_path(rel, activate=False)
    s.add_path("README.md", activate=True)
    s.save()
    age_files(sample_ws)
    ws.session("names", rules=False)  # the first resume writes the block
    again = ws.session("names", rules=False)
    assert again.last_resume.unchanged == 2 and again.last_resume.hashed == 0
    shown = again.metadata_frame()["path"].tolist()
    assert "keys/[REDACTED:github-token].txt" in shown, shown
    text = again.assemble().to_text()
    assert "[REDACTED:github-token]" in text and token not in text
