"""Keep-all's prompt reuses its prefix as well as the agent's own message list does.

The reference is made here, straight from each run's recorded messages and without
ctxnb's context code: the message list the agent sent before each step (system prompt,
task, then each step's text and output; a compaction starts it again from its summary).
At each step the reusable part is the longest common prefix of consecutive lists, in
tokens of the same counter: what a perfect append-only agent reuses. The replay's own
figure is its frame's ``cache_read_tokens`` over ``total_tokens`` (steps after the
first), the number its dollars are computed from. docs/research.md gives both.
"""

from __future__ import annotations

import pandas as pd
import pytest
from _paths import TESTS

from ctxnb.llm.tokens import default_token_counter
from ctxnb.replay import Trajectory, load
from ctxnb.replay.model import Step
from ctxnb.replay.runner import replay
from ctxnb.samples import data_dir
from ctxnb.strategies.builtin import BlockMasking, KeepAll

CC = TESTS / "data" / "trajectories" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _step_text(step: Step) -> str:
    # What the agent wrote at a step: its thought and its action as recorded.
    raw = step.action.raw or ""
    if not raw and step.action.tool not in ("reply", "user", "compact"):
        args = ", ".join(f"{k}={v}" for k, v in step.action.args.items())
        raw = f"{step.action.tool}({args})"
    thought = step.thought or ""
    if thought and thought in raw:
        return raw
    return "\n\n".join(x for x in (thought, raw) if x)


def _agent_prompts(run: Trajectory) -> list[list[str]]:
    """The message list the recorded agent sent before each step."""
    msgs = [m for m in (run.system_prompt, run.task) if m]
    out = []
    for step in run.steps:
        out.append(list(msgs))
        if step.compaction:
            msgs = [m for m in (run.system_prompt, step.observation) if m]
            continue
        text = _step_text(step)
        if text:
            msgs.append(text)
        if step.action.tool not in ("reply", "user", "compact") and step.observation:
            msgs.append(step.observation)
    return out


def _ideal(runs: list[Trajectory]) -> float:
    count = default_token_counter().count
    shared = total = 0
    for run in runs:
        prompts = _agent_prompts(run)
        for prev, cur in zip(prompts, prompts[1:], strict=False):
            for a, b in zip(prev, cur, strict=False):
                if a != b:
                    break
                shared += count(b)
            total += sum(count(m) for m in cur)
    return shared / total


def _reuse(df: pd.DataFrame) -> pd.Series:
    later = df[df["step"] > 0]
    sums = later.groupby("strategy")[["cache_read_tokens", "total_tokens"]].sum()
    return sums["cache_read_tokens"] / sums["total_tokens"]


def _check(runs: list[Trajectory]) -> tuple[float, pd.Series]:
    frames = [replay(r, [KeepAll(), BlockMasking(5, 10)], files="pool") for r in runs]
    reuse = _reuse(pd.concat(frames, ignore_index=True))
    ideal = _ideal(runs)
    # The targets: keep-all within 2 points of the ideal, block masking at 85% or more.
    assert ideal - reuse["keep-all"] <= 0.02, (ideal, reuse.to_dict())
    assert reuse["block-masking"] >= 0.85, reuse.to_dict()
    # And the check can tell: block masking gives up some of the prefix.
    assert reuse["block-masking"] < reuse["keep-all"] <= ideal + 0.005
    return ideal, reuse


def test_keep_all_reuses_the_prefix_of_the_agent_s_own_messages_mini_swe_agent() -> None:
    runs = [load(p) for p in sorted((data_dir() / "trajectories").glob("*.traj.json"))]
    assert len(runs) == 3
    ideal, reuse = _check(runs)
    assert ideal == pytest.approx(0.919, abs=0.001)  # the figure docs/research.md gives


@pytest.mark.slow
def test_keep_all_reuses_the_prefix_of_the_agent_s_own_messages_claude_code() -> None:
    run = load(CC)
    assert any(s.compaction for s in run.steps)  # the ideal restarts there too
    ideal, reuse = _check([run])
    assert ideal == pytest.approx(0.986, abs=0.001)


def test_the_ideal_is_the_common_prefix_of_consecutive_message_lists() -> None:
    from ctxnb.replay.model import Action

    steps = [
        Step(index=0, action=Action(tool="bash", raw="ls"), observation="a.py"),
        Step(index=1, action=Action(tool="bash", raw="cat a.py"), observation="x = 1"),
    ]
    run = Trajectory(id="t", source_format="ctxnb", steps=steps, system_prompt="S", task="T")
    prompts = _agent_prompts(run)
    assert prompts == [["S", "T"], ["S", "T", "ls", "a.py"]]
    count = default_token_counter().count
    # Step 1 reuses the system prompt and the task, and pays for the rest.
    assert _ideal([run]) == pytest.approx(
        (count("S") + count("T")) / sum(count(m) for m in prompts[1])
    )
