"""What the records of Claude Code's changes keep: the prompt, the trace, the lines.

A Write whose answer holds neither the file before nor a patch is diffed against the
store's newest version, so only the lines it changed are Claude Code's.

Claude Code's prompt and trace context reach the records of the changes made for them.

Claude Code names the user's prompt in every hook payload (``prompt_id``) and exports its
W3C trace context (``TRACEPARENT``, ``TRACESTATE``) to what it runs. The records of an
edit (made by the post-tool-use hook process) and of a confined Bash command (made by
``ctxnb sandbox exec`` inside that command) keep both; forged or malformed values from
the agent's side are dropped, never written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _needs import needs
from _paths import REPO, TESTS

from ctxnb.cli.app import main
from ctxnb.govern import init_governance
from ctxnb.govern.tracecontext import carried_metadata, prompt_id, trace_context
from ctxnb.samples import copy_sample_workspace
from ctxnb.sandbox.plan import find_bwrap

HOOKS = TESTS / "data" / "claude-code-hooks"
INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory rules
    status: active
    owned_scope: ["inventory/**"]
"""
SID = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
PROMPT = "7d0c6a52-5e1b-4c3f-8a9d-0e1f2a3b4c5d"
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = copy_sample_workspace(tmp_path)
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    main(["hook", "select-intent", "INT-001", "--session", SID, "-w", str(root)])
    return root


def _hook(event: str, payload: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        timeout=120,
    )


def _post_write(root: Path, **extra: Any) -> dict[str, Any]:
    target = root / "inventory" / "export.py"
    target.write_text("import csv\n")
    data = json.loads((HOOKS / "post-write.json").read_text())
    data.update(cwd=str(root), session_id=SID, **extra)
    data["tool_input"] = {"file_path": str(target), "content": "import csv\n"}
    data["tool_response"]["filePath"] = str(target)
    return data


def _records(root: Path) -> list[dict[str, Any]]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_an_edit_keeps_the_prompt_and_the_trace_it_was_made_in(ws: Path) -> None:
    out = _hook(
        "post-tool-use", _post_write(ws, prompt_id=PROMPT), TRACEPARENT=PARENT, TRACESTATE=STATE
    )
    assert out.returncode == 0, out.stderr
    (record,) = _records(ws)
    meta = record["metadata"]
    assert meta["prompt_id"] == PROMPT
    assert meta["trace_context"] == {"traceparent": PARENT, "tracestate": STATE}
    assert main(["trace", "verify", str(ws)]) == 0


@pytest.mark.parametrize(
    ("prompt", "parent"),
    [
        ("\x1b]0;pwned\x07", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n"),
        ("a" * 200, "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        (["x"], "00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ("", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
    ],
)
def test_a_forged_prompt_or_trace_is_dropped_not_written(
    ws: Path, prompt: Any, parent: str
) -> None:
    out = _hook("post-tool-use", _post_write(ws, prompt_id=prompt), TRACEPARENT=parent)
    assert out.returncode == 0, out.stderr
    (record,) = _records(ws)
    assert "prompt_id" not in record["metadata"]
    assert "trace_context" not in record["metadata"]


def test_a_tracestate_out_of_grammar_is_dropped_with_the_parent_kept() -> None:
    assert trace_context({"TRACEPARENT": PARENT, "TRACESTATE": "a=b,=c"}) == {"traceparent": PARENT}
    many = ",".join(f"k{i}=v" for i in range(33))
    assert "tracestate" not in trace_context({"TRACEPARENT": PARENT, "TRACESTATE": many})
    assert trace_context({"TRACESTATE": STATE}) == {}  # no parent, no state
    assert prompt_id("req_01HXYZ:42") == "req_01HXYZ:42"
    assert carried_metadata({}, None) == {}


@needs(find_bwrap() is not None, "bubblewrap (bwrap)")
def test_a_confined_command_keeps_the_prompt_and_the_trace_it_ran_in(ws: Path) -> None:
    data = json.loads((HOOKS / "pre-bash.json").read_text())
    data.update(cwd=str(ws), session_id=SID, prompt_id=PROMPT)
    data["tool_input"] = {"command": "printf 'X = 1\\n' >> inventory/models.py", "description": "x"}
    out = _hook("pre-tool-use", data)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)["hookSpecificOutput"]
    command = answer["updatedInput"]["command"]
    assert f"--prompt-id {PROMPT}" in command
    # Claude Code runs it with bash -c and exports its trace context to it.
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRACEPARENT": PARENT}
    ran = subprocess.run(
        ["bash", "-c", command], cwd=ws, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    (record,) = _records(ws)
    assert record["metadata"]["tool"] == "Bash"
    assert record["metadata"]["prompt_id"] == PROMPT
    assert record["metadata"]["trace_context"] == {"traceparent": PARENT}


def test_a_write_without_its_patch_is_diffed_against_the_stored_version(ws: Path) -> None:
    """Claude Code's answer to a Write may hold neither ``originalFile`` nor a patch; the
    store still knows what the file held, so only the changed line is Claude Code's."""
    assert main(["index", str(ws)]) == 0
    target = ws / "inventory" / "models.py"
    lines = target.read_text().splitlines(keepends=True)
    changed = next(i for i, line in enumerate(lines) if "reorder_level" in line)
    lines[changed] = lines[changed].replace("5", "7")
    target.write_text("".join(lines))
    data = json.loads((HOOKS / "post-write.json").read_text())
    data.update(cwd=str(ws), session_id=SID)
    data["tool_input"] = {"file_path": str(target), "content": "".join(lines)}
    data["tool_response"] = {"filePath": str(target), "success": True}
    out = _hook("post-tool-use", data)
    assert out.returncode == 0, out.stderr
    (record,) = _records(ws)
    ranges = record["files"][0]["conversations"][0]["ranges"]
    assert [(r["start_line"], r["end_line"]) for r in ranges] == [(changed + 1, changed + 1)]
    why = subprocess.run(
        [sys.executable, "-m", "ctxnb", "why", "inventory/models.py:1", "-w", str(ws)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert "no trace record wrote this line" in why.stdout, why.stdout + why.stderr
