"""A context as a chat transcript, in OpenAI's and Anthropic's shapes.

The transcript follows the context's layout: the system part (system prompt and pinned
items), then -- in the order they entered -- user and assistant turns, the assistant's
tool calls with their results right after them, files as user messages, and the blocks
of the metadata log (the lines new or changed at that point) as user messages. Because
the layout is append-only, the messages of one step are a prefix of the next step's
messages unless a strategy changed an earlier item, which is what providers' prompt
caches reward. (A context recorded before the metadata log ends with the whole
metadata pool as one user message.)

Example:
    >>> from ctxnb.context import Context, ContextItem, Section, Segment
    >>> call = ContextItem("t1", "toolcall", "run(cmd=ls)", 9, "<tool abc run(cmd=ls)>\\na.py\\n"
    ...     "</tool abc>\\n", "h", tool="run", args='{"cmd":"ls"}')
    >>> ctx = Context((Section("active", call.text, 9, (call,)),), 1, {}, None,
    ...     chat=({"role": "user", "content": "List files."},),
    ...     layout=(Segment("turn", 0, "", 3, "a"), Segment("item", 0, call.text, 9, "b")))
    >>> [m["role"] for m in ctx.to_messages("openai")]
    ['user', 'assistant', 'tool']
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal

from ..hashing import sha256_hex

if TYPE_CHECKING:
    from ._model import Context, ContextItem

__all__ = ["to_messages"]

_EPHEMERAL = {"type": "ephemeral"}


def call_id(item: ContextItem) -> str:
    """A tool call id both providers accept (letters, digits, ``_``; at most 40 chars)."""
    return "call_" + sha256_hex(item.id)[:24]


def tool_name(item: ContextItem) -> str:
    """The tool's name as both providers accept it (``[A-Za-z0-9_-]{1,64}``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", item.tool or "")[:64] or "tool"


def to_messages(
    ctx: Context, format: Literal["openai", "anthropic"], *, cache: bool = True
) -> list[dict[str, Any]] | dict[str, Any]:
    """See :meth:`Context.to_messages`."""
    if format not in ("openai", "anthropic"):
        raise ValueError(f"unknown message format {format!r}; use 'openai' or 'anthropic'")
    if not ctx.layout:
        return _legacy(ctx, format)
    items = ctx.items
    system_parts: list[str] = []
    body: list[tuple[str, Any]] = []  # (kind, payload) in reading order
    for seg in ctx.layout:
        if seg.head:
            if seg.text:
                system_parts.append(seg.text)
            continue
        if seg.kind == "item":
            body.append(("item", items[seg.index]))
        elif seg.kind == "turn":
            body.append(("turn", ctx.chat[seg.index]))
        else:
            body.append(("metadata" if seg.stable else "tail", seg.text))
    system = "".join(system_parts)
    if format == "openai":
        return _openai(system, body)
    return _anthropic(system, body, cache=cache)


def _openai(system: str, body: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for kind, payload in body:
        if kind == "turn":
            role = payload["role"]
            if role in ("user", "assistant", "system"):
                msgs.append({"role": role, "content": payload["content"]})
            else:  # a tool turn with no call to answer: the model reads it as user text
                msgs.append({"role": "user", "content": payload["content"]})
        elif kind == "item" and payload.type == "toolcall":
            last = msgs[-1] if msgs else None
            # A tool call joins the assistant message just before it (the step that
            # made it); otherwise it gets an assistant message of its own.
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                msgs.append(last)
            last.setdefault("tool_calls", []).append(
                {
                    "id": call_id(payload),
                    "type": "function",
                    "function": {"name": tool_name(payload), "arguments": payload.args or "{}"},
                }
            )
            msgs.append({"role": "tool", "tool_call_id": call_id(payload), "content": payload.text})
        elif kind == "item":
            msgs.append({"role": "user", "content": payload.text})
        else:
            msgs.append({"role": "user", "content": payload})
    return msgs


def _anthropic(system: str, body: list[tuple[str, Any]], *, cache: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        # Anthropic wants alternating roles; blocks of one role in a row share a message.
        if msgs and msgs[-1]["role"] == role:
            msgs[-1]["content"].append(block)
        else:
            msgs.append({"role": role, "content": [block]})

    system_blocks: list[dict[str, Any]] = []
    if system:
        system_blocks.append({"type": "text", "text": system})
    last_stable: dict[str, Any] | None = None
    for kind, payload in body:
        if kind == "turn":
            role = payload["role"] if payload["role"] in ("user", "assistant") else "user"
            if payload["content"]:
                block = {"type": "text", "text": payload["content"]}
                add(role, block)
                last_stable = block
        elif kind == "item" and payload.type == "toolcall":
            add(
                "assistant",
                {
                    "type": "tool_use",
                    "id": call_id(payload),
                    "name": tool_name(payload),
                    "input": _json_object(payload.args),
                },
            )
            block = {
                "type": "tool_result",
                "tool_use_id": call_id(payload),
                "content": payload.text,
            }
            add("user", block)
            last_stable = block
        elif kind == "item":
            block = {"type": "text", "text": payload.text}
            add("user", block)
            last_stable = block
        else:
            block = {"type": "text", "text": payload}
            add("user", block)
            if kind == "metadata":  # a block of the metadata log: it stays, too
                last_stable = block
    if msgs and msgs[0]["role"] != "user":
        # Anthropic wants the user to speak first; a session whose first entries are tool
        # calls (an intent selected before the task) gets an explicit opening.
        msgs.insert(0, {"role": "user", "content": [{"type": "text", "text": "(session start)"}]})
    if cache:
        # Two of the four breakpoints Anthropic allows: the end of the system part (shared
        # by every step) and the end of the stable transcript (shared with the next step).
        if system_blocks:
            system_blocks[-1]["cache_control"] = dict(_EPHEMERAL)
        if last_stable is not None:
            last_stable["cache_control"] = dict(_EPHEMERAL)
    return {"system": system_blocks, "messages": msgs}


def _json_object(args: str | None) -> dict[str, Any]:
    if not args:
        return {}
    value = json.loads(args)
    return value if isinstance(value, dict) else {"value": value}


def _legacy(ctx: Context, format: str) -> list[dict[str, Any]] | dict[str, Any]:
    """A context built by hand from sections: one system text, then the chat."""
    system = "\n".join(
        s.text for s in ctx.sections if s.name in ("system", "metadata", "active") and s.text
    )
    turns = [
        {"role": t["role"], "content": t["content"]}
        for t in ctx.chat
        if t.get("role") in ("user", "assistant")
    ]
    if format == "openai":
        return [{"role": "system", "content": system}, *turns]
    return {"system": system, "messages": turns}
