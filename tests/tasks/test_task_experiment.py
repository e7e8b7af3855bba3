"""Strategies compared on a real instance (parse's fix #221): keep-all, masking alone and
masking paired with recall, each run live (scripted gold patch over real HTTP, governed
commands in the sandbox) and graded; the frame summarizes with its intervals."""

from __future__ import annotations

from pathlib import Path

import pytest
from _git import git
from _tasks import PYTHON, clone, parse_instance

from ctxnb.errors import TaskFormatError
from ctxnb.tasks import Instance, gold_script, run_task_experiment


@pytest.fixture(scope="module")
def parse_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone("parse", tmp_path_factory.mktemp("parse") / "parse")


@pytest.mark.slow
def test_recall_saves_the_re_read_masking_costs_on_a_mined_task(
    live_deps: None, parse_repo: Path
) -> None:
    from ctxnb.live.stats import compare, summarize
    from ctxnb.strategies import KeepAll, ObservationMasking, WithRecall

    inst = parse_instance(parse_repo)
    strategies = [KeepAll(), ObservationMasking(1), WithRecall(ObservationMasking(1))]
    df = run_task_experiment([inst], strategies, repo=parse_repo, python=PYTHON)
    by = df.set_index("strategy")
    assert by["solved"].all() and (by["verdict"] == "RESOLVED_FULL").all()
    assert by["re_reads"].to_dict() == {
        "keep-all": 0,
        "observation-masking": 1,
        "observation-masking-recall": 0,
    }
    assert by["recalls"].to_dict() == {
        "keep-all": 0,
        "observation-masking": 0,
        "observation-masking-recall": 1,
    }
    # A recall returns the line it needed; a re-read, the whole file once more.
    tokens = by["prompt_tokens"]
    assert tokens["observation-masking-recall"] < tokens["observation-masking"] < tokens["keep-all"]
    s = summarize(df)
    assert s.loc["observation-masking", "re_reads"] == 1
    assert s.loc["observation-masking-recall", "recalls"] == 1
    c = compare(df, "observation-masking", "observation-masking-recall")
    assert c["pairs"] == 1 and c["cost_diff_usd"] > 0  # masking alone paid for its re-read
    prov = df.attrs["ctxnb"]
    assert len(prov["inputs"]["instances"]) == 64 and prov["repeats"] == 1
    labels = [st["label"] for st in prov["strategies"]]
    assert labels == ["keep-all", "observation-masking", "observation-masking-recall"]


def test_a_gold_script_reads_the_file_its_fix_needs(parse_repo: Path) -> None:
    inst = parse_instance(parse_repo)
    script = gold_script(inst)
    assert script[0]["commands"] == ["cat parse.py"]
    apply = script[2]
    base = git(parse_repo, "show", f"{inst.base_commit}:parse.py")
    assert apply["reread"] == "cat parse.py" and apply["needs"] in base.splitlines()
    assert inst.patch in apply["commands"][0]


def test_a_gold_patch_that_only_adds_files_has_no_script() -> None:
    inst = Instance.from_dict(
        {
            "instance_id": "new-file",
            "repo": "o/r",
            "base_commit": "c",
            "problem_statement": "p",
            "test_patch": "",
            "patch": "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n",
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": [],
        }
    )
    with pytest.raises(TaskFormatError, match="changes no existing file"):
        gold_script(inst)
