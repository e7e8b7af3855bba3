"""An MCP client for tests: ctxnb's server started as a client starts it, sessions over
stdio, bounded waits, and readers of tool and resource results.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from _needs import has_module, require
from _paths import REPO

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client  # noqa: E402

T = TypeVar("T")


TIMEOUT = 60.0


INTENTS = """\
active_intents:
  - id: INT-INV
    name: Inventory maintenance
    status: active
    owned_scope:
      - inventory/**
    constraints:
      - Keep the public API of inventory/models.py
  - id: INT-OLD
    name: Finished work
    status: done
    owned_scope:
      - docs/**
"""


def run_async(fn: Callable[[], Awaitable[T]], timeout: float = TIMEOUT) -> T:
    """Run an async test body with a hard deadline."""

    async def main() -> T:
        with anyio.fail_after(timeout):
            return await fn()

    return anyio.run(main)


def _server_env() -> dict[str, str]:
    env = get_default_environment()
    env["PYTHONPATH"] = str(REPO)
    return env


def server_params(ws: Path, session: str = "mcp-test") -> StdioServerParameters:
    """``python -m ctxnb mcp serve WS`` with this checkout's ctxnb, as a client starts it."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "ctxnb", "mcp", "serve", str(ws), "--session", session],
        env=_server_env(),
        cwd=str(ws),
    )


@asynccontextmanager
async def stdio_session(
    ws: Path, errlog_path: Path, **client_kw: Any
) -> AsyncIterator[ClientSession]:
    params = server_params(ws)
    with open(errlog_path, "w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30, **client_kw) as s:
                await s.initialize()
                yield s


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _resource_text(result: types.ReadResourceResult) -> str:
    block = result.contents[0]
    assert isinstance(block, types.TextResourceContents)
    return block.text


def assert_decided(res: types.CallToolResult, target: Path, approve: bool) -> None:
    """A removal the user approved ran; one refused left the file and says why."""
    if approve:
        assert not res.is_error, _text(res)
        assert not target.exists()
    else:
        assert res.is_error and res.structured_content["error_code"] == "APPROVAL_REJECTED"
        assert target.exists()
