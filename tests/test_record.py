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
