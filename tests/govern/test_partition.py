"""Write partitioning and supervisor–worker: two live sessions never hold overlapping
scopes, and a worker is narrowed to a subset of its supervisor's scope."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.errors import PolicyError
from ctxnb.govern import init_governance
from ctxnb.govern.approval import CallbackApprover
from ctxnb.govern.partition import (
    Lease,
    check_subset,
    glob_contains,
    globs_may_overlap,
    holder_alive,
    live_leases,
    write_lease,
)
from ctxnb.govern.why import why
from ctxnb.hashing import sha256_hex

INTENTS = """\
active_intents:
  - id: INT-APP
    name: App code
    owned_scope: ["src/**"]
    constraints: ["Money stays in integer cents"]
  - id: INT-PY
    name: All Python
    owned_scope: ["*.py"]
  - id: INT-DOCS
    name: Docs
    owned_scope: ["docs/**"]
  - id: INT-GEN
    name: Generated code
    owned_scope: ["src/gen/**"]
  - id: INT-CSS
    name: Styles anywhere
    owned_scope: ["*.css"]
"""


def make_ws(root: Path, toml: str = "") -> Path:
    (root / "src" / "gen").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "app.py").write_text("PRICE = 100\n")
    (root / "src" / "util.py").write_text("def f():\n    return 1\n")
    (root / "src" / "gen" / "table.txt").write_text("generated\n")
    (root / "docs" / "guide.md").write_text("# Guide\n")
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    if toml:
        (root / "ctxnb.toml").write_text(toml)
    Workspace.open(root).index()
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_ws(tmp_path / "ws")


def select(tools, intent_id: str) -> dict:
    return tools.dispatch("select_active_intent", {"intent_id": intent_id})


def test_overlapping_intent_in_second_live_session_is_refused_naming_both(root):
    ws = Workspace.open(root)
    a, b = ws.session("alice"), ws.session("bob")
    ta, tb = ws.tools(a), ws.tools(b)
    assert select(ta, "INT-APP")["ok"]
    out = select(tb, "INT-PY")  # *.py owns src/app.py, which INT-APP owns too
    assert out["error_code"] == "SCOPE_OVERLAP"
    for name in ("INT-APP", "INT-PY", "alice", "bob", "src/app.py"):
        assert name in out["message"]
    # Refused means not selected: bob still cannot write, even a file only INT-PY owns.
    (root / "tool.py").write_text("x = 1\n")
    tb.dispatch("read_file", {"path": "tool.py"})
    w = tb.dispatch("write_file", {"path": "tool.py", "content": "x = 2\n"})
    assert w["error_code"] == "NO_ACTIVE_INTENT"
    assert (root / "tool.py").read_text() == "x = 1\n"
    # A disjoint intent is fine, and so is the same session re-selecting.
    assert select(tb, "INT-DOCS")["ok"]
    assert select(ta, "INT-APP")["ok"]


def test_globs_that_could_overlap_but_share_no_file_are_not_an_overlap(root):
    ws = Workspace.open(root)
    ta, tb = ws.tools(ws.session("a")), ws.tools(ws.session("b"))
    assert select(ta, "INT-APP")["ok"]
    # *.css could match under src/, but no indexed .css file exists there.
    assert globs_may_overlap("src/**", "*.css")
    assert select(tb, "INT-CSS")["ok"]


def test_a_file_the_index_does_not_hold_yet_confirms_an_overlap(root):
    """The index lags the tree: a .css file made under src/ after indexing is owned by
    both src/** and *.css, and that is an overlap (the files on disk confirm too)."""
    (root / "src" / "theme.css").write_text("a { color: red }\n")
    ws = Workspace.open(root)
    ta, tb = ws.tools(ws.session("a")), ws.tools(ws.session("b"))
    assert select(ta, "INT-APP")["ok"]
    out = select(tb, "INT-CSS")
    assert out["error_code"] == "SCOPE_OVERLAP" and "src/theme.css" in out["message"], out


def test_strict_setting_counts_possible_overlap(tmp_path):
    root = make_ws(tmp_path / "ws", "[governance]\noverlap_strict = true\n")
    ws = Workspace.open(root)
    ta, tb = ws.tools(ws.session("a")), ws.tools(ws.session("b"))
    assert select(ta, "INT-APP")["ok"]
    out = select(tb, "INT-CSS")
    assert out["error_code"] == "SCOPE_OVERLAP"
    assert "overlap_strict" in out["message"]


def test_a_nested_scope_is_an_overlap_and_siblings_are_not(root):
    ws = Workspace.open(root)
    ta, tb = ws.tools(ws.session("a")), ws.tools(ws.session("b"))
    assert select(ta, "INT-GEN")["ok"]
    assert select(tb, "INT-APP")["error_code"] == "SCOPE_OVERLAP"  # src/** ⊃ src/gen/**
    assert select(tb, "INT-DOCS")["ok"]


def test_closing_a_session_releases_its_scope(root):
    ws = Workspace.open(root)
    a = ws.session("a")
    ta, tb = ws.tools(a), ws.tools(ws.session("b"))
    assert select(ta, "INT-APP")["ok"]
    assert select(tb, "INT-PY")["error_code"] == "SCOPE_OVERLAP"
    a.close()
    assert [lease.session_id for lease in live_leases(root)] == []
    assert select(tb, "INT-PY")["ok"]


def test_a_lease_not_refreshed_expires(root):
    ws = Workspace.open(root)
    tb = ws.tools(ws.session("b"))
    # A crashed session's lease, refreshed 31 minutes ago: past the 30 of the default.
    write_lease(root, "crashed", "INT-APP", ["src/**"], now=time.time() - 31 * 60)
    assert select(tb, "INT-PY")["ok"]
    assert all(lease.session_id != "crashed" for lease in live_leases(root))
    # The same lease 29 minutes old is still live.
    tc = ws.tools(ws.session("c"))
    write_lease(root, "alive", "INT-DOCS", ["docs/**"], now=time.time() - 29 * 60)
    out = select(tc, "INT-DOCS")
    assert out["error_code"] == "SCOPE_OVERLAP" and "alive" in out["message"]


def test_lease_minutes_setting_is_honoured(tmp_path):
    root = make_ws(tmp_path / "ws", "[governance]\nlease_minutes = 1\n")
    ws = Workspace.open(root)
    tb = ws.tools(ws.session("b"))
    write_lease(root, "idle", "INT-APP", ["src/**"], now=time.time() - 90)
    assert select(tb, "INT-PY")["ok"]


def test_ask_setting_asks_the_approver(tmp_path):
    root = make_ws(tmp_path / "ws", '[governance]\noverlap = "ask"\n')
    ws = Workspace.open(root)
    asked: list[str] = []
    yes = CallbackApprover(lambda req: asked.append(req.reason) or True)
    no = CallbackApprover(lambda req: False)
    ta = ws.tools(ws.session("a"))
    assert select(ta, "INT-APP")["ok"]
    assert select(ws.tools(ws.session("b"), approver=no), "INT-PY")["error_code"] == (
        "SCOPE_OVERLAP"
    )
    assert select(ws.tools(ws.session("c"), approver=yes), "INT-PY")["ok"]
    assert "INT-APP" in asked[0] and "INT-PY" in asked[0]
    # Without an approver "ask" has no one to ask: refused.
    assert select(ws.tools(ws.session("d")), "INT-PY")["error_code"] == "SCOPE_OVERLAP"


def test_an_expired_own_lease_is_taken_again_or_refused(root):
    ws = Workspace.open(root)
    ta = ws.tools(ws.session("a"))
    assert select(ta, "INT-APP")["ok"]
    # a's lease lapses (it was idle) and b takes an overlapping scope meanwhile.
    write_lease(root, "a", "INT-APP", ["src/**"], now=time.time() - 31 * 60)
    assert select(ws.tools(ws.session("b")), "INT-PY")["ok"]
    ta.engine._leased_at = 0.0  # a's next call is due to refresh its lease
    ta.dispatch("read_file", {"path": "src/app.py"})
    out = ta.dispatch("write_file", {"path": "src/app.py", "content": "PRICE = 1\n"})
    assert out["error_code"] == "SCOPE_OVERLAP"
    assert (root / "src" / "app.py").read_text() == "PRICE = 100\n"


# -- supervisor and worker -------------------------------------------------------------------------
def test_worker_is_narrowed_and_its_trace_names_its_supervisor(root):
    ws = Workspace.open(root)
    boss = ws.session("boss", system_prompt="Keep functions pure.")
    tools = ws.tools(boss)
    assert select(tools, "INT-APP")["ok"]
    boss.add_turn("user", "Refactor pricing: 1. move PRICE to cents 2. update util")
    boss.add_turn("assistant", "Plan: worker takes src/app.py; I keep src/util.py.")
    worker = boss.spawn_worker(scope=["src/app.py"], budget=4000)
    wt = ws.tools(worker)  # opening the tools again keeps the narrowing
    assert wt.engine.current_intent().owned_scope == ["src/app.py"]
    prompt = worker.system_prompt
    for part in ("Keep functions pure.", "integer cents", "move PRICE to cents", "src/app.py"):
        assert part in prompt
    assert [worker.get(o)["source"]["path"] for o in worker.active_set] == [
        str(root / "src" / "app.py")
    ]
    # Inside the supervisor's scope but outside the worker's: refused.
    wt.dispatch("read_file", {"path": "src/util.py"})
    out = wt.dispatch("write_file", {"path": "src/util.py", "content": "x = 1\n"})
    assert out["error_code"] == "SCOPE_VIOLATION"
    # A worker cannot widen itself by selecting another intent.
    assert select(wt, "INT-DOCS")["error_code"] == "INVALID_INTENT"
    wt.dispatch("read_file", {"path": "src/app.py"})
    assert wt.dispatch("write_file", {"path": "src/app.py", "content": "PRICE = 10000\n"})["ok"]
    records = [
        json.loads(line)
        for line in (root / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    ]
    meta = records[-1]["metadata"]
    assert meta["session_id"] == worker.session_id and meta["parent_session"] == "boss"
    text = str(why(ws, "src/app.py"))
    assert f"boss → {worker.session_id} (worker)" in text


def test_worker_scope_outside_the_supervisors_is_refused(root):
    ws = Workspace.open(root)
    boss = ws.session("boss")
    assert select(ws.tools(boss), "INT-APP")["ok"]
    for scope in (["docs/**"], ["*.py"], ["**"], ["src/../docs/**"], [], ["SRC/app.py"]):
        with pytest.raises(PolicyError) as err:
            boss.spawn_worker(scope=scope)
        assert err.value.error_code == "SCOPE_NOT_SUBSET", scope
    assert [lease.session_id for lease in live_leases(root)] == ["boss"]


def test_two_workers_of_one_supervisor_are_partitioned(root):
    ws = Workspace.open(root)
    boss = ws.session("boss")
    assert select(ws.tools(boss), "INT-APP")["ok"]
    # Held: a worker session dropped without close() frees its scope when collected.
    first = boss.spawn_worker(scope=["src/app.py"])
    with pytest.raises(PolicyError) as err:
        boss.spawn_worker(scope=["src/*.py"])
    assert err.value.error_code == "SCOPE_OVERLAP"
    second = boss.spawn_worker(scope=["src/gen/**"])
    assert first is not second
    # Another session still cannot take what the supervisor holds.
    assert select(ws.tools(ws.session("eve")), "INT-PY")["error_code"] == "SCOPE_OVERLAP"


def test_spawn_worker_needs_an_intent(root):
    ws = Workspace.open(root)
    boss = ws.session("boss")
    ws.tools(boss)
    with pytest.raises(PolicyError) as err:
        boss.spawn_worker(scope=["src/app.py"])
    assert err.value.error_code == "NO_ACTIVE_INTENT"
    with pytest.raises(PolicyError) as err:
        ws.session("plain").spawn_worker(scope=["src/app.py"])
    assert err.value.error_code == "NOT_GOVERNED"


@pytest.mark.parametrize(
    ("outer", "inner", "contained"),
    [
        ("src/**", "src/api/*.py", True),
        ("src/", "lib/src/x.py", True),  # no slash inside: matches at any depth
        ("src/**", "lib/src/x.py", False),  # anchored: only the top-level src
        ("/src/**", "lib/src/x.py", False),
        ("src/*.py", "src/**", False),
        ("src/**", "*.py", False),  # *.py matches at any depth
        ("SRC/**", "src/a.py", False),  # no case folding in a containment proof
        ("src/a/**", "src/**", False),
        ("**", "anything/at/all", True),
    ],
)
def test_glob_containment_is_conservative(outer, inner, contained):
    assert glob_contains(outer, inner) is contained


def test_subset_is_confirmed_on_the_indexed_files():
    # A negation in the supervisor's scope makes containment unprovable: refused.
    with pytest.raises(PolicyError):
        check_subset(["src/**", "!src/secret/**"], ["src/secret/**"], [])
    check_subset(["src/**"], ["src/a.py"], ["src/a.py", "docs/x.md"])


# -- the Claude Code door ------------------------------------------------------------------------
def test_hook_select_intent_is_refused_beside_a_live_session(root, tmp_path):
    ws = Workspace.open(root)
    notebook = ws.session("notebook")  # held: a dropped session frees its scope
    assert select(ws.tools(notebook), "INT-APP")["ok"]
    ctxnb = Path(__import__("sys").executable).parent / "ctxnb"
    env = {"CTXNB_STATE_DIR": str(tmp_path / "state"), "PATH": str(ctxnb.parent)}
    proc = subprocess.run(
        [str(ctxnb), "hook", "select-intent", "INT-PY", "--session", "cc-1", "-w", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "INT-APP" in proc.stderr and "notebook" in proc.stderr and "cc-1" in proc.stderr
    ok = subprocess.run(
        [str(ctxnb), "hook", "select-intent", "INT-DOCS", "--session", "cc-1", "-w", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    # Now the hook session holds docs/**: a notebook session cannot take it.
    assert select(ws.tools(ws.session("nb2")), "INT-DOCS")["error_code"] == "SCOPE_OVERLAP"


# -- a lease dies with its process -------------------------------------------------------------
HOLDER = """\
import sys, time
from ctxnb import Workspace
ws = Workspace.open(sys.argv[1])
tools = ws.tools(ws.session("holder"))
out = tools.dispatch("select_active_intent", {"intent_id": "INT-APP"})
print("ready" if out["ok"] else out["message"], flush=True)
time.sleep(600)
"""


def put_lease(root: Path, lease: Lease) -> None:
    """Write ``lease`` as it would be found on disk (its file named by its session)."""
    name = sha256_hex(lease.session_id.encode("utf-8"))[:32] + ".json"
    (root / ".ctxnb" / "leases" / name).write_text(json.dumps(lease._asdict()))


def start_holder(root: Path) -> subprocess.Popen[str]:
    """A real process whose session holds INT-APP's scope (src/**) until it is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("reaped", [True, False])
def test_a_killed_sessions_lease_does_not_hold_the_scope(root, reaped):
    """kill -9 runs no close() and no atexit: the lease file stays, and must not count.
    Unreaped, the killed process is a zombie that still has a /proc entry."""
    holder = start_holder(root)
    try:
        ws = Workspace.open(root)
        tb = ws.tools(ws.session("b"))
        out = select(tb, "INT-PY")
        assert out["error_code"] == "SCOPE_OVERLAP" and "holder" in out["message"]
        os.kill(holder.pid, signal.SIGKILL)
        if reaped:
            holder.wait(timeout=60)
        else:
            deadline = time.monotonic() + 60
            while Path(f"/proc/{holder.pid}/stat").read_text().split(") ")[1][0] != "Z":
                assert time.monotonic() < deadline, "the killed process never became a zombie"
                time.sleep(0.05)
        assert select(tb, "INT-PY")["ok"]  # minutes before lease_minutes would free it
        assert [lease.session_id for lease in live_leases(root)] == ["b"]
    finally:
        holder.kill()
        holder.wait(timeout=60)
        assert holder.stdout is not None
        holder.stdout.close()


def test_a_lease_naming_a_reused_pid_is_not_held_by_its_new_process(root):
    """The pid of a dead holder may be given to another process: the start time tells."""
    lease = write_lease(root, "old", "INT-APP", ["src/**"])
    assert holder_alive(lease) is True  # this very process
    stale = lease._replace(started=(lease.started or 0) - 1)
    assert holder_alive(stale) is False
    put_lease(root, stale)
    ws = Workspace.open(root)
    assert select(ws.tools(ws.session("b")), "INT-PY")["ok"]


def test_a_lease_ctxnb_cannot_check_lives_by_its_age(root):
    """A Claude Code session's lease (no process holds it) and one from another pid
    namespace with a pid that is free here: unknown is not dead."""
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(ended.stdout)  # a process that has ended: its pid is free here
    hook = write_lease(root, "cc-1", "INT-APP", ["src/**"], bound=False)._replace(pid=pid)
    other = write_lease(root, "box", "INT-DOCS", ["docs/**"])._replace(
        pid=pid, where="another-boot:4026531836"
    )
    for lease in (hook, other):
        assert holder_alive(lease) is None
        put_lease(root, lease)
    ws = Workspace.open(root)
    tb = ws.tools(ws.session("b"))
    assert "cc-1" in select(tb, "INT-PY")["message"]
    assert "box" in select(tb, "INT-DOCS")["message"]


def test_a_worker_of_a_worker_is_partitioned_from_no_supervisor_and_why_shows_the_chain(root):
    """Two levels: the grand-worker conflicts with neither supervisor, the first
    supervisor's lease refresh does not trip over its grand-worker, and ``ctxnb why``
    (the real CLI process) names the whole chain."""
    ws = Workspace.open(root)
    boss = ws.session("boss")
    tools = ws.tools(boss)
    assert select(tools, "INT-APP")["ok"]
    lead = boss.spawn_worker(scope=["src/**"])
    leaf = lead.spawn_worker(scope=["src/app.py"])
    assert leaf.session_id == "boss.w1.w1"
    lt = ws.tools(leaf)
    assert lt.engine.current_intent().owned_scope == ["src/app.py"]
    lt.dispatch("read_file", {"path": "src/app.py"})
    assert lt.dispatch("write_file", {"path": "src/app.py", "content": "PRICE = 1\n"})["ok"]
    # The first supervisor's next call is due to refresh its lease beside both workers.
    tools.engine._leased_at = 0.0
    tools.dispatch("read_file", {"path": "src/util.py"})
    out = tools.dispatch(
        "write_file", {"path": "src/util.py", "content": "def f():\n    return 2\n"}
    )
    assert out["ok"], out
    # Others are still kept off the whole chain's files.
    assert select(ws.tools(ws.session("eve")), "INT-PY")["error_code"] == "SCOPE_OVERLAP"
    ctxnb = Path(sys.executable).parent / "ctxnb"
    env = {**os.environ, "PATH": f"{ctxnb.parent}:{os.environ.get('PATH', '')}"}
    shown = subprocess.run(
        [str(ctxnb), "why", "src/app.py", "-w", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "boss → boss.w1 → boss.w1.w1 (worker)" in shown.stdout, shown.stdout
    as_json = subprocess.run(
        [str(ctxnb), "why", "src/app.py:1", "-w", str(root), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    chains = [r["chain"] for r in json.loads(as_json.stdout)["records"].values()]
    assert chains == [["boss", "boss.w1", "boss.w1.w1"]], chains


def test_why_shows_no_chain_a_record_cannot_support(root):
    """A hand-edited chain whose last supervisor is not the record's parent is dropped:
    the parent alone is shown (the ledger's own check marks the edit)."""
    from ctxnb.govern.why import _record_why

    rec = {
        "id": "r1",
        "metadata": {"session_id": "w", "parent_session": "boss", "supervisors": ["eve"]},
    }
    assert _record_why(rec, "r1", {}).chain == ["boss", "w"]
    rec["metadata"]["supervisors"] = ["root", "boss"]
    assert _record_why(rec, "r1", {}).chain == ["root", "boss", "w"]


def test_a_lease_lock_swapped_for_a_link_is_refused_not_followed(tmp_path):
    from ctxnb.errors import StoreError
    from ctxnb.govern.partition import lease_lock

    target = tmp_path / "elsewhere"
    folder = tmp_path / "ws" / ".ctxnb" / "leases"
    folder.mkdir(parents=True)
    (folder / ".lock").symlink_to(target)
    with pytest.raises(StoreError, match="plain file"):
        with lease_lock(tmp_path / "ws"):
            pass
    assert not target.exists()
