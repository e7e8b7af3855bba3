"""Notebook layer benchmark: trace loading and the TraceView's first render.

Measures, in one run on one machine:

- ``load_trace`` of a generated 1,000,000-record Agent Trace ledger from JSONL, against
  ``pandas.read_json(lines=True)`` of the same file (target: at least 5x faster,
  although pandas does not even flatten the records);
- ``load_trace`` of its Parquet copy made by ``trace_to_parquet`` (target: at most 1 s);
- ``TraceView`` over 100,000 records: construct it and produce the first render
  payload, the HTML of its first page (target: at most 300 ms).
- ``ReplayView`` over a generated 300-step run under two strategies: its first frame
  (construct the view from the replay frame and item lists, and render header, per-step
  bars and the first step; target at most 300 ms) and one step of the slider (the one
  payload it sends; target at most 50 ms). The baseline is what a user had before:
  ``ContextView.compare`` of the two contexts at one step, built from the contexts.

Run: ``.venv/bin/python bench/notebook.py [--records N] [--keep DIR] [--replay-only]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ctxnb.analysis import load_trace, trace_to_parquet

MODELS = ("anthropic/claude-sonnet-4", "openai/gpt-5", "google/gemini-2.5-pro")
TOOLS = ("write_file", "apply_patch", "edit_lines")
CLASSES = ("AST_REFACTOR", "INTENT_EVOLUTION")


def make_record(i: int, rnd: random.Random) -> dict[str, Any]:
    """One Agent Trace record of a realistic shape (1-3 ranges, related URNs)."""
    intent = f"INT-{rnd.randrange(40):03d}"
    session = f"s-{rnd.randrange(200)}"
    ranges = []
    line = 1
    for _ in range(rnd.randint(1, 3)):
        start = line + rnd.randrange(30)
        end = start + rnd.randrange(20)
        line = end + 1
        r: dict[str, Any] = {
            "start_line": start,
            "end_line": end,
            "content_hash": f"sha256:{rnd.getrandbits(256):064x}",
        }
        if rnd.random() < 0.05:
            r["contributor"] = {"type": "human"}
        ranges.append(r)
    return {
        "version": "0.1.0",
        "id": str(uuid.UUID(int=rnd.getrandbits(128), version=4)),
        "timestamp": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:"
        f"{(i * 7) % 60:02d}.{i % 1000:03d}Z",
        # A commit every hundred agent writes.
        "vcs": {"type": "git", "revision": f"{i // 100:040x}"},
        "tool": {"name": "ctxnb", "version": "0.1.0"},
        "files": [
            {
                "path": f"src/pkg{rnd.randrange(30)}/mod{rnd.randrange(50)}.py",
                "conversations": [
                    {
                        "contributor": {"type": "ai", "model_id": rnd.choice(MODELS)},
                        "ranges": ranges,
                        "related": [
                            {"type": "intent", "url": f"urn:ctxnb:intent:{intent}"},
                            {"type": "session", "url": f"urn:ctxnb:session:{session}"},
                        ],
                    }
                ],
            }
        ],
        "metadata": {
            "intent_id": intent,
            "session_id": session,
            "tool": rnd.choice(TOOLS),
            "mutation_class": rnd.choice(CLASSES),
        },
    }


def write_ledger(path: Path, n: int, *, seed: int = 7) -> None:
    """Write ``n`` records as JSONL, in chunks to bound memory."""
    rnd = random.Random(seed)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    with open(path, "w", encoding="utf-8") as fh:
        chunk: list[str] = []
        for i in range(n):
            chunk.append(dumps(make_record(i, rnd)))
            if len(chunk) == 50_000:
                fh.write("\n".join(chunk) + "\n")
                chunk.clear()
        if chunk:
            fh.write("\n".join(chunk) + "\n")


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def make_run(steps: int, *, seed: int = 11) -> Any:
    """A coding-agent run of ``steps`` steps: file reads, edits and shell outputs."""
    from ctxnb.replay.model import Action, FileTouch, Step, Trajectory, Usage

    rnd = random.Random(seed)
    files = [f"src/pkg/mod{n}.py" for n in range(40)]
    out = []
    for i in range(steps):
        path = rnd.choice(files)
        body = "".join(
            f"def f{i}_{k}(x):\n    return x * {k}\n" for k in range(rnd.randint(20, 60))
        )
        kind = i % 3
        if kind == 0:
            action = Action(tool="read", args={"path": path})
            touch = [FileTouch(path=path, op="read", content=body)]
            obs = body
        elif kind == 1:
            action = Action(tool="bash", args={"command": f"pytest -q tests/test_{i}.py"})
            touch = []
            obs = "".join(
                f"tests/test_{i}.py::test_{k} PASSED\n" for k in range(rnd.randint(30, 90))
            )
        else:
            action = Action(tool="write", args={"path": path})
            touch = [FileTouch(path=path, op="write", content=body + "# edited\n")]
            obs = f"wrote {path}"
        out.append(
            Step(
                index=i,
                thought=f"step {i}: look at {path}",
                action=action,
                observation=obs,
                files=touch,
                usage=Usage(prompt_tokens=None, completion_tokens=200),
            )
        )
    return Trajectory(id=f"generated-{steps}", source_format="ctxnb", task="Fix it", steps=out)


def bench_replay_view(steps: int) -> None:
    from ctxnb.replay.runner import replay, replay_contexts
    from ctxnb.strategies.builtin import KeepAll, ObservationMasking
    from ctxnb.widgets import ContextView, ReplayView
    from ctxnb.widgets.replay_view import item_states

    run = make_run(steps)
    strategies = [KeepAll(), ObservationMasking(10)]
    t0 = time.perf_counter()
    names: dict[str, tuple[str, str]] = {}
    items = {}
    mid = steps // 2
    contexts = {}

    def keep(step, label, ctx) -> None:
        items[(label, step.index)] = item_states(ctx, names)
        if step.index == mid:
            contexts[label] = ctx

    # One replay gives the frame and the item lists (what ReplayView.from_trajectory does).
    frame = replay(run, strategies, on_context=keep)
    t_prepare = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in replay_contexts(run, strategies):
        pass
    t_second = time.perf_counter() - t0
    n_items = sum(len(v) for v in items.values())
    print(
        f"replay of {steps} steps x 2 strategies (the data, not the view): {t_prepare:.1f} s, "
        f"{n_items:,} item states; a second replay for the item lists, as before, would add "
        f"{t_second:.1f} s ({(t_prepare + t_second) / t_prepare:.2f}x)"
    )

    def first_frame() -> int:
        view = ReplayView(frame, items=items)
        return len(view.header.value) + len(view.chart.value) + len(view.detail.value)

    first_frame()  # widget classes and imports warm up once
    runs = [best_of(first_frame, 1) for _ in range(5)]
    t_first = statistics.median(t for t, _ in runs)
    payload = runs[0][1]
    view = ReplayView(frame, items=items)
    rnd = random.Random(3)
    moves = []
    for _ in range(60):
        target = rnd.randrange(steps)
        t = time.perf_counter()
        view.show(target)
        moves.append(time.perf_counter() - t)
    t_step = statistics.median(moves)
    worst = max(moves)

    a, b = contexts["keep-all"], contexts["observation-masking"]

    def baseline() -> int:
        v = ContextView.compare(a, b, labels=("keep-all", "observation-masking"))
        return len(v.summary.value)

    baseline()
    t_base = statistics.median(best_of(baseline, 1)[0] for _ in range(5))
    print(
        f"ReplayView({steps} steps) first frame: {t_first * 1000:6.1f} ms median of 5 "
        f"({payload:,} chars)  (target <= 300 ms) {'OK' if t_first <= 0.3 else 'MISSED'}"
    )
    print(
        f"ReplayView step move:             {t_step * 1000:6.1f} ms median of 60, worst "
        f"{worst * 1000:.1f} ms ({len(view.detail.value):,} chars)  (target <= 50 ms) "
        f"{'OK' if t_step <= 0.05 else 'MISSED'}"
    )
    print(
        f"baseline ContextView.compare of the two contexts at step {mid}: "
        f"{t_base * 1000:6.1f} ms; one ReplayView step is {t_base / t_step:.1f}x faster, "
        f"its first frame (all {steps} steps) {t_base / t_first:.2f}x the baseline's time"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--view-records", type=int, default=100_000)
    ap.add_argument("--replay-steps", type=int, default=300)
    ap.add_argument("--replay-only", action="store_true", help="only the ReplayView figures")
    ap.add_argument("--keep", type=Path, default=None, help="write the files here and keep them")
    args = ap.parse_args()

    bench_replay_view(args.replay_steps)
    if args.replay_only:
        return

    tmp = tempfile.TemporaryDirectory()
    work = args.keep or Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    jsonl, parquet = work / "agent_trace.jsonl", work / "agent_trace.parquet"

    t0 = time.perf_counter()
    write_ledger(jsonl, args.records)
    size_mb = jsonl.stat().st_size / 1e6
    print(
        f"ledger: {args.records:,} records, {size_mb:,.0f} MB (generated in "
        f"{time.perf_counter() - t0:.1f} s)"
    )

    t_load, df = best_of(lambda: load_trace(jsonl), 2)
    print(f"load_trace(jsonl):            {t_load:7.2f} s  ({len(df):,} rows, flattened)")
    del df
    gc.collect()

    t_pandas, raw = best_of(lambda: pd.read_json(jsonl, lines=True), 1)
    print(f"pandas.read_json(lines=True): {t_pandas:7.2f} s  ({len(raw):,} rows, nested)")
    del raw
    gc.collect()
    speedup = t_pandas / t_load
    print(f"  speed-up: {speedup:.1f}x  (target >= 5x) {'OK' if speedup >= 5 else 'MISSED'}")

    trace_to_parquet(jsonl, parquet)
    t_pq, df = best_of(lambda: load_trace(parquet), 3)
    print(
        f"load_trace(parquet):          {t_pq:7.2f} s  ({parquet.stat().st_size / 1e6:,.0f} MB)"
        f"  (target <= 1 s) {'OK' if t_pq <= 1 else 'MISSED'}"
    )

    from ctxnb.widgets import TraceView

    records = df["record_id"].drop_duplicates().iloc[: args.view_records]
    view_df = df[df["record_id"].isin(set(records))].reset_index(drop=True)
    del df
    gc.collect()

    def first_render() -> int:
        view = TraceView(view_df)
        return len(view.table.value) + len(view._repr_html_())

    first_render()  # imports and widget classes warm up once
    runs = []
    for _ in range(5):
        t, payload = best_of(first_render, 1)
        runs.append(t)
    t_view = statistics.median(runs)
    print(
        f"TraceView({len(records):,} records, {len(view_df):,} rows) first render: "
        f"{t_view * 1000:6.0f} ms median of 5 ({payload:,} chars)  (target <= 300 ms) "
        f"{'OK' if t_view <= 0.3 else 'MISSED'}"
    )
    tmp.cleanup()


if __name__ == "__main__":
    main()
