"""Prompt-cache reuse and item framing on the shipped mini-swe-agent trajectories.

For each step of each run, the context is assembled under a strategy and compared with
the previous step's context: the tokens of the shared prefix (what a provider's prompt
cache serves) over the prompt's tokens, per step. The baseline, measured in the same
run on the same contexts, is the flat layout ctxnb used before its cache-aware layout
(system, metadata, all items, chat as one text), compared as the longest common prefix
of the two texts. Also printed: the framing tokens per item and per masked item.

Usage: python bench/prefix_reuse.py
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from ctxnb.context import Context, prefix_reuse
from ctxnb.replay import load, replay_contexts
from ctxnb.strategies import BlockMasking, KeepAll, ObservationMasking
from ctxnb.tokens import default_token_counter

DATA = Path(__file__).resolve().parent.parent / "data" / "trajectories"
RUNS = sorted(DATA.glob("*.traj.json"))  # the mini-swe-agent runs


def flat_text(ctx: Context) -> str:
    """The pre-layout rendering: system, metadata, active items, chat, in that order."""
    return "".join(ctx.section(n).text for n in ("system", "metadata", "active", "chat"))


def common_prefix(a: str, b: str) -> str:
    n = len(os.path.commonprefix([a, b]))
    return b[:n]


def main() -> None:
    counter = default_token_counter()
    strategies = [KeepAll(), ObservationMasking(keep_last=5), BlockMasking(keep_last=5, block=10)]
    names = ["keep-all", "observation-masking(5)", "block-masking(5, 10)"]
    ratios: dict[str, list[float]] = {k: [] for k in names}
    tokens: dict[str, list[int]] = {k: [0, 0] for k in names}  # shared, total
    flat: dict[str, list[float]] = {k: [] for k in ratios}
    framing: list[int] = []
    masked_cost: list[int] = []
    for path in RUNS:
        traj = load(path)
        prev: dict[str, Context] = {}
        labels = iter(names * len(traj.steps))
        for _, _, ctx, _ in replay_contexts(traj, strategies, token_counter=counter):
            key = next(labels)  # contexts come strategy by strategy, in order, each step
            if key in prev and ctx.total_tokens:
                reuse = prefix_reuse(prev[key], ctx)
                ratios[key].append(reuse.ratio)
                tokens[key][0] += reuse.shared
                tokens[key][1] += reuse.total
                old, new = flat_text(prev[key]), flat_text(ctx)
                flat[key].append(counter.count(common_prefix(old, new)) / ctx.total_tokens)
            prev[key] = ctx
        last = prev["observation-masking(5)"]
        for it in last.items:
            if it.masked:
                masked_cost.append(it.tokens - counter.count(it.label))
            else:
                body = it.text.split("\n", 1)[1].rsplit("\n</", 1)[0]
                framing.append(it.tokens - counter.count(f"{it.label}\n{body}"))
    print(f"{len(RUNS)} mini-swe-agent runs, {len(ratios['keep-all'])} steps each strategy")
    for key in ratios:
        r, f = ratios[key], flat[key]
        print(
            f"prefix reuse per step, {key:24s} median {statistics.median(r):6.1%}  "
            f"mean {statistics.mean(r):6.1%}  all tokens {tokens[key][0] / tokens[key][1]:6.1%}   "
            f"(baseline flat layout: median {statistics.median(f):6.1%}, "
            f"mean {statistics.mean(f):6.1%})"
        )
    print(
        f"framing tokens per item: mean {statistics.mean(framing):.1f}, max {max(framing)} "
        f"(target <= 15); masked item: mean {statistics.mean(masked_cost):.1f}, "
        f"max {max(masked_cost)} (target <= 20)"
    )


if __name__ == "__main__":
    main()
