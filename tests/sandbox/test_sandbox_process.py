"""run_command with real processes: timeouts kill the whole group, output is capped."""

from __future__ import annotations

import doctest
import os
import sys
import time
from pathlib import Path

import pytest

import ctxnb.sandbox.process as commands_mod
from ctxnb.errors import NotFoundError
from ctxnb.sandbox.process import CommandResult, run_command


def alive(pid: int) -> bool:
    """Running (zombies, which only wait to be reaped by someone, do not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def wait_gone(pid: int, deadline: float = 10.0) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs")

# A child that starts a grandchild which ignores SIGTERM, writes its pid and sleeps.
_SPAWNER = """
import os, signal, subprocess, sys, time
pidfile = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
with open(pidfile, "w") as fh:
    fh.write(str(child.pid))
print("spawned", flush=True)
time.sleep(300)
"""


def test_plain_run(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("content\n")
    r = run_command(["cat", "f.txt"], cwd=tmp_path)
    assert r == CommandResult(0, "content\n", "", False, False, r.duration_ms)
    assert r.ok and r.duration_ms >= 0
    assert r.to_dict()["stdout"] == "content\n"


def test_string_is_split_without_a_shell(tmp_path: Path) -> None:
    r = run_command("echo 'a b' '>' out.txt", cwd=tmp_path)
    assert r.stdout == "a b > out.txt\n"
    assert not (tmp_path / "out.txt").exists()


def test_shell_true_uses_sh(tmp_path: Path) -> None:
    r = run_command("echo one | tr o O > out.txt; cat out.txt", cwd=tmp_path, shell=True)
    assert r.stdout == "One\n"
    assert run_command(["echo", "a b"], cwd=tmp_path, shell=True).stdout == "a b\n"


def test_exit_codes_and_stderr(tmp_path: Path) -> None:
    r = run_command(
        [sys.executable, "-c", "import sys; sys.stderr.write('bad'); sys.exit(3)"], cwd=tmp_path
    )
    assert (r.returncode, r.stderr, r.ok) == (3, "bad", False)


def test_command_not_found_is_127(tmp_path: Path) -> None:
    r = run_command("definitely-not-a-program-xyz --help", cwd=tmp_path)
    assert r.returncode == 127
    assert "command not found: definitely-not-a-program-xyz" in r.stderr


def test_not_executable_is_126(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    r = run_command(["./script.sh"], cwd=tmp_path)
    assert r.returncode == 126


def test_unparseable_and_empty(tmp_path: Path) -> None:
    assert run_command("echo 'open", cwd=tmp_path).returncode == 2
    assert run_command("", cwd=tmp_path).returncode == 2


def test_missing_cwd_raises(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        run_command(["ls"], cwd=tmp_path / "nope")


def test_env_replaces_environment(tmp_path: Path) -> None:
    r = run_command(
        [
            sys.executable,
            "-c",
            "import os; print(sorted(k for k in os.environ if k.startswith('CTX')))",
        ],
        cwd=tmp_path,
        env={"CTX_A": "1", "PATH": os.environ.get("PATH", "")},
    )
    assert r.stdout.strip() == "['CTX_A']"


def test_output_is_capped_with_head_and_tail(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('H' * 1000 + 'M' * 100000 + 'T' * 1000)"
    r = run_command([sys.executable, "-c", code], cwd=tmp_path, max_output_bytes=2000)
    assert r.truncated
    assert r.stdout.startswith("H" * 1000)
    assert r.stdout.endswith("T" * 1000)
    assert "[... ctxnb: 100000 bytes of output dropped ...]" in r.stdout
    assert "M" not in r.stdout


def test_output_exactly_at_cap_is_kept(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('x' * 2000)"
    r = run_command([sys.executable, "-c", code], cwd=tmp_path, max_output_bytes=2000)
    assert not r.truncated and r.stdout == "x" * 2000


def test_redact_applies_to_both_streams(tmp_path: Path) -> None:
    code = "import sys; print('key=SECRET'); sys.stderr.write('SECRET again')"
    r = run_command(
        [sys.executable, "-c", code], cwd=tmp_path, redact=lambda s: s.replace("SECRET", "***")
    )
    assert r.stdout == "key=***\n" and r.stderr == "*** again"


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.buffer.write(b'ok\\xff\\n')"
    assert run_command([sys.executable, "-c", code], cwd=tmp_path).stdout == "ok\ufffd\n"


@needs_proc
@pytest.mark.slow
def test_timeout_kills_child_and_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    r = run_command(
        [sys.executable, "-c", _SPAWNER, str(pidfile)], cwd=tmp_path, timeout=2, kill_grace=0.5
    )
    assert r.timed_out and not r.ok
    assert r.returncode < 0
    assert r.stdout == "spawned\n"
    grandchild = int(pidfile.read_text())
    # The grandchild ignored SIGTERM; SIGKILL after the grace period ended it.
    assert wait_gone(grandchild), f"grandchild {grandchild} survived"


@needs_proc
def test_background_job_is_stopped_when_command_exits(tmp_path: Path) -> None:
    r = run_command("sleep 300 & echo $!", cwd=tmp_path, shell=True, timeout=30)
    assert r.returncode == 0 and not r.timed_out
    pid = int(r.stdout.strip())
    assert wait_gone(pid), f"background sleep {pid} survived"
    assert r.duration_ms < 25_000  # did not wait for the background job


def test_docstring_examples() -> None:
    result = doctest.testmod(commands_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4
    assert result.failed == 0
