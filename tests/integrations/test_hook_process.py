"""``ctxnb hook EVENT`` as its own process runs without the cyclic collector; a caller's
process that runs the command line in-process keeps its collector (issue 26)."""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxnb.cli.app import main


def test_in_process_hook_leaves_the_callers_collector_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path), "prompt": "hello"})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload.encode())))
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    assert main(["hook", "user-prompt-submit"]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_the_hook_process_answers_with_the_collector_off_then_frozen(tmp_path: Path) -> None:
    # The same entry as the console script and ``python -m ctxnb``: main() with no argv.
    probe = (
        "import gc, sys\n"
        "sys.argv = ['ctxnb', 'hook', 'user-prompt-submit']\n"
        "from ctxnb.cli.app import main\n"
        "code = main()\n"
        "sys.stderr.write(f'{code} {gc.isenabled()} {gc.get_freeze_count() > 0}\\n')\n"
    )
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path), "prompt": "hello"})
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        input=payload.encode(),
        capture_output=True,
        env={**os.environ, "CTXNB_STATE_DIR": str(tmp_path / "state")},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == "0 False True"
    # A malformed payload still gets its one clear error, with the collector off.
    proc = subprocess.run(
        [sys.executable, "-m", "ctxnb", "hook", "pre-tool-use"],
        input=b"not json",
        capture_output=True,
        env={**os.environ, "CTXNB_STATE_DIR": str(tmp_path / "state")},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert b"blocked: stdin is not JSON" in proc.stderr
