"""What auditing context operations costs (issue 32).

A session of 100 files and 400 tool calls (~2.6 MB of text), 20 chat turns, under
observation masking and a budget that evicts. Prints, with baselines from the same run:

- ``assemble`` with the per-item change rows recorded, against the same assembly with
  recording switched off (the rows are built from counts the assembly already made),
  and with ``ctx.changes`` read (its records are built on first read);
- ``session.context_changes(turn)`` (reads one session version and the labels),
  against ``session.context_at(turn)`` (rebuilds the whole context), the other way to
  learn what a turn held;
- ``session.restore_item`` (finds the change, reads the version, pins, saves).

Usage: python bench/context_changes.py
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import ctxnb.context._assembly as assembly
from ctxnb import Workspace
from ctxnb.strategies.builtin import ObservationMasking

sys.path.insert(0, str(Path(__file__).resolve().parent))
from context import median_ms  # noqa: E402  (bench/context.py: one median timer)


def main() -> None:
    rng = random.Random(32)
    words = ["alpha", "beta", "gamma", "delta", "def", "return", "self", "x", "=", "(", ")"]
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-changes-"))
    try:
        for i in range(100):
            text = " ".join(rng.choice(words) for _ in range(1500)) + "\n"
            (base / f"f{i}.py").write_text(text)
        ws = Workspace.open(base)
        s = ws.session("bench", rules=False)
        s.add_paths([f"f{i}.py" for i in range(100)])
        for i in range(400):
            out = " ".join(rng.choice(words) for _ in range(700)) + "\n"
            s.record_toolcall("run_command", {"cmd": f"job {i}"}, out)
        for i in range(20):
            s.add_turn("user" if i % 2 == 0 else "assistant", f"turn {i} " * 20)
        strategy, budget = ObservationMasking(keep_last=20), 400_000
        s.assemble(strategy, budget, record=False)  # warm the render caches

        with_rows = median_ms(lambda: s.assemble(strategy, budget, record=False), n=9)
        real = assembly.record_changes
        assembly.record_changes = lambda *a, **k: {}  # type: ignore[assignment]
        try:
            without = median_ms(lambda: s.assemble(strategy, budget, record=False), n=9)
        finally:
            assembly.record_changes = real
        lazy = median_ms(lambda: s.assemble(strategy, budget, record=False).changes)
        ctx = s.assemble(strategy, budget)
        ops: dict[str, int] = {}
        for c in ctx.changes:
            ops[c.op] = ops.get(c.op, 0) + 1
        print(f"{len(ctx.changes)} candidates at turn {s.turn}: {ops}")
        print(
            f"assemble: {with_rows:.1f} ms with change rows, {without:.1f} ms without "
            f"(ratio {with_rows / without:.2f}); and reading ctx.changes {lazy:.1f} ms"
        )
        read = median_ms(lambda: s.context_changes(s.turn), n=5)
        rebuild = median_ms(lambda: s.context_at(s.turn), n=5)
        print(
            f"context_changes: {read:.1f} ms; context_at (baseline) {rebuild:.1f} ms "
            f"(ratio {read / rebuild:.2f})"
        )
        masked = [c for c in ctx.changes if c.op == "masked"][:5]
        t = time.perf_counter()
        for c in masked:
            s.restore_item(c)
        each = (time.perf_counter() - t) * 1000 / len(masked)
        print(f"restore_item: {each:.1f} ms each (median of {len(masked)}, one save each)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
