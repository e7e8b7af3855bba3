"""No secret of the corpus leaves ctxnb by any exit toward a model or a log.

Each test plants the secret corpus (``tests/_secret_corpus.py``) in a real workspace,
drives one exit the way an agent or a user would (tool calls through ``dispatch``, the
assembled context, the MCP server through the MCP SDK's client, the audit log, the
trace, command output, widgets' HTML) and checks that no secret, and no line of a
multi-line secret, is in what came out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _secret_corpus import SECRETS, Case

from ctxnb import Workspace
from ctxnb.govern import init_governance

PEM_CASES = [c for c in SECRETS if c.kind.startswith("pem-")]


def fragments(case: Case) -> list[str]:
    """The secrets of a case, and each line (16+ chars) of a multi-line secret."""
    out = list(case.secrets)
    for s in case.secrets:
        for sep in ("\n", "\\n"):
            if sep in s:
                out += [ln for ln in s.split(sep) if len(ln) >= 16]
    return out


ALL_FRAGMENTS = sorted({f for c in SECRETS for f in fragments(c)})


def leaks(text: str) -> list[str]:
    return [f for f in ALL_FRAGMENTS if f in text]


def plant(root: Path) -> list[str]:
    """Write every secret case into ``root/corpus/`` under names the policy allows."""
    rels = []
    for i, case in enumerate(SECRETS):
        rel = f"corpus/{i:03d}-{case.kind}.txt"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(case.text, encoding="utf-8")
        rels.append(rel)
    return rels


@pytest.fixture
def planted(sample_ws: Path) -> tuple[Path, list[str]]:
    return sample_ws, plant(sample_ws)


def test_reads_context_text_messages_and_html_hold_no_secret(planted):
    root, rels = planted
    ws = Workspace.open(root)
    session = ws.session("s")
    tools = ws.tools(session)
    results = [tools.dispatch("read_file", {"path": rel}) for rel in rels]
    assert all(r["ok"] for r in results)
    assert not leaks(json.dumps(results))
    assert sum(r["result"]["redactions"] for r in results) >= len(SECRETS)
    # The same secrets reach the context through the session's file objects, the chat
    # and the system prompt.
    session.set_system_prompt(f"Deploy with {SECRETS[0].text}")
    session.add_turn("user", f"here is my key: {SECRETS[12].text}")
    session.add_turn("assistant", "ok")
    ctx = session.assemble()
    text = ctx.to_text()
    assert all(rel in text for rel in rels)  # the files are there, redacted
    assert not leaks(text)
    assert not leaks(json.dumps(ctx.to_messages("openai")))
    assert not leaks(json.dumps(ctx.to_messages("anthropic")))
    assert not leaks(ctx._repr_html_())
    # A past context rebuilt from the store is redacted the same way.
    assert not leaks(session.context_at(ctx.turn).to_text())


@pytest.mark.parametrize("case", PEM_CASES, ids=lambda c: c.kind)
def test_read_lines_and_excerpt_below_the_key_header(sample_ws: Path, case: Case):
    (sample_ws / "keys").mkdir()
    (sample_ws / "keys" / "k.txt").write_text("# deploy key\n" + case.text, encoding="utf-8")
    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"))
    total = case.text.count("\n") + 1
    for start in range(2, 6):  # line 2 is the BEGIN line; 3.. are body lines
        out = tools.dispatch("read_lines", {"path": "keys/k.txt", "start": start, "end": total})
        assert out["ok"]
        assert not leaks(out["result"]["content"]), start
        assert out["result"]["redactions"] == 1
    excerpt = tools.dispatch("get_excerpt", {"path": "keys/k.txt", "max_lines": 5})
    assert excerpt["ok"] and not leaks(json.dumps(excerpt))


def test_search_hits_inside_a_key_body_are_redacted(planted):
    root, rels = planted
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("s"))
    for case in PEM_CASES:
        line = case.secrets[0].split("\n")[3]
        out = tools.dispatch("search", {"pattern": line[:24], "regex": False})
        assert out["ok"]
        hits = out["result"]
        assert hits, f"search did not find the planted line of {case.kind}"
        assert not leaks(json.dumps(hits))
    # Plain tokens found by a search for their key name.
    out = tools.dispatch("search", {"pattern": "TOKEN|KEY|password", "regex": True})
    assert out["ok"] and len(out["result"]) > 20
    assert not leaks(json.dumps(out["result"]))


def test_write_file_with_a_token_is_redacted_in_context_audit_and_store(sample_ws: Path):
    ws = Workspace.open(sample_ws)
    session = ws.session("s")
    tools = ws.tools(session)
    content = "".join(c.text for c in SECRETS[:20])
    out = tools.dispatch("write_file", {"path": "notes/deploy.txt", "content": content})
    assert out["ok"], out
    assert not leaks(json.dumps(out))
    ctx = session.assemble()
    assert "write_file" in ctx.to_text()
    assert not leaks(ctx.to_text())
    assert not leaks(json.dumps(ctx.to_messages()))
    audit = (sample_ws / ".ctxnb" / "audit.jsonl").read_text(encoding="utf-8")
    assert "write_file" in audit and not leaks(audit)
    # The tool call object in the store is redacted too (only the file version is raw).
    calls = [d for d in (session.get(o) for o in session.metadata_pool) if d["type"] == "toolcall"]
    assert calls and not leaks(json.dumps(calls))


def test_patch_conflict_details_are_redacted(sample_ws: Path):
    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"))
    text = "".join(c.text for c in SECRETS[:10])
    (sample_ws / "cfg.txt").write_text(text, encoding="utf-8")
    read = tools.dispatch("read_file", {"path": "cfg.txt"})["result"]
    lines = text.splitlines()
    edits = [
        {
            "start_line": 1,
            "end_line": len(lines),
            "expected_original_lines": ["not what the file says"] * len(lines),
            "new_lines": ["x"],
        }
    ]
    out = tools.dispatch(
        "write_patch", {"doc_path": "cfg.txt", "original_sha256": read["sha256"], "edits": edits}
    )
    assert out["ok"] is False and out["error_code"] == "PATCH_CONFLICT"
    found = out["details"]["failed_hunks"][0]["found"]
    assert len(found) == len(lines) and any("[REDACTED:" in ln for ln in found)
    assert not leaks(json.dumps(out))
    diff = "".join(f" {ln}\n" for ln in lines[5::-1]) + "+new\n"
    bad = f"--- a/cfg.txt\n+++ b/cfg.txt\n@@ -2,6 +2,7 @@\n{diff}"
    out = tools.dispatch("apply_patch", {"path": "cfg.txt", "unified_diff": bad})
    assert out["ok"] is False and out["error_code"] == "PATCH_CONFLICT", out
    assert not leaks(json.dumps(out))


def test_diff_of_a_changed_key_is_redacted(sample_ws: Path):
    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"))
    case = PEM_CASES[0]
    (sample_ws / "k.txt").write_text(case.text, encoding="utf-8")
    tools.dispatch("read_file", {"path": "k.txt"})
    body = case.secrets[0].split("\n")
    changed = case.text.replace(body[4], body[4][::-1]) + "# rotated\n"
    (sample_ws / "k.txt").write_text(changed, encoding="utf-8")
    out = tools.dispatch("get_diff", {"path": "k.txt"})
    assert out["ok"]
    assert not leaks(json.dumps(out)) and body[4][::-1] not in json.dumps(out)
    tools.dispatch("read_file", {"path": "k.txt"})  # stores the new version
    versions = tools.dispatch("get_file_history", {"path": "k.txt"})["result"]
    ids = [v["version_id"] for v in versions]
    out = tools.dispatch("get_diff", {"path": "k.txt", "version1": ids[0], "version2": ids[-1]})
    assert out["ok"] and "@@" in out["result"]["diff"]
    assert not leaks(json.dumps(out))


INTENTS = """\
active_intents:
  - id: INT-001
    name: Deploy notes
    status: active
    owned_scope: ["**"]
"""


def test_governed_command_output_trace_and_audit(git_repo: Path):
    rels = plant(git_repo)
    key = next(i for i, c in enumerate(SECRETS) if c.kind == "pem-rsa")
    subprocess.run(["git", "add", "-A"], cwd=git_repo, check=True)
    subprocess.run(["git", "commit", "-qm", "corpus"], cwd=git_repo, check=True)
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    ws = Workspace.open(git_repo)
    session = ws.session("gov")
    tools = ws.tools(session, caller="agent", model_id="test/model")
    assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    out = tools.dispatch("run_command", {"cmd": "cat " + " ".join(rels)})
    assert out["ok"] and out["result"]["returncode"] == 0, out
    assert not leaks(json.dumps(out))
    # A slice of a key file without its header, as `sed` prints it.
    out = tools.dispatch("run_command", {"cmd": f"sed -n 3,7p {rels[key]}"})
    assert out["ok"] and out["result"]["stdout"].strip()
    assert not leaks(json.dumps(out))
    content = "".join(c.text for c in SECRETS[:15])
    read = tools.dispatch("read_file", {"path": "inventory/models.py"})["result"]
    w = tools.dispatch(
        "write_file",
        {"path": "inventory/models.py", "content": content, "expected_sha256": read["sha256"]},
    )
    assert w["ok"], w
    assert not leaks(json.dumps(w))
    trace = (git_repo / ".orchestration" / "agent_trace.jsonl").read_text(encoding="utf-8")
    audit = (git_repo / ".ctxnb" / "audit.jsonl").read_text(encoding="utf-8")
    assert trace.strip() and "run_command" in audit
    assert not leaks(trace) and not leaks(audit)
    assert not leaks(session.assemble().to_text())


def test_history_widget_and_static_views_are_redacted(sample_ws: Path):
    from ctxnb.widgets.history_view import HistoryView
    from ctxnb.widgets.static import esc, pre

    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"))
    case = PEM_CASES[3]
    (sample_ws / "k.txt").write_text("a\n", encoding="utf-8")
    tools.dispatch("read_file", {"path": "k.txt"})
    (sample_ws / "k.txt").write_text("a\n" + case.text, encoding="utf-8")
    tools.dispatch("read_file", {"path": "k.txt"})
    view = HistoryView(ws, "k.txt")
    assert "+" in view.diff_text and not leaks(view.diff_text)
    assert not leaks(view._repr_html_())
    assert not leaks(pre(SECRETS[5].text)) and not leaks(esc(SECRETS[6].text))


def test_mcp_context_resource_and_tool_results_through_a_real_client(planted, tmp_path):
    from _mcp_client import _resource_text, _text, run_async, stdio_session

    from ctxnb.integrations.mcp_server import URI_CONTEXT

    root, rels = planted

    async def body() -> None:
        async with stdio_session(root, tmp_path / "err.log") as s:
            for rel in rels:
                res = await s.call_tool("read_file", {"path": rel})
                assert not res.is_error
                assert not leaks(_text(res)) and not leaks(json.dumps(res.structured_content))
            for rel in rels[:5]:
                await s.call_tool("activate", {"target": rel})
            ctx = _resource_text(await s.read_resource(URI_CONTEXT))
            assert rels[0] in ctx and "[REDACTED:" in ctx
            assert not leaks(ctx)

    run_async(body)


def test_the_llm_summarizer_sends_no_secret_to_its_model() -> None:
    """A summarizing strategy sends tool output to a model: through litellm's real
    request path to a scripted model on 127.0.0.1, the request holds no secret."""
    from _needs import has_module, require

    require(has_module("litellm"), "litellm (ctxnb[live])")
    from ctxnb.live import ScriptedModelServer
    from ctxnb.llm.calls import LiteLLMSummarizer

    with ScriptedModelServer([{"content": "deploy notes"}]) as server:
        args = server.model_args
        # Priced, so that no unpriced-model warning stands in for what this test is about.
        price = {"input": 1, "cache_write": 1, "cache_read": 0.1, "output": 1}
        summarize = LiteLLMSummarizer(
            args["model"],
            api_base=args["api_base"],
            api_key=args["api_key"],
            prices={"ctxnb-scripted": price},
        )
        assert summarize("run_command", "".join(c.text for c in SECRETS[:30]), 50)
        sent = json.dumps(server.requests)
    assert "[REDACTED:" in sent and not leaks(sent)


@pytest.mark.parametrize("case", PEM_CASES, ids=lambda c: c.kind)
def test_conflict_quoting_two_lines_of_a_key_body(sample_ws: Path, case: Case):
    """A conflict whose hunk covers two body lines only (too few to recognise alone)."""
    (sample_ws / "k.txt").write_text(case.text, encoding="utf-8")
    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"))
    sha = tools.dispatch("read_file", {"path": "k.txt"})["result"]["sha256"]
    edits = [
        {"start_line": 4, "end_line": 5, "expected_original_lines": ["a", "b"], "new_lines": []}
    ]
    out = tools.dispatch(
        "write_patch", {"doc_path": "k.txt", "original_sha256": sha, "edits": edits}
    )
    assert out["error_code"] == "PATCH_CONFLICT"
    assert out["details"]["failed_hunks"][0]["found"] == ["[REDACTED:private-key]"] * 2
    assert not leaks(json.dumps(out))
    body = case.secrets[0].split("\n")
    patch = f"--- a/k.txt\n+++ b/k.txt\n@@ -4,2 +4,1 @@\n {body[3]}\n-{body[1]}\n"
    out = tools.dispatch("apply_patch", {"path": "k.txt", "unified_diff": patch})
    assert out["error_code"] == "PATCH_CONFLICT", out
    assert not leaks(json.dumps(out))
    ctx = ws.session("s").assemble().to_text()
    assert not leaks(ctx)
    # The patch quotes two body lines: its arguments are redacted as the file is.
    audit = (sample_ws / ".ctxnb" / "audit.jsonl").read_text(encoding="utf-8")
    assert "apply_patch" in audit and not leaks(audit)


# A file name that holds a secret: a vendor token, and a password read by its format.
NAME_TOKEN = "gh" + "p_" + "N4m3" + "k8Qz2Lw7Rt5Vx1Yb9Hd3Fs6Gj0Pm4Kc2"
NAME_PASSWORD = "Cobalt-meadow" + "71"
SECRET_NAMES = [f"keys/{NAME_TOKEN}.txt", f"keys/password={NAME_PASSWORD}.env"]


def name_leaks(text: str) -> list[str]:
    return [s for s in (NAME_TOKEN, NAME_PASSWORD) if s in text] + leaks(text)


def test_a_secret_in_a_file_name_is_redacted_at_every_exit(git_repo: Path, capsys, monkeypatch):
    """Listings, globs, search hits, context labels, a command's effects, intent_map.md,
    the audit log, the trace, the semantic cache and ``ctxnb show`` (#29)."""
    from ctxnb.cli.app import main
    from ctxnb.llm.semcache import SemanticCache
    from ctxnb.retrieval.embedding import LexicalEmbedder

    for rel in SECRET_NAMES:
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text("hello from a named file\n", encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=git_repo, check=True)
    subprocess.run(["git", "commit", "-qm", "keys"], cwd=git_repo, check=True)
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    ws = Workspace.open(git_repo)
    session = ws.session("names")
    tools = ws.tools(session, caller="agent", model_id="test/model")
    assert tools.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]

    listed = tools.dispatch("list_files", {})
    assert listed["ok"] and len([p for p in listed["result"] if p.startswith("keys/")]) == 2
    assert "keys/[REDACTED:github-token].txt" in listed["result"]
    globbed = tools.dispatch("glob", {"pattern": "keys/*"})
    assert globbed["ok"] and len(globbed["result"]) == 2
    hits = tools.dispatch("search", {"pattern": "hello from a named", "regex": False})
    assert hits["ok"] and len(hits["result"]) == 2
    for out in (listed, globbed, hits):
        assert not name_leaks(json.dumps(out)), out
    # The files are read by their real names (the agent typed them); their labels in
    # the context are redacted.
    for rel in SECRET_NAMES:
        assert tools.dispatch("read_file", {"path": rel})["ok"]
        session.activate(ws.object_id(rel))
    ctx = session.assemble()
    assert "hello from a named file" in ctx.to_text()
    assert not name_leaks(ctx.to_text()) and not name_leaks(ctx._repr_html_())
    assert not name_leaks(json.dumps(ctx.to_messages("openai")))

    # A command that makes a file with a secret in its name: its effects, the trace.
    made = f"made/{NAME_TOKEN}.md"
    out = tools.dispatch(
        "run_command", {"cmd": f"mkdir -p made && echo hi > {made}", "shell": True}
    )
    assert out["ok"], out
    changed = out["result"]["effects"]["changed"]
    assert [c["path"] for c in changed] == ["made/[REDACTED:github-token].md"]
    assert not name_leaks(json.dumps(out))
    # A write to such a name: intent_map.md lists it redacted.
    w = tools.dispatch(
        "write_file", {"path": f"notes/{NAME_TOKEN}.py", "content": "def f():\n    return 1\n"}
    )
    assert w["ok"], w
    orch = git_repo / ".orchestration"
    intent_map = (orch / "intent_map.md").read_text(encoding="utf-8")
    assert "notes/[REDACTED:github-token].py" in intent_map
    trace = (orch / "agent_trace.jsonl").read_text(encoding="utf-8")
    audit = (git_repo / ".ctxnb" / "audit.jsonl").read_text(encoding="utf-8")
    assert "[REDACTED:github-token]" in trace and "list_files" in audit
    for text in (intent_map, trace, audit):
        assert not name_leaks(text)

    # Cached model answers are redacted before they are stored.
    cache = SemanticCache(embedder=LexicalEmbedder(), store=ws.store)
    cache.put(f"what is in keys/{NAME_TOKEN}.txt", f"It says hello; password={NAME_PASSWORD}")
    stored = json.dumps(ws.store.scan(type="cache_entry").to_dict("records"), default=str)
    assert "[REDACTED:" in stored and not name_leaks(stored)

    # ctxnb show prints a stored object redacted (its content and its source path).
    oid = ws.object_id(SECRET_NAMES[1])
    (git_repo / SECRET_NAMES[1]).write_text(f"DB_PASSWORD='{NAME_PASSWORD}'\n", encoding="utf-8")
    assert tools.dispatch("read_file", {"path": SECRET_NAMES[1]})["ok"]
    monkeypatch.chdir(git_repo)
    capsys.readouterr()
    assert main(["show", oid]) == 0
    shown = capsys.readouterr().out
    assert json.loads(shown)["type"] == "file" and "[REDACTED:" in shown
    assert not name_leaks(shown)


@pytest.mark.parametrize(
    "case", [c for c in SECRETS if c.kind.startswith("fmt-")], ids=lambda c: c.kind
)
def test_format_shapes_in_search_hits_and_line_ranges(sample_ws: Path, case: Case):
    """Each structural shape, found by a search for its key and read by a line range
    below its first line: redacted as its whole file is."""
    (sample_ws / "cfg").mkdir()
    rel = f"cfg/{case.kind}.txt"  # (a ".env" name is denied to the agent)
    (sample_ws / rel).write_text(case.text, encoding="utf-8")
    ws = Workspace.open(sample_ws)
    tools = ws.tools(ws.session("s"))
    total = len(case.text.splitlines())
    for start in range(1, total + 1):
        out = tools.dispatch("read_lines", {"path": rel, "start": start, "end": total})
        assert out["ok"] and not leaks(json.dumps(out)), (start, out)
    lines = [ln for ln in case.text.splitlines() if any(s in ln for s in case.secrets)]
    for line in lines:
        out = tools.dispatch("search", {"pattern": line[:12], "regex": False, "globs": ["cfg/**"]})
        assert out["ok"] and out["result"], line
        assert not leaks(json.dumps(out)), out
