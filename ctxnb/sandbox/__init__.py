"""Confined commands: bubblewrap on a copy-on-write overlay, and a commit of what they did.

Every command an agent runs (``run_command``, the MCP server, the quality loop, Claude
Code's Bash) runs in a :class:`Sandbox`: the system read-only, the workspace as the
lower layer of an overlay (the command writes only its upper layer, which ctxnb keeps
out of its reach), ``.git`` and ``.orchestration`` read-only, ``.ctxnb``, denied
files (``.env*``, keys) and their hard links hidden, git object stores that hold
denied bytes hidden (:mod:`ctxnb.sandbox.gitstores`), sockets, FIFOs and devices
masked, a private ``/tmp`` and ``HOME``, no network and none of the caller's secret
variables. Afterwards the upper layer is read (:mod:`ctxnb.sandbox.upper`,
:mod:`ctxnb.sandbox.changes`), and :mod:`ctxnb.sandbox.commit` commits the in-scope
regular-file changes through the one governed write path; the rest is dropped with a
reason. A destructive change (:mod:`ctxnb.sandbox.destructive`, judged in bounded time)
waits for a human, who is shown the diff of its bytes (:mod:`ctxnb.sandbox.review`).
Importing this package is cheap (the hook path uses it).

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb.sandbox import Sandbox
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (ws / ".env").write_text("TOKEN=x\\n")
    >>> r = Sandbox(ws).run("cat .env; touch new.txt", shell=True)
    >>> "TOKEN" in r.result.stdout, (ws / "new.txt").exists(), [d.path for d in r.dropped]
    (False, False, ['new.txt'])
    >>> r.discard()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

if TYPE_CHECKING:
    from .changes import Dropped, FileChange, classify
    from .commands import EngineCommands
    from .commit import CommandEffects, EffectsReport, destructive_reason, run_governed
    from .plan import SandboxLimits, SandboxPlan, plan_sandbox, writable_dirs
    from .process import CommandResult, run_command
    from .runner import Sandbox, SandboxResult, check_bwrap
    from .upper import UpperEntry, walk_upper

_EXPORTS = {
    "CommandEffects": "commit",
    "CommandResult": "process",
    "Dropped": "changes",
    "EffectsReport": "commit",
    "EngineCommands": "commands",
    "FileChange": "changes",
    "Sandbox": "runner",
    "SandboxLimits": "plan",
    "SandboxPlan": "plan",
    "SandboxResult": "runner",
    "UpperEntry": "upper",
    "check_bwrap": "runner",
    "classify": "changes",
    "destructive_reason": "commit",
    "plan_sandbox": "plan",
    "run_command": "process",
    "run_governed": "commit",
    "walk_upper": "upper",
    "writable_dirs": "plan",
}

__all__ = [
    "CommandEffects",
    "CommandResult",
    "Dropped",
    "EffectsReport",
    "EngineCommands",
    "FileChange",
    "Sandbox",
    "SandboxLimits",
    "SandboxPlan",
    "SandboxResult",
    "UpperEntry",
    "check_bwrap",
    "classify",
    "destructive_reason",
    "plan_sandbox",
    "run_command",
    "run_governed",
    "walk_upper",
    "writable_dirs",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
