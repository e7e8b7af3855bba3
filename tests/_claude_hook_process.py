"""``ctxnb hook EVENT`` as Claude Code starts it: the console script, the payload on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ctxnb.integrations.claude_code import HookResult

CTXNB = Path(sys.executable).with_name("ctxnb")  # the console script Claude Code runs


def hook_process(event: str, payload: dict[str, Any]) -> HookResult:
    """Run one hook event in a new process; a traceback on stderr fails the test."""
    proc = subprocess.run(
        [str(CTXNB), "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**os.environ, "PATH": f"{CTXNB.parent}:{os.environ['PATH']}"},
        timeout=120,
        check=False,
    )
    result = HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert "Traceback" not in result.stderr, result.stderr
    return result
