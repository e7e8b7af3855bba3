"""Claude Code's ``PostCompact``: the compaction joins the session's auditable record of
what left the context (``compacted`` changes, restorable from the store), through the
real ``ctxnb hook post-compact`` process and a real Claude Code transcript (the vendored
spotter session, compacted once, automatically, at its line 1256)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from _claude_hook_process import hook_process
from _paths import TESTS

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.integrations.claude_code_install import install_settings

DATA = TESTS / "data" / "claude-code-hooks"
SID = "258c7280-ae70-4798-800f-63464d01a85d"
TRANSCRIPT = TESTS / "data" / "trajectories" / "claude-code" / f"{SID}.jsonl"
BOUNDARY = 1255  # the 0-based line of the transcript's compact_boundary; the summary follows


def _lines() -> list[str]:
    return TRANSCRIPT.read_text().splitlines()


def summary() -> str:
    return str(json.loads(_lines()[BOUNDARY + 1])["message"]["content"])


def tool_results() -> list[dict[str, Any]]:
    """The tool results before the boundary, read from the raw JSON (not ctxnb's reader)."""
    out = []
    for line in _lines()[:BOUNDARY]:
        rec = json.loads(line)
        content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
        if isinstance(content, list):
            out += [c for c in content if isinstance(c, dict) and c.get("type") == "tool_result"]
    return out


def transcript(tmp_path: Path, upto: int) -> Path:
    """The transcript as Claude Code had written it when the hook ran: its first lines."""
    path = tmp_path / "transcript.jsonl"
    path.write_text("\n".join(_lines()[:upto]) + "\n")
    return path


def governed(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "README.md").write_text("# proj\n")
    init_governance(root)
    return root


def post_compact(root: Path, transcript_path: Path | str, **extra: Any) -> Any:
    payload = json.loads((DATA / "post-compact.json").read_text())
    payload.update(cwd=str(root), session_id=SID, transcript_path=str(transcript_path))
    payload.update(compact_summary=summary(), **extra)
    return hook_process("post-compact", payload)


def compaction(root: Path) -> tuple[Any, list[Any]]:
    """The Claude Code session's last recorded context and its compacted changes."""
    ws = Workspace.open(root)
    session = ws.session(f"claude-code-{SID}", excerpts=False)
    changes = session.context_changes(session.turn)
    return session, [c for c in changes if c.op == "compacted"]


def audit(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".ctxnb" / "audit.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["tool"] == "PostCompact"]


def test_a_compaction_records_every_dropped_result_restorable_from_the_store(tmp_path):
    root = governed(tmp_path)
    result = post_compact(root, transcript(tmp_path, BOUNDARY + 2))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    session, dropped = compaction(root)
    expected = tool_results()
    assert len(expected) == 124 and len(dropped) == len(expected)
    assert {c.by for c in dropped} == {"claude-code-compaction"}
    # The first shows the summary, each other a one-line placeholder of what it was.
    assert sum(c.tokens_after for c in dropped[1:]) < sum(c.tokens_before for c in dropped) / 10
    # What the model saw next: the summary in the results' place, none of the results.
    shown = session.context_at(session.turn).to_text()
    last = str(expected[-1]["content"] if isinstance(expected[-1]["content"], str) else "")
    assert summary()[:200] in shown
    # Each result comes back from the store exactly as it was stored: the last one here.
    restored = session.restore_item(dropped[-1])["content"]
    probe = next(line for line in reversed(last.splitlines()) if len(line.strip()) > 20)
    assert probe.strip() in restored and probe.strip() not in shown
    (line,) = audit(root)
    assert line["success"] and line["args"]["dropped"] == 124 and line["args"]["trigger"] == "auto"
    assert line["session_id"] == SID and line["caller"] == "claude-code"
    # The summary's reading: which results it does not mention (checkable by eye).
    assert 0 < len(line["args"]["not_in_summary"]) < 124


def test_a_transcript_without_its_boundary_yet_gives_the_same_results(tmp_path):
    # Whether Claude Code wrote the boundary before or after running the hook, the same
    # part of the conversation is the one compacted.
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    a, b = governed(before), governed(after)
    assert post_compact(a, transcript(before, BOUNDARY)).exit_code == 0
    assert post_compact(b, transcript(after, BOUNDARY + 2)).exit_code == 0
    got = [[(c.label, c.tokens_before) for c in compaction(r)[1]] for r in (a, b)]
    assert got[0] == got[1] and len(got[0]) == 124


def test_the_same_compaction_delivered_twice_stores_each_result_once(tmp_path):
    root = governed(tmp_path)
    path = transcript(tmp_path, BOUNDARY + 2)
    for _ in range(2):
        assert post_compact(root, path).exit_code == 0
    session, dropped = compaction(root)
    assert len(dropped) == 124
    calls = [session.get(i) for i in session.session_index]
    stored = [d for d in calls if d.get("type") == "toolcall" and "transcript_step" in d["args"]]
    assert len(stored) == 124 and len(audit(root)) == 2


def test_a_secret_a_dropped_result_printed_is_stored_redacted(tmp_path):
    # Claude Code's Bash printed a token; the compaction stores the result, never the token.
    token = "ghp_" + secrets.token_hex(18)
    root = governed(tmp_path)
    records = [
        {"type": "user", "uuid": "u1", "parentUuid": None,
         "message": {"role": "user", "content": "Show the deploy settings"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
         "message": {"id": "m1", "role": "assistant", "content": [
             {"type": "tool_use", "id": "t1", "name": "Bash",
              "input": {"command": "cat deploy.env"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "message": {"role": "user",
         "content": [{"type": "tool_result", "tool_use_id": "t1",
                      "content": f"REGION=eu-west-1\nGITHUB_TOKEN={token}\n"}]}},
    ]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert post_compact(root, path).exit_code == 0
    session, (change,) = compaction(root)
    restored = session.restore_item(change)["content"]
    assert "REGION=eu-west-1" in restored and token not in restored
    stored = b"".join(p.read_bytes() for p in (root / ".ctxnb").rglob("*") if p.is_file())
    assert token.encode() not in stored


def test_an_unreadable_transcript_records_the_summary_and_tells_the_user(tmp_path):
    root = governed(tmp_path)
    not_claude = tmp_path / "run.json"
    not_claude.write_text('{"trajectory_format": "mini-swe-agent-1", "messages": []}')
    for path in (tmp_path / "gone.jsonl", not_claude, "relative.jsonl"):
        result = post_compact(root, path)
        assert result.exit_code == 0
        told = result.answer["systemMessage"]
        assert "summary was recorded" in told and "not restorable" in told
    lines = audit(root)
    assert [r["error_code"] for r in lines] == ["TRANSCRIPT_UNREADABLE"] * 3
    assert all(r["args"]["summary_chars"] == len(summary()) for r in lines)


def test_a_payload_without_a_summary_or_with_an_unknown_trigger_is_a_clean_error(tmp_path):
    root = governed(tmp_path)
    path = transcript(tmp_path, 10)
    payload = json.loads((DATA / "post-compact.json").read_text())
    payload.update(cwd=str(root), session_id=SID, transcript_path=str(path))
    del payload["compact_summary"]
    result = hook_process("post-compact", payload)
    assert result.exit_code == 1 and "'compact_summary'" in result.stderr
    result = post_compact(root, path, trigger="sometimes")
    assert result.exit_code == 1 and "'trigger' must be one of manual, auto" in result.stderr
    assert not (root / ".ctxnb" / "audit.jsonl").exists()


def test_an_ungoverned_project_records_nothing(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    result = post_compact(root, transcript(tmp_path, BOUNDARY + 2))
    assert (result.exit_code, result.stdout) == (0, "")
    assert not (root / ".ctxnb").exists()


def test_hook_install_answers_post_compact_for_both_triggers(tmp_path):
    path, _ = install_settings(tmp_path)
    (group,) = json.loads(path.read_text())["hooks"]["PostCompact"]
    assert "matcher" not in group  # manual /compact and auto alike
    assert group["hooks"][0]["command"].endswith(" hook post-compact")
