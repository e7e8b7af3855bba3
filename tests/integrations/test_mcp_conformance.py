"""The official MCP conformance suite's general server scenarios against ``ctxnb mcp serve``.

The suite (``@modelcontextprotocol/conformance``, pinned in ``.ci/mcp-conformance``) is a
Node program; CI installs it with ``npm ci --prefix .ci/mcp-conformance``. Its other
server scenarios test the fixture tools of its own reference server (``add_numbers``,
images, progress …), which a workspace server does not have; the general ones below are
what every server must pass.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _needs import has_module, require
from _paths import REPO

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")


SUITE = REPO / ".ci" / "mcp-conformance" / "node_modules" / ".bin" / "conformance"
SCENARIOS = ["server-initialize", "ping", "tools-list", "resources-list", "prompts-list"]


@pytest.mark.slow
def test_general_server_scenarios_pass(http_server: dict, tmp_path: Path) -> None:  # noqa: F811
    require(SUITE.is_file(), "the MCP conformance suite (npm ci --prefix .ci/mcp-conformance)")
    for scenario in SCENARIOS:
        out = subprocess.run(
            [str(SUITE), "server", "--url", http_server["url"], "--scenario", scenario],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        report = out.stdout + out.stderr
        assert out.returncode == 0, f"{scenario}:\n{report}"
        assert "Passed: 1/1, 0 failed" in report, f"{scenario}:\n{report}"
