"""tools/list under the client's intent, and ``search_tools`` over every tool.

In-process against :class:`McpBackend` with a real governed workspace and a real outside
MCP server (the tickets server of test_mcp_registry, over stdio through the registry).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import mcp_types as types  # noqa: E402
from _mcp_servers import INTENTS, TICKETS_SERVER, _toml_list  # noqa: E402
from _paths import REPO  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from ctxnb.govern import init_governance  # noqa: E402
from ctxnb.integrations.mcp_server import McpBackend  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402

MUTATING = {"write_file", "apply_patch", "run_command", "restore_file", "apply_merge"}


class Ctx:
    """What the SDK hands a handler: a session that knows its connection."""

    def __init__(self) -> None:
        self.session = type("Session", (), {})()
        self.session._connection = type("Connection", (), {})()


@pytest.fixture(autouse=True)
def _bm25_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXNB_EMBEDDER", "none")  # the ranking is not what these test


def _workspace(tmp_path: Path, listing: str | None = None) -> Path:
    server = tmp_path / "tickets_server.py"
    server.write_text(TICKETS_SERVER)
    (tmp_path / "calls.jsonl").touch()
    ws = copy_sample_workspace(tmp_path, name="governed")
    init_governance(ws)
    (ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    adapters = "[adapters.mcp]\nexpose_registry = true\n"
    if listing:
        adapters += f'tool_listing = "{listing}"\n'
    (ws / "ctxnb.toml").write_text(
        f"""{adapters}
[mcp.servers.tickets]
command = {json.dumps(sys.executable)}
args = {_toml_list([str(server), str(tmp_path / "calls.jsonl")])}
env = {{ PYTHONPATH = {json.dumps(str(REPO))} }}
"""
    )
    return ws


def _names(backend: McpBackend, ctx: Any) -> set[str]:
    return {t.name for t in backend.list_tools(ctx)}


def test_the_list_follows_each_client_s_intent(tmp_path: Path) -> None:
    one, two = Ctx(), Ctx()
    with McpBackend(_workspace(tmp_path)) as b:
        every = {s["name"] for s in b.tools.tool_schemas("mcp")}
        assert {"tickets__open_ticket", "tickets__find_ticket"} <= every
        before = _names(b, one)
        assert {"read_file", "search_tools", "select_active_intent", "activate"} <= before
        assert not before & MUTATING  # they would be refused with NO_ACTIVE_INTENT
        assert not {n for n in before if "__" in n}  # outside tools: found by search
        assert not b.call_tool("select_active_intent", {"intent_id": "INT-TRIAGE"}, one).is_error
        after = _names(b, one)
        assert MUTATING <= after and not {n for n in after if "__" in n}
        assert _names(b, two) == before  # the other client has selected nothing


def test_search_tools_finds_unlisted_tools_and_they_can_be_called(tmp_path: Path) -> None:
    ctx = Ctx()
    with McpBackend(_workspace(tmp_path)) as b:
        res = b.call_tool("search_tools", {"query": "open a ticket for a bug", "k": 3}, ctx)
        assert not res.is_error
        hits = res.structured_content["result"]["tools"]
        assert hits[0]["name"] == "tickets__open_ticket"
        assert hits[0]["inputSchema"]["type"] == "object"
        assert "tickets__open_ticket" not in _names(b, ctx)
        # Unlisted is not unreachable: the call goes through the governed path (and is
        # refused there for want of an intent, not as an unknown tool).
        res = b.call_tool("tickets__open_ticket", {"title": "login fails"}, ctx)
        assert res.structured_content["error_code"] == "NO_ACTIVE_INTENT"
        with pytest.raises(MCPError) as e:
            b.call_tool("search_tools", {"query": "x", "k": 0}, ctx)
        assert e.value.code == types.INVALID_PARAMS


def test_listing_all_shows_every_tool(tmp_path: Path) -> None:
    with McpBackend(_workspace(tmp_path, "all")) as b:
        every = {s["name"] for s in b.tools.tool_schemas("mcp")}
        assert _names(b, Ctx()) == every


def test_bad_listing_value_is_a_config_error(tmp_path: Path) -> None:
    from ctxnb.config import load_config
    from ctxnb.errors import ConfigError

    (tmp_path / "ctxnb.toml").write_text('[adapters.mcp]\ntool_listing = "some"\n')
    with pytest.raises(ConfigError, match="tool_listing"):
        load_config(tmp_path)


def test_the_embedder_is_loaded_at_the_first_search_not_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading MiniLM takes seconds: a server starting, or ``ctxnb mcp tools``, waits
    for none of it; ``search_tools`` takes the process-wide embedder when first asked."""
    from ctxnb.retrieval.embedding import DEFAULT, default_embedder

    monkeypatch.setenv("CTXNB_EMBEDDER", "lexical")  # an embedder that loads no model
    with McpBackend(_workspace(tmp_path)) as b:
        assert b.discovery._embedder is DEFAULT
        b.list_tools(Ctx())
        assert b.discovery._embedder is DEFAULT
        res = b.call_tool("search_tools", {"query": "read a file", "k": 2}, Ctx())
        assert not res.is_error
        assert b.discovery._embedder is default_embedder()
        assert b.discovery._embedder.name == "lexical"
