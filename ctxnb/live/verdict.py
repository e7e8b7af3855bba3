"""An honest verdict on a live run: the task's own tests, by ctxnb's runner, in a sandbox.

An agent that may edit the tests can make them pass without fixing anything (change
``assertEqual(add(2, 3), 5)`` to expect ``-1``); one that may edit anything else can end
the process before a test fails (``os._exit(0)`` at the bottom of the module under
test), leave a ``unittest/`` or ``pytest.py`` in the workspace that "passes" whatever
it is asked, or skip the tests from a module they import. So the verdict trusts neither
the workspace's tests nor any exit status:

1. the pristine test files (and the task's hidden checks, which the agent never saw)
   are taken from the task's own copy, read before the run, and the test ids expected
   to pass are named (or collected from that copy before the agent starts:
   :func:`collect_tests`);
2. the workspace the agent left is copied, file by file through the access layer's
   race-free walk (no symbolic link followed, denied names left out), into a new
   directory; the pristine tests and hidden checks are written over it;
3. ctxnb's own runner (``_testrunner.py``, read from ctxnb's install) runs them there
   with ``python -I`` (isolated: the workspace is not on ``sys.path`` until the runner
   and its report writer are loaded, and then only after them), in a sandbox where
   nothing reaches the workspace, and writes a report: every test id's outcome,
   signed with a secret the runner read and deleted before any workspace code ran;
4. the task is passed only when the report is there, carries the secret, and names
   every expected id as ``passed``. Otherwise :attr:`Verdict.reason` says why:
   ``missing-report`` (the process ended before reporting, or the report is not the
   runner's), ``failed``, ``errored``, ``skipped``, ``xfailed``, ``missing`` (an
   expected id did not run), ``timeout``.

A run that tried to change a test file (seen in what its commands changed, kept or
put back, or in the workspace's bytes afterwards) is flagged ``tests_tampered`` and is
not solved, whatever the verdict.

Hidden checks are Python scripts, run by the same runner after the tests; one passes
when it runs to its end (an exception, ``SystemExit`` included, fails it). A check
should compare with :func:`ctxnb.live.checks.same` (type and ``repr`` as well as
``==``), so that an object whose ``==`` always answers True does not pass.

This module is the verdict runner other task loaders build on: :func:`judge` (a
workspace, the pristine tests, the expected ids) and :func:`collect_tests` are its API.

Example:
    >>> pristine = {"test_a.py": b"assert True\\n"}
    >>> touched_tests({"changed": [{"path": "test_a.py"}], "dropped": []}, pristine)
    ['test_a.py']
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..access.fdio import PathPolicy
from ..errors import ConfigError, NotFoundError

__all__ = [
    "RUNNER",
    "ConfinedRun",
    "Runner",
    "Verdict",
    "check_plugins",
    "check_scripts",
    "collect_tests",
    "judge",
    "pristine_files",
    "refused_tests",
    "run_confined",
    "touched_tests",
]

Runner = Literal["unittest", "pytest"]
"""Which framework runs the tests: ids are unittest's ``module.Class.test`` or pytest's
node ids (``tests/test_a.py::test_b[1]``)."""

RUNNER = Path(__file__).with_name("_testrunner.py")
# A pytest plugin as `-p` takes it: no "no:" prefix, no option, nothing for a shell.
_PLUGIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
"""The runner script, run by its path (never imported from the workspace)."""

_REPORT_DIR = ".ctxnb-verdict"
# Worst first: the reason a verdict gives is the worst outcome among the expected ids.
# ``missing`` is last: when an expected id did not run, a file that failed to load (or
# was skipped as a whole) is the more telling reason.
_REASONS = ("missing-report", "timeout", "errored", "failed", "skipped", "xfailed", "missing")


@dataclass(frozen=True)
class Verdict:
    """What the task's tests said about the work.

    Attributes:
        passed: the runner reported every expected test id (and hidden check) as passed.
        output: what the tests printed.
        tests_tampered: the run changed (or tried to change) a test file.
        tampered: the test files it touched.
        reason: ``passed``, or why not (see the module docstring).
        outcomes: each expected id's outcome (``passed``, ``failed``, ``errored``,
            ``skipped``, ``xfailed``, ``missing``); ids of hidden checks are
            ``script:<file>``.
    """

    passed: bool
    output: str
    tests_tampered: bool
    tampered: tuple[str, ...] = ()
    reason: str = ""
    outcomes: Mapping[str, str] = field(default_factory=dict)

    @property
    def solved(self) -> bool:
        """Passed, and without touching the tests."""
        return self.passed and not self.tests_tampered


def pristine_files(
    tests: Sequence[str], *, source: str | os.PathLike[str], hidden: str | os.PathLike[str] | None
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The test files and hidden checks of a task, read before the agent runs.

    Args:
        tests: the test files, relative to the task's root.
        source: the task's pristine copy (or the workspace before the run).
        hidden: a directory of checks the agent never sees, or None.

    Returns:
        ``(tests, hidden)``: relative path to bytes. The tests include the
        ``conftest.py`` files pytest loads for them (in their folders and the folders
        above): those are test code too, run by the verdict as the task ships them.
    """
    policy = PathPolicy([Path(source)])
    pristine = {rel: policy.read_bytes(rel) for rel in tests}
    for rel in _conftests_of(tests):
        try:
            pristine.setdefault(rel, policy.read_bytes(rel))
        except NotFoundError:
            continue  # the task has none there: none is run there
    extra: dict[str, bytes] = {}
    if hidden is not None:
        extra = {e.safe.rel: e.read() or b"" for e in PathPolicy([Path(hidden)]).walk()}
    return pristine, extra


_CONFTEST = "conftest.py"


def _is_conftest(rel: str) -> bool:
    # Any case: on a case-insensitive folder pytest's conftest.py opens Conftest.py.
    return rel.rsplit("/", 1)[-1].casefold() == _CONFTEST


def _conftests_of(tests: Sequence[str]) -> list[str]:
    """Where pytest looks for a ``conftest.py`` for ``tests``: their folders and every
    folder above them, up to the root."""
    out: dict[str, None] = {}
    for rel in tests:
        parts = os.path.normpath(rel).split(os.sep)[:-1]
        for depth in range(len(parts) + 1):
            out["/".join([*parts[:depth], _CONFTEST])] = None
    return list(out)


def check_plugins(plugins: Sequence[str]) -> tuple[str, ...]:
    """``plugins`` checked as ``pytest -p NAME`` takes a name (an entry point or a module),
    for every pytest ctxnb runs with autoloading off (the live verdict, SWE-bench grading).

    Raises:
        ConfigError: a name that is an option, a ``no:`` or anything for a shell.
    """
    for name in plugins:
        if not isinstance(name, str) or not _PLUGIN.fullmatch(name):
            raise ConfigError(
                f"pytest plugin {name!r}: name an entry point or a module (letters, digits, "
                "'_', '-' and dots), as `pytest -p NAME` takes it"
            )
    return tuple(plugins)


def check_scripts(check: str | None, hidden: Mapping[str, bytes]) -> list[str]:
    """The hidden check scripts a task's ``check`` command names.

    The runner runs each by path (not the command through a shell, where the
    workspace could shadow ``python``'s imports), so ``check`` must be of the form
    ``python FILE [&& python FILE ...]`` with each FILE among the hidden checks.

    Raises:
        ConfigError: the command is anything else.

    Example:
        >>> check_scripts("python check_calc.py", {"check_calc.py": b""})
        ['check_calc.py']
    """
    if not check:
        return []
    words = [w for w in shlex.split(check) if w not in ("&&", ";")]
    out: list[str] = []
    while words:
        exe, *words = words
        path = words.pop(0) if words else ""
        if os.path.basename(exe) not in ("python", "python3") or path not in hidden:
            raise ConfigError(
                f"the hidden check {check!r} is not `python FILE` with FILE a hidden check "
                f"({sorted(hidden)}); ctxnb's runner runs each check script by path, so "
                "give the check as `python check_x.py [&& python check_y.py]`"
            )
        out.append(path)
    return out


def touched_tests(effects: Mapping[str, Any], pristine: Mapping[str, bytes]) -> list[str]:
    """The test files one command's effects name (committed, or dropped: a change to a
    test is tampering even when the sandbox did not let it reach the workspace)."""
    out: list[str] = []
    for key in ("changed", "dropped"):
        for entry in effects.get(key) or ():
            path = entry.get("path") if isinstance(entry, Mapping) else entry
            if isinstance(path, str) and os.path.normpath(path) in pristine and path not in out:
                out.append(os.path.normpath(path))
    return out


def refused_tests(command: str, pristine: Mapping[str, bytes]) -> list[str]:
    """The test files a refused command would have changed (it never ran: its text is
    all there is to go on, so the shell parser of :mod:`ctxnb.replay` reads it)."""
    from ..replay._shell import FileMemory, parse_command

    parse = parse_command(command, "", FileMemory())
    return [
        os.path.normpath(f.path)
        for f in parse.files
        if f.op != "read" and os.path.normpath(f.path) in pristine
    ]


def collect_tests(
    source: str | os.PathLike[str],
    tests: Mapping[str, bytes],
    *,
    runner: Runner = "unittest",
    python: str | None = None,
    timeout: float = 60.0,
    read_paths: Sequence[str] = (),
    plugins: Sequence[str] = (),
) -> tuple[str, ...]:
    """The test ids the pristine tests define, collected (not run) on ``source``.

    Args:
        source: the task's own copy, or the workspace before the agent runs.
        tests: the pristine test files (relative path to bytes).
        runner: the framework that collects them.
        python: the interpreter (the one ctxnb runs in when None).
        timeout: seconds.
        read_paths: host paths the sandbox binds read-only (another environment's).
        plugins: the pytest plugins the tests need (see :func:`judge`).

    Raises:
        ConfigError: the tests do not load, or define no test; a bad plugin name.
    """
    ok, outcomes, output = _run(
        source,
        tests,
        {},
        targets=sorted(r for r in tests if not _is_conftest(r)),
        scripts=(),
        mode=f"collect-{runner}",
        python=python,
        timeout=timeout,
        read_paths=read_paths,
        plugins=plugins,
    )
    ids = tuple(i for i, o in outcomes.items() if o == "collected" and ".loader." not in i)
    if not ok or not ids or len(ids) != len(outcomes):
        raise ConfigError(
            f"the task's tests {sorted(tests)} do not load on its own copy "
            f"({'no report' if not ok else f'{len(ids)} test(s) found'}); name the test ids "
            f"(Task.test_ids) or fix the tests. They printed:\n{output[-2000:]}"
        )
    return ids


def judge(
    root: str | os.PathLike[str],
    *,
    pristine: Mapping[str, bytes],
    expected: Sequence[str],
    hidden: Mapping[str, bytes] | None = None,
    scripts: Sequence[str] = (),
    runner: Runner = "unittest",
    python: str | None = None,
    touched: Sequence[str] = (),
    timeout: float = 60.0,
    read_paths: Sequence[str] = (),
    max_output_bytes: int = 64_000,
    plugins: Sequence[str] = (),
) -> Verdict:
    """Run the pristine tests on a fresh copy of the workspace with ctxnb's runner.

    Args:
        root: the workspace the agent left.
        pristine: the test files as the task ships them.
        expected: the test ids that must pass (unittest ids or pytest node ids).
        hidden: checks the agent never saw, added to the copy.
        scripts: the hidden check scripts to run after the tests (see
            :func:`check_scripts`).
        runner: the framework the tests are written for.
        python: the interpreter (the one ctxnb runs in when None).
        touched: test files the run's commands changed or tried to change.
        timeout: seconds for the whole verdict.
        read_paths: host paths the sandbox binds read-only (another environment's).
        max_output_bytes: output kept per stream (the head and tail halves).
        plugins: the pytest plugins the tests need, by entry-point or module name (as
            ``pytest -p`` takes them: ``anyio``, ``pytest_asyncio.plugin``); no other
            plugin of the environment is loaded. Ignored by unittest.

    Raises:
        ConfigError: no expected id (a verdict with nothing to check passes nothing);
            a plugin name that is not a plain (dotted) name.

    Example:
        >>> v = judge(root, pristine=tests, expected=["test_calc.T.test_add"])  # doctest: +SKIP
        >>> v.solved, v.reason  # doctest: +SKIP
        (False, 'missing-report')
    """
    if not expected and not scripts:
        raise ConfigError(
            "a verdict needs the test ids that must pass; name them or collect them from "
            "the task's own copy (collect_tests)"
        )
    policy = PathPolicy([Path(root)])
    tampered = list(dict.fromkeys(os.path.normpath(t) for t in touched))
    for rel, data in pristine.items():
        try:
            now = policy.read_bytes(rel)
        except Exception:  # deleted or turned into a link: either way, not the test
            now = None
        if now != data and rel not in tampered:
            tampered.append(rel)
    targets = _targets(expected, pristine, runner)
    ok, outcomes, output = _run(
        root,
        pristine,
        hidden or {},
        targets=targets,
        scripts=scripts,
        mode=runner,
        python=python,
        timeout=timeout,
        read_paths=read_paths,
        max_output_bytes=max_output_bytes,
        plugins=plugins,
    )
    wanted = {i: ("missing" if ok else "missing-report") for i in expected}
    wanted |= {f"script:{s}": ("missing" if ok else "missing-report") for s in scripts}
    if output == "\0timeout":
        output, wanted = "timed out", dict.fromkeys(wanted, "timeout")
    seen = {i: outcomes.get(i, w) for i, w in wanted.items()}
    bad = [o for o in seen.values() if o != "passed"]
    if "missing" in bad:
        bad += [o for k, o in outcomes.items() if k.startswith("load:") and o in _REASONS]
    reason = min(bad, key=_REASONS.index) if bad else "passed"
    return Verdict(
        passed=not bad,
        output=output,
        tests_tampered=bool(tampered),
        tampered=tuple(tampered),
        reason=reason,
        outcomes=seen,
    )


def _targets(expected: Sequence[str], pristine: Mapping[str, bytes], runner: Runner) -> list[str]:
    if runner == "pytest":
        # Node ids run exactly what is expected; one that does not exist fails the run.
        return list(dict.fromkeys(expected))
    # unittest loads whole modules: the pristine test files.
    return sorted(r for r in pristine if r.endswith(".py") and not _is_conftest(r))


def _run(
    root: str | os.PathLike[str],
    pristine: Mapping[str, bytes],
    hidden: Mapping[str, bytes],
    *,
    targets: Sequence[str],
    scripts: Sequence[str],
    mode: str,
    python: str | None,
    timeout: float,
    read_paths: Sequence[str],
    max_output_bytes: int = 64_000,
    plugins: Sequence[str] = (),
) -> tuple[bool, dict[str, str], str]:
    """Copy ``root`` with the pristine files over it, run the runner there; return
    (the report was the runner's, outcomes, output)."""
    from ..redaction.redactor import redact_text
    from ..sandbox import Sandbox

    check_plugins(plugins)
    # pytest runs every conftest.py on its way to a test as a plugin, one that can
    # rewrite each report to "passed": only the task's own (in ``pristine``) are run.
    fresh = _fresh_copy(root, {**pristine, **hidden}, drop_conftest=mode.endswith("pytest"))
    try:
        secret = secrets.token_hex(16)
        _write(fresh, f"{_REPORT_DIR}/secret", secret.encode())
        report = f"{_REPORT_DIR}/report.json"
        argv = [python or sys.executable, "-I", str(RUNNER), mode, f"{_REPORT_DIR}/secret"]
        argv += [report, *(w for s in scripts for w in ("--script", s))]
        argv += [*(w for p in plugins for w in ("--plugin", p)), "--", *targets]
        res = Sandbox(
            fresh, read_paths=[str(RUNNER), str(RUNNER.with_name("checks.py")), *read_paths]
        ).run(argv, timeout=timeout, redact=redact_text, max_output_bytes=max_output_bytes)
        try:
            if res.result.timed_out:
                return False, {}, "\0timeout"
            output = res.result.stdout + res.result.stderr
            try:
                data = json.loads(res.read(report))
            except Exception:  # never written, or not JSON: not the runner's report
                return False, {}, output
            if not isinstance(data, dict) or data.get("secret") != secret:
                return False, {}, output
            outcomes = data.get("outcomes")
            if not isinstance(outcomes, dict):
                return False, {}, output
            return True, {str(k): str(v) for k, v in outcomes.items()}, output
        finally:
            res.discard()
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


@dataclass(frozen=True)
class ConfinedRun:
    """What :func:`run_confined` saw: exit status, whether it timed out, the output."""

    returncode: int
    timed_out: bool
    output: str


def run_confined(
    root: str | os.PathLike[str],
    command: str,
    *,
    files: Mapping[str, bytes] | None = None,
    timeout: float = 60.0,
    read_paths: Sequence[str] = (),
    max_output_bytes: int = 64_000,
) -> ConfinedRun:
    """Run a shell command on a fresh copy of ``root`` (``files`` written over it), in a
    sandbox where nothing reaches ``root``; its output redacted.

    The copy and the confinement of a verdict, without its judgement: for callers that
    read a test log themselves. An exit status is no verdict (see :func:`judge`).
    """
    from ..redaction.redactor import redact_text
    from ..sandbox import Sandbox

    fresh = _fresh_copy(root, files or {})
    try:
        res = Sandbox(fresh, read_paths=read_paths).run(
            f"set -e\n{command}",
            shell=True,
            timeout=timeout,
            redact=redact_text,
            max_output_bytes=max_output_bytes,
        )
        res.discard()
        r = res.result
        return ConfinedRun(r.returncode, r.timed_out, r.stdout + r.stderr)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _fresh_copy(
    root: str | os.PathLike[str], files: Mapping[str, bytes], *, drop_conftest: bool = False
) -> Path:
    """A new directory holding ``root`` (through the access layer's walk: no link
    followed, denied names left out; ctxnb's own state neither) with ``files`` over it;
    with ``drop_conftest``, no ``conftest.py`` of ``root`` that ``files`` does not hold."""
    policy = PathPolicy([Path(root)])
    fresh = Path(tempfile.mkdtemp(prefix="ctxnb-verdict-"))
    try:
        for entry in policy.walk():
            rel = entry.safe.rel
            if rel.split("/", 1)[0] in (".ctxnb", ".orchestration", _REPORT_DIR):
                continue
            if drop_conftest and _is_conftest(rel) and rel not in files:
                continue
            data = entry.read()
            if data is not None:
                _write(fresh, rel, data)
        for rel, data in files.items():
            _write(fresh, rel, data)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return fresh


def _write(base: Path, rel: str, data: bytes) -> None:
    # ``rel`` comes from the policy's walk or from the task's own copy: normalized,
    # relative, no ``..``; the directory is new and ours.
    target = base / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    target.write_bytes(data)
