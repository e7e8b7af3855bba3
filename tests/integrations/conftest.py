"""Fixtures of the integration tests: sample workspaces, governed or not, and ctxnb's MCP
server over streamable HTTP in a subprocess.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require
from _paths import REPO

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

from _mcp_client import INTENTS, _free_port, _stop  # noqa: E402

from ctxnb.govern import init_governance  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402

# -- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture
def plain_ws(tmp_path: Path) -> Path:
    return copy_sample_workspace(tmp_path, name="plain")


@pytest.fixture
def gov_ws(tmp_path: Path) -> Path:
    ws = copy_sample_workspace(tmp_path, name="governed")
    init_governance(ws)
    (ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS, encoding="utf-8")
    return ws


@pytest.fixture
def http_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``ctxnb mcp serve WS --http PORT`` in a subprocess; params: (workspace, extra args)."""
    ws, extra = request.param if hasattr(request, "param") else (None, [])
    if ws == "governed":
        ws = copy_sample_workspace(tmp_path, name="governed")
        init_governance(ws)
        (ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS, encoding="utf-8")
    ws = ws or copy_sample_workspace(tmp_path)
    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "w", encoding="utf-8") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxnb", "mcp", "serve", str(ws), "--http", str(port), *extra],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=errlog,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}: {log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"server did not listen on {port} in 30s: {log.read_text()}")
                time.sleep(0.1)
        yield {"url": f"http://127.0.0.1:{port}/mcp", "port": port, "ws": ws, "log": log}
    finally:
        _stop(proc)
