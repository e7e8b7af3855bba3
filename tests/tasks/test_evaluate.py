"""Grading SWE-bench-format instances on a real checkout with real pytest, confined: a gold
patch solves, an empty one fails, a patch that stops the test process early fails, and bad
input (a commit the checkout lacks, a test patch that does not apply) is refused with its
cause and changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _git import git
from _tasks import F2P, P2P, PYTHON, clone, parse_instance

from ctxnb.errors import CtxnbError, TaskFormatError, TaskRepoError
from ctxnb.tasks import evaluate_patch


@pytest.fixture(scope="module")
def parse_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clone("parse", tmp_path_factory.mktemp("parse") / "parse")


def _state(repo: Path) -> tuple[str, str, str]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "--no-optional-locks", "status", "--porcelain", "--ignored"),
        git(repo, "for-each-ref"),
    )


def test_the_gold_patch_solves_and_an_empty_one_fails(parse_repo: Path) -> None:
    inst = parse_instance(parse_repo)
    before = _state(parse_repo)
    gold = evaluate_patch(inst, inst.patch, repo=parse_repo, python=PYTHON)
    assert gold.resolved and gold.status == "RESOLVED_FULL", gold.output[-2000:]
    assert gold.report is not None and gold.report.fail_to_pass_success == F2P
    assert gold.report.pass_to_pass_success == P2P and gold.complete
    empty = evaluate_patch(inst, "", repo=parse_repo, python=PYTHON)
    assert not empty.resolved and empty.status == "RESOLVED_NO"
    assert empty.report is not None and empty.report.fail_to_pass_failure == F2P
    # The test patch's new test ran and failed: the instance is not solved by default.
    assert empty.report.pass_to_pass_success == P2P and empty.complete
    assert _state(parse_repo) == before  # the checkout is never touched


def test_a_patch_that_ends_the_test_process_early_is_not_solved(parse_repo: Path) -> None:
    # The gold fix, plus a line that ends pytest with exit 0 as soon as parse is imported:
    # the exit status says success, but no test reported a result.
    inst = parse_instance(parse_repo)
    sneaky = inst.patch + (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/conftest.py\n@@ -0,0 +1,2 @@\n+import os\n+os._exit(0)\n"
    )
    ev = evaluate_patch(inst, sneaky, repo=parse_repo, python=PYTHON)
    assert not ev.resolved and not ev.complete
    assert "incomplete" in ev.note
    assert ev.report is not None and ev.report.fail_to_pass_failure == F2P


def test_a_patch_that_does_not_apply_is_graded_not_resolved(parse_repo: Path) -> None:
    inst = parse_instance(parse_repo)
    # A change to a file the base commit does not have, after the real fix.
    bad = inst.patch + "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n"
    bad += "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    ev = evaluate_patch(inst, bad, repo=parse_repo, python=PYTHON)
    assert not ev.applied and ev.report is None and ev.status == "RESOLVED_NO"
    assert "does not apply" in ev.note


def test_a_base_commit_the_checkout_lacks_is_refused_with_the_fix(
    parse_repo: Path, tmp_path: Path
) -> None:
    missing = "0123456789abcdef0123456789abcdef01234567"
    inst = parse_instance(parse_repo, base_commit=missing)
    before = _state(parse_repo)
    with pytest.raises(TaskRepoError) as err:
        evaluate_patch(inst, inst.patch, repo=parse_repo, python=PYTHON)
    assert missing in str(err.value) and "fetch" in str(err.value)
    assert isinstance(err.value, CtxnbError)
    assert _state(parse_repo) == before
    with pytest.raises(TaskRepoError, match="not a git repository"):
        evaluate_patch(inst, inst.patch, repo=tmp_path, python=PYTHON)


def test_a_test_patch_that_does_not_apply_names_theparse_instance(parse_repo: Path) -> None:
    inst = parse_instance(parse_repo)
    # Made for another tree: its context lines are not in this commit's test file.
    other = inst.test_patch.replace("\n ", "\n #", 3)
    before = _state(parse_repo)
    with pytest.raises(TaskRepoError) as err:
        evaluate_patch(
            parse_instance(parse_repo, test_patch=other), "", repo=parse_repo, python=PYTHON
        )
    assert "r1chardj0n3s__parse-221" in str(err.value) and "test patch" in str(err.value)
    assert _state(parse_repo) == before
    # A test patch that deletes a file cannot be written over a tree: said, not ignored.
    gone = "diff --git a/tests/test_bugs.py b/tests/test_bugs.py\ndeleted file mode 100644\n"
    gone += "--- a/tests/test_bugs.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    with pytest.raises(TaskFormatError, match="deletes tests/test_bugs.py"):
        evaluate_patch(
            parse_instance(parse_repo, test_patch=gone), "", repo=parse_repo, python=PYTHON
        )


def test_a_python_that_is_not_an_interpreter_is_refused(parse_repo: Path, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    inst = parse_instance(parse_repo)
    with pytest.raises(CtxnbError, match="not a Python interpreter"):
        evaluate_patch(inst, inst.patch, repo=parse_repo, python=str(fake))
    with pytest.raises(CtxnbError, match="not a Python interpreter"):
        evaluate_patch(inst, inst.patch, repo=parse_repo, python=str(tmp_path / "none"))


def test_the_gold_patch_applies_with_the_official_harness_tool(
    parse_repo: Path, tmp_path: Path
) -> None:
    # The official harness applies a patch with `git apply` (then `patch`) in the base tree.
    inst = parse_instance(parse_repo)
    work = tmp_path / "w"
    subprocess.run(["git", "clone", "-q", str(parse_repo), str(work)], check=True)
    git(work, "checkout", "-q", inst.base_commit)
    (tmp_path / "p.diff").write_text(inst.patch)
    git(work, "apply", "--check", str(tmp_path / "p.diff"))


def _new_files(files: dict[str, str]) -> str:
    """A git diff that adds ``files`` (path -> text)."""
    out = []
    for path, text in files.items():
        lines = text.splitlines()
        out.append(
            f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)
        )
    return "".join(out)


# A plugin with no conftest.py: a distribution's metadata folder in the tree, which
# importlib.metadata finds on sys.path (pytest puts the tree there), naming a module of
# the tree as a `pytest11` entry point. Its hook turns every failure into a pass.
FORCE_PASS = {
    "helper-0.dist-info/METADATA": "Metadata-Version: 2.1\nName: helper\nVersion: 0\n",
    "helper-0.dist-info/entry_points.txt": "[pytest11]\nhelper = helper_plugin\n",
    "helper_plugin.py": (
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n"
    ),
}
# The instance's own command, without the tests' FAST_CMD's autoload switch.
PLAIN_CMD = (
    "{python} -m pytest -rA --tb=no --show-capture=no -p no:cacheprovider -o addopts= {tests}"
)


def test_a_pytest11_plugin_the_patch_ships_cannot_pass_the_tests(parse_repo: Path) -> None:
    # The bug stays; the patch only ships the plugin. Graded with the environment's
    # autoloading, every FAILED line read PASSED and the instance was RESOLVED_FULL.
    inst = parse_instance(parse_repo, test_cmd=PLAIN_CMD)
    ev = evaluate_patch(inst, _new_files(FORCE_PASS), repo=parse_repo, python=PYTHON)
    assert ev.applied and ev.complete, ev.output[-2000:]
    assert not ev.resolved and ev.status == "RESOLVED_NO"
    assert ev.report is not None and ev.report.fail_to_pass_failure == F2P
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1" not in PLAIN_CMD  # ctxnb set it, not the test


@pytest.mark.parametrize(
    "named, shipped",
    [
        ("helper", FORCE_PASS),  # the same entry point, under the name the instance gives
        ("doctest", {"doctest.py": FORCE_PASS["helper_plugin.py"]}),  # a module by its name
    ],
)
def test_a_plugin_the_instance_names_cannot_be_shipped_by_the_patch(
    parse_repo: Path, named: str, shipped: dict[str, str]
) -> None:
    # `-p NAME` takes the first entry point of that name on sys.path, or imports the
    # module, and the tree is first on sys.path: the plugin would come from the patch.
    inst = parse_instance(parse_repo, test_cmd=PLAIN_CMD, pytest_plugins=[named])
    ev = evaluate_patch(inst, _new_files(shipped), repo=parse_repo, python=PYTHON)
    assert not ev.resolved and not ev.complete, ev.output[-2000:]
    assert "shadows the pytest plugins" in ev.output and named in ev.output
    assert "PASSED" not in ev.output  # no round ran


def test_the_plugins_an_instance_names_are_loaded_and_checked(parse_repo: Path) -> None:
    # The gold patch still solves with a plugin of the environment named (pytest's own
    # `doctest`, always there); a name that is an option is refused before anything runs.
    named = parse_instance(parse_repo, test_cmd=PLAIN_CMD, pytest_plugins=["doctest"])
    ev = evaluate_patch(named, named.patch, repo=parse_repo, python=PYTHON)
    assert ev.resolved, ev.output[-2000:]
    bad = parse_instance(parse_repo, pytest_plugins=["no:doctest --co"])
    with pytest.raises(CtxnbError, match="pytest -p"):
        evaluate_patch(bad, bad.patch, repo=parse_repo, python=PYTHON)
    with pytest.raises(TaskFormatError, match="pytest_plugins must be a list"):
        evaluate_patch(parse_instance(parse_repo, pytest_plugins="anyio"), "", repo=parse_repo,
                       python=PYTHON)  # fmt: skip
