"""The one recorder's intent map under writers in several processes at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path


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


def _git(cwd: Path, *args: str) -> str:
    import os
    import subprocess

    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return done.stdout.decode().strip()


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

    above = rec._where.git_root()  # a repository above the test's directory, if any
    first = record()
    if above is None:
        assert first["files"][0]["path"] == "a.py" and "vcs" not in first
    (outer / "o.txt").write_text("o\n")
    _git(outer, "init", "-q", "-b", "main")
    _git(outer, "add", "o.txt")
    _git(outer, "commit", "-q", "-m", "outer")
    second = record()
    assert second["files"][0]["path"] == "ws/a.py"
    assert second["vcs"]["revision"] == _git(outer, "rev-parse", "HEAD")
    _git(ws, "init", "-q", "-b", "main")
    third = record()
    assert third["files"][0]["path"] == "a.py"
    assert "vcs" not in third  # the workspace's own repository has no commit yet
    shutil.rmtree(ws / ".git")
    fourth = record()
    assert fourth["files"][0]["path"] == "ws/a.py"
    assert fourth["vcs"]["revision"] == _git(outer, "rev-parse", "HEAD")
