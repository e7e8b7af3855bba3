"""A scripted model behind a real OpenAI-compatible HTTP endpoint on 127.0.0.1.

Tests, CI and tutorials drive live runs with it: the agent talks to it through
litellm's real request path (HTTP, JSON, OpenAI's chat-completions shape), and it
answers with recorded responses, one per request, in order. It reports usage the way
a provider with prefix caching does: ``prompt_tokens`` counted from the messages it
received, ``cached_tokens`` those of the leading messages that repeat the previous
request's. Every request body is kept in :attr:`ScriptedModelServer.requests`, so a test
can check what ctxnb sent.

Example:
    >>> import json, urllib.request
    >>> with ScriptedModelServer([{"content": "hi", "commands": ["ls"]}]) as server:
    ...     body = json.dumps({"model": "scripted", "messages": [
    ...         {"role": "user", "content": "hello"}]}).encode()
    ...     req = urllib.request.Request(server.url + "/chat/completions", body,
    ...                                  {"Content-Type": "application/json"})
    ...     reply = json.load(urllib.request.urlopen(req))
    >>> msg = reply["choices"][0]["message"]
    >>> msg["content"], json.loads(msg["tool_calls"][0]["function"]["arguments"])
    ('hi', {'command': 'ls'})
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..llm.tokens import TokenCounter, resolve_token_counter
from ._chatserver import ChatServer

__all__ = ["ScriptedModelServer", "load_script"]


def load_script(path: str | Path) -> list[dict[str, Any]]:
    """Recorded responses from a JSON file: a list of ``{"content", "commands"}``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ValueError(f"{path}: a script is a JSON list of responses (objects)")
    return data


class ScriptedModelServer(ChatServer):
    """An OpenAI-compatible chat-completions server answering from a script.

    Args:
        responses: the answers in order; each is ``{"content": text or None,
            "commands": [shell commands]}`` (each command becomes a ``bash`` tool call,
            the shape mini-swe-agent's tool-calling model expects).
        token_counter: counts the prompt and completion tokens it reports.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`); ``url`` is
    the base URL to pass as ``api_base``, and :attr:`model_args` all a run needs
    (``run_task(root, task, **server.model_args)``). After the script is used up, every
    request gets a final answer that submits.

    A response may say what it relies on having read: ``"needs": text`` (a line of an
    earlier output). When no tool output or user message of the request shows that
    text (a strategy elided it), the model first gets it back, as an agent would, and
    answers the response at the next request: with ``recall --search WORDS`` when a
    placeholder offers recall, else with the response's ``"reread"`` command (``cat
    calc.py``). So a script measures what masking costs in re-reads, and what recall
    saves, while its answers stay fixed. :attr:`recoveries` counts both kinds.
    """

    thread_name = "ctxnb-scripted-model"

    def __init__(
        self,
        responses: Sequence[dict[str, Any]],
        *,
        token_counter: TokenCounter | str | None = None,
    ) -> None:
        self.responses = list(responses)
        self.counter = resolve_token_counter(token_counter)
        self.requests: list[dict[str, Any]] = []
        #: The answers that got an elided text back: ``{"recall": n, "reread": n}``.
        self.recoveries: dict[str, int] = {"recall": 0, "reread": 0}
        self._step = 0  # the script's next response (recoveries do not advance it)
        self._recovering = False
        self._prev: list[str] = []
        self._lock = threading.Lock()
        super().__init__()

    @property
    def model_args(self) -> dict[str, str]:
        """``model``, ``api_base`` and ``api_key`` for :func:`~ctxnb.live.run_task`."""
        return {"model": "openai/ctxnb-scripted", "api_base": self.url, "api_key": "unused"}

    def _recovery(self, script: dict[str, Any], body: dict[str, Any]) -> dict[str, Any] | None:
        """The answer that gets back what ``script`` needs, or None when it is in view."""
        needs = script.get("needs")
        if not needs:
            return None
        seen = "\n".join(
            str(m.get("content") or "")
            for m in body.get("messages", [])
            if m.get("role") in ("tool", "user", "system")
        )
        if needs in seen:
            return None
        if "`recall --search" in seen:
            words = " ".join(re.findall(r"\w+", needs))
            self.recoveries["recall"] += 1
            return {"content": "Get that output back.", "commands": [f"recall --search {words}"]}
        if script.get("reread"):
            self.recoveries["reread"] += 1
            return {"content": "Read it again.", "commands": [script["reread"]]}
        return None

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
            script = (
                self.responses[self._step]
                if self._step < len(self.responses)
                else {
                    "content": "Done.",
                    "commands": ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
                }
            )
            recovery = None if self._recovering else self._recovery(script, body)
            self._recovering = recovery is not None
            if recovery is None:
                self._step += 1
            else:
                script = recovery
            messages = [
                json.dumps(m, ensure_ascii=False, sort_keys=True) for m in body.get("messages", [])
            ]
            prompt = sum(self.counter.count(m) for m in messages)
            # Cached: the leading messages equal to the previous request's. Whole
            # messages, not characters: a character match into a fresh random id
            # would make the count depend on chance.
            same = 0
            for old, new in zip(self._prev, messages, strict=False):
                if old != new:
                    break
                same += 1
            self._prev = messages
            cached = sum(self.counter.count(m) for m in messages[:same])
        calls = [
            {
                "id": f"call_{n}_{k}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
            }
            for k, cmd in enumerate(script.get("commands") or [])
        ]
        content = script.get("content")
        completion = self.counter.count(str(content or "") + json.dumps(calls))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-scripted-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "scripted")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
