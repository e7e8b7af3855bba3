"""Per-session ``[budget]`` limits, attacked through the API, ``dispatch`` and the command
line as new processes: a read that would cross a limit returns nothing and leaves
nothing behind, a write past the limit writes nothing, and the count survives a new
process on the same session (and is kept apart per session).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO
from _tracewal_setup import governed

from ctxnb import Workspace
from ctxnb.config import BudgetConfig
from ctxnb.errors import ConfigError, PolicyError
from ctxnb.samples import copy_sample_workspace
from ctxnb.tools.budget import SessionBudget, _digest

ENV = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
A = "inventory/a.py"  # 100 bytes
B = "inventory/b.py"  # 200 bytes


def ctxnb(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", *args],
        cwd=cwd,
        env=ENV,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def budgeted(root: Path, settings: str) -> Path:
    (root / "ctxnb.toml").write_text(f"[budget]\n{settings}\n")
    (root / A).write_text("#" * 99 + "\n")
    (root / B).write_text("#" * 199 + "\n")
    return root


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return copy_sample_workspace(tmp_path)


def audit(root: Path) -> list[dict]:
    return [json.loads(x) for x in (root / ".ctxnb" / "audit.jsonl").read_text().splitlines()]


def test_a_read_that_would_cross_the_byte_limit_returns_nothing(ws: Path) -> None:
    budgeted(ws, "read_bytes = 250")
    with Workspace.open(ws) as w:
        session = w.session("s1")
        tools = w.tools(session)
        first = tools.dispatch("read_file", {"path": A})
        assert first["ok"] and first["budget_remaining"] == {"read_bytes": 150}

        over = tools.dispatch("read_file", {"path": B})
        assert over["ok"] is False and over["error_code"] == "BUDGET_EXCEEDED"
        assert over["recoverable"] is False and "ctxnb.toml" in over["required_action"]
        assert "#" * 50 not in json.dumps(over)  # not one line of the file
        assert over["budget_remaining"] == {"read_bytes": 150}
        # Nothing of b.py entered the context either.
        assert w.object_id(B) not in session.active_set
        assert "#" * 50 not in session.assemble(record=False).to_text().replace("#" * 99, "")
        # A refused read is no base for an edit: the write is refused as unread.
        edit = tools.dispatch("write_file", {"path": B, "content": "x = 1\n"})
        assert edit["error_code"] == "READ_BEFORE_WRITE"

        # Up to the limit exactly is allowed; one byte past it is not.
        assert tools.dispatch("read_file", {"path": A})["budget_remaining"] == {"read_bytes": 50}
        (ws / A).write_text("#" * 49 + "\n")
        assert tools.dispatch("read_file", {"path": A})["budget_remaining"] == {"read_bytes": 0}
        (ws / A).write_text("\n")
        assert tools.dispatch("read_file", {"path": A})["error_code"] == "BUDGET_EXCEEDED"
        # The API raises what dispatch reports.
        with pytest.raises(Exception, match="read budget") as e:
            tools.read_file(A)
        assert getattr(e.value, "error_code", None) == "BUDGET_EXCEEDED"
    refusals = [r for r in audit(ws) if r["error_code"] == "BUDGET_EXCEEDED"]
    assert len(refusals) == 3 and all(r["read_bytes"] is None for r in refusals)


def test_the_token_limit_counts_with_the_sessions_counter(ws: Path) -> None:
    budgeted(ws, "read_tokens = 10")
    with Workspace.open(ws) as w:
        session = w.session("s1")
        tools = w.tools(session)
        (ws / A).write_text("x = 1\n" + " ".join(f"word{i}" for i in range(40)) + "\n")
        assert session.token_counter.count("x = 1\n") <= 10
        assert session.token_counter.count((ws / A).read_text()) > 10
        first = tools.dispatch("read_lines", {"path": A, "start": 1, "end": 1})
        left = 10 - session.token_counter.count("x = 1\n")
        assert first["budget_remaining"] == {"read_tokens": left}
        out = tools.dispatch("read_file", {"path": A})
        assert out["error_code"] == "BUDGET_EXCEEDED" and "tokens" in out["message"]
        assert "word7" not in json.dumps(out)
        assert out["budget_remaining"] == {"read_tokens": left}


def test_a_write_past_the_limit_writes_nothing_whatever_the_tool(ws: Path) -> None:
    budgeted(ws, "writes = 1")
    with Workspace.open(ws) as w:
        tools = w.tools(w.session("s1"))
        ok = tools.dispatch("write_file", {"path": "inventory/new.py", "content": "x = 1\n"})
        assert ok["ok"] and ok["budget_remaining"] == {"writes": 0}
        second = tools.dispatch("write_file", {"path": "inventory/two.py", "content": "y\n"})
        assert second["error_code"] == "BUDGET_EXCEEDED" and second["recoverable"] is False
        assert not (ws / "inventory" / "two.py").exists()
        before = (ws / A).read_bytes()
        sha = tools.dispatch("read_file", {"path": A})["result"]["sha256"]
        patch = "".join(difflib.unified_diff(["#" * 99 + "\n"], ["x\n"], f"a/{A}", f"b/{A}"))
        for name, args in [
            ("apply_patch", {"path": A, "unified_diff": patch, "expected_sha256": sha}),
            ("write_file", {"path": A, "content": "", "mode": "append"}),
            ("restore_file", {"path": A}),
        ]:  # fmt: skip
            out = tools.dispatch(name, args)
            assert out["error_code"] == "BUDGET_EXCEEDED", (name, out)
        assert (ws / A).read_bytes() == before
        # A refused write is not a write: reads go on, and the count does not grow.
        assert tools.dispatch("read_file", {"path": B})["budget_remaining"] == {"writes": 0}
    assert sum(1 for r in audit(ws) if r["success"] and r["mutating"]) == 1


def test_the_budget_survives_a_new_process_on_the_same_session(ws: Path) -> None:
    budgeted(ws, "read_bytes = 250\nwrites = 1")
    first = ctxnb("open", B, "--session", "agent", cwd=ws)
    assert first.returncode == 0, first.stderr
    assert "budget left: read_bytes 50, writes 1" in first.stdout.splitlines()[0]
    # A second process on the same session has 50 bytes left: a.py (100) is refused.
    again = ctxnb("open", A, "--session", "agent", cwd=ws)
    assert again.returncode == 1 and "BUDGET_EXCEEDED" in again.stderr
    assert "#" not in again.stdout
    # Another session has its own budget.
    assert ctxnb("open", A, "--session", "other", cwd=ws).returncode == 0

    sha = hashlib.sha256((ws / B).read_bytes()).hexdigest()
    diff = "".join(difflib.unified_diff(["#" * 199 + "\n"], ["b\n"], f"a/{B}", f"b/{B}"))
    ok = ctxnb("patch", B, "--session", "agent", "--sha256", sha, cwd=ws, stdin=diff)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.rstrip().endswith("budget left: read_bytes 50, writes 0")
    sha = hashlib.sha256((ws / B).read_bytes()).hexdigest()
    diff = "".join(difflib.unified_diff(["b\n"], ["c\n"], f"a/{B}", f"b/{B}"))
    no = ctxnb("patch", B, "--session", "agent", "--sha256", sha, cwd=ws, stdin=diff)
    assert no.returncode == 1 and "BUDGET_EXCEEDED" in no.stderr
    assert (ws / B).read_text() == "b\n"
    # The API in this process counts what the other processes used.
    with Workspace.open(ws) as w:
        assert w.tools(w.session("agent")).budget_remaining() == {"read_bytes": 50, "writes": 0}


def test_a_governed_write_past_the_budget_asks_nothing_and_traces_nothing(tmp_path: Path) -> None:
    root = budgeted(governed(copy_sample_workspace(tmp_path)), "writes = 0")
    with Workspace.open(root) as w:
        tools = w.tools(w.session("s1"))
        tools.engine.select_active_intent("INT-001")
        out = tools.dispatch("write_file", {"path": "inventory/new.py", "content": "x\n"})
    assert out["error_code"] == "BUDGET_EXCEEDED"
    assert not (root / "inventory" / "new.py").exists()
    assert (root / ".orchestration" / "agent_trace.jsonl").read_text() == ""


def test_budget_refusals_count_toward_the_engines_breaker(tmp_path: Path) -> None:
    root = budgeted(governed(copy_sample_workspace(tmp_path)), "writes = 0\nread_bytes = 10")
    with Workspace.open(root) as w:
        tools = w.tools(w.session("s1"))
        tools.engine.select_active_intent("INT-001")
        for _ in range(2):  # an agent that keeps writing and reading past its budget
            out = tools.dispatch("write_file", {"path": "inventory/new.py", "content": "x\n"})
            assert out["error_code"] == "BUDGET_EXCEEDED"
            assert tools.dispatch("read_file", {"path": A})["error_code"] == "BUDGET_EXCEEDED"
        assert tools.engine.failures == {"write_file": 2, "read_file": 2}
    # The breaker is the workspace's file: another process (Claude Code's hook) sees it.
    from ctxnb.govern.breaker import BreakerState

    counts = BreakerState(root / ".ctxnb" / "breaker.json").counts()
    assert counts == {"write_file": 2, "read_file": 2}


def test_no_budget_section_means_no_limit_and_no_key(ws: Path) -> None:
    with Workspace.open(ws) as w:
        tools = w.tools(w.session("s1"))
        assert "budget_remaining" not in tools.dispatch("read_file", {"path": "README.md"})
        assert tools.budget_remaining() is None


@pytest.mark.parametrize("bad", ["read_bytes = -1", "writes = 'many'", "reads = 3"])
def test_a_bad_budget_setting_names_the_key(ws: Path, bad: str) -> None:
    (ws / "ctxnb.toml").write_text(f"[budget]\n{bad}\n")
    with pytest.raises(ConfigError, match="budget"):
        Workspace.open(ws).close()


def test_an_agent_cannot_raise_its_own_budget(ws: Path) -> None:
    budgeted(ws, "writes = 2")
    settings = (ws / "ctxnb.toml").read_text()
    with Workspace.open(ws) as w:
        tools = w.tools(w.session("s1"))
        out = tools.dispatch(
            "write_file", {"path": "ctxnb.toml", "content": "[budget]\nwrites = 1000\n"}
        )
        assert out["ok"] is False and out["budget_remaining"] == {"writes": 2}
    assert (ws / "ctxnb.toml").read_text() == settings


# --------------------------------------------------------------------------- the counter


def _log(path: Path, writes: int, others: int = 0) -> None:
    """Append ``writes`` writes of session "s", then ``others`` lines of "t"."""
    lines = [{"session_id": "s", "tool": "write_file", "success": True, "mutating": True}] * writes
    lines += [{"session_id": "t", "tool": "read_file", "success": True, "read_bytes": 7}] * others
    with path.open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)


def _budget(tmp_path: Path, writes: int = 100) -> SessionBudget:
    return SessionBudget(
        BudgetConfig(writes=writes),
        tmp_path / "audit.jsonl",
        "s",
        counter=tmp_path / "budget" / "s.json",
    )


def test_a_counter_lets_the_next_process_read_only_the_lines_after_it(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    _log(log, writes=3, others=200)
    assert _budget(tmp_path).remaining() == {"writes": 97}
    state = json.loads((tmp_path / "budget" / "s.json").read_text())
    assert state["offset"] == log.stat().st_size
    assert state["usage"]["writes"] == 3
    # Rewrite a write of "s" far before the offset as another session's (same length):
    # a budget that re-read the log would count 2 writes; one that starts at the
    # counter's offset still counts the 3 it had.
    text = log.read_text()
    first = text.index('"session_id": "s"')
    log.write_text(text[:first] + '"session_id": "u"' + text[first + 17 :])
    assert first < log.stat().st_size - 4096
    _log(log, writes=2)
    again = _budget(tmp_path)
    assert again.remaining() == {"writes": 95}
    assert again.recounted is None


def _forge(state: dict, **changes: object) -> dict:
    """``state`` with ``changes`` and a digest made again, as a careful editor would."""
    body = {k: v for k, v in state.items() if k != "digest"} | changes
    return body | {"digest": _digest(body)}


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda raw, st, log: b"not json", "the counter is not JSON"),
        (lambda raw, st, log: raw[: len(raw) // 2], "the counter is not JSON"),
        (lambda raw, st, log: b"[]", "not a version 1 budget counter"),
        # An edit that lowers the count without making the digest again.
        (
            lambda raw, st, log: json.dumps(st | {"usage": st["usage"] | {"writes": 0}}).encode(),
            "the counter's digest does not match its fields",
        ),
        (
            lambda raw, st, log: json.dumps(_forge(st, sessions=["s", "x"])).encode(),
            "the counter sums other sessions",
        ),
        (
            lambda raw, st, log: json.dumps(
                _forge(st, usage=st["usage"] | {"writes": -5})
            ).encode(),
            "the counter's fields are not counts",
        ),
        (
            lambda raw, st, log: json.dumps(_forge(st, offset=True)).encode(),
            "the counter's fields are not counts",
        ),
        # The log cut short under the counter (its offset is past the end) ...
        (
            lambda raw, st, log: log.write_bytes(log.read_bytes()[:100]) and raw,
            "the audit log does not hold what the counter counted",
        ),
        # ... or replaced by another log of the same length.
        (
            lambda raw, st, log: log.write_bytes(log.read_bytes().replace(b'"t"', b'"v"')) and raw,
            "the audit log does not hold what the counter counted",
        ),
    ],
)
def test_a_counter_that_does_not_check_out_is_set_aside_and_the_log_counted_again(
    tmp_path: Path, damage: Any, why: str
) -> None:
    log = tmp_path / "audit.jsonl"
    _log(log, writes=3, others=50)
    _budget(tmp_path).remaining()
    counter = tmp_path / "budget" / "s.json"
    raw = counter.read_bytes()
    counter.write_bytes(damage(raw, json.loads(raw), log))
    # What the log's whole lines hold (a cut last line is not counted until whole).
    truth = sum(1 for x in log.read_text().split("\n")[:-1] if '"s"' in x)
    budget = _budget(tmp_path)
    assert budget.remaining() == {"writes": 100 - truth}
    assert budget.recounted is not None and why in budget.recounted
    # Replaced by one that checks out: the next process trusts it again.
    fresh = _budget(tmp_path)
    assert fresh.remaining() == {"writes": 100 - truth}
    assert fresh.recounted is None


def test_a_counter_that_cannot_be_written_costs_speed_not_the_count(tmp_path: Path) -> None:
    _log(tmp_path / "audit.jsonl", writes=4)
    (tmp_path / "budget").write_text("a file where the counter's folder should be")
    budget = _budget(tmp_path, writes=4)
    with pytest.raises(PolicyError, match="BUDGET_EXCEEDED|used its budget of 4"):
        budget.check_write("write_file")
    assert budget.remaining() == {"writes": 0}
