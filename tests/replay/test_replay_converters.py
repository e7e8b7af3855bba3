"""Trajectory model and converters, on the real trajectories shipped and shared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _data import TEST_DATA, trajectory_files
from _paths import REPO

from ctxnb.errors import CtxnbError
from ctxnb.replay import (
    Action,
    FileTouch,
    Step,
    Trajectory,
    TrajectoryFormatError,
    from_claude_code,
    from_mini_swe_agent,
    from_swe_agent,
    load,
    sniff_format,
)
from ctxnb.replay._shell import FileMemory, parse_command

ROOT = REPO
DATA = ROOT / "data" / "trajectories"
VENDORED = TEST_DATA / "trajectories"

MINI = DATA / "django__django-13670.traj.json"
SWE = DATA / "replay__marshmallow-code__marshmallow-1867__default.traj"
CLAUDE = DATA / "tool_heavy.jsonl"
CLAUDE_FULL = VENDORED / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"

# Measured on the 50 vendored runs: 82 of 1987 steps are unparsed, all of them responses
# mini-swe-agent itself rejected (not exactly one bash block); the worst run has 9 of 31.
MAX_UNPARSED_RATIO = 0.30
MAX_UNPARSED_TOTAL_RATIO = 0.05


# --------------------------------------------------------------------------- mini-swe-agent


def test_shell_words_are_read_like_bash() -> None:
    # A quoted ">" is an argument, an unspaced one redirects, and a heredoc inside "$(…)"
    # (how agents write commit messages) is one word.
    r = parse_command('grep ">" a.py', "x > y\n", FileMemory())
    assert [(f.path, f.op) for f in r.files] == [("a.py", "read")]
    r = parse_command("echo hi>out.txt", "", FileMemory())
    assert [(f.path, f.op, f.content) for f in r.files] == [("out.txt", "write", "hi\n")]
    r = parse_command('cat > y.py <<EOF\nv = "\\$HOME"\nEOF', "", FileMemory())
    assert [(f.path, f.content) for f in r.files] == [("y.py", 'v = "$HOME"\n')]
    r = parse_command("git commit -m \"$(cat <<'EOF'\nit's done\nEOF\n)\"", "", FileMemory())
    assert r.ok and r.files == []


def test_mini_swe_agent_counts_and_known_steps() -> None:
    t = load(MINI)
    assert t.source_format == "mini-swe-agent-1"
    assert t.id == "django__django-13670"
    assert t.task is not None and t.task.startswith("dateformat.y() doesn't support years < 1000.")
    assert t.system_prompt is not None and "ONE bash code block" in t.system_prompt
    assert t.stats() == {
        "steps": 22,
        "reads": 4,
        "edits": 3,
        "writes": 2,
        "deletes": 2,
        "unparsed": 1,
        "with_usage": 22,
        "compactions": 0,
    }
    # Step 1: a heredoc write of the reproduction script.
    write = t.steps[1]
    assert write.action.tool == "bash"
    assert [(f.path, f.op) for f in write.files] == [("reproduce_issue.py", "write")]
    assert write.files[0].content is not None
    assert write.files[0].content.startswith(
        "import datetime\nfrom django.utils import dateformat\n"
    )
    assert write.files[0].content.endswith('    print("SUCCESS: Output matches expected.")\n')
    # Step 3: `cat` of a file whose output mini-swe-agent truncated: a read, content unknown.
    cat = t.steps[3]
    assert cat.action.args == {"command": "cat django/utils/dateformat.py"}
    assert [(f.path, f.op, f.content) for f in cat.files] == [
        ("django/utils/dateformat.py", "read", None)
    ]
    assert cat.observation is not None and "elided" in cat.observation
    # Step 8: sed -i on a file never fully read: an edit with unknown content.
    sed = t.steps[8]
    assert [(f.path, f.op, f.content) for f in sed.files] == [
        ("django/utils/dateformat.py", "edit", None)
    ]
    assert sed.note is not None and sed.note.startswith("sed -i script: s/return str(")
    # Step 10: two bash blocks, rejected by the agent: unparsed, run continues.
    assert not t.steps[10].parsed
    assert t.steps[10].note == "response has 2 bash blocks, not one; the agent rejected it"
    assert t.steps[10].observation is not None
    assert t.steps[10].observation.startswith("Please always provide EXACTLY ONE action")
    # Step 12: `sed -n '278,281p' django/utils/dateformat.py`, a read of lines 278-281.
    rng = t.steps[12]
    assert rng.action.raw == "sed -n '278,281p' django/utils/dateformat.py"
    assert rng.files == [
        FileTouch(
            path="django/utils/dateformat.py",
            op="read",
            start_line=278,
            end_line=281,
            content='    def o(self):\n        "ISO 8601 year number matching the ISO week '
            'number (W)"\n        return self.data.isocalendar()[0]\n\n',
        )
    ]
    assert rng.observation == rng.files[0].content  # <returncode>/<output> stripped
    # Step 0 usage comes from extra.response.usage.
    assert t.steps[0].usage is not None
    assert (t.steps[0].usage.prompt_tokens, t.steps[0].usage.completion_tokens) == (1554, 255)
    assert t.steps[-1].action.tool == "submit"
    assert t.steps[-1].observation is not None
    assert t.steps[-1].observation.startswith("diff --git a/django/utils/dateformat.py")


def test_every_vendored_mini_swe_agent_run_converts() -> None:
    files = sorted((VENDORED / "mini-swe-agent").glob("*.traj.json"))
    assert len(files) == 50
    total_steps = total_unparsed = total_reads = 0
    for f in files:
        t = load(f)
        s = t.stats()
        assert s["steps"] >= 10, f
        assert s["with_usage"] == s["steps"], f
        assert s["unparsed"] / s["steps"] <= MAX_UNPARSED_RATIO, (f, s)
        for step in t.steps:
            if not step.parsed:
                assert step.note, f
        total_steps += s["steps"]
        total_unparsed += s["unparsed"]
        total_reads += s["reads"]
    assert total_steps == 1987
    assert total_unparsed / total_steps <= MAX_UNPARSED_TOTAL_RATIO
    assert total_reads >= 600


def test_nl_sed_read_strips_line_numbers() -> None:
    t = from_mini_swe_agent(
        {
            "trajectory_format": "mini-swe-agent-1",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "task"},
                {
                    "role": "assistant",
                    "content": "THOUGHT: look\n```bash\n"
                    "cd /testbed && nl -ba a.py | sed -n '10,11p'\n```",
                },
                {
                    "role": "user",
                    "content": "<returncode>0</returncode>\n"
                    "<output>\n    10\tx = 1\n    11\t\n</output>",
                },
            ],
        }
    )
    step = t.steps[0]
    assert step.thought == "look"
    assert step.files == [
        FileTouch(path="/testbed/a.py", op="read", start_line=10, end_line=11, content="x = 1\n\n")
    ]


def test_sed_inplace_applied_to_known_content() -> None:
    memory = FileMemory()
    parse_command("cat m.py", "a = 1\nb = 2\na = 3\n", memory)
    r = parse_command("sed -i 's/a = \\([0-9]\\)/a = \\1\\1/' m.py", "", memory)
    assert [(f.op, f.content) for f in r.files] == [("edit", "a = 11\nb = 2\na = 33\n")]
    r = parse_command("sed -i '2a\\    c = 4' m.py", "", memory)
    assert r.files[0].content == "a = 11\nb = 2\n    c = 4\na = 33\n"
    # An unsupported script forgets the file rather than guess.
    r = parse_command("sed -i 'y/abc/xyz/' m.py", "", memory)
    assert r.files[0].content is None
    assert memory.get("m.py") is None


def test_python_script_writes_are_edits_of_the_named_file() -> None:
    script = (
        "python3 - <<'EOF'\npath = 'pkg/mod.py'\nwith open(path) as f:\n    s = f.read()\n"
        "with open(path, 'w') as f:\n    f.write(s.replace('a', 'b'))\nEOF"
    )
    r = parse_command(script, "", FileMemory())
    assert [(f.path, f.op, f.content) for f in r.files] == [("pkg/mod.py", "edit", None)]


# --------------------------------------------------------------------------- Claude Code


def test_claude_code_small_fixture() -> None:
    t = load(CLAUDE)
    assert t.source_format == "claude-code"
    assert t.id == "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
    assert t.task == "start phoenix in background"
    assert t.stats() == {
        "steps": 11,
        "reads": 2,
        "edits": 0,
        "writes": 0,
        "deletes": 0,
        "unparsed": 0,
        "with_usage": 4,
        "compactions": 0,
    }
    assert [s.action.tool for s in t.steps] == [
        "bash", "bash", "user", "user", "user", "user", "WebSearch", "glob", "read", "WebFetch",
        "user",
    ]  # fmt: skip
    read = t.steps[8]
    assert read.action.args == {"file_path": "/home/marco/projects/spotter/assets/js/app.js"}
    (touch,) = read.files
    assert (touch.path, touch.op, touch.start_line, touch.end_line) == (
        "/home/marco/projects/spotter/assets/js/app.js",
        "read",
        1,
        83,
    )
    assert touch.content is not None and touch.content.startswith('import "phoenix_html"\n')
    assert "→" not in touch.content  # from toolUseResult, not the numbered tool_result text
    # Bash `tail -5 FILE` is recognised as a read of that file.
    assert [(f.path, f.op) for f in t.steps[1].files] == [
        ("/tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output", "read")
    ]
    # Usage: input + cache read + cache creation.
    assert t.steps[0].usage is not None
    assert t.steps[0].usage.prompt_tokens == 25801


def test_claude_code_full_session_with_compaction() -> None:
    t = load(CLAUDE_FULL)
    s = t.stats()
    assert s["steps"] == 194
    assert (s["reads"], s["edits"], s["writes"], s["unparsed"], s["compactions"]) == (
        44,
        35,
        13,
        0,
        1,
    )
    # Every tool call of the session is a step, parallel calls off the parent chain included.
    records = [json.loads(line) for line in CLAUDE_FULL.read_text().splitlines() if line]
    tool_uses = sum(
        1
        for r in records
        if isinstance(r.get("message"), dict) and isinstance(r["message"].get("content"), list)
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    )
    tool_steps = [x for x in t.steps if x.action.tool not in ("user", "reply", "compact")]
    assert len(tool_steps) == tool_uses == 186
    assert all(x.observation is not None for x in tool_steps)
    (compact,) = [x for x in t.steps if x.compaction]
    assert compact.index == 126
    assert compact.action.tool == "compact"
    assert compact.action.args == {"trigger": "auto", "preTokens": 167094}
    assert compact.observation is not None
    assert compact.observation.startswith("This session is being continued from a previous")
    first_edit = next(x for x in t.steps if x.action.tool == "edit")
    assert first_edit.files[0].path.endswith("lib/spotter/transcripts/annotation.ex")
    assert first_edit.files[0].content is not None  # computed from toolUseResult.originalFile


def test_all_claude_code_files_convert() -> None:
    files = trajectory_files("claude-code", "*.jsonl")
    assert len(files) >= 3
    for f in files:
        t = load(f)
        assert t.stats()["unparsed"] == 0, f
        assert t.steps, f


# --------------------------------------------------------------------------- SWE-agent


def test_swe_agent_demo_known_steps() -> None:
    t = load(SWE)
    assert t.source_format == "swe-agent"
    assert t.task is not None and t.task.startswith("TimeDelta serialization precision")
    assert t.stats() == {
        "steps": 14,
        "reads": 2,
        "edits": 2,
        "writes": 1,
        "deletes": 1,
        "unparsed": 0,
        "with_usage": 0,
        "compactions": 0,
    }
    assert [s.action.tool for s in t.steps] == [
        "bash", "open", "bash", "create", "edit", "bash", "bash", "glob", "open", "edit", "edit",
        "bash", "bash", "submit",
    ]  # fmt: skip
    (window,) = t.steps[8].files  # open src/marshmallow/fields.py 1474
    assert (window.path, window.op, window.start_line, window.end_line) == (
        "/marshmallow-code__marshmallow/src/marshmallow/fields.py",
        "read",
        1459,
        1558,
    )
    assert window.content is not None
    assert (
        window.content.split("\n")[15] == "        base_unit = dt.timedelta(**{self.precision: 1})"
    )
    assert t.steps[9].files == []  # refused by the syntax check
    assert t.steps[9].note is not None and "refused" in t.steps[9].note
    (edit,) = t.steps[10].files
    assert (edit.op, edit.start_line, edit.end_line) == ("edit", 1475, 1475)
    assert edit.path == "/marshmallow-code__marshmallow/src/marshmallow/fields.py"
    assert edit.new_text == (
        "        return int(round(value.total_seconds() / base_unit.total_seconds()))"
        "  # round to nearest int\n"
    )


def test_all_swe_agent_files_convert() -> None:
    files = trajectory_files("swe-agent", "*.traj")
    assert len(files) >= 9
    for f in files:
        t = load(f)
        s = t.stats()
        assert s["unparsed"] == 0, f
        assert s["reads"] >= 1 and s["edits"] >= 1, (f, s)
        assert t.steps[-1].action.tool == "submit", f


def test_swe_agent_history_only_file() -> None:
    history = [
        {"role": "system", "content": "SETTING"},
        {"role": "user", "content": "ISSUE:\nbroken\n\nINSTRUCTIONS:\ngo"},
        {"role": "assistant", "content": "t", "thought": "open it", "action": 'open "a.py"'},
        {"role": "tool", "content": "[File: a.py (1 lines total)]\r\n1:x = 1\n(Open file: a.py)"},
    ]
    t = from_swe_agent({"history": history})
    assert t.task == "broken"
    assert t.steps[0].files == [
        FileTouch(path="a.py", op="read", start_line=1, end_line=1, content="x = 1\n")
    ]


# --------------------------------------------------------------------------- odd steps


def test_odd_step_does_not_fail_the_file() -> None:
    t = from_mini_swe_agent(
        {
            "trajectory_format": "mini-swe-agent-1",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": "```bash\necho 'unbalanced\n```"},
                {"role": "user", "content": "<returncode>2</returncode>\n<output>\nerr\n</output>"},
                {"role": "assistant", "content": None, "extra": "not a dict"},
                {"role": "assistant", "content": "```bash\ncat ok.py\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\nok\n</output>"},
            ],
        }
    )
    assert [s.parsed for s in t.steps] == [False, False, True]
    assert t.unparsed_count == 2
    assert t.steps[0].note is not None and "could not tokenise" in t.steps[0].note
    assert t.steps[2].files[0].content == "ok\n"


def test_claude_code_odd_records_are_unparsed_steps() -> None:
    recs = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "message": {"content": "do it"}},
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "m1",
                "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        },
        {
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "u2",
            "message": {"id": "m2", "content": [{"type": "text", "text": "done"}]},
        },
    ]
    t = from_claude_code(recs)
    assert [(s.action.tool, s.parsed) for s in t.steps] == [("read", False), ("reply", True)]
    assert t.steps[0].note is not None and "file_path" in t.steps[0].note


def test_claude_code_damaged_line_is_skipped(tmp_path: Path) -> None:
    lines = CLAUDE.read_text().splitlines()
    lines.insert(5, '{"type": "assistant", "uuid": "broken')
    p = tmp_path / "session.jsonl"
    p.write_text("\n".join(lines) + "\n")
    t = load(p)
    assert t.metadata["skipped_lines"] == 1
    assert t.stats()["steps"] == 11


# --------------------------------------------------------------------------- model, load


def test_round_trip_jsonl(tmp_path: Path) -> None:
    for src in (MINI, SWE, CLAUDE):
        t = load(src)
        out = tmp_path / (src.name + ".ctxnb.jsonl")
        t.to_jsonl(out)
        lines = out.read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(t.steps) + 1
        header = json.loads(lines[0])
        assert header["format"] == "ctxnb-trajectory" and header["version"] == 1
        assert header["source_path"] == str(src)
        assert set(header) >= {"id", "source_format", "task", "metadata"}
        back = Trajectory.from_jsonl(out)
        assert back == t
        assert load(out) == t  # load() sniffs the neutral format too
        assert sniff_format(out) == "ctxnb-trajectory"


def test_truncated_neutral_file_is_an_error(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    load(MINI).to_jsonl(out)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:-3]) + "\n")
    with pytest.raises(TrajectoryFormatError, match="announces 22 steps but the file holds 19"):
        Trajectory.from_jsonl(out)


def test_sniffing_ignores_file_names(tmp_path: Path) -> None:
    for src, fmt in (
        (MINI, "mini-swe-agent-1"),
        (SWE, "swe-agent"),
        (CLAUDE, "claude-code"),
    ):
        p = tmp_path / f"renamed-{fmt}.txt"
        p.write_bytes(src.read_bytes())
        assert sniff_format(p) == fmt
        assert load(p).source_format == fmt


def test_truncated_json_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "run.traj.json"
    p.write_text(MINI.read_text()[:5000])
    with pytest.raises(TrajectoryFormatError) as info:
        load(p)
    msg = str(info.value)
    assert str(p) in msg
    assert "truncated or corrupted" in msg
    assert "mini-swe-agent-1" in msg
    assert isinstance(info.value, CtxnbError) and info.value.path == str(p)


@pytest.mark.parametrize(
    "content",
    ['{"some": "json"}', "plain text\n", "", '{"a": 1}\n{"b": 2}\n'],
)
def test_unknown_content_lists_known_formats(tmp_path: Path, content: str) -> None:
    p = tmp_path / "mystery.jsonl"
    p.write_text(content)
    with pytest.raises(TrajectoryFormatError) as info:
        load(p)
    assert str(p) in str(info.value)
    assert "ctxnb reads" in str(info.value) and "claude-code" in str(info.value)


def test_json_nested_too_deeply_is_a_format_error(tmp_path: Path) -> None:
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TrajectoryFormatError, match="nested too deeply") as info:
        load(p)
    assert str(p) in str(info.value)


def test_claude_code_ids_of_the_wrong_type_do_not_fail_the_file() -> None:
    """A uuid, parentUuid or message id that is a list or an object (unhashable) is no
    link: the records still convert instead of raising TypeError."""
    user = {"type": "user", "uuid": "u1", "parentUuid": None,
            "message": {"role": "user", "content": "fix it"}}  # fmt: skip
    reply = {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
             "message": {"id": ["m"], "role": "assistant",
                         "content": [{"type": "text", "text": "done"}]}}  # fmt: skip
    odd = [
        [user, reply],
        [user, {**reply, "parentUuid": ["u1"]}],
        [user, {**reply, "parentUuid": {"u": 1}, "logicalParentUuid": [1]}],
        [user, {**reply, "uuid": ["a1"]}],
    ]
    for records in odd:
        t = from_claude_code(records)
        assert t.task == "fix it" or t.steps, records
    assert [(s.action.tool, s.thought) for s in from_claude_code(odd[0]).steps] == [
        ("reply", "done")
    ]


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("mini.traj.json", lambda d: d.update(messages=5)),
        ("swe.traj", lambda d: d.update(history=1.5)),
        ("swe.traj", lambda d: d["trajectory"].insert(0, [1, [2]])),
        ("claude.jsonl", lambda d: d[0].update(type=[])),
    ],
)
def test_a_field_of_the_wrong_type_is_a_format_error_or_an_unparsed_step(
    tmp_path: Path, name: str, damage: Any
) -> None:
    """Never a raw TypeError or AttributeError: the file converts (the odd part marked
    unparsed) or load() says what is wrong with it."""
    src = {"mini.traj.json": MINI, "swe.traj": SWE, "claude.jsonl": CLAUDE}[name]
    p = tmp_path / name
    if name.endswith(".jsonl"):
        records = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
        damage(records)
        p.write_text("".join(json.dumps(r) + "\n" for r in records))
    else:
        data = json.loads(src.read_text())
        damage(data)
        p.write_text(json.dumps(data))
    try:
        t = load(p)
    except TrajectoryFormatError as e:
        assert str(p) in str(e) and "messages" in str(e)
    else:
        assert t.steps, name
        assert not any(s.note and "AttributeError" in s.note for s in t.steps)


def test_many_compactions_naming_missing_records_convert_in_linear_time(tmp_path: Path) -> None:
    """Each boundary whose logicalParentUuid is missing falls back to the message before
    it; finding that message used to scan the file again for every boundary, so a
    transcript of a few MB took minutes. Run in a subprocess under a generous deadline."""
    import subprocess
    import sys

    n = 25_000
    path = tmp_path / "compactions.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {
                        "type": "user",
                        "uuid": f"u{i}",
                        "sessionId": "s",
                        "parentUuid": f"c{i - 1}" if i else None,
                        "message": {"role": "user", "content": f"m{i}"},
                    }
                )
                + "\n"
            )
            f.write(json.dumps({"type": "system", "subtype": "compact_boundary",
                                "uuid": f"c{i}", "parentUuid": None,
                                "logicalParentUuid": f"gone{i}"}) + "\n")  # fmt: skip
    code = "import sys; from ctxnb.replay import load; print(len(load(sys.argv[1]).steps))"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == 2 * n - 1  # every message and boundary but the first message


@pytest.mark.parametrize("field", ["task", "system_prompt", "source_path", "metadata"])
def test_a_neutral_header_field_of_the_wrong_type_is_a_format_error(
    tmp_path: Path, field: str
) -> None:
    out = tmp_path / "t.jsonl"
    load(MINI).to_jsonl(out)
    header, *rest = out.read_text().splitlines()
    damaged = {**json.loads(header), field: [1, {"x": 2}]}
    out.write_text("\n".join([json.dumps(damaged), *rest]) + "\n")
    with pytest.raises(TrajectoryFormatError, match=f"header.*{field}") as info:
        load(out)
    assert str(out) in str(info.value)


def test_stats_and_repr() -> None:
    t = Trajectory(
        id="x",
        source_format="ctxnb",
        steps=[
            Step(
                index=0,
                action=Action(tool="bash"),
                files=[
                    FileTouch(path="a", op="read"),
                    FileTouch(path="a", op="edit"),
                    FileTouch(path="b", op="create"),
                ],
            ),
            Step(index=1, action=Action(tool="unknown"), parsed=False, note="odd"),
        ],
    )
    assert t.stats() == {
        "steps": 2,
        "reads": 1,
        "edits": 1,
        "writes": 1,
        "deletes": 0,
        "unparsed": 1,
        "with_usage": 0,
        "compactions": 0,
    }
    assert repr(t) == "Trajectory(id='x', source_format='ctxnb', steps=2, unparsed=1)"
    assert Trajectory.model_validate(t.model_dump()) == t
