"""Benchmark SWE-bench grading with pytest's plugin autoloading off (as ctxnb grades now)
against the same grading with it on (as it graded before), in the same run.

The instance is parse's own fix (``tests/data/tasks/parse.bundle``, the tests'
``parse_instance``) graded with its gold patch by :func:`ctxnb.tasks.evaluate_patch`:
export the base tree, apply the patch, write the test patch over it, run the named
tests' files confined, read the log. The baseline's command is the same one with
``env -u PYTEST_DISABLE_PLUGIN_AUTOLOAD`` in front, which brings back every ``pytest11``
plugin of this environment (the dev install has a dozen: xdist, timeout, hypothesis,
anyio, nbval, playwright's, ...). The runs alternate; the median of each, the ratio and
whether both resolved are printed.

Run with::

    python bench/grading_plugins.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the vendored history and its instance

CMD = "{python} -m pytest -rA --tb=no --show-capture=no -p no:cacheprovider -o addopts= {tests}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    from _tasks import PYTHON, clone, parse_instance

    from ctxnb.tasks import evaluate_patch

    with tempfile.TemporaryDirectory() as tmp:
        repo = clone("parse", Path(tmp) / "parse")
        now = parse_instance(repo, test_cmd=CMD)
        before = parse_instance(repo, test_cmd="env -u PYTEST_DISABLE_PLUGIN_AUTOLOAD " + CMD)
        times: dict[str, list[float]] = {"autoload off (now)": [], "autoload on (before)": []}
        resolved: dict[str, bool] = {}
        for _ in range(args.runs):
            for label, inst in zip(times, (now, before), strict=True):
                t0 = time.perf_counter()
                ev = evaluate_patch(inst, inst.patch, repo=repo, python=PYTHON)
                times[label].append(time.perf_counter() - t0)
                resolved[label] = resolved.get(label, True) and ev.resolved
    med = {k: statistics.median(v) for k, v in times.items()}
    for label, value in med.items():
        ok = resolved[label]
        print(f"{label:>22}: median {value:6.2f} s over {args.runs} runs; resolved {ok}")
    on, off = med["autoload on (before)"], med["autoload off (now)"]
    print(f"ratio now/before: {off / on:.2f}x ({on - off:+.2f} s saved per graded instance)")


if __name__ == "__main__":
    main()
