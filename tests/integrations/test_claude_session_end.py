"""Claude Code's ``SessionEnd``: the ended session's lease on its intent's scope is released
at once (and only that session's), through the real ``ctxnb hook session-end`` process.

Without it a Claude Code session's lease ends only by age (``lease_minutes``): its hook
processes end after each call, so nothing else tells ctxnb the session is over, and the
next session on the same intent is refused with ``SCOPE_OVERLAP`` for up to 30 minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _claude_hook_process import hook_process
from _paths import TESTS

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code_install import install_settings

DATA = TESTS / "data" / "claude-code-hooks"
INTENTS = """\
active_intents:
  - id: INT-001
    name: Refactor the parser
    status: active
    owned_scope:
      - src/**
"""
HEAVY = ("pandas", "pyarrow", "pydantic", "jsonschema")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A governed project whose one intent owns src/**."""
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("def f(x):\n    return x + 1\n")
    init_governance(project)
    (project / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return project


def _payload(name: str, root: Path, session: str, **extra: Any) -> dict[str, Any]:
    text = (DATA / f"{name}.json").read_text().replace("/home/user/proj", str(root))
    data: dict[str, Any] = json.loads(text)
    data["session_id"] = session
    data.update(extra)
    return data


def _select(root: Path, session: str) -> str:
    """Name INT-001 in a prompt of ``session``; the context the hook hands back."""
    prompt = _payload("user-prompt-submit", root, session, prompt="Work under INT-001.")
    result = hook_process("user-prompt-submit", prompt)
    assert result.exit_code == 0, result.stderr
    return str(result.answer["hookSpecificOutput"]["additionalContext"])


def _end(root: Path, session: Any, **extra: Any) -> Any:
    payload = _payload("session-end", root, "x", **extra)
    if session is None:
        del payload["session_id"]
    else:
        payload["session_id"] = session
    return hook_process("session-end", payload)


def _ends(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".ctxnb" / "audit.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["tool"] == "SessionEnd"]


def _sid() -> str:
    return str(uuid.uuid4())


def test_after_a_session_ends_the_next_selects_its_intent_at_once(root):
    a, b = _sid(), _sid()
    assert "INT-001 is now the active intent" in _select(root, a)
    # Before A ends, B is refused: A's lease holds the scope (for lease_minutes).
    refused = _select(root, b)
    assert "INT-001 was not selected" in refused and f"held by live session {a}" in refused

    result = _end(root, a, reason="prompt_input_exit")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert "INT-001 is now the active intent" in _select(root, b)

    (ended,) = _ends(root)
    assert ended["session_id"] == a and ended["intent_id"] == "INT-001"
    assert ended["args"] == {
        "reason": "prompt_input_exit",
        "released": "INT-001",
        "scope": ["src/**"],
    }


@pytest.mark.parametrize("other", ["b", "A", "A ", " A", "A\u200b"])
def test_the_end_of_another_session_releases_nothing_of_this_one(root, other):
    a = _sid()
    named = {"b": _sid(), "A": a.upper(), "A ": a + " ", " A": " " + a, "A\u200b": a + "\u200b"}
    _select(root, a)
    b = named[other]

    result = _end(root, b, reason="other")
    assert (result.exit_code, result.stdout) == (0, ""), result.stderr
    refused = _select(root, _sid())
    assert f"held by live session {a}" in refused  # A still holds its scope
    (ended,) = _ends(root)
    assert ended["args"]["released"] is None


def test_a_session_that_selected_after_another_ended_keeps_its_lease_when_that_one_ends_again(
    root,
):
    # B's SessionEnd after B took the scope releases B's; A's second end releases nothing.
    a, b = _sid(), _sid()
    _select(root, a)
    _end(root, a)
    _select(root, b)
    assert _end(root, a).exit_code == 0  # Claude Code ran the hook twice
    assert f"held by live session {b}" in _select(root, a)


def test_a_resumed_session_is_refused_when_another_took_the_scope_meanwhile(root):
    a, b = _sid(), _sid()
    _select(root, a)
    _end(root, a, reason="logout")
    _select(root, b)
    # `claude --resume` goes on with A's id and its intent: its next edit takes the lease
    # again, and B holds the scope now.
    edit = hook_process("pre-tool-use", _payload("pre-edit", root, a))
    assert edit.decision == "deny"
    assert (
        f"held by live session {b}" in edit.answer["hookSpecificOutput"]["permissionDecisionReason"]
    )


def test_a_resumed_session_takes_its_lease_again_on_its_next_edit(root):
    a, b = _sid(), _sid()
    _select(root, a)
    _end(root, a, reason="clear")
    edit = hook_process("pre-tool-use", _payload("pre-edit", root, a))
    assert (edit.exit_code, edit.stdout) == (0, ""), edit.stderr
    assert f"held by live session {a}" in _select(root, b)


@pytest.mark.parametrize("sid", [None, "", 42, ["a"], {"id": "a"}])
def test_a_missing_or_invalid_session_id_is_a_clean_error_that_releases_nothing(root, sid):
    a = _sid()
    _select(root, a)
    result = _end(root, sid)
    assert result.exit_code == 1 and result.stdout == ""
    assert "a SessionEnd payload needs 'session_id'" in result.stderr
    assert f"held by live session {a}" in _select(root, _sid())


def test_a_session_end_naming_a_notebook_session_leaves_its_lease(root):
    # A notebook session's lease is held by its process: only closing it releases it, not
    # a hook payload that names its session.
    with Workspace.open(root) as ws:
        session = ws.session("nb-1")
        tools = ws.tools(session, caller="nb")
        tools.engine.select_active_intent("INT-001")
        result = _end(root, "nb-1")
        assert (result.exit_code, result.stdout) == (0, ""), result.stderr
        assert "held by live session nb-1" in _select(root, _sid())
        session.close()


def test_an_ungoverned_project_does_nothing(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = _end(plain, _sid(), reason="other")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert list(plain.iterdir()) == []


def test_hook_install_answers_session_end_for_every_reason(tmp_path):
    path, _ = install_settings(tmp_path)
    (group,) = json.loads(path.read_text())["hooks"]["SessionEnd"]
    assert "matcher" not in group  # /clear, logout, exit alike
    assert group["hooks"][0]["command"].endswith(" hook session-end")


_PROBE = """
import io, json, sys
sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))
from ctxnb.cli.app import main
code = main(["hook", "session-end"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def test_session_end_imports_nothing_heavy(root):
    a = _sid()
    _select(root, a)
    payload = json.dumps(_payload("session-end", root, a))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=set(HEAVY)), payload],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}
    assert _ends(root)[0]["args"]["released"] == "INT-001"  # it did the work


def test_a_session_that_ended_in_a_folder_outside_the_project_releases_its_lease(
    root, tmp_path, monkeypatch
):
    # The shell left the project (`cd /tmp`); Claude Code names the project in
    # $CLAUDE_PROJECT_DIR, whose leases are the ones to release.
    a = _sid()
    _select(root, a)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root))
    result = _end(root, a, cwd=str(elsewhere))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert "INT-001 is now the active intent" in _select(root, _sid())
    assert not (elsewhere / ".ctxnb").exists()
