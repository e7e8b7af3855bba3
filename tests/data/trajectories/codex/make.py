# ruff: noqa: E501  (the lines of a rollout are long, and read best whole)
"""Write the Codex rollout fixture beside this script, from the shapes of Codex's types.

No public Codex rollout with a licence that allows vendoring it was at hand, so this
fixture is generated: each line follows the serde shape of ``RolloutLine`` in openai/codex
(``codex-rs/protocol/src/protocol.rs``: ``RolloutItem`` tagged ``type``/``payload``;
``SessionMetaLine``, ``TurnContextItem``, ``CompactedItem``, ``EventMsg::TokenCount``
with ``TokenUsageInfo``) and ``ResponseItem`` in ``codex-rs/protocol/src/models.rs``
(``message``, ``reasoning``, ``function_call`` with ``arguments`` as a JSON string,
``function_call_output``, ``custom_tool_call`` / ``custom_tool_call_output`` for the
freeform ``apply_patch``, ``local_shell_call``, ``ghost_snapshot``, ``web_search_call``).
The tool names and output envelopes are those of the Codex CLI 0.5x–0.10x (``shell``
with an argv, ``exec_command`` with ``cmd``, the ``Exit code: …\\nOutput:\\n`` and
``Process exited with code …\\nOutput:\\n`` envelopes). Token counts are invented but
consistent: ``total_token_usage`` is the running sum of ``last_token_usage``, and
Codex's repeated report at the end of a turn is there too.

Run: ``python tests/data/trajectories/codex/make.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name(
    "rollout-2026-03-14T09-12-05-019ce1a2-7b3c-7d40-9e51-2f6a8c0d4b17.jsonl"
)
SID = "019ce1a2-7b3c-7d40-9e51-2f6a8c0d4b17"
CWD = "/home/dev/proj"
lines: list[dict] = []
clock = [0]
total = {
    "input_tokens": 0,
    "cached_input_tokens": 0,
    "output_tokens": 0,
    "reasoning_output_tokens": 0,
    "total_tokens": 0,
}


def ts() -> str:
    clock[0] += 1
    s = clock[0]
    return f"2026-03-14T09:{12 + s // 60:02d}:{s % 60:02d}.{(s * 137) % 1000:03d}Z"


def line(kind: str, payload: dict) -> None:
    lines.append({"timestamp": ts(), "type": kind, "payload": payload})


def item(payload: dict) -> None:
    line("response_item", payload)


def msg(role: str, text: str) -> None:
    kind = "output_text" if role == "assistant" else "input_text"
    item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


def reasoning(text: str) -> None:
    item(
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}],
            "content": None,
            "encrypted_content": "gAAAAABo" + "x" * 40,
        }
    )


def call(name: str, args: dict, cid: str) -> None:
    item({"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": cid})


def out(cid: str, text: str) -> None:
    item({"type": "function_call_output", "call_id": cid, "output": text})


def tokens(inp: int, cached: int, outp: int, reason: int, repeat: bool = False) -> None:
    last = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": outp,
        "reasoning_output_tokens": reason,
        "total_tokens": inp + outp,
    }
    for k, v in last.items():
        total[k] += v
    info = {
        "total_token_usage": dict(total),
        "last_token_usage": last,
        "model_context_window": 272000,
    }
    limits = {"primary": {"used_percent": 3.0, "window_minutes": 300, "resets_at": 1773490000}}
    line("event_msg", {"type": "token_count", "info": info, "rate_limits": limits})
    if repeat:
        line("event_msg", {"type": "token_count", "info": info, "rate_limits": limits})


def turn_context() -> None:
    line(
        "turn_context",
        {
            "cwd": CWD,
            "approval_policy": "on-request",
            "sandbox_policy": {"type": "workspace-write", "network_access": False},
            "model": "gpt-5-codex",
            "effort": "medium",
            "summary": "auto",
        },
    )


CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

line(
    "session_meta",
    {
        "id": SID,
        "timestamp": "2026-03-14T09:12:05.001Z",
        "cwd": CWD,
        "originator": "codex_cli_rs",
        "cli_version": "0.58.0",
        "source": "cli",
        "model_provider": "openai",
        "base_instructions": {
            "text": "You are Codex, a coding agent. Keep changes minimal and run the tests."
        },
        "git": {
            "commit_hash": "4b1f0c2",
            "branch": "main",
            "repository_url": "https://example.invalid/proj.git",
        },
    },
)
msg(
    "developer",
    "<permissions instructions>Filesystem sandboxing: workspace-write. Approvals: on-request.</permissions instructions>",
)
msg(
    "user",
    "<environment_context>\n  <cwd>/home/dev/proj</cwd>\n  <shell>bash</shell>\n</environment_context>",
)
msg("user", "The test for add fails. Fix calc.py so that the tests pass.")
line(
    "event_msg",
    {
        "type": "user_message",
        "message": "The test for add fails. Fix calc.py so that the tests pass.",
        "images": [],
    },
)
turn_context()
line("event_msg", {"type": "token_count", "info": None, "rate_limits": None})
reasoning("**Looking at the code and the test**")
msg("assistant", "I'll look at calc.py and its test first.")
call(
    "shell",
    {"command": ["bash", "-lc", "cat calc.py"], "workdir": CWD, "timeout_ms": 10000},
    "call_A1",
)
call(
    "shell",
    {"command": ["bash", "-lc", "sed -n '1,5p' tests/test_calc.py"], "workdir": CWD},
    "call_A2",
)
tokens(6120, 0, 184, 96)
out("call_A1", json.dumps({"output": CALC, "metadata": {"exit_code": 0, "duration_seconds": 0.0}}))
line(
    "event_msg", {"type": "exec_command_end", "call_id": "call_A1", "exit_code": 0, "stdout": CALC}
)
out("call_A2", json.dumps({"output": TEST, "metadata": {"exit_code": 0, "duration_seconds": 0.0}}))
turn_context()
reasoning("**Fixing the sign in add**")
item(
    {
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_A3",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch\n",
    }
)
tokens(6590, 6016, 141, 64)
item(
    {
        "type": "custom_tool_call_output",
        "call_id": "call_A3",
        "output": json.dumps(
            {
                "output": "Success. Updated the following files:\nM calc.py\n",
                "metadata": {"exit_code": 0, "duration_seconds": 0.0},
            }
        ),
    }
)
line(
    "event_msg",
    {
        "type": "patch_apply_end",
        "call_id": "call_A3",
        "stdout": "M calc.py\n",
        "stderr": "",
        "success": True,
    },
)
turn_context()
call(
    "exec_command",
    {"cmd": "python -m pytest -q", "workdir": CWD, "yield_time_ms": 10000},
    "call_A4",
)
tokens(6802, 6528, 38, 0)
out(
    "call_A4",
    "Chunk ID: 5c1e\nWall time: 0.4120 seconds\nProcess exited with code 0\nOutput:\n.                                                                        [100%]\n1 passed in 0.02s\n",
)
item(
    {
        "type": "ghost_snapshot",
        "ghost_commit": {
            "id": "9f2e1d0",
            "parent": "4b1f0c2",
            "preexisting_untracked_files": [],
            "preexisting_untracked_dirs": [],
        },
    }
)
turn_context()
msg("assistant", "Fixed `add` in calc.py: it subtracted instead of adding. The test passes.")
tokens(6955, 6784, 27, 0, repeat=True)
line(
    "event_msg",
    {
        "type": "agent_message",
        "message": "Fixed `add` in calc.py: it subtracted instead of adding. The test passes.",
    },
)
line("event_msg", {"type": "task_complete", "last_agent_message": "Fixed `add` in calc.py."})
# A second turn: a new prompt, a compaction, a new file, a search on the web.
msg("user", "Add a sub function with a test.")
turn_context()
line(
    "compacted",
    {
        "message": "Summary: calc.py had add() subtracting; fixed to a + b; tests pass (1 passed). Next: add sub() with a test.",
        "replacement_history": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Add a sub function with a test."}],
            }
        ],
    },
)
line("event_msg", {"type": "context_compacted"})
msg("user", "<environment_context>\n  <cwd>/home/dev/proj</cwd>\n</environment_context>")
reasoning("**Adding sub and its test**")
item(
    {
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "python operator.sub"},
    }
)
item(
    {
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_B1",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** Update File: calc.py\n@@\n def mul(a, b):\n     return a * b\n+\n+\n+def sub(a, b):\n+    return a - b\n*** Add File: tests/test_sub.py\n+from calc import sub\n+\n+\n+def test_sub():\n+    assert sub(5, 3) == 2\n*** End Patch\n",
    }
)
tokens(2410, 0, 212, 88)
item(
    {
        "type": "custom_tool_call_output",
        "call_id": "call_B1",
        "output": json.dumps(
            {
                "output": "Success. Updated the following files:\nM calc.py\nA tests/test_sub.py\n",
                "metadata": {"exit_code": 0, "duration_seconds": 0.0},
            }
        ),
    }
)
turn_context()
item(
    {
        "type": "local_shell_call",
        "call_id": "call_B2",
        "status": "completed",
        "action": {
            "type": "exec",
            "command": ["nl", "-ba", "calc.py"],
            "timeout_ms": 10000,
            "working_directory": CWD,
        },
    }
)
tokens(2700, 2304, 31, 0)
out(
    "call_B2",
    json.dumps(
        {
            "output": "".join(
                f"{n:6d}\t{t}\n"
                for n, t in enumerate(
                    CALC.replace("a - b", "a + b", 1).split("\n")[:-1]
                    + ["", "", "def sub(a, b):", "    return a - b"],
                    1,
                )
            ),
            "metadata": {"exit_code": 0, "duration_seconds": 0.0},
        }
    ),
)
turn_context()
call(
    "update_plan",
    {
        "plan": [
            {"step": "Add sub", "status": "completed"},
            {"step": "Test sub", "status": "in_progress"},
        ]
    },
    "call_B3",
)
tokens(2790, 2688, 40, 0)
out("call_B3", "Plan updated")
turn_context()
msg("assistant", "Added `sub` to calc.py and tests/test_sub.py.")
tokens(2850, 2688, 19, 0, repeat=True)

OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
print(OUT.name, len(lines), "lines")
