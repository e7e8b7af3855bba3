"""Confined commands: bubblewrap mounts, an environment allow-list, observed effects.

Every command an agent runs (``run_command``, the MCP server, the quality loop, Claude
Code's Bash) runs in a :class:`Sandbox`: the system and the workspace read-only, only
the selected intent's scope writable, ``.git`` and ``.orchestration`` read-only,
``.ctxnb`` and denied files (``.env*``, keys) hidden, a private ``/tmp`` and ``HOME``,
no network and none of the caller's secret variables. What the command changed is
found by comparing stat snapshots, and the governed layer stores, traces or puts
back each change. Importing this package is cheap (the hook path uses it).

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb.sandbox import Sandbox
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / ".env").write_text("TOKEN=x\\n")
    >>> r = Sandbox(ws).run("cat .env; touch new.txt", shell=True)
    >>> "TOKEN" in r.result.stdout, (ws / "new.txt").exists()
    (False, False)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .observe import FileChange, Snapshot, diff_snapshots, take_snapshot
    from .plan import SandboxLimits, SandboxPlan, plan_sandbox, writable_dirs
    from .process import CommandResult, run_command
    from .runner import Sandbox, SandboxResult, check_bwrap

_EXPORTS = {
    "CommandResult": "process",
    "FileChange": "observe",
    "Sandbox": "runner",
    "SandboxLimits": "plan",
    "SandboxPlan": "plan",
    "SandboxResult": "runner",
    "Snapshot": "observe",
    "check_bwrap": "runner",
    "diff_snapshots": "observe",
    "plan_sandbox": "plan",
    "run_command": "process",
    "take_snapshot": "observe",
    "writable_dirs": "plan",
}

__all__ = [
    "CommandResult",
    "FileChange",
    "Sandbox",
    "SandboxLimits",
    "SandboxPlan",
    "SandboxResult",
    "Snapshot",
    "check_bwrap",
    "diff_snapshots",
    "plan_sandbox",
    "run_command",
    "take_snapshot",
    "writable_dirs",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
