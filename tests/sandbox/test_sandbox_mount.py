"""Commands under a ``[[mounts]]`` entry run at the agent's path (issue #49).

The workspace is bound at the mount's agent prefix inside the real bubblewrap sandbox:
``pwd`` prints ``/workspace``, absolute agent paths work, the host directory does not
exist there. The overlay, the masks and the protected directories hold at the agent
path. Every answer ``dispatch`` gives for a command (its result, a refusal, an error)
names agent paths, never the host directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _needs import needs
from _sandbox_agent import AGENT, assert_no_host_path, fingerprint, mounted_ws

from ctxnb import Workspace
from ctxnb.access.pathrules import in_agent_terms
from ctxnb.errors import SandboxError
from ctxnb.sandbox.plan import check_mount_point, find_bwrap

pytestmark = needs(find_bwrap() is not None, "bubblewrap (bwrap)")


@pytest.fixture
def ws_root(tmp_path: Path) -> Path:
    return mounted_ws((tmp_path / "host-project").resolve())


def agent_tools(root: Path) -> Any:
    ws = Workspace.open(root)
    t = ws.tools(ws.session("agent-1"), caller="test-agent", model_id="test/model")
    assert t.workspace.agent_root() == AGENT
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    return t


def test_a_command_runs_at_the_agent_path(ws_root: Path) -> None:
    t = agent_tools(ws_root)
    out = t.dispatch("run_command", {"cmd": "pwd"})
    assert out["ok"] and out["result"]["stdout"] == f"{AGENT}\n", out
    out = t.dispatch("run_command", {"cmd": f"cat {AGENT}/inventory/stock.txt"})
    assert out["result"]["stdout"] == "apples 3\n", out
    # The working directory named by its agent path, and by its relative path.
    for cwd in (f"{AGENT}/inventory", "inventory"):
        out = t.dispatch("run_command", {"cmd": "pwd", "cwd": cwd})
        assert out["ok"] and out["result"]["stdout"] == f"{AGENT}/inventory\n", out
    # The host directory is not there at all: the workspace is only at the agent path.
    out = t.dispatch("run_command", {"cmd": f"ls {ws_root}"})
    assert out["ok"] and out["result"]["returncode"] != 0, out


def test_writes_through_agent_paths_commit_in_scope_only(ws_root: Path) -> None:
    t = agent_tools(ws_root)
    cmd = (
        f"echo 'pears 2' > {AGENT}/inventory/pears.txt; echo hi > {AGENT}/docs/new.md; "
        f"echo x > {ws_root}/inventory/host.txt; true"
    )
    out = t.dispatch("run_command", {"cmd": cmd, "shell": True})
    assert out["ok"], out
    effects = out["result"]["effects"]
    assert [c["path"] for c in effects["changed"]] == ["inventory/pears.txt"]
    assert [d["path"] for d in effects["dropped"]] == ["docs/new.md"]
    assert (ws_root / "inventory" / "pears.txt").read_text() == "pears 2\n"
    assert not (ws_root / "docs" / "new.md").exists()
    # A write to the host path inside the sandbox landed in the sandbox's own tree.
    assert not (ws_root / "inventory" / "host.txt").exists()
    assert_no_host_path(out, ws_root)


def test_masks_and_protected_directories_hold_at_the_agent_path(ws_root: Path) -> None:
    t = agent_tools(ws_root)
    (ws_root / ".ctxnb").mkdir(exist_ok=True)
    (ws_root / ".ctxnb" / "canary.txt").write_text("ctxnb canary\n")
    before = fingerprint(ws_root, skip_top=(".ctxnb",))
    secret = (ws_root / ".env").read_text()
    # Each fails for the boundary's reason, not because nothing is at the agent path.
    attempts = [
        (f"cat {AGENT}/.env", "Permission denied"),
        (f"ls -A {AGENT}/.ctxnb && echo listed", ""),
        (f"echo x > {AGENT}/.git/HEAD", "Read-only file system"),
        (f"echo x > {AGENT}/.orchestration/active_intents.yaml", "Read-only file system"),
        (f"rm -rf {AGENT}/.git/refs", "Read-only file system"),
        (f"cat /oldroot{ws_root}/.env", "No such file"),
        (f"cat {ws_root}/.env", "No such file"),
    ]
    for cmd, why in attempts:
        out = t.dispatch("run_command", {"cmd": cmd + "; true", "shell": True})
        assert out["ok"], (cmd, out)
        assert why in out["result"]["stderr"], (cmd, out)
        assert secret.strip() not in json.dumps(out), cmd
        assert out["result"]["effects"]["changed"] == [], (cmd, out)
    # .ctxnb is there, and empty.
    out = t.dispatch("run_command", {"cmd": f"ls -A {AGENT}/.ctxnb && echo listed", "shell": True})
    assert out["result"]["stdout"] == "listed\n", out
    assert fingerprint(ws_root, skip_top=(".ctxnb",)) == before


def test_no_answer_to_a_command_names_the_host_directory(ws_root: Path) -> None:
    """An attacker's command and arguments that try to get the host's layout back."""
    t = agent_tools(ws_root)
    root = str(ws_root)
    calls: list[dict[str, Any]] = [
        {"cmd": "ls", "cwd": f"{AGENT}/../../etc"},  # traversal
        {"cmd": "ls", "cwd": f"{AGENT}/inventory/etc-link"},  # a symlink
        {"cmd": "ls", "cwd": f"{AGENT}/.env"},  # denied
        {"cmd": "ls", "cwd": f"{AGENT}/.git"},  # governance's own
        {"cmd": "ls", "cwd": f"{AGENT}/inventory/stock.txt"},  # not a directory
        {"cmd": "ls", "cwd": f"{root}/inventory"},  # the host path given
        {"cmd": "ls", "cwd": f"{root}/../x"},
        {"cmd": "rm -rf inventory"},  # destructive: refused without an approver
        {"cmd": "cat /proc/self/mountinfo"},  # the overlay's directories
        {"cmd": "cat /proc/1/cmdline"},  # bwrap's own argv
        {"cmd": "sh -c 'cd ..; pwd; ls -la; echo \"$PWD\"; env'"},
        {"cmd": f"echo {root} {root}/ '{root}' {root}. {root}:x ({root})", "shell": True},
        {"cmd": "ln -s /etc inventory/l; mkfifo inventory/f; true", "shell": True},
        {"cmd": "no-such-program --flag"},
        {"cmd": "sleep 5", "timeout": 0.5},
    ]
    for args in calls:
        out = t.dispatch("run_command", args)
        assert_no_host_path(out, ws_root)
    # The refusals name the agent's path in their message and details.
    out = t.dispatch("run_command", {"cmd": "ls", "cwd": f"{AGENT}/.env"})
    assert out["error_code"] == "PATH_DENIED", out
    assert out["details"]["path"] == f"{AGENT}/.env" and f"'{AGENT}/.env'" in out["message"]


def test_a_mount_prefix_the_sandbox_cannot_bind_is_refused_before_running(
    tmp_path: Path,
) -> None:
    root = mounted_ws((tmp_path / "proj").resolve(), prefix="/usr/src/app")
    ws = Workspace.open(root)
    t = ws.tools(ws.session("agent-1"), caller="test-agent", model_id="test/model")
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    out = t.dispatch("run_command", {"cmd": "touch inventory/ran.txt"})
    assert not out["ok"] and out["error_code"] == "SANDBOX_UNAVAILABLE", out
    assert "/usr/src/app" in out["message"] and "[[mounts]]" in out["message"]
    assert not (root / "inventory" / "ran.txt").exists()
    assert_no_host_path(out, root)


@pytest.mark.parametrize(
    "prefix",
    ["/", "relative", "/usr", "/usr/src/app", "/etc/w", "/proc/w", "/dev/w", "/tmp", "/run/w",
     "/tmp/home/w", "/var/tmp/w", "/sys/w", "/work/wt/../../usr/x"],
)  # fmt: skip
def test_mount_points_that_would_cover_the_sandbox_are_refused(prefix: str) -> None:
    with pytest.raises(SandboxError, match=r"cannot be bound at .*\[\[mounts\]\]"):
        check_mount_point(prefix)


def test_a_mount_point_over_the_python_environment_or_a_read_path_is_refused() -> None:
    import sys

    with pytest.raises(SandboxError, match="overlaps"):
        check_mount_point(os.path.dirname(sys.prefix))
    with pytest.raises(SandboxError, match="overlaps"):
        check_mount_point("/data", read_paths=["/data/cache"])
    assert check_mount_point("/workspace/") == "/workspace"
    assert check_mount_point("/tmp/ws") == "/tmp/ws"


def test_only_whole_components_of_the_host_directory_are_renamed() -> None:
    m = [(AGENT, "/home/me/proj")]
    assert in_agent_terms(["/home/me/proj", "/home/me/proj/a", "/home/me/proj."], m) == [
        AGENT,
        f"{AGENT}/a",
        f"{AGENT}.",
    ]
    # Siblings are other directories and stay as they are.
    same = ["/home/me/project/a", "/home/me/proj.bak", "/home/me/proj-2", "x/home/me/projy"]
    assert in_agent_terms(same, m) == same
    # The longest host prefix wins.
    two = [(AGENT, "/home/me/proj"), ("/data", "/home/me/proj/data")]
    assert in_agent_terms({"k /home/me/proj/data/x": 1}, two) == {"k /data/x": 1}
