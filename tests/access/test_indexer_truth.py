"""The index tells the truth about files the tools or the walk saw in other ways."""

from __future__ import annotations

from pathlib import Path

from ctxnb import Workspace
from ctxnb.indexer import is_deleted


def test_a_file_written_by_the_tools_then_deleted_is_deleted(sample_ws: Path) -> None:
    ws = Workspace.open(sample_ws)
    assert ws.index(progress=False).created > 0  # the stat cache exists from here on
    tools = ws.tools(ws.session("t"), caller="tests")
    assert tools.write_file("made/by_tool.py", "x = 1\n", mode="create").success
    (sample_ws / "made" / "by_tool.py").unlink()
    report = ws.index(progress=False)
    assert report.changed_paths.get("made/by_tool.py") == "deleted"
    assert is_deleted(ws.store.get(ws.object_id("made/by_tool.py")))
    again = ws.index(progress=False)
    assert again.deleted == again.created == again.updated == 0


def test_an_ignored_file_on_disk_never_flips(sample_ws: Path) -> None:
    (sample_ws / ".gitignore").write_text("*.log\n")
    (sample_ws / "run.log").write_text("started\n")
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    tools = ws.tools(ws.session("t"), caller="tests")
    oid = ws.object_id("run.log")
    for _ in range(3):
        assert tools.read_file("run.log").content == "started\n"
        report = ws.index(progress=False)
        assert "run.log" not in report.changed_paths
        assert not is_deleted(ws.store.get(oid))
    assert [is_deleted(v.doc) for v in ws.store.history(oid)] == [False]
    # Once it is gone from the disk, it is deleted.
    (sample_ws / "run.log").unlink()
    assert ws.index(progress=False).changed_paths.get("run.log") == "deleted"


def test_without_a_stat_cache_ignored_files_are_not_deleted(sample_ws: Path) -> None:
    (sample_ws / ".gitignore").write_text("*.log\n")
    (sample_ws / "run.log").write_text("started\n")
    ws = Workspace.open(sample_ws)
    ws.tools(ws.session("t"), caller="tests").read_file("run.log")
    (sample_ws / ".ctxnb" / "statcache.json").unlink(missing_ok=True)
    report = ws.index(progress=False)
    assert "run.log" not in report.changed_paths
    assert not is_deleted(ws.store.get(ws.object_id("run.log")))
