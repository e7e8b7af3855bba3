"""Every door writes ``conversations[].url``, in one documented scheme.

A change made through ctxnb's own tools (the API, MCP, ACP, A2A, live runs) names the
session whose chat the store keeps, ``urn:ctxnb:conversation:<session id>``; a change
Claude Code made names its transcript (``file://``). Tried through the API and through a
real MCP client over stdio.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from _mcp_client import run_async, stdio_session

from ctxnb import Workspace


def _urls(root: Path) -> list[str]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [
        c.get("url", "")
        for line in text.splitlines()
        if line.strip()
        for f in json.loads(line)["files"]
        for c in f["conversations"]
    ]


def test_an_api_change_names_its_session_as_its_conversation(gov_ws: Path) -> None:
    ws = Workspace.open(gov_ws)
    session = ws.session("review/42 one")  # a name that needs escaping in a URN
    tools = ws.tools(session, caller="api-test")
    tools.dispatch("select_active_intent", {"intent_id": "INT-INV"})
    read = tools.read_file("inventory/models.py")
    new = read.content + "# x\n"
    assert tools.write_file("inventory/models.py", new, expected_sha256=read.sha256).success
    ws.close()
    (url,) = _urls(gov_ws)
    assert url == "urn:ctxnb:conversation:review%2F42%20one"
    assert unquote(url.rsplit(":", 1)[1]) == session.session_id


def test_an_mcp_change_names_its_conversation(gov_ws: Path, tmp_path: Path) -> None:
    async def body() -> Any:
        async with stdio_session(gov_ws, tmp_path / "err.log") as s:
            await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            read = await s.call_tool("read_file", {"path": "inventory/models.py"})
            result = read.structured_content["result"]
            args = {
                "path": "inventory/models.py",
                "content": result["content"] + "# y\n",
                "expected_sha256": result["sha256"],
            }
            return await s.call_tool("write_file", args)

    res = run_async(body)
    assert not res.is_error, res
    (url,) = _urls(gov_ws)
    assert url.startswith("urn:ctxnb:conversation:") and len(url) > len("urn:ctxnb:conversation:")
    record = json.loads((gov_ws / ".orchestration" / "agent_trace.jsonl").read_text())
    assert unquote(url.rsplit(":", 1)[1]) == record["metadata"]["session_id"]
