"""Denied by identity: a hard link of a denied file is that file, whatever it is called.

Someone made ``notes.txt`` a hard link of ``.env`` before the agent came: the same
inode under a name no deny glob matches. Each test below tries to reach the denied
bytes through that other name, with every door an agent has to the files (the file
tools, their search with both backends, the indexer, a session's observe, the Claude
Code hook as Claude Code runs it), and checks that nothing of them comes back or is
stored. The secret is plain words, so the redaction at the exits cannot be what hides
it. (The sandbox's side is ``test_sandbox_identity.py``.)
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.errors import PolicyError
from ctxnb.govern import init_governance
from ctxnb.tools.search import find_ripgrep

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory rules
    status: active
    owned_scope: ["inventory/**"]
"""


def _secret() -> str:
    # Plain words: redaction would hide a key-shaped value, and the test would prove nothing.
    return "denied-bytes-" + "".join(secrets.choice("abcdefghij") for _ in range(16))


@pytest.fixture
def linked(sample_ws: Path) -> tuple[Path, str]:
    """The sample workspace with a secret ``.env`` and ``notes.txt``, a hard link of it."""
    secret = _secret()
    (sample_ws / ".env").write_text(f"NOTE={secret}\n")
    os.link(sample_ws / ".env", sample_ws / "notes.txt")
    return sample_ws, secret


def tools_for(root: Path):
    ws = Workspace.open(root)
    return ws.tools(ws.session("agent-1", rules=False), caller="test-agent")


def _refused_by_identity(exc: pytest.ExceptionInfo[PolicyError]) -> None:
    assert exc.value.error_code == "PATH_DENIED"
    assert exc.value.details["rule"] == "identity:.env", exc.value.details


def test_every_file_tool_refuses_a_hard_link_of_a_denied_file(linked):
    root, secret = linked
    t = tools_for(root)
    for read in (
        lambda: t.read_file("notes.txt"),
        lambda: t.read_lines("notes.txt", 1, 1),
        lambda: t.get_excerpt("notes.txt"),
        lambda: t.summarize_file("notes.txt"),
        lambda: t.read_file(str(root / "notes.txt")),
        lambda: t.read_file("./notes.txt"),
    ):
        with pytest.raises(PolicyError) as exc:
            read()
        _refused_by_identity(exc)
        assert secret not in str(exc.value)
    # Not listed, not written through (an append would read the denied bytes first).
    assert "notes.txt" not in t.list_files()
    assert "README.md" in t.list_files()
    with pytest.raises(PolicyError) as exc:
        t.workspace.agent_policy.write_bytes_atomic("notes.txt", b"more\n", mode="append")
    _refused_by_identity(exc)
    assert (root / ".env").read_text() == f"NOTE={secret}\n"
    assert os.stat(root / ".env").st_nlink == 2  # the link is still there: refused, not repaired
    t.workspace.close()


@pytest.mark.parametrize("backend", ["ripgrep", "python"])
def test_a_search_for_the_secret_finds_nothing(linked, backend):
    root, secret = linked
    if backend == "ripgrep" and find_ripgrep() is None:
        pytest.fail("ripgrep is a dependency of ctxnb and must be installed")
    t = tools_for(root)
    t.search_backend = backend
    assert t.search(secret) == []
    assert t.search("NOTE=") == []
    # The search works: a word of a readable file is found with the same backend.
    hits = t.search("inventory tracker")
    assert hits and all(h["path"] != "notes.txt" for h in hits)
    t.workspace.close()


def test_ripgrep_is_never_handed_a_denied_file_or_a_directory_holding_one(
    linked, tmp_path, monkeypatch
):
    """rg was handed whole directories and read .env (and its links) before ctxnb
    dropped the answer: now a directory goes to rg whole only when the policy refused
    nothing in it; of the others, rg is named the accepted files alone."""
    root, secret = linked
    os.link(root / ".env", root / "inventory" / "cfg.ini")  # a link deeper down
    real = find_ripgrep()
    assert real is not None
    log = tmp_path / "rg-args"
    wrapper = tmp_path / "rg"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CTXNB_RG", str(wrapper))
    (root / ".ctxnb").mkdir(exist_ok=True)
    (root / ".ctxnb" / "canary.txt").write_text(f"{secret}\n")
    t = tools_for(root)
    t.search_backend = "ripgrep"
    assert t.search(secret) == []
    assert t.search("inventory tracker")  # the wrapper runs the real rg
    t.workspace.close()
    args = log.read_text().splitlines()
    named = [a for a in args if a == "." or a.startswith("./")]
    assert named, args
    assert "." not in named  # the root holds .env: only its accepted files are named
    assert "./inventory" not in named  # it holds a link of .env
    assert "./README.md" in named and "./inventory/models.py" in named
    for path in named:
        full = root / path
        assert full.is_file() or full.is_dir(), path
        if full.is_dir():  # handed whole: nothing in it may be denied
            assert {".env", "notes.txt", "cfg.ini", ".git", ".ctxnb"}.isdisjoint(
                os.listdir(full)
            ), path
        parts = path.split("/")
        for never in ("notes.txt", ".env", "cfg.ini", ".git", ".ctxnb"):
            assert never not in parts, (never, path)


def test_the_indexer_and_observe_never_store_a_hard_link_of_a_denied_file(linked):
    root, secret = linked
    ws = Workspace.open(root)
    report = ws.index()
    assert ("notes.txt", "identity:.env") in report.denied_paths
    with pytest.raises(PolicyError) as exc:
        ws.observe(["notes.txt"])
    _refused_by_identity(exc)
    stored = ws.store.scan("file", columns=["source_path", "content"], format="arrow")
    rows = stored.to_pydict()
    assert not any(p.endswith("/notes.txt") for p in rows["source_path"])
    assert not any(secret in (c or "") for c in rows["content"])
    assert any(p.endswith("/README.md") for p in rows["source_path"])
    ws.close()


def test_a_link_made_after_the_first_look_is_refused_too(sample_ws):
    """The policy remembers its walk of the denied names; a link made or renamed since
    must not be judged by that memory."""
    root = sample_ws
    secret = _secret()
    (root / ".env").write_text(f"NOTE={secret}\n")
    (root / "a.txt").write_text("a\n")
    os.link(root / "a.txt", root / "b.txt")
    policy = Workspace.open(root).agent_policy
    # Several links, none denied: readable by either name (the denied names are walked).
    assert policy.read_bytes("a.txt") == policy.read_bytes("b.txt") == b"a\n"
    # A new name for .env after that walk.
    os.link(root / ".env", root / "later.txt")
    with pytest.raises(PolicyError) as exc:
        policy.read_bytes("later.txt")
    _refused_by_identity(exc)
    # A name of an inode judged readable becomes a denied name: the inode is denied now.
    os.rename(root / "b.txt", root / ".env.backup")
    with pytest.raises(PolicyError) as exc:
        policy.read_bytes("a.txt")
    assert exc.value.details["rule"] == "identity:.env.backup"
    assert not policy.is_allowed("a.txt")
    assert isinstance(policy.stat_many(["a.txt"])[0], PolicyError)


def test_a_link_of_a_file_in_a_denied_directory_is_refused(sample_ws):
    root = sample_ws
    (root / "ctxnb.toml").write_text('[policy]\ndeny = [".git", ".env*", ".ctxnb/", "secrets/"]\n')
    (root / "secrets").mkdir()
    secret = _secret()
    (root / "secrets" / "db.txt").write_text(f"{secret}\n")
    os.link(root / "secrets" / "db.txt", root / "docs-copy.txt")
    t = tools_for(root)
    with pytest.raises(PolicyError) as exc:
        t.read_file("docs-copy.txt")
    assert exc.value.details["rule"] == "identity:secrets/db.txt"
    assert t.search(secret) == []
    t.workspace.close()


def _pre_tool_use(root: Path, tool: str, tool_input: dict) -> subprocess.CompletedProcess[bytes]:
    """The real hook process, as Claude Code runs it (the venv's ctxnb on PATH)."""
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    payload = {
        "session_id": "s-1",
        "transcript_path": str(root / "transcript.jsonl"),
        "cwd": str(root),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
    }
    exe = Path(sys.executable).parent / "ctxnb"
    assert exe.exists(), exe
    env = {**os.environ, "PATH": f"{exe.parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["ctxnb", "hook", "pre-tool-use"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_claude_codes_read_of_a_hard_link_of_a_denied_file_is_denied(linked):
    root, secret = linked
    proc = _pre_tool_use(root, "Read", {"file_path": str(root / "notes.txt")})
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "identity:.env" in answer["permissionDecisionReason"]
    assert secret not in proc.stdout.decode()


def test_claude_codes_grep_that_reaches_a_hard_link_of_a_denied_file_is_denied(linked):
    """Claude Code's own ripgrep would print the secret from notes.txt: the Grep's reach
    is judged by identity too, not only by the names it lists."""
    root, secret = linked
    grep = {"pattern": "NOTE=", "path": str(root), "glob": "*.txt"}  # reaches no .env
    proc = _pre_tool_use(root, "Grep", grep)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "notes.txt (identity:.env)" in answer["permissionDecisionReason"]
    # Narrowed so that it reaches no denied file and no link of one, it is allowed.
    proc = _pre_tool_use(root, "Grep", {"pattern": "NOTE=", "path": str(root / "inventory")})
    assert proc.returncode == 0 and proc.stdout == b"", proc.stdout
