"""``ctxnb tasks mine`` and ``ctxnb tasks evaluate``, in process, on a real history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _tasks import FAST_CMD, clone

from ctxnb.cli.app import main
from ctxnb.tasks import Prediction, load_instances, mine_tasks, write_predictions


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("cli")
    repo = clone("parse", base / "parse")
    out, cache = base / "tasks.jsonl", base / "cache"
    argv = ["tasks", "mine", str(repo), "--revs", "HEAD~2..HEAD", "--test-cmd", FAST_CMD]
    assert main([*argv, "--cache", str(cache), "--out", str(out), "--no-progress"]) == 0
    return repo, out, cache


def test_mine_writes_instances_the_loader_reads(
    mined: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, out, cache = mined
    (inst,) = load_instances(out)
    assert inst.fail_to_pass == ("tests/test_parse.py::test_numbers",)
    # Again, to standard output: from the cache, the same instance.
    argv = ["tasks", "mine", str(repo), "--revs", "HEAD~2..HEAD", "--test-cmd", FAST_CMD]
    assert main([*argv, "--cache", str(cache), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line) for line in captured.out.splitlines()] == [inst.to_dict()]
    assert "1 tasks from 2 commits (1 skipped, 0 flaky tests dropped, 2 of 2 runs cached)" in (
        captured.err
    )


def test_mining_shows_a_progress_bar_when_asked(
    mined: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _, cache = mined
    mine_tasks(repo, revs="HEAD~2..HEAD", test_cmd=FAST_CMD, cache_dir=cache, progress=True)
    err = capsys.readouterr().err
    assert "ctxnb tasks mine" in err and "2/2" in err and "commit" in err


def test_evaluate_grades_gold_and_predictions(
    mined: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, out, _ = mined
    (inst,) = load_instances(out)
    assert main(["tasks", "evaluate", str(out), "--repo", str(repo), "--gold"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{inst.instance_id}\tRESOLVED_FULL",
        "resolved 1 of 1",
    ]
    preds = write_predictions([Prediction(inst.instance_id, "none", "")], tmp_path / "p.jsonl")
    argv = ["tasks", "evaluate", str(out), "--repo", str(repo), "--predictions", str(preds)]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{inst.instance_id}\tRESOLVED_NO",
        "resolved 0 of 1",
    ]


def test_bad_input_is_one_line_with_exit_1(
    mined: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, out, _ = mined
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x"}\n')
    assert main(["tasks", "evaluate", str(bad), "--repo", str(repo), "--gold"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing repo, base_commit" in err[0]
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"instance_id": "someone-else", "model_patch": ""}\n')
    argv = ["tasks", "evaluate", str(out), "--repo", str(repo), "--predictions", str(preds)]
    assert main(argv) == 1
    assert "predictions for instances not in" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="needs --repo"):
        main(["tasks", "evaluate", str(out), "--gold"])
    with pytest.raises(SystemExit, match="one of --gold or --predictions"):
        main(["tasks", "evaluate", str(out), "--repo", str(repo)])
