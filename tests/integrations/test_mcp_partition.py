"""Write partitioning through MCP: a real client over stdio selecting an intent whose
scope a live notebook session holds is refused, naming both; once that session closes,
the same call succeeds."""

from __future__ import annotations

from pathlib import Path

from _mcp_client import INTENTS, _text, run_async, stdio_session

from ctxnb import Workspace
from ctxnb.govern import init_governance


def test_mcp_select_intent_is_refused_while_a_live_session_holds_its_scope(tmp_path: Path):
    root = tmp_path / "ws"
    (root / "inventory").mkdir(parents=True)
    (root / "inventory" / "models.py").write_text("LEVEL = 5\n")
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    ws = Workspace.open(root)
    ws.index()
    notebook = ws.session("notebook")
    held = ws.tools(notebook).dispatch("select_active_intent", {"intent_id": "INT-INV"})
    assert held["ok"]

    async def body() -> None:
        async with stdio_session(root, tmp_path / "err.log") as s:
            res = await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            assert res.is_error
            err = res.structured_content
            assert err is not None and err["error_code"] == "SCOPE_OVERLAP"
            for name in ("INT-INV", "notebook", "mcp-test", "inventory/models.py"):
                assert name in err["message"]
            args = {"path": "inventory/models.py", "content": "LEVEL = 6\n"}
            await s.call_tool("read_file", {"path": "inventory/models.py"})
            write = await s.call_tool("write_file", args)
            assert write.is_error  # not selected: nothing written
            assert (root / "inventory" / "models.py").read_text() == "LEVEL = 5\n"

            notebook.close()  # the notebook's agent is done: its scope is free
            ok = await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            assert not ok.is_error, _text(ok)
            assert not (await s.call_tool("write_file", args)).is_error
        assert (root / "inventory" / "models.py").read_text() == "LEVEL = 6\n"

    run_async(body)
