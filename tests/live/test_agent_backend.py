"""The live agent (ACP's, A2A's and ``run_task``'s) reaches the workspace only through
the :class:`~ctxnb.tools.backend.Backend` it is handed.

A custom backend is the seam: a real scripted model over HTTP asks for commands, the
real mini-swe-agent loop runs them, and each must arrive at the backend's ``execute``
(a ``recall`` at its ``call``) and nowhere else: a command that would write a file
leaves no file when the backend does not run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ctxnb.llm.prices import PriceTable
from ctxnb.tools.backend import Backend

# The scripted model costs what a known one does (an unpriced model warns, an error here).
PRICES = PriceTable.default().with_prices(
    {"ctxnb-scripted": PriceTable.default().get("gpt-5-mini")}
)

pytestmark = pytest.mark.usefixtures("live_deps")


class _Recording:
    """A Backend that runs nothing: it answers ``echo`` with its words, records every
    operation, and refuses everything else as governance would."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        self.seen.append(("call", (tool, dict(args))))
        return {"ok": True, "result": f"recalled {dict(args)}"}

    def execute(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        shell: bool = False,
    ) -> dict[str, Any]:
        self.seen.append(("execute", (command, cwd, timeout, shell)))
        if command.startswith("echo ") and ">" not in command:
            return {"ok": True, "result": {"stdout": command[5:] + "\n", "returncode": 0}}
        return {
            "ok": False,
            "error_code": "SCOPE_VIOLATION",
            "message": "not in this test's scope",
            "recoverable": True,
            "required_action": "",
        }


def test_every_command_of_the_live_agent_goes_to_the_backend_it_is_handed(
    tmp_path: Path,
) -> None:
    from ctxnb.live import ScriptedModelServer
    from ctxnb.live.run import SUBMIT, build_agent, run_agent
    from ctxnb.strategies import KeepAll
    from ctxnb.workspace import Workspace

    backend = _Recording()
    assert isinstance(backend, Backend)
    script = [
        {"content": "Write around it.", "commands": ["echo around > around.txt"]},
        {"content": "Say hello.", "commands": ["echo hello"]},
        {"content": "Done.", "commands": [f"echo {SUBMIT}"]},
    ]
    with Workspace.open(tmp_path) as ws, ScriptedModelServer(script) as server:
        session = ws.session("live", system_prompt="test")
        session.add_turn("user", "say hello")
        agent, turns, _ = build_agent(
            session,
            backend,
            strategy=KeepAll(),
            command_timeout=7,
            prices=PRICES,
            **server.model_args,
        )
        info = run_agent(agent, "say hello", retries=1)
    assert info.get("exit_status") == "Submitted", info
    assert backend.seen == [
        ("execute", ("echo around > around.txt", None, 7, True)),
        ("execute", ("echo hello", None, 7, True)),
        ("execute", (f"echo {SUBMIT}", None, 7, True)),
    ]
    # The refused write never ran: nothing reached the disk beside the backend.
    assert not (tmp_path / "around.txt").exists()
    # What the backend answered is what the model was shown.
    assert turns[0]["commands"][0][1]["exception_info"].startswith("SCOPE_VIOLATION")
    assert turns[1]["commands"][0][1]["output"] == "hello\n"


def test_a_recall_goes_to_the_backend_s_call(tmp_path: Path) -> None:
    from ctxnb.live import ScriptedModelServer
    from ctxnb.live.run import SUBMIT, build_agent, run_agent
    from ctxnb.strategies import ObservationMasking, WithRecall
    from ctxnb.workspace import Workspace

    backend = _Recording()
    script = [
        {"content": "Look back.", "commands": ["recall --search add"]},
        {"content": "Done.", "commands": [f"echo {SUBMIT}"]},
    ]
    with Workspace.open(tmp_path) as ws, ScriptedModelServer(script) as server:
        session = ws.session("live", system_prompt="test")
        session.add_turn("user", "look back")
        agent, turns, _ = build_agent(
            session,
            backend,
            strategy=WithRecall(ObservationMasking(1)),
            prices=PRICES,
            **server.model_args,
        )
        run_agent(agent, "look back", retries=1)
    assert backend.seen[0] == ("call", ("recall", {"query": "add"}))
    assert turns[0]["commands"][0][1]["output"] == "recalled {'query': 'add'}"
