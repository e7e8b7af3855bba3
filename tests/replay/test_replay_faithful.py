"""Faithful replays of Claude Code sessions: dangling boundaries, compactions, hidden prompts."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from _paths import TESTS

from ctxnb.replay import load
from ctxnb.replay.claude_code import from_claude_code
from ctxnb.replay.fidelity import FidelityWarning, check_fidelity
from ctxnb.replay.runner import replay, replay_contexts
from ctxnb.strategies.builtin import KeepAll, ObservationMasking

TRIMMED = TESTS / "data" / "claude_code" / "compaction_trimmed.jsonl"
FULL = (
    TESTS / "data" / "trajectories" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
)


def _user(uuid: str, parent: str | None, text: str, **kw: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s1",
        "message": {"role": "user", "content": text},
        **kw,
    }


def _bash(uuid: str, parent: str, mid: str, tid: str, cmd: str, prompt: int) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "message": {
            "id": mid,
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": cmd}}],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": prompt, "output_tokens": 20},
        },
    }


def _result(uuid: str, parent: str, tid: str, out: str) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tid, "content": out}],
        },
    }


def _session(logical_parent: str) -> list[dict[str, Any]]:
    """Two tool calls, a compaction whose logical parent is ``logical_parent``, one more."""
    big = "line of output\n" * 400
    return [
        _user("u1", None, "Find the bug in app.py"),
        _bash("a1", "u1", "m1", "t1", "cat app.py", 1000),
        _result("r1", "a1", "t1", big),
        _bash("a2", "r1", "m2", "t2", "grep -n bug app.py", 3000),
        _result("r2", "a2", "t2", "12: bug here"),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": logical_parent,
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "auto", "preTokens": 3100},
        },
        _user(
            "s1",
            "b1",
            "Summary: app.py line 12 has the bug; fix it next.",
            isCompactSummary=True,
        ),
        _bash("a3", "s1", "m3", "t3", "sed -n 10,14p app.py", 200),
        _result("r3", "a3", "t3", "x = bug\n"),
    ]


def test_a_dangling_logical_parent_falls_back_to_the_last_main_line_record() -> None:
    linked = from_claude_code(_session("r2"))
    dangling = from_claude_code(_session("gone-0000"))
    tools = [s.action.tool for s in dangling.steps]
    # Nothing before the compaction is lost: the same steps as a well-linked session.
    assert tools == [s.action.tool for s in linked.steps] == ["bash", "bash", "compact", "bash"]
    assert dangling.task == "Find the bug in app.py"
    assert "notes" not in linked.metadata
    (note,) = dangling.metadata["notes"]
    assert "gone-0000" in note and "r2" in note
    assert dangling.steps[2].observation.startswith("Summary: app.py line 12")


def test_without_any_message_before_the_boundary_the_run_starts_there() -> None:
    recs = _session("gone")[5:]  # the boundary is the first record
    t = from_claude_code(recs)
    assert [s.action.tool for s in t.steps] == ["compact", "bash"]
    assert "none" in t.metadata["notes"][0]


def test_a_compaction_restarts_the_context_from_its_summary() -> None:
    t = from_claude_code(_session("r2"))
    ctxs = {s.index: c for s, _, c, _ in replay_contexts(t, [KeepAll()], files="active")}
    before, after = ctxs[2], ctxs[3]  # chosen just before and just after the compaction
    assert len(before.items) == 3 and "line of output" in before.to_text()  # app.py too
    assert after.items == []
    assert "line of output" not in after.to_text()
    assert [x["content"] for x in after.chat] == [
        "Summary: app.py line 12 has the bug; fix it next."
    ]
    df = replay(t, [KeepAll()])
    assert df["segment"].tolist() == [0, 0, 0, 1]
    assert df.loc[3, "total_tokens"] < df.loc[2, "total_tokens"] / 10


def test_the_trimmed_real_session_converts_with_a_note() -> None:
    t = load(TRIMMED)
    assert t.metadata["notes"] and "not in the transcript" in t.metadata["notes"][0]
    comp = [s.index for s in t.steps if s.compaction]
    assert comp == [7]
    assert t.steps[7].observation.startswith("This session is being continued")
    assert sum(1 for s in t.steps[8:] if s.usage is not None) > 40


def test_replay_after_a_compaction_tracks_the_recorded_prompt() -> None:
    t = load(TRIMMED)
    df = replay(t, [KeepAll()], hidden_prompt_tokens="auto")
    rows = df[df["prompt_tokens"].notna() & (df["segment"] == 1)]
    ratio = rows["total_tokens"] / rows["prompt_tokens"].astype(float)
    assert len(rows) > 40
    assert 0.8 <= ratio.median() <= 1.2
    # The hidden prompt is one estimate for the whole run, and it is part of the total.
    assert df["tokens_hidden"].nunique() == 1 and df["tokens_hidden"].iloc[0] > 10_000
    sections = df[["tokens_system", "tokens_metadata", "tokens_active", "tokens_chat"]]
    assert (df["total_tokens"] == sections.sum(axis=1) + df["tokens_hidden"]).all()


def test_a_given_hidden_prompt_size_is_added_to_every_step() -> None:
    t = from_claude_code(_session("r2"))
    base = replay(t, [KeepAll()])
    plus = replay(t, [KeepAll()], hidden_prompt_tokens=500)
    assert (plus["total_tokens"] - base["total_tokens"]).tolist() == [500] * len(base)
    for bad in (-1, "all", 1.5):
        with pytest.raises(ValueError, match="hidden_prompt_tokens"):
            replay(t, [KeepAll()], hidden_prompt_tokens=bad)  # type: ignore[arg-type]


def test_fidelity_warns_when_a_segment_drifts() -> None:
    # Without the hidden prompt the early segment is a small fraction of what was sent.
    with pytest.warns(FidelityWarning, match="segment 0"):
        report = check_fidelity([TRIMMED])
    assert [(t, s) for t, s, _ in report.drifting] == [(load(TRIMMED).id, 0)]
    assert "DRIFT" in str(report)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FidelityWarning)
        good = check_fidelity([TRIMMED], hidden_prompt_tokens="auto")
    assert good.drifting == ()
    assert set(good.segments["segment"]) == {0, 1}
    assert 0.8 <= good.median_ratio_raw <= 1.2


def test_a_whole_claude_code_session_tracks_its_recorded_prompt_within_20_percent() -> None:
    # The target of docs/research.md: keep-all, in the faithful mode (tool outputs
    # only, as Claude Code's prompt holds them), within ±20% of the recorded prompt,
    # in the whole session and in each compaction segment, with no drift warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", FidelityWarning)
        report = check_fidelity([FULL], hidden_prompt_tokens="auto")
    assert report.steps == 152 and report.pearson > 0.99
    assert 0.8 <= report.median_ratio_raw <= 1.2
    assert list(report.segments["segment"]) == [0, 1]
    assert report.segments["median_ratio"].between(0.8, 1.2).all()
    # "auto" fits the hidden prompt at the first call with usage; every later call is a
    # prediction, and those alone stay within the target too.
    pts = report.points
    later = pts[pts["step"] > pts["step"].min()]
    assert 0.8 <= (later["ctxnb_tokens"] / later["prompt_tokens"]).median() <= 1.2
    # Without the hidden prompt the post-compaction segment is half what was sent.
    with pytest.warns(FidelityWarning, match="segment 1"):
        bare = check_fidelity([FULL])
    assert bare.segments["median_ratio"].iloc[1] < 0.6


def test_the_converter_reads_the_jsonl_file_the_same_way() -> None:
    recs = [json.loads(line) for line in TRIMMED.read_text(encoding="utf-8").splitlines()]
    assert from_claude_code(recs).steps == load(TRIMMED).steps


def test_cache_reads_restart_with_the_context(tmp_path: Path) -> None:
    t = from_claude_code(_session("r2"))
    df = replay(t, [KeepAll(), ObservationMasking(1)], hidden_prompt_tokens=100)
    first = df[df["step"] == 0]
    assert (first["cache_read_tokens"] == 0).all()
    assert (df["cache_read_tokens"] <= df["total_tokens"]).all()
    assert (df["new_tokens"] == df["total_tokens"] - df["cache_read_tokens"]).all()
    # After the compaction only the system part (here the hidden prompt) is shared.
    after = df[df["step"] == 3]
    assert (after["cache_read_tokens"] >= 100).all()
    assert (after["cache_read_tokens"] < after["total_tokens"]).all()


def test_the_default_replay_reproduces_a_claude_code_session_s_recorded_prompts() -> None:
    # Faithful by default: with no `files=` a replay shows what Claude Code's prompt
    # held (tool outputs, not file objects beside them), and keep-all's prompt sizes
    # match the recorded ones within the ±20% docs/research.md states, over the whole
    # session; "active" (the default before) shows files twice and overshoots.
    run = load(FULL)
    default = replay(run, [KeepAll()], hidden_prompt_tokens="auto")
    rows = default["prompt_tokens"].notna()
    recorded = default.loc[rows, "prompt_tokens"].astype(float)
    ratio = default.loc[rows, "total_tokens"].sum() / recorded.sum()
    assert rows.sum() == 152 and 0.8 <= ratio <= 1.2, ratio
    active = replay(run, [KeepAll()], hidden_prompt_tokens="auto", files="active")
    over = active.loc[rows, "total_tokens"].sum() / recorded.sum()
    # (Measured: 1.03x by default, 1.20x with files="active".)
    assert over > 1.15 and over - ratio > 0.15, (over, ratio)
