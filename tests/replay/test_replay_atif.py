"""Harbor's ATIF trajectories: real files load with their figures kept, and ctxnb's own
ATIF writer round-trips every format ctxnb reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _data import TEST_DATA
from _paths import REPO

from ctxnb.errors import CtxnbError
from ctxnb.replay import (
    Action,
    Step,
    Trajectory,
    TrajectoryFormatError,
    Usage,
    load,
    sniff_format,
    to_atif,
    write_atif,
)

ATIF = TEST_DATA / "trajectories" / "atif"
HARBOR = ATIF / "harbor-terminus-2-hello-world-invalid-json.trajectory.json"
OPENAGENTS = ATIF / "openagents-qa-runner-login-trace.trajectory.json"
MINI = REPO / "data" / "trajectories" / "django__django-13670.traj.json"
SWE = REPO / "data" / "trajectories" / "replay__marshmallow-code__marshmallow-1867__default.traj"
CLAUDE_FULL = (
    TEST_DATA / "trajectories" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
)
CODEX = next((TEST_DATA / "trajectories" / "codex").glob("rollout-*.jsonl"))


def _figures(path: Path) -> dict[str, Any]:
    """What the ATIF file holds against what the loaded trajectory keeps of it."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    t = load(path)
    calls = sum(len(s.get("tool_calls") or []) for s in doc["steps"])
    metrics = [s.get("metrics") or {} for s in doc["steps"]]
    usages = [s.usage for s in t.steps if s.usage is not None]
    return {
        "file_steps": len(doc["steps"]),
        "steps": len(t.steps),
        "file_tool_calls": calls,
        "tool_calls": sum(1 for s in t.steps if s.action.tool not in ("reply", "user")),
        "file_prompt_tokens": sum(m.get("prompt_tokens", 0) for m in metrics),
        "prompt_tokens": sum(u.prompt_tokens or 0 for u in usages),
        "file_completion_tokens": sum(m.get("completion_tokens", 0) for m in metrics),
        "completion_tokens": sum(u.completion_tokens or 0 for u in usages),
        "file_cost_usd": round(sum(m.get("cost_usd", 0) for m in metrics), 9),
        "cost_usd": round(sum(u.cost_usd or 0 for u in usages), 9),
        "unparsed": t.unparsed_count,
    }


# --------------------------------------------------------------------------- real files


def test_harbors_terminus_2_file_loads_with_every_call_and_token() -> None:
    assert sniff_format(HARBOR) == "atif"
    t = load(HARBOR)
    assert t.source_format == "atif" and t.id == "NORMALIZED_SESSION_ID"
    assert t.metadata["agent"] == "terminus-2" and t.metadata["model"] == "openai/gpt-4o"
    assert t.task is not None and 'Create a file called hello.txt with "Hello, world!"' in t.task
    # The rejected response (no tool call) is a reply with the parser's complaint as its
    # observation; the keystrokes are a bash command whose trailing Enter is dropped.
    assert [s.action.tool for s in t.steps] == ["reply", "bash", "submit", "submit"]
    assert t.steps[0].observation is not None
    assert t.steps[0].observation.startswith("Previous response had parsing errors")
    bash = t.steps[1]
    assert bash.action.args == {"command": "printf 'Hello, world!\\n' > hello.txt"}
    assert [(f.path, f.op) for f in bash.files] == [("hello.txt", "write")]
    assert bash.thought is not None and bash.thought.startswith("I made a mistake")
    fig = _figures(HARBOR)
    assert fig == {
        "file_steps": 5,
        "steps": 4,
        "file_tool_calls": 3,
        "tool_calls": 3,
        "file_prompt_tokens": 2417,
        "prompt_tokens": 2417,
        "file_completion_tokens": 200,
        "completion_tokens": 200,
        "file_cost_usd": 0.0080425,
        "cost_usd": 0.0080425,
        "unparsed": 0,
    }
    # ... and the per-step sums agree with the file's own totals.
    final = json.loads(HARBOR.read_text())["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_completion_tokens"]) == (2417, 200)


def test_a_v1_7_file_from_another_project_loads_with_its_calls_correlated() -> None:
    t = load(OPENAGENTS)
    assert t.metadata["atif_version"] == "ATIF-v1.7"
    assert t.task is not None and t.task.startswith("Verify the login page")
    tools = [s.action.tool for s in t.steps]
    assert tools == ["navigate", "waitFor", "assert", "assert", "screenshot", "submit"]
    # Every observation is the one its source_call_id names, not a neighbour's.
    for s in t.steps[:5]:
        assert s.observation == f"ok: {s.action.args['narration']}"
    fig = _figures(OPENAGENTS)
    assert (fig["file_steps"], fig["steps"], fig["file_tool_calls"], fig["tool_calls"]) == (
        7,
        6,
        6,
        6,
    )
    assert fig["prompt_tokens"] == fig["file_prompt_tokens"] == 0  # withheld by the source


# --------------------------------------------------------------------------- the mapping


def _doc(steps: list[dict[str, Any]], version: str = "ATIF-v1.4") -> dict[str, Any]:
    return {
        "schema_version": version,
        "session_id": "s-1",
        "agent": {"name": "harbor-agent", "version": "1.0.0"},
        "steps": steps,
    }


def _write(tmp_path: Path, doc: Any, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p


def test_several_calls_in_one_step_keep_their_results_and_count_tokens_once(
    tmp_path: Path,
) -> None:
    # The specification's own example, with the results listed in the other order.
    step = {
        "step_id": 2,
        "source": "agent",
        "message": "I will search for the price and volume.",
        "reasoning_content": "Two data points.",
        "tool_calls": [
            {"tool_call_id": "p", "function_name": "financial_search", "arguments": {"m": 1}},
            {"tool_call_id": "v", "function_name": "financial_search", "arguments": {"m": 2}},
        ],
        "observation": {
            "results": [
                {"source_call_id": "v", "content": "volume 1.5M"},
                {"source_call_id": "p", "content": "price 185.35"},
            ]
        },
        "metrics": {"prompt_tokens": 520, "completion_tokens": 80, "cached_tokens": 200},
    }
    user = {"step_id": 1, "source": "user", "message": "GOOGL?"}
    t = load(_write(tmp_path, _doc([user, step])))
    assert [s.observation for s in t.steps] == ["price 185.35", "volume 1.5M"]
    assert [s.action.args for s in t.steps] == [{"m": 1}, {"m": 2}]
    assert t.steps[0].usage == Usage(prompt_tokens=520, completion_tokens=80, cached_tokens=200)
    assert t.steps[1].usage is None and t.steps[1].thought is None
    assert t.steps[0].thought == "Two data points.\n\nI will search for the price and volume."


def test_a_later_major_version_is_refused_with_the_fix(tmp_path: Path) -> None:
    # Fail closed: ATIF v2 may mean other things by the same fields.
    p = _write(tmp_path, _doc([], version="ATIF-v2.0"))
    with pytest.raises(TrajectoryFormatError, match=r"ATIF-v2\.0 is not supported.*Upgrade"):
        load(p)
    p = _write(tmp_path, _doc([], version="ATIF-vNext"))
    with pytest.raises(CtxnbError, match="not an ATIF version"):
        load(p)


@pytest.mark.parametrize("steps", [{"step_id": 1}, ["not a step"]])
def test_steps_that_are_not_step_objects_are_a_format_error(tmp_path: Path, steps: Any) -> None:
    doc = _doc([])
    doc["steps"] = steps
    p = _write(tmp_path, doc)
    if isinstance(steps, dict):
        # Not even sniffed as ATIF: no list of steps.
        with pytest.raises(TrajectoryFormatError, match="not a trajectory format"):
            load(p)
    else:
        with pytest.raises(TrajectoryFormatError, match="list of step objects"):
            load(p)


def test_odd_fields_do_not_lose_the_run(tmp_path: Path) -> None:
    steps = [
        {"step_id": 1, "source": "user", "message": "go"},
        # arguments as a string, a metric of the wrong type, an object as content
        {
            "step_id": 2,
            "source": "agent",
            "message": "",
            "tool_calls": [{"tool_call_id": "a", "function_name": "x", "arguments": "ls"}],
            "observation": {"results": [{"source_call_id": "a", "content": {"ok": True}}]},
            "metrics": {"prompt_tokens": "12", "completion_tokens": True, "cost_usd": 0.5},
        },
        {"step_id": 3, "source": "system", "message": "context reset"},
        {"step_id": 4, "source": "agent", "message": "done"},
    ]
    t = load(_write(tmp_path, _doc(steps)))
    assert [s.action.tool for s in t.steps] == ["x", "user", "reply"]
    assert t.steps[0].action.args == {"value": "ls"}
    assert t.steps[0].observation == '{"ok": true}'
    assert t.steps[0].usage == Usage(cost_usd=0.5)
    assert t.steps[1].action.args == {"message": "context reset", "source": "system"}


def test_sniffed_by_content_under_any_name(tmp_path: Path) -> None:
    p = tmp_path / "run.jsonl"
    p.write_bytes(HARBOR.read_bytes())
    assert sniff_format(p) == "atif"


# --------------------------------------------------------------------------- writing


@pytest.mark.parametrize(
    "src",
    [
        MINI,
        SWE,
        CLAUDE_FULL,
        CODEX,
        HARBOR,
        OPENAGENTS,
        ATIF / "harbor-terminus-2-hello-world-context-summarization.trajectory.json",
    ],
    ids=lambda p: p.name,
)
def test_load_of_write_gives_the_trajectory_back(tmp_path: Path, src: Path) -> None:
    t = load(src)
    out = write_atif(t, tmp_path / "out.trajectory.json")
    assert sniff_format(out) == "atif"
    back = load(out)
    assert back.source_path == str(out)
    assert back.model_copy(update={"source_path": t.source_path}) == t
    # A second pass changes nothing either.
    again = write_atif(back, tmp_path / "again.trajectory.json")
    assert json.loads(again.read_text()) == json.loads(out.read_text())


def test_the_written_file_is_atif_without_ctxnb_extras(tmp_path: Path) -> None:
    # Another ATIF reader ignores ctxnb's extras: the spec's own fields must carry the run.
    t = load(MINI)
    doc = to_atif(t)
    assert doc["schema_version"] == "ATIF-v1.4"
    for s in doc["steps"]:
        assert s["source"] in ("system", "user", "agent")
        for call in s.get("tool_calls", []):
            assert set(call) == {"tool_call_id", "function_name", "arguments"}
        for r in s.get("observation", {}).get("results", []):
            assert r.get("source_call_id") in {c["tool_call_id"] for c in s["tool_calls"]}
    assert doc["final_metrics"]["total_prompt_tokens"] == sum(
        s.usage.prompt_tokens or 0 for s in t.steps if s.usage
    )
    stripped = {k: v for k, v in doc.items() if k != "extra"}
    stripped["steps"] = [{k: v for k, v in s.items() if k != "extra"} for s in doc["steps"]]
    back = load(_write(tmp_path, stripped))
    assert back.source_format == "atif"
    assert (back.task, back.system_prompt) == (t.task, t.system_prompt)
    assert len(back.steps) == len(t.steps)
    for a, b in zip(t.steps, back.steps, strict=True):
        assert (b.action.args, b.observation, b.usage) == (a.action.args, a.observation, a.usage)
        assert b.action.tool == ("submit" if a.action.tool == "submit" else a.action.tool)
        if a.action.tool == "bash" and a.parsed:
            assert [(f.path, f.op) for f in b.files] == [(f.path, f.op) for f in a.files]


def test_an_edit_by_another_tool_wins_over_ctxnbs_own_copy(tmp_path: Path) -> None:
    # ctxnb's copy of a step in extra must not hide what the ATIF fields now say.
    t = Trajectory(
        id="r",
        source_format="mini-swe-agent-1",
        task="t",
        steps=[
            Step(index=0, action=Action(tool="bash", args={"command": "cat a.py"}), observation="1")
        ],
    )
    doc = to_atif(t)
    doc["steps"][1]["tool_calls"][0]["arguments"] = {"command": "rm -rf build"}
    back = load(_write(tmp_path, doc))
    assert back.steps[0].action.args == {"command": "rm -rf build"}
    assert [(f.path, f.op) for f in back.steps[0].files] == [("build", "delete")]
    # Untouched, the copy is used: the exact step (here its raw text) comes back.
    t2 = t.model_copy(deep=True)
    t2.steps[0].action.raw = "cat a.py  # as typed"
    assert load(_write(tmp_path, to_atif(t2), "b.json")).steps[0].action.raw == (
        "cat a.py  # as typed"
    )


def test_a_mid_run_user_message_is_not_taken_for_the_task(tmp_path: Path) -> None:
    t = Trajectory(
        id="u",
        source_format="claude-code",
        steps=[
            Step(index=0, action=Action(tool="user", args={"message": "also fix b"})),
            Step(index=1, action=Action(tool="reply", args={"message": "ok"}), thought="hm"),
        ],
    )
    back = load(write_atif(t, tmp_path / "u.json"))
    assert back.task is None
    assert back.model_copy(update={"source_path": None}) == t


def test_writing_never_leaves_a_half_file(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    out.write_text("previous")

    # Metadata that is not JSON fails before the file is touched.
    bad = Trajectory(id="b", source_format="x", metadata={"obj": object()})
    with pytest.raises(TypeError):
        write_atif(bad, out)
    assert out.read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


SUMMARIZED = ATIF / "harbor-terminus-2-hello-world-context-summarization.trajectory.json"


def test_terminus_2s_context_summarization_is_a_compaction_the_replay_follows() -> None:
    t = load(SUMMARIZED)
    assert [s.action.tool for s in t.steps] == [
        *["bash"] * 3,
        "compact",
        *["bash"] * 2,
        *["submit"] * 2,
    ]
    compact = t.steps[3]
    assert compact.compaction and len(compact.action.args["subagents"]) == 3
    # The handoff prompt is what the new context starts from, not a user step after it.
    assert compact.observation is not None
    assert compact.observation.startswith("Here are the answers the other agent provided.")
    fig = _figures(SUMMARIZED)
    assert (fig["file_steps"], fig["steps"], fig["file_tool_calls"], fig["tool_calls"]) == (
        10,
        8,
        7,
        8,  # the compaction is a step of its own, not a tool call
    )
    # The summarizing calls are in the subagent files, not in this one: the steps' tokens
    # are all kept, and fall short of final_metrics by exactly those calls.
    assert fig["prompt_tokens"] == fig["file_prompt_tokens"] == 6502
    assert json.loads(SUMMARIZED.read_text())["final_metrics"]["total_prompt_tokens"] == 7802

    from ctxnb.replay.runner import replay
    from ctxnb.strategies import KeepAll

    df = replay(t, [KeepAll()])
    assert sorted(set(df["segment"])) == [0, 1]


def test_atif_fidelity_gives_the_figures_docs_research_prints() -> None:
    from ctxnb.replay import atif_fidelity

    # The table in docs/research.md ("Harbor's ATIF trajectories") shows these.
    assert atif_fidelity(HARBOR) == {
        "steps": (5, 4),
        "tool_calls": (3, 3),
        "prompt_tokens": (2417, 2417),
        "completion_tokens": (200, 200),
        "cached_tokens": (0, 0),
        "cost_usd": (0.0080425, 0.0080425),
        "final_prompt_tokens": 2417,
        "unparsed": 0,
    }
    fig = atif_fidelity(SUMMARIZED)
    assert fig["steps"] == (10, 8) and fig["tool_calls"] == (7, 7)
    assert fig["prompt_tokens"] == (6502, 6502) and fig["final_prompt_tokens"] == 7802
    assert fig["completion_tokens"] == (690, 690)
    fig = atif_fidelity(OPENAGENTS)
    assert fig["steps"] == (7, 6) and fig["tool_calls"] == (6, 6)


def test_atif_fidelity_refuses_a_file_that_is_not_atif(tmp_path: Path) -> None:
    with pytest.raises(TrajectoryFormatError, match="not an ATIF trajectory"):
        from ctxnb.replay import atif_fidelity

        atif_fidelity(_write(tmp_path, {"trajectory_format": "mini-swe-agent-1"}))


def test_ctxnb_replay_takes_a_directory_of_atif_runs(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    runs = tmp_path / "runs"
    runs.mkdir()
    for src in (HARBOR, SUMMARIZED):
        shutil.copy(src, runs / src.name)
    # and one that ctxnb wrote itself, from a mini-swe-agent run
    write_atif(load(MINI), runs / "mini.trajectory.json")
    (runs / "notes.json").write_text('{"not": "a run"}')  # skipped, as for any format
    proc = subprocess.run(
        [sys.executable, "-m", "ctxnb", "replay", str(runs), "--strategy", "keep-all"]
        + ["--workers", "1", "--wide", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("keep-all")).split()
    assert (int(row[1]), int(row[2])) == (3, 4 + 8 + len(load(MINI).steps))


def test_calls_sharing_an_id_do_not_show_one_output_twice(tmp_path: Path) -> None:
    call = {"function_name": "bash", "tool_call_id": "same"}
    step = {
        "step_id": 1,
        "source": "agent",
        "message": "",
        "tool_calls": [
            {**call, "arguments": {"command": "echo one"}},
            {**call, "arguments": {"command": "echo two"}},
        ],
        "observation": {
            "results": [
                {"source_call_id": "same", "content": "one"},
                {"source_call_id": "same", "content": "two"},
            ]
        },
    }
    t = load(_write(tmp_path, _doc([step])))
    assert [s.observation for s in t.steps] == ["one", "two"]
