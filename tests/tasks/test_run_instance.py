"""An agent run on a SWE-bench-format instance through the live runs (scripted model over
real HTTP, governed commands in the sandbox, a context strategy), graded, and its
prediction written for the official harness; an agent that edits the tests is caught."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _tasks import F2P, FAST_CMD, PYTHON, clone, parse_instance, scripted_prices

from ctxnb.errors import TaskFormatError
from ctxnb.live import ScriptedModelServer
from ctxnb.strategies import KeepAll, ObservationMasking
from ctxnb.tasks import (
    Instance,
    Prediction,
    evaluate_patch,
    load_predictions,
    run_instance,
    run_instances,
    write_predictions,
)


@pytest.fixture(scope="module")
def parse_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone("parse", tmp_path_factory.mktemp("parse") / "parse")


def _apply(patch: str) -> str:
    # What a model would run: the fix, through git in the repository it works in.
    return f"git apply <<'CTXNB_EOF'\n{patch}CTXNB_EOF"


@pytest.mark.slow
@pytest.mark.parametrize("strategy", [KeepAll(), ObservationMasking(1)], ids=lambda s: s.name)
def test_a_scripted_agent_that_applies_the_fix_resolves_and_its_prediction_grades_alike(
    live_deps: None, parse_repo: Path, tmp_path: Path, strategy: object
) -> None:
    inst = parse_instance(parse_repo)
    script = [
        {"content": "Read the parser.", "commands": ["grep -n 'def _handle_field' parse.py"]},
        {"content": "Apply the fix.", "commands": [_apply(inst.patch)]},
    ]
    with ScriptedModelServer(script) as server:
        run = run_instance(
            inst,
            repo=parse_repo,
            python=PYTHON,
            strategy=strategy,  # type: ignore[arg-type]
            model_name="ctxnb-scripted",
            step_limit=6,
            prices=scripted_prices(),
            retries=1,
            **server.model_args,
        )
        # The model was told the commit message, as the task's problem statement.
        first = server.requests[0]["messages"]
        assert any("Allow grouping char" in json.dumps(m) for m in first)
    assert run.live.exit_status == "Submitted", run.live.test_output[-2000:]
    assert run.resolved and run.evaluation.report is not None
    assert run.evaluation.report.fail_to_pass_success == F2P
    assert not run.live.tests_tampered and len(run.live.calls) >= 3 and run.live.cost_usd > 0
    patch = run.prediction.model_patch
    assert "+++ b/parse.py" in patch and ".ctxnb" not in patch and ".orchestration" not in patch
    assert run.prediction.model_name_or_path == "ctxnb-scripted"
    # The prediction, as the official harness would read it, grades the same way here.
    (pred,) = load_predictions(write_predictions([run.prediction], tmp_path / "preds.jsonl"))
    assert evaluate_patch(inst, pred.model_patch, repo=parse_repo, python=PYTHON).resolved


@pytest.mark.slow
def test_an_agent_that_edits_the_tests_is_not_resolved(live_deps: None, parse_repo: Path) -> None:
    inst = parse_instance(parse_repo)
    script = [
        {"content": "Fix.", "commands": [_apply(inst.patch)]},
        {
            "content": "And make sure.",
            "commands": ["echo 'def test_numbers(): pass' >> tests/test_parse.py"],
        },
    ]
    with ScriptedModelServer(script) as server:
        run = run_instance(
            inst,
            repo=parse_repo,
            python=PYTHON,
            step_limit=6,
            prices=scripted_prices(),
            retries=1,
            **server.model_args,
        )
    assert run.live.tests_tampered and run.live.tampered == ("tests/test_parse.py",)
    assert not run.resolved
    # The test file was out of the agent's scope: its change was dropped, not kept.
    assert "tests/test_parse.py" not in run.prediction.model_patch
    assert "+++ b/parse.py" in run.prediction.model_patch


def test_an_agent_that_does_nothing_leaves_an_empty_prediction(
    live_deps: None, parse_repo: Path
) -> None:
    inst = parse_instance(parse_repo)
    with ScriptedModelServer([]) as server:  # submits at once
        run = run_instance(
            inst,
            repo=parse_repo,
            python=PYTHON,
            step_limit=3,
            prices=scripted_prices(),
            retries=1,
            **server.model_args,
        )
    assert run.prediction.model_patch == "" and not run.resolved
    assert run.evaluation.report is not None
    assert run.evaluation.report.fail_to_pass_failure == F2P and run.evaluation.complete


def test_the_plugins_an_instance_names_reach_its_live_verdict(
    live_deps: None, parse_repo: Path
) -> None:
    # The live verdict loads only the pytest plugins a run names. One that does not exist
    # stops pytest before any test runs: the verdict says the tests are missing, where
    # without the plugin it says they failed (the agent changed nothing).
    inst = parse_instance(parse_repo)
    verdicts = {}
    for plugins in ((), ("ctxnb_no_such_plugin",)):
        with ScriptedModelServer([]) as server:
            run = run_instance(
                inst,
                repo=parse_repo,
                python=PYTHON,
                step_limit=3,
                prices=scripted_prices(),
                retries=1,
                plugins=plugins,
                **server.model_args,
            )
        verdicts[plugins] = run.live.verdict
        assert not run.resolved
    assert verdicts == {(): "failed", ("ctxnb_no_such_plugin",): "missing"}


@pytest.mark.slow
def test_run_instances_keeps_every_prediction_already_made(
    live_deps: None, parse_repo: Path, tmp_path: Path
) -> None:
    first = parse_instance(parse_repo)
    second = parse_instance(parse_repo, instance_id="r1chardj0n3s__parse-221-again")
    preds = write_predictions(
        [Prediction("elsewhere-1", "earlier", "x"), Prediction(second.instance_id, "earlier", "")],
        tmp_path / "preds.jsonl",
    )
    with ScriptedModelServer([{"content": "Fix.", "commands": [_apply(first.patch)]}]) as server:
        runs = run_instances(
            [first, second],
            repo=parse_repo,
            python=PYTHON,
            predictions=preds,
            step_limit=4,
            prices=scripted_prices(),
            retries=1,
            **server.model_args,
        )
    # Only the instance the file did not answer ran; the others' lines are as they were.
    assert [r.instance_id for r in runs] == [first.instance_id] and runs[0].resolved
    assert load_predictions(preds) == [
        Prediction("elsewhere-1", "earlier", "x"),
        Prediction(second.instance_id, "earlier", ""),
        runs[0].prediction,
    ]
    # A file that is not a predictions file is refused before anything runs or is written.
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model_patch": "x"}\n')
    with pytest.raises(TaskFormatError, match="needs instance_id"):
        run_instances([first], repo=parse_repo, python=PYTHON, predictions=bad, model="m")
    assert bad.read_text() == '{"model_patch": "x"}\n'


@pytest.mark.slow
def test_an_agent_run_on_a_large_test_file_is_graded_on_its_whole_log(
    live_deps: None, tmp_path: Path
) -> None:
    # 1,500 tests: their -rA lines are more than the live verdict keeps of a log.
    repo = tmp_path / "calc"
    (repo / "tests").mkdir(parents=True)
    many = (
        "import pytest\n\nfrom calc import add\n\n\n"
        "@pytest.mark.parametrize('n', range(1500))\n"
        "def test_a_long_name_so_that_every_line_of_the_log_is_long(n):\n    assert n == n\n"
    )
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_many.py").write_text(many)
    git = ["git", "-C", str(repo), "-c", "user.name=a", "-c", "user.email=a@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "calc"], check=True)
    base = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    (repo / "tests" / "test_many.py").write_text(
        many + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    test_patch = subprocess.run([*git, "diff"], capture_output=True, text=True).stdout
    subprocess.run([*git, "checkout", "-q", "--", "."], check=True)
    inst = Instance.from_dict(
        {
            "instance_id": "calc-1",
            "repo": "calc",
            "base_commit": base.strip(),
            "problem_statement": "add() subtracts.",
            "test_patch": test_patch,
            "patch": "",
            "FAIL_TO_PASS": ["tests/test_many.py::test_add"],
            "PASS_TO_PASS": [
                "tests/test_many.py::test_a_long_name_so_that_every_line_of_the_log_is_long[0]",
                "tests/test_many.py::test_a_long_name_so_that_every_line_of_the_log_is_long[1499]",
            ],
            "test_cmd": FAST_CMD,
        }
    )
    fix = {"content": "Fix.", "commands": ["sed -i 's/a - b/a + b/' calc.py"]}
    with ScriptedModelServer([fix]) as server:
        run = run_instance(
            inst,
            repo=repo,
            python=PYTHON,
            step_limit=4,
            prices=scripted_prices(),
            retries=1,
            **server.model_args,
        )
    # The live verdict ran the named ids with ctxnb's runner, each reported passed.
    assert set(run.live.outcomes.values()) == {"passed"} and len(run.live.outcomes) == 3
    assert run.evaluation.complete and run.resolved, run.evaluation.note
