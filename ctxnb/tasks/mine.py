"""Mining tasks from a repository's own history: a benchmark no model was trained on.

For each commit on the first-parent line of ``revs`` that changes both test files and
other files, :func:`mine_tasks` runs the commit's test files twice over, confined
(:mod:`ctxnb.tasks.testrun`):

- **before**: the parent's tree with the commit's test files written over it (what an
  agent starts from, with the tests that will judge it);
- **after**: the commit's tree.

Each side runs ``repeats`` rounds in one command. A test whose status is not the same in
every round of a side is **flaky** and dropped. FAIL_TO_PASS is every test that passes
after and failed (or was never reported: its file did not import) before; PASS_TO_PASS
every test that passed on both sides. A commit with no FAIL_TO_PASS test is not a task.

The task is a SWE-bench-format :class:`~ctxnb.tasks.Instance`: the parent as base
commit, the commit message as problem statement, the commit's test-file diff as test
patch and its other changes as the gold patch, plus the ``test_cmd`` it was mined with (so
:func:`~ctxnb.tasks.evaluate_patch` runs the same command). Mining is deterministic, and
each commit's rounds are cached, keyed by the commit, its parent, the test command, the
environment's interpreter and the rounds: mining again costs nothing.

Example:
    >>> from ctxnb.tasks import mine_tasks
    >>> report = mine_tasks("path/to/repo", revs="HEAD~20..HEAD")  # doctest: +SKIP
    >>> report.instances[0].fail_to_pass  # doctest: +SKIP
    ('tests/test_parse.py::test_grouping',)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util.jsoncache import write_json_atomic
from ..live.verdict import check_plugins
from . import _git
from .instances import Instance
from .testrun import DEFAULT_TEST_CMD, environment_paths, resolve_python, run_tests

__all__ = ["MineReport", "default_cache_dir", "is_test_file", "mine_tasks"]

# 2: pytest autoloads no plugin (the rounds of format 1 loaded every one).
_CACHE_FORMAT = 2
_TEST_NAME = re.compile(r"(^test_.*\.py$)|(_test\.py$)|(^tests?\.py$)")
_PASS = ("PASSED", "XFAIL")
_FAIL = ("FAILED", "ERROR")


def is_test_file(path: str) -> bool:
    """A test file: any file under a ``tests``/``test`` directory (the tests' own data and
    fixtures travel with the test patch, as SWE-bench's do), or a Python file named as
    pytest finds tests (``test_*.py``, ``*_test.py``).

    Example:
        >>> [is_test_file(p) for p in ("tests/data/a.json", "parse.py", "a/test_b.py")]
        [True, False, True]
    """
    parts = path.split("/")
    if any(p in ("tests", "test") for p in parts[:-1]):
        return True
    return parts[-1].endswith(".py") and bool(_TEST_NAME.search(parts[-1]))


def default_cache_dir() -> Path:
    """Where rounds are cached: ``$CTXNB_CACHE_DIR/tasks``, else
    ``$XDG_CACHE_HOME/ctxnb/tasks``, else ``~/.cache/ctxnb/tasks``."""
    if os.environ.get("CTXNB_CACHE_DIR"):
        return Path(os.environ["CTXNB_CACHE_DIR"]) / "tasks"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ctxnb" / "tasks"


@dataclass
class MineReport:
    """What mining found.

    Attributes:
        instances: the tasks, in history order.
        skipped: ``(commit, reason)`` for each commit looked at that is not a task.
        flaky: commit -> the tests dropped as flaky there.
        commits: commits looked at.
        rounds_run: test commands run now (a command runs ``repeats`` rounds).
        rounds_cached: test commands answered from the cache.
    """

    instances: list[Instance] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    flaky: dict[str, list[str]] = field(default_factory=dict)
    commits: int = 0
    rounds_run: int = 0
    rounds_cached: int = 0

    def __repr__(self) -> str:
        return (
            f"<MineReport {len(self.instances)} tasks from {self.commits} commits "
            f"(skipped {len(self.skipped)}, flaky tests {sum(map(len, self.flaky.values()))}, "
            f"runs {self.rounds_run} new + {self.rounds_cached} cached)>"
        )


def _want_progress(progress: bool | None) -> bool:
    from ..indexer import _want_progress as want  # the one rule for when a bar shows

    return want(progress)


def mine_tasks(
    repo: str | os.PathLike[str],
    *,
    revs: str = "HEAD",
    python: str | None = None,
    test_cmd: str | None = None,
    repeats: int = 2,
    name: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    is_test: Callable[[str], bool] = is_test_file,
    read_paths: Sequence[str] = (),
    timeout: float = 600.0,
    progress: bool | None = None,
    plugins: Sequence[str] = (),
) -> MineReport:
    """Make SWE-bench-format tasks from the commits of ``revs`` in ``repo``.

    Args:
        repo: a git repository (read only: trees are written out elsewhere).
        revs: the commits to look at, as ``git rev-list`` takes them (``HEAD``: the whole
            first-parent history; ``v1.0..main``: a range).
        python: the interpreter of the environment the tests run in (this one when None).
        test_cmd: the test command template (:data:`~ctxnb.tasks.testrun.DEFAULT_TEST_CMD`).
        repeats: rounds per side; a test whose status differs between rounds is dropped.
            At least 2 to see flaky tests.
        name: the task names' prefix and the instances' ``repo`` (the directory's name).
        cache_dir: where rounds are cached (:func:`default_cache_dir` when None).
        is_test: which changed files are tests (:func:`is_test_file`).
        read_paths: more host paths the tests may read.
        timeout: seconds for one round.
        progress: show a progress bar (None: in a terminal or notebook).
        plugins: the pytest plugins the tests need (entry-point or module names, as
            ``pytest -p`` takes them); no other plugin of the environment loads, and each
            instance records them (``pytest_plugins``) so that its grading loads the same.

    Raises:
        TaskRepoError: ``repo`` is not a repository or ``revs`` names nothing there.
        TaskError: ``python`` is not an interpreter.
    """
    python = resolve_python(python or sys.executable)
    test_cmd = test_cmd or DEFAULT_TEST_CMD
    plugins = check_plugins(plugins)
    name = name or Path(os.path.realpath(repo)).name
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    paths = [*environment_paths(python), *read_paths]
    commits = (
        _git.git(repo, "rev-list", "--first-parent", "--reverse", revs).stdout.decode().split()
    )
    report = MineReport(commits=len(commits))
    bar: Any = None
    if _want_progress(progress) and commits:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(commits), desc="ctxnb tasks mine", unit="commit")
    try:
        for commit in commits:
            try:
                _mine_one(
                    repo,
                    commit,
                    report,
                    name=name,
                    python=python,
                    test_cmd=test_cmd,
                    repeats=repeats,
                    cache=cache,
                    is_test=is_test,
                    read_paths=paths,
                    timeout=timeout,
                    plugins=plugins,
                )
            finally:
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return report


def _mine_one(
    repo: str | os.PathLike[str],
    commit: str,
    report: MineReport,
    *,
    name: str,
    python: str,
    test_cmd: str,
    repeats: int,
    cache: Path,
    is_test: Callable[[str], bool],
    read_paths: Sequence[str],
    timeout: float,
    plugins: tuple[str, ...],
) -> None:
    parents = _git.git(repo, "rev-list", "--parents", "-n", "1", commit).stdout.decode().split()[1:]
    if not parents:
        report.skipped.append((commit, "no parent (the first commit)"))
        return
    parent = parents[0]
    changed = _git.changed_files(repo, parent, commit)
    tests = sorted(p for s, p in changed if is_test(p) and s != "D")
    code = sorted(p for _, p in changed if not is_test(p))
    if not tests:
        report.skipped.append((commit, "changes no test file"))
        return
    if not code:
        report.skipped.append((commit, "changes only tests"))
        return
    if any(s == "D" and is_test(p) for s, p in changed):
        report.skipped.append((commit, "deletes a test file"))
        return
    key = hashlib.sha256(
        json.dumps(
            [_CACHE_FORMAT, commit, parent, test_cmd, python, repeats, tests, plugins]
        ).encode()
    ).hexdigest()
    entry = cache / f"{key}.json"
    sides = _read_cache(entry)
    if sides is None:
        sides = _run_sides(
            repo,
            parent,
            commit,
            tests,
            python=python,
            test_cmd=test_cmd,
            repeats=repeats,
            read_paths=read_paths,
            timeout=timeout,
            plugins=plugins,
        )
        report.rounds_run += 2
        write_json_atomic(entry, {"format": _CACHE_FORMAT, "sides": sides})
    else:
        report.rounds_cached += 2
    if not sides["after"]["complete"] or not sides["before"]["complete"]:
        report.skipped.append((commit, "a test log was incomplete (cut short, or no summary)"))
        return
    before, flaky_before = _stable(sides["before"]["statuses"])
    after, flaky_after = _stable(sides["after"]["statuses"])
    flaky = sorted(flaky_before | flaky_after)
    if flaky:
        report.flaky[commit] = flaky
    f2p = sorted(
        t
        for t, s in after.items()
        if s in _PASS and t not in flaky and (before.get(t) in _FAIL or t not in before)
    )
    p2p = sorted(
        t for t, s in after.items() if s in _PASS and before.get(t) in _PASS and t not in flaky
    )
    if not f2p:
        report.skipped.append((commit, "no test fails before and passes after"))
        return
    info = _git.git(repo, "log", "-1", "--format=%cI%x00%B", commit).stdout.decode()
    date, message = info.split("\x00", 1)
    report.instances.append(
        Instance(
            instance_id=f"{name}-{commit[:12]}",
            repo=name,
            base_commit=parent,
            problem_statement=message.strip(),
            test_patch=_git.diff_paths(repo, parent, commit, tests),
            patch=_git.diff_paths(repo, parent, commit, code),
            fail_to_pass=tuple(f2p),
            pass_to_pass=tuple(p2p),
            extra={
                "hints_text": "",
                "created_at": date,
                "version": "",
                "environment_setup_commit": parent,
                "test_cmd": test_cmd,
                # Only when there are some: an instance without them loads none.
                **({"pytest_plugins": list(plugins)} if plugins else {}),
            },
        )
    )


def _read_cache(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT:
        return None
    sides = data.get("sides")
    return sides if isinstance(sides, dict) and {"before", "after"} <= set(sides) else None


def _run_sides(
    repo: str | os.PathLike[str],
    parent: str,
    commit: str,
    tests: list[str],
    *,
    python: str,
    test_cmd: str,
    repeats: int,
    read_paths: Sequence[str],
    timeout: float,
    plugins: tuple[str, ...],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxnb-mine-") as tmp:
        after_tree = _git.export_tree(repo, commit, Path(tmp) / "after")
        files = {t: (after_tree / t).read_bytes() for t in tests}
        before_tree = _git.export_tree(repo, parent, Path(tmp) / "before")
        for side, tree in (("before", before_tree), ("after", after_tree)):
            run = run_tests(
                tree,
                tests,
                python=python,
                files=files,
                test_cmd=test_cmd,
                repeats=repeats,
                read_paths=read_paths,
                timeout=timeout,
                plugins=plugins,
            )
            out[side] = {"statuses": list(run.statuses), "complete": run.complete}
    return out


def _stable(rounds: list[dict[str, str]]) -> tuple[dict[str, str], set[str]]:
    """The statuses every round agrees on, and the tests whose status changed (a test
    missing from one round and reported in another changed too)."""
    names = {t for r in rounds for t in r}
    flaky = {t for t in names if len({r.get(t) for r in rounds}) > 1}
    first = rounds[0] if rounds else {}
    return {t: s for t, s in first.items() if t not in flaky}, flaky
