"""Claude Code hooks: the example payloads, run through the real command and in-process."""

from __future__ import annotations

import doctest
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _paths import TESTS

import ctxnb.cli.govern as govern_cli_mod
import ctxnb.govern.state as state_mod
import ctxnb.integrations.claude_code as hooks_mod
from ctxnb.cli.app import main
from ctxnb.govern import init_governance
from ctxnb.govern.core import NO_INTENT_MESSAGE
from ctxnb.integrations.claude_code import HookResult, run_hook
from ctxnb.integrations.claude_code_install import install_settings
from ctxnb.samples import copy_sample_workspace

PAYLOAD_PROJECT = "/home/user/proj"
EVENTS = {
    "PreToolUse": "pre-tool-use",
    "PostToolUse": "post-tool-use",
    "UserPromptSubmit": "user-prompt-submit",
    "PostCompact": "post-compact",
    "SessionEnd": "session-end",
}
INTENTS_YAML = """\
active_intents:
  - id: INT-001
    name: Refactor the inventory parser
    status: active
    owned_scope:
      - inventory/**
    constraints:
      - Keep the public API of inventory/models.py
  - id: INT-002
    name: Docs
    status: paused
    owned_scope:
      - docs/**
"""
HEAVY = ("pandas", "pyarrow", "pydantic", "jsonschema")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A governed copy of the sample workspace: INT-001 owns inventory/**."""
    root = copy_sample_workspace(tmp_path)
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS_YAML)
    return root


@pytest.fixture
def payloads(test_data: Path) -> Callable[..., dict[str, Any]]:
    """Load an example payload with its paths moved into a workspace.

    ``src/app.py`` of the examples becomes ``inventory/models.py`` (in scope of INT-001).
    """

    def load(name: str, root: Path, **tool_input: Any) -> dict[str, Any]:
        text = (test_data / "claude-code-hooks" / f"{name}.json").read_text()
        text = text.replace(f"{PAYLOAD_PROJECT}/src/app.py", f"{root}/inventory/models.py")
        text = text.replace(PAYLOAD_PROJECT, str(root))
        data = json.loads(text)
        data.setdefault("tool_input", {}).update(tool_input)
        if not data["tool_input"]:
            del data["tool_input"]
        return data

    return load


def _subprocess(event: str, payload: dict[str, Any] | str, env: dict[str, str]) -> HookResult:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    proc = subprocess.run(
        [sys.executable, "-m", "ctxnb", "hook", event],
        input=text.encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    return HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def _inprocess(event: str, payload: dict[str, Any] | str, env: dict[str, str]) -> HookResult:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return run_hook(event, text, env=env)


@pytest.fixture(params=["subprocess", "in-process"])
def run(request: pytest.FixtureRequest) -> Callable[..., HookResult]:
    """Run one event through ``python -m ctxnb hook`` or through ``run_hook``."""
    impl = _subprocess if request.param == "subprocess" else _inprocess

    def runner(payload: dict[str, Any] | str, event: str | None = None) -> HookResult:
        if event is None:
            assert isinstance(payload, dict)
            event = EVENTS[payload["hook_event_name"]]
        env = {**os.environ, "CTXNB_MODEL_ID": "anthropic/claude-sonnet-4"}
        return impl(event, payload, env)

    return runner


def _reason(result: HookResult) -> str:
    return result.answer["hookSpecificOutput"]["permissionDecisionReason"]


def _trace(root: Path) -> list[dict[str, Any]]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def trace_schema(test_data: Path) -> dict[str, Any]:
    return json.loads((test_data / "agent-trace-0.1.0.schema.json").read_text())


# -- every example payload ----------------------------------------------------------------------
EXAMPLES = sorted(p.stem for p in (TESTS / "data" / "claude-code-hooks").glob("*.json"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_payload_gets_a_contract_answer(name, ws, payloads, run):
    payload = payloads(name, ws)
    result = run(payload)
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    if result.stdout and payload["hook_event_name"] != "PostCompact":
        answer = result.answer
        specific = answer.get("hookSpecificOutput", {})
        assert specific.get("hookEventName") == payload["hook_event_name"] or "decision" in answer
        if payload["hook_event_name"] == "PreToolUse":
            assert specific["permissionDecision"] in ("allow", "deny", "ask")
    if payload["hook_event_name"] == "PostCompact":
        # A compaction has nothing to decide: the example's transcript is not on this
        # machine, which the user is told, and the summary is recorded all the same.
        assert set(result.answer) == {"systemMessage"}


def test_examples_are_all_covered():
    assert len(EXAMPLES) == 13


# -- the governed session, step by step --------------------------------------------------------
def test_governed_session(ws, payloads, run, trace_schema):
    # Reading a secret is refused with the path policy's message.
    result = run(payloads("pre-read", ws, file_path=str(ws / ".env")))
    assert result.exit_code == 0 and result.decision == "deny"
    assert _reason(result).startswith("Path ") and "rule: deny:.env*" in _reason(result)

    # Reading code and searching the workspace root: no decision.
    for name in ("pre-read", "pre-grep", "pre-glob"):
        result = run(payloads(name, ws))
        assert (result.exit_code, result.stdout) == (0, ""), name

    # An edit before any intent is refused with the exact message.
    result = run(payloads("pre-edit", ws))
    assert result.decision == "deny"
    first, _, action = _reason(result).partition("\n")
    assert first == "You must cite a valid active Intent ID before mutating tools."
    assert "INT-001" in action and "INT-002" not in action

    # The user names the intent; the session now works under it.
    result = run(payloads("user-prompt-submit", ws))
    context = result.answer["hookSpecificOutput"]["additionalContext"]
    assert result.answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "INT-001 is now the active intent" in context and "<intent_context>" in context
    assert "Keep the public API of inventory/models.py" in context
    session = json.loads(
        (hooks_mod.state_dir(ws) / "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21.json").read_text()
    )
    assert session["intent_id"] == "INT-001" and session["source"] == "prompt"

    result = run(payloads("pre-edit", ws))
    assert (result.exit_code, result.stdout) == (0, "")
    result = run(payloads("pre-multiedit", ws))
    assert (result.exit_code, result.stdout) == (0, "")

    # Outside the intent's scope: refused.
    result = run(payloads("pre-write", ws))
    assert result.decision == "deny"
    assert _reason(result).startswith("src/new.py is outside the scope of intent INT-001")

    # Every command runs in the sandbox (updatedInput); a destructive-looking text is only
    # a warning: what it does is held for the user with its diff.
    result = run(payloads("pre-bash", ws))
    assert result.decision == "allow"
    assert "looks destructive" in _reason(result) and "rm" in _reason(result)
    result = run(payloads("pre-bash", ws, command="pytest -q"))
    assert result.decision == "allow"
    wrapped = result.answer["hookSpecificOutput"]["updatedInput"]["command"]
    assert "sandbox exec" in wrapped and "--intent INT-001" in wrapped
    assert wrapped.endswith("-- bash -c 'pytest -q'")

    # After the edit: one schema-valid Agent Trace record.
    models = ws / "inventory" / "models.py"
    models.write_text(models.read_text().replace("A thing we keep in stock.", "A stock item."))
    line = models.read_text().splitlines().index('    """A stock item."""') + 1
    patch = [{"oldStart": line, "oldLines": 1, "newStart": line, "newLines": 1, "lines": []}]
    patch[0]["lines"] = ['-    """A thing we keep in stock."""', '+    """A stock item."""']
    post = payloads("post-edit", ws)
    post["tool_response"]["structuredPatch"] = patch
    result = run(post)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    (record,) = _trace(ws)
    jsonschema.validate(record, trace_schema, format_checker=jsonschema.FormatChecker())
    assert record["files"][0]["path"] == "inventory/models.py"
    conv = record["files"][0]["conversations"][0]
    assert conv["contributor"] == {"type": "ai", "model_id": "anthropic/claude-sonnet-4"}
    assert [(r["start_line"], r["end_line"]) for r in conv["ranges"]] == [(line, line)]
    assert record["metadata"]["intent_id"] == "INT-001"
    assert record["metadata"]["session_id"] == "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
    assert record["metadata"]["tool"] == "Edit"
    assert record["metadata"]["tool_use_id"] == "toolu_01C"


def test_post_write_of_a_new_file_traces_every_line(ws, payloads, run, trace_schema):
    main(["hook", "select-intent", "INT-001", "--session", "s-9", "-w", str(ws)])
    new = ws / "inventory" / "export.py"
    new.write_text("import csv\n\n\ndef export():\n    pass\n")
    post = payloads("post-write", ws, file_path=str(new))
    post["session_id"] = "s-9"
    post["tool_response"]["filePath"] = str(new)
    result = run(post)
    assert (result.exit_code, result.stdout) == (0, "")
    (record,) = _trace(ws)
    jsonschema.validate(record, trace_schema, format_checker=jsonschema.FormatChecker())
    ranges = record["files"][0]["conversations"][0]["ranges"]
    assert [(r["start_line"], r["end_line"]) for r in ranges] == [(1, 5)]
    assert record["metadata"]["intent_id"] == "INT-001"


def test_post_write_records_the_transcript_and_keeps_the_chain(ws, payloads, run, capsys):
    main(["hook", "select-intent", "INT-001", "--session", "s-t", "-w", str(ws)])
    new = ws / "inventory" / "export.py"
    new.write_text("x = 1\n")
    post = payloads("post-write", ws, file_path=str(new))
    post["session_id"] = "s-t"
    post["tool_response"]["filePath"] = str(new)
    post["transcript_path"] = str(ws.parent / "transcripts" / "s-t.jsonl")
    assert run(post).exit_code == 0
    (record,) = _trace(ws)
    conv = record["files"][0]["conversations"][0]
    assert conv["url"] == (ws.parent / "transcripts" / "s-t.jsonl").as_uri()
    capsys.readouterr()
    assert main(["trace", "verify", str(ws)]) == 0


def test_post_hooks_keep_every_version_and_the_store_compacted(ws, payloads):
    # Each hook is a new process that opens the store, and opening reads every
    # transaction not yet compacted: the post hook compacts past `compact_after`.
    from ctxnb import Workspace

    (ws / "ctxnb.toml").write_text("[index]\ncompact_after = 2\n")
    main(["hook", "select-intent", "INT-001", "--session", "s-c", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    for i in range(7):
        models.write_text(f"x = {i}\n")
        post = payloads("post-write", ws, file_path=str(models), content=f"x = {i}\n")
        post["session_id"] = "s-c"
        post["tool_response"]["filePath"] = str(models)
        result = run_hook("post-tool-use", json.dumps(post))
        assert (result.exit_code, result.stderr) == (0, "")
    with Workspace.open(ws) as opened:
        assert opened.store.pending_segments() <= 2
        contents = [v.doc["content"] for v in opened.history("inventory/models.py")]
    assert contents == [f"x = {i}\n" for i in range(7)]
    assert len(_trace(ws)) == 7
    audit = (ws / ".ctxnb" / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line)["tool"] for line in audit[-7:]] == ["Write"] * 7


def test_post_edit_without_a_patch_diffs_the_undone_edit(ws, payloads, run):
    main(["hook", "select-intent", "INT-001", "--session", "s-3", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    before = models.read_text()
    models.write_text(before.replace("reorder_level: int = 5", "reorder_level: int = 7"))
    post = payloads(
        "post-edit",
        ws,
        old_string="reorder_level: int = 5",
        new_string="reorder_level: int = 7",
    )
    post["session_id"] = "s-3"
    del post["tool_response"]["structuredPatch"]
    assert run(post).exit_code == 0
    (record,) = _trace(ws)
    line = before.splitlines().index("    reorder_level: int = 5") + 1
    ranges = record["files"][0]["conversations"][0]["ranges"]
    assert [(r["start_line"], r["end_line"]) for r in ranges] == [(line, line)]


def test_post_edit_without_an_intent_is_traced_as_unknown_and_says_so(ws, payloads, run):
    result = run(payloads("post-edit", ws))
    assert result.exit_code == 0
    context = result.answer["hookSpecificOutput"]["additionalContext"]
    assert "no active intent" in context
    assert _trace(ws)[0]["metadata"]["intent_id"] == "unknown"


def test_paused_or_unknown_intents_are_not_selected(ws, payloads, run):
    prompt = payloads("user-prompt-submit", ws)
    prompt["prompt"] = "Update the docs under INT-002"
    result = run(prompt)
    assert (
        "not active: INT-002 (paused)" in result.answer["hookSpecificOutput"]["additionalContext"]
    )
    prompt["prompt"] = "No intent here, INT-0010 is not INT-001x either"
    assert run(prompt).stdout == ""
    result = run(payloads("pre-edit", ws))
    assert _reason(result).splitlines()[0] == NO_INTENT_MESSAGE


def test_an_intent_paused_after_selection_is_refused(ws, payloads, run):
    run(payloads("user-prompt-submit", ws))
    yaml_path = ws / ".orchestration" / "active_intents.yaml"
    yaml_path.write_text(INTENTS_YAML.replace("status: active", "status: done"))
    result = run(payloads("pre-edit", ws))
    assert result.decision == "deny"
    assert _reason(result).startswith("Intent 'INT-001' is done, not active.")


def test_a_broken_intents_file_fails_closed(ws, payloads, run):
    run(payloads("user-prompt-submit", ws))
    (ws / ".orchestration" / "active_intents.yaml").write_text("active_intents: [\n")
    result = run(payloads("pre-edit", ws))
    assert result.decision == "deny"
    assert "ctxnb cannot check this call" in _reason(result)
    assert "active_intents.yaml" in _reason(result)


def test_ungoverned_workspace_only_applies_the_path_policy(tmp_path, payloads, run):
    root = copy_sample_workspace(tmp_path)
    assert run(payloads("pre-edit", root)).stdout == ""
    assert run(payloads("pre-bash", root)).stdout == ""
    assert run(payloads("pre-read", root, file_path=str(root / ".env"))).decision == "deny"
    assert not (root / ".ctxnb").exists()


def test_an_edit_in_an_ungoverned_project_says_it_is_not_recorded(tmp_path, payloads, run):
    """No .orchestration/: the edit is not recorded, and the user and the model are told
    so on the session's first edit (not on every one), with the command that fixes it."""
    root = copy_sample_workspace(tmp_path)
    first = run(payloads("post-edit", root))
    assert first.exit_code == 0
    told = first.answer
    for text in (told["systemMessage"], told["hookSpecificOutput"]["additionalContext"]):
        assert "not recorded" in text and "ctxnb init" in text and str(root) in text
    assert run(payloads("post-write", root)).stdout == ""  # once per session
    other = payloads("post-edit", root)
    other["session_id"] = "../../another-session"  # a new session is told again, safely
    assert "not recorded" in run(other).answer["systemMessage"]
    assert not (root / ".ctxnb").exists() and not (root / ".orchestration").exists()


def test_paths_outside_the_workspace_are_denied(ws, payloads, run):
    outside = ws.parent / "elsewhere.py"
    assert run(payloads("pre-read", ws, file_path=str(outside))).decision == "deny"
    result = run(payloads("pre-grep", ws, path=str(ws.parent)))
    assert result.decision == "deny" and "outside-roots" in _reason(result)
    assert run(payloads("pre-grep", ws, glob=".env*")).decision == "deny"
    assert run(payloads("pre-glob", ws, pattern="../**/*.py")).decision == "deny"


def test_subdirectory_cwd_finds_the_governed_root(ws, payloads, run):
    run(payloads("user-prompt-submit", ws))
    edit = payloads("pre-edit", ws)
    edit["cwd"] = str(ws / "inventory")
    edit["tool_input"]["file_path"] = "store.py"  # relative to cwd
    assert run(edit).stdout == ""
    edit["tool_input"]["file_path"] = "../docs/style.md"
    assert run(edit).decision == "deny"


# -- errors ------------------------------------------------------------------------------------
_BROKEN_INSTALL = """
import sys
sys.modules["ctxnb.integrations.claude_code"] = None  # the module cannot be imported
from ctxnb.cli.app import main
sys.exit(main(["hook", sys.argv[1]]))
"""


@pytest.mark.parametrize(("event", "code"), [("pre-tool-use", 2), ("post-tool-use", 1)])
def test_a_hook_that_cannot_load_fails_closed(event, code):
    # Python's own exit code for an uncaught ImportError is 1, which Claude Code takes
    # as "go on": the pre hook must say 2 (block) whatever goes wrong.
    proc = subprocess.run(
        [sys.executable, "-c", _BROKEN_INSTALL, event],
        input=b"{}",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == code
    err = proc.stderr.decode()
    assert err.startswith(f"ctxnb hook {event}: ") and "cannot load the hook" in err
    assert "Traceback" not in err and proc.stdout == b""


@pytest.mark.parametrize(
    ("stdin", "needle"),
    [
        ("not json", "stdin is not JSON"),
        ("[1, 2]", "must be a JSON object, not list"),
        ('{"tool_name": "Read"}', "'cwd' must be an absolute path"),
        ('{"cwd": "/", "tool_input": {}}', "non-empty string 'tool_name'"),
        ("[" * 100_000, "nested too deeply"),  # the JSON parser's recursion limit
    ],
)
def test_malformed_stdin_blocks_with_a_clean_reason(stdin, needle, run):
    result = run(stdin, "pre-tool-use")
    assert result.exit_code == 2  # fail closed: Claude Code blocks the call
    assert result.stdout == ""
    assert result.stderr.startswith("ctxnb hook pre-tool-use: blocked: ")
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_bad_tool_input_types_are_clean_errors(ws, payloads, run):
    result = run(payloads("pre-read", ws, file_path=42))
    assert result.exit_code == 2 and "tool_input.file_path must be a string" in result.stderr


def test_output_strings_are_capped():
    long = "x" * 20_000
    answer = hooks_mod._pre_answer("deny", long).answer
    assert len(answer["hookSpecificOutput"]["permissionDecisionReason"]) == 10_000


# -- commands -----------------------------------------------------------------------------------
def test_select_intent_command(ws, capsys):
    assert main(["hook", "select-intent", "INT-001", "--session", "abc", "-w", str(ws)]) == 0
    assert "<intent_context>" in capsys.readouterr().out
    assert state_mod.read_session_intent(hooks_mod.state_dir(ws), "abc") == "INT-001"
    assert not (ws / ".ctxnb" / "hook-state").exists()  # outside the agent's reach
    assert main(["hook", "select-intent", "INT-002", "--session", "abc", "-w", str(ws)]) == 1
    assert "INT-002' is paused" in capsys.readouterr().err
    assert main(["hook", "select-intent", "INT-001", "-w", str(ws)]) == 2


def test_hook_command_in_process_reads_stdin(ws, payloads, monkeypatch, capsys):
    data = json.dumps(payloads("pre-read", ws, file_path=str(ws / ".env"))).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["hook", "pre-tool-use"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_init_governance_command(tmp_path, capsys):
    assert main(["init-governance", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("created ") == 4 and "active_intents.yaml" in out
    assert main(["init-governance", str(tmp_path)]) == 0
    assert "nothing created" in capsys.readouterr().out
    assert main(["init-governance", str(tmp_path / "missing")]) == 1


def test_install_merges_idempotently(tmp_path, capsys):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    other = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-audit"}]}
    stale = {
        "matcher": "Edit",
        "hooks": [{"type": "command", "command": "ctxnb hook pre-tool-use"}],
    }
    settings.write_text(
        json.dumps({"model": "opus", "hooks": {"PreToolUse": [other, stale], "Stop": [other]}})
    )
    assert main(["hook", "install", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("updated ")
    first = settings.read_text()
    data = json.loads(first)
    assert data["model"] == "opus" and data["hooks"]["Stop"] == [other]
    pre = data["hooks"]["PreToolUse"]
    assert pre[0] == other and len(pre) == 2
    # This interpreter by its absolute path, isolated: nothing of the project is imported.
    launch = f"{os.path.abspath(sys.executable)} -I -m ctxnb"
    assert pre[1]["hooks"] == [{"type": "command", "command": f"{launch} hook pre-tool-use"}]
    assert pre[1]["matcher"] == "Read|Glob|Grep|Write|Edit|MultiEdit|NotebookEdit|Bash|mcp__.*"
    post = data["hooks"]["PostToolUse"]
    assert post == [
        {
            "matcher": "Write|Edit|MultiEdit|Bash",
            "hooks": [{"type": "command", "command": f"{launch} hook post-tool-use"}],
        }
    ]
    assert data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].endswith("prompt-submit")

    assert main(["hook", "install", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("unchanged ")
    assert settings.read_text() == first
    path, changed = install_settings(tmp_path, command=f"{sys.executable} -m ctxnb")
    assert changed and len(json.loads(path.read_text())["hooks"]["PreToolUse"]) == 2


def test_install_refuses_a_broken_settings_file(tmp_path, capsys):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    assert main(["hook", "install", str(tmp_path)]) == 1
    assert "not valid JSON" in capsys.readouterr().err
    assert settings.read_text() == "{not json"


# -- start-up cost -----------------------------------------------------------------------------
_PROBE = """
import io, json, sys
payload = sys.argv[1]
sys.stdin = io.TextIOWrapper(io.BytesIO(payload.encode()))
from ctxnb.cli.app import main
code = main(["hook", "pre-tool-use"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


@pytest.mark.parametrize("name", ["pre-edit", "pre-read", "pre-bash", "pre-grep"])
def test_pre_tool_use_imports_nothing_heavy(name, ws, payloads):
    run_once = _subprocess  # warms the validated caches, as every call after the first has
    run_once("user-prompt-submit", payloads("user-prompt-submit", ws), dict(os.environ))
    payload = json.dumps(payloads(name, ws))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=set(HEAVY)), payload],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}


# What a path check needs, and no more: Claude Code starts this process on every tool
# call, so each module here is paid on every Read and Edit. A new import on this path
# must be added here on purpose (and measured with `python bench/hooks.py`).
POLICY_PATH_MODULES = {
    "ctxnb",
    "ctxnb._util",
    "ctxnb._util.defaults",
    "ctxnb._util.jsoncache",  # the caches keyed by their source files (settings, protected)
    "ctxnb._util.lazy",
    "ctxnb._util.record",  # the records of SafePath and the parsed path, without dataclasses
    "ctxnb._version",
    "ctxnb._util.wildmatch",
    "ctxnb.access",
    "ctxnb.access._fdwalk",  # fdio's descriptor walk, in its own module since the split
    "ctxnb.access._safepath",  # SafePath and the parsed path, split from pathrules
    "ctxnb.access.fdio",
    "ctxnb.access.ownenv",  # ctxnb's environment inside the workspace is governance
    "ctxnb.access.pathrules",
    # A write is judged against what runs on the host: the cached derived set, never its
    # derivation (ctxnb.access._whatruns, on a change only). A Read loads neither.
    "ctxnb.access.protected",
    "ctxnb.cli",
    "ctxnb.cli.app",
    "ctxnb.errors",
    "ctxnb.govern",
    "ctxnb.govern.breaker",
    "ctxnb.govern.core",
    "ctxnb.govern.partition",  # on a write only (below)
    "ctxnb.govern.state",
    "ctxnb.integrations",
    "ctxnb.integrations._claude_hookio",  # the payload and the answer, split from claude_code
    "ctxnb.integrations.claude_code",
    "ctxnb.hashing",
}
# A write refreshes the session's lease on its scope (write partitioning): json and one
# stat; the store is opened only when a lapsed lease is taken again.
WRITE_CHECK_MODULES = {"ctxnb.access.protected", "ctxnb.govern.partition"}
"""On the policy path of a write only."""
# Libraries (and slow standard modules) a path check never needs.
NOT_ON_THE_POLICY_PATH = (
    *HEAVY,
    "ipywidgets",
    "yaml",
    "pathspec",
    "tomllib",
    "argparse",
    "dataclasses",
    "inspect",
    "secrets",
    "datetime",
    "threading",
)
_PROBE_MODULES = """
import io, json, sys
payload = sys.argv[1]
sys.stdin = io.TextIOWrapper(io.BytesIO(payload.encode()))
from ctxnb.cli.app import main
code = main(["hook", "pre-tool-use"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


@pytest.mark.parametrize("name", ["pre-edit", "pre-read"])
def test_pre_tool_use_loads_only_the_policy_path(name, ws, payloads):
    # An in-scope Edit passes every policy (path, intent, scope) and a Read the path
    # policy; neither may load the store, the config models, the CLI parser or pathspec.
    _subprocess("user-prompt-submit", payloads("user-prompt-submit", ws), dict(os.environ))
    _subprocess("pre-tool-use", payloads(name, ws), dict(os.environ))  # caches settings
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE_MODULES, json.dumps(payloads(name, ws))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout == ""  # no decision: the call is allowed
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0
    modules = set(report["modules"])
    ours = {m for m in modules if m == "ctxnb" or m.startswith("ctxnb.")}
    assert ours == POLICY_PATH_MODULES - (WRITE_CHECK_MODULES if name == "pre-read" else set())
    loaded = sorted(m for m in modules if m.split(".")[0] in NOT_ON_THE_POLICY_PATH)
    assert loaded == []


# -- settings ------------------------------------------------------------------------------
def test_hook_sandbox_defaults_match_the_config(tmp_path):
    # Without a configuration the hook builds its sandbox from an empty section (pydantic
    # stays out of it): every default then comes from Sandbox.from_settings, and must be
    # the configuration's default.
    from dataclasses import asdict

    from ctxnb.config import CtxnbConfig, validate_config
    from ctxnb.sandbox import Sandbox

    def shape(sb):
        return (sb.backend, sb.network, sb.env_allow, sb.read_paths, sb.limits, sb.git)

    hook = Sandbox.from_settings(tmp_path, state_mod.DEFAULT_SETTINGS["sandbox"])
    config = Sandbox.from_settings(tmp_path, asdict(CtxnbConfig().sandbox))
    assert shape(hook) == shape(config)
    # And a setting given in either form reaches the sandbox the same way.
    given = {"network": True, "env": ["LANG"], "max_file_mb": 8, "git": "read"}
    both = [
        Sandbox.from_settings(tmp_path, given),
        Sandbox.from_settings(tmp_path, asdict(validate_config({"sandbox": given}).sandbox)),
    ]
    assert shape(both[0]) == shape(both[1])
    assert both[0].network and both[0].env_allow == ["LANG"] and both[0].limits.max_file_mb == 8
    assert both[0].git == "read" and hook.git == "auto"


def test_settings_from_ctxnb_toml_are_used_and_cached(ws, payloads, run):
    (ws / "ctxnb.toml").write_text('[policy]\ndeny = [".git/", "db/"]\n')
    assert run(payloads("pre-read", ws, file_path=str(ws / "db" / "schema.sql"))).decision == "deny"
    assert run(payloads("pre-read", ws, file_path=str(ws / ".env"))).stdout == ""
    cache = json.loads((hooks_mod.state_dir(ws) / "cache" / "settings.json").read_text())
    assert cache["value"]["deny"] == [".git/", "db/"]
    (ws / "ctxnb.toml").write_text("[policy]\ndney = []\n")
    result = run(payloads("pre-read", ws))
    assert result.decision == "deny" and "unknown key 'policy.dney'" in _reason(result)


def test_doctests():
    for mod in (hooks_mod, govern_cli_mod):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, mod.__name__


# -- what governance remembers, through the hooks ------------------------------------------------
def test_failed_writes_open_the_breaker_for_every_later_hook_process(ws, payloads, run):
    (ws / "ctxnb.toml").write_text("[governance]\nbreaker_threshold = 2\n")
    main(["hook", "select-intent", "INT-001", "--session", "s-b", "-w", str(ws)])
    for _ in range(2):
        post = payloads("post-edit", ws)
        post["session_id"] = "s-b"
        post["tool_response"]["success"] = False
        assert run(post).exit_code == 0
    pre = payloads("pre-edit", ws)
    pre["session_id"] = "s-b"
    result = run(pre)
    assert result.decision == "deny"
    reason = result.answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert "circuit breaker is open" in reason and "ctxnb hook reset-breaker" in reason
    # the notebook's engine sees the same open breaker
    from ctxnb import Workspace

    w = Workspace.open(ws)
    tools = w.tools(w.session("nb"), caller="t")
    # one breaker for every way in: an Edit counts as the engine's write_patch
    assert tools.engine.failures == {"write_patch": 2}
    w.close()
    assert main(["hook", "reset-breaker", "-w", str(ws)]) == 0  # a human closes it
    assert run(pre).decision != "deny"


def test_sensitive_files_make_claude_code_ask_its_user(ws, payloads, run):
    (ws / "ctxnb.toml").write_text('[policy]\nsensitive = ["inventory/models.py"]\n')
    main(["hook", "select-intent", "INT-001", "--session", "s-s", "-w", str(ws)])
    read = payloads("pre-read", ws, file_path=str(ws / "inventory" / "models.py"))
    read["session_id"] = "s-s"
    result = run(read)
    assert result.decision == "ask"
    assert "marked sensitive" in result.answer["hookSpecificOutput"]["permissionDecisionReason"]
    edit = payloads("pre-edit", ws)
    edit["session_id"] = "s-s"
    assert run(edit).decision == "ask"
    other = payloads("pre-read", ws, file_path=str(ws / "inventory" / "store.py"))
    assert run(other).decision is None  # not sensitive: Claude Code's own rules apply
    denied = payloads("pre-read", ws, file_path=str(ws / ".env"))
    (ws / ".env").write_text("X=1\n")
    assert run(denied).decision == "deny"  # a denied file stays denied, never "ask"


def test_a_prompt_selecting_an_intent_brings_its_lessons(ws, payloads, run):
    from ctxnb.govern.lessons import format_lesson

    with (ws / ".orchestration" / "AGENT.md").open("a") as f:
        f.write(format_lesson("2026-11-20 10:00", "keep cents as int", intent_id="INT-001") + "\n")
        f.write(format_lesson("2026-11-20 11:00", "docs are generated", paths=["docs/a.md"]) + "\n")
    prompt = payloads("user-prompt-submit", ws)
    prompt["prompt"] = "Work on the parser under INT-001"
    context = run(prompt).answer["hookSpecificOutput"]["additionalContext"]
    assert "lessons:\n  - 2026-11-20 10:00 keep cents as int" in context
    assert "docs are generated" not in context


def _saved_write(payloads, ws, path, after: str, session: str) -> dict:
    """Save ``after`` to ``path`` as Claude Code's Write did, and its post-write payload."""
    before = path.read_text()
    path.write_text(after)
    post = payloads("post-write", ws, file_path=str(path), content=after)
    post["session_id"] = session
    post["tool_response"].update(filePath=str(path), originalFile=before)
    return post


# -- one recorder: a Claude Code edit is recorded as an engine edit is -----------------------------
def test_a_claude_code_write_gets_the_record_an_engine_write_gets(ws, payloads, run):
    from ctxnb import Workspace

    main(["hook", "select-intent", "INT-001", "--session", "s-r", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    before = models.read_text()
    after = before + "\n\ndef restock(item):\n    return item\n"
    result = run(_saved_write(payloads, ws, models, after, "s-r"))
    assert (result.exit_code, result.stderr) == (0, "")
    (record,) = _trace(ws)
    meta = record["metadata"]
    assert meta["mutation_class"] == "INTENT_EVOLUTION"
    assert meta["caller"] == "claude-code" and meta["intent_id"] == "INT-001"
    assert meta["scope"] == "in-scope"
    intent_map = (ws / ".orchestration" / "intent_map.md").read_text()
    assert "## INT-001 — Refactor the inventory parser" in intent_map
    assert "- `inventory/models.py`: restock" in intent_map
    # the version the trace names is the one the store holds
    with Workspace.open(ws) as opened:
        (latest, *_) = reversed(opened.history("inventory/models.py"))
        assert latest.doc["content"] == after
        assert meta["version_id"] == latest.version_id

    # the same change through the engine's write_file gets the same kind of record, once
    # the Claude Code session is over (its lease would keep the scope otherwise)
    from ctxnb.govern.partition import release_lease

    release_lease(ws, "s-r")
    w = Workspace.open(ws)
    tools = w.tools(w.session("nb"), caller="nb")
    tools.engine.select_active_intent("INT-001")
    tools.read_file("inventory/models.py")
    tools.write_file("inventory/models.py", after + "\n\ndef unstock(item):\n    return None\n")
    w.close()
    _, engine_record = _trace(ws)
    shared = {"intent_id", "session_id", "tool", "mutation_class", "caller", "version_id"}
    assert shared <= set(meta) and shared <= set(engine_record["metadata"])
    assert engine_record["metadata"]["mutation_class"] == "INTENT_EVOLUTION"
    assert "unstock" in (ws / ".orchestration" / "intent_map.md").read_text()


def test_a_claude_code_edit_that_keeps_the_meaning_is_a_refactor(ws, payloads, run):
    main(["hook", "select-intent", "INT-001", "--session", "s-a", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    before = models.read_text()
    after = before.replace("\n\n\n", "\n\n\n# a comment changes nothing\n", 1)
    assert after != before
    assert run(_saved_write(payloads, ws, models, after, "s-a")).exit_code == 0
    (record,) = _trace(ws)
    assert record["metadata"]["mutation_class"] == "AST_REFACTOR"
    assert "inventory/models.py" not in (ws / ".orchestration" / "intent_map.md").read_text()


def test_the_engines_open_breaker_stops_a_claude_code_write(ws, payloads, run):
    from ctxnb import Workspace

    (ws / "ctxnb.toml").write_text("[governance]\nbreaker_threshold = 2\n")
    main(["hook", "select-intent", "INT-001", "--session", "s-w", "-w", str(ws)])
    w = Workspace.open(ws)
    engine = w.tools(w.session("nb"), caller="nb").engine
    for _ in range(2):  # write_file failed twice in the notebook
        engine.breaker.record("write_file", failed=True)
    w.close()
    pre = payloads("pre-write", ws, file_path=str(ws / "inventory" / "models.py"))
    pre["session_id"] = "s-w"
    result = run(pre)
    assert result.decision == "deny"
    assert "write_file failed 2 times" in _reason(result)
    edit = payloads("pre-edit", ws)
    edit["session_id"] = "s-w"
    assert run(edit).decision != "deny"  # write_patch's breaker is closed


def test_an_edit_outside_the_intents_scope_is_recorded_as_such_and_blocked(ws, payloads, run):
    main(["hook", "select-intent", "INT-001", "--session", "s-o", "-w", str(ws)])
    readme = ws / "README.md"
    after = readme.read_text() + "\nA line the intent does not own.\n"
    result = run(_saved_write(payloads, ws, readme, after, "s-o"))
    assert result.exit_code == 0 and result.answer["decision"] == "block"
    assert "outside the scope of intent INT-001" in result.answer["reason"]
    (record,) = _trace(ws)
    # what happened is recorded, under the intent, with the scope decision ...
    assert record["metadata"]["intent_id"] == "INT-001"
    assert record["metadata"]["scope"] == "out-of-scope"
    # ... but it is not listed as the intent's work
    assert "README.md" not in (ws / ".orchestration" / "intent_map.md").read_text()


def test_an_edit_with_no_intent_is_recorded_under_unknown(ws, payloads, run):
    models = ws / "inventory" / "models.py"
    after = models.read_text() + "\n\ndef orphan():\n    return 0\n"
    result = run(_saved_write(payloads, ws, models, after, "s-none"))
    assert result.exit_code == 0
    assert "no active intent" in json.dumps(result.answer)
    (record,) = _trace(ws)
    assert (record["metadata"]["intent_id"], record["metadata"]["scope"]) == (
        "unknown",
        "no-intent",
    )
    assert "orphan" not in (ws / ".orchestration" / "intent_map.md").read_text()


def test_a_write_under_a_mount_with_its_own_filesystem_is_one_object(ws, payloads):
    # [[mounts]] names the filesystem the project is on: Claude Code's Write, the
    # file tools and the resolver all identify the file on it, as one object.
    from ctxnb import Workspace

    (ws / "ctxnb.toml").write_text(
        f'[[mounts]]\nagent_prefix = "/workspace"\ncanonical_prefix = "{ws.resolve()}"\n'
        'filesystem_id = "proj-fs"\n'
    )
    main(["hook", "select-intent", "INT-001", "--session", "s-m", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    models.write_text("x = 1\n")
    post = payloads("post-write", ws, file_path="/workspace/inventory/models.py", content="x = 1\n")
    post["session_id"] = "s-m"
    post["tool_response"]["filePath"] = "/workspace/inventory/models.py"
    result = run_hook("post-tool-use", json.dumps(post))
    assert (result.exit_code, result.stderr) == (0, "")
    with Workspace.open(ws) as opened:
        oid = opened.object_id("inventory/models.py")
        assert opened.resolver.resolve("/workspace/inventory/models.py").filesystem_id == "proj-fs"
        assert opened.source_for("inventory/models.py").filesystem_id == "proj-fs"
        assert [v.doc["content"] for v in opened.history("inventory/models.py")] == ["x = 1\n"]
        assert opened.store.get(oid) is not None


@pytest.mark.parametrize("form", ["agent", "host"])
def test_a_refusal_names_the_path_the_way_the_call_did(ws, form):
    root = ws.resolve()
    (ws / "ctxnb.toml").write_text(
        f'[[mounts]]\nagent_prefix = "/workspace"\ncanonical_prefix = "{root}"\n'
    )
    (ws / ".env").write_text("TOKEN=x\n")
    path = "/workspace/.env" if form == "agent" else f"{root}/.env"
    payload = {
        "session_id": "s-p",
        "cwd": str(ws),
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": path},
    }
    result = run_hook("pre-tool-use", json.dumps(payload))
    out = json.loads(result.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert f"'{path}'" in out["permissionDecisionReason"]
    if form == "agent":
        assert str(root) not in result.stdout  # the host's layout stays out


def _in_parquet(ws: Path, contents: list[str]) -> list[str]:
    """Which of ``contents`` a reader of the store's Parquet files (no ctxnb) finds."""
    import pyarrow.dataset as ds

    files = [str(p) for p in (ws / ".ctxnb" / "store").glob("*/*.parquet")]
    found = set(ds.dataset(files).to_table(columns=["content"]).column(0).to_pylist())
    return [c for c in contents if c in found]


def _edit_in_hook_processes(ws: Path, payloads: Callable[..., dict[str, Any]], n: int) -> list:
    """``n`` Writes of inventory/models.py, each traced by its own ``ctxnb hook`` process."""
    main(["hook", "select-intent", "INT-001", "--session", "s-f", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    texts = [f"x = {i}  # edit {i}\n" for i in range(n)]
    for text in texts:
        models.write_text(text)
        post = payloads("post-write", ws, file_path=str(models), content=text)
        post["session_id"] = "s-f"
        post["tool_response"]["filePath"] = str(models)
        result = _subprocess("post-tool-use", post, dict(os.environ))
        assert (result.exit_code, result.stderr) == (0, "")
    return texts


def _wait_past(seconds: float) -> None:
    import time

    time.sleep(seconds)


def test_hook_edits_are_folded_into_parquet_by_the_next_hook_after_the_interval(
    ws, payloads, monkeypatch
):
    """Each hook is a process that commits inline and exits: no timer of its own
    outlives it. The first hook after the interval folds what the others left."""
    monkeypatch.setenv("CTXNB_FOLD_AFTER", "1.5")
    texts = _edit_in_hook_processes(ws, payloads, 3)
    _wait_past(1.6)
    more = _edit_in_hook_processes(ws, payloads, 1)
    assert _in_parquet(ws, texts) == texts
    assert more  # the fourth may wait for the next fold: it is not overdue yet


def test_hook_edits_are_folded_into_parquet_by_the_next_process_that_opens_the_store(
    ws, payloads, monkeypatch
):
    """A process that only opens the store (a notebook, an MCP server that stays up)
    folds the inline transactions older than the interval as it opens, before it
    closes anything; younger ones get its timer."""
    monkeypatch.setenv("CTXNB_FOLD_AFTER", "1.5")
    texts = _edit_in_hook_processes(ws, payloads, 3)
    _wait_past(1.6)
    probe = (
        "import os, sys\n"
        "from ctxnb.store.objectstore import ObjectStore\n"
        "store = ObjectStore(sys.argv[1], create=False)\n"
        "os._exit(0)  # no close(), which would fold whatever waits\n"
    )
    store = ws / ".ctxnb" / "store"
    subprocess.run([sys.executable, "-c", probe, str(store)], check=True, timeout=60)
    assert _in_parquet(ws, texts) == texts


def test_a_fold_interval_that_is_not_a_number_is_refused(monkeypatch):
    from ctxnb.errors import ConfigError
    from ctxnb.store._log import fold_after_seconds

    monkeypatch.setenv("CTXNB_FOLD_AFTER", "soon")
    with pytest.raises(ConfigError, match="CTXNB_FOLD_AFTER='soon'"):
        fold_after_seconds()
    monkeypatch.setenv("CTXNB_FOLD_AFTER", "off")
    assert fold_after_seconds() is None
    assert fold_after_seconds(2.0) == 2.0


def _parquet_contents(store: Path) -> set[str]:
    """Every ``content`` a pandas reader of the store's Parquet files (no ctxnb) finds;
    files being written (``.tmp-``) are not data."""
    import pandas as pd

    files = [p for p in store.glob("*/*.parquet") if not p.name.startswith(".tmp-")]
    if not files:
        return set()
    return set(pd.concat(pd.read_parquet(p, columns=["content"]) for p in files)["content"])


def _no_waiter(store: Path) -> bool:
    """Whether no process holds the fold waiter's lock (ctxnb.store._foldlater)."""
    import fcntl

    fd = os.open(store / "ctxnb-store.json", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _poll(what: Callable[[], bool], seconds: float = 60.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_hook_edits_reach_parquet_within_the_interval_with_no_process_after_them(
    ws, payloads, monkeypatch
):
    """Three edits, each traced by its own real ``ctxnb hook`` process that commits
    inline and exits; then nothing of ctxnb runs. The edits are in Parquet once the
    interval has passed: the first hook handed them to a waiting process, which folds
    them when due and exits."""
    monkeypatch.setenv("CTXNB_FOLD_AFTER", "1.5")
    main(["hook", "select-intent", "INT-001", "--session", "s-w", "-w", str(ws)])
    models = ws / "inventory" / "models.py"
    store = ws / ".ctxnb" / "store"
    hook = Path(sys.executable).with_name("ctxnb")
    env = dict(os.environ, PATH=f"{hook.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    texts = [f"x = {i}  # waited edit {i}\n" for i in range(3)]
    for text in texts:
        models.write_text(text)
        post = payloads("post-write", ws, file_path=str(models), content=text)
        post["session_id"] = "s-w"
        post["tool_response"]["filePath"] = str(models)
        proc = subprocess.run(
            [str(hook), "hook", "post-tool-use"],
            input=json.dumps(post).encode(),
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        # The hook's caller reads its output to the end: the waiter holds none of it.
        assert (proc.returncode, proc.stderr) == (0, b"")
    assert _poll(lambda: set(texts) <= _parquet_contents(store)), _parquet_contents(store)
    # The waiter leaves once nothing waits: no process is left behind.
    assert _poll(lambda: _no_waiter(store))
