"""``ctxnb merge`` as a human runs it: real processes on a governed git repository,
approving (or not) a merge proposal an agent made in another process.

Each test tries a way around the approval (no hash, a wrong hash, a proposal file edited
after it was shown, the file changed after it was shown, another session's lease, a
damaged or missing proposal) and checks the file and the ledger afterwards, not only
the exit code.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _intents import ENGINE_INTENTS
from _paths import REPO

from ctxnb import Workspace
from ctxnb.errors import NotFoundError
from ctxnb.govern import init_governance

MODELS = "inventory/models.py"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
INTENTS = (
    ENGINE_INTENTS
    + """\
  - id: INT-ALL-PY
    name: Every Python file
    status: active
    owned_scope: ["*.py"]
"""
)


def ctxnb(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", "merge", *args, "-w", str(root)],
        env=ENV,
        input="",  # not a terminal: nothing can be asked
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture
def gov(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return git_repo


def propose(root: Path, session_id: str = "agent-1") -> tuple[Any, str, str]:
    """An agent's stale edit of the top of models.py (a person changed the bottom) and
    its merge proposal; returns (the agent's tools, the proposal id, the merged text)."""
    ws = Workspace.open(root)
    t = ws.tools(ws.session(session_id), caller="agent")
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    r = t.read_file(MODELS)
    base = (root / MODELS).read_text()
    ours = base.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = base.replace("at or below its reorder level", "at or under its reorder level")
    assert ours != base and theirs != base
    (root / MODELS).write_text(theirs)
    out = t.dispatch("write_file", {"path": MODELS, "content": ours, "expected_sha256": r.sha256})
    assert out["error_code"] == "STALE_FILE"
    p = t.dispatch("propose_merge", {"path": MODELS, "content": ours})["result"]
    assert p["ready"]
    merged = base.replace("reorder_level: int = 5", "reorder_level: int = 10").replace(
        "at or below its reorder level", "at or under its reorder level"
    )
    return t, p["proposal_id"], merged


def shown_sha(root: Path, pid: str) -> str:
    out = ctxnb(root, "show", pid)
    assert out.returncode == 0, out.stderr
    assert "reorder_level: int = 10" in out.stdout  # the diff is printed
    (sha,) = re.findall(r"^diff sha256 ([0-9a-f]{64})$", out.stdout, flags=re.M)
    assert f"ctxnb merge accept {pid} --expect {sha}" in out.stdout
    return sha


def merge_records(root: Path) -> list[dict]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    recs = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [r for r in recs if r.get("metadata", {}).get("mutation_class") == "MERGE"]


def test_a_proposal_made_in_one_process_is_accepted_from_another(gov):
    agent, pid, merged = propose(gov)  # the agent's session stays open: its lease is live
    listed = ctxnb(gov, "list")
    assert listed.returncode == 0, listed.stderr
    assert pid in listed.stdout and MODELS in listed.stdout and "agent-1" in listed.stdout
    assert "INT-001" in listed.stdout and "ready" in listed.stdout
    sha = shown_sha(gov, pid)
    out = ctxnb(gov, "accept", pid, "--expect", sha)
    assert out.returncode == 0, out.stderr
    assert (gov / MODELS).read_text() == merged
    (rec,) = merge_records(gov)
    meta = rec["metadata"]
    assert meta["merged_from"]["theirs_sha256"] and meta["approval"]["diff_sha256"] == sha
    assert meta["approval"]["by"] == "human (ctxnb merge accept)"
    assert meta["parent_session"] == "agent-1"  # written for the session that proposed it
    # Written once: the proposal is gone, for the CLI and for the agent.
    assert ctxnb(gov, "list").stdout.strip() == "no merge proposals"
    again = ctxnb(gov, "accept", pid, "--expect", sha)
    assert again.returncode == 1 and "no merge proposal" in again.stderr
    assert agent.dispatch("apply_merge", {"proposal_id": pid})["ok"] is False
    assert (gov / MODELS).read_text() == merged


def test_without_the_hash_or_with_another_nothing_is_written(gov):
    _, pid, _ = propose(gov)
    theirs = (gov / MODELS).read_text()
    sha = shown_sha(gov, pid)
    bare = ctxnb(gov, "accept", pid)  # no terminal to ask on
    assert bare.returncode == 1 and f"--expect {sha}" in bare.stderr
    assert "reorder_level: int = 10" in bare.stderr  # the diff it would have asked about
    wrong = ctxnb(gov, "accept", pid, "--expect", "0" * 64)
    assert wrong.returncode == 1 and "MERGE_DIFF_CHANGED" in wrong.stderr
    assert (gov / MODELS).read_text() == theirs and merge_records(gov) == []
    assert pid in ctxnb(gov, "list").stdout  # still waiting


def test_a_proposal_edited_after_it_was_shown_is_not_written(gov):
    """The yes is bound to the diff seen: a proposal file whose merged text was changed
    on disk after `show` (valid JSON, every field well typed) has another diff."""
    _, pid, _ = propose(gov)
    theirs = (gov / MODELS).read_text()
    sha = shown_sha(gov, pid)
    path = gov / ".ctxnb" / "merges" / f"{pid}.json"
    assert path.stat().st_mode & 0o777 == 0o600
    rec = json.loads(path.read_text())
    rec["merged"] = rec["merged"].replace("int = 10", "int = 99")
    path.write_text(json.dumps(rec))
    out = ctxnb(gov, "accept", pid, "--expect", sha)
    assert out.returncode == 1 and "MERGE_DIFF_CHANGED" in out.stderr
    assert (gov / MODELS).read_text() == theirs and merge_records(gov) == []


def test_a_file_changed_after_it_was_shown_is_not_written(gov):
    _, pid, _ = propose(gov)
    sha = shown_sha(gov, pid)
    later = (gov / MODELS).read_text() + "# one more change\n"
    (gov / MODELS).write_text(later)
    out = ctxnb(gov, "accept", pid, "--expect", sha)
    assert out.returncode == 1 and "STALE_FILE" in out.stderr
    assert (gov / MODELS).read_text() == later and merge_records(gov) == []


def test_another_sessions_lease_on_the_file_refuses_the_accept(gov):
    """The proposing session closed; another took *.py (models.py included): the merge
    would write a file that session owns now."""
    agent, pid, _ = propose(gov)
    agent.session.close()
    ws = Workspace.open(gov)
    rival = ws.tools(ws.session("rival"))
    assert rival.dispatch("select_active_intent", {"intent_id": "INT-ALL-PY"})["ok"]
    theirs = (gov / MODELS).read_text()
    out = ctxnb(gov, "accept", pid, "--expect", shown_sha(gov, pid))
    assert out.returncode == 1 and "SCOPE_OVERLAP" in out.stderr and "rival" in out.stderr
    assert (gov / MODELS).read_text() == theirs and merge_records(gov) == []


def test_reject_drops_it_and_a_damaged_or_unknown_one_is_named(gov):
    _, pid, _ = propose(gov)
    pid2 = "0123456789ab"  # a second proposal, cut short (a full disk, a crash)
    kept = (gov / ".ctxnb" / "merges" / f"{pid}.json").read_text()
    (gov / ".ctxnb" / "merges" / f"{pid2}.json").write_text(kept.replace(pid, pid2)[:100])
    shown = ctxnb(gov, "show", pid2)
    assert shown.returncode == 1 and "damaged" in shown.stderr
    assert f"ctxnb merge reject {pid2}" in shown.stderr and "Traceback" not in shown.stderr
    listed = ctxnb(gov, "list")
    assert pid in listed.stdout and pid2 not in listed.stdout and "damaged" in listed.stderr
    for gone in (pid, pid2):
        assert ctxnb(gov, "reject", gone).returncode == 0
    assert ctxnb(gov, "list").stdout.strip() == "no merge proposals"
    for bad in (pid, "../../etc/x"):
        out = ctxnb(gov, "show", bad)
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert "merge proposal" in out.stderr


def test_a_kept_proposal_is_written_only_for_the_session_that_made_it(gov):
    """Kept on disk, a proposal must not become any session's to write."""
    _, pid, _ = propose(gov)
    ws = Workspace.open(gov)
    other = ws.tools(ws.session("agent-2"))
    with pytest.raises(NotFoundError, match="agent-1"):
        other.merge_proposal(pid)
    assert other.dispatch("apply_merge", {"proposal_id": pid})["ok"] is False


def test_an_ungoverned_workspace_checks_the_hash_itself(tmp_path):
    """No intents, no approver: the CLI's own check is the only thing between a changed
    diff and the file."""
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    ws = Workspace.open(root)
    t = ws.tools(ws.session("s"))
    base = t.read_file("a.txt").sha256
    (root / "a.txt").write_text("one\ntwo\nTHREE\n")
    p = t.propose_merge("a.txt", "ONE\ntwo\nthree\n", base_sha256=base)
    out = ctxnb(root, "show", p.id)
    (sha,) = re.findall(r"^diff sha256 ([0-9a-f]{64})$", out.stdout, flags=re.M)
    wrong = ctxnb(root, "accept", p.id, "--expect", sha[::-1])
    assert wrong.returncode == 1 and "MERGE_DIFF_CHANGED" in wrong.stderr
    assert (root / "a.txt").read_text() == "one\ntwo\nTHREE\n"
    done = ctxnb(root, "accept", p.id, "--expect", sha)
    assert done.returncode == 0, done.stderr
    assert (root / "a.txt").read_text() == "ONE\ntwo\nTHREE\n"


def test_a_proposal_nobody_answered_expires(gov):
    from ctxnb.tools.merge_store import MERGE_TTL

    _, pid, _ = propose(gov)
    path = gov / ".ctxnb" / "merges" / f"{pid}.json"
    rec = json.loads(path.read_text())
    rec["created"] -= MERGE_TTL + 60
    path.write_text(json.dumps(rec))
    out = ctxnb(gov, "show", pid)
    assert out.returncode == 1 and "expired" in out.stderr
    assert not path.exists()
    assert ctxnb(gov, "list").stdout.strip() == "no merge proposals"
