"""Mining tasks from real histories with real git and real pytest, confined: the tests a
commit fixed become FAIL_TO_PASS, a flaky test is caught by repetition and dropped, the
result is the same bytes every time and comes from the cache the second time, the
repository is never touched, and what is mined runs as an instance (gold solves, empty
fails)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _git import git
from _tasks import FAST_CMD, PYTHON, clone

from ctxnb.errors import TaskRepoError
from ctxnb.tasks import evaluate_patch, mine_tasks, write_instances
from ctxnb.tasks.mine import is_test_file

FLAKY = "test_inflection.py::test_flaky_fixture"


@pytest.fixture(scope="module")
def parse_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone("parse", tmp_path_factory.mktemp("parse") / "parse")


@pytest.fixture(scope="module")
def inflection_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone("inflection", tmp_path_factory.mktemp("inflection") / "inflection")


def _commit(repo: Path, subject: str) -> str:
    return git(repo, "log", "--format=%H", "-1", f"--grep={subject}")


def _state(repo: Path) -> tuple[str, ...]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "--no-optional-locks", "status", "--porcelain", "--ignored"),
        git(repo, "for-each-ref"),
        git(repo, "worktree", "list", "--porcelain"),
        str((repo / ".git" / "index").stat().st_mtime_ns),
    )


def test_a_real_fix_becomes_a_task_that_its_gold_patch_solves(
    parse_repo: Path, tmp_path: Path
) -> None:
    before = _state(parse_repo)
    report = mine_tasks(
        parse_repo,
        revs="HEAD~2..HEAD",
        python=PYTHON,
        test_cmd=FAST_CMD,
        cache_dir=tmp_path / "cache",
        progress=False,
    )
    fix = _commit(parse_repo, "Allow grouping char")
    release = _commit(parse_repo, "release notes")
    assert report.commits == 2 and report.skipped == [(release, "changes no test file")]
    (inst,) = report.instances
    assert inst.instance_id == f"parse-{fix[:12]}" and inst.repo == "parse"
    assert inst.base_commit == git(parse_repo, "rev-parse", f"{fix}^")
    assert inst.problem_statement.startswith("Allow grouping char (,_) in decimal format")
    # The test the commit added fails before it and passes after; the rest passed on both.
    assert inst.fail_to_pass == ("tests/test_parse.py::test_numbers",)
    assert len(inst.pass_to_pass) > 40 and not set(inst.fail_to_pass) & set(inst.pass_to_pass)
    assert all(t.startswith("tests/test_parse.py::") for t in inst.pass_to_pass)
    assert "+++ b/tests/test_parse.py" in inst.test_patch and "a/parse.py" not in inst.test_patch
    assert "+++ b/parse.py" in inst.patch and "tests/" not in inst.patch
    assert inst.extra["test_cmd"] == FAST_CMD and inst.extra["environment_setup_commit"]
    assert _state(parse_repo) == before
    # What mining made, the instance runner runs: gold solves, empty fails.
    assert evaluate_patch(inst, inst.patch, repo=parse_repo, python=PYTHON).resolved
    empty = evaluate_patch(inst, "", repo=parse_repo, python=PYTHON)
    assert not empty.resolved and empty.report is not None
    assert empty.report.fail_to_pass_failure == inst.fail_to_pass
    assert _state(parse_repo) == before


@pytest.mark.slow
def test_a_flaky_test_is_caught_by_repetition_and_dropped(
    inflection_repo: Path, tmp_path: Path
) -> None:
    fix = _commit(inflection_repo, "passerby")
    args = dict(python=PYTHON, test_cmd=FAST_CMD, cache_dir=tmp_path / "c", progress=False)
    report = mine_tasks(inflection_repo, revs=f"{fix}~1..{fix}", repeats=2, **args)
    (inst,) = report.instances
    assert report.flaky == {fix: [FLAKY]}
    assert FLAKY not in inst.fail_to_pass and FLAKY not in inst.pass_to_pass
    assert inst.fail_to_pass == (
        "test_inflection.py::test_pluralize_plural[passerby-passersby]",
        "test_inflection.py::test_pluralize_singular[passerby-passersby]",
        "test_inflection.py::test_singularize_plural[passerby-passersby]",
    )
    # One round cannot see it: the same test then counts as passing on both sides. So it
    # is the repetition, not the test's name, that drops it.
    once = mine_tasks(inflection_repo, revs=f"{fix}~1..{fix}", repeats=1, **args)
    assert once.flaky == {} and FLAKY in once.instances[0].pass_to_pass


@pytest.mark.slow
def test_mining_again_gives_the_same_bytes_from_the_cache(parse_repo: Path, tmp_path: Path) -> None:
    args = dict(revs="HEAD~2..HEAD", python=PYTHON, cache_dir=tmp_path / "cache", progress=False)
    first = mine_tasks(parse_repo, test_cmd=FAST_CMD, **args)
    again = mine_tasks(parse_repo, test_cmd=FAST_CMD, **args)
    assert (first.rounds_run, first.rounds_cached) == (2, 0)
    assert (again.rounds_run, again.rounds_cached) == (0, 2)
    a = write_instances(first.instances, tmp_path / "a.jsonl").read_bytes()
    b = write_instances(again.instances, tmp_path / "b.jsonl").read_bytes()
    assert a == b
    # The key holds the test command: another command runs the tests again.
    other = mine_tasks(parse_repo, test_cmd=FAST_CMD + " -q", **args)
    assert other.rounds_run == 2
    # ... and the plugins: named ones run the tests again, and each instance records them
    # so that its grading loads the same ones (and no other).
    named = mine_tasks(parse_repo, test_cmd=FAST_CMD, plugins=["doctest"], **args)
    assert named.rounds_run == 2
    assert [i.extra["pytest_plugins"] for i in named.instances] == [["doctest"]]
    assert all("pytest_plugins" not in i.extra for i in first.instances)
    # A damaged cache entry is run again, not trusted.
    for entry in (tmp_path / "cache").iterdir():
        entry.write_text("{not json")
    redo = mine_tasks(parse_repo, test_cmd=FAST_CMD, **args)
    assert redo.rounds_run == 2 and redo.instances == first.instances


def test_revs_that_name_nothing_are_refused(parse_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(TaskRepoError, match="rev-list"):
        mine_tasks(parse_repo, revs="no-such-branch", cache_dir=tmp_path, progress=False)
    with pytest.raises(TaskRepoError):
        mine_tasks(tmp_path, cache_dir=tmp_path, progress=False)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_parse.py", True),
        ("test_inflection.py", True),
        ("pkg/thing_test.py", True),
        ("tests/conftest.py", True),
        ("parse.py", False),
        ("tests/data/expected.json", True),
        ("docs/tests.md", False),
        ("test_notes.txt", False),
        ("contest.py", False),
        ("testing.py", False),
    ],
)
def test_which_files_are_tests(path: str, expected: bool) -> None:
    assert is_test_file(path) is expected
