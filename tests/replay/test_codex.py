"""Codex CLI rollouts: every call, output and token count of a rollout survives a load; a
damaged or hostile line is named, and loses nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _data import TEST_DATA

from ctxnb.errors import CtxnbError
from ctxnb.replay import TrajectoryFormatError, codex_fidelity, load, sniff_format
from ctxnb.replay._apply_patch import parse_apply_patch
from ctxnb.replay._shell import FileMemory

ROLLOUT = (
    TEST_DATA
    / "trajectories"
    / "codex"
    / "rollout-2026-03-14T09-12-05-019ce1a2-7b3c-7d40-9e51-2f6a8c0d4b17.jsonl"
)
# A real session of Codex CLI 0.125.0 (codemie-ai/codemie-code, Apache-2.0; see the
# folder's SOURCE-README.md).
REAL = (
    TEST_DATA
    / "trajectories"
    / "codex"
    / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)


def _lines(path: Path = ROLLOUT) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _write(tmp_path: Path, lines: list[Any], name: str = "rollout.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def _item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": payload}


def _meta() -> dict[str, Any]:
    return {"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}}


def _task(text: str = "Fix it") -> dict[str, Any]:
    return _item(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )


def _call(cid: str, command: str) -> dict[str, Any]:
    args = json.dumps({"command": ["bash", "-lc", command]})
    return _item({"type": "function_call", "name": "shell", "arguments": args, "call_id": cid})


def _out(cid: str, text: str) -> dict[str, Any]:
    return _item({"type": "function_call_output", "call_id": cid, "output": text})


# --------------------------------------------------------------------------- the fixture


def test_the_rollout_loads_every_call_output_and_token() -> None:
    # The table in docs/research.md ("Codex CLI rollouts") shows these figures.
    fig = codex_fidelity(ROLLOUT)
    assert fig["tool_calls"] == (7, 7)
    assert fig["outputs"] == (7, 7)
    # Eight model calls; Codex's two repeated end-of-turn reports are not calls.
    assert fig["model_calls"] == (8, 8)
    assert fig["prompt_tokens"] == (37217, 37217)
    assert fig["cached_tokens"] == (27008, 27008)
    assert fig["completion_tokens"] == (692, 692)
    assert fig["unparsed"] == 0
    assert fig["unknown_items"] == {}


def test_each_tool_maps_to_the_replay_model() -> None:
    t = load(ROLLOUT)
    assert t.source_format == "codex"
    assert t.id == "019ce1a2-7b3c-7d40-9e51-2f6a8c0d4b17"
    assert t.task == "The test for add fails. Fix calc.py so that the tests pass."
    # Base instructions, the developer message and the environment context are the
    # prompt Codex sends before the task, not steps.
    assert t.system_prompt is not None
    assert t.system_prompt.startswith("You are Codex")
    assert "<environment_context>" in t.system_prompt
    tools = [s.action.tool for s in t.steps]
    assert tools == [
        "bash",
        "bash",
        "edit",
        "bash",
        "reply",
        "user",
        "compact",
        "edit",
        "bash",
        "update_plan",
        "reply",
    ]
    cat, sed, fix, pytest_run = t.steps[:4]
    # shell's argv ["bash", "-lc", SCRIPT] is the script; the JSON output envelope is gone.
    assert cat.action.args["command"] == "cat calc.py"
    assert [(f.path, f.op) for f in cat.files] == [("calc.py", "read")]
    assert (
        cat.files[0].content
        == "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    assert (sed.files[0].path, sed.files[0].start_line, sed.files[0].end_line) == (
        "tests/test_calc.py",
        1,
        5,
    )
    # apply_patch: an edit whose result is computed from the file read before it.
    assert [(f.path, f.op) for f in fix.files] == [("calc.py", "edit")]
    assert fix.files[0].content is not None and "return a + b" in fix.files[0].content
    assert (fix.files[0].old_text, fix.files[0].new_text) == (
        "def add(a, b):\n    return a - b",
        "def add(a, b):\n    return a + b",
    )
    assert pytest_run.action.args["command"] == "python -m pytest -q"  # exec_command's cmd
    # The compaction starts a new segment whose context is Codex's summary.
    compact = t.steps[6]
    assert compact.compaction and compact.observation is not None
    assert compact.observation.startswith("Summary:")
    add_sub = t.steps[7]
    assert [(f.path, f.op) for f in add_sub.files] == [
        ("calc.py", "edit"),
        ("tests/test_sub.py", "create"),
    ]
    assert (
        add_sub.files[1].content
        == "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
    )
    # local_shell_call's argv is joined as a shell line; nl -ba is read without numbers.
    nl = t.steps[8]
    assert nl.action.args["command"] == "nl -ba calc.py"
    assert nl.files[0].content == add_sub.files[0].content


def test_tokens_go_to_the_first_step_of_the_call_that_spent_them() -> None:
    t = load(ROLLOUT)
    usage = [(s.action.tool, s.usage.prompt_tokens if s.usage else None) for s in t.steps]
    # The two shell calls of one response share one model call: its tokens are on the
    # first only. The mid-run prompt and the compaction spent none.
    assert usage[:2] == [("bash", 6120), ("bash", None)]
    assert usage[5:8] == [("user", None), ("compact", None), ("edit", 2410)]
    cached = [s.usage.cached_tokens for s in t.steps if s.usage]
    assert cached == [0, 6016, 6528, 6784, 0, 2304, 2688, 2688]
    assert t.metadata["model_calls"] == 8
    assert t.metadata["repeated_token_counts"] == 2
    assert t.metadata["model"] == "gpt-5-codex"


def test_sniffed_by_content_under_any_name(tmp_path: Path) -> None:
    p = tmp_path / "session.json"
    p.write_bytes(ROLLOUT.read_bytes())
    assert sniff_format(p) == "codex"


def test_the_replay_runs_over_a_rollout_with_its_recorded_prompts() -> None:
    from ctxnb.replay.runner import replay
    from ctxnb.strategies.builtin import KeepAll

    # OpenAI's list price of gpt-5-codex per million tokens (a cache write costs input).
    price = {"input": 1.25, "cache_write": 1.25, "cache_read": 0.125, "output": 10.0}
    df = replay(load(ROLLOUT), [KeepAll()], prices={"gpt-5-codex": price})
    recorded = df["prompt_tokens"].dropna().tolist()
    assert recorded == [6120, 6590, 6802, 6955, 2410, 2700, 2790, 2850]
    # Codex's cached input tokens are the recorded cache hits.
    assert df["recorded_cached_tokens"].dropna().tolist() == [
        0,
        6016,
        6528,
        6784,
        0,
        2304,
        2688,
        2688,
    ]
    # The compaction restarts the context: the call after it is a new segment.
    assert df["segment"].max() == 1


# --------------------------------------------------------------------------- a real rollout


def test_a_real_rollout_keeps_every_call_and_every_token_report() -> None:
    # The table in docs/research.md ("Codex CLI rollouts") shows these figures.
    fig = codex_fidelity(REAL)
    # 43 exec_command, 54 write_stdin, 3 apply_patch, 2 update_plan.
    assert fig["tool_calls"] == (102, 102)
    assert fig["outputs"] == (102, 102)
    assert fig["model_calls"] == (66, 66)
    # Codex's own running sums at the end of the file, and the loaded steps' sums.
    assert fig["prompt_tokens"] == (6055836, 6055836)
    assert fig["cached_tokens"] == (4929536, 4929536)
    assert fig["completion_tokens"] == (9118, 9118)
    assert fig["unparsed"] == 0
    assert fig["unknown_items"] == {}
    # What a load keeps no step for is named, with the reason.
    assert fig["not_kept"] == {
        "web_search_call": (3, "a search the provider ran; its results never reach the rollout")
    }
    assert fig["events_not_read"] == {
        "agent_message": 13,
        "exec_command_end": 43,
        "patch_apply_end": 3,
        "task_complete": 2,
        "task_started": 2,
        "user_message": 2,
        "web_search_end": 3,
    }


def test_a_real_rollout_gives_each_model_call_the_usage_codex_reported() -> None:
    lines = _lines(REAL)
    reported = [
        (u["input_tokens"], u["cached_input_tokens"], u["output_tokens"])
        for r in lines
        if r["type"] == "event_msg"
        and r["payload"]["type"] == "token_count"
        and isinstance(r["payload"].get("info"), dict)
        for u in [r["payload"]["info"]["last_token_usage"]]
    ]
    t = load(REAL)
    kept = [
        (s.usage.prompt_tokens, s.usage.cached_tokens, s.usage.completion_tokens)
        for s in t.steps
        if s.usage is not None
    ]
    assert kept == reported
    assert len(kept) == 66
    assert t.metadata["cli_version"] == "0.125.0"
    assert t.metadata["model"] == "gpt-5.5"
    assert t.task == "show tools"
    assert t.system_prompt is not None
    assert t.system_prompt.startswith("You are Codex, a coding agent based on GPT-5.")
    # The AGENTS.md block and the permissions text Codex sends are the prompt, not a turn.
    assert "# AGENTS.md instructions for" in t.system_prompt
    assert "<permissions instructions>" in t.system_prompt
    users = [s.action.args["text"] for s in t.steps if s.action.tool == "user"]
    assert users == ["let's update the defailt context compart to 90 in env var"]


def test_a_keep_all_replay_of_the_real_rollout_tracks_each_prompt_codex_sent() -> None:
    # docs/research.md gives these figures (bench/fidelity_claude_code.py --tokens …).
    from ctxnb.replay.fidelity import fidelity_from_frame
    from ctxnb.replay.runner import replay
    from ctxnb.strategies.builtin import KeepAll

    price = {"input": 1.25, "cache_write": 1.25, "cache_read": 0.125, "output": 10.0}
    df = replay(
        load(REAL),
        [KeepAll()],
        hidden_prompt_tokens="auto",
        token_counter="tiktoken:cl100k_base",
        prices={"gpt-5.5": price},
    )
    calls = df.dropna(subset=["prompt_tokens"])
    assert len(calls) == 66
    # "auto" sizes Codex's unrecorded prompt (its tool definitions) from the first call,
    # so the first matches by construction; the 65 after it are predictions.
    ratios = (calls["total_tokens"] / calls["prompt_tokens"]).tolist()
    assert ratios[0] == pytest.approx(1.0, abs=0.001)
    assert all(0.9 <= r <= 1.1 for r in ratios[1:]), (min(ratios), max(ratios))
    assert 0.95 <= fidelity_from_frame(df).median_ratio_raw <= 1.05


def test_a_real_rollout_reads_a_file_where_the_running_command_ended() -> None:
    # `sed -n '1,240p' src/utils/config.ts` answered "Process running with session ID
    # 28830" with no output; the model got the file from its second write_stdin.
    lines = _lines(REAL)
    answer = next(
        r["payload"]["output"]
        for r in lines
        if r["payload"].get("call_id") == "call_op3h29z553xEEPpu12n1HeUh"
        and r["payload"]["type"] == "function_call_output"
    )
    t = load(REAL)
    reads = [
        (s, f)
        for s in t.steps
        for f in s.files
        if f.path == "src/utils/config.ts" and f.op == "read"
    ]
    step, touch = reads[0]
    assert step.action.tool == "write_stdin"
    assert step.action.args["session_id"] == 28830
    assert touch.content == answer.partition("Output:\n")[2]
    assert touch.content.startswith("import * as fs from 'fs/promises';")
    assert (touch.start_line, touch.end_line) == (1, 240)
    # No command still running claims a file's content from the little it printed.
    for s in t.steps:
        if s.action.tool == "bash" and "Process running with session ID" in (s.observation or ""):
            assert s.files == [], s.action.args["command"]


def _exec(cid: str, cmd: str) -> dict[str, Any]:
    args = json.dumps({"cmd": cmd, "yield_time_ms": 1000})
    return _item(
        {"type": "function_call", "name": "exec_command", "arguments": args, "call_id": cid}
    )


def _stdin(cid: str, session: int, chars: str = "") -> dict[str, Any]:
    args = json.dumps({"session_id": session, "chars": chars, "yield_time_ms": 1000})
    return _item(
        {"type": "function_call", "name": "write_stdin", "arguments": args, "call_id": cid}
    )


def _running(session: int, body: str = "") -> str:
    return (
        "Chunk ID: ab12\nWall time: 1.0 seconds\n"
        f"Process running with session ID {session}\nOriginal token count: 0\nOutput:\n{body}"
    )


def _exited(body: str, head: str = "") -> str:
    return (
        "Chunk ID: cd34\nWall time: 0.0 seconds\nProcess exited with code 0\n"
        f"Original token count: 9\nOutput:\n{head}{body}"
    )


def _read_of(t: Any, path: str) -> list[tuple[int, Any]]:
    return [(s.index, f.content) for s in t.steps for f in s.files if f.path == path]


def test_a_running_command_s_output_is_gathered_over_its_write_stdin_answers(
    tmp_path: Path,
) -> None:
    lines = [
        _meta(),
        _task(),
        _exec("c1", "cat a.py"),
        _out("c1", _running(7, "x = 1\n")),
        _stdin("c2", 7),
        _out("c2", _running(7, "y = 2\n")),
        _stdin("c3", 7),
        _out("c3", _exited("z = 3\n")),
    ]
    t = load(_write(tmp_path, lines))
    assert _read_of(t, "a.py") == [(2, "x = 1\ny = 2\nz = 3\n")]
    assert t.steps[0].files == []
    assert t.steps[0].note == "ran as a session; its output ended at step 2"


@pytest.mark.parametrize(
    ("tail", "why"),
    [
        ([], "the rollout ends while it runs"),
        ([_stdin("c2", 7, chars="q\n"), _out("c2", _exited("x = 1\n"))], "the model typed"),
        (
            [_stdin("c2", 7), _out("c2", _exited("x…9 tokens truncated…1\n"))],
            "Codex cut the output",
        ),
        (
            [_stdin("c2", 7), _out("c2", _exited("x = 1\n", head="Total output lines: 900\n\n"))],
            "Codex cut the output (0.125's marker)",
        ),
    ],
)
def test_a_running_command_claims_no_content_it_cannot_vouch_for(
    tmp_path: Path, tail: list[dict[str, Any]], why: str
) -> None:
    lines = [_meta(), _task(), _exec("c1", "cat a.py"), _out("c1", _running(7)), *tail]
    t = load(_write(tmp_path, lines))
    assert all(content is None for _, content in _read_of(t, "a.py")), why
    if not tail:
        assert t.steps[0].note == (
            "still running as session 7 when the rollout ends; the files it touched are unknown"
        )


def test_a_failed_write_stdin_is_not_output_of_the_command(tmp_path: Path) -> None:
    failed = "write_stdin failed: stdin is closed for this session; rerun exec_command"
    lines = [
        _meta(),
        _task(),
        _exec("c1", "cat a.py"),
        _out("c1", _running(7)),
        _stdin("c2", 7, chars="\u0003"),
        _out("c2", failed),
        _stdin("c3", 7),
        _out("c3", _exited("x = 1\n")),
        # A write to a session no command of the file started touches nothing.
        _stdin("c4", 99),
        _out("c4", _exited("secret\n")),
    ]
    t = load(_write(tmp_path, lines))
    assert _read_of(t, "a.py") == [(2, "x = 1\n")]
    assert t.steps[1].observation == failed
    assert t.steps[3].files == []


def test_the_fidelity_of_a_damaged_real_rollout_is_refused_naming_the_line(
    tmp_path: Path,
) -> None:
    text = REAL.read_text(encoding="utf-8").splitlines(keepends=True)
    text[199] = text[199][: len(text[199]) // 2] + "\n"
    p = tmp_path / REAL.name
    p.write_text("".join(text), encoding="utf-8")
    before = p.read_bytes()
    with pytest.raises(TrajectoryFormatError, match=r"line 200 of the Codex rollout is damaged"):
        codex_fidelity(p)
    with pytest.raises(TrajectoryFormatError, match=r"line 200 of the Codex rollout is damaged"):
        load(p)
    assert p.read_bytes() == before


def test_a_rollback_the_replay_cannot_follow_is_named_not_passed_in_silence(
    tmp_path: Path,
) -> None:
    rollback = {"timestamp": "t", "type": "event_msg", "payload": {"type": "thread_rolled_back"}}
    rollback["payload"]["num_turns"] = 1
    lines = [_meta(), _task(), _call("c1", "cat a.py"), _out("c1", "x\n"), rollback]
    p = _write(tmp_path, lines)
    t = load(p)
    assert t.metadata["notes"] == [
        "line 5: Codex rolled back 1 user turn(s) here; the replay keeps them, so from "
        "here its context holds more than Codex sent"
    ]
    fig = codex_fidelity(p)
    assert fig["rollbacks"] == 1
    assert fig["events_not_read"] == {}
    assert codex_fidelity(REAL)["rollbacks"] == 0


# --------------------------------------------------------------------------- damage


def test_a_damaged_line_is_named_and_the_file_kept(tmp_path: Path) -> None:
    text = ROLLOUT.read_text(encoding="utf-8").splitlines(keepends=True)
    text[9] = '{"timestamp": "t", "type": "response_item", "payload": {"type": \n'
    p = tmp_path / "rollout.jsonl"
    p.write_text("".join(text), encoding="utf-8")
    before = p.read_bytes()
    with pytest.raises(
        TrajectoryFormatError, match=r"line 10 of the Codex rollout is damaged"
    ) as e:
        load(p)
    assert isinstance(e.value, CtxnbError)
    assert "restore it, or delete the damaged line" in str(e.value)
    assert p.read_bytes() == before


def test_a_line_that_is_json_but_not_an_object_is_damage_too(tmp_path: Path) -> None:
    p = _write(tmp_path, [_meta(), _task(), [1, 2, 3], _call("c", "ls")])
    with pytest.raises(TrajectoryFormatError, match=r"line 3 .*not a JSON object"):
        load(p)


def test_a_cut_last_line_loads_the_rest_and_says_so(tmp_path: Path) -> None:
    # Codex appends as it goes: a crash leaves the last line without its end.
    p = tmp_path / "rollout.jsonl"
    p.write_text(ROLLOUT.read_text(encoding="utf-8") + '{"timestamp": "t", "type": "resp')
    t = load(p)
    assert t.metadata["skipped_lines"] == 1
    assert len(t.steps) == len(load(ROLLOUT).steps)


@pytest.mark.parametrize(
    ("hostile", "note"),
    [
        ({"timestamp": "t", "type": "response_item", "payload": [1]}, "line 3: converter error"),
        (
            _item(
                {"type": "function_call", "name": "shell", "arguments": "{not json", "call_id": "x"}
            ),
            "line 3: the shell call's arguments are not JSON",
        ),
        (
            _item(
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": "[" * 100_000,
                    "call_id": "x",
                }
            ),
            "line 3: the shell call's arguments are not JSON",
        ),
        (
            _item({"type": "function_call", "name": "shell", "arguments": "[1]", "call_id": "x"}),
            "line 3: the shell call's arguments are not a JSON object",
        ),
        (_out("nobody", "stray"), "line 3: output for a call the rollout does not hold"),
        (
            _item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "x"}),
            "line 3: a shell call without a command",
        ),
    ],
    ids=["payload-list", "args-not-json", "args-nested", "args-list", "orphan-output", "no-cmd"],
)
def test_a_hostile_record_is_one_unparsed_step_naming_its_line(
    tmp_path: Path, hostile: dict[str, Any], note: str
) -> None:
    lines = [_meta(), _task(), hostile, _call("c1", "cat a.py"), _out("c1", "x = 1\n")]
    t = load(_write(tmp_path, lines))
    bad = [s for s in t.steps if not s.parsed]
    assert len(bad) == 1
    assert bad[0].note is not None and bad[0].note.startswith(note)
    # Nothing else is lost: the next call still has its output and its read.
    good = t.steps[-1]
    assert good.action.args["command"] == "cat a.py"
    assert good.files[0].content == "x = 1\n"


def test_unknown_types_are_counted_not_crashed_on(tmp_path: Path) -> None:
    lines = [
        _meta(),
        _task(),
        _item({"type": "future_item", "x": 1}),
        _item({"type": "future_item"}),
        {"timestamp": "t", "type": "world_state", "payload": {}},
        _call("c1", "ls"),
        _out("c1", "a.py\n"),
    ]
    t = load(_write(tmp_path, lines))
    assert t.metadata["unknown_items"] == {"future_item": 2, "line:world_state": 1}
    assert [s.action.tool for s in t.steps] == ["bash"]
    assert t.unparsed_count == 0
    assert codex_fidelity(_write(tmp_path, lines, "r2.jsonl"))["unknown_items"] == {
        "future_item": 2,
        "line:world_state": 1,
    }


def test_a_truncated_command_output_is_not_taken_for_the_file(tmp_path: Path) -> None:
    out = (
        "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\n"
        "Original token count: 90000\nTotal output lines: 4000\n"
        "Output:\nline 1\n…3990 tokens truncated…\n"
    )
    call = _item(
        {
            "type": "function_call",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "cat big.py"}),
            "call_id": "c1",
        }
    )
    t = load(_write(tmp_path, [_meta(), _task(), call, _out("c1", out)]))
    read = t.steps[0].files[0]
    assert (read.path, read.op, read.content) == ("big.py", "read", None)


# --------------------------------------------------------------------------- apply_patch


def test_a_refused_patch_touches_no_file(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: a.py\n+x = 1\n*** End Patch\n"
    lines = [
        _meta(),
        _task(),
        _item({"type": "custom_tool_call", "call_id": "p", "name": "apply_patch", "input": patch}),
        _item(
            {
                "type": "custom_tool_call_output",
                "call_id": "p",
                "output": "apply_patch verification failed: a.py already exists",
            }
        ),
    ]
    step = load(_write(tmp_path, lines)).steps[0]
    assert step.files == []
    assert step.note == "apply_patch did not apply the patch"


def test_a_chunk_that_does_not_match_leaves_the_content_unknown() -> None:
    memory = FileMemory()
    memory.set("a.py", "x = 1\n")
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-y = 2\n+y = 3\n*** End Patch"
    (touch,) = parse_apply_patch(patch, memory)
    # Never a made-up result: the old lines are not in the file ctxnb knows.
    assert (touch.op, touch.content) == ("edit", None)
    assert memory.get("a.py") is None


def test_a_move_is_a_delete_and_a_write() -> None:
    memory = FileMemory()
    memory.set("src/old.py", "a = 1\nb = 2\n")
    patch = (
        "*** Begin Patch\n*** Update File: src/old.py\n*** Move to: src/new.py\n@@\n a = 1\n"
        "-b = 2\n+b = 3\n*** Delete File: junk.txt\n*** End Patch"
    )
    touches = parse_apply_patch(patch, memory)
    assert [(t.path, t.op, t.content) for t in touches] == [
        ("src/old.py", "delete", None),
        ("src/new.py", "write", "a = 1\nb = 3\n"),
        ("junk.txt", "delete", None),
    ]


def test_text_that_is_not_a_patch_is_refused() -> None:
    with pytest.raises(ValueError, match="Begin Patch"):
        parse_apply_patch("--- a/x\n+++ b/x\n", FileMemory())


def test_a_type_of_the_wrong_kind_is_named_not_crashed_on(tmp_path: Path) -> None:
    lines = [
        _meta(),
        _task(),
        _item({"type": ["function_call"], "name": "shell"}),
        {"timestamp": "t", "type": {"x": 1}, "payload": {}},
        _call("c1", "ls"),
        _out("c1", "a.py\n"),
    ]
    t = load(_write(tmp_path, lines))
    (bad,) = [s for s in t.steps if not s.parsed]
    assert bad.note is not None and bad.note.startswith("line 3: converter error")
    assert "a response item whose type is list" in bad.note
    assert t.metadata["unknown_items"] == {"line:{'x': 1}": 1}
    assert t.steps[-1].action.args["command"] == "ls"


@pytest.mark.parametrize(
    "argv",
    [
        ["apply_patch", "*** Begin Patch\n*** Add File: b.py\n+y = 2\n*** End Patch\n"],
        [
            "bash",
            "-lc",
            "apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: b.py\n+y = 2\n"
            "*** End Patch\nPATCH",
        ],
    ],
    ids=["argv", "heredoc"],
)
def test_apply_patch_run_through_the_shell_tool_is_an_edit(tmp_path: Path, argv: list[str]) -> None:
    call = _item(
        {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": argv}),
            "call_id": "p",
        }
    )
    done = json.dumps({"output": "Success. Updated the following files:\nA b.py\n"})
    step = load(_write(tmp_path, [_meta(), _task(), call, _out("p", done)])).steps[0]
    assert step.action.tool == "edit"
    assert [(f.path, f.op, f.content) for f in step.files] == [("b.py", "create", "y = 2\n")]


def test_a_script_that_does_more_than_apply_a_patch_stays_a_shell_command(tmp_path: Path) -> None:
    script = (
        "apply_patch <<'P'\n*** Begin Patch\n*** Add File: b.py\n+y\n*** End Patch\nP\nrm -rf b.py"
    )
    step = load(_write(tmp_path, [_meta(), _task(), _call("c", script), _out("c", "")])).steps[0]
    assert step.action.tool == "bash"
    assert step.action.args["command"] == script


def test_a_patch_by_absolute_path_edits_the_file_the_shell_read(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: /w/src/a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    lines = [
        _meta(),  # the session's directory is /w
        _task(),
        _call("c1", "cat src/a.py"),
        _out("c1", "x = 1\n"),
        _item({"type": "custom_tool_call", "call_id": "p", "name": "apply_patch", "input": patch}),
        _item({"type": "custom_tool_call_output", "call_id": "p", "output": "Success."}),
    ]
    edit = load(_write(tmp_path, lines)).steps[1]
    assert [(f.path, f.op, f.content) for f in edit.files] == [("src/a.py", "edit", "x = 2\n")]


@pytest.mark.parametrize("odd", [None, [], {"x": [1]}, 7, "text"], ids=repr)
def test_any_field_of_any_line_of_the_wrong_type_loses_at_most_that_line(
    tmp_path: Path, odd: Any
) -> None:
    """Each payload field of each line of the fixture, in turn, set to a value of the
    wrong type: load() never fails with anything but a CtxnbError, and the run keeps the
    tool calls of every other line."""
    lines = _lines()
    whole = load(ROLLOUT)
    calls = sum(1 for s in whole.steps if s.action.tool not in ("reply", "user", "compact"))
    assert calls == 7
    refused = 0
    for n, line in enumerate(lines):
        payload = line["payload"]
        for key in [k for k in payload if k != "type"] if isinstance(payload, dict) else []:
            damaged = [dict(x) for x in lines]
            damaged[n] = {**line, "payload": {**payload, key: odd}}
            p = _write(tmp_path, damaged)
            try:
                t = load(p)
            except CtxnbError:
                refused += 1
                continue
            kept = sum(1 for s in t.steps if s.action.tool not in ("reply", "user", "compact"))
            assert kept >= calls - 1, (n + 1, key, odd)
            for s in t.steps:
                if not s.parsed and s.note and "converter error" in s.note:
                    assert s.note.startswith(f"line {n + 1}:"), (n + 1, key, s.note)
    # No damaged field makes the whole file unreadable: each costs one line at most.
    assert refused == 0
