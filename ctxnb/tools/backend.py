"""The one shape in which a door reaches a workspace: the :class:`Backend` protocol.

Every client of ctxnb that is not the Python API speaks a wire (MCP, ACP, A2A, Claude
Code's hooks) or runs an agent loop (the live agent, in the server's process or in its
own sandbox), and each reaches the workspace through two operations, modelled on
mini-swe-agent's ``Environment``: :meth:`Backend.call` runs one tool call and
:meth:`Backend.execute` one command. Both answer what
:meth:`~ctxnb.tools.filetools.FileTools.dispatch` answers: ``{"ok": True, "result": …}``
or a refusal ``{"ok": False, "error_code", "message", "recoverable", "required_action"}``.

The protocol lives with the runner whose answers it carries, below every door, so that
an agent loop (``ctxnb/live/``) and a protocol adapter (``ctxnb/integrations/``) type
against the same thing. Its implementations:

- :class:`ToolsBackend`: in process, over a runner's ``dispatch`` (a session's governed
  tools: the access layer, the policy engine, the recorder); the one place a backend
  dispatches;
- :class:`~ctxnb.integrations.backend.WorkspaceBackend`: a :class:`ToolsBackend` with the
  workspace and session it was opened with, for the protocol adapters;
- the sandboxed agent loop's backend (``ctxnb/live/boxed.py``), whose calls cross to
  the server's backend on a pipe.

A door given any :class:`Backend` uses it and nothing beside it: that is the seam a test
(or a remote workspace) hands in.

Example:
    >>> class Echo:
    ...     def call(self, tool, args):
    ...         return {"ok": True, "result": {"tool": tool, **args}}
    ...     def execute(self, command, *, cwd=None, timeout=None, shell=False):
    ...         return self.call("run_command", run_command_args(command, shell=shell))
    >>> isinstance(Echo(), Backend)
    True
    >>> Echo().execute("ls")["result"]
    {'tool': 'run_command', 'cmd': 'ls', 'shell': False}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .call import ToolRunner

__all__ = ["Backend", "ExecuteByCall", "ToolsBackend", "run_command_args"]


@runtime_checkable
class Backend(Protocol):
    """What a door needs of a workspace: a tool call and a command."""

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool call through every check; the answer ``dispatch`` gives."""
        ...

    def execute(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        shell: bool = False,
    ) -> dict[str, Any]:
        """Run a command as the ``run_command`` tool does (confined, its changes committed
        or dropped); the answer ``dispatch`` gives."""
        ...


def run_command_args(
    command: str,
    *,
    cwd: str | None = None,
    timeout: float | None = None,
    shell: bool = False,
) -> dict[str, Any]:
    """The arguments of the ``run_command`` tool for :meth:`Backend.execute` (an option
    left out is the tool's default, not ``None``)."""
    args: dict[str, Any] = {"cmd": command, "shell": shell}
    if cwd is not None:
        args["cwd"] = cwd
    if timeout is not None:
        args["timeout"] = timeout
    return args


class ExecuteByCall:
    """:meth:`Backend.execute` as every backend has it: the ``run_command`` tool, asked
    through the backend's own ``call`` (so a command passes the same checks as any call)."""

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def execute(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        shell: bool = False,
    ) -> dict[str, Any]:
        """Run a command as the ``run_command`` tool (``call`` answers it)."""
        return self.call(
            "run_command", run_command_args(command, cwd=cwd, timeout=timeout, shell=shell)
        )


class ToolsBackend(ExecuteByCall):
    """A :class:`Backend` in process: each call is ``tools.dispatch`` (validation, the
    governed workspace's policies, the tool, its audit line and session record).

    Args:
        tools: the runner to dispatch to (a session's :class:`~ctxnb.tools.FileTools`).
    """

    def __init__(self, tools: ToolRunner) -> None:
        self.tools = tools

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool call through every check (``tools.dispatch``)."""
        return self.tools.dispatch(tool, dict(args))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {type(self.tools).__name__}>"
