"""``make lab`` starts JupyterLab as root too, and passes ``LAB_ARGS``.

Jupyter refuses to run as root without ``--allow-root``, which is how a container or a
cloud machine runs it. The recipe is read from ``make -n`` (dry run; ``-o`` takes the
install as done) as root and as the unprivileged user ``nobody``, and started for real once
as whoever runs the tests, until the server says where it listens.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from _needs import IN_CI
from _paths import REPO

ALL_INSTALLED = ".venv/.all-installed"


def _dry_run(*args: str, as_nobody: bool = False) -> str:
    cmd = ["make", "-s", "-n", "-o", ALL_INSTALLED, "lab", *args]
    if as_nobody:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "jupyter lab" in ln]
    return line


def _need_root() -> None:
    if os.getuid() != 0:
        if IN_CI:
            pytest.fail("CI runs as root; this test reads the recipe as root and as nobody")
        pytest.skip("reading the recipe as root and as nobody needs root")


@pytest.fixture(autouse=True)
def _make() -> None:
    if shutil.which("make") is None:
        pytest.fail("make is the project's task runner; install it")


def test_lab_allows_root_only_as_root_and_passes_lab_args() -> None:
    _need_root()
    as_root = _dry_run("LAB_ARGS=--no-browser --port 8891")
    assert "--allow-root" in as_root.split()
    assert as_root.split()[-3:] == ["--port", "8891", "notebooks/"]
    assert "--no-browser" in as_root.split()
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) runs the recipe as nobody")
    as_user = _dry_run(as_nobody=True)
    assert "--allow-root" not in as_user.split()
    assert as_user.split()[-1] == "notebooks/"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_make_lab_starts_jupyterlab_for_whoever_runs_it(tmp_path: Path) -> None:
    if not (REPO / ".venv" / "bin" / "jupyter").exists():
        pytest.fail("the venv has no jupyter: `make lab` installs every extra first")
    port = _free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path))
    args = f"LAB_ARGS=--no-browser --ip 127.0.0.1 --port {port} --ServerApp.port_retries=0"
    proc = subprocess.Popen(
        ["make", "-s", "-o", ALL_INSTALLED, "lab", args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so that make and its jupyter stop together
    )
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if f"127.0.0.1:{port}/lab" in line:
                break
        # As root without --allow-root, Jupyter exits instead ("Running as root is not
        # recommended"), and no address is printed.
        assert any(f"127.0.0.1:{port}/lab" in ln for ln in seen), "".join(seen)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
