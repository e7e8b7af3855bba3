"""Running a task's named tests: one confined command, its log read into statuses.

Every run of a task's tests -- grading a patch, grading an agent's work, mining a commit on
both of its sides -- is built by :func:`make_test_command` and read by :func:`read_run`, and
runs through the live runs' confinement (:func:`ctxnb.live.verdict.run_confined`): a fresh
copy of the tree, the task's test files written over it, bubblewrap with nothing writable,
no network, the user's Python environment readable. So a test that passes when a task is
mined passes for the same reasons when a patch is graded.

pytest loads no plugin of the environment by itself (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``),
only those the task names (``plugins``: the instance's ``pytest_plugins`` key, or the
caller's), as the live verdict does (``Task.plugins``): with the tree on ``sys.path``, a
``*.dist-info`` folder the work left there would otherwise name any module of it as a
``pytest11`` plugin, loaded before the first test, free to end the run or rewrite its
reports. Nor can the tree stand in for a plugin the task names: before the rounds, the
environment's interpreter looks up each name as ``-p`` will (its ``pytest11`` entry
points, its module) without importing anything, and when one would come from the tree no
round runs. (A ``conftest.py``, an ini file's ``addopts`` and a module shadowing pytest
or a plugin's own imports are the repository's own business here, as in the official
harness: they are not stopped.)

One command may run the tests several times (``repeats``): each round prints a marker and
its exit status, so a test whose status differs between rounds is seen as flaky. A round
whose log is cut short (the sandbox keeps a megabyte of output a round) or that never
printed pytest's closing summary is *incomplete*: its statuses are kept, but a caller must
not read a missing test as a failed one.

Example:
    >>> cmd = make_test_command(["t.py::test_a"], python="/usr/bin/python3", repeats=1)
    >>> "/usr/bin/python3 -m pytest" in cmd and "t.py::test_a" in cmd
    True
    >>> run = read_run("@@ctxnb-round 1@@\\nPASSED t.py::test_a\\n"
    ...                "=== 1 passed in 0.01s ===\\n@@ctxnb-exit 1 0@@\\n", repeats=1)
    >>> run.statuses, run.complete
    (({'t.py::test_a': 'PASSED'},), True)
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import TaskError
from ..live.verdict import check_plugins
from .grading import parse_pytest_log

__all__ = [
    "DEFAULT_TEST_CMD",
    "TestRun",
    "environment_paths",
    "make_test_command",
    "read_run",
    "require_pytest",
    "resolve_python",
    "run_tests",
]

#: The test command: ``{python}`` is the environment's interpreter, ``{tests}`` the test
#: ids or files, shell-quoted. ``-rA`` prints the summary lines the grading reads; the
#: captured output of passing tests is left out of the log (``--show-capture=no``), so a
#: test cannot print a status line of its own into it.
DEFAULT_TEST_CMD = "{python} -m pytest -rA --tb=no --show-capture=no -p no:cacheprovider {tests}"

_ROUND = "@@ctxnb-round"
_EXIT = "@@ctxnb-exit"
_EXIT_RE = re.compile(rf"^{_EXIT} (\d+) (\d+)@@$", re.M)
_ROUND_RE = re.compile(rf"^{_ROUND} (\d+)@@$", re.M)
# pytest's closing line: "=== 3 passed, 1 failed in 0.12s ===" (or "no tests ran").
_SUMMARY = re.compile(
    r"^=+ .*\b(passed|failed|error|errors|skipped|no tests ran|deselected|"
    r"xfailed|xpassed|warnings?)\b.* in [\d.]+s.*=+$",
    re.M,
)
_DROPPED = "bytes of output dropped ...]"
# Run in the tree before the rounds, the way pytest will be (``python`` with the tree first
# on sys.path), when plugins are named: `-p NAME` takes the first `pytest11` entry point
# of that name on sys.path, or imports the module, so a tree that ships either under a
# named plugin's name would be loaded in its place. Nothing of the tree is imported here:
# metadata files are read and top-level names are looked up without running them.
_SHADOW_CHECK = """
import importlib.machinery as m, importlib.metadata as md, os, sys
root = os.path.realpath(os.getcwd())
def inside(p):
    p = os.path.realpath(p)
    return p == root or p.startswith(root + os.sep)
bad = []
for name in sys.argv[1:]:
    mods = {name}
    for d in md.distributions():
        for ep in d.entry_points:
            if ep.group == "pytest11" and ep.name == name:
                mods.add(ep.value.split(":")[0].strip())
                if inside(str(d.locate_file(""))):
                    bad.append(f"{name} (a pytest11 entry point in {d.locate_file('')})")
    for mod in sorted(mods):
        spec = m.PathFinder.find_spec(mod.split(".")[0])
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), None))
        if where and inside(where):
            bad.append(f"{name} (module {mod.split('.')[0]} at {where})")
if bad:
    print("ctxnb: the tree shadows the pytest plugins the task names, so they would load"
          " from it: " + "; ".join(sorted(set(bad))) + "; the tests were not run")
    sys.exit(1)
"""


@dataclass(frozen=True)
class TestRun:
    """What one confined command of test rounds reported.

    Attributes:
        statuses: per round, test id -> status (``PASSED``, ``FAILED``, ...).
        exit_codes: per round, the test command's exit status (None: never reported).
        complete: every round printed pytest's closing summary and its exit status, and
            no output was dropped (:attr:`cut`).
        output: the whole log (redacted, as every command's output is).
    """

    __test__ = False  # a result, not a test class, whatever pytest thinks of its name

    statuses: tuple[dict[str, str], ...]
    exit_codes: tuple[int | None, ...]
    complete: bool
    output: str

    @property
    def cut(self) -> bool:
        """The sandbox dropped part of the log (it keeps a bounded head and tail)."""
        return _DROPPED in self.output

    @property
    def last(self) -> dict[str, str]:
        """The statuses of the last round (the one to grade when there is one round)."""
        return self.statuses[-1] if self.statuses else {}


def resolve_python(python: str) -> str:
    """``python`` as an absolute path (looked up on ``PATH`` when it is a bare name): the
    sandbox has its own ``PATH``, where a bare ``python`` is ctxnb's own interpreter.
    Links are kept (a virtual environment's ``bin/python`` is one, and is what makes it
    that environment).

    Raises:
        TaskError: no such program.
    """
    found = shutil.which(python)
    if found is None:
        raise TaskError(
            f"{python!r} is not a Python interpreter that runs here; give the path to the "
            "python of the environment the repository's tests run in (e.g. .venv/bin/python)"
        )
    return os.path.abspath(found)


def environment_paths(python: str) -> list[str]:
    """The directories a Python environment lives in (its prefixes, its interpreter's
    directory, its site directories), asked of the interpreter itself; the sandbox binds
    them read-only so the tests import what the environment holds.

    Raises:
        TaskError: ``python`` is not an interpreter that runs here.
    """
    code = (
        "import json, os, sys; print(json.dumps([sys.prefix, sys.exec_prefix, sys.base_prefix, "
        "os.path.dirname(os.path.realpath(sys.executable)), *[p for p in sys.path if "
        "os.path.basename(p) in ('site-packages', 'dist-packages')]]))"
    )
    try:
        proc = subprocess.run([python, "-I", "-c", code], capture_output=True, timeout=60)
        paths = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        paths = None
    if not isinstance(paths, list):
        raise TaskError(
            f"{python!r} is not a Python interpreter that runs here; give the path to the "
            "python of the environment the repository's tests run in (e.g. .venv/bin/python)"
        )
    real = {os.path.realpath(p) for p in paths if isinstance(p, str) and p}
    return sorted(p for p in real if p != "/" and os.path.isdir(p))


def require_pytest(python: str, test_cmd: str | None = None) -> None:
    """Refuse, before any round, a test command that runs pytest with an interpreter that
    has none (a plain ``pip install 'ctxnb[live]'`` brings no pytest).

    Without this every round's log is ``No module named pytest``: mining skips every
    commit as "a test log was incomplete" and grading reads every test as missing, both
    true but neither naming the cause. A custom ``test_cmd`` that runs something else is
    not checked.

    Raises:
        TaskError: ``python`` cannot import pytest.
    """
    if "{python} -m pytest" not in (test_cmd or DEFAULT_TEST_CMD):
        return
    why = _pytest_missing(python)
    if why is not None:
        raise TaskError(
            f"the test command runs pytest with {python}, which cannot import it ({why}); "
            f"install it there ({shlex.quote(python)} -m pip install pytest), or pass the "
            "python of an environment that has the repository's test dependencies"
        )


@functools.lru_cache(maxsize=16)
def _pytest_missing(python: str) -> str | None:
    """Why ``python`` cannot import pytest (its last line of error), or None if it can.
    Asked once per interpreter and process: an environment does not lose pytest while
    tasks are mined."""
    # -I: the question is asked from wherever ctxnb runs, often the workspace, whose own
    # pytest.py (or PYTHONPATH) must neither answer it nor run on the host.
    proc = subprocess.run(
        [python, "-I", "-c", "import pytest"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


def make_test_command(
    tests: Sequence[str],
    *,
    python: str,
    test_cmd: str | None = None,
    repeats: int = 1,
    plugins: Sequence[str] = (),
) -> str:
    """The shell command that runs ``tests`` ``repeats`` times, marking each round, with
    pytest's plugins limited to ``plugins`` (by entry-point or module name, as ``-p``).

    Raises:
        ConfigError: a plugin name ``pytest -p`` would not take as a name.
    """
    plugins = check_plugins(plugins)
    template = test_cmd or DEFAULT_TEST_CMD
    one = template.format(python=shlex.quote(python), tests=" ".join(shlex.quote(t) for t in tests))
    # The sandbox sends byte code to an empty private directory, so that an agent's
    # command leaves none in its scope; but then every module of the environment is
    # compiled again at every start (pytest starts 3-4x slower). A test run changes
    # nothing that is kept, so it reads the environment's compiled modules as outside.
    # A log is read by its plain text: a terminal's demand for colour (a Jupyter kernel
    # sets FORCE_COLOR) would put escape codes into pytest's summary lines.
    lines = [
        "unset PYTHONPYCACHEPREFIX FORCE_COLOR CLICOLOR_FORCE",
        "export PY_COLORS=0 NO_COLOR=1",
        # Whatever the template says: pytest reads both at its start, and -p names an
        # entry point (or a module) the environment provides.
        "export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
        "export PYTEST_ADDOPTS=" + shlex.quote(" ".join(f"-p {p}" for p in plugins)),
    ]
    rounds = []
    for r in range(1, max(1, repeats) + 1):
        # `if` keeps a failing round from stopping the verdict's `set -e` script.
        rounds.append(
            f"echo '{_ROUND} {r}@@'\nif {one}\nthen s=0\nelse s=$?\nfi\necho \"{_EXIT} {r} $s@@\""
        )
    if plugins:
        # No round runs when a named plugin would come from the tree: the log has no
        # rounds, so the run is incomplete and grades nothing as passed.
        check = " ".join(shlex.quote(w) for w in ("-c", _SHADOW_CHECK, *plugins))
        rounds = [f"if {shlex.quote(python)} {check}\nthen", *rounds, "fi"]
    return "\n".join(lines + rounds)


def read_run(output: str, *, repeats: int) -> TestRun:
    """Split a log of :func:`make_test_command` into its rounds and read each one."""
    marks = list(_ROUND_RE.finditer(output))
    exits = {int(m.group(1)): int(m.group(2)) for m in _EXIT_RE.finditer(output)}
    statuses: list[dict[str, str]] = []
    codes: list[int | None] = []
    complete = _DROPPED not in output and len(marks) == repeats
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(output)
        part = output[m.end() : end]
        statuses.append(parse_pytest_log(part))
        n = int(m.group(1))
        codes.append(exits.get(n))
        complete = complete and n in exits and bool(_SUMMARY.search(part))
    return TestRun(tuple(statuses), tuple(codes), complete, output)


def run_tests(
    root: str | os.PathLike[str],
    tests: Sequence[str],
    *,
    python: str,
    files: Mapping[str, bytes] | None = None,
    test_cmd: str | None = None,
    repeats: int = 1,
    read_paths: Sequence[str] = (),
    timeout: float = 600.0,
    plugins: Sequence[str] = (),
) -> TestRun:
    """Run ``tests`` on a fresh, confined copy of ``root`` with ``files`` written over it.

    Args:
        root: the tree to test (it is copied; nothing in it changes).
        tests: test ids or test files, as the test command takes them.
        python: the interpreter of the environment the tests run in.
        files: relative path -> bytes written over the copy (the task's tests).
        test_cmd: the command template (:data:`DEFAULT_TEST_CMD` when None).
        repeats: rounds in the one command.
        read_paths: host paths the tests may read (the Python environment's prefix).
        timeout: seconds for one round.
        plugins: the pytest plugins the tests need; no other plugin of the environment
            loads (see :func:`make_test_command`).
    """
    from ..live.verdict import run_confined

    require_pytest(python, test_cmd)
    command = make_test_command(
        tests, python=python, test_cmd=test_cmd, repeats=repeats, plugins=plugins
    )
    run = run_confined(
        root,
        command,
        files=dict(files or {}),
        timeout=timeout * max(1, repeats),
        read_paths=read_paths,
        # A -rA log is about 70 bytes a test: room for ~15,000 tests a round.
        max_output_bytes=1_000_000 * max(1, repeats),
    )
    return read_run(run.output, repeats=repeats)
