"""The ``ctxnb tasks`` command: tasks from a git history, and patches graded on them.

Example:
    ``ctxnb tasks mine path/to/repo --revs v1.0..main --out tasks.jsonl`` writes one
    SWE-bench-format instance a line; ``ctxnb tasks evaluate tasks.jsonl --repo
    path/to/repo --gold`` grades each instance's gold patch (or ``--predictions
    preds.jsonl``, a predictions file as the official harness reads it).
"""

from __future__ import annotations

import argparse
import json
import sys

from .app import _out, arg, command

__all__: list[str] = []


@command(
    "tasks",
    help="mine SWE-bench-format tasks from a git history (mine), or grade patches on "
    "them without Docker (evaluate)",
)
@arg("action", choices=("mine", "evaluate"), help="mine REPO, or evaluate INSTANCES")
@arg("path", metavar="PATH", help="mine: the git repository; evaluate: the instances file")
@arg("--repo", default=None, help="evaluate: a checkout that has the instances' base commits")
@arg("--revs", default="HEAD", help="mine: the commits, as git rev-list takes them")
@arg("--python", default=None, help="the environment's interpreter (default: this one)")
@arg("--test-cmd", default=None, help="the test command; {python} and {tests} are filled in")
@arg("--plugin", action="append", default=None, metavar="NAME",
     help="a pytest plugin the tests need (entry point or module, as pytest -p takes it), "
          "repeatable; no other plugin loads (evaluate: default: each instance's "
          "pytest_plugins)")  # fmt: skip
@arg("--repeats", type=int, default=2, help="mine: rounds per side (flaky tests are dropped)")
@arg("--name", default=None, help="mine: the task names' prefix (default: the directory's)")
@arg("--cache", default=None, help="mine: the cache directory")
@arg("--out", default=None, help="mine: write the instances here (default: standard output)")
@arg("--gold", action="store_true", help="evaluate: grade each instance's own patch")
@arg("--predictions", default=None, help="evaluate: a predictions file to grade")
@arg("--no-progress", action="store_true", help="never show a progress bar")
def _cmd_tasks(ns: argparse.Namespace) -> int:
    python = ns.python or sys.executable
    if ns.action == "mine":
        return _mine(ns, python)
    return _evaluate(ns, python)


def _mine(ns: argparse.Namespace, python: str) -> int:
    from ..tasks.instances import write_instances
    from ..tasks.mine import mine_tasks

    if ns.repeats < 1:
        raise SystemExit("ctxnb tasks: error: --repeats must be at least 1")
    report = mine_tasks(
        ns.path,
        revs=ns.revs,
        python=python,
        test_cmd=ns.test_cmd,
        repeats=ns.repeats,
        name=ns.name,
        cache_dir=ns.cache,
        progress=False if ns.no_progress else None,
        plugins=ns.plugin or (),
    )
    if ns.out:
        write_instances(report.instances, ns.out)
    else:
        for inst in report.instances:
            _out(json.dumps(inst.to_dict(), ensure_ascii=False))
    flaky = sum(len(v) for v in report.flaky.values())
    sys.stderr.write(
        f"ctxnb tasks: {len(report.instances)} tasks from {report.commits} commits "
        f"({len(report.skipped)} skipped, {flaky} flaky tests dropped, "
        f"{report.rounds_cached} of {report.rounds_cached + report.rounds_run} runs cached)"
        + (f"; wrote {ns.out}" if ns.out else "")
        + "\n"
    )
    return 0


def _evaluate(ns: argparse.Namespace, python: str) -> int:
    from ..errors import TaskFormatError
    from ..tasks.evaluate import evaluate_patch
    from ..tasks.instances import load_instances, load_predictions

    if not ns.repo:
        raise SystemExit("ctxnb tasks: error: evaluate needs --repo (a checkout of the repository)")
    if ns.gold == bool(ns.predictions):
        raise SystemExit("ctxnb tasks: error: evaluate needs one of --gold or --predictions")
    instances = load_instances(ns.path)
    patches: dict[str, str] = {i.instance_id: i.patch for i in instances}
    if ns.predictions:
        patches = {p.instance_id: p.model_patch for p in load_predictions(ns.predictions)}
        unknown = sorted(set(patches) - {i.instance_id for i in instances})
        if unknown:
            raise TaskFormatError(
                f"{ns.predictions}: predictions for instances not in {ns.path}: "
                f"{', '.join(unknown[:5])}"
            )
    resolved = 0
    for inst in instances:
        if inst.instance_id not in patches:
            continue
        ev = evaluate_patch(
            inst,
            patches[inst.instance_id],
            repo=ns.repo,
            python=python,
            test_cmd=ns.test_cmd,
            plugins=ns.plugin,
        )
        resolved += ev.resolved
        note = f"  ({ev.note})" if ev.note else ""
        _out(f"{inst.instance_id}\t{ev.status}{note}")
    _out(f"resolved {resolved} of {len(patches)}")
    return 0
