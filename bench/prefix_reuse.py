"""Prompt-cache reuse against an ideal count from the runs' own messages; item framing.

For each step of each run, the context is assembled under a strategy and compared with
the previous step's context: the tokens of the shared prefix (what a provider's prompt
cache serves) over the prompt's tokens, summed over the steps after the first.

Two references, measured in the same run on the same steps:

- the **ideal**, made straight from the run's messages: the recorded agent's message
  list (system prompt, task, then each step's text and output; a compaction starts it
  again from its summary). At each step it is the longest common prefix of
  consecutive prompts' message lists, counted in tokens: what a perfect append-only
  agent reuses. ``gap`` is ideal minus ctxnb's reuse.
- the flat layout ctxnb used before its cache-aware layout (system, metadata, all
  items, chat as one text), compared as the longest common prefix of the two texts.

Also printed: keep-all's reuse counted on its OpenAI transcripts (the longest common
prefix of consecutive ``to_messages("openai")`` lists, in tokens), which checks that
the transcripts are append-only as the layout is; and the framing tokens per item.

Usage: ``python bench/prefix_reuse.py [RUN_OR_DIR ...]`` (default: the three shipped
mini-swe-agent runs in ``data/trajectories``; ``tests/data/trajectories/mini-swe-agent``
and the Claude Code session ``tests/data/trajectories/claude-code/258c7280-….jsonl``
are the larger vendored sets).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxnb.context import Context, prefix_reuse
from ctxnb.llm.tokens import TokenCounter, default_token_counter
from ctxnb.replay import Trajectory, load, replay_contexts
from ctxnb.replay._replayer import _turn_text
from ctxnb.strategies.builtin import BlockMasking, KeepAll, ObservationMasking

DATA = Path(__file__).resolve().parent.parent / "data" / "trajectories"
NAMES = ["keep-all", "observation-masking(5)", "block-masking(5, 10)"]


def flat_text(ctx: Context) -> str:
    """The pre-layout rendering: system, metadata, active items, chat, in that order."""
    return "".join(ctx.section(n).text for n in ("system", "metadata", "active", "chat"))


def common_prefix(a: str, b: str) -> str:
    n = len(os.path.commonprefix([a, b]))
    return b[:n]


def shared_messages(prev: Sequence[Any], cur: Sequence[Any], count: Any) -> tuple[int, int]:
    """(tokens of the longest common prefix of two message lists, tokens of ``cur``)."""
    shared = 0
    for a, b in zip(prev, cur, strict=False):
        if a != b:
            break
        shared += count(b)
    return shared, sum(count(m) for m in cur)


def recorded_prompts(traj: Trajectory) -> list[list[str]]:
    """The message list the recorded agent sent before each step."""
    msgs = [m for m in (traj.system_prompt, traj.task) if m]
    out = []
    for step in traj.steps:
        out.append(list(msgs))
        if step.compaction:
            msgs = [m for m in (traj.system_prompt, step.observation) if m]
            continue
        text = _turn_text(step)
        if text:
            msgs.append(text)
        if step.action.tool not in ("reply", "user", "compact") and step.observation:
            msgs.append(step.observation)
    return out


def message_tokens(counter: TokenCounter) -> Any:
    def count(m: Any) -> int:
        if isinstance(m, str):
            return counter.count(m)
        text = m.get("content") or ""
        calls = json.dumps(m.get("tool_calls", []), sort_keys=True)
        return counter.count(text) + (counter.count(calls) if m.get("tool_calls") else 0)

    return count


def runs_of(args: list[str]) -> list[Path]:
    if not args:
        return sorted(DATA.glob("*.traj.json"))
    out: list[Path] = []
    for a in map(Path, args):
        out += sorted([*a.glob("*.traj.json"), *a.glob("*.jsonl")]) if a.is_dir() else [a]
    return out


def measure(runs: list[Path], files: str, counter: TokenCounter) -> dict[str, Any]:
    strategies = [KeepAll(), ObservationMasking(keep_last=5), BlockMasking(keep_last=5, block=10)]
    count = message_tokens(counter)
    tot: dict[str, list[int]] = {k: [0, 0] for k in [*NAMES, "ideal", "messages"]}
    per_run: dict[str, list[float]] = {k: [] for k in [*NAMES, "ideal"]}
    flat: dict[str, list[int]] = {k: [0, 0] for k in NAMES}
    framing: list[int] = []
    masked_cost: list[int] = []
    for path in runs:
        traj = load(path)
        ideal = recorded_prompts(traj)
        run: dict[str, list[int]] = {k: [0, 0] for k in [*NAMES, "ideal"]}
        prev: dict[str, Context] = {}
        prev_msgs: list[Any] | None = None
        labels = iter(NAMES * len(traj.steps))
        for step, _, ctx, _ in replay_contexts(
            traj, strategies, token_counter=counter, files=files
        ):
            key = next(labels)  # contexts come strategy by strategy, in order, each step
            first = key not in prev
            if not first and ctx.total_tokens:
                reuse = prefix_reuse(prev[key], ctx)
                for acc in (tot[key], run[key]):
                    acc[0] += reuse.shared
                    acc[1] += reuse.total
                old, new = flat_text(prev[key]), flat_text(ctx)
                flat[key][0] += counter.count(common_prefix(old, new))
                flat[key][1] += ctx.total_tokens
            if key == "keep-all":
                msgs = ctx.to_messages("openai")
                if prev_msgs is not None:
                    s, t = shared_messages(prev_msgs, msgs, count)
                    tot["messages"][0] += s
                    tot["messages"][1] += t
                    s, t = shared_messages(ideal[step.index - 1], ideal[step.index], count)
                    for acc in (tot["ideal"], run["ideal"]):
                        acc[0] += s
                        acc[1] += t
                prev_msgs = msgs
            prev[key] = ctx
        for k, (s, t) in run.items():
            if t:
                per_run[k].append(s / t)
        last = prev["observation-masking(5)"]
        for it in last.items:
            if it.masked:
                masked_cost.append(it.tokens - counter.count(it.label))
            else:
                body = it.text.split("\n", 1)[1].rsplit("\n</", 1)[0]
                framing.append(it.tokens - counter.count(f"{it.label}\n{body}"))
    return {
        "tot": tot,
        "per_run": per_run,
        "flat": flat,
        "framing": framing,
        "masked": masked_cost,
    }


def main(argv: list[str]) -> None:
    counter = default_token_counter()
    runs = runs_of(argv)
    more = " ..." if len(runs) > 3 else ""
    print(f"{len(runs)} runs: {', '.join(p.name for p in runs[:3])}{more}")
    framed: dict[str, Any] = {}
    for files in ("active", "pool"):
        m = measure(runs, files, counter)
        framed = framed or m  # framing as files active shows it
        tot, per_run = m["tot"], m["per_run"]
        ideal = tot["ideal"][0] / tot["ideal"][1]
        lo, hi = min(per_run["ideal"]), max(per_run["ideal"])
        print(f"files={files}: ideal from the runs' messages {ideal:6.1%} (runs {lo:.1%}-{hi:.1%})")
        for key in NAMES:
            r = tot[key][0] / tot[key][1]
            f = m["flat"][key][0] / m["flat"][key][1]
            lo, hi = min(per_run[key]), max(per_run[key])
            print(
                f"  {key:24s} prefix reuse {r:6.1%} (runs {lo:.1%}-{hi:.1%})  gap to ideal "
                f"{(ideal - r) * 100:+5.1f} points   (baseline flat layout {f:6.1%})"
            )
        msgs = tot["messages"][0] / tot["messages"][1]
        print(f"  keep-all on its OpenAI transcripts (message-list prefix)  {msgs:6.1%}")
    print(
        f"framing tokens per item: mean {statistics.mean(framed['framing']):.1f}, "
        f"max {max(framed['framing'])} (target <= 15); masked item: mean "
        f"{statistics.mean(framed['masked']):.1f}, max {max(framed['masked'])} (target <= 20)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
