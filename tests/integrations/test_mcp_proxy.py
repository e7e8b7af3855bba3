"""The governed proxy: ``ctxnb mcp serve`` re-exposing an outside server that lies about
itself, driven by the MCP SDK's own client over stdio in both revisions.

The outside server (``LIAR_SERVER``) runs as a real subprocess of ctxnb's server. Every
tool of it claims to be read-only; its names carry terminal escapes, a bidi override and
a generated token; its errors carry a token where a cut at 500 characters would fall. The
proxy must treat each claim as a claim (an intent is needed until a human marks the tool
read-only in ``ctxnb.toml``) and everything it says as untrusted text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _mcp_servers import INTENTS, LIAR_SERVER, _toml_list
from _needs import has_module, require

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import mcp_types as types  # noqa: E402
from _mcp_client import _text, run_async, server_params  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from ctxnb.govern import init_governance  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402

SECRET_PART = "Zx81Qw"
# What an escaped name looks like once listed: control characters as \\uXXXX escapes.
WIPE_SHOWN = "liar__wipe\\u001b[2K\\u000dlookup"
RAW_CONTROLS = ("\x1b", "\r", "\x07", "\u202e")
TRIAGE = {"intent_id": "INT-TRIAGE"}


@pytest.fixture
def proxy_ws(tmp_path: Path) -> dict[str, Path]:
    server = tmp_path / "liar_server.py"
    server.write_text(LIAR_SERVER)
    calls = tmp_path / "calls.jsonl"
    calls.touch()
    ws = copy_sample_workspace(tmp_path, name="governed")
    init_governance(ws)
    (ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    (ws / "ctxnb.toml").write_text(
        f"[mcp.servers.liar]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {_toml_list([str(server), str(calls)])}\n"
        # Every tool listed: these tests are about the proxy, not about the listing.
        '\n[adapters.mcp]\nexpose_registry = true\ntool_listing = "all"\n'
    )
    return {"ws": ws, "calls": calls, "errlog": tmp_path / "errlog.txt"}


def calls_made(setup: dict[str, Path]) -> list[dict[str, Any]]:
    return [json.loads(x) for x in setup["calls"].read_text().splitlines() if x]


@asynccontextmanager
async def client_of(setup: dict[str, Path], mode: str) -> AsyncIterator[Client]:
    with setup["errlog"].open("w") as errlog:
        transport = stdio_client(server_params(setup["ws"], "proxy"), errlog=errlog)
        async with Client(transport, mode=mode, read_timeout_seconds=60) as client:
            yield client


def _code(res: types.CallToolResult) -> str | None:
    return (res.structured_content or {}).get("error_code")


@pytest.mark.slow
def test_a_tool_s_own_read_only_claim_is_not_a_grant(proxy_ws: dict[str, Path]) -> None:
    async def body() -> None:
        async with client_of(proxy_ws, "legacy") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            # Listed as what ctxnb treats it as: a tool with side effects.
            assert tools["liar__lookup"].annotations.read_only_hint is False
            refused = await c.call_tool("liar__lookup", {"q": "x"})
            assert refused.is_error and _code(refused) == "NO_ACTIVE_INTENT", _text(refused)
            assert calls_made(proxy_ws) == []  # the outside server saw nothing

            assert not (await c.call_tool("select_active_intent", TRIAGE)).is_error
            done = await c.call_tool("liar__lookup", {"q": "x"})
            assert not done.is_error, _text(done)
            assert calls_made(proxy_ws) == [{"tool": "lookup", "args": {"q": "x"}}]

    run_async(body, timeout=120)


@pytest.mark.slow
def test_a_stateless_client_names_the_intent_of_a_proxied_call(
    proxy_ws: dict[str, Path],
) -> None:
    async def body() -> None:
        async with client_of(proxy_ws, "auto") as c:
            assert c.protocol_version == "2026-07-28"
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "intent_id" in tools["liar__lookup"].input_schema["properties"]
            refused = await c.call_tool("liar__lookup", {"q": "x"})
            assert _code(refused) == "NO_ACTIVE_INTENT", _text(refused)
            assert calls_made(proxy_ws) == []
            done = await c.call_tool("liar__lookup", {"q": "x", "intent_id": "INT-TRIAGE"})
            assert not done.is_error, _text(done)
            # The intent is ctxnb's: the outside server gets its own arguments only.
            assert calls_made(proxy_ws) == [{"tool": "lookup", "args": {"q": "x"}}]

    run_async(body, timeout=120)


@pytest.mark.slow
def test_outside_names_descriptions_and_errors_are_redacted_and_escaped(
    proxy_ws: dict[str, Path],
) -> None:
    async def body() -> None:
        async with client_of(proxy_ws, "legacy") as c:
            listed = [t for t in (await c.list_tools()).tools if t.name.startswith("liar__")]
            said = json.dumps([t.model_dump(mode="json") for t in listed], ensure_ascii=False)
            assert SECRET_PART not in said
            for raw in RAW_CONTROLS:
                assert raw not in said, repr(raw)
            names = {t.name for t in listed}
            assert WIPE_SHOWN in names
            assert "liar__key-[REDACTED:github-token]" in names
            wipe = next(t for t in listed if t.name == WIPE_SHOWN)
            assert "\\u001b]0;ok\\u0007 \\u202eexe.txt" in (wipe.description or "")

            assert not (await c.call_tool("select_active_intent", TRIAGE)).is_error
            # The shown name calls the tool by its own name.
            assert not (await c.call_tool(WIPE_SHOWN, {"q": "y"})).is_error
            assert calls_made(proxy_ws)[-1]["tool"] == "wipe\x1b[2K\rlookup"

            # An error is redacted whole, then cut: no part of the token survives the cut.
            for tool in ("liar__fail", "liar__crash"):
                res = await c.call_tool(tool, {"q": "z"})
                text = _text(res) + json.dumps(res.structured_content)
                assert res.is_error, tool
                assert SECRET_PART not in text, (tool, text)
                assert "\x1b" not in text, tool
                assert "[REDACTED:github-token]" in text, (tool, text)
                assert len(_text(res)) < 1_500, tool

    run_async(body, timeout=120)
