"""A governed workspace for the trace WAL's tests (tests/test_tracewal*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxnb import Workspace
from ctxnb.govern import init_governance

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory work
    owned_scope: ["inventory/**"]
"""


def governed(root: Path) -> Path:
    """``root`` with governance on and one intent, INT-001, owning ``inventory/**``."""
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    # Several writers of one intent, two at once in some tests and in turn in one
    # process in others: what these tests are about is the ledger under concurrent
    # writers, not write partitioning, so they say the writers share the scope.
    (root / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
    return root


def tools_of(root: Path, sid: str = "agent-1") -> tuple[Workspace, Any]:
    """The workspace and an agent's governed tools, INT-001 selected."""
    ws = Workspace.open(root)
    tools = ws.tools(ws.session(sid), caller="test-agent", model_id="anthropic/claude-test")
    tools.engine.select_active_intent("INT-001")
    return ws, tools


def ledger_path(root: Path) -> Path:
    return root / ".orchestration" / "agent_trace.jsonl"


def fail_log_fsync(monkeypatch: Any) -> None:
    """Make every fsync of a store's ``txlog`` fail with EIO after it ran (a disk that
    reports a write error): the seam is the fsync the store queues, nothing else."""
    import os

    from ctxnb._util import fsync as _fsync

    real_aio = _fsync._aio_fsync

    def aio_fsync(fd: int) -> object:
        wait = real_aio(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("txlog"):

            def failed() -> None:
                if wait is not None:
                    wait()
                raise OSError(5, "Input/output error")

            return failed
        return wait

    monkeypatch.setattr(_fsync, "_aio_fsync", aio_fsync)


def logged_version(root: Path, rel: str, text: str) -> tuple[Workspace, Any, Any, Any]:
    """A version of ``rel`` committed with its trace record in the store's log, and no
    ledger line yet (what a crash between the two writes leaves): ``(ws, recorder,
    pending, observation)``."""
    from ctxnb.govern.record import FileChange, Origin, Recorder

    ws = Workspace.open(root)
    rec = Recorder(root)
    (root / rel).write_text(text)
    pending = rec.prepare_logged(
        FileChange(rel, old="", new=text),
        Origin("write_file", caller="test", intent_id="INT-001"),
        oid=ws.object_id(rel),
        store_dir=ws.store.path,
    )
    obs = ws.observe([rel], data=[text.encode()], attached=[pending.attachment])[0]
    return ws, rec, pending, obs
