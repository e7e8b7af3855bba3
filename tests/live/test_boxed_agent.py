"""The live agent's loop in its own sandbox: real bubblewrap, a real scripted model
reached by name through the real proxy, the loop's commands governed on the host.

The loop's process must see the workspace read-only (a write from its view fails with
EROFS), while the edit it asks for through the governed ``run_command`` lands.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from _agent_workspace import make_workspace, require_live_agent

from ctxnb.errors import ConfigError
from ctxnb.integrations.live_agent import LiveAgentSettings, LiveSession
from ctxnb.live import ScriptedModelServer
from ctxnb.live.run import SUBMIT


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


class Probe:
    """The run's events; at the first command, writes from the loop's own view."""

    def __init__(self, live: LiveSession, ws: Path) -> None:
        self.live, self.ws = live, ws
        self.errno: int | None = None
        self.mounts = ""
        self.commands: list[str] = []

    def cancelled(self) -> bool:
        return False

    def message(self, text: str) -> None:
        pass

    def command_started(self, command: str) -> Any:
        self.commands.append(command)
        status = self.live.last_sandbox_status
        assert status is not None and status["isolated"] is True
        loops = [
            p
            for p in _descendants(status["pid"])
            if b"ctxnb.live.boxed" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        assert loops, "the loop's process is not under the sandbox's"
        loop = loops[-1]
        self.mounts = Path(f"/proc/{loop}/mountinfo").read_text()
        try:  # the loop's own view of the workspace
            with open(f"/proc/{loop}/root{self.ws}/direct.txt", "w") as f:
                f.write("written around governance\n")
        except OSError as e:
            self.errno = e.errno
        return None

    def command_finished(self, handle: Any, command: str, answer: dict[str, Any]) -> None:
        pass


def test_the_loop_cannot_write_the_workspace_but_its_governed_edit_lands(tmp_path, monkeypatch):
    require_live_agent()
    ws = make_workspace(tmp_path)
    monkeypatch.setenv("CTXNB_TEST_MODEL_KEY", "unused")
    script = [
        {"content": "Fixing add().", "commands": ["sed -i 's/return a - b/return a + b/' calc.py"]},
        {"content": "Done.", "commands": [f"echo {SUBMIT}"]},
    ]
    with ScriptedModelServer(script) as server:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        settings = LiveAgentSettings.resolve(
            str(ws),
            model=server.model_args["model"],
            api_base=f"http://model.test:{port}/v1",  # by name, through the proxy
            api_key_env="CTXNB_TEST_MODEL_KEY",
            sandbox=True,
        )
        live = LiveSession.start(ws, settings, caller="test", approver=None)
        live.proxy_hosts = {"model.test": "127.0.0.1"}
        probe = Probe(live, ws)
        try:
            info = live.work(settings, "Fix add() in calc.py", probe)
        finally:
            live.workspace.close()
        requests = len(server.requests)
    assert info.get("exit_status") == "Submitted", info
    assert requests >= 2  # the loop reached the model, by name, through the proxy
    assert probe.errno == errno.EROFS
    assert not (ws / "direct.txt").exists()
    assert f" {ws} " in probe.mounts and any(
        f" {ws} " in line and " ro," in line for line in probe.mounts.splitlines()
    )
    # The governed edit crossed the boundary and landed, traced.
    assert "return a + b" in (ws / "calc.py").read_text()
    trace = (ws / ".orchestration" / "agent_trace.jsonl").read_text()
    assert "calc.py" in trace
    assert probe.commands[0].startswith("sed -i")


def test_production_refuses_a_loop_without_isolation(tmp_path):
    ws = make_workspace(tmp_path)
    (ws / "ctxnb.toml").write_text("[sandbox]\nproduction = true\n")
    for flag in (False, None):  # --no-sandbox, or no flag and agent = true unset
        with pytest.raises(ConfigError, match="production = true refuses"):
            LiveAgentSettings.resolve(str(ws), model="openai/x", sandbox=flag)
    assert LiveAgentSettings.resolve(str(ws), model="openai/x", sandbox=True).sandbox is True


def test_agent_true_turns_the_sandbox_on_by_default(tmp_path):
    ws = make_workspace(tmp_path)
    (ws / "ctxnb.toml").write_text("[sandbox]\nagent = true\n")
    s = LiveAgentSettings.resolve(str(ws), model="openai/x")
    assert s.sandbox is True and s.sandbox_status()["isolated"] is True
    off = LiveAgentSettings.resolve(str(ws), model="openai/x", sandbox=False)
    assert off.sandbox_status() == {
        "isolated": False,
        "backend": "none",
        "pid": os.getpid(),
        "reason": "the agent loop runs in the server's process (--no-sandbox)",
    }


def test_a_live_task_run_in_the_sandbox_solves_the_sample_task_through_ctxnb(tmp_path):
    """run_task(sandbox=True): the loop in bubblewrap, the model reached by name through
    the proxy, every command governed on the host, the verdict and the usage as without."""
    require_live_agent()
    from ctxnb.live import run_task, sample_task
    from ctxnb.live.run import sample_script

    task = sample_task(tmp_path)
    with ScriptedModelServer(sample_script()) as server:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        result = run_task(
            tmp_path,
            task,
            model=server.model_args["model"],
            api_base=f"http://model.test:{port}/v1",
            api_key="unused",
            retries=1,
            sandbox=True,
            proxy_hosts={"model.test": "127.0.0.1"},
        )
        requests = len(server.requests)
    assert result.passed and result.exit_status == "Submitted", result.verdict
    assert "return a + b" in (tmp_path / "calc.py").read_text()
    assert requests == len(result.calls) == 5
    assert result.prompt_tokens > 0 and result.cached_tokens > 0
    t = result.trajectory
    assert [s.action.tool for s in t.steps] == ["bash", "bash", "bash", "bash", "submit"]
    assert t.steps[2].files[0].path == "calc.py" and t.steps[2].files[0].op == "edit"


def test_production_refuses_a_live_task_run_without_the_sandbox(tmp_path):
    require_live_agent()
    from ctxnb.live import run_task, sample_task

    task = sample_task(tmp_path)
    (tmp_path / "ctxnb.toml").write_text("[sandbox]\nproduction = true\n")
    with pytest.raises(ConfigError, match="production = true refuses"):
        run_task(tmp_path, task, model="openai/x", sandbox=False)
    assert "return a - b" in (tmp_path / "calc.py").read_text()
