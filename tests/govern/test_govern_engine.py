"""End-to-end governance on a real git repository (the acceptance criteria)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import pytest
from _intents import ENGINE_INTENTS as INTENTS

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.approval import CallbackApprover, QueueApprover
from ctxnb.govern.engine import NO_INTENT_MESSAGE


@pytest.fixture
def gov(git_repo: Path) -> Path:
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    return git_repo


@pytest.fixture
def schema(test_data: Path) -> dict:
    return json.loads((test_data / "agent-trace-0.1.0.schema.json").read_text())


def tools_for(root: Path, sid: str = "agent-1", **kw):
    ws = Workspace.open(root)
    return ws.tools(ws.session(sid), caller="test-agent", model_id="anthropic/claude-test", **kw)


def ledger(root: Path) -> list[dict]:
    text = (root / ".orchestration" / "agent_trace.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_handshake_enforced(gov):
    t = tools_for(gov)
    r = t.dispatch("read_file", {"path": "inventory/models.py"})
    assert r["ok"], "reads need no intent"
    out = t.dispatch("write_file", {"path": "inventory/models.py", "content": "x\n"})
    assert out["error_code"] == "NO_ACTIVE_INTENT"
    assert out["message"] == NO_INTENT_MESSAGE
    assert "INT-001" in out["required_action"]
    bad = t.dispatch("select_active_intent", {"intent_id": "INT-404"})
    assert bad["error_code"] == "INVALID_INTENT"
    done = t.dispatch("select_active_intent", {"intent_id": "INT-OLD"})
    assert done["error_code"] == "INVALID_INTENT"
    ok = t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    assert ok["ok"] and ok["result"].startswith("<intent_context>")
    assert "Money stays in integer cents" in ok["result"]
    assert "inventory/**" in ok["result"]


def test_out_of_scope_write_is_blocked_recoverably(gov):
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-002"})
    r = t.read_file("inventory/models.py")
    out = t.dispatch(
        "write_file",
        {"path": "inventory/models.py", "content": "x\n", "expected_sha256": r.sha256},
    )
    assert out["error_code"] == "SCOPE_VIOLATION" and out["recoverable"] is True
    assert out["details"]["owned_scope"] == ["web/**"]
    assert (gov / "inventory" / "models.py").read_bytes() != b"x\n"


def test_every_mutation_appends_a_schema_valid_record(gov, schema):
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = t.read_file("inventory/models.py")
    new = r.content.replace("reorder_level: int = 5", "reorder_level: int = 10")
    assert t.write_file("inventory/models.py", new, expected_sha256=r.sha256).success
    r2 = t.read_file("tests/test_models.py")
    patch = t.write_patch(
        "tests/test_models.py",
        r2.sha256,
        [{"start_line": 1, "end_line": 0, "expected_original_lines": [], "new_lines": ["# ok"]}],
    )
    assert patch.success
    records = ledger(gov)
    assert len(records) == 2
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=gov, capture_output=True, text=True, check=True
    ).stdout.strip()
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for rec in records:
        validator.validate(rec)
        assert rec["vcs"] == {"type": "git", "revision": head}
        conv = rec["files"][0]["conversations"][0]
        assert conv["contributor"] == {"type": "ai", "model_id": "anthropic/claude-test"}
        assert {"type": "intent", "url": "urn:ctxnb:intent:INT-001"} in conv["related"]
        assert all(rg["content_hash"].startswith("sha256:") for rg in conv["ranges"])
    assert records[0]["files"][0]["path"] == "inventory/models.py"
    rng = records[0]["files"][0]["conversations"][0]["ranges"][0]
    line = new.splitlines().index("    reorder_level: int = 10") + 1
    assert (rng["start_line"], rng["end_line"]) == (line, line)


def test_destructive_command_needs_approval(gov):
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    (gov / "inventory" / "build").mkdir()
    (gov / "inventory" / "build" / "out.txt").write_text("artifact\n")
    out = t.dispatch("run_command", {"cmd": "rm -rf inventory/build"})
    assert out["error_code"] == "DESTRUCTIVE_NEEDS_APPROVAL"
    assert (gov / "inventory" / "build" / "out.txt").exists()
    safe = t.dispatch("run_command", {"cmd": "ls inventory"})
    assert safe["ok"] and safe["result"]["returncode"] == 0


def test_destructive_command_reject_and_approve_paths(gov):
    (gov / "inventory" / "build").mkdir()
    (gov / "inventory" / "build" / "out.txt").write_text("artifact\n")
    no = tools_for(gov, approver=CallbackApprover(lambda req: False, by="reviewer-ana"))
    no.dispatch("select_active_intent", {"intent_id": "INT-001"})
    out = no.dispatch("run_command", {"cmd": "rm -rf inventory/build"})
    assert out["error_code"] == "APPROVAL_REJECTED"
    assert out["details"]["decision"]["by"] == "reviewer-ana"
    assert (gov / "inventory" / "build" / "out.txt").exists()
    no.session.close()  # its scope is free for the next agent (write partitioning)

    q = QueueApprover(timeout=10)
    yes = tools_for(gov, sid="agent-2", approver=q)
    yes.dispatch("select_active_intent", {"intent_id": "INT-001"})
    result: dict = {}
    worker = threading.Thread(
        target=lambda: result.update(yes.dispatch("run_command", {"cmd": "rm -rf inventory/build"}))
    )
    worker.start()
    for _ in range(500):
        if q.pending():
            break
        threading.Event().wait(0.01)
    [req] = q.pending()
    assert req.tool == "run_command" and "rm" in req.args["cmd"]
    q.decide(req.id, True, by="reviewer-bo")
    worker.join(10)
    assert result["ok"], result
    assert not (gov / "inventory" / "build").exists()
    decisions = [r for r in ledger(gov) if not r["files"]]
    bys = [r["metadata"]["approval"]["by"] for r in decisions]
    assert bys == ["reviewer-ana", "reviewer-bo"]
    assert decisions[1]["metadata"]["approval"]["approved"] is True


def test_stale_write_rejected_under_concurrent_modification(gov):
    # Two writers under one intent on purpose: what is tested is the optimistic lock.
    (gov / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
    a = tools_for(gov, sid="a")
    b = tools_for(gov, sid="b")
    for t in (a, b):
        assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    ra = a.read_file("inventory/report.py")
    rb = b.read_file("inventory/report.py")
    assert a.write_file(
        "inventory/report.py", ra.content + "# a\n", expected_sha256=ra.sha256
    ).success
    out = b.dispatch(
        "write_file",
        {
            "path": "inventory/report.py",
            "content": rb.content + "# b\n",
            "expected_sha256": rb.sha256,
        },
    )
    assert out["error_code"] == "STALE_FILE"
    assert (gov / "inventory" / "report.py").read_text().endswith("# a\n")


def test_disjoint_scopes_in_threads_and_overlap_always_refused(gov):
    ta = tools_for(gov, sid="ta")
    tb = tools_for(gov, sid="tb")
    ta.dispatch("select_active_intent", {"intent_id": "INT-001"})
    tb.dispatch("select_active_intent", {"intent_id": "INT-002"})
    results: dict[str, list] = {"a": [], "b": []}

    def agent(t, path, key):
        for i in range(10):
            r = t.read_file(path)
            res = t.write_file(path, r.content + f"// {key}{i}\n", expected_sha256=r.sha256)
            results[key].append(res.success)

    th = [
        threading.Thread(target=agent, args=(ta, "inventory/store.py", "a")),
        threading.Thread(target=agent, args=(tb, "web/app.js", "b")),
    ]
    for x in th:
        x.start()
    for x in th:
        x.join(60)
    assert results == {"a": [True] * 10, "b": [True] * 10}


WRITER = r"""
import sys, json
from ctxnb import Workspace
root, sid, tag = sys.argv[1:4]
ws = Workspace.open(root)
t = ws.tools(ws.session(sid), caller=sid)
t.dispatch("select_active_intent", {"intent_id": "INT-001"})
ok = stale = 0
for i in range(15):
    r = t.read_file("inventory/models.py")
    out = t.dispatch("write_file", {"path": "inventory/models.py",
                     "content": r.content + f"# {tag}{i}\n", "expected_sha256": r.sha256})
    if out["ok"]:
        ok += 1
    elif out["error_code"] == "STALE_FILE":
        stale += 1
    else:
        raise SystemExit(json.dumps(out))
print(json.dumps({"ok": ok, "stale": stale}))
"""


def test_overlapping_writers_in_processes_never_lose_a_write(gov):
    # Three writers under one intent on purpose: what is tested is the optimistic lock.
    (gov / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(gov), f"p{k}", f"p{k}-"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(3)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    final = (gov / "inventory" / "models.py").read_text()
    written = [line for line in final.splitlines() if line.startswith("# p")]
    # every successful write is in the file: none was overwritten by a stale one
    assert len(written) == sum(o["ok"] for o in outs)
    assert sum(o["ok"] + o["stale"] for o in outs) == 45


def test_intent_map_and_agent_md_updated(gov):
    (gov / "ctxnb.toml").write_text('[governance]\nquality_commands = ["python -m pytest -q -x"]\n')
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = t.read_file("inventory/models.py")
    new = r.content.replace(
        "def stock_level(", "def total_units(movements: list[Movement]) -> int:\n"
        "    return sum(m.quantity for m in movements)\n\n\ndef stock_level("
    )  # fmt: skip
    res = t.write_file("inventory/models.py", new, expected_sha256=r.sha256)
    assert res.success and res.feedback == []
    imap = (gov / ".orchestration" / "intent_map.md").read_text()
    assert "## INT-001 — Inventory reorder rules" in imap
    assert "`inventory/models.py`: total_units" in imap
    # a formatting-only change is an AST refactor: no new symbols
    rec = ledger(gov)[-1]
    assert rec["metadata"]["mutation_class"] == "INTENT_EVOLUTION"
    r = t.read_file("tests/test_models.py")
    broken = r.content.replace("7)", "8)")
    res = t.write_file("tests/test_models.py", broken, expected_sha256=r.sha256)
    assert res.success and res.feedback and res.feedback[0]["returncode"] != 0
    assert "python -m pytest" in res.feedback[0]["command"]
    agent_md = (gov / ".orchestration" / "AGENT.md").read_text()
    assert "tests/test_models.py" in agent_md and "failed" in agent_md


def test_ast_refactor_is_classified(gov):
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = t.read_file("inventory/models.py")
    old = "return sum(m.quantity for m in movements if m.sku == sku)"
    new = "return sum(  m.quantity for m in movements if m.sku == sku  )  # same"
    reformatted = r.content.replace(old, new)
    assert t.write_file("inventory/models.py", reformatted, expected_sha256=r.sha256).success
    assert ledger(gov)[-1]["metadata"]["mutation_class"] == "AST_REFACTOR"


def test_circuit_breaker_opens_and_resets(gov):
    (gov / "ctxnb.toml").write_text(
        '[governance]\nquality_commands = ["false"]\nbreaker_threshold = 2\n'
    )
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    for i in range(2):
        r = t.read_file("inventory/store.py")
        res = t.write_file("inventory/store.py", r.content + f"# {i}\n", expected_sha256=r.sha256)
        assert res.success and res.feedback
    r = t.read_file("inventory/store.py")
    out = t.dispatch(
        "write_file",
        {"path": "inventory/store.py", "content": "x", "expected_sha256": r.sha256},
    )
    assert out["error_code"] == "CIRCUIT_OPEN" and out["recoverable"] is False
    t.engine.reset_breaker()
    assert t.dispatch(
        "write_file",
        {"path": "inventory/store.py", "content": r.content, "expected_sha256": r.sha256},
    )["ok"]


def test_policies_are_pluggable(gov):
    from ctxnb.errors import PolicyError

    class NoJs:
        name = "no-js"

        def check(self, call, engine):
            if str(call.args.get("path", "")).endswith(".js"):
                raise PolicyError("POLICY_REFUSED", "no JavaScript today")

    t = tools_for(gov)
    t.engine.pre.insert(0, NoJs())
    assert t.dispatch("read_file", {"path": "web/app.js"})["error_code"] == "POLICY_REFUSED"
    t.engine.pre = [p for p in t.engine.pre if p.name != "no-js"]
    assert t.dispatch("read_file", {"path": "web/app.js"})["ok"]


# -- governance that remembers: lessons, a breaker that survives restarts, sensitive files ----
def test_a_refusal_comes_back_as_a_lesson_to_the_next_agent_in_scope(gov) -> None:
    refuse = CallbackApprover(lambda req: False, by="ana")
    t = tools_for(gov, approver=refuse)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    (gov / "inventory" / "build").mkdir()
    (gov / "inventory" / "build" / "out.txt").write_text("artifact\n")
    out = t.dispatch("run_command", {"cmd": "rm -rf inventory/build"})
    assert out["error_code"] == "APPROVAL_REJECTED"
    agent_md = (gov / ".orchestration" / "AGENT.md").read_text()
    assert "[INT-001]" in agent_md and "refused by ana" in agent_md
    t.session.close()  # the next agent takes the intent's scope after this one

    # a quality failure after an edit is a lesson about that file
    (gov / "ctxnb.toml").write_text('[governance]\nquality_commands = ["false"]\n')
    t2 = tools_for(gov, sid="agent-2")
    t2.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = t2.read_file("inventory/store.py")
    assert t2.write_file(
        "inventory/store.py", r.content + "# x\n", expected_sha256=r.sha256
    ).feedback
    t2.session.close()

    # a new agent selecting the intent is told both; another intent's agent is not
    fresh = tools_for(gov, sid="agent-3")
    block = fresh.dispatch("select_active_intent", {"intent_id": "INT-001"})["result"]
    lessons = block.split("lessons:", 1)[1]
    assert "refused by ana" in lessons and "`false` failed" in lessons
    other = fresh.dispatch("select_active_intent", {"intent_id": "INT-002"})["result"]
    assert "lessons: (none)" in other


def test_the_breaker_stays_open_across_a_restart(gov) -> None:
    (gov / "ctxnb.toml").write_text(
        '[governance]\nquality_commands = ["false"]\nbreaker_threshold = 2\n'
    )
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    for i in range(2):
        r = t.read_file("inventory/store.py")
        assert t.write_file("inventory/store.py", r.content + f"# {i}\n", expected_sha256=r.sha256)
    t.workspace.close()

    restarted = tools_for(gov, sid="after-restart")  # a new kernel, the same workspace
    restarted.dispatch("select_active_intent", {"intent_id": "INT-001"})
    r = restarted.read_file("inventory/store.py")
    args = {"path": "inventory/store.py", "content": "x", "expected_sha256": r.sha256}
    assert restarted.dispatch("write_file", args)["error_code"] == "CIRCUIT_OPEN"
    # the agent cannot close it by writing the state file: .ctxnb is governance's
    forged = restarted.dispatch(
        "write_file", {"path": ".ctxnb/breaker.json", "content": '{"failures": {}}'}
    )
    assert not forged["ok"]
    assert restarted.dispatch("write_file", args)["error_code"] == "CIRCUIT_OPEN"
    restarted.engine.reset_breaker()  # a human closes it
    assert tools_for(gov, sid="later").engine.failures == {}


def test_sensitive_files_wait_for_a_human(gov) -> None:
    (gov / "ctxnb.toml").write_text('[policy]\nsensitive = ["inventory/models.py"]\n')
    asked: list[tuple[str, str]] = []
    answers = [False, True]

    def decide(req) -> bool:  # type: ignore[no-untyped-def]
        asked.append((req.tool, req.reason))
        return answers.pop(0)

    t = tools_for(gov, approver=CallbackApprover(decide, by="ana"))
    no = t.dispatch("read_file", {"path": "inventory/models.py"})
    assert no["error_code"] == "APPROVAL_REJECTED"
    assert no["details"]["path"] == "inventory/models.py"
    yes = t.dispatch("read_file", {"path": "inventory/models.py"})
    assert yes["ok"]
    again = t.dispatch("read_lines", {"path": "inventory/models.py", "start": 1, "end": 3})
    assert again["ok"]  # approved once for reading in this session
    assert [tool for tool, _ in asked] == ["read_file", "read_file"]
    assert "marked sensitive" in asked[0][1]
    # a file not marked sensitive is read freely
    assert t.dispatch("read_file", {"path": "inventory/store.py"})["ok"]
    assert len(asked) == 2

    # without a human to ask, a sensitive read is refused with what to do
    lone = tools_for(gov, sid="no-human")
    out = lone.dispatch("read_file", {"path": "inventory/models.py"})
    assert out["error_code"] == "SENSITIVE_NEEDS_APPROVAL"
    assert "approver" in out["required_action"]


# -- truth after a failure -----------------------------------------------------------------------
class _Boom:
    name = "boom"

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def run(self, call, result, engine):
        if call.tool == self.tool:
            raise RuntimeError("the review server is down")
        return []


def _audit_lines(root: Path) -> list[dict]:
    text = (root / ".ctxnb" / "audit.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_write_then_a_failing_post_policy_is_reported_as_written_and_traced(gov):
    t = tools_for(gov)
    t.engine.post.insert(0, _Boom("write_file"))  # fails before the record policy runs
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    old = t.dispatch("read_file", {"path": "inventory/models.py"})["result"]
    new_text = old["content"] + "\n\ndef audit():\n    return 1\n"
    out = t.dispatch(
        "write_file",
        {"path": "inventory/models.py", "content": new_text, "expected_sha256": old["sha256"]},
    )
    # written: the agent is told so, with the policy's error beside it
    assert out["ok"] is True
    assert out["result"]["success"] is True
    (err,) = [f for f in out["result"]["feedback"] if f["kind"] == "policy-error"]
    assert err["policy"] == "boom" and err["error_code"] == "POST_POLICY_FAILED"
    assert "review server is down" in err["message"]
    assert (gov / "inventory" / "models.py").read_text() == new_text
    # traced, as any write is
    (record,) = [r for r in ledger(gov) if r["files"]]
    assert record["files"][0]["path"] == "inventory/models.py"
    assert record["metadata"]["mutation_class"] == "INTENT_EVOLUTION"
    # the audit says what the agent was told: it ran, wrote, and a policy failed
    line = _audit_lines(gov)[-1]
    assert (line["tool"], line["success"], line["error_code"]) == (
        "write_file",
        True,
        "POST_POLICY_FAILED",
    )
    assert line["after_sha256"] == out["result"]["sha256"]
    assert t.engine.failures.get("write_file") == 1  # and the breaker counts it


def test_a_read_whose_post_policy_fails_is_a_failure_everywhere(gov):
    t = tools_for(gov)
    t.engine.post.append(_Boom("read_file"))
    out = t.dispatch("read_file", {"path": "inventory/models.py"})
    assert out["ok"] is False and out["error_code"] == "POST_POLICY_FAILED"
    line = _audit_lines(gov)[-1]
    assert (line["tool"], line["success"], line["error_code"]) == (
        "read_file",
        False,
        "POST_POLICY_FAILED",
    )


def test_an_internal_error_is_audited_as_the_agent_is_told(gov):
    t = tools_for(gov)

    def broken(call):
        raise KeyError("a bug")

    t.register_tool(t.tool_info("get_file_history").model_copy(update={"name": "broken"}),
                    lambda path: t.run_call("broken", {"path": path}, broken))  # fmt: skip
    out = t.dispatch("broken", {"path": "inventory/models.py"})
    assert out["ok"] is False and out["error_code"] == "INTERNAL_ERROR"
    line = _audit_lines(gov)[-1]
    assert (line["tool"], line["success"], line["error_code"]) == (
        "broken",
        False,
        "INTERNAL_ERROR",
    )


def test_a_write_looks_its_intent_up_once_and_the_next_call_sees_a_change(gov, monkeypatch):
    # The policies and the record of one call share one lookup of active_intents.yaml
    # (each is a stat); the next call looks again, so an edit of the file is seen.
    t = tools_for(gov)
    t.dispatch("select_active_intent", {"intent_id": "INT-001"})
    engine = t.engine
    lookups = []
    real = type(engine).intents
    monkeypatch.setattr(
        type(engine), "intents", lambda self: lookups.append(1) or real(self), raising=True
    )
    r = t.read_file("inventory/models.py")
    out = t.write_file("inventory/models.py", "A = 1\n", expected_sha256=r.sha256)
    assert out.success and len(lookups) == 1
    assert ledger(gov)[-1]["metadata"]["intent_id"] == "INT-001"
    (gov / ".orchestration" / "active_intents.yaml").write_text(
        INTENTS.replace('owned_scope: ["inventory/**", "tests/**"]', 'owned_scope: ["web/**"]')
    )
    refused = t.dispatch(
        "write_file",
        {"path": "inventory/models.py", "content": "A = 2\n", "expected_sha256": out.sha256},
    )
    assert refused["error_code"] == "SCOPE_VIOLATION"
