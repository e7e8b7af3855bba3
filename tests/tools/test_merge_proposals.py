"""Merge proposals on a governed git repository: a stale write merged three ways, shown to
a human, written with its own trace record, and every way around it refused."""

from __future__ import annotations

import json
import secrets
import string
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _intents import ENGINE_INTENTS as INTENTS

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.approval import ApprovalRequest, CallbackApprover, QueueApprover
from ctxnb.hashing import sha256_hex

MODELS = "inventory/models.py"


@pytest.fixture
def gov(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return git_repo


def tools_for(root: Path, **kw: Any) -> Any:
    ws = Workspace.open(root)
    t = ws.tools(ws.session("agent-1"), caller="test-agent", **kw)
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    return t


def ledger(root: Path) -> list[dict]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def stale_edit(root: Path, t: Any) -> tuple[str, str, str]:
    """The agent reads, a person changes the bottom of the file, the agent's edit of the
    top is refused as stale. Returns (base, ours, theirs) texts."""
    r = t.read_file(MODELS)
    base = (root / MODELS).read_text()
    ours = base.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = base.replace("at or below its reorder level", "at or under its reorder level")
    (root / MODELS).write_text(theirs)  # a person's editor
    out = t.dispatch("write_file", {"path": MODELS, "content": ours, "expected_sha256": r.sha256})
    assert out["error_code"] == "STALE_FILE"
    return base, ours, theirs


def git_merge(tmp: Path, base: str, ours: str, theirs: str) -> str:
    for name, text in (("o", ours), ("b", base), ("t", theirs)):
        (tmp / name).write_text(text)
    r = subprocess.run(
        ["git", "merge-file", "-p", "--diff3", str(tmp / "o"), str(tmp / "b"), str(tmp / "t")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0
    return r.stdout


def test_approved_clean_merge_is_written_as_git_merges_and_traced(
    gov: Path, tmp_path: Path, test_data: Path
) -> None:
    asked: list[ApprovalRequest] = []
    t = tools_for(gov, approver=CallbackApprover(lambda req: asked.append(req) or True, by="ana"))
    base, ours, theirs = stale_edit(gov, t)
    p = t.dispatch("propose_merge", {"path": MODELS, "content": ours})
    assert p["ok"], p
    prop = p["result"]
    assert prop["ready"] and prop["conflicts"] == 0 and prop["resolved_by"] == "merge"
    done = t.dispatch("apply_merge", {"proposal_id": prop["proposal_id"]})
    assert done["ok"], done
    merged = git_merge(tmp_path, base, ours, theirs)
    assert (gov / MODELS).read_text() == merged
    # The human was asked with the diff from the file now to the merged text.
    from ctxnb.govern.approval import approval_question

    (req,) = asked
    q = approval_question(req)
    assert "merge proposal" in q and "-    reorder_level: int = 5" in q
    assert "+    reorder_level: int = 10" in q
    # Their change is in the file the diff starts from: it is context, not a change.
    changed = [ln for ln in q.splitlines() if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
    assert not any("under its reorder" in ln for ln in changed), changed
    rec = ledger(gov)[-1]
    meta = rec["metadata"]
    assert meta["mutation_class"] == "MERGE" and meta["tool"] == "apply_merge"
    assert meta["merged_from"] == {
        "base_sha256": sha256_hex(base.encode()),
        "ours_sha256": sha256_hex(ours.encode()),
        "theirs_sha256": sha256_hex(theirs.encode()),
    }
    assert meta["approval"]["by"] == "ana" and meta["approval"]["approved"] is True
    schema = json.loads((test_data / "agent-trace-0.1.0.schema.json").read_text())
    jsonschema.validate(rec, schema)


def test_a_base_the_store_does_not_hold_fails_closed(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    _, ours, theirs = stale_edit(gov, t)
    never = sha256_hex(b"a copy nobody stored\n")
    out = t.dispatch("propose_merge", {"path": MODELS, "content": ours, "base_sha256": never})
    assert (
        out["error_code"] == "MERGE_BASE_UNKNOWN"
        and "Read the file again" in out["required_action"]
    )
    assert (gov / MODELS).read_text() == theirs


def test_refused_or_unanswered_approval_changes_nothing(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: False, by="ana"))
    _, ours, theirs = stale_edit(gov, t)
    n = len(ledger(gov))
    pid = t.dispatch("propose_merge", {"path": MODELS, "content": ours})["result"]["proposal_id"]
    out = t.dispatch("apply_merge", {"proposal_id": pid})
    assert out["error_code"] == "APPROVAL_REJECTED"
    assert (gov / MODELS).read_text() == theirs
    assert not any(r["metadata"].get("mutation_class") == "MERGE" for r in ledger(gov)[n:])
    # Nobody answers the panel: the question times out, and nothing is written.
    t2 = tools_for(gov, approver=QueueApprover(timeout=0.3))
    pid = t2.propose_merge(MODELS, ours, base_sha256=sha256_hex(_base_of(gov))).id
    out = t2.dispatch("apply_merge", {"proposal_id": pid})
    assert out["ok"] is False and (gov / MODELS).read_text() == theirs


def _base_of(root: Path) -> bytes:
    out = subprocess.run(
        ["git", "show", f"HEAD:{MODELS}"], cwd=root, capture_output=True, check=True
    )
    return out.stdout


def test_file_changed_again_while_the_human_decides_is_stale_and_not_written(gov: Path) -> None:
    later = {"text": ""}

    def decide(req: ApprovalRequest) -> bool:
        # Someone saves the file while the question is open; the human then says yes.
        later["text"] = (gov / MODELS).read_text() + "# saved meanwhile\n"
        (gov / MODELS).write_text(later["text"])
        return True

    t = tools_for(gov, approver=CallbackApprover(decide, by="ana"))
    _, ours, _ = stale_edit(gov, t)
    pid = t.dispatch("propose_merge", {"path": MODELS, "content": ours})["result"]["proposal_id"]
    out = t.dispatch("apply_merge", {"proposal_id": pid})
    assert out["error_code"] == "STALE_FILE"
    assert (gov / MODELS).read_text() == later["text"]


def test_unresolved_conflicts_are_shown_with_markers_and_never_written(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    r = t.read_file(MODELS)
    base = (gov / MODELS).read_text()
    ours = base.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = base.replace("reorder_level: int = 5", "reorder_level: int = 7")
    (gov / MODELS).write_text(theirs)
    p = t.propose_merge(MODELS, ours, base_sha256=r.sha256)
    assert not p.ready and p.conflicts == 1 and p.resolved_by is None
    assert "<<<<<<< ours" in p.shown and ">>>>>>> theirs" in p.shown
    out = t.dispatch("apply_merge", {"proposal_id": p.id})
    assert out["error_code"] == "MERGE_UNRESOLVED"
    assert (gov / MODELS).read_text() == theirs


def test_a_merge_outside_the_intents_scope_is_refused(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    path = "web/app.js"
    r = t.read_file(path)
    base = (gov / path).read_text()
    (gov / path).write_text(base + "// theirs\n")
    p = t.propose_merge(path, "// ours\n" + base, base_sha256=r.sha256)
    assert p.ready
    out = t.dispatch("apply_merge", {"proposal_id": p.id})
    assert out["error_code"] == "SCOPE_VIOLATION"
    assert (gov / path).read_text() == base + "// theirs\n"


def test_an_unknown_proposal_id_is_not_found(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    out = t.dispatch("apply_merge", {"proposal_id": "0123456789ab"})
    assert out["ok"] is False and out["error_code"] == "NOT_FOUND"


# -- the review backend ------------------------------------------------------------------
class Reviewer:
    """A review backend that answers what the test scripts, and keeps what it was sent."""

    name = "scripted-reviewer"

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def review(self, request: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(request)
        return self.answer(request) if callable(self.answer) else self.answer


def _token() -> str:
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


def conflicted(root: Path, t: Any, *, secret: str | None = None) -> tuple[str, str, str, str]:
    """A conflict on the reorder level (ours 10, theirs 7); with ``secret``, a line
    holding it sits right above the conflict."""
    path = MODELS
    text = (root / path).read_text()
    if secret:
        text = text.replace("    sku: str\n", f'    sku: str\n    api_token = "{secret}"\n', 1)
        (root / path).write_text(text)
    r = t.read_file(path)
    ours = text.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = text.replace("reorder_level: int = 5", "reorder_level: int = 7")
    (root / path).write_text(theirs)
    return r.sha256, text, ours, theirs


def resolution(request: dict[str, Any], text: str, **over: Any) -> dict[str, Any]:
    c = request["conflicts"][0]
    item = {"path": MODELS, "start_line": c["start_line"], "end_line": c["end_line"], "text": text}
    return {"resolutions": [{**item, **over}]}


def test_a_reviewers_resolution_is_written_after_approval(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    base_sha, _, _, theirs = conflicted(gov, t)
    rev = Reviewer(lambda req: resolution(req, "    reorder_level: int = 10\n"))
    p = t.propose_merge(MODELS, theirs.replace("= 7", "= 10"), base_sha256=base_sha, reviewer=rev)
    assert p.ready and p.resolved_by == "scripted-reviewer"
    assert t.apply_merge(p.id).success
    assert "reorder_level: int = 10\n" in (gov / MODELS).read_text()
    assert ledger(gov)[-1]["metadata"]["mutation_class"] == "MERGE"


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("wider range", lambda req: resolution(req, "x\n", start_line=1)),
        ("other file", lambda req: resolution(req, "x = 1\n", path="web/app.js")),
        ("out of scope", lambda req: resolution(req, "x = 1\n", path="../outside.py")),
        ("secret", lambda req: resolution(req, f"    reorder_level: int = 10  # {_token()}\n")),
        ("redaction marker", lambda req: resolution(req, "[REDACTED:github-token]\n")),
        ("markers left", lambda req: resolution(req, "<<<<<<< ours\nx\n")),
        ("nothing", lambda req: {"resolutions": []}),
        ("twice", lambda req: {"resolutions": resolution(req, "a\n")["resolutions"] * 2}),
        ("not json", lambda req: "sure, use 10"),
    ],
)
def test_a_review_that_reaches_beyond_its_conflicts_is_refused(
    gov: Path, name: str, answer: Any
) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    base_sha, _, ours, theirs = conflicted(gov, t)
    p = t.propose_merge(MODELS, ours, base_sha256=base_sha, reviewer=Reviewer(answer))
    assert not p.ready, name
    assert p.review_refused and "refused" in p.review_refused
    assert t.dispatch("apply_merge", {"proposal_id": p.id})["error_code"] == "MERGE_UNRESOLVED"
    assert (gov / MODELS).read_text() == theirs


def test_what_the_reviewer_is_sent_is_redacted_and_only_the_conflict(gov: Path) -> None:
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    token = _token()
    base_sha, _, ours, _ = conflicted(gov, t, secret=token)
    rev = Reviewer({"resolutions": []})
    t.propose_merge(MODELS, ours, base_sha256=base_sha, reviewer=rev)
    (sent,) = rev.sent
    wire = json.dumps(sent)
    assert token not in wire and "[REDACTED:" in wire
    (c,) = sent["conflicts"]
    assert c["ours"] == "    reorder_level: int = 10\n"
    assert c["theirs"] == "    reorder_level: int = 7\n"
    # Three lines around the conflict, not the file: the docstrings far below are not sent.
    assert "Units of `sku` in stock" not in wire and len(c["before"].splitlines()) == 3


def test_a_proposal_is_written_once_and_only_by_the_session_that_made_it(gov: Path) -> None:
    # Two agents under one intent at once: they say they share its scope.
    (gov / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    _, ours, _ = stale_edit(gov, t)
    pid = t.dispatch("propose_merge", {"path": MODELS, "content": ours})["result"]["proposal_id"]
    # Another session (another agent) cannot write this session's proposal.
    ws = Workspace.open(gov)
    other = ws.tools(ws.session("agent-2"), caller="other-agent",
                     approver=CallbackApprover(lambda req: True, by="ana"))  # fmt: skip
    assert other.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    assert other.dispatch("apply_merge", {"proposal_id": pid})["error_code"] == "NOT_FOUND"
    assert t.dispatch("apply_merge", {"proposal_id": pid})["ok"]
    written = (gov / MODELS).read_text()
    # A replay of the same call writes nothing again.
    again = t.dispatch("apply_merge", {"proposal_id": pid})
    assert again["error_code"] == "NOT_FOUND" and (gov / MODELS).read_text() == written


def test_a_stale_patch_is_merged_from_its_diff(gov: Path, tmp_path: Path) -> None:
    from ctxnb.tools.patching import unified_diff

    t = tools_for(gov, approver=CallbackApprover(lambda req: True, by="ana"))
    r = t.read_file(MODELS)
    base = (gov / MODELS).read_text()
    ours = base.replace("reorder_level: int = 5", "reorder_level: int = 10")
    theirs = base.replace("at or below its reorder level", "at or under its reorder level")
    (gov / MODELS).write_text(theirs)
    patch = unified_diff(base, ours, fromfile=f"a/{MODELS}", tofile=f"b/{MODELS}")
    args = {"path": MODELS, "unified_diff": patch, "expected_sha256": r.sha256}
    assert t.dispatch("apply_patch", args)["error_code"] == "STALE_FILE"
    p = t.dispatch("propose_merge", {"path": MODELS, "unified_diff": patch})
    assert p["ok"] and p["result"]["ready"], p
    assert t.dispatch("apply_merge", {"proposal_id": p["result"]["proposal_id"]})["ok"]
    assert (gov / MODELS).read_text() == git_merge(tmp_path, base, ours, theirs)
    # Both forms at once, or a diff that does not apply to its base: refused, not guessed.
    both = t.dispatch("propose_merge", {"path": MODELS, "content": ours, "unified_diff": patch})
    assert both["error_code"] == "INVALID_ARGUMENTS"
    wrong = patch.replace("-    reorder_level: int = 5", "-    reorder_level: int = 6")
    off = t.dispatch("propose_merge", {"path": MODELS, "unified_diff": wrong,
                                       "base_sha256": r.sha256})  # fmt: skip
    assert off["ok"] is False and off["error_code"] == "PATCH_CONFLICT"
