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

Each is printed as a median and as a ratio to the first.

Usage: python bench/partition.py
"""

from __future__ import annotations

import shutil
import statistics
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


def main() -> None:
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
        print(f"select_active_intent, {FILES} indexed files, {OTHERS} other live leases")
        print("                                  first select     then (median)")
        for name, (first, then) in (
            ("overlap = allow (no check)     ", allow),
            ("disjoint globs (globs only)    ", disjoint),
            ("may overlap, confirmed on index", confirm),
        ):
            print(
                f"  {name} {first * 1000:8.2f} ms {first / allow[0]:5.2f}x"
                f" {then * 1000:8.2f} ms {then / allow[1]:5.2f}x"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
