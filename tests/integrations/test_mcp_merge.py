"""A stale write resolved over MCP: the SDK's own client over stdio asks for a merge
proposal, and ``apply_merge`` asks the user by elicitation with the merged file's diff;
only a yes writes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import mcp_types as types  # noqa: E402
from _mcp_client import _text, run_async, stdio_session  # noqa: E402

pytestmark = pytest.mark.slow

PATH = "inventory/models.py"


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "refused"])
def test_a_stale_write_is_merged_over_mcp_only_when_the_user_says_yes(
    gov_ws: Path, tmp_path: Path, approve: bool
) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    target = gov_ws / PATH
    base = target.read_text()
    ours = base.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = base.replace("at or below its reorder level", "at or under its reorder level")

    async def body() -> tuple[Any, Any, Any]:
        async with stdio_session(gov_ws, tmp_path / "err.log", elicitation_callback=on_elicit) as s:
            await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            read = await s.call_tool("read_file", {"path": PATH})
            sha = read.structured_content["result"]["sha256"]
            target.write_text(theirs)  # a person's editor, meanwhile
            stale = await s.call_tool(
                "write_file", {"path": PATH, "content": ours, "expected_sha256": sha}
            )
            proposal = await s.call_tool("propose_merge", {"path": PATH, "content": ours})
            pid = proposal.structured_content["result"]["proposal_id"]
            applied = await s.call_tool("apply_merge", {"proposal_id": pid})
            return stale, proposal, applied

    stale, proposal, applied = run_async(body)
    assert stale.is_error and stale.structured_content["error_code"] == "STALE_FILE"
    assert "propose_merge" in stale.structured_content["required_action"]
    assert not proposal.is_error and proposal.structured_content["result"]["ready"] is True
    (question,) = asked
    assert "merge proposal" in question and "+    reorder_level: int = 10" in question
    if approve:
        assert not applied.is_error, _text(applied)
        assert target.read_text() == ours.replace("at or below", "at or under")
    else:
        assert applied.is_error
        assert applied.structured_content["error_code"] == "APPROVAL_REJECTED"
        assert target.read_text() == theirs
