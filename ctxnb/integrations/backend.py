"""The in-process :class:`~ctxnb.tools.backend.Backend`: :class:`WorkspaceBackend`.

Every client of ctxnb that is not the Python API speaks a wire (MCP, ACP, A2A, Claude
Code's hooks) and reaches the workspace through a :class:`~ctxnb.tools.backend.Backend`:
:meth:`~WorkspaceBackend.call` for a tool call, :meth:`~WorkspaceBackend.execute` for a
command, both answered by the tools' ``dispatch`` (the access layer, the policy engine,
the recorder). :class:`WorkspaceBackend` is that protocol in process: it holds the
workspace, one session and the session's governed tools. Nothing else is a way in.

- MCP: :class:`~ctxnb.integrations.mcp_server.McpBackend` holds one (or is handed one)
  and adds MCP's resources, tool listing and per-client intents; every tool call it
  serves is the backend's ``call``;
- ACP and A2A: :class:`~ctxnb.integrations.live_agent.LiveSession` *is* one; the live
  agent it runs executes each command through it (or, sandboxed, through a backend
  whose calls cross to it: ``ctxnb/live/boxed.py``);
- Claude Code: the ``Bash`` tool's command runs through ``ctxnb sandbox exec``, which
  opens one, and an unconfined run is recorded in the session one opens; the pre and
  post hooks of the other tools judge Claude Code's own file operations through the
  same access layer and policy core without opening a session (a hook is a process per
  tool call, and opening the store costs it pyarrow).

A new protocol adapter holds a :class:`~ctxnb.tools.backend.Backend` and speaks its
wire: it never opens a workspace's files itself.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "notes.md").write_text("# Notes\\n")
    >>> with WorkspaceBackend.open(root, caller="docs") as backend:
    ...     backend.call("read_file", {"path": "notes.md"})["result"]["content"]
    '# Notes\\n'
    >>> isinstance(backend, Backend)
    True
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ..tools.backend import Backend, ToolsBackend

if TYPE_CHECKING:
    from ..govern.approval import Approver
    from ..govern.engine import HookEngine
    from ..session.core import Session
    from ..tools.filetools import FileTools
    from ..workspace import Workspace

__all__ = ["Backend", "WorkspaceBackend"]


class WorkspaceBackend(ToolsBackend):
    """A workspace, one session of it and the session's governed tools, for one client:
    a :class:`~ctxnb.tools.backend.ToolsBackend` (its ``call`` and ``execute`` are the
    tools' ``dispatch``) that also owns the workspace and the session it was opened with.

    Calls are serialised by :attr:`lock` where the adapter serves several clients at
    once (the session and the store see one tool call at a time, as with the Python API).

    Args:
        workspace: an open workspace.
        session: a session of it.
        tools: the session's tools (``workspace.tools(session, …)``).
    """

    tools: FileTools

    def __init__(self, workspace: Workspace, session: Session, tools: FileTools) -> None:
        super().__init__(tools)
        self.workspace = workspace
        self.session = session
        self.lock = threading.RLock()

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        caller: str = "agent",
        approver: Approver | None = None,
        system_prompt: str | None = None,
        model_id: str | None = None,
        prepare: Callable[[Workspace], None] | None = None,
        excerpts: bool | None = None,
    ) -> Self:
        """Open the workspace at ``root``, the session ``session_id`` (resumed, or new:
        a fresh id when omitted) and its tools for ``caller``.

        ``prepare`` is called on the workspace before the session opens (the Claude Code
        hook hands it the protected set it keeps between processes). ``excerpts`` is
        :meth:`Workspace.session`'s (False: a new session pins no startup excerpts).
        Nothing is left open when a step fails.
        """
        from ..workspace import Workspace

        ws = Workspace.open(root)
        try:
            if prepare is not None:
                prepare(ws)
            session = ws.session(session_id, system_prompt=system_prompt, excerpts=excerpts)
            extra: dict[str, Any] = {}
            if model_id is not None and (ws.root / ".orchestration").is_dir():
                extra["model_id"] = model_id  # the contributor of governed changes
            tools = ws.tools(session, caller=caller, approver=approver, **extra)
            return cls(ws, session, tools)
        except BaseException:
            ws.close()
            raise

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def governed(self) -> bool:
        """Whether the workspace has governance (``.orchestration/``)."""
        return (self.workspace.root / ".orchestration").is_dir()

    @property
    def engine(self) -> HookEngine:
        """The governance engine of the tools.

        Raises:
            PolicyError: ``NOT_GOVERNED``, the workspace has no ``.orchestration/``.
        """
        from ..govern.engine import engine_of

        return engine_of(self.tools)

    def close(self) -> None:
        """Save and close the session (:meth:`Session.close` saves), then the workspace."""
        try:
            self.session.close()
        finally:
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.workspace.root} session={self.session.session_id!r}>"
