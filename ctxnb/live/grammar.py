"""One tool call per reply, for a model that has no tool format of its own.

A small local model (SmolLM2-135M-Instruct) has a chat template with no place for tools,
and llama.cpp's OpenAI endpoint refuses a grammar together with ``tools`` ("Cannot use
custom grammar constraints with tools"). So the offered tools become a grammar, and the
conversation is told in that grammar's terms:

- :func:`tool_call_grammar`: a GBNF grammar whose every sentence is exactly one call of
  one offered tool, as compact JSON (``{"name":"bash","arguments":{"command":"ls"}}``):
  the model cannot answer in prose, call a name it was not offered, or make two calls.
- :func:`plain_messages`: the OpenAI messages with each earlier call written the way the
  grammar makes the model write it, and each tool result as a user turn, which every
  chat template knows.
- :func:`parse_call`: the reply back into an OpenAI ``tool_calls`` entry; None for a
  reply that is not one whole call (cut short by ``max_tokens``), which the caller
  returns as plain text so that the agent reports the format error.

Only string arguments are supported (``bash`` has one); a tool with any other kind is
refused with the reason, never called with arguments it did not declare.

Example:
    >>> bash = {"type": "function", "function": {"name": "bash", "parameters": {
    ...     "type": "object", "properties": {"command": {"type": "string"}},
    ...     "required": ["command"]}}}
    >>> print(tool_call_grammar([bash], max_chars=80).splitlines()[0])
    root ::= call0
    >>> parse_call('{"name":"bash","arguments":{"command":"ls -a"}}', [bash])
    {'name': 'bash', 'arguments': {'command': 'ls -a'}}
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["parse_call", "plain_messages", "tool_call_grammar", "tool_signatures"]

# OpenAI's own rule for function names; it also keeps a name safe inside a GBNF literal.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def tool_signatures(tools: Sequence[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each offered tool's name and its string arguments, in the order they are written.

    Raises:
        ConfigError: a tool the grammar cannot express (a bad name, a non-string
            argument, an optional one, none at all).
    """
    out: list[tuple[str, list[str]]] = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(
                f"tool {name!r}: a tool needs a name of letters, digits, '_' or '-' "
                "(at most 64) to be offered to a model through a grammar"
            )
        params = fn.get("parameters") or {}  # type: ignore[union-attr]
        props = params.get("properties") or {}
        required = list(params.get("required") or [])
        if not props or sorted(required) != sorted(props):
            raise ConfigError(
                f"tool {name!r}: every argument must be required for a grammar-forced "
                f"call (arguments {sorted(props)}, required {sorted(required)})"
            )
        for arg, spec in props.items():
            if not isinstance(spec, dict) or spec.get("type") != "string":
                raise ConfigError(
                    f"tool {name!r}: argument {arg!r} is not a string; the local model's "
                    "grammar writes string arguments only (bash's `command` is one)"
                )
        out.append((name, list(props)))
    if not out:
        raise ConfigError("no tool to call: the grammar needs at least one offered tool")
    return out


def _literal(text: str) -> str:
    """A GBNF string literal that matches ``text`` exactly."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tool_call_grammar(tools: Sequence[dict[str, Any]], *, max_chars: int = 200) -> str:
    """A GBNF grammar: one call of one of ``tools``, as compact JSON, and nothing else.

    ``max_chars`` bounds each argument's length, so that a whole call fits in the
    reply's token budget instead of being cut off in the middle of a string.
    """
    if max_chars < 1:
        raise ConfigError(f"max_chars must be at least 1 (got {max_chars})")
    rules = []
    for k, (name, args) in enumerate(tool_signatures(tools)):
        parts = [_literal('{"name":' + json.dumps(name) + ',"arguments":{')]
        for i, arg in enumerate(args):
            parts.append(_literal(("," if i else "") + json.dumps(arg) + ":"))
            parts.append("str")
        parts.append(_literal("}}"))
        rules.append(f"call{k} ::= " + " ".join(parts))
    calls = " | ".join(f"call{k}" for k in range(len(rules)))
    return "\n".join(
        [
            f"root ::= {calls}",
            *rules,
            # A JSON string without raw control characters; a newline is written \n.
            f'str ::= "\\"" chr{{1,{max_chars}}} "\\""',
            'chr ::= [^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bnrt] | "u" [0-9a-fA-F]{4})',
        ]
    )


def _written(call: dict[str, Any]) -> str:
    """An OpenAI tool call as the grammar has the model write it."""
    fn = call.get("function") or {}
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError:
        args = {}
    body = {"name": fn.get("name"), "arguments": args if isinstance(args, dict) else {}}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def plain_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with no tool roles or fields: earlier calls as the text the grammar
    made the model write, their results as user turns."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        if isinstance(content, list):  # content parts: the text of each
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        text = str(content or "")
        if role == "assistant":
            calls = [_written(c) for c in m.get("tool_calls") or ()]
            text = "\n".join([t for t in [text] if t] + calls)
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            out.append({"role": "user", "content": text})
        else:
            out.append({"role": role, "content": text})
    return out


def parse_call(text: str, tools: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The call ``text`` makes, as ``{"name", "arguments"}``; None when it is not exactly
    one whole call of an offered tool with its declared arguments."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or set(data) != {"name", "arguments"}:
        return None
    args = data["arguments"]
    for name, wanted in tool_signatures(tools):
        if data["name"] == name:
            ok = isinstance(args, dict) and list(args) == wanted
            ok = ok and all(isinstance(v, str) for v in args.values())
            return {"name": name, "arguments": args} if ok else None
    return None
