"""A command through a real MCP stdio client under a ``[[mounts]]`` entry (issue #49): it
runs at the agent's path in the real bubblewrap sandbox, and nothing the client gets back
(text content or structured content, results and refusals) names the host directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _mcp_client import run_async, stdio_session
from _needs import needs
from _sandbox_agent import AGENT, assert_no_host_path, mounted_ws

from ctxnb.sandbox.plan import find_bwrap

pytestmark = needs(find_bwrap() is not None, "bubblewrap (bwrap)")


def _answer(res: Any) -> dict[str, Any]:
    """All the client got: the text blocks and the structured content."""
    texts = [getattr(b, "text", "") for b in res.content]
    return {"texts": texts, "structured": res.structured_content, "error": res.is_error}


def test_mcp_command_runs_at_the_agent_path_and_never_names_the_host(tmp_path: Path) -> None:
    root = mounted_ws((tmp_path / "host-project").resolve())
    calls: list[dict[str, Any]] = [
        {"cmd": "pwd"},
        {"cmd": f"cat {AGENT}/inventory/stock.txt"},
        {"cmd": "pwd", "cwd": f"{AGENT}/inventory"},
        {"cmd": f"echo 'pears 2' > {AGENT}/inventory/pears.txt; echo x > docs/n.md", "shell": True},
        {"cmd": "ls", "cwd": f"{AGENT}/.env"},
        {"cmd": "ls", "cwd": f"{AGENT}/../../etc"},
        {"cmd": "cat /proc/self/mountinfo /proc/1/cmdline"},
        {"cmd": f"echo {root}/inventory", "shell": True},
    ]

    async def body() -> list[dict[str, Any]]:
        async with stdio_session(root, tmp_path / "err.log") as s:
            sel = await s.call_tool("select_active_intent", {"intent_id": "INT-001"})
            assert not sel.is_error, sel
            return [_answer(await s.call_tool("run_command", c)) for c in calls]

    answers = run_async(body)
    for answer in answers:
        assert_no_host_path(answer, root)
    pwd, cat, sub, write, denied, traversal = answers[:6]
    assert pwd["structured"]["result"]["stdout"] == f"{AGENT}\n", pwd
    assert cat["structured"]["result"]["stdout"] == "apples 3\n", cat
    assert sub["structured"]["result"]["stdout"] == f"{AGENT}/inventory\n", sub
    effects = write["structured"]["result"]["effects"]
    assert [c["path"] for c in effects["changed"]] == ["inventory/pears.txt"], write
    assert [d["path"] for d in effects["dropped"]] == ["docs/n.md"], write
    assert (root / "inventory" / "pears.txt").read_text() == "pears 2\n"
    for refused in (denied, traversal):
        assert refused["error"] and refused["structured"]["error_code"] == "PATH_DENIED"
    assert denied["structured"]["details"]["path"] == f"{AGENT}/.env"
    assert f"{AGENT}/.env" in json.dumps(denied["texts"])
