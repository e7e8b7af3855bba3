"""More exits toward a model or a log, each driven the way an agent or a user reaches it,
with a generated secret in a command, a file's content or a file's name; and one door by
which an agent could have written ctxnb's own settings."""

from __future__ import annotations

import json
import os
from pathlib import Path

from _git import git

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.approval import CallbackApprover

# Generated, not real: built from parts so that no scanner takes them for a secret.
TOKEN = "gh" + "p_" + "L3ss" + "k8Qz2Lw7Rt5Vx1Yb9Hd3Fs6Gj0Pm4Kc2"

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory
    status: active
    owned_scope: ["**"]
"""


def governed(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return git_repo


def test_a_refused_command_comes_back_as_a_lesson_without_its_token(git_repo: Path) -> None:
    """A lesson quotes the refused call; AGENT.md and the next <intent_context> are exits."""
    root = governed(git_repo)
    ws = Workspace.open(root)
    refuse = CallbackApprover(lambda req: False, by="ana")
    t = ws.tools(ws.session("a1"), caller="agent", model_id="test/model", approver=refuse)
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    out = t.dispatch("run_command", {"cmd": f"GH_TOKEN={TOKEN} rm -rf inventory", "shell": True})
    assert out.get("error_code") == "APPROVAL_REJECTED", out
    assert TOKEN not in json.dumps(out)
    agent_md = (root / ".orchestration" / "AGENT.md").read_text(encoding="utf-8")
    assert "refused by ana" in agent_md and TOKEN not in agent_md, agent_md
    # The next agent comes after this one under the same intent: this one ends first
    # (two live sessions may not hold one scope).
    t.session.close()
    fresh = ws.tools(ws.session("a2"), caller="agent", model_id="test/model")
    block = fresh.dispatch("select_active_intent", {"intent_id": "INT-001"})["result"]
    assert "refused by ana" in block and TOKEN not in block, block
    fresh.session.close()
    # A lesson written by hand (or before lessons were redacted) leaves redacted too.
    with (root / ".orchestration" / "AGENT.md").open("a", encoding="utf-8") as f:
        f.write(f"- 2026-11-20 09:00 [INT-001] push with GH_TOKEN={TOKEN}\n")
    again = ws.tools(ws.session("a3"), caller="agent", model_id="test/model")
    block = again.dispatch("select_active_intent", {"intent_id": "INT-001"})["result"]
    assert "push with GH_TOKEN=[REDACTED:github-token]" in block, block


def test_a_held_command_names_the_files_it_made_redacted(git_repo: Path) -> None:
    """A command can name a file after a secret it reads (``touch "$(cat cred)"``): the
    refusal that lists its destructive changes is an exit like its effects are."""
    root = governed(git_repo)
    (root / "notes").mkdir()
    (root / "notes" / "cred.txt").write_text(TOKEN, encoding="utf-8")
    ws = Workspace.open(root)
    t = ws.tools(ws.session("a1"), caller="agent", model_id="test/model")
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    cmd = 'rm inventory/store.py; mkdir -p made; touch "made/$(cat notes/cred.txt).md"'
    out = t.dispatch("run_command", {"cmd": cmd, "shell": True})
    assert out["ok"] is False and "destructive" in out["message"], out
    assert "made/[REDACTED:github-token].md" in json.dumps(out), out
    assert TOKEN not in json.dumps(out), out


def test_a_refusal_through_dispatch_names_the_file_redacted(sample_ws: Path) -> None:
    """A policy refusal's message and required action leave redacted, as every other
    error of ``dispatch`` and the MCP server's refusals do."""
    rel = f"keys/{TOKEN}.txt"
    (sample_ws / "keys").mkdir()
    (sample_ws / rel).write_text("hello\n", encoding="utf-8")
    ws = Workspace.open(sample_ws)
    t = ws.tools(ws.session("s1", rules=False))
    out = t.dispatch("write_file", {"path": rel, "content": "bye\n"})
    assert out["error_code"] == "READ_BEFORE_WRITE", out
    assert "keys/[REDACTED:github-token].txt" in out["message"], out
    assert TOKEN not in json.dumps(out), out


def test_rules_status_and_the_session_view_name_rules_files_redacted(sample_ws: Path) -> None:
    """A rules file or linked doc in a secret-named place: the status frame and the
    session view's rules panel name it as the context does, redacted."""
    from ctxnb.instructions import AllRules, rules_status
    from ctxnb.widgets import SessionView

    (sample_ws / "AGENTS.md").write_text(f"See the [deploy notes](keys/{TOKEN}.md).\n")
    (sample_ws / "keys").mkdir()
    (sample_ws / "keys" / f"{TOKEN}.md").write_text("Deploy on Fridays.\n")
    (sample_ws / "keys" / TOKEN).mkdir()
    (sample_ws / "keys" / TOKEN / "AGENTS.md").write_text("Nested rules.\n")
    session = Workspace.open(sample_ws).session("rules", rules=False)
    AllRules(session)
    frame = rules_status(session)
    assert len(frame) >= 3, frame
    shown = frame.to_csv() + SessionView(session).rules_html.value
    assert "[REDACTED:github-token]" in shown, shown
    assert TOKEN not in shown, shown
    assert TOKEN not in session.assemble().to_text()
    # A touch recorded by the session's own API (a replay, a notebook) with raw
    # arguments: the trigger quotes them.
    touched = Workspace.open(sample_ws).session("touch")  # follows rules by default
    touched.record_toolcall(
        "write_file", {"path": "inventory/x.py", "content": f"TOKEN = '{TOKEN}'\n"}, "ok"
    )
    frame = rules_status(touched)
    assert "inventory/AGENTS.md" in frame["path"].tolist(), frame
    assert "[REDACTED:github-token]" in " ".join(frame["trigger"]), frame.to_csv()
    assert TOKEN not in frame.to_csv(), frame.to_csv()


def test_ctxnb_index_lists_changed_files_redacted(sample_ws: Path, capsys) -> None:
    """``ctxnb index --list`` and ``--json`` print file names: a terminal or a CI log."""
    from ctxnb.cli.app import main

    (sample_ws / "keys").mkdir()
    (sample_ws / "keys" / f"{TOKEN}.txt").write_text("hello\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["index", str(sample_ws), "--list", "--no-progress"]) == 0
    listed = capsys.readouterr().out
    (sample_ws / "keys" / f"{TOKEN}.txt").write_text("changed\n", encoding="utf-8")
    assert main(["index", str(sample_ws), "--json", "--no-progress"]) == 0
    as_json = capsys.readouterr().out
    assert "keys/[REDACTED:github-token].txt" in listed, listed
    assert json.loads(as_json)["updated"] == 1, as_json
    assert TOKEN not in listed + as_json, listed + as_json


def test_claude_code_cannot_write_ctxnb_settings_into_pyproject(sample_ws: Path) -> None:
    """A ``[tool.ctxnb]`` table added to pyproject.toml becomes ctxnb's settings: Claude
    Code's Write is refused by the pre hook as ctxnb's own write_file refuses it."""
    from ctxnb.cli.app import main
    from ctxnb.integrations.claude_code import run_hook

    root = governed(sample_ws)
    assert main(["hook", "select-intent", "INT-001", "--session", "s-1", "-w", str(root)]) == 0
    old = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert "[tool.ctxnb" not in old
    new = old + "\n[tool.ctxnb.policy]\ndeny = []\n"
    payload = {
        "session_id": "s-1",
        "cwd": str(root),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(root / "pyproject.toml"), "content": new},
        "tool_use_id": "toolu_01",
    }
    result = run_hook(
        "pre-tool-use", json.dumps(payload), env={**os.environ, "CTXNB_MODEL_ID": "m"}
    )
    answer = result.answer.get("hookSpecificOutput", {}) if result.stdout else {}
    assert answer.get("permissionDecision") == "deny", result
    # An Edit that adds the table is refused too; one that leaves it alone goes through.
    first = old.splitlines()[0]
    for added, denied in (("\n[tool.ctxnb]\nprofile = 'cloud'", True), ("\n# ok", False)):
        edit = {"file_path": str(root / "pyproject.toml"), "old_string": first}
        payload = {
            **payload,
            "tool_name": "Edit",
            "tool_input": {**edit, "new_string": first + added},
        }
        result = run_hook("pre-tool-use", json.dumps(payload), env={**os.environ})
        answer = result.answer.get("hookSpecificOutput", {}) if result.stdout else {}
        assert (answer.get("permissionDecision") == "deny") is denied, result


def test_claude_code_hook_answers_name_files_redacted(sample_ws: Path) -> None:
    """What the hooks tell Claude Code (a refusal's reason, a post hook's block) names
    the file as the other exits do: a token in its name leaves redacted."""
    from ctxnb.cli.app import main
    from ctxnb.integrations.claude_code import run_hook

    root = governed(sample_ws)
    intents = root / ".orchestration" / "active_intents.yaml"
    intents.write_text(INTENTS.replace('["**"]', '["inventory/**"]'), encoding="utf-8")
    assert main(["hook", "select-intent", "INT-001", "--session", "s-1", "-w", str(root)]) == 0
    outside = root / "notes" / f"{TOKEN}.md"  # INT-001 owns inventory/** only
    outside.parent.mkdir()
    base = {"session_id": "s-1", "cwd": str(root), "permission_mode": "default"}
    pre = {
        **base,
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(outside), "content": "hi\n"},
        "tool_use_id": "toolu_02",
    }
    denied = run_hook("pre-tool-use", json.dumps(pre), env=dict(os.environ))
    answer = denied.answer["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny", denied
    assert "[REDACTED:github-token]" in answer["permissionDecisionReason"], answer
    # The write happened anyway (another hook allowed it): the post hook blocks it.
    outside.write_text("hi\n", encoding="utf-8")
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"success": True}}
    blocked = run_hook("post-tool-use", json.dumps(post), env=dict(os.environ))
    assert blocked.answer.get("decision") == "block", blocked
    assert "[REDACTED:github-token]" in blocked.answer["reason"], blocked
    for result in (denied, blocked):
        assert TOKEN not in result.stdout + result.stderr, result


def test_secrets_found_by_grammar_leave_no_exit(git_repo: Path) -> None:
    # A command line, SQL, a cookie and a notebook cell, each a family the grammars of
    # #43 read: redacted in what read_file, search, the context, a governed command's
    # output, the audit log and the trace hold.
    pw = "Qz7" + "mK2vXr9Lp4Tw"
    files = {
        "ops/backup.sh": f"mysqldump -uroot -p{pw} shop > shop.sql\n",
        "db/users.sql": f"ALTER USER app IDENTIFIED BY '{pw}';\n",
        "logs/req.log": f"> Cookie: theme=dark; sessionid={pw}x9\n",
        "nb/explore.ipynb": json.dumps(
            {"cells": [{"cell_type": "code", "source": [f'c = Client(api_key="{pw}")\n']}]}
        ),
    }
    for rel, text in files.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text, encoding="utf-8")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "grammar")
    governed(git_repo)
    ws = Workspace.open(git_repo)
    session = ws.session("s")
    tools = ws.tools(session, caller="agent", model_id="test/model")
    assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    outs = [json.dumps(tools.dispatch("read_file", {"path": rel})) for rel in files]
    outs.append(json.dumps(tools.dispatch("search", {"pattern": pw[:6], "regex": False})))
    outs.append(session.assemble().to_text())
    ran = tools.dispatch("run_command", {"cmd": "cat " + " ".join(files)})
    assert ran["ok"] and ran["result"]["returncode"] == 0, ran
    outs.append(json.dumps(ran))
    outs.append((git_repo / ".ctxnb" / "audit.jsonl").read_text(encoding="utf-8"))
    outs.append((git_repo / ".orchestration" / "agent_trace.jsonl").read_text(encoding="utf-8"))
    assert all(pw not in o for o in outs)
    assert sum("[REDACTED:" in o for o in outs[:4]) == 4  # each file had its secret
