"""The circuit breaker's counts on disk: restarts, concurrent processes, bad files."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

from _paths import REPO

import ctxnb.govern.breaker as breaker_mod
from ctxnb.govern.breaker import BreakerState


def test_doctests() -> None:
    result = doctest.testmod(breaker_mod)
    assert result.attempted >= 4 and result.failed == 0


def test_counts_survive_a_new_process(tmp_path: Path) -> None:
    path = tmp_path / ".ctxnb" / "breaker.json"
    BreakerState(path).record("write_file", failed=True)
    code = (
        "import sys; from ctxnb.govern.breaker import BreakerState as B; "
        "b = B(sys.argv[1]); print(b.record('write_file', failed=True))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO)},
    ).stdout
    assert out.strip() == "2"
    assert BreakerState(path).counts() == {"write_file": 2}


def test_concurrent_processes_lose_no_count(tmp_path: Path) -> None:
    path = tmp_path / "breaker.json"
    code = (
        "import sys; from ctxnb.govern.breaker import BreakerState as B; b = B(sys.argv[1])\n"
        "for _ in range(25): b.record('run_command', failed=True)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path)], env={"PYTHONPATH": str(REPO)})
        for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    assert BreakerState(path).get("run_command") == 100


def test_reset_and_success_close_the_breaker(tmp_path: Path) -> None:
    state = BreakerState(tmp_path / "b.json")
    for _ in range(3):
        state.record("a", failed=True)
        state.record("b", failed=True)
    state.reset("a")
    assert state.counts() == {"b": 3}
    state.record("b", failed=False)
    assert state.counts() == {}
    state.record("c", failed=True)
    state.reset()
    assert BreakerState(tmp_path / "b.json").counts() == {}


def test_a_corrupt_file_does_not_close_an_open_breaker(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    state = BreakerState(path)
    for _ in range(3):
        state.record("x", failed=True)
    path.write_text("{not json")
    assert state.get("x") == 3  # what it knew stays
    assert state.record("x", failed=True) == 4
    assert BreakerState(path).get("x") == 4  # and the file is readable again
    assert BreakerState(tmp_path / "fresh.json").get("x") == 0
