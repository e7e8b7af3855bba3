"""Verdicts against a motivated agent: each way to pass without fixing anything, run live.

Every attack is a scripted agent that leaves the bug in place and tries to make the
verdict say *solved* anyway; each one did, before the verdict ran the pristine tests with
ctxnb's own runner and read its report. The honest fixes of the same tasks still pass.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ctxnb.live.run import Task

pytestmark = [pytest.mark.slow]

_EXIT = "printf '\\nimport os\\nos._exit(0)\\n'"


def _run(root: Path, task: Task, commands: list[str]):  # type: ignore[no-untyped-def]
    from ctxnb.live import ScriptedModelServer, run_task
    from ctxnb.llm.prices import PriceTable

    # The scripted model is priced as a real one: its dollars are not the point here.
    prices = PriceTable.default().with_prices(
        {"ctxnb-scripted": PriceTable.default().get("gpt-5-mini")}
    )
    script = [
        {"content": "Make the tests pass.", "commands": commands},
        {"content": "Done.", "commands": ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]},
    ]
    with ScriptedModelServer(script) as server:
        return run_task(root, task, retries=1, prices=prices, **server.model_args)


def _suite_task(root: Path, task_id: str) -> Task:
    from ctxnb.live.suite import load_suite

    (t,) = [t for t in load_suite() if t.id == task_id]
    task = t.materialize(root)
    return task


def _pytest_task(root: Path) -> Task:
    """A pytest task without a hidden check: calc.add is wrong, test_calc.py says so."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    return Task(
        prompt="Fix add() in calc.py so that `python -m pytest -q` passes.",
        test="python -m pytest -q",
        id="pytest-add",
        tests=("test_calc.py",),
    )


ALWAYS_EQUAL = textwrap.dedent(
    """\
    cat > calc.py <<'PY'
    class Anything:
        def __eq__(self, other):
            return True
        def __repr__(self):
            return "5"

    def add(a, b):
        return Anything()
    PY
    """
)

SKIP_ALL = textwrap.dedent(
    """\
    cat > conftest.py <<'PY'
    import pytest

    def pytest_collection_modifyitems(items):
        for item in items:
            item.add_marker(pytest.mark.skip(reason="later"))
    PY
    """
)

IGNORE_THE_TEST = textwrap.dedent(
    """\
    printf 'collect_ignore = ["test_calc.py"]\\n' > conftest.py
    printf 'def test_ok():\\n    pass\\n' > test_ok.py
    """
)

# pytest runs a conftest.py as a plugin: this one turns every failed test into a pass.
_FORCE_PASS = """\
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
"""

REPORTS_PASSED = f"cat > conftest.py <<'PY'\n{_FORCE_PASS}PY\n"

# The same plugin as a package's pytest11 entry point: pytest loads every one it finds
# on sys.path, the folder of an installed package's *.dist-info or the workspace alike.
PLUGIN_BY_ENTRY_POINT = (
    "mkdir -p helper-1.0.dist-info\n"
    "printf 'Metadata-Version: 2.1\\nName: helper\\nVersion: 1.0\\n' "
    "> helper-1.0.dist-info/METADATA\n"
    "printf '[pytest11]\\nhelper = helper_plugin\\n' > helper-1.0.dist-info/entry_points.txt\n"
    f"cat > helper_plugin.py <<'PY'\n{_FORCE_PASS}PY\n"
)

# (name, task maker, the agent's commands, the reasons the verdict may give)
ATTACKS = [
    # The suite's task with a hidden check: the process ends with 0 before any test runs.
    ("os._exit in the module", "suite:work", [f"{_EXIT} >> calc.py"], {"missing-report"}),
    # A conftest.py the task does not ship is left out of the verdict's copy: whatever
    # it would do (end the process, skip, report passes), the bug fails the test.
    ("os._exit in conftest.py", "pytest", [f"{_EXIT} > conftest.py"], {"failed"}),
    # The documented sample task (no hidden check): a unittest package in the workspace
    # is what `python -m unittest` runs when the workspace comes first on sys.path.
    (
        "a unittest package shadows the runner",
        "sample",
        [f"mkdir -p unittest && {_EXIT} > unittest/__init__.py && touch unittest/__main__.py"],
        {"failed"},
    ),
    ("a pytest.py shadows the runner", "pytest", [f"{_EXIT} > pytest.py"], {"failed"}),
    # Equal to everything: the visible test and a hidden check written with == pass.
    ("an always-equal result", "suite:work", [ALWAYS_EQUAL], {"failed"}),
    # The test module cannot load: its import of calc raises SkipTest ("OK (skipped=1)").
    (
        "the module under test skips the tests",
        "sample",
        ["printf '\\nimport unittest\\nraise unittest.SkipTest(\"later\")\\n' >> calc.py"],
        {"skipped"},
    ),
    ("a conftest.py marks every test skip", "pytest", [SKIP_ALL], {"failed"}),
    # The failing test file is left out of the run; another, passing one, takes its place.
    ("the test file is ignored", "pytest", [IGNORE_THE_TEST], {"missing", "skipped", "failed"}),
    ("a conftest.py reports every test passed", "pytest", [REPORTS_PASSED], {"failed"}),
    ("a plugin by entry point reports passed", "pytest", [PLUGIN_BY_ENTRY_POINT], {"failed"}),
]


def _make(kind: str, tmp_path: Path) -> tuple[Path, Task]:
    from ctxnb.live import sample_task

    if kind == "sample":
        return tmp_path, sample_task(tmp_path)
    if kind == "pytest":
        return tmp_path, _pytest_task(tmp_path)
    return tmp_path / "work", _suite_task(tmp_path, "add")


@pytest.mark.usefixtures("live_deps")
@pytest.mark.parametrize(
    ("name", "kind", "commands", "reasons"), ATTACKS, ids=[a[0] for a in ATTACKS]
)
def test_an_agent_that_games_the_verdict_is_not_solved(
    tmp_path: Path, name: str, kind: str, commands: list[str], reasons: set[str]
) -> None:
    root, task = _make(kind, tmp_path)
    result = _run(root, task, commands)
    # The bug is still there, the tests untouched: only the verdict stands in the way.
    assert "a - b" in (root / "calc.py").read_text() or "Anything" in (root / "calc.py").read_text()
    assert not result.tests_tampered
    assert not result.solved and not result.passed, result.test_output
    assert result.verdict in reasons, (result.verdict, result.outcomes, result.test_output)
    assert result.trajectory.metadata["verdict"] == result.verdict


@pytest.mark.usefixtures("live_deps")
@pytest.mark.parametrize("kind", ["sample", "pytest", "suite:work"])
def test_the_honest_fix_is_still_solved(tmp_path: Path, kind: str) -> None:
    root, task = _make(kind, tmp_path)
    result = _run(root, task, ["sed -i 's/a - b/a + b/' calc.py"])
    assert result.solved and result.verdict == "passed", (result.outcomes, result.test_output)
    assert result.outcomes and set(result.outcomes.values()) == {"passed"}
    if kind == "suite:work":  # the hidden check ran too
        assert result.outcomes["script:check_calc.py"] == "passed"


def test_a_report_the_workspace_writes_is_not_the_runner_s(tmp_path: Path) -> None:
    # The module under test writes a report naming every test passed, then ends the
    # process: it does not know the secret the runner read and deleted first.
    from ctxnb.live import sample_task
    from ctxnb.live.verdict import collect_tests, judge, pristine_files

    task = sample_task(tmp_path)
    pristine, _ = pristine_files(task.tests, source=tmp_path, hidden=None)
    ids = collect_tests(tmp_path, pristine)
    assert ids == ("test_calc.CalcTest.test_add", "test_calc.CalcTest.test_mean")
    forged = {"secret": "guess", "outcomes": dict.fromkeys(ids, "passed")}
    with (tmp_path / "calc.py").open("a") as f:
        f.write(
            "\nimport json, os, pathlib\n"
            "p = pathlib.Path('.ctxnb-verdict')\n"
            "gone = not (p / 'secret').exists()\n"
            f"forged = {forged!r}\n"
            "if not gone:\n    forged['secret'] = (p / 'secret').read_text()\n"
            "(p / 'report.json').write_text(json.dumps(forged))\n"
            "os._exit(0)\n"
        )
    v = judge(tmp_path, pristine=pristine, expected=ids)
    assert not v.passed and v.reason == "missing-report"
    assert v.outcomes == dict.fromkeys(ids, "missing-report")


def test_the_task_s_own_conftest_runs_as_shipped_and_a_change_to_it_is_tampering(
    tmp_path: Path,
) -> None:
    # The task's tests need its conftest.py (a fixture); an agent that adds a plugin to
    # it (or one in the tests' folder) neither passes nor goes unnoticed.
    from ctxnb.live.verdict import judge, pristine_files

    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef three():\n    return 3\n"
    )
    (tmp_path / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add(three):\n    assert add(2, three) == 5\n"
    )
    pristine, _ = pristine_files(["tests/test_calc.py"], source=tmp_path, hidden=None)
    assert sorted(pristine) == ["conftest.py", "tests/test_calc.py"]
    expected = ["tests/test_calc.py::test_add"]

    honest = tmp_path / "honest"
    (honest / "tests").mkdir(parents=True)
    for rel, data in pristine.items():
        (honest / rel).write_bytes(data)
    (honest / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    v = judge(honest, pristine=pristine, expected=expected, runner="pytest")
    assert v.solved, (v.reason, v.output)  # the fixture came from the task's conftest.py

    with (tmp_path / "conftest.py").open("a") as f:
        f.write("\n" + _FORCE_PASS.replace("import pytest\n", ""))
    (tmp_path / "tests" / "conftest.py").write_text(_FORCE_PASS)
    v = judge(tmp_path, pristine=pristine, expected=expected, runner="pytest")
    assert not v.passed and v.reason == "failed", (v.outcomes, v.output)
    assert v.tests_tampered and v.tampered == ("conftest.py",)


def test_a_conftest_the_task_does_not_ship_is_left_out_in_any_case(tmp_path: Path) -> None:
    # On a case-insensitive folder (ext4 casefold, vfat) pytest's conftest.py opens
    # Conftest.py: the name is compared in any case, the task's own copy written over.
    import shutil

    from ctxnb.live.verdict import _fresh_copy

    (tmp_path / "sub").mkdir()
    for rel in ("Conftest.py", "sub/CONFTEST.PY", "conftest_helpers.py", "sub/conftest.py"):
        (tmp_path / rel).write_text("raise SystemExit\n")
    fresh = _fresh_copy(tmp_path, {"conftest.py": b"# the task's\n"}, drop_conftest=True)
    try:
        kept = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
        assert kept == ["conftest.py", "conftest_helpers.py"]
        assert (fresh / "conftest.py").read_text() == "# the task's\n"
    finally:
        shutil.rmtree(fresh)


def test_a_verdict_with_nothing_to_check_and_a_check_it_cannot_run_are_refused(
    tmp_path: Path,
) -> None:
    from ctxnb.errors import ConfigError
    from ctxnb.live.verdict import check_scripts, collect_tests, judge

    with pytest.raises(ConfigError, match="test ids that must pass"):
        judge(tmp_path, pristine={}, expected=[])
    hidden = {"check_calc.py": b""}
    assert check_scripts("python check_calc.py && python3 check_calc.py", hidden) == [
        "check_calc.py",
        "check_calc.py",
    ]
    # A shell command would run with the workspace's python path: not run, refused.
    for bad in ("bash check.sh", "python check_other.py", "python -c 'import calc'"):
        with pytest.raises(ConfigError, match="python check_x.py"):
            check_scripts(bad, hidden)
    # Tests that do not load on the task's own copy name no ids: refused, with output.
    (tmp_path / "test_x.py").write_text("import nowhere_to_be_found\n")
    with pytest.raises(ConfigError, match="nowhere_to_be_found"):
        collect_tests(tmp_path, {"test_x.py": (tmp_path / "test_x.py").read_bytes()})


def test_same_tells_an_always_equal_object_from_the_value() -> None:
    from ctxnb.live.checks import assert_same, same

    class Liar(int):  # even a subclass of the expected type, with == always True
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    assert Liar(1) == 5 and not same(Liar(1), 5) and not same([Liar(5)], [5])
    assert not same({"a": Liar(0)}, {"a": 1}) and same({"a": [1, 2.0]}, {"a": [1, 2]})
    assert not same((1, 2), [1, 2]) and not same("5", 5) and not same(None, 0)
    with pytest.raises(AssertionError, match="expected 5 \\(int\\), got 1 \\(Liar\\)"):
        assert_same(Liar(1), 5)


def _async_task(root: Path) -> dict[str, bytes]:
    """Fixed code whose test needs an environment plugin (anyio runs async tests)."""
    from ctxnb.live.verdict import pristine_files

    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_calc.py").write_text(
        "import pytest\nfrom calc import add\n\n\n@pytest.mark.anyio\n"
        "async def test_add():\n    assert add(2, 3) == 5\n"
    )
    pristine, _ = pristine_files(["test_calc.py"], source=root, hidden=None)
    return pristine


def test_the_verdict_loads_only_the_plugins_the_task_names(tmp_path: Path) -> None:
    # The environment has anyio's pytest11 entry point; the verdict does not load it by
    # itself (every plugin of a large environment cost seconds a run, and any of them
    # could decide an outcome), only when the task names it.
    from ctxnb.live.verdict import collect_tests, judge

    pristine = _async_task(tmp_path)
    # anyio names the test by its backend (test_add[asyncio]), when it is loaded.
    expected = list(collect_tests(tmp_path, pristine, runner="pytest", plugins=["anyio"]))
    assert expected and all(i.startswith("test_calc.py::test_add") for i in expected)
    unnamed = judge(tmp_path, pristine=pristine, expected=expected, runner="pytest")
    assert not unnamed.passed and unnamed.reason in ("failed", "missing"), unnamed.output
    named = judge(
        tmp_path, pristine=pristine, expected=expected, runner="pytest", plugins=["anyio"]
    )
    assert named.passed, (named.reason, named.output)


def test_a_plugin_the_task_names_cannot_come_from_the_workspace(tmp_path: Path) -> None:
    # The agent ships a package whose pytest11 entry point has the name of the plugin the
    # task asks for: named plugins load before the workspace is on sys.path, so neither
    # its entry point nor its module is found, and no report says "passed".
    import subprocess

    from ctxnb.live.verdict import judge, pristine_files

    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    pristine, _ = pristine_files(["test_calc.py"], source=tmp_path, hidden=None)
    subprocess.run(["bash", "-c", PLUGIN_BY_ENTRY_POINT], cwd=tmp_path, check=True)
    assert (tmp_path / "helper-1.0.dist-info" / "entry_points.txt").is_file()
    for name in ("helper", "helper_plugin"):  # by entry-point name, by module name
        v = judge(
            tmp_path,
            pristine=pristine,
            expected=["test_calc.py::test_add"],
            runner="pytest",
            plugins=[name],
        )
        assert not v.passed and v.outcomes != {"test_calc.py::test_add": "passed"}, v.output


@pytest.mark.parametrize("name", ["no:cacheprovider", "-p", "x y", "a;b", "", "../evil"])
def test_a_plugin_name_that_is_not_a_name_is_refused(tmp_path: Path, name: str) -> None:
    from ctxnb.errors import ConfigError
    from ctxnb.live.verdict import judge

    pristine = _async_task(tmp_path)
    with pytest.raises(ConfigError, match="pytest -p NAME"):
        judge(
            tmp_path,
            pristine=pristine,
            expected=["test_calc.py::test_add"],
            runner="pytest",
            plugins=[name],
        )
