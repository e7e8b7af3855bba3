"""The file tools: search speed against grep, and the governance overhead of a read.

1. ``search`` over the standard library corpus vs ``grep -rn`` of the same pattern, in
   the same run (ripgrep path target ≤ 1.5x grep; the pure-Python path is reported):
   see ``bench/tools_search.py``, which this script runs.
2. Policy overhead: ``read_file`` of a small file through ``dispatch`` (path policy,
   indexing, the toolcall record, the audit line) vs a bare ``open().read()``; the
   per-call overhead (target ≤ 1 ms).
3. The door's way in: the same read through ``Backend.call`` (``ToolsBackend``, what
   every door and the live agent call) vs ``dispatch``; the ratio (target ≈ 1.0).

Usage: python bench/tools.py [--calls N] [--skip-search]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ctxnb import Workspace  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402
from ctxnb.tools.backend import ToolsBackend  # noqa: E402


def policy_overhead(calls: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-tools-"))
    try:
        root = copy_sample_workspace(base)
        ws = Workspace.open(root)
        tools = ws.tools(ws.session("bench"), caller="bench")
        path = root / "inventory" / "models.py"
        tools.dispatch("read_file", {"path": "inventory/models.py"})  # warm caches

        def bare() -> None:
            with open(path) as f:
                f.read()

        def governed() -> None:
            out = tools.dispatch("read_file", {"path": "inventory/models.py"})
            assert out["ok"]

        backend = ToolsBackend(tools)

        def through_backend() -> None:
            out = backend.call("read_file", {"path": "inventory/models.py"})
            assert out["ok"]

        results = {}
        for name, fn in (
            ("bare open().read()", bare),
            ("dispatch read_file", governed),
            ("Backend.call read_file", through_backend),
        ):
            ts = []
            for _ in range(calls):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            results[name] = statistics.median(ts) * 1000
        for name, ms in results.items():
            print(f"{name:<24} median {ms * 1000:8.1f} µs")
        over = results["dispatch read_file"] - results["bare open().read()"]
        print(f"per-call overhead        {over * 1000:8.1f} µs  (target <= 1000 µs)")
        ratio = results["Backend.call read_file"] / results["dispatch read_file"]
        print(f"Backend.call / dispatch  {ratio:8.3f}x  (target ~1.0)")
        tools.session.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--skip-search", action="store_true")
    args = ap.parse_args()
    print("== policy overhead of a governed read")
    policy_overhead(args.calls)
    if not args.skip_search:
        print("\n== search vs grep -rn (bench/tools_search.py)")
        import tools_search

        sys.argv = [sys.argv[0]]
        tools_search.main()


if __name__ == "__main__":
    main()
