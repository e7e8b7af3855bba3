"""A session dropped without ``close()`` releases its lease when it is collected, and
never a lease it does not hold."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

from test_partition import make_ws, put_lease, select

from ctxnb import Workspace
from ctxnb.govern.partition import live_leases


def _select_and_drop(ws: Workspace, session_id: str, intent_id: str) -> weakref.ref[object]:
    session = ws.session(session_id)
    assert select(ws.tools(session), intent_id)["ok"]
    return weakref.ref(session)


def test_a_dropped_session_frees_its_scope_when_collected(tmp_path):
    root = make_ws(tmp_path / "ws")
    ws = Workspace.open(root)
    gone = _select_and_drop(ws, "dropped", "INT-APP")
    gc.collect()
    assert gone() is None, "something still holds the dropped session"
    assert [lease.session_id for lease in live_leases(root)] == []
    assert select(ws.tools(ws.session("next")), "INT-PY")["ok"]


def test_a_session_still_held_keeps_its_scope_through_a_collection(tmp_path):
    root = make_ws(tmp_path / "ws")
    ws = Workspace.open(root)
    kept = ws.session("kept")
    tools = ws.tools(kept)
    assert select(tools, "INT-APP")["ok"]
    del tools  # the session alone still holds the engine through its governor
    gc.collect()
    out = select(ws.tools(ws.session("rival")), "INT-PY")
    assert out["error_code"] == "SCOPE_OVERLAP" and "kept" in out["message"]
    kept.close()
    assert select(ws.tools(ws.session("rival2")), "INT-PY")["ok"]


def test_a_dropped_session_leaves_a_lease_another_process_took_under_its_id(tmp_path):
    """Between the drop and the collection the session id's lease was taken by another
    process: the collection must not delete that process's lease."""
    root = make_ws(tmp_path / "ws")
    ws = Workspace.open(root)
    gone = _select_and_drop(ws, "shared-id", "INT-APP")
    (held,) = live_leases(root)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with open(f"/proc/{other.pid}/stat") as f:
            stat = f.read()
        started = int(stat[stat.rfind(")") + 2 :].split()[19])
        put_lease(root, held._replace(pid=other.pid, started=started))
        gc.collect()
        assert gone() is None
        assert [(x.session_id, x.pid) for x in live_leases(root)] == [("shared-id", other.pid)]
    finally:
        other.kill()
        other.wait(timeout=60)


FORKER = """
import os, sys
from ctxnb import Workspace
from ctxnb.govern.partition import live_leases
ws = Workspace.open(sys.argv[1])
session = ws.session("parent")
assert ws.tools(session).dispatch("select_active_intent", {"intent_id": "INT-APP"})["ok"]
if os.fork() == 0:
    sys.exit(0)  # the child ends as any script does: atexit runs every live finalizer
os.wait()
print([x.session_id for x in live_leases(sys.argv[1])], flush=True)
session.close()
print([x.session_id for x in live_leases(sys.argv[1])], flush=True)
"""


def test_a_forked_child_exiting_leaves_its_parents_lease(tmp_path):
    """A child forked while a session holds a lease runs the session's finalizer at its
    exit: the lease is the parent's, and stays until the parent closes the session."""
    root = make_ws(tmp_path / "ws")
    out = subprocess.run(
        [sys.executable, "-c", FORKER, str(root)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['parent']", "[]"]
