"""A governed workspace, its file tools and an agent's sandboxed commands, for the
sandbox tests; fingerprints of a tree to show what changed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from _git import git

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.approval import CallbackApprover

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory rules
    status: active
    owned_scope: ["inventory/**"]
"""


def fingerprint(base: Path, *, skip_top: tuple[str, ...] = ()) -> dict[str, str]:
    """Path -> content hash (or link target / 'dir') of everything under ``base``."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = os.path.relpath(dirpath, base)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in skip_top]
            rel_dir = ""
        for d in dirnames:
            p = os.path.join(dirpath, d)
            key = os.path.join(rel_dir, d)
            out[key] = "link:" + os.readlink(p) if os.path.islink(p) else "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            key = os.path.join(rel_dir, f)
            if os.path.islink(p):
                out[key] = "link:" + os.readlink(p)
            else:
                st = os.lstat(p)
                with open(p, "rb") as fh:
                    out[key] = f"{st.st_mode:o}:{hashlib.sha256(fh.read()).hexdigest()}"
    return out


def tools_for(root: Path, approver=None, sid: str = "agent-1"):
    ws = Workspace.open(root)
    return ws.tools(ws.session(sid), caller="test-agent", model_id="test/model", approver=approver)


def governed(root: Path, scope: str = '["inventory/**"]') -> None:
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(
        INTENTS.replace('["inventory/**"]', scope)
    )


def agent(root: Path, approve: bool | None):
    seen: list = []

    def decide(req) -> bool:
        seen.append(req)
        return bool(approve)

    approver = None if approve is None else CallbackApprover(decide, by="test")
    t = tools_for(root, approver)
    assert t.workspace.config.sandbox.backend == "bwrap"
    assert t.dispatch("select_active_intent", {"intent_id": "INT-001"})["ok"]
    return t, seen


def run(t, cmd: str) -> dict:
    return t.dispatch("run_command", {"cmd": cmd, "shell": True, "timeout": 30})


def save_after_the_check(monkeypatch, root: Path, rel: str) -> None:
    """Make an editor save ``rel`` right after the commit's conflict check passed it
    (someone who takes no ctxnb lock: an editor, Claude Code's Write)."""
    from ctxnb.sandbox.commit import CommandEffects

    checked = CommandEffects._conflict

    def check_then_save(self, p, started_ns):  # type: ignore[no-untyped-def]
        reason = checked(self, p, started_ns)
        if p.rel == rel:
            (root / rel).write_text("saved by the editor\n")  # lands after the check
        return reason

    monkeypatch.setattr(CommandEffects, "_conflict", check_then_save)


AGENT = "/workspace"
"""The agent prefix of the mount in :func:`mounted_ws`."""


def mounted_ws(root: Path, prefix: str = AGENT) -> Path:
    """A governed git repository whose ``ctxnb.toml`` maps ``prefix`` to its root."""
    (root / "inventory").mkdir(parents=True)
    (root / "inventory" / "stock.txt").write_text("apples 3\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (root / ".env").write_text("SUPPLIER_TOKEN=generated-" + os.urandom(8).hex() + "\n")
    os.symlink("/etc", root / "inventory" / "etc-link")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    (root / "ctxnb.toml").write_text(
        f'[[mounts]]\nagent_prefix = "{prefix}"\ncanonical_prefix = "{root}"\n'
    )
    return root


def strings(value: Any) -> list[str]:
    """Every string of a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def assert_no_host_path(answer: Any, root: Path) -> None:
    leaked = [s for s in strings(answer) if str(root) in s]
    assert not leaked, leaked
