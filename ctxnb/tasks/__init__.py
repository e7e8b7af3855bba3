"""Tasks from real repositories: SWE-bench-format instances, run and graded without
Docker, and tasks mined from a repository's own history.

Files:

- ``instances.py``: the SWE-bench instance and prediction formats, read and written.
- ``grading.py``: SWE-bench's pytest log parser and grading rules.
- ``testrun.py``: one confined command that runs a task's named tests, read into statuses.
- ``evaluate.py``: a patch graded on an instance; an agent run on one and graded.
- ``mine.py``: tasks from the commits of a local git history.
- ``experiment.py``: strategies compared on instances, live runs graded (scripted with
  the gold patches, or any model).
- ``_git.py``: the git a task needs (trees out, patches in, the agent's diff).

Example:
    >>> from ctxnb.tasks import load_instances, mine_tasks, evaluate_patch
    >>> report = mine_tasks("parse", revs="HEAD~5..HEAD")  # doctest: +SKIP
    >>> inst = report.instances[0]  # doctest: +SKIP
    >>> evaluate_patch(inst, inst.patch, repo="parse", python=sys.executable)  # doctest: +SKIP
    <Evaluation parse-174156a7e1b2 RESOLVED_FULL>
"""

from __future__ import annotations

from .._util.lazy import lazy_exports

_LAZY = {
    "DEFAULT_TEST_CMD": "testrun",
    "Evaluation": "evaluate",
    "Instance": "instances",
    "InstanceRun": "evaluate",
    "MineReport": "mine",
    "Prediction": "instances",
    "Report": "grading",
    "evaluate_patch": "evaluate",
    "gold_script": "experiment",
    "grade": "grading",
    "load_instances": "instances",
    "load_predictions": "instances",
    "mine_tasks": "mine",
    "parse_pytest_log": "grading",
    "run_instance": "evaluate",
    "run_instances": "evaluate",
    "run_task_experiment": "experiment",
    "write_instances": "instances",
    "write_predictions": "instances",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
