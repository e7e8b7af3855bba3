"""``ws.why`` and ``ctxnb why``: which trace record wrote a line, and the context it had.

Governed sessions write files through the real tools; ``git diff`` is the reference
for which lines changed. The rewrite matrix is in ``tests/govern/test_why_rewrites.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _git import git
from _intents import ENGINE_INTENTS as INTENTS

from ctxnb import Workspace
from ctxnb.cli.app import main
from ctxnb.errors import CtxnbError, NotFoundError, PolicyError
from ctxnb.govern import init_governance
from ctxnb.govern.ledger import TraceLedger, build_trace_record
from ctxnb.tools.patching import changed_line_ranges

MODEL = "anthropic/claude-test"


def added_lines(root: Path, *rev: str) -> dict[str, set[int]]:
    """The reference: per file, the new-side line numbers ``git diff -U0`` shows as added."""
    out = git(root, "diff", "-U0", "--no-color", *rev)
    added: dict[str, set[int]] = {}
    path = None
    for line in out.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and path is not None:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            assert m is not None
            start, count = int(m[1]), int(m[2] if m[2] is not None else 1)
            added.setdefault(path, set()).update(range(start, start + count))
    return added


@pytest.fixture
def gov(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    # ctxnb's own state is not the project's history.
    (git_repo / ".git" / "info" / "exclude").write_text(".ctxnb/\n.orchestration/\n")
    return git_repo


def append(root: Path, **kw) -> dict:
    args = {
        "intent_id": "INT-001",
        "session_id": None,
        "model_id": MODEL,
        "repo_root": root,
        "tool": "write_file",
    }
    rec = build_trace_record(**{**args, **kw})
    TraceLedger(root / ".orchestration" / "agent_trace.jsonl").append(rec)
    return rec


def edit(root: Path, rel: str, new: str, **kw) -> dict:
    """A change written and recorded as ctxnb's recorders do (record, then a version)."""
    path = root / rel
    old = path.read_text() if path.exists() else ""
    path.write_text(new)
    rec = append(root, file_path=rel, ranges=changed_line_ranges(old, new), new_text=new, **kw)
    with Workspace.open(root) as ws:
        ws.observe([rel])
    return rec


# -- a governed session ----------------------------------------------------------------------
def test_every_line_a_governed_session_wrote_resolves_to_its_record(gov: Path):
    ws = Workspace.open(gov)
    session = ws.session("agent-1")
    tools = ws.tools(session, caller="test-agent", model_id=MODEL)
    assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    rel = "inventory/models.py"
    r = tools.read_file(rel)
    first = r.content.replace("reorder_level: int = 5", "reorder_level: int = 10")
    first = first.replace('    """A thing we keep in stock."""\n', '    """A stocked thing."""\n')
    first += "\n\ndef total(items: list[Item]) -> int:\n    return len(items)\n"
    assert tools.write_file(rel, first, expected_sha256=r.sha256).success
    git(gov, "commit", "-qam", "first write")
    r = tools.read_file(rel)
    second = r.content.replace("    return len(items)\n", "    return sum(1 for _ in items)\n")
    second = second.replace("from datetime import datetime\n", "import datetime as dt\n")
    assert tools.write_file(rel, second, expected_sha256=r.sha256).success
    records = list(TraceLedger(gov / ".orchestration" / "agent_trace.jsonl").records(file=rel))
    assert len(records) == 2

    by_second = added_lines(gov, "HEAD")[rel]
    by_first = added_lines(gov, "HEAD~1")[rel] - by_second
    assert by_first and by_second
    result = ws.why(rel)
    n_lines = len(second.splitlines())
    assert len(result.lines) == n_lines
    for lw in result.lines:
        want = (
            records[1]["id"]
            if lw.line in by_second
            else records[0]["id"]
            if lw.line in by_first
            else None
        )
        got = result.records[lw.record].record_id if lw.record else None
        assert got == want, (lw.line, lw.text)
    # Lines the second write shifted are still the first write's.
    assert {result.line(n).match for n in by_first} <= {"in place", "moved", "partial"}
    rec = result.record_for(max(by_second))
    assert rec is not None
    assert (rec.contributor_type, rec.model_id, rec.intent_id) == ("ai", MODEL, "INT-001")
    assert (rec.tool, rec.session_id) == ("write_file", "agent-1")
    assert rec.mutation_class in ("AST_REFACTOR", "INTENT_EVOLUTION")
    # No line is claimed by two contributors here.
    assert not any(lw.ambiguous for lw in result.lines)
    session.close()
    ws.close()


def test_the_demo_session_every_changed_line_answers_through_the_cli(tmp_path: Path):
    from ctxnb import demo

    with contextlib.redirect_stdout(io.StringIO()):
        demo.run(tmp_path)
    root = tmp_path / "tinyinv"
    changed = added_lines(root)
    assert {"inventory/models.py", "tests/test_models.py"} <= set(changed)
    with Workspace.open(root) as ws:
        for rel, lines in changed.items():
            result = ws.why(rel)
            for lw in result.lines:
                rec = result.records[lw.record] if lw.record else None
                if lw.text == demo.PERSONS_LINE.rstrip("\n"):
                    # The person's edit between the agent's writes is no record's.
                    assert rec is None, (rel, lw.line, lw.text)
                elif lw.line in lines:
                    assert rec is not None, (rel, lw.line, lw.text)
                    assert (rec.contributor_type, rec.model_id, rec.intent_id) == (
                        "ai",
                        "example/scripted-agent",
                        "INT-001",
                    )
                else:
                    assert rec is None, (rel, lw.line, lw.text)
    # Once through the real command: a new process, isolated, answering in JSON for
    # every line of a changed file.
    rel = "tests/test_models.py"
    proc = subprocess.run(
        [sys.executable, "-I", "-m", "ctxnb", "why", rel, "-w", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["path"] == rel and data["asked"] is None
    answered = {ln["line"]: ln["record"] for ln in data["lines"]}
    assert {n for n, key in answered.items() if key is not None} == changed[rel]
    for n in changed[rel]:
        rec = data["records"][answered[n]]
        assert (rec["model_id"], rec["intent_id"], rec["tool"], rec["session_id"]) == (
            "example/scripted-agent",
            "INT-001",
            "write_file",
            "demo-agent",
        )


# -- the context the model had -------------------------------------------------------------------
def test_the_context_at_the_records_turn_is_rebuilt_exactly(gov: Path):
    ws = Workspace.open(gov)
    s = ws.session("s-ctx", system_prompt="Be careful.")
    s.add_path("inventory/models.py")
    s.add_turn("user", "Raise the reorder level.")
    s.add_turn("assistant", "Reading models.py.")
    s.add_turn("user", "Go ahead.")
    seen = s.assemble()  # turn 3: what the model had
    assert seen.turn == 3
    rel = "inventory/models.py"
    new = (gov / rel).read_text().replace("= 5", "= 10")
    edit(gov, rel, new, session_id="s-ctx", extra_metadata={"turn": 3, "context_id": seen.hash})
    # Later turns change the file and the context again; turn 3 stays as it was.
    s.add_turn("assistant", "Done.")
    (gov / rel).write_text(new + "# later\n")
    ws.observe([rel])
    s.refresh(s.find(rel) or "")
    later = s.assemble()
    assert later.hash != seen.hash
    before = ws.store.latest_tx()

    n = new.splitlines().index("    reorder_level: int = 10") + 1
    result = ws.why(rel, n)
    rec = result.record_for(n)
    assert rec is not None and (rec.session_id, rec.turn) == ("s-ctx", 3)
    ctx = result.context(n)
    assert ctx is not None
    assert ctx.hash == seen.hash and ctx.to_text() == seen.to_text()
    assert "reorder_level: int = 5" in ctx.to_text()  # the file as the model saw it
    assert "the recorded context id" in rec.context_note
    assert "turn 3" in str(result)
    assert ws.store.latest_tx() == before, "asking why wrote to the store"

    # Each way the context cannot be rebuilt is said, not raised.
    edit(gov, rel, new + "a = 1\n", session_id="s-ctx", extra_metadata={"turn": 2})
    edit(gov, rel, new + "a = 1\nb = 2\n", session_id="nobody", extra_metadata={"turn": 1})
    edit(gov, rel, new + "a = 1\nb = 2\nc = 3\n", session_id="s-ctx",
         extra_metadata={"turn": 3, "context_id": "not-this-one"})  # fmt: skip
    edit(gov, rel, new + "a = 1\nb = 2\nc = 3\nd = 4\n", session_id="s-ctx")
    m = len(new.splitlines())
    notes = [ws.why(rel, k).record_for(k).context_note for k in range(m + 1, m + 5)]  # type: ignore[union-attr]
    assert "no context was recorded at turn 2" in notes[0]
    assert "'nobody' is not in this store" in notes[1]
    assert "not the recorded context id" in notes[2]
    assert "names no turn" in notes[3]
    rebuilt = [ws.why(rel, k).context(k) for k in range(m + 1, m + 5)]
    assert rebuilt[0] is None and rebuilt[1] is None and rebuilt[3] is None
    # Rebuilt all the same when the recorded id differs: the note says so.
    assert rebuilt[2] is not None and rebuilt[2].hash == seen.hash
    # The CLI prints the rebuilt context on request.
    code, out, _ = run_cli(["why", f"{gov / rel}:{n}", "-w", str(gov), "--context"])
    assert code == 0 and seen.to_text().strip().splitlines()[0] in out
    assert "--- context of record" in out
    s.close()
    ws.close()


def test_approval_is_shown_with_who_when_and_the_diff_hash(gov: Path):
    rel = "inventory/store.py"
    approval = {"approved": True, "by": "alice", "at": "2030-01-02T03:04:05+00:00",
                "note": "", "request_id": "r1", "diff_hash": "sha256:" + "ab" * 32}  # fmt: skip
    text = (gov / rel).read_text() + "# approved change\n"
    edit(gov, rel, text, extra_metadata={"approval": approval}, mutation_class="AST_REFACTOR")
    n = len(text.splitlines())
    with Workspace.open(gov) as ws:
        result = ws.why(rel, n)
    rec = result.record_for(n)
    assert rec is not None and rec.approval is not None
    assert (rec.approval.approved, rec.approval.by, rec.approval.at) == (
        True,
        "alice",
        "2030-01-02T03:04:05+00:00",
    )
    assert rec.approval.diff_hash == approval["diff_hash"]
    shown = str(result)
    assert "approved by alice at 2030-01-02T03:04:05+00:00" in shown
    assert approval["diff_hash"] in shown and "AST_REFACTOR" in shown


# -- matching ----------------------------------------------------------------------------------
def test_a_line_two_contributors_wrote_goes_to_the_newest_and_is_ambiguous(gov: Path):
    rel = "inventory/report.py"
    base = (gov / rel).read_text()
    same = base + "RESULT = None\n"
    n = len(same.splitlines())
    a = edit(gov, rel, same)  # the AI writes the line
    # A human removes it, then writes the very same line again (recorded).
    (gov / rel).write_text(base)
    h = edit(gov, rel, same, contributor_type="human", model_id=None, tool="human-edit")
    with Workspace.open(gov) as ws:
        lw = ws.why(rel, n).lines[0]
        assert lw.record == h["id"] and lw.ambiguous and lw.others == (a["id"],)
        assert "ambiguous" in str(ws.why(rel, n))
    # The same AI writing it twice is not ambiguous: the newest record answers.
    (gov / rel).write_text(base)
    a2 = edit(gov, rel, same)
    with Workspace.open(gov) as ws:
        lw = ws.why(rel, n).lines[0]
    assert lw.record == a2["id"] and lw.ambiguous  # the human's record still claims it
    assert set(lw.others) == {h["id"]}


def test_without_stored_versions_a_range_is_found_by_its_hash(gov: Path):
    """Records from a writer that stored no version: moved ranges are found by their
    content hash; a blank line alone is never matched elsewhere; a range changed since
    is nobody's rather than a wrong one's."""
    rel = "docs/notes.md"
    (gov / "docs").mkdir(exist_ok=True)
    text = "intro\n\nstep one\nstep two\n\nend\n"
    (gov / rel).write_text(text)
    block = append(gov, file_path=rel, ranges=[(3, 4)], new_text=text)
    blank = append(gov, file_path=rel, ranges=[(2, 2)], new_text=text)
    edited = append(gov, file_path=rel, ranges=[(6, 6)], new_text=text)
    (gov / rel).write_text("new header\nsub\n" + text.replace("end\n", "the end\n"))
    with Workspace.open(gov) as ws:
        result = ws.why(rel)
    got = {lw.line: (lw.record, lw.match) for lw in result.lines}
    assert got[5] == got[6] == (block["id"], "moved")
    assert all(got[k] == (None, None) for k in (1, 2, 3, 4, 7, 8))
    assert blank["id"] not in result.records and edited["id"] not in result.records


def test_records_of_other_files_and_damaged_lines_do_not_answer(gov: Path):
    rel = "inventory/models.py"
    text = (gov / rel).read_text()
    append(gov, file_path="inventory/store.py", ranges=[(1, 3)], new_text=text)
    with open(gov / ".orchestration" / "agent_trace.jsonl", "a") as fh:
        fh.write('{"cut": \n')
    with Workspace.open(gov) as ws:
        result = ws.why(rel)
    assert result.records == {} and len(result.unattributed) == len(text.splitlines())
    assert result.skipped_ledger_lines == 1
    assert "1 damaged ledger line" in str(result)


def test_a_secret_in_a_line_leaves_redacted(gov: Path):
    from _secret_corpus import GH

    token = GH + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    rel = "inventory/settings.py"
    edit(gov, rel, f'TOKEN = "{token}"\n')
    with Workspace.open(gov) as ws:
        result = ws.why(rel, 1)
    assert result.lines[0].record is not None
    assert token not in str(result) and token not in result.to_json()
    code, out, _ = run_cli(["why", f"{gov / rel}:1", "-w", str(gov), "--json"])
    assert code == 0 and token not in out and "REDACTED" in out


# -- bad input ------------------------------------------------------------------------------
def test_bad_input_is_one_clear_error(gov: Path, tmp_path: Path):
    ws = Workspace.open(gov)
    rel = "inventory/models.py"
    n = len((gov / rel).read_text().splitlines())
    with pytest.raises(NotFoundError, match="no such file"):
        ws.why("inventory/nope.py")
    for bad in (0, n + 1):
        with pytest.raises(NotFoundError, match=rf"has {n} line\(s\); line {bad} is out of range"):
            ws.why(rel, bad)
    (gov / ".env").write_text("A=1\n")
    with pytest.raises(PolicyError):
        ws.why(".env")
    with pytest.raises(CtxnbError):
        ws.why("inventory")  # a directory
    with pytest.raises(CtxnbError):
        ws.why(str(tmp_path))  # outside the workspace
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")
    with pytest.raises(NotFoundError, match="not governed.*ctxnb init-governance"):
        Workspace.open(plain).why("a.py")
    ws.close()
    # The CLI: one line on stderr, exit 1.
    for args in (["why", "inventory/nope.py"], ["why", f"{rel}:{n + 1}"]):
        code, out, err = run_cli([*args, "-w", str(gov)])
        assert code == 1 and out == "" and err.count("\n") == 1
        assert err.startswith("ctxnb why: error: ")
    # Opening the workspace created no store there, so the CLI says that first.
    assert not (plain / ".ctxnb").exists()
    code, _, err = run_cli(["why", "a.py", "-w", str(plain)])
    assert code == 1 and "is not a ctxnb workspace" in err
    code, _, err = run_cli(["index", str(plain)])
    assert code == 0
    code, _, err = run_cli(["why", "a.py", "-w", str(plain)])
    assert code == 1 and "not governed" in err


# -- the CLI ---------------------------------------------------------------------------------
def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def test_cli_prints_a_file_a_line_and_json(gov: Path):
    rel = "inventory/report.py"
    text = (gov / rel).read_text() + "def extra():\n    return 1\n"
    rec = edit(gov, rel, text)
    n = len(text.splitlines())
    os.chdir(gov / "inventory")  # FILE relative to the current directory
    code, out, _ = run_cli(["why", "report.py", "-w", str(gov)])
    assert code == 0
    assert f"{n - 1}-{n}" in out and f"ai ({MODEL})" in out and "INT-001" in out
    assert "no record" in out and f"record {rec['id']}" in out
    code, out, _ = run_cli(["why", f"report.py:{n}", "-w", str(gov)])
    assert code == 0 and out.startswith(f"{rel}:{n}:     return 1")
    code, out, _ = run_cli(["why", f"report.py:{n}", "-w", str(gov), "--json"])
    data = json.loads(out)
    assert data["path"] == rel and data["lines"][0]["record"] == rec["id"]
    assert data["records"][rec["id"]]["contributor_type"] == "ai"
    # A file whose name ends in :digits is that file, not a line of another.
    (gov / "inventory" / "odd:2").write_text("x\n")
    code, out, _ = run_cli(["why", "odd:2", "-w", str(gov)])
    assert code == 0 and out.startswith("inventory/odd:2: 1 lines")


def test_a_blank_line_is_told_apart_from_another_blank_line_at_its_old_place(gov: Path):
    """The AI wrote one blank line (line 2); two lines inserted at the top move it down
    and put another blank line at line 2. The diff with the stored version follows the
    AI's line; the hash at the recorded position alone would take the other one."""
    rel = "inventory/blank.py"
    (gov / rel).write_text("a = 1\nb = 2\nc = 3\n")
    with Workspace.open(gov) as ws:
        ws.observe([rel])
    rec = edit(gov, rel, "a = 1\n\nb = 2\nc = 3\n")  # line 2, blank
    (gov / rel).write_text("x = 0\n\na = 1\n\nb = 2\nc = 3\n")  # unrecorded: lines 1-2
    with Workspace.open(gov) as ws:
        result = ws.why(rel)
    got = {lw.line: lw.record for lw in result.lines}
    assert got == {1: None, 2: None, 3: None, 4: rec["id"], 5: None, 6: None}
    assert result.line(4).match == "moved"


def test_a_workspace_below_the_git_root(tmp_path: Path):
    """Records name files relative to the git top level; the workspace is a folder in it."""
    top = tmp_path / "mono"
    ws_root = top / "services" / "api"
    ws_root.mkdir(parents=True)
    git(top, "init", "-q", "-b", "main")
    init_governance(ws_root)
    (ws_root / "a.py").write_text("x = 1\n")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "init")
    rec = edit(ws_root, "a.py", "x = 1\ny = 2\n")
    assert rec["files"][0]["path"] == "services/api/a.py"
    with Workspace.open(ws_root) as ws:
        result = ws.why("a.py")
    assert [lw.record for lw in result.lines] == [None, rec["id"]]
    assert result.path == "a.py"
    assert result.records[rec["id"]].revision == git(top, "rev-parse", "HEAD")


def test_line_endings_and_trailing_blanks_do_not_break_a_match(gov: Path):
    """The content hash ignores CRLF and trailing blanks; so does the line match."""
    rel = "inventory/crlf.py"
    (gov / rel).write_bytes(b"a = 1\r\nb = 2\r\n")
    with Workspace.open(gov) as ws:
        ws.observe([rel])
    path = gov / rel
    old = path.read_bytes().decode()
    new = old + "def f():\r\n    return 3\r\n"
    path.write_bytes(new.encode())
    rec = append(gov, file_path=rel, ranges=changed_line_ranges(old, new), new_text=new)
    with Workspace.open(gov) as ws:
        ws.observe([rel])
    # Re-saved with LF endings, trailing blanks added, and a line inserted on top.
    path.write_bytes(b"import os\n" + new.replace("\r\n", "\n").replace("f():", "f():  ").encode())
    with Workspace.open(gov) as ws:
        result = ws.why(rel)
    assert [lw.record for lw in result.lines] == [None, None, None, rec["id"], rec["id"]]
    assert {result.line(4).match, result.line(5).match} == {"moved"}


def test_the_recorder_names_the_context_the_model_had_and_why_rebuilds_it(gov: Path):
    """No hand-made metadata: the engine records the turn and the context id itself."""
    ws = Workspace.open(gov)
    session = ws.session("agent-ctx")
    tools = ws.tools(session, caller="test-agent", model_id=MODEL)
    assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    rel = "inventory/models.py"
    r = tools.read_file(rel)
    session.add_turn("user", "raise the reorder level")
    seen = session.assemble()  # what the model had when it asked for the edit
    new = r.content.replace("reorder_level: int = 5", "reorder_level: int = 10")
    assert tools.write_file(rel, new, expected_sha256=r.sha256).success
    (record,) = TraceLedger(gov / ".orchestration" / "agent_trace.jsonl").records(file=rel)
    assert record["metadata"]["turn"] == seen.turn == 1
    assert record["metadata"]["context_id"] == seen.hash
    line = new.splitlines().index("    reorder_level: int = 10") + 1
    rebuilt = ws.why(rel, line, context=True).context(line)
    assert rebuilt is not None and rebuilt.hash == seen.hash
    session.close()
    ws.close()
