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


def test_the_settings_review_model_resolves_a_conflict_for_an_mcp_client(
    gov_ws: Path, tmp_path: Path
) -> None:
    # [merge] review_model: the server's own review backend, the scripted model over HTTP.
    import json
    import sys

    from _paths import REPO
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

    from ctxnb._util.merge3 import merge3
    from ctxnb.live import ScriptedModelServer
    from ctxnb.tools.merging import review_request

    require(has_module("litellm"), "litellm (ctxnb[live])")
    target = gov_ws / PATH
    base = target.read_text()
    ours = base.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = base.replace("reorder_level: int = 5", "reorder_level: int = 7")
    c = review_request(PATH, merge3(base, ours, theirs))["conflicts"][0]
    answer = {"path": PATH, "start_line": c["start_line"], "end_line": c["end_line"],
              "text": "    reorder_level: int = 10  # the agent's, kept by review\n"}  # fmt: skip
    script = [{"content": json.dumps({"resolutions": [answer]}), "commands": []}]
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    with ScriptedModelServer(script) as model:
        (gov_ws / "ctxnb.toml").write_text(
            f'[merge]\nreview_model = "openai/ctxnb-scripted"\nreview_api_base = "{model.url}"\n'
            'review_api_key_env = "CTXNB_TEST_MODEL_KEY"\n'
        )
        env = {**get_default_environment(), "PYTHONPATH": str(REPO),
               "CTXNB_TEST_MODEL_KEY": "unused"}  # fmt: skip
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ctxnb", "mcp", "serve", str(gov_ws)],
            env=env, cwd=str(gov_ws),
        )  # fmt: skip

        async def body() -> tuple[Any, Any]:
            with open(tmp_path / "err.log", "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(
                        read, write, read_timeout_seconds=60, elicitation_callback=on_elicit
                    ) as s:
                        await s.initialize()
                        await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
                        await s.call_tool("read_file", {"path": PATH})
                        target.write_text(theirs)
                        p = await s.call_tool("propose_merge", {"path": PATH, "content": ours})
                        pid = p.structured_content["result"]["proposal_id"]
                        return p, await s.call_tool("apply_merge", {"proposal_id": pid})

        proposal, applied = run_async(body, timeout=120)
        sent = model.requests
    got = proposal.structured_content["result"]
    assert got["ready"] and got["resolved_by"] == "openai/ctxnb-scripted", got
    assert len(sent) == 1 and "reorder_level: int = 7" in json.dumps(sent[0])
    assert not applied.is_error, _text(applied)
    assert "reorder_level: int = 10  # the agent's, kept by review\n" in target.read_text()
    assert "+    reorder_level: int = 10  # the agent's" in asked[0]
