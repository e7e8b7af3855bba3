"""Running SWE-bench-format instances: a patch graded, or an agent run and graded.

:func:`evaluate_patch` grades any patch (the gold one, an empty one, a prediction) the
way the official harness does, on the user's checkout and Python environment instead of
a Docker image: the base commit's tree, the patch applied, the test patch's files written
over it, the FAIL_TO_PASS and PASS_TO_PASS tests run confined (:mod:`ctxnb.tasks.testrun`)
and graded (:mod:`ctxnb.tasks.grading`).

:func:`run_instance` runs an agent on the instance first, through the live-run machinery
(:func:`ctxnb.live.run_task`: a governed, sandboxed workspace, the context assembled under
a strategy, the test files out of the agent's scope and read before it starts), then
grades the tree it left with the same test command, and returns the prediction (its
change as a diff against the base commit) for the official harness.

Example:
    >>> from ctxnb.tasks import evaluate_patch, load_instances
    >>> inst = load_instances("tasks.jsonl")[0]  # doctest: +SKIP
    >>> ev = evaluate_patch(inst, inst.patch, repo="parse", python="python3")  # doctest: +SKIP
    >>> ev.resolved  # doctest: +SKIP
    True
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TaskFormatError, TaskRepoError
from . import _git
from .grading import Report, grade
from .instances import Instance, Prediction, load_predictions, write_predictions
from .testrun import (
    TestRun,
    environment_paths,
    make_test_command,
    resolve_python,
    run_tests,
)

if TYPE_CHECKING:
    from ..live.run import LiveResult
    from ..strategies.builtin import ContextStrategy

__all__ = [
    "Evaluation",
    "InstanceRun",
    "evaluate_patch",
    "run_instance",
    "run_instances",
]


@dataclass(frozen=True)
class Evaluation:
    """How a patch fared on an instance.

    Attributes:
        instance_id: the instance.
        report: the named tests' outcome (None when the patch did not apply).
        applied: whether the patch applied at the base commit.
        complete: the test log was whole (every test the command ran was reported).
        output: the test log.
        note: why it is not resolved when the tests do not say (the patch did not
            apply, the log was cut short), else "".
    """

    instance_id: str
    report: Report | None
    applied: bool
    complete: bool
    output: str
    note: str = ""

    @property
    def status(self) -> str:
        """``RESOLVED_FULL``, ``RESOLVED_PARTIAL`` or ``RESOLVED_NO``."""
        if self.report is None or not self.complete:
            return "RESOLVED_NO"
        return self.report.status

    @property
    def resolved(self) -> bool:
        return self.status == "RESOLVED_FULL"

    def __repr__(self) -> str:
        why = f" ({self.note})" if self.note else ""
        return f"<Evaluation {self.instance_id} {self.status}{why}>"


@dataclass(frozen=True)
class _Prepared:
    # What a run of an instance needs, computed once from the checkout.
    tests: tuple[str, ...]  # the test files the command runs
    files: dict[str, bytes]  # the test patch's files as it leaves them
    existing: tuple[str, ...]  # those of them the base commit has (the agent must not touch)
    read_paths: tuple[str, ...]


def _prepare(
    instance: Instance,
    *,
    repo: str | os.PathLike[str],
    python: str,
    read_paths: Sequence[str] = (),
) -> _Prepared:
    """Check an instance against the checkout and read what its runs need.

    Raises:
        TaskRepoError: the base commit is not in ``repo``, or the test patch does not
            apply there.
        TaskFormatError: the test patch deletes a file (the runs write the test patch's
            files over a tree; they cannot delete one), or the instance names no test.
        TaskError: ``python`` is not an interpreter.
    """
    where = f"instance {instance.instance_id!r}"
    python = resolve_python(python)
    base = _git.commit_of(repo, instance.base_commit)
    written, deleted = _git.patch_paths(instance.test_patch)
    if deleted:
        raise TaskFormatError(
            f"{where}: its test patch deletes {', '.join(deleted)}; only test patches that "
            "add or change files can be run here"
        )
    # The files of the named tests, as the official harness runs them: an id pytest would
    # not take back (one cut at a space in its parameters, as published ids can be) is
    # still found in the file's log, where grading looks for it.
    ids = [*instance.fail_to_pass, *instance.pass_to_pass]
    tests = tuple(dict.fromkeys(t.split("::", 1)[0] for t in ids))
    if not tests:
        raise TaskFormatError(f"{where}: FAIL_TO_PASS and PASS_TO_PASS are both empty")
    with tempfile.TemporaryDirectory(prefix="ctxnb-task-") as tmp:
        tree = _git.export_tree(repo, base, Path(tmp) / "tree")
        existing = tuple(p for p in written if (tree / p).is_file())
        why = _git.apply_patch(tree, instance.test_patch, what="test patch")
        if why is not None:
            raise TaskRepoError(
                f"{where}: {why}. The checkout's commit {base[:12]} is not the tree the "
                "instance was made for, or the patch is damaged; check base_commit and "
                "test_patch"
            )
        files = {p: (tree / p).read_bytes() for p in written}
    paths = tuple(dict.fromkeys([*environment_paths(python), *read_paths]))
    return _Prepared(tests=tests, files=files, existing=existing, read_paths=paths)


def _grade(instance: Instance, run: TestRun, *, applied: bool = True, note: str = "") -> Evaluation:
    # The one place a run's log becomes a verdict on an instance.
    report = grade(run.last, instance.fail_to_pass, instance.pass_to_pass) if applied else None
    if applied and not run.complete and not note:
        note = "the test log is incomplete (cut short, or pytest never reported its summary)"
    return Evaluation(instance.instance_id, report, applied, run.complete, run.output, note)


def evaluate_patch(
    instance: Instance,
    patch: str,
    *,
    repo: str | os.PathLike[str],
    python: str,
    test_cmd: str | None = None,
    read_paths: Sequence[str] = (),
    timeout: float = 600.0,
    plugins: Sequence[str] | None = None,
) -> Evaluation:
    """Grade ``patch`` on ``instance``: the official harness's steps, without Docker.

    Args:
        instance: the task.
        patch: the change to grade (``instance.patch`` for the gold one; "" for none).
        repo: a checkout of the instance's repository that has its base commit (never
            changed: the tree is written out elsewhere).
        python: the interpreter of the environment the tests run in.
        test_cmd: the test command template (the instance's ``test_cmd`` key, else
            :data:`~ctxnb.tasks.testrun.DEFAULT_TEST_CMD`).
        read_paths: more host paths the tests may read.
        timeout: seconds for the test command.
        plugins: the pytest plugins the tests need, by entry-point or module name (the
            instance's ``pytest_plugins`` key when None); pytest loads no other plugin
            of the environment, and none the patched tree ships.

    Raises:
        TaskRepoError, TaskFormatError: see :func:`_prepare`.
        ConfigError: a plugin name ``pytest -p`` would not take.
    """
    python = resolve_python(python)
    prep = _prepare(instance, repo=repo, python=python, read_paths=read_paths)
    with tempfile.TemporaryDirectory(prefix="ctxnb-eval-") as tmp:
        tree = _git.export_tree(repo, instance.base_commit, Path(tmp) / "tree")
        why = _git.apply_patch(tree, patch, what="patch")
        if why is not None:
            empty = TestRun((), (), True, "")
            return _grade(instance, empty, applied=False, note=why)
        run = run_tests(
            tree,
            prep.tests,
            python=python,
            files=prep.files,
            test_cmd=_test_cmd(instance, test_cmd),
            read_paths=prep.read_paths,
            timeout=timeout,
            plugins=_plugins(instance, plugins),
        )
    return _grade(instance, run)


def _test_cmd(instance: Instance, test_cmd: str | None) -> str | None:
    given = test_cmd or instance.extra.get("test_cmd")
    return given if isinstance(given, str) and given else None


def _plugins(instance: Instance, plugins: Sequence[str] | None) -> tuple[str, ...]:
    # The caller's list, else the instance's own record (a mined instance carries the
    # plugins it was mined with), else none.
    if plugins is not None:
        return tuple(plugins)
    given = instance.extra.get("pytest_plugins")
    if given is None:
        return ()
    if not isinstance(given, list) or not all(isinstance(p, str) for p in given):
        raise TaskFormatError(
            f"instance {instance.instance_id!r}: pytest_plugins must be a list of plugin "
            f"names (entry points or modules, as `pytest -p` takes them), not {given!r}"
        )
    return tuple(given)


@dataclass
class InstanceRun:
    """An agent's run on an instance, graded.

    Attributes:
        instance_id: the instance.
        live: the live run (trajectory, tokens, dollars, tampering).
        evaluation: the grading of the tree the agent left.
        prediction: the agent's change, for the official harness.
    """

    instance_id: str
    live: LiveResult
    evaluation: Evaluation
    prediction: Prediction

    @property
    def resolved(self) -> bool:
        """Resolved, and without touching the task's test files."""
        return self.evaluation.resolved and not self.live.tests_tampered

    def __repr__(self) -> str:
        return (
            f"<InstanceRun {self.instance_id} resolved={self.resolved} "
            f"tampered={self.live.tests_tampered} calls={len(self.live.calls)} "
            f"patch={len(self.prediction.model_patch)} chars>"
        )


def run_instance(
    instance: Instance,
    *,
    repo: str | os.PathLike[str],
    python: str,
    model: str,
    strategy: ContextStrategy | None = None,
    model_name: str | None = None,
    test_cmd: str | None = None,
    read_paths: Sequence[str] = (),
    work_dir: str | os.PathLike[str] | None = None,
    plugins: Sequence[str] | None = None,
    **run_args: Any,
) -> InstanceRun:
    """Run an agent on ``instance`` under ``strategy`` and grade what it leaves.

    The agent works in a new directory holding the base commit's tree (a repository of
    its own, so ``git diff`` works for it), governed and sandboxed as every live run is,
    with the Python environment readable. Afterwards its change is the prediction, and
    the test patch's files written over its tree decide the instance.

    Args:
        instance: the task; the agent is told its problem statement.
        repo: a checkout that has the base commit (never changed).
        python: the interpreter of the environment the tests run in.
        model: any litellm model (``**server.model_args`` of a
            :class:`~ctxnb.live.ScriptedModelServer` for a scripted one).
        strategy: the context strategy (KeepAll when None).
        model_name: ``model_name_or_path`` of the prediction (``model`` when None).
        test_cmd: see :func:`evaluate_patch`.
        read_paths: more host paths the agent's commands and the tests may read.
        work_dir: where the agent's tree is made (a new temporary directory when None,
            removed afterwards; a given one is kept).
        plugins: the pytest plugins the instance's tests need (``anyio`` ...; the
            instance's ``pytest_plugins`` key when None): neither the live verdict
            (``Task.plugins``) nor the grading loads any other plugin of the environment.
        **run_args: passed on to :func:`ctxnb.live.run_task` (``api_base``,
            ``step_limit``, ``budget``, ``prices`` ...).
    """
    from ..config import load_config
    from ..live.run import Task, run_task
    from ..workspace import Workspace

    python = resolve_python(python)
    plugins = _plugins(instance, plugins)
    prep = _prepare(instance, repo=repo, python=python, read_paths=read_paths)
    own = work_dir is None
    base_dir = (
        Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="ctxnb-run-"))
    )
    try:
        root = _git.export_tree(repo, instance.base_commit, base_dir / "work")
        snapshot = _git.init_snapshot(root, f"{instance.instance_id} at {instance.base_commit}")
        hidden = base_dir / "test-patch"
        for rel, data in prep.files.items():
            target = hidden / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        hidden.mkdir(exist_ok=True)
        cfg = load_config(root)
        sandbox = replace(cfg.sandbox, read_paths=[*cfg.sandbox.read_paths, *prep.read_paths])
        ws = Workspace.open(root, config=replace(cfg, sandbox=sandbox))
        task = Task(
            prompt=instance.problem_statement,
            test=make_test_command(
                prep.tests, python=python, test_cmd=_test_cmd(instance, test_cmd), plugins=plugins
            ),
            id=instance.instance_id,
            tests=prep.existing,
            hidden=str(hidden),
            # The live verdict runs the named tests with ctxnb's runner, in the
            # instance's environment: `solved` cannot come from a log the agent shaped.
            test_ids=(*instance.fail_to_pass, *instance.pass_to_pass),
            runner="pytest",
            python=python,
            plugins=plugins,
        )
        try:
            live = run_task(ws, task, model=model, strategy=strategy, **run_args)
        finally:
            ws.close()
        # The grade reads the instance's own test log (the harness's parsers): the
        # tree the agent left is tested again, with room for the whole log.
        run = run_tests(
            root,
            prep.tests,
            python=python,
            files=prep.files,
            test_cmd=_test_cmd(instance, test_cmd),
            read_paths=prep.read_paths,
            plugins=plugins,
        )
        evaluation = _grade(instance, run)
        patch = _git.diff_against(root, snapshot)
    finally:
        if own:
            shutil.rmtree(base_dir, ignore_errors=True)
    prediction = Prediction(instance.instance_id, model_name or model, patch)
    return InstanceRun(instance.instance_id, live, evaluation, prediction)


def run_instances(
    instances: Iterable[Instance],
    *,
    repo: str | os.PathLike[str],
    python: str,
    model: str,
    predictions: str | os.PathLike[str],
    rerun: bool = False,
    **options: Any,
) -> list[InstanceRun]:
    """Run :func:`run_instance` on each instance, writing each prediction to
    ``predictions`` as soon as it is made.

    The file is rewritten whole and atomically after every instance, so a run stopped
    half-way keeps every prediction made so far; predictions already in it are kept, and
    their instances are not run again unless ``rerun`` (then the new one replaces the
    old in its place). Run the same call again to finish an interrupted run.

    Args:
        instances: the tasks.
        repo, python, model: see :func:`run_instance`.
        predictions: the predictions file (``.jsonl``) the official harness reads.
        rerun: run instances the file already answers.
        **options: passed on to :func:`run_instance` (``strategy``, ``model_name``,
            ``api_base``, ``prices`` ...).

    Returns:
        The runs made now, in order.

    Raises:
        TaskFormatError: the predictions file exists and is not a predictions file
            (nothing is run, nothing is overwritten).
    """
    path = Path(predictions)
    done = {p.instance_id: p for p in load_predictions(path)} if path.exists() else {}
    runs: list[InstanceRun] = []
    for inst in instances:
        if inst.instance_id in done and not rerun:
            continue
        run = run_instance(inst, repo=repo, python=python, model=model, **options)
        done[inst.instance_id] = run.prediction
        write_predictions(done.values(), path)
        runs.append(run)
    return runs
