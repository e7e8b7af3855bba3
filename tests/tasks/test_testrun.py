"""One confined command of test rounds, read back: a log cut short or without pytest's
summary is incomplete, ids cannot break out of the command, and a test that prints a
status line of its own does not pass by it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _tasks import PYTHON

from ctxnb.errors import TaskError
from ctxnb.tasks import grade
from ctxnb.tasks.testrun import (
    DEFAULT_TEST_CMD,
    make_test_command,
    read_run,
    resolve_python,
    run_tests,
)


def _round(n: int, body: str, code: int = 0, summary: bool = True) -> str:
    end = "=== 1 passed in 0.01s ===\n" if summary else ""
    return f"@@ctxnb-round {n}@@\n{body}{end}@@ctxnb-exit {n} {code}@@\n"


def test_a_whole_log_is_complete_and_keeps_each_round() -> None:
    log = _round(1, "PASSED t.py::a\n") + _round(2, "FAILED t.py::a - boom\n", code=1)
    run = read_run(log, repeats=2)
    assert run.complete and run.exit_codes == (0, 1)
    assert run.statuses == ({"t.py::a": "PASSED"}, {"t.py::a": "FAILED"})
    assert run.last == {"t.py::a": "FAILED"}


@pytest.mark.parametrize(
    "log",
    [
        _round(1, "PASSED t.py::a\n", summary=False),  # pytest never finished
        "@@ctxnb-round 1@@\nPASSED t.py::a\n=== 1 passed in 0.01s ===\n",  # no exit status
        _round(1, "PASSED t.py::a\n"),  # one round of two
        _round(1, "PASSED t.py::a\n[... ctxnb: 9000 bytes of output dropped ...]\n")
        + _round(2, "PASSED t.py::a\n"),  # cut short by the sandbox
        "",
    ],
    ids=["no-summary", "no-exit", "missing-round", "cut", "empty"],
)
def test_a_log_that_is_not_whole_is_incomplete(log: str) -> None:
    assert not read_run(log, repeats=2).complete


def test_ids_are_arguments_and_never_shell(tmp_path: Path) -> None:
    evil = "t.py::test_x[$(touch pwned)`touch pwned2`;touch pwned3]"
    cmd = make_test_command([evil, "t.py::b c"], python="/bin/echo", repeats=1)
    out = subprocess.run(["sh", "-c", cmd], cwd=tmp_path, capture_output=True, text=True)
    assert not list(tmp_path.iterdir())
    assert f"-m pytest -rA --tb=no --show-capture=no -p no:cacheprovider {evil} t.py::b c" in (
        out.stdout
    )
    assert "{tests}" in DEFAULT_TEST_CMD and "{python}" in DEFAULT_TEST_CMD


def test_a_test_that_prints_status_lines_does_not_pass_by_them(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import os\n"
        "print('PASSED tests/test_x.py::test_at_import')\n"
        "def test_real():\n"
        "    print('\\nPASSED tests/test_x.py::test_real')\n"
        "    os.write(1, b'\\nPASSED tests/test_x.py::test_real\\n')\n"
        "    assert False\n"
    )
    cmd = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 " + DEFAULT_TEST_CMD
    run = run_tests(tmp_path, ["tests/test_x.py"], python=PYTHON, test_cmd=cmd)
    assert run.complete and run.last == {"tests/test_x.py::test_real": "FAILED"}
    report = grade(run.last, ["tests/test_x.py::test_real", "tests/test_x.py::test_at_import"], [])
    assert report.status == "RESOLVED_NO" and report.fail_to_pass_success == ()


def test_a_bare_interpreter_name_is_made_absolute_before_the_sandbox_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In the sandbox, PATH starts with ctxnb's own environment: a bare `python3` there
    # would be another interpreter than the one the user named.
    own = tmp_path / "env" / "bin"
    own.mkdir(parents=True)
    (own / "python3").symlink_to(PYTHON)
    monkeypatch.setenv("PATH", f"{own}:{os.environ['PATH']}")
    assert resolve_python("python3") == str(own / "python3")  # the link, not its target
    with pytest.raises(TaskError, match="not a Python interpreter"):
        resolve_python("no-such-python-here")


def test_tests_read_the_environments_compiled_modules(tmp_path: Path) -> None:
    # The sandbox's byte-code prefix (an empty directory) would compile every module of
    # the environment again at each start; a test round changes nothing kept, so it
    # reads them where they are (bench/tasks_mine.py measures the difference).
    cmd = "{python} -c 'import sys; print(\"prefix:\", sys.pycache_prefix)' {tests}"
    run = run_tests(tmp_path, ["x"], python=PYTHON, test_cmd=cmd)
    assert "prefix: None" in run.output, run.output


@pytest.mark.parametrize("force", ["FORCE_COLOR", "PY_COLORS", "CLICOLOR_FORCE"])
def test_a_terminal_that_forces_colour_leaves_the_log_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force: str
) -> None:
    # A Jupyter kernel sets FORCE_COLOR=1 and CLICOLOR_FORCE=1: pytest then colours its
    # summary, which no log parser reads, and mining in a notebook found no task at all.
    monkeypatch.setenv(force, "1")
    (tmp_path / "test_x.py").write_text("def test_ok():\n    pass\n")
    cmd = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 " + DEFAULT_TEST_CMD
    run = run_tests(tmp_path, ["test_x.py"], python=PYTHON, test_cmd=cmd)
    assert "\x1b[" not in run.output
    assert run.complete and run.last == {"test_x.py::test_ok": "PASSED"}


@pytest.fixture(scope="module")
def python_without_pytest(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real interpreter of a fresh environment with nothing installed: what a plain
    ``pip install 'ctxnb[live]'`` user has, pytest being a development tool."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import pytest"], capture_output=True)
    assert probe.returncode != 0  # the fixture is what it says
    return python


def test_an_interpreter_without_pytest_is_named_before_any_round(
    tmp_path: Path, python_without_pytest: str
) -> None:
    """Before: every round logged "No module named pytest", and a miner skipped every
    commit as "a test log was incomplete"; now the cause and the fix, and nothing runs."""
    (tmp_path / "t.py").write_text("def test_a():\n    assert True\n")
    with pytest.raises(TaskError) as e:
        run_tests(tmp_path, ["t.py::test_a"], python=python_without_pytest)
    text = str(e.value)
    assert f"runs pytest with {python_without_pytest}, which cannot import it" in text
    assert "No module named 'pytest'" in text and "-m pip install pytest" in text
    # A test command that runs something else is not asked for pytest.
    run = run_tests(
        tmp_path, ["t.py"], python=python_without_pytest, test_cmd="{python} -c pass {tests}"
    )
    assert run.statuses and not run.complete  # ran (no pytest summary), was not refused
    # And an interpreter with pytest passes the check and runs the test.
    ok = run_tests(tmp_path, ["t.py::test_a"], python=PYTHON)
    assert ok.complete and ok.statuses[0] == {"t.py::test_a": "PASSED"}


def test_a_pytest_module_in_the_current_directory_neither_answers_nor_runs(
    tmp_path: Path, python_without_pytest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs from wherever ctxnb runs, often the workspace: a ``pytest.py`` there
    (or on PYTHONPATH) made an interpreter without pytest look like one with it, and ran
    on the host as it was imported."""
    from ctxnb.tasks.testrun import _pytest_missing

    marker = tmp_path / "ran"
    (tmp_path / "pytest.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    _pytest_missing.cache_clear()
    try:
        assert _pytest_missing(python_without_pytest) is not None
    finally:
        _pytest_missing.cache_clear()
    assert not marker.exists()
