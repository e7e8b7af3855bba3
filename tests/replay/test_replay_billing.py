"""Replayed dollars against the recorded bill: the cache's lifetime, and recorded resets.

The vendored Claude Code session asks Anthropic for its one-hour cache (writes at twice
the input price); the mini-swe-agent runs go through OpenRouter to Gemini, which caches
implicitly. A replay prices new tokens at the cache the run used, and
:func:`ctxnb.replay.bill_check` separates the calls where the recorded cache reset.
"""

from __future__ import annotations

import json
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from _paths import TESTS

from ctxnb.llm.prices import ONE_HOUR_WRITE_FACTOR, PriceTable
from ctxnb.replay import bill_check, load, run_experiment
from ctxnb.replay.billing import recorded_cache_resets
from ctxnb.replay.model import Action, Step, Trajectory, Usage
from ctxnb.replay.runner import recorded_cache_ttl, replay
from ctxnb.strategies.builtin import KeepAll, ObservationMasking

DATA = TESTS / "data" / "trajectories"
CC = DATA / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
MINI = DATA / "mini-swe-agent" / "astropy__astropy-13453.traj.json"


@pytest.fixture(scope="module")
def cc() -> Trajectory:
    return load(CC)


def test_a_one_hour_cache_prices_its_writes_at_twice_the_input() -> None:
    p = PriceTable.default().get("claude-opus-4-6")
    hour = p.with_cache_ttl("1h")
    assert hour.cache_write == ONE_HOUR_WRITE_FACTOR * p.input != p.cache_write
    assert (hour.input, hour.cache_read, hour.output) == (p.input, p.cache_read, p.output)
    assert p.with_cache_ttl("5m") is p
    with pytest.raises(ValueError, match="'5m' or '1h'"):
        p.with_cache_ttl("1d")  # type: ignore[arg-type]


def test_the_run_s_own_cache_lifetime_is_read_from_its_usage(cc: Trajectory) -> None:
    assert recorded_cache_ttl(cc) == "1h"
    assert recorded_cache_ttl(load(MINI)) == "5m"
    bare = Trajectory(
        id="t", source_format="ctxnb", steps=[Step(index=0, action=Action(tool="submit"))]
    )
    assert recorded_cache_ttl(bare) == "5m"  # no usage: the table's own price
    five = Usage(prompt_tokens=100, cache_write_tokens=60, cache_write_1h_tokens=40)
    mixed = Trajectory(
        id="m",
        source_format="ctxnb",
        steps=[Step(index=0, action=Action(tool="submit"), usage=five)],
    )
    assert recorded_cache_ttl(mixed) == "5m"  # more five-minute writes than one-hour ones


def test_a_replay_bills_new_tokens_at_the_cache_the_run_used(cc: Trajectory) -> None:
    auto = replay(cc, [KeepAll()], files="pool", hidden_prompt_tokens="auto")
    hour = replay(cc, [KeepAll()], files="pool", hidden_prompt_tokens="auto", cache_write_ttl="1h")
    five = replay(cc, [KeepAll()], files="pool", hidden_prompt_tokens="auto", cache_write_ttl="5m")
    pd.testing.assert_frame_equal(auto, hour)
    p = PriceTable.default().get(cc.metadata["model"])
    # Only the price of the new tokens changes, by exactly the rates' difference.
    extra = five["new_tokens"] * (ONE_HOUR_WRITE_FACTOR * p.input - p.cache_write) / 1e6
    assert (hour["cost_usd"] - five["cost_usd"]).to_numpy() == pytest.approx(extra.to_numpy())
    assert hour["cost_usd"].sum() > five["cost_usd"].sum()
    # The recorded bill does not depend on the model of the replay.
    assert hour["recorded_cost_usd"].equals(five["recorded_cost_usd"])
    # Uncached prices ignore the cache entirely.
    assert hour["cost_usd_uncached"].equals(five["cost_usd_uncached"])
    # A mini-swe-agent run (Gemini, implicit cache) keeps the table's write price.
    run = load(MINI)
    assert replay(run, [KeepAll()]).equals(replay(run, [KeepAll()], cache_write_ttl="5m"))


def test_a_bad_cache_lifetime_is_refused_before_any_work(cc: Trajectory) -> None:
    for bad in ("1d", "", None, 3600):
        with pytest.raises(ValueError, match="cache_write_ttl"):
            replay(cc, [KeepAll()], cache_write_ttl=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="cache_write_ttl"):
            run_experiment([cc], [KeepAll()], cache_write_ttl=bad)  # type: ignore[arg-type]


def test_the_cache_lifetime_is_in_the_provenance(cc: Trajectory) -> None:
    df = run_experiment(
        [cc], [KeepAll()], executor=ThreadPoolExecutor(1), progress=False, cache_write_ttl="1h"
    )
    assert df.attrs["ctxnb"]["cache_write_ttl"] == "1h"


def _recorded_calls(path: Path) -> list[tuple[int, int]]:
    """(prompt tokens, cache read) of each distinct model call, straight from the JSONL."""
    seen: set[str] = set()
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        msg = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(msg, dict) or "usage" not in msg:
            continue
        if msg.get("id") in seen:
            continue  # one call, written as several lines (its content blocks)
        seen.add(msg["id"])
        u = msg["usage"]
        prompt = (
            u.get("input_tokens", 0)
            + u.get("cache_read_input_tokens", 0)
            + u.get("cache_creation_input_tokens", 0)
        )
        calls.append((prompt, u.get("cache_read_input_tokens", 0)))
    return calls


def test_recorded_resets_are_the_calls_whose_cache_fell_back_while_the_prompt_grew(
    cc: Trajectory,
) -> None:
    df = replay(cc, [KeepAll()], files="pool", hidden_prompt_tokens="auto")
    resets = df[recorded_cache_resets(df)]
    # Counted independently, from the raw transcript: a call that read less than half the
    # previous call's prompt from the cache although its own prompt is not shorter.
    raw = _recorded_calls(CC)
    expected = [
        i
        for i in range(1, len(raw))
        if raw[i][0] >= raw[i - 1][0] and raw[i][1] < 0.5 * raw[i - 1][0]
    ]
    assert len(raw) == df["recorded_cost_usd"].notna().sum()
    assert len(resets) == len(expected) == 2
    assert [raw[i][1] for i in expected] == list(resets["recorded_cached_tokens"])
    # The compaction (the prompt falls from 166k to 34k, a new segment) is not a reset,
    # although its cache read fell to the same system prefix.
    calls = df[df["recorded_cost_usd"].notna()].reset_index(drop=True)
    after = calls.index[calls["segment"].diff().fillna(0) > 0]
    assert len(after) == 1
    assert calls.loc[after[0], "recorded_cached_tokens"] == resets["recorded_cached_tokens"].iloc[0]
    assert not recorded_cache_resets(calls).loc[after[0]]


def test_reset_edges() -> None:
    def frame(prompts: list[int], reads: list[int], segments: list[int]) -> pd.DataFrame:
        n = len(prompts)
        return pd.DataFrame(
            {
                "trajectory": ["t"] * n,
                "strategy": ["keep-all"] * n,
                "step": range(n),
                "segment": segments,
                "prompt_tokens": pd.array(prompts, dtype="Int64"),
                "recorded_cached_tokens": pd.array(reads, dtype="Int64"),
                "cost_usd": [1.0] * n,
                "recorded_cost_usd": [1.0] * n,
            }
        )

    # The first call starts cold; a shrinking prompt and a new segment are not resets.
    assert recorded_cache_resets(frame([100], [0], [0])).tolist() == [False]
    assert recorded_cache_resets(frame([100, 90], [90, 0], [0, 0])).tolist() == [False, False]
    assert recorded_cache_resets(frame([100, 120], [90, 0], [0, 1])).tolist() == [False, False]
    assert recorded_cache_resets(frame([100, 120], [90, 49], [0, 0])).tolist() == [False, True]
    assert recorded_cache_resets(frame([100, 120], [90, 50], [0, 0])).tolist() == [False, False]
    # Rows without a recorded bill (a parallel tool call's extra steps) are skipped over.
    gap = frame([100, 110, 120], [90, 0, 100], [0, 0, 0])
    gap.loc[1, "recorded_cost_usd"] = float("nan")
    assert recorded_cache_resets(gap).tolist() == [False, False, False]
    # Two strategies of one run are checked on their own.
    both = pd.concat([frame([100, 120], [90, 10], [0, 0])] * 2, ignore_index=True)
    both.loc[2:, "strategy"] = "masking"
    assert recorded_cache_resets(both).tolist() == [False, True, False, True]
    with pytest.raises(ValueError, match="share"):
        recorded_cache_resets(both, share=0)


def test_bill_check_of_the_claude_code_session(cc: Trajectory) -> None:
    df = replay(cc, [KeepAll(), ObservationMasking(5)], files="pool", hidden_prompt_tokens="auto")
    check = bill_check(df)
    calls = df[(df["strategy"] == "keep-all") & df["recorded_cost_usd"].notna()]
    row = check.loc["all"]
    assert row["calls"] == len(calls) == check.loc[cc.id, "calls"]
    assert row["replayed_usd"] == pytest.approx(calls["cost_usd"].sum())
    assert row["recorded_usd"] == pytest.approx(calls["recorded_cost_usd"].sum())
    assert row["cache_resets"] == 2
    kept = calls[~recorded_cache_resets(calls)]
    assert row["ratio_without_resets"] == pytest.approx(
        kept["cost_usd"].sum() / kept["recorded_cost_usd"].sum()
    )
    # The claim docs/research.md makes: once the two calls whose recorded cache reset
    # are set apart, the keep-all replay is within 5% of the bill.
    assert abs(row["ratio_without_resets"] - 1) < 0.05
    assert row["ratio"] < row["ratio_without_resets"]
    with pytest.raises(ValueError, match="not in the frame"):
        bill_check(df, "sliding")


def test_bill_check_leaves_out_runs_without_a_bill() -> None:
    t = Trajectory(
        id="t", source_format="ctxnb", steps=[Step(index=0, action=Action(tool="submit"))]
    )
    check = bill_check(replay(t, [KeepAll()]))
    assert list(check.index) == ["all"]
    assert check.loc["all", "calls"] == 0 and math.isnan(check.loc["all", "ratio"])


def test_mini_swe_agent_keep_all_is_within_5_percent_of_the_bill_at_gemini_s_cache_rate() -> None:
    # The claim docs/research.md makes for the 50 vendored runs (OpenRouter's own cost
    # per call): an ideal prefix cache serves more than Gemini's implicit cache did, so
    # the replay prices below the bill; at the share Gemini's cache served of what an
    # ideal one would (fitted on the same runs), the dollars are within 5%. The rate is
    # fitted to the cache shares, not to the dollars: what the match checks is that the
    # replay's token counts and the table's prices agree with the bill.
    def keep_all(**options: object) -> pd.DataFrame:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every run has a price
            df = run_experiment(
                [DATA / "mini-swe-agent"],
                [KeepAll()],
                executor=ThreadPoolExecutor(1),
                progress=False,
                files="pool",
                **options,  # type: ignore[arg-type]
            )
        return df[df["recorded_cost_usd"].notna()]

    def share(df: pd.DataFrame, part: str, whole: str) -> float:
        return float(df[part].sum() / df[whole].sum())

    ideal = keep_all()
    assert ideal["trajectory"].nunique() == 50 and len(ideal) > 1900
    modelled = share(ideal, "cache_read_tokens", "total_tokens")
    recorded = share(ideal, "recorded_cached_tokens", "prompt_tokens")
    assert modelled > recorded + 0.1  # Gemini's cache served less than an ideal one
    assert share(ideal, "cost_usd", "recorded_cost_usd") < 0.75
    # The replay counts about the prompt tokens Gemini billed.
    assert abs(share(ideal, "total_tokens", "prompt_tokens") - 1) < 0.05
    implicit = keep_all(cache_hit_rate=round(recorded / modelled, 3))
    assert share(implicit, "cache_read_tokens", "total_tokens") == pytest.approx(
        recorded, abs=0.002
    )
    assert abs(share(implicit, "cost_usd", "recorded_cost_usd") - 1) < 0.05
