"""The Backend protocol: two operations, and the ``run_command`` arguments they share.

A door is handed a :class:`~ctxnb.tools.backend.Backend` and uses nothing beside it, so
the protocol must refuse half a backend, and the arguments :meth:`Backend.execute`
builds must leave the tool's defaults to the tool and pass a bad value on to be refused
(never quietly dropped to a default).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ctxnb.tools import Backend as FaceBackend
from ctxnb.tools.backend import Backend, ToolsBackend, run_command_args


class _CallOnly:
    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        return {"ok": True, "result": None}


class _Both(_CallOnly):
    def execute(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        shell: bool = False,
    ) -> dict[str, Any]:
        return self.call("run_command", run_command_args(command, cwd=cwd, shell=shell))


def test_an_object_with_both_operations_is_a_backend_and_half_of_one_is_not() -> None:
    assert isinstance(_Both(), Backend)
    # A door handed something that can call tools but not run commands would find out
    # at the agent's first command; the check refuses it up front.
    assert not isinstance(_CallOnly(), Backend)
    assert FaceBackend is Backend


def test_a_session_s_file_tools_are_not_a_backend(tmp_path: Path) -> None:
    # The tools' dispatch is what a backend answers with, not a backend: a door holding
    # raw tools would reach around the one seam a test or a remote workspace hands in.
    from ctxnb.workspace import Workspace

    (tmp_path / "a.txt").write_text("a\n")
    with Workspace.open(tmp_path) as ws:
        tools = ws.tools(ws.session("s"), caller="test")
        assert tools.dispatch("read_file", {"path": "a.txt"})["ok"]
        assert not isinstance(tools, Backend)


def test_run_command_args_leave_unset_options_to_the_tool() -> None:
    assert run_command_args("ls") == {"cmd": "ls", "shell": False}
    assert run_command_args("make", cwd="src", timeout=5, shell=True) == {
        "cmd": "make",
        "shell": True,
        "cwd": "src",
        "timeout": 5,
    }


@pytest.mark.parametrize(("key", "value"), [("timeout", 0), ("timeout", 0.0), ("cwd", "")])
def test_a_falsy_option_is_passed_on_to_be_judged_not_dropped(key: str, value: Any) -> None:
    # timeout=0 is out of the tool's range (it refuses it); dropping it would run the
    # command with the default timeout instead, without a word.
    assert run_command_args("ls", **{key: value})[key] == value


def test_the_in_process_backend_answers_what_dispatch_answers(tmp_path: Path) -> None:
    from types import MappingProxyType

    from ctxnb.workspace import Workspace

    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / ".env").write_text("TOKEN=generated-" + "x" * 8 + "\n")
    with Workspace.open(tmp_path) as ws:
        tools = ws.tools(ws.session("s"), caller="test")
        backend = ToolsBackend(tools)
        assert isinstance(backend, Backend)
        # A wire's arguments may be read-only; the backend hands dispatch its own copy.
        args = MappingProxyType({"path": "a.txt"})
        read = backend.call("read_file", args)
        assert read["ok"] and read["result"]["content"] == "a\n"
        assert dict(args) == {"path": "a.txt"}
        denied = backend.call("read_file", {"path": ".env"})
        assert not denied["ok"] and denied["error_code"] == "PATH_DENIED"
        # No governance, no run_command: a refusal in dispatch's shape, nothing run.
        ran = backend.execute("touch made.txt", shell=True)
        assert not ran["ok"] and {"error_code", "message"} <= set(ran)
        assert not (tmp_path / "made.txt").exists()
