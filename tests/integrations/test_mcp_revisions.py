"""ctxnb's MCP server speaks both revisions: 2025-11-25 (the ``initialize`` handshake,
state per connection) and 2026-07-28 (stateless: no handshake, each request alone).

Every test talks to ``python -m ctxnb mcp serve`` with the MCP SDK's own clients, over
stdio and streamable HTTP: ``Client(mode="auto")`` discovers the server and speaks
2026-07-28, ``Client(mode="legacy")`` does the handshake.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import mcp_types as types  # noqa: E402
from _mcp_client import (  # noqa: E402
    _resource_text,
    _text,
    assert_decided,
    run_async,
    server_params,
)
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from ctxnb.integrations.mcp_server import URI_TRACE  # noqa: E402

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
MODELS = "inventory/models.py"


@asynccontextmanager
async def stdio_client_of(ws: Path, errlog: Path, mode: str, **kw: Any) -> AsyncIterator[Client]:
    with open(errlog, "w", encoding="utf-8") as log:
        transport = stdio_client(server_params(ws, "mcp-rev"), errlog=log)
        async with Client(transport, mode=mode, read_timeout_seconds=30, **kw) as client:
            yield client


async def _edit_args(c: Client, **extra: Any) -> dict[str, Any]:
    read = await c.call_tool("read_file", {"path": MODELS})
    assert not read.is_error, _text(read)
    res = read.structured_content["result"]
    return {
        "path": MODELS,
        "content": res["content"] + "\n# checked\n",
        "expected_sha256": res["sha256"],
        **extra,
    }


@pytest.mark.slow
def test_stateless_client_names_its_intent_on_each_change(gov_ws: Path, tmp_path: Path) -> None:
    async def body() -> None:
        async with stdio_client_of(gov_ws, tmp_path / "err.log", "auto") as c:
            assert c.protocol_version == MODERN
            tools = {t.name: t for t in (await c.list_tools()).tools}
            # No connection holds a selection: the mutating tools are listed, and each
            # takes the intent as an argument.
            assert "intent_id" in tools["write_file"].input_schema["properties"]
            assert "intent_id" in tools["run_command"].input_schema["properties"]
            assert "intent_id" not in tools["read_file"].input_schema["properties"]

            args = await _edit_args(c)
            refused = await c.call_tool("write_file", args)
            assert refused.structured_content["error_code"] == "NO_ACTIVE_INTENT"
            assert "intent_id" in refused.structured_content["required_action"]

            hs = await c.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            assert not hs.is_error and 'intent_id="INT-INV"' in _text(hs)
            # The selection did not outlive its request.
            again = await c.call_tool("write_file", args)
            assert again.structured_content["error_code"] == "NO_ACTIVE_INTENT"

            done = await c.call_tool("write_file", {**args, "intent_id": "INT-OLD"})
            assert done.structured_content["error_code"] == "INVALID_INTENT"
            unknown = await c.call_tool("write_file", {**args, "intent_id": "INT-NOPE"})
            assert unknown.structured_content["error_code"] == "INVALID_INTENT"
            outside = await c.call_tool(
                "write_file", {"path": "README.md", "content": "x\n", "intent_id": "INT-INV"}
            )
            assert outside.structured_content["error_code"] == "SCOPE_VIOLATION"
            with pytest.raises(MCPError) as bad:
                await c.call_tool("write_file", {**args, "intent_id": 7})
            assert bad.value.error.code == types.INVALID_PARAMS

            wrote = await c.call_tool("write_file", {**args, "intent_id": "INT-INV"})
            assert not wrote.is_error, _text(wrote)
            trace = json.loads(_resource_text(await c.read_resource(URI_TRACE)))
            assert trace[-1]["files"][0]["path"] == MODELS
            assert trace[-1]["metadata"]["intent_id"] == "INT-INV"

    run_async(body)
    assert (gov_ws / MODELS).read_text().endswith("# checked\n")


@pytest.mark.slow
def test_handshake_client_may_name_an_intent_for_one_call(gov_ws: Path, tmp_path: Path) -> None:
    async def body() -> None:
        async with stdio_client_of(gov_ws, tmp_path / "err.log", "legacy") as c:
            assert c.protocol_version == HANDSHAKE
            names = {t.name for t in (await c.list_tools()).tools}
            assert "write_file" not in names  # nothing selected on this connection yet
            args = await _edit_args(c)
            wrote = await c.call_tool("write_file", {**args, "intent_id": "INT-INV"})
            assert not wrote.is_error, _text(wrote)
            # The argument served that call only; the connection still has no intent.
            later = await c.call_tool("write_file", {"path": MODELS, "content": "y\n"})
            assert later.structured_content["error_code"] == "NO_ACTIVE_INTENT"

    run_async(body)


def _elicit(answers: list[bool], asked: list[str]) -> Any:
    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": answers.pop(0)})

    return on_elicit


@pytest.mark.slow
@pytest.mark.parametrize("approve", [True, False])
def test_stateless_approval_is_an_input_request_for_the_diff(
    gov_ws: Path, tmp_path: Path, approve: bool
) -> None:
    target = gov_ws / "inventory" / "report.py"
    asked: list[str] = []

    async def body() -> types.CallToolResult:
        async with stdio_client_of(
            gov_ws, tmp_path / "err.log", "auto", elicitation_callback=_elicit([approve], asked)
        ) as c:
            assert c.protocol_version == MODERN
            return await c.call_tool(
                "run_command", {"cmd": "rm inventory/report.py", "intent_id": "INT-INV"}
            )

    res = run_async(body)
    # The user was asked once, shown the diff of what the command did.
    assert len(asked) == 1
    assert "rm inventory/report.py" in asked[0] and "--- a/inventory/report.py" in asked[0]
    assert_decided(res, target, approve)
    audit = (gov_ws / ".ctxnb" / "audit.jsonl").read_text()
    assert "APPROVAL_PENDING" in audit  # the first round stopped, and says so


@pytest.mark.slow
def test_stateless_client_without_elicitation_is_refused(gov_ws: Path, tmp_path: Path) -> None:
    async def body() -> types.CallToolResult:
        async with stdio_client_of(gov_ws, tmp_path / "err.log", "auto") as c:
            return await c.call_tool(
                "run_command", {"cmd": "rm inventory/report.py", "intent_id": "INT-INV"}
            )

    res = run_async(body)
    assert res.structured_content["error_code"] == "DESTRUCTIVE_NEEDS_APPROVAL"
    assert (gov_ws / "inventory" / "report.py").exists()


@asynccontextmanager
async def asked_to_remove(
    ws: Path, errlog: Path
) -> AsyncIterator[tuple[Client, dict[str, Any], types.InputRequiredResult]]:
    """A stateless client whose ``rm inventory/report.py`` got its input request."""
    async with stdio_client_of(ws, errlog, "auto", elicitation_callback=_elicit([], [])) as c:
        cmd = {"cmd": "rm inventory/report.py", "intent_id": "INT-INV"}
        first = await c.session.call_tool("run_command", cmd, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        yield c, cmd, first


@pytest.mark.slow
def test_request_state_cannot_be_forged_or_moved_to_another_call(
    gov_ws: Path, tmp_path: Path
) -> None:
    """The state rides through the client: a made-up one, or one taken to other
    arguments, is refused, and nothing runs."""
    accept = types.ElicitResult(action="accept", content={"approve": True})

    async def body() -> None:
        async with asked_to_remove(gov_ws, tmp_path / "err.log") as (c, cmd, first):
            assert first.request_state and first.input_requests
            forged = json.dumps({"asked": "x", "answers": {}})
            for state, args in [
                (forged, cmd),
                (first.request_state[:-4] + "AAAA", cmd),
                (first.request_state, {**cmd, "cmd": "rm inventory/models.py"}),
            ]:
                with pytest.raises(MCPError) as e:
                    await c.session.call_tool(
                        "run_command",
                        args,
                        input_responses={"approval": accept},
                        request_state=state,
                        allow_input_required=True,
                    )
                assert e.value.error.code == types.INVALID_PARAMS
            # An answer without the state is no answer: the user is asked again.
            bare = await c.session.call_tool(
                "run_command", cmd, input_responses={"approval": accept}, allow_input_required=True
            )
            assert isinstance(bare, types.InputRequiredResult)

    run_async(body)
    assert (gov_ws / "inventory" / "report.py").exists()
    assert (gov_ws / "inventory" / "models.py").exists()


@pytest.mark.slow
@pytest.mark.parametrize("http_server", [("governed", [])], indirect=True)
def test_http_serves_both_revisions(http_server: dict[str, Any]) -> None:
    ws = http_server["ws"]

    async def body() -> None:
        async with Client(http_server["url"], mode="auto", read_timeout_seconds=30) as modern:
            assert modern.protocol_version == MODERN
            args = await _edit_args(modern, intent_id="INT-INV")
            wrote = await modern.call_tool("write_file", args)
            assert not wrote.is_error, _text(wrote)
        async with Client(http_server["url"], mode="legacy", read_timeout_seconds=30) as old:
            assert old.protocol_version == HANDSHAKE
            hs = await old.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            assert not hs.is_error
            ran = await old.call_tool("run_command", {"cmd": "ls inventory"})
            assert not ran.is_error, _text(ran)

    run_async(body)
    assert (ws / MODELS).read_text().endswith("# checked\n")


@pytest.mark.slow
def test_an_approval_is_spent_by_the_act_it_approved(gov_ws: Path, tmp_path: Path) -> None:
    """A state answered once cannot approve the same act again: replayed later (the file
    made anew), it carries no answer and the user is asked again."""
    accept = types.ElicitResult(action="accept", content={"approve": True})
    target = gov_ws / "inventory" / "report.py"
    kept = target.read_bytes()

    async def body() -> None:
        async with asked_to_remove(gov_ws, tmp_path / "err.log") as (c, cmd, first):
            answer = {"input_responses": {"approval": accept}, "request_state": first.request_state}
            done = await c.session.call_tool(
                "run_command", cmd, allow_input_required=True, **answer
            )
            assert isinstance(done, types.CallToolResult) and not done.is_error, done
            assert not target.exists()
            target.write_bytes(kept)  # the same file again: the same diff to delete it
            again = await c.session.call_tool(
                "run_command", cmd, allow_input_required=True, **answer
            )
            assert isinstance(again, types.InputRequiredResult)

    run_async(body)
    assert target.exists()
