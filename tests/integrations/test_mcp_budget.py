"""``[budget]`` at the MCP door: a real client against ``ctxnb mcp serve`` over stdio gets
``budget_remaining`` with every result and ``BUDGET_EXCEEDED`` (with no content) for a
read past the limit; a restarted server on the same session keeps the count.
"""

from __future__ import annotations

import json
from pathlib import Path

from _mcp_client import run_async, stdio_session

from ctxnb.samples import copy_sample_workspace


def test_mcp_results_carry_the_remaining_budget_and_a_read_past_it_is_refused(
    tmp_path: Path,
) -> None:
    ws = copy_sample_workspace(tmp_path)
    (ws / "ctxnb.toml").write_text("[budget]\nread_bytes = 250\n")
    (ws / "inventory" / "a.py").write_text("a" * 99 + "\n")
    (ws / "inventory" / "b.py").write_text("b" * 199 + "\n")

    async def first() -> None:
        async with stdio_session(ws, tmp_path / "err1.log") as s:
            ok = await s.call_tool("read_file", {"path": "inventory/b.py"})
            assert not ok.is_error
            assert ok.structured_content["budget_remaining"] == {"read_bytes": 50}

    async def second() -> None:
        # A new server process, same session: 50 bytes left, a.py has 100.
        async with stdio_session(ws, tmp_path / "err2.log") as s:
            res = await s.call_tool("read_file", {"path": "inventory/a.py"})
            assert res.is_error
            body = res.structured_content
            assert body["error_code"] == "BUDGET_EXCEEDED" and body["recoverable"] is False
            assert body["budget_remaining"] == {"read_bytes": 50}
            assert "a" * 20 not in json.dumps(body) + "".join(
                getattr(c, "text", "") for c in res.content
            )

    run_async(first)
    run_async(second)
