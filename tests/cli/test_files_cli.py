"""``ctxnb files``, ``open``, ``patch`` and ``stats`` as a user runs them: real processes
on a copy of the sample workspace, plain and governed.

Each command is an agent's tool behind the one front door, so each test tries what the
tool refuses (a denied file, a stale or unread copy, a write with no intent or out of
scope, a path outside the workspace) and checks the files and the audit log afterwards,
not only the exit code.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import string
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import REPO
from _tracewal_setup import governed, ledger_path

from ctxnb import Workspace
from ctxnb.samples import copy_sample_workspace

ENV = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}


def ctxnb(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", *args],
        cwd=cwd,
        env=ENV,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def refused(proc: subprocess.CompletedProcess[str], command: str, code: str) -> str:
    """Exit 1 and exactly one stderr line naming the error code (when ``code``), no traceback."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    prefix = f"ctxnb {command}: error: " + (f"{code}: " if code else "")
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


def audit(root: Path) -> list[dict]:
    text = (root / ".ctxnb" / "audit.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def diff_of(rel: str, old: str, new: str) -> str:
    import difflib

    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
    )
    return "".join(lines)


def sha_of(root: Path, rel: str) -> str:
    return hashlib.sha256((root / rel).read_bytes()).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return copy_sample_workspace(tmp_path / "plain")


@pytest.fixture
def indexed(ws: Path) -> Path:
    """Made a workspace explicitly: the read commands (``files`` …) refuse a folder with
    no store rather than make one."""
    assert ctxnb("index", cwd=ws).returncode == 0
    return ws


@pytest.fixture
def gws(tmp_path: Path) -> Path:
    """Governed: INT-001 owns ``inventory/**``."""
    return governed(copy_sample_workspace(tmp_path / "gov"))


# -- files -----------------------------------------------------------------------------------
def test_files_lists_what_the_agent_may_see_and_no_denied_file(indexed: Path) -> None:
    ws = indexed
    (ws / "id_rsa").write_text("not really a key\n")
    proc = ctxnb("files", "--json", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    # The same answer the agent's list_files gives, denied files absent though on disk.
    with Workspace.open(ws) as w:
        assert listed == w.tools(w.session("other")).list_files()
    assert (ws / ".env").exists() and ".env" not in listed
    assert "id_rsa" not in listed
    assert "inventory/models.py" in listed

    under = ctxnb("files", "inventory", cwd=ws)
    assert under.returncode == 0, under.stderr
    names = under.stdout.split()
    assert names and all(n.startswith("inventory/") for n in names)
    # Asking for a denied file by name lists nothing rather than the file.
    assert ctxnb("files", ".env", cwd=ws).stdout == ""


def test_files_refuses_a_directory_outside_the_workspace(indexed: Path) -> None:
    ws = indexed
    (ws.parent / "outside.txt").write_text("beside the workspace\n")
    line = refused(ctxnb("files", "..", cwd=ws), "files", "")
    assert "outside the workspace" in line
    refused(ctxnb("files", str(ws.parent), cwd=ws), "files", "")


@pytest.mark.parametrize("command", ["open", "history", "restore", "why"])
def test_a_file_outside_the_workspace_is_named_as_outside_and_left_alone(
    gws: Path, command: str
) -> None:
    """A new user's slip: a file beside the workspace, named absolutely or by ``../``.
    The error says it is outside the workspace (not that it has a '..' component the user
    never typed, nor to run ``ctxnb index``, which would not help); the file, the store's
    audit log and the ledger are as before."""
    assert ctxnb("index", cwd=gws).returncode == 0
    assert ctxnb("open", "AGENTS.md", cwd=gws).returncode == 0  # starts the audit log
    outside = gws.parent / "notes.txt"
    outside.write_text("beside the workspace\n")
    log = (gws / ".ctxnb" / "audit.jsonl").read_bytes()
    ledger = ledger_path(gws).read_bytes()
    for name in (str(outside), "../notes.txt"):
        line = refused(ctxnb(command, name, cwd=gws), command, "")
        assert f"{name} is outside the workspace {gws}" in line
        assert "'..'" not in line and "ctxnb index" not in line
    assert outside.read_text() == "beside the workspace\n"
    assert (gws / ".ctxnb" / "audit.jsonl").read_bytes() == log
    assert ledger_path(gws).read_bytes() == ledger


def test_a_patch_to_a_file_outside_the_workspace_writes_nothing(ws: Path) -> None:
    outside = ws.parent / "notes.txt"
    outside.write_text("old\n")
    diff = diff_of("notes.txt", "old\n", "new\n")
    line = refused(ctxnb("patch", str(outside), cwd=ws, stdin=diff), "patch", "")
    assert "is outside the workspace" in line
    assert outside.read_text() == "old\n"


def test_the_workspace_named_through_a_link_is_still_the_workspace(ws: Path) -> None:
    """The outside check is not fooled the other way: a file named through a link to the
    workspace's directory is inside it, and is read."""
    link = ws.parent / "link"
    link.symlink_to(ws, target_is_directory=True)
    read = ctxnb("open", str(link / "AGENTS.md"), "-w", str(ws), cwd=ws.parent)
    assert read.returncode == 0, read.stderr
    assert read.stdout.startswith("==> AGENTS.md  sha256 ")
    # And a link leading out of it is still outside.
    away = ws.parent / "away"
    away.mkdir()
    (away / "x.py").write_text("x = 1\n")
    line = refused(ctxnb("open", str(away / "x.py"), cwd=ws), "open", "")
    assert "is outside the workspace" in line


# -- open ------------------------------------------------------------------------------------
def test_open_prints_the_redacted_content_with_the_sha256_and_version_of_the_bytes(
    ws: Path,
) -> None:
    token = "ghp_" + "".join(
        secrets.choice(string.ascii_letters + string.digits) for _ in range(36)
    )
    (ws / "inventory" / "client.py").write_text(f'TOKEN = "{token}"\nRETRIES = 3\n')
    proc = ctxnb("open", "inventory/client.py", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    head, *body = proc.stdout.splitlines()
    assert token not in proc.stdout
    assert "[REDACTED" in proc.stdout and "RETRIES = 3" in proc.stdout
    # The sha256 is that of the bytes on disk (secret and all): the base an edit names.
    assert f"sha256 {sha_of(ws, 'inventory/client.py')}" in head
    version = head.rsplit("version ", 1)[1]
    with Workspace.open(ws) as w:
        versions = w.history("inventory/client.py")
    assert version.endswith(f"@{versions[-1].tx_id}")
    # Recorded as the agent's read is, under the CLI's session and caller.
    last = audit(ws)[-1]
    assert (last["tool"], last["caller"], last["session_id"]) == ("read_file", "cli", "cli")
    assert token not in json.dumps(last)
    # The bytes counted are those shown (the last line is the redaction note).
    assert body[-1].startswith("[1 secret(s) were replaced")
    assert last["read_bytes"] == len("\n".join(body[:-1]).encode()) + 1


def test_open_refuses_a_denied_file_and_a_path_that_escapes(ws: Path) -> None:
    line = refused(ctxnb("open", ".env", cwd=ws), "open", "PATH_DENIED")
    assert "ghp_" not in line
    (ws.parent / "secret.txt").write_text("outside\n")
    line = refused(ctxnb("open", "../secret.txt", cwd=ws), "open", "")
    assert "is outside the workspace" in line and "outside\n" not in line
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    proc = ctxnb("open", "link.txt", cwd=ws)
    assert proc.returncode == 1 and "outside" not in proc.stdout


# -- patch -----------------------------------------------------------------------------------
def test_patch_applies_a_diff_to_the_copy_it_was_made_from_and_nothing_else(ws: Path) -> None:
    rel = "inventory/models.py"
    old = (ws / rel).read_text()
    new = old.replace('"""Items and stock movements."""', '"""Items, stock movements."""')
    diff = diff_of(rel, old, new)
    base = sha_of(ws, rel)

    # Not opened in this session and no --sha256: nothing to check the diff against.
    line = refused(ctxnb("patch", rel, cwd=ws, stdin=diff), "patch", "READ_BEFORE_WRITE")
    assert "--sha256" in line
    # The command line's fix, not the library's beside it.
    assert "read_file(" not in line and "expected_sha256" not in line
    # A hash of another copy: stale, refused.
    line = refused(
        ctxnb("patch", rel, "--sha256", "0" * 64, cwd=ws, stdin=diff), "patch", "STALE_FILE"
    )
    assert (ws / rel).read_text() == old

    ok = ctxnb("patch", rel, "--sha256", base, cwd=ws, stdin=diff)
    assert ok.returncode == 0, ok.stderr
    assert (ws / rel).read_text() == new
    assert sha_of(ws, rel) in ok.stdout
    # The same diff again, from the same (now old) copy: the file moved on, refused.
    refused(ctxnb("patch", rel, "--sha256", base, cwd=ws, stdin=diff), "patch", "STALE_FILE")
    assert (ws / rel).read_text() == new


def test_patch_refuses_bad_diffs_and_denied_files_and_writes_nothing(ws: Path) -> None:
    rel = "inventory/models.py"
    old = (ws / rel).read_text()
    base = sha_of(ws, rel)
    refused(
        ctxnb("patch", rel, "--sha256", base, cwd=ws, stdin="not a diff\n"),
        "patch",
        "INVALID_PATCH",
    )
    # A diff whose context does not match the file: a conflict, no partial write.
    wrong = diff_of(rel, "x = 1\n" + old, "x = 2\n" + old)
    refused(ctxnb("patch", rel, "--sha256", base, cwd=ws, stdin=wrong), "patch", "PATCH_CONFLICT")
    assert (ws / rel).read_text() == old
    env_diff = diff_of(".env", "A=1\n", "A=2\n")
    refused(ctxnb("patch", ".env", cwd=ws, stdin=env_diff), "patch", "PATH_DENIED")
    assert "SUPPLIER_API_TOKEN" in (ws / ".env").read_text()
    line = refused(ctxnb("patch", rel, cwd=ws, stdin=""), "patch", "")
    assert "no diff on stdin" in line


def test_patch_in_a_governed_workspace_needs_an_intent_and_stays_in_its_scope(gws: Path) -> None:
    rel = "inventory/models.py"
    old = (gws / rel).read_text()
    new = old + "\n# reviewed\n"
    diff = diff_of(rel, old, new)
    base = sha_of(gws, rel)

    line = refused(
        ctxnb("patch", rel, "--sha256", base, cwd=gws, stdin=diff), "patch", "NO_ACTIVE_INTENT"
    )
    assert "--intent" in line and "INT-001" in line
    line = refused(
        ctxnb("patch", rel, "--intent", "INT-999", "--sha256", base, cwd=gws, stdin=diff),
        "patch",
        "INVALID_INTENT",
    )
    assert "--intent" in line
    # In an intent, but outside its scope (INT-001 owns inventory/** only).
    readme_old = (gws / "README.md").read_text()
    readme = diff_of("README.md", readme_old, readme_old + "more\n")
    refused(
        ctxnb(
            "patch",
            "README.md",
            "--intent",
            "INT-001",
            "--sha256",
            sha_of(gws, "README.md"),
            cwd=gws,
            stdin=readme,
        ),
        "patch",
        "SCOPE_VIOLATION",
    )
    assert (gws / rel).read_text() == old and (gws / "README.md").read_text() == readme_old
    assert ledger_path(gws).read_text() == ""

    ok = ctxnb("patch", rel, "--intent", "INT-001", "--sha256", base, cwd=gws, stdin=diff)
    assert ok.returncode == 0, ok.stderr
    assert (gws / rel).read_text() == new
    (record,) = [json.loads(x) for x in ledger_path(gws).read_text().splitlines()]
    assert [f["path"] for f in record["files"]] == [rel]


def test_intent_in_an_ungoverned_workspace_is_refused(ws: Path) -> None:
    rel = "inventory/models.py"
    diff = diff_of(rel, (ws / rel).read_text(), "")
    line = refused(
        ctxnb("patch", rel, "--intent", "INT-001", "--sha256", sha_of(ws, rel), cwd=ws, stdin=diff),
        "patch",
        "",
    )
    assert "not governed" in line and (ws / rel).stat().st_size > 0


# -- stats -----------------------------------------------------------------------------------
def test_stats_sums_each_sessions_reads_writes_tokens_and_refusals(gws: Path) -> None:
    rel = "inventory/models.py"
    with Workspace.open(gws) as w:
        session = w.session("agent-a")
        tools = w.tools(session, caller="agent")
        tools.engine.select_active_intent("INT-001")
        read = tools.read_file(rel)
        tokens = session.token_counter.count(read.content)
        assert tools.write_file("inventory/new.py", "x = 1\n").success
        assert tools.dispatch("read_file", {"path": ".env"})["error_code"] == "PATH_DENIED"
        assert (
            tools.dispatch("write_file", {"path": "README.md", "content": ""})["error_code"]
            == "SCOPE_VIOLATION"
        )
        session.save()
    assert ctxnb("open", "README.md", "--session", "human", cwd=gws).returncode == 0

    proc = ctxnb("stats", "--json", cwd=gws)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    a = stats["agent-a"]
    assert (a["reads"], a["writes"], a["read_tokens"]) == (1, 1, tokens)
    assert a["read_bytes"] == len(read.content.encode())
    assert a["refusals"] == {"PATH_DENIED": 1, "SCOPE_VIOLATION": 1}
    assert (stats["human"]["reads"], stats["human"]["writes"]) == (1, 0)

    one = ctxnb("stats", "--session", "agent-a", cwd=gws)
    assert one.returncode == 0 and "agent-a" in one.stdout and "human" not in one.stdout
    assert "PATH_DENIED 1, SCOPE_VIOLATION 1" in one.stdout
    line = refused(ctxnb("stats", "--session", "nobody", cwd=gws), "stats", "")
    assert "agent-a" in line


def test_stats_on_a_tree_with_nothing_recorded_says_so_and_creates_nothing(tmp_path: Path) -> None:
    refused(ctxnb("stats", cwd=tmp_path), "stats", "")
    assert list(tmp_path.iterdir()) == []


def test_stats_counts_a_claude_code_edit_as_a_write(gws: Path) -> None:
    # The real post-tool-use hook process records Claude Code's Write; stats counts it.
    from _paths import TESTS

    from ctxnb.cli.app import main

    sid = "3f1c2a9e-0d6b-4c1e-9a57-2b8f7d1e4c21"
    assert main(["hook", "select-intent", "INT-001", "--session", sid, "-w", str(gws)]) == 0
    target = gws / "inventory" / "export.py"
    target.write_text("import csv\n")
    data = json.loads((TESTS / "data" / "claude-code-hooks" / "post-write.json").read_text())
    data.update(cwd=str(gws), session_id=sid)
    data["tool_input"] = {"file_path": str(target), "content": "import csv\n"}
    data["tool_response"]["filePath"] = str(target)
    hook = subprocess.run(
        [sys.executable, "-m", "ctxnb", "hook", "post-tool-use"],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert hook.returncode == 0, hook.stderr
    proc = ctxnb("stats", "--json", "--session", sid, cwd=gws)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[sid]["writes"] == 1
