"""What write partitioning adds to selecting an intent.

A workspace of 2,000 indexed files and eight other live sessions' leases. Selecting an
intent (``select_active_intent`` through the governed tools) is timed three ways in the
same run:

- ``overlap = "allow"``: no check, the lease is written (the cost before partitioning,
  plus one small file);
- the default check beside eight leases whose globs cannot overlap (literal leading
  directories diverge: decided on the globs alone);
- the check beside eight leases whose globs may overlap (``*.css0`` … match at any depth)
  but share no file: the indexed files are read from the store to confirm.

Each is printed as a median and as a ratio to the first. With ``--baseline-ref REF``
the same is run, in turn, in a fresh process with ctxnb's code at REF (its ``ctxnb/``
extracted with ``git archive``): the last column is this code's median against REF's,
in one run.

Usage: python bench/partition.py [--baseline-ref main]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.partition import release_lease, write_lease

FILES = 2000
OTHERS = 8
RUNS = 25

INTENTS = """\
active_intents:
  - id: INT-APP
    name: App
    owned_scope: ["src/**"]
"""


def _tree(root: Path) -> None:
    for i in range(FILES):
        d = root / "src" / f"pkg{i % 40}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"X_{i} = {i}\n")
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)


def _time(ws: Workspace, others: list[str]) -> tuple[float, float]:
    for n, scope in enumerate(others):
        write_lease(ws.root, f"other-{n}", f"INT-OTHER-{n}", [scope])
    tools = ws.tools(ws.session("bench"))
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        out = tools.dispatch("select_active_intent", {"intent_id": "INT-APP"})
        times.append(time.perf_counter() - t)
        assert out["ok"], out
    tools.session.close()
    for n in range(len(others)):
        release_lease(ws.root, f"other-{n}")
    return times[0], statistics.median(times[1:])


REPO = Path(__file__).resolve().parent.parent
ROWS = (
    "overlap = allow (no check)     ",
    "disjoint globs (globs only)    ",
    "may overlap, confirmed on files",
)


def measure() -> list[tuple[float, float]]:
    """(first select, median of the next) for each row, in this process."""
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-partition-"))
    try:
        root = base / "ws"
        _tree(root)
        Workspace.open(root).index(progress=False)
        (root / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
        allow = _time(Workspace.open(root), [])
        (root / "ctxnb.toml").unlink()
        disjoint = _time(Workspace.open(root), [f"docs/d{n}/**" for n in range(OTHERS)])
        confirm = _time(Workspace.open(root), [f"*.css{n}" for n in range(OTHERS)])
        return [allow, disjoint, confirm]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def baseline(ref: str, work: Path) -> list[tuple[float, float]]:
    """:func:`measure` with ctxnb's code at ``ref``, in a fresh process."""
    code = work / "baseline"
    code.mkdir()
    archive = subprocess.run(
        ["git", "archive", ref, "ctxnb"], cwd=REPO, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--json"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=code,
    ).stdout
    res = json.loads(out.strip().splitlines()[-1])
    # The baseline's code must be the one that ran, not this checkout's.
    assert res["code"].startswith(str(code)), res["code"]
    return [tuple(r) for r in res["rows"]]  # type: ignore[misc]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-ref", default=None, help="ctxnb's code to compare with")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:
        import ctxnb

        print(json.dumps({"rows": measure(), "code": ctxnb.__file__}))
        return
    rows = measure()
    before = None
    if args.baseline_ref:
        work = Path(tempfile.mkdtemp(prefix="ctxnb-bench-partition-ref-"))
        try:
            before = baseline(args.baseline_ref, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    allow = rows[0]
    print(f"select_active_intent, {FILES} indexed files, {OTHERS} other live leases")
    head = "                                  first select     then (median)"
    ref = args.baseline_ref
    print(head + (f"   {ref}: first / then     this/{ref}: first / then" if before else ""))
    for n, (name, (first, then)) in enumerate(zip(ROWS, rows, strict=True)):
        line = (
            f"  {name} {first * 1000:8.2f} ms {first / allow[0]:5.2f}x"
            f" {then * 1000:8.2f} ms {then / allow[1]:5.2f}x"
        )
        if before:
            b_first, b_then = before[n]
            line += (
                f" {b_first * 1000:8.2f} / {b_then * 1000:6.2f} ms"
                f"   {first / b_first:6.3f}x / {then / b_then:6.3f}x"
            )
        print(line)


if __name__ == "__main__":
    sys.exit(main())
