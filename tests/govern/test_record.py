"""The one recorder's intent map under writers in several processes at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from _git import git

from ctxnb.govern._gitrev import _find_git_root


def _map_writer(root: str, n: int, tag: str) -> None:
    from ctxnb.govern.record import Recorder

    intent_map = Recorder(root).intent_map
    for i in range(n):
        intent_map.add("INT-1", "One", [(f"{tag}/f{i}.py", [f"sym{i}"])])


def test_processes_adding_to_the_intent_map_at_once_lose_no_entry(tmp_path: Path) -> None:
    # A Claude Code hook process and a notebook's engine may add to the map together.
    (tmp_path / ".orchestration").mkdir()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_map_writer, args=(str(tmp_path), 20, f"p{j}")) for j in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    from ctxnb.govern.record import Recorder

    files = Recorder(tmp_path).intent_map.read()["INT-1"]["files"]
    assert len(files) == 60
    assert files["p2/f19.py"] == ["sym19"]


def test_one_recorder_sees_a_git_repository_made_or_removed_after_its_first_record(
    tmp_path: Path,
) -> None:
    # The recorder resolves its root once; the git root it looks for on every record:
    # a `git init` later, in the workspace or above it, and a .git removed, are seen.
    import shutil

    from ctxnb.govern.record import FileChange, Origin, Recorder

    outer = tmp_path / "outer"
    ws = outer / "ws"
    (ws / ".orchestration").mkdir(parents=True)
    rec = Recorder(ws)
    n = 0

    def record() -> dict:
        nonlocal n
        n += 1
        change = FileChange("a.py", old=None, new=f"x = {n}\n")
        return rec.record([change], Origin("write_file", caller="t"))[0].record

    above = _find_git_root(rec._where.real)  # a repository above the test's directory, if any
    first = record()
    if above is None:
        assert first["files"][0]["path"] == "a.py" and "vcs" not in first
    (outer / "o.txt").write_text("o\n")
    git(outer, "init", "-q", "-b", "main")
    git(outer, "add", "o.txt")
    git(outer, "commit", "-q", "-m", "outer")
    second = record()
    assert second["files"][0]["path"] == "ws/a.py"
    assert second["vcs"]["revision"] == git(outer, "rev-parse", "HEAD")
    git(ws, "init", "-q", "-b", "main")
    third = record()
    assert third["files"][0]["path"] == "a.py"
    assert "vcs" not in third  # the workspace's own repository has no commit yet
    shutil.rmtree(ws / ".git")
    fourth = record()
    assert fourth["files"][0]["path"] == "ws/a.py"
    assert fourth["vcs"]["revision"] == git(outer, "rev-parse", "HEAD")


def test_a_logged_record_and_its_attachment_are_the_bytes_its_dict_gives(
    tmp_path: Path,
) -> None:
    # The attachment and the logged ledger line are the bytes json.dumps gives for the
    # dicts, as the plain append writes them: secrets redacted, non-ASCII kept, metadata's
    # own keys before version_id and prev_hash; the attachment made once.
    import json

    from ctxnb.govern import tracewal
    from ctxnb.govern.ledger import TraceLedger
    from ctxnb.govern.record import FileChange, Origin, Recorder

    (tmp_path / ".orchestration").mkdir()
    rec = Recorder(tmp_path, model_id="anthropic/claude-sonnet-4")
    secret = "ghp_" + "k3Vq9ZrT1xWm7Lp2Nc8Yb4Hd6Fs0Gj5Qe2Ua"
    other = TraceLedger(tmp_path / "other.jsonl")
    for n, meta in enumerate(
        [{"note": f"héllo ✓ token={secret}", "x": 1.5, "deep": {"a": [1, None, True]}}, {}]
    ):
        change = FileChange("dir é/a.py", old="x = 1\n", new=f"x = {n}\n")
        origin = Origin("write_file", caller="t", metadata=meta, intent_id="INT-✓")
        store = tmp_path / "store"
        pending = rec.prepare_logged(change, origin, oid=f"obj-{n}", store_dir=store)
        whole = {"kind": "agent-trace", "oid": f"obj-{n}", "at": pending.at}
        if pending.head is not None:  # the ledger's last line then (none at first)
            whole["head"] = pending.head
        whole["record"] = pending.prepared
        as_dict = json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()
        assert pending.attachment == as_dict
        assert pending.attachment is pending.attachment  # asked twice, made once
        assert secret.encode() not in pending.attachment
        # The other ledger gets the same record through the dict path, after the same
        # lines: both lines must be the same bytes.
        other.path.write_bytes(rec.ledger.path.read_bytes() if rec.ledger.path.exists() else b"")
        rec.finish_logged(pending, 7 + n)
        logged = tracewal.Logged(pending.prepared, f"obj-{n}@{7 + n}", pending.at)
        assert tracewal.append_logged(other, [logged], durable=False) == [pending.prepared["id"]]
        line = rec.ledger.path.read_bytes().splitlines()[-1]
        assert line == other.path.read_bytes().splitlines()[-1]
        got = json.loads(line)
        assert list(got["metadata"])[-2:] == ["version_id", "prev_hash"]
        assert got["metadata"]["version_id"] == f"obj-{n}@{7 + n}"
        if meta:
            assert "[REDACTED:github-token]" in line.decode()


def test_the_intent_map_adds_without_its_lock_only_what_the_file_itself_lists(
    tmp_path: Path,
) -> None:
    # A change that adds nothing to the map takes no lock (its cached view, checked
    # against the file's stat, lists it all). Another writer, or a person, changing the
    # file behind the view must make the next add read the file again.
    import os

    from ctxnb.govern import record as record_mod
    from ctxnb.govern.record import IntentMap

    (tmp_path / ".orchestration").mkdir()
    path = tmp_path / ".orchestration" / "intent_map.md"
    lock = tmp_path / ".ctxnb" / "locks" / "intent-map.lock"
    a, b = IntentMap(path, lock), IntentMap(path, lock)
    a.add("INT-1", "One", [("f.py", ["s1"])])
    locked = []
    real = record_mod._flocked

    def counting(p: Path | None):  # type: ignore[no-untyped-def]
        locked.append(p)
        return real(p)

    record_mod._flocked = counting  # type: ignore[assignment]
    try:
        a.add("INT-1", "One", [("f.py", ["s1"])])
        assert locked == []  # nothing new: no lock, no write
        # Another object (another process alike) rewrites the map without f.py.
        b._write({"INT-2": {"name": "Two", "files": {"g.py": []}}})
        a.add("INT-1", "One", [("f.py", ["s1"])])
        assert locked == [lock]
        assert a.read()["INT-1"]["files"] == {"f.py": ["s1"]}
        assert a.read()["INT-2"]["files"] == {"g.py": []}
        # A person edits the map in place, same size, and sets its mtime back: its
        # ctime still tells.
        before = os.stat(path)
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("`f.py`: s1", "`f.py`: s2"), encoding="utf-8")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(path).st_size == before.st_size
        a.add("INT-1", "One", [("f.py", ["s1"])])
        assert a.read()["INT-1"]["files"] == {"f.py": ["s2", "s1"]}
        # The file removed: written again.
        path.unlink()
        a.add("INT-1", "One", [("f.py", ["s1"])])
        assert a.read()["INT-1"]["files"] == {"f.py": ["s1"]}
        # A renamed intent is a change.
        n = len(locked)
        a.add("INT-1", "Uno", [("f.py", ["s1"])])
        assert len(locked) == n + 1 and a.read()["INT-1"]["name"] == "Uno"
    finally:
        record_mod._flocked = real


def test_an_intent_map_write_that_fails_leaves_no_view_that_hides_it(tmp_path: Path) -> None:
    # The view is updated only once the file holds it: after a failed write, the next
    # add of the same entry writes it.
    from ctxnb.govern.record import IntentMap

    (tmp_path / ".orchestration").mkdir()
    m = IntentMap(tmp_path / ".orchestration" / "intent_map.md")
    m.add("INT-1", "One", [("a.py", [])])
    real = m._write

    def failing(entries: dict) -> None:
        raise OSError("disk full")

    m._write = failing  # type: ignore[method-assign]
    try:
        m.add("INT-1", "One", [("b.py", ["x"])])
    except OSError:
        pass
    m._write = real  # type: ignore[method-assign]
    m.add("INT-1", "One", [("b.py", ["x"])])
    assert m.read()["INT-1"]["files"] == {"a.py": [], "b.py": ["x"]}


def test_a_root_answers_a_path_again_as_a_fresh_root_does(tmp_path: Path) -> None:
    # A root made once answers as a fresh root does: asked again, after a `git init`
    # and after its .git is gone, each answer (or refusal) is a fresh root's.
    import shutil

    import pytest

    from ctxnb.govern._tracerecord import RepoRoot

    outer = tmp_path / "outer"
    ws = outer / "ws"
    (ws / "sub").mkdir(parents=True)
    paths = [
        "a.py",
        "sub/../a.py",
        "./sub//b.py",
        str(ws / "c.py"),
        "..",
        ".",
        "../x",
        "../../x",
        "sub/",
    ]
    kept = RepoRoot(ws)

    def answers(root: RepoRoot) -> list[object]:
        out: list[object] = []
        for path in paths:
            try:
                out.append(root.relative(path))
            except ValueError as e:
                out.append(str(e))
        return out

    def states() -> None:
        for _ in range(2):  # asked twice: nothing the first round saw may stay
            assert answers(kept) == answers(RepoRoot(ws))

    states()
    git(ws / "sub", "init", "-q")  # below the root: not its repository
    states()
    git(outer, "init", "-q")
    states()
    assert kept.relative("sub/b.py") == ("ws/sub/b.py", str(outer.resolve()))
    git(ws, "init", "-q")
    states()
    assert kept.relative("sub/b.py") == ("sub/b.py", str(ws.resolve()))
    shutil.rmtree(ws / ".git")
    states()
    assert kept.relative("sub/b.py") == ("ws/sub/b.py", str(outer.resolve()))
    with pytest.raises(ValueError, match="outside"):
        kept.relative("../../x")
