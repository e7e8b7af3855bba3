import os
import shutil
import time

import pytest
from _data import age_files, swap_inode_keeping_stat

from ctxnb import Workspace
from ctxnb.errors import StoreError
from ctxnb.hashing import identity_hash, source_hash
from ctxnb.indexer import (
    build_file_doc,
    detect_file_type,
    index_deletion,
    index_file,
    index_tree,
    is_deleted,
)
from ctxnb.model import FilesystemSource
from ctxnb.store.objectstore import ObjectStore


@pytest.fixture
def store(tmp_path):
    return ObjectStore(tmp_path / "store")


def src(path="/ws/a.py", fs="fs1"):
    return FilesystemSource(filesystem_id=fs, path=path)


def test_same_source_same_id(store):
    a = index_file(store, src(), b"x = 1\n")
    b = index_file(store, src(), b"x = 1\n")
    assert a.object_id == b.object_id == identity_hash("file", src().to_dict())


def test_other_filesystem_other_object(store):
    a = index_file(store, src(fs="fs1"), b"x\n")
    b = index_file(store, src(fs="fs2"), b"x\n")
    assert a.object_id != b.object_id
    assert a.action == b.action == "created"
    assert len(store.ids("file")) == 2


def test_created_unchanged_updated_deleted(store):
    s = src()
    assert index_file(store, s, b"v1\n").action == "created"
    tx_before = store.latest_tx()
    res = index_file(store, s, b"v1\n")
    assert res.action == "unchanged" and res.tx_id is None
    assert store.latest_tx() == tx_before, "unchanged must not write"
    assert index_file(store, s, b"v2\n").action == "updated"
    d = index_deletion(store, s)
    assert d.action == "deleted"
    hist = store.history(d.object_id)
    assert [v.doc["content"] for v in hist] == ["v1\n", "v2\n", None]
    last = hist[-1].doc
    assert last["char_count"] == 0 and is_deleted(last)
    # deleting again writes nothing
    assert index_deletion(store, s).action == "unchanged"
    # and the file can come back
    assert index_file(store, s, b"v3\n").action == "updated"


def test_as_of_returns_version_current_at_tx(store):
    s = src()
    r1 = index_file(store, s, b"one\n")
    r2 = index_file(store, s, b"two\n")
    assert store.as_of(r1.object_id, r1.tx_id)["content"] == "one\n"
    assert store.as_of(r1.object_id, r2.tx_id)["content"] == "two\n"


def test_binary_and_invalid_utf8(store):
    for data in (b"\x89PNG\r\n\x1a\n\x00\x00", b"caf\xe9\n"):
        doc = build_file_doc(src("/ws/x.bin"), data)
        assert doc["content"] is None and doc["file_type"] == "binary"
        assert doc["source_hash"] == source_hash(data)
        assert doc["content_hash"]
    doc = build_file_doc(src("/ws/t.md"), "h\u00e9llo\r\n".encode())
    assert doc["content"] == "h\u00e9llo\r\n" and doc["char_count"] == 7


def test_file_types():
    assert detect_file_type("/a/b.py") == "python"
    assert detect_file_type("README.md") == "markdown"
    assert detect_file_type("Makefile") == "makefile"
    assert detect_file_type("noext") == "text"


def test_index_tree_counts_and_ignores(sample_ws):
    (sample_ws / "debug.log").write_text("ignored by .gitignore\n")
    (sample_ws / ".ctxnbignore").write_text("config/\n")
    (sample_ws / ".git").mkdir()
    (sample_ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    ws = Workspace.open(sample_ws)
    rep = ws.index(progress=False)
    indexed = set(rep.changed_paths)
    assert "debug.log" not in indexed
    assert "config/settings.toml" not in indexed
    assert not any(p.startswith((".git/", ".ctxnb/")) for p in indexed)
    assert "inventory/models.py" in indexed and "AGENTS.md" in indexed
    assert rep.created == len(indexed) and rep.updated == rep.deleted == 0
    assert len(rep.transactions) == 1


def test_reindex_unchanged_hashes_nothing(sample_ws):
    ws = Workspace.open(sample_ws)
    first = ws.index(progress=False)
    # make the files old enough not to be "racily clean"
    old = time.time() - 60
    for p in sample_ws.rglob("*"):
        if p.is_file() and ".ctxnb" not in p.parts:
            os.utime(p, (old, old))
    ws.index(progress=False)  # re-hashes once after the utime (ctime changed)
    again = ws.index(progress=False)
    assert again.unchanged == first.created
    assert again.hashed == 0 and again.transactions == []


def test_reindex_detects_same_size_edit_within_racy_window(sample_ws):
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    p = sample_ws / "config" / "settings.toml"
    st = p.stat()
    p.write_text(p.read_text().replace("EUR", "USD"))  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    rep = ws.index(progress=False)
    assert rep.changed_paths == {"config/settings.toml": "updated"}


def test_index_tree_update_and_delete(sample_ws):
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    (sample_ws / "README.md").write_text("# changed\n")
    (sample_ws / "web" / "app.js").unlink()
    (sample_ws / "NEW.txt").write_text("new\n")
    rep = ws.index(progress=False)
    assert rep.changed_paths == {
        "README.md": "updated",
        "web/app.js": "deleted",
        "NEW.txt": "created",
    }
    assert is_deleted(ws.get("web/app.js"))


def test_index_tree_without_stat_cache_still_finds_deletions(sample_ws):
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    (sample_ws / ".ctxnb" / "statcache.json").unlink()
    (sample_ws / "db" / "schema.sql").unlink()
    rep = ws.index(progress=False)
    assert rep.changed_paths == {"db/schema.sql": "deleted"}


def test_large_files_are_skipped(sample_ws):
    (sample_ws / "ctxnb.toml").write_text("[index]\nmax_file_bytes = 100\n")
    ws = Workspace.open(sample_ws)
    rep = ws.index(progress=False)
    assert rep.skipped >= 1
    assert "inventory/models.py" not in rep.changed_paths


def test_progress_bar_shows_on_request(sample_ws, capsys):
    ws = Workspace.open(sample_ws)
    ws.index(progress=True)
    assert "ctxnb index" in capsys.readouterr().err


def test_index_tree_in_many_batches_stores_what_one_batch_does(sample_ws, tmp_path):
    # The result must not depend on how the tree was cut into transactions.
    other = tmp_path / "copy"
    shutil.copytree(sample_ws, other)
    one = index_tree(Workspace.open(sample_ws), progress=False)
    many_ws = Workspace.open(other)
    many = index_tree(many_ws, progress=False, batch_bytes=1)
    assert many.counts() == one.counts() and many.changed_paths == one.changed_paths
    assert len(one.transactions) == 1 and len(many.transactions) == many.created > 3
    assert many.transactions == sorted(many.transactions)
    for rel in many.changed_paths:
        doc = many_ws.get(rel)
        data = (other / rel).read_bytes()
        assert doc["source_hash"] == source_hash(data)
        assert doc["content_hash"] == build_file_doc(doc["source"], data)["content_hash"]
    again = index_tree(many_ws, progress=False, batch_bytes=1)
    assert again.created == again.updated == again.deleted == 0


def test_a_failed_batch_write_stops_the_index_and_commits_nothing(sample_ws):
    ws = Workspace.open(sample_ws)
    shutil.rmtree(ws.store.path / "segments")  # every segment write now fails
    with pytest.raises(StoreError, match="cannot commit"):
        index_tree(ws, progress=False, batch_bytes=1)
    assert ws.store.latest_tx() is None
    assert not (sample_ws / ".ctxnb" / "statcache.json").exists()


def test_reindex_fast_path_still_refuses_what_appears_between_walks(sample_ws, tmp_path):
    # The walk remembers each name's lexical judgment; a name judged fine once must
    # still be refused when it becomes a link, and a new denied name is refused too.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    age_files(sample_ws)
    ws.index(progress=False)
    (sample_ws / "README.md").unlink()
    (sample_ws / "README.md").symlink_to(outside / "secret.txt")
    web = sample_ws / "web"
    web.rename(tmp_path / "web-moved")
    web.symlink_to(outside, target_is_directory=True)
    (sample_ws / ".env").write_text("KEY=1\n")
    rep = ws.index(progress=False)
    refused = dict(rep.denied_paths)
    assert refused["README.md"] == "symlink" and refused["web"] == "symlink"
    assert refused[".env"].startswith("deny:")
    assert rep.changed_paths["README.md"] == "deleted"
    assert all(not p.startswith("web/") or a == "deleted" for p, a in rep.changed_paths.items())
    stored = ws.store.scan("file", columns=["source_path", "content"], format="arrow")
    assert not any("OUTSIDE-SECRET" in (c or "") for c in stored.column("content").to_pylist())
    assert not any(p.endswith("/.env") for p in stored.column("source_path").to_pylist())


def test_reindex_detects_inode_swap_with_same_size_and_mtime(sample_ws):
    # Outside the racy window, a file replaced by another inode of the same size and
    # mtime is still re-hashed: the stat cache compares the inode and ctime too.
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    age_files(sample_ws)
    ws.index(progress=False)
    p = sample_ws / "config" / "settings.toml"
    st = swap_inode_keeping_stat(p, "EUR", "USD")
    assert (p.stat().st_size, p.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    rep = ws.index(progress=False)
    assert rep.changed_paths == {"config/settings.toml": "updated"}
    assert "USD" in ws.get("config/settings.toml")["content"]


def test_a_replaced_stat_cache_file_is_read_again(sample_ws):
    # The parsed stat cache is kept in memory by the file's identity; a file written
    # anew (by another process) must be read, not served from memory.
    import json

    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    age_files(sample_ws)
    ws.index(progress=False)
    assert ws.index(progress=False).hashed == 0
    path = sample_ws / ".ctxnb" / "statcache.json"
    raw = json.loads(path.read_text())
    raw["entries"] = {}
    tmp = path.with_name("statcache.new")
    tmp.write_text(json.dumps(raw))
    os.replace(tmp, path)
    again = ws.index(progress=False)
    assert again.hashed == again.files > 0
    assert ws.index(progress=False).hashed == 0


def _settled(root):
    """An indexed tree whose files are old enough for the stat cache to answer."""
    ws = Workspace.open(root)
    ws.index(progress=False)
    age_files(root)
    ws.index(progress=False)  # the ctime changed: hashed once more
    ws.close()


def test_an_unchanged_reindex_answers_from_the_stat_cache_and_the_log(sample_ws):
    from ctxnb.store._tip import read_tip

    _settled(sample_ws)
    ws = Workspace.open(sample_ws)
    rep = ws.index(progress=False)
    assert rep.hashed == 0 and rep.unchanged > 0 and rep.transactions == []
    assert not ws.store_is_open, "nothing changed, yet the store was opened"
    # ... and a change is still found by a fresh workspace (the store opened for it).
    (sample_ws / "README.md").write_text("# changed\n")
    ws = Workspace.open(sample_ws)
    assert ws.index(progress=False).changed_paths == {"README.md": "updated"}
    assert ws.store_is_open
    tip = read_tip(sample_ws / ".ctxnb" / "store")
    assert tip is not None and tip.unfolded == 0  # what it wrote reached Parquet


def test_a_commit_by_another_process_since_the_last_index_is_not_skipped(sample_ws):
    # Another writer stores a file the stat cache has never seen; the file is then
    # removed from disk. The log's tip is past the cache's, so the store is asked which
    # files it knows: the deletion is recorded, not hidden by the light path.
    _settled(sample_ws)
    (sample_ws / "extra.py").write_text("x = 1\n")
    other = Workspace.open(sample_ws)
    assert [o.action for o in other.observe(["extra.py"])] == ["created"]
    other.close()
    (sample_ws / "extra.py").unlink()
    ws = Workspace.open(sample_ws)
    rep = ws.index(progress=False)
    assert rep.changed_paths == {"extra.py": "deleted"}
    assert is_deleted(ws.get("extra.py"))


def test_an_unchanged_reindex_still_folds_what_another_process_left_inline(sample_ws):
    # The Claude Code post hook commits inline and exits; the next index keeps the
    # promise that every version reaches a Parquet file, though nothing in the tree changed.
    from ctxnb.store._append import append_inline
    from ctxnb.store._tip import read_tip

    _settled(sample_ws)
    d = sample_ws / ".ctxnb" / "store"
    assert append_inline(d, [{"xt/id": "note-1", "type": "note", "v": 1}]) is not None
    assert read_tip(d).unfolded == 1
    ws = Workspace.open(sample_ws)
    assert ws.index(progress=False).transactions == []
    assert read_tip(d).unfolded == 0
    assert ws.store.get("note-1") == {"xt/id": "note-1", "type": "note", "v": 1}


def test_an_unchanged_reindex_compacts_once_enough_transactions_wait(sample_ws):
    from ctxnb.store._append import append_inline
    from ctxnb.store._tip import read_tip

    (sample_ws / "ctxnb.toml").write_text("[index]\ncompact_after = 2\n")
    _settled(sample_ws)
    d = sample_ws / ".ctxnb" / "store"
    for i in range(3):
        assert append_inline(d, [{"xt/id": f"n{i}", "type": "note"}]) is not None
    assert read_tip(d).uncompacted >= 3
    Workspace.open(sample_ws).index(progress=False)
    assert read_tip(d).uncompacted == 0
