"""The test runner a verdict starts: run by its path with ``python -I``, stdlib only.

It is not imported by ctxnb: :mod:`ctxnb.live.verdict` runs this file, from ctxnb's own
install, as ``python -I _testrunner.py ...`` in a sandbox on a fresh copy of the
workspace. Isolated mode keeps the workspace off ``sys.path`` while the runner loads
``unittest`` (or ``pytest``) and everything it needs to write its report; only then is
the workspace *appended* to ``sys.path``, so a ``unittest/`` or ``pytest.py`` the agent
left there cannot stand in for the runner, nor a ``json.py`` for the report's writer.
Under pytest no plugin of the environment is loaded by itself
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``): only those the task names (``--plugin NAME``, an
entry-point or module name, as ``-p`` takes it), and those while the workspace is not yet
on ``sys.path``, so a ``*.dist-info`` left there cannot name a module of its own as a
``pytest11`` plugin. (Loading every plugin of a large environment cost seconds a run,
and any of them could decide an outcome the task never asked it to.) (A ``conftest.py``
the task does not ship never reaches the runner's copy:
:mod:`ctxnb.live.verdict` leaves it out.)

The report is a JSON file holding a secret the runner read (and deleted) before any
workspace code ran, and the outcome of every test id that ran. Code that ends the
process early (``os._exit(0)`` at import) leaves no report; code that writes one does
not know the secret. (Code under test runs in this process, so a program written to
find the secret in the runner's memory could still forge a report: the verdict raises
the bar against the ways that work by accident or by a line appended to a module.)

Usage (by the verdict, not by people)::

    python -I _testrunner.py MODE SECRET_FILE REPORT_FILE [--script FILE]... \
        [--plugin NAME]... -- TARGET...

``MODE`` is ``unittest``, ``pytest``, ``collect-unittest`` or ``collect-pytest``;
``TARGET`` a test file (unittest: its module is loaded; pytest: the file or node id).
"""

import importlib.util
import json
import os
import runpy
import sys
import traceback
import unittest

# Everything the report needs is loaded above, before the workspace is on sys.path.
_dumps = json.dumps
_write = os.write
_close = os.close


def _module_name(path: str) -> str:
    if path.endswith(".py"):
        path = path[:-3]
    return path.replace(os.sep, ".").replace("/", ".")


class _Recorder(unittest.TextTestResult):
    """A result that keeps each test id's outcome (the text output is unittest's own)."""

    outcomes: dict[str, str]

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def _set(self, test, outcome: str) -> None:  # type: ignore[no-untyped-def]
        tid = test.id()
        # A failed subtest outlives the test's own success.
        if self.outcomes.get(tid) in ("failed", "errored") and outcome == "passed":
            return
        self.outcomes[tid] = outcome

    def addSuccess(self, test):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addSuccess(test)
        self._set(test, "passed")

    def addFailure(self, test, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addFailure(test, err)
        self._set(test, "failed")

    def addError(self, test, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addError(test, err)
        self._set(test, "errored")

    def addSkip(self, test, reason):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addSkip(test, reason)
        self._set(test, "skipped")

    def addExpectedFailure(self, test, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addExpectedFailure(test, err)
        self._set(test, "xfailed")

    def addUnexpectedSuccess(self, test):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._set(test, "failed")

    def addSubTest(self, test, subtest, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self.outcomes[test.id()] = "failed" if failed else "errored"


def _flatten(suite):  # type: ignore[no-untyped-def]
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _flatten(t)
        else:
            yield t


def _unittest(targets: list[str], collect: bool) -> dict[str, str]:
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    failed: dict[str, str] = {}
    for target in targets:
        try:
            loaded = list(_flatten(loader.loadTestsFromName(_module_name(target))))
            broken = [t for t in loaded if type(t).__name__ == "_FailedTest"]
            for t in broken:
                # The loader hides why a module did not import: say it.
                sys.stderr.write(f"{target} did not load: {getattr(t, '_exception', '?')}\n")
                failed[f"load:{target}"] = "errored"
            suite.addTests(t for t in loaded if t not in broken)
        except unittest.SkipTest:
            # Skipped as a whole when it loads (a module it imports raised SkipTest):
            # none of its tests ran.
            traceback.print_exc()
            failed[f"load:{target}"] = "skipped"
        except Exception:
            traceback.print_exc()
            failed[f"load:{target}"] = "errored"
    if collect:
        return {**failed, **{t.id(): "collected" for t in _flatten(suite)}}
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=1, stream=sys.stderr)
    result = runner.run(suite)
    return {**failed, **result.outcomes}  # type: ignore[attr-defined]


def _pytest(targets: list[str], collect: bool, plugins: list[str]) -> dict[str, str]:
    import pytest

    outcomes: dict[str, str] = {}
    rank = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3, "errored": 4}

    class Plugin:
        @pytest.hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(self) -> None:
            # Only now, after pytest loaded the plugins the task named (an entry point
            # is found by a scan of sys.path): on the path earlier, a ``*.dist-info``
            # the agent left in the workspace could load its module as one of them, a
            # plugin that rewrites every report.
            sys.path.append(os.getcwd())

        def pytest_collection_finish(self, session):  # type: ignore[no-untyped-def]
            if collect:
                for item in session.items:
                    outcomes[item.nodeid] = "collected"

        def pytest_collectreport(self, report):  # type: ignore[no-untyped-def]
            # A file that does not collect (an error, a module-level skip) runs none
            # of its tests; the verdict names this as the cause of their absence.
            if report.failed or report.skipped:
                got = "errored" if report.failed else "skipped"
                outcomes[f"load:{report.nodeid}"] = got

        def pytest_runtest_logreport(self, report):  # type: ignore[no-untyped-def]
            if report.when == "call":
                if report.passed:
                    got = "passed"
                elif report.skipped:
                    got = "xfailed" if hasattr(report, "wasxfail") else "skipped"
                else:
                    got = "failed"
            elif report.failed:
                got = "errored"
            elif report.skipped:
                got = "skipped"
            else:
                return
            prev = outcomes.get(report.nodeid)
            if prev is None or rank[got] > rank[prev]:
                outcomes[report.nodeid] = got

    # append: the workspace's folders go after the runner's, never before.
    args = ["-p", "no:cacheprovider", "--import-mode=append", "-o", "addopts="]
    args += [w for name in plugins for w in ("-p", name)]
    args += ["--collect-only", "-q"] if collect else ["-q"]
    # The environment's plugins only when named: pytest reads this at its start.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    pytest.main([*args, *targets], plugins=[Plugin()])
    return outcomes


def _helpers() -> dict[str, object]:
    # checks.py beside this file, loaded by path: hidden checks get ``same`` and
    # ``assert_same`` whether or not ctxnb is installed where the tests run.
    spec = importlib.util.spec_from_file_location(
        "_ctxnb_checks", os.path.join(os.path.dirname(os.path.abspath(__file__)), "checks.py")
    )
    if spec is None or spec.loader is None:
        return {}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # Importable too, after a check's ``from module import *`` (which could bring a
    # module's own ``same`` over the given one).
    sys.modules["_ctxnb_checks"] = module
    return {"same": module.same, "assert_same": module.assert_same}


def _script(path: str, helpers: dict[str, object]) -> str:
    try:
        runpy.run_path(path, init_globals=helpers, run_name="__main__")
    except AssertionError:
        traceback.print_exc()
        return "failed"
    except BaseException:  # noqa: B036 -- SystemExit too: a check passes by running to its end
        traceback.print_exc()
        return "errored"
    return "passed"


def main(argv: list[str]) -> int:
    mode, secret_file, report_file = argv[0], argv[1], argv[2]
    rest = argv[3:]
    scripts: list[str] = []
    plugins: list[str] = []
    while rest and rest[0] in ("--script", "--plugin"):
        (scripts if rest[0] == "--script" else plugins).append(rest[1])
        rest = rest[2:]
    targets = rest[1:] if rest[:1] == ["--"] else rest
    with open(secret_file, encoding="utf-8") as f:
        secret = f.read().strip()
    os.unlink(secret_file)
    fd = os.open(report_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if mode.endswith("pytest"):
        import pytest  # noqa: F401  (loaded before the workspace is on sys.path)
    helpers = _helpers()
    collect = mode.startswith("collect-")
    kind = mode.removeprefix("collect-")
    if kind != "pytest":  # pytest's run appends it once its plugins are loaded
        sys.path.append(os.getcwd())
    if kind == "pytest":
        outcomes = _pytest(targets, collect, plugins)
    else:
        outcomes = _unittest(targets, collect)
    if os.getcwd() not in sys.path:  # a pytest run that ended before its plugins loaded
        sys.path.append(os.getcwd())
    for s in scripts:
        outcomes[f"script:{s}"] = "collected" if collect else _script(s, helpers)
    _write(fd, _dumps({"secret": secret, "outcomes": outcomes}).encode())
    _close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
