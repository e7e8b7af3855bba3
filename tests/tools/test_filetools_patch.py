"""apply_patch with git's file operations: exact bytes, deletion, creation, rename."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _intents import PATCH_INTENTS as INTENTS

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.ledger import check_record


@pytest.fixture
def tools(sample_ws: Path):
    ws = Workspace.open(sample_ws)
    return ws.tools(ws.session("patching"), caller="tests")


def _git_diff(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "diff", "-M", *args],
        cwd=root,
        capture_output=True,
        check=True,
    )
    return out.stdout.decode()


def _staged_diff(root: Path, change) -> str:
    """The diff git writes for ``change`` (run on a committed tree), then undone."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "base"], cwd=root, check=True)
    change()
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    diff = _git_diff(root, "--cached")
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=root, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=root, check=True)
    return diff


def test_crlf_and_mixed_files_get_gits_bytes(tools, sample_ws: Path) -> None:
    target = sample_ws / "inventory" / "notes.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\n")

    def change() -> None:
        target.write_bytes(b"one\r\nTWO\n\r\nthree\r\n")

    diff = _staged_diff(sample_ws, change)
    r = tools.read_file("inventory/notes.txt")
    res = tools.apply_patch("inventory/notes.txt", diff, expected_sha256=r.sha256)
    assert res.success, res.message
    assert target.read_bytes() == b"one\r\nTWO\n\r\nthree\r\n"


def test_deletion_diff_deletes_versions_and_keeps_nothing(tools, sample_ws: Path) -> None:
    target = sample_ws / "inventory" / "models.py"
    diff = _staged_diff(sample_ws, target.unlink)
    assert "+++ /dev/null" in diff
    r = tools.read_file("inventory/models.py")
    res = tools.apply_patch("inventory/models.py", diff, expected_sha256=r.sha256)
    assert res.success, res.message
    assert not target.exists()  # deleted, not emptied
    history = tools.get_file_history("inventory/models.py")
    assert history[-1].action == "deleted"
    assert res.version_id == history[-1].version_id


def test_deletion_that_leaves_lines_is_a_conflict(tools, sample_ws: Path) -> None:
    target = sample_ws / "inventory" / "models.py"
    before = target.read_bytes()
    diff = "--- a/inventory/models.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-" + (
        before.decode().splitlines()[0] + "\n"
    )
    r = tools.read_file("inventory/models.py")
    res = tools.apply_patch("inventory/models.py", diff, expected_sha256=r.sha256)
    assert not res.success and res.conflict
    assert "leave" in res.message
    assert target.read_bytes() == before


def test_new_file_diff_creates_and_never_overwrites(tools, sample_ws: Path) -> None:
    diff = "--- /dev/null\n+++ b/inventory/new.py\n@@ -0,0 +1,2 @@\n+a = 1\r\n+b = 2\n"
    res = tools.apply_patch("inventory/new.py", diff)
    assert res.success, res.message
    assert (sample_ws / "inventory" / "new.py").read_bytes() == b"a = 1\r\nb = 2\n"
    again = tools.apply_patch("inventory/new.py", diff)
    assert not again.success and again.conflict and "exists" in again.message
    assert (sample_ws / "inventory" / "new.py").read_bytes() == b"a = 1\r\nb = 2\n"


def test_rename_diff_moves_and_patches(tools, sample_ws: Path) -> None:
    old = sample_ws / "inventory" / "models.py"
    text = old.read_text()

    def change() -> None:
        old.rename(sample_ws / "inventory" / "entities.py")
        (sample_ws / "inventory" / "entities.py").write_text(text + "# moved\n")

    diff = _staged_diff(sample_ws, change)
    assert "rename from inventory/models.py" in diff
    r = tools.read_file("inventory/models.py")
    res = tools.apply_patch("inventory/models.py", diff, expected_sha256=r.sha256)
    assert res.success, res.message
    assert not old.exists()
    assert (sample_ws / "inventory" / "entities.py").read_text() == text + "# moved\n"
    assert tools.get_file_history("inventory/models.py")[-1].action == "deleted"
    assert tools.get_file_history("inventory/entities.py")[-1].action == "created"


def test_rename_onto_a_denied_or_existing_path_is_refused(tools, sample_ws: Path) -> None:
    diff = (
        "diff --git a/inventory/models.py b/.env\nsimilarity index 100%\n"
        "rename from inventory/models.py\nrename to .env\n"
    )
    r = tools.read_file("inventory/models.py")
    out = tools.dispatch(
        "apply_patch",
        {"path": "inventory/models.py", "unified_diff": diff, "expected_sha256": r.sha256},
    )
    assert out["ok"] is False and out["error_code"] == "PATH_DENIED"
    assert (sample_ws / "inventory" / "models.py").exists()
    onto = diff.replace(".env", "README.md")
    res = tools.apply_patch("inventory/models.py", onto, expected_sha256=r.sha256)
    assert not res.success and "exists" in res.message
    assert (sample_ws / "inventory" / "models.py").exists()


def test_rename_out_of_the_intents_scope_is_refused(git_repo: Path) -> None:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    ws = Workspace.open(git_repo)
    tools = ws.tools(ws.session("gov"), caller="tests")
    tools.dispatch("select_active_intent", {"intent_id": "INT-001"})
    diff = (
        "diff --git a/inventory/models.py b/web/models.py\nsimilarity index 100%\n"
        "rename from inventory/models.py\nrename to web/models.py\n"
    )
    r = tools.read_file("inventory/models.py")
    out = tools.dispatch(
        "apply_patch",
        {"path": "inventory/models.py", "unified_diff": diff, "expected_sha256": r.sha256},
    )
    assert out["ok"] is False and out["error_code"] == "SCOPE_VIOLATION"
    assert (git_repo / "inventory" / "models.py").exists()
    assert not (git_repo / "web" / "models.py").exists()


def test_governed_deletion_is_traced(git_repo: Path) -> None:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    ws = Workspace.open(git_repo)
    tools = ws.tools(ws.session("gov"), caller="tests")
    tools.dispatch("select_active_intent", {"intent_id": "INT-001"})
    target = git_repo / "inventory" / "models.py"
    diff = _git_diff(git_repo, "--", "inventory/models.py") or None
    assert diff is None  # clean tree
    target_text = target.read_text()
    target.unlink()
    diff = _git_diff(git_repo, "--", "inventory/models.py")
    target.write_text(target_text)
    r = tools.read_file("inventory/models.py")
    res = tools.apply_patch("inventory/models.py", diff, expected_sha256=r.sha256)
    assert res.success, res.message
    assert not target.exists()
    lines = (git_repo / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    assert record["files"][0]["path"] == "inventory/models.py"
    assert record["metadata"]["tool"] == "apply_patch"
    assert check_record(record) == []


def test_multi_file_and_mismatched_diffs_are_refused_clearly(tools, sample_ws: Path) -> None:
    two = (
        "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+x\n"
        "--- /dev/null\n+++ b/y.txt\n@@ -0,0 +1 @@\n+y\n"
    )
    out = tools.dispatch("apply_patch", {"path": "x.txt", "unified_diff": two})
    assert out["error_code"] == "INVALID_PATCH" and "split it" in out["message"]
    one = "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+x\n"
    out = tools.dispatch("apply_patch", {"path": "y.txt", "unified_diff": one})
    assert out["error_code"] == "INVALID_PATCH" and "pass path='x.txt'" in out["message"]
    assert not (sample_ws / "x.txt").exists() and not (sample_ws / "y.txt").exists()
    audit = tools.audit()
    assert (audit["tool"] == "apply_patch").sum() == 2
