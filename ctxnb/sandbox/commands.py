"""The commands of one governance engine: the ``run_command`` tool and what it runs on.

A :class:`~ctxnb.govern.engine.HookEngine` holds one :class:`EngineCommands`
(``engine.commands``). It makes the sandbox of the selected intent (configured by
``[sandbox]``), runs a command there and commits its in-scope changes
(:func:`~ctxnb.sandbox.commit.run_governed`), commits a held command's changes for the
human who approved them, and is the ``run_command`` tool of ``dispatch``. The engine's
pre policies run before the tool; the commit is the one write path every client's
command takes (the API, MCP, ACP, A2A and Claude Code's Bash).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import NotFoundError
from ..redaction.redactor import redact_data
from ..tools.schemas import ToolInfo

if TYPE_CHECKING:
    from ..tools.call import ToolCall
    from .commit import CommandEffects, GoverningEngine
    from .runner import Sandbox

__all__ = ["RUN_COMMAND", "EngineCommands", "RunCommandArgs"]


class RunCommandArgs(BaseModel):
    """The arguments of the ``run_command`` tool."""

    model_config = ConfigDict(extra="forbid")

    cmd: str = Field(description="The command line (no shell unless shell=true).")
    cwd: str | None = Field(default=None, description="Working directory, relative to the root.")
    timeout: float | None = Field(default=None, gt=0, le=3600, description="Seconds.")
    shell: bool = Field(default=False, description="Run through /bin/sh (pipes, redirections).")


RUN_COMMAND = ToolInfo(
    name="run_command",
    description="Run a command in the workspace (no shell unless shell=true). "
    "Destructive commands wait for a human's approval.",
    args=RunCommandArgs,
    mutating=True,
    idempotent=False,
    destructive=True,
)
"""The ``run_command`` tool as ``dispatch`` and every protocol list it."""


class EngineCommands:
    """The commands run under one governance engine.

    Args:
        engine: the engine (workspace, tools, selected intent, approver, recorder).
    """

    def __init__(self, engine: GoverningEngine) -> None:
        self.engine = engine
        self._effects: CommandEffects | None = None
        self.proxy_hosts: dict[str, str] = {}
        """Names the network proxy resolves without DNS (a seam for tests and notebooks,
        see :class:`~ctxnb.sandbox.Sandbox`); the allowlist still decides."""

    @property
    def effects(self) -> CommandEffects:
        """What commits the commands' changes: one per engine, because it remembers each
        file's baseline across commands, so removals that add up to a wipe still ask."""
        if self._effects is None:
            from .commit import CommandEffects

            self._effects = CommandEffects(self.engine)
        return self._effects

    def sandbox(self) -> Sandbox:
        """The :class:`~ctxnb.sandbox.Sandbox` for the selected intent (nothing writable
        without one), configured by ``[sandbox]``; the intent's ``network`` and
        ``allowed_domains`` add to the settings'. Under a ``[[mounts]]`` entry that covers
        the root, the workspace is bound at its agent path."""
        from dataclasses import asdict

        from .runner import Sandbox

        engine = self.engine
        intent = engine.current_intent()
        return Sandbox.from_settings(
            engine.root,
            asdict(engine.workspace.config.sandbox),
            owned_scope=intent.owned_scope if intent is not None else (),
            in_scope=intent.in_scope if intent is not None else None,
            deny=engine.tools.policy.deny,
            network=bool(intent is not None and intent.network),
            allowed_domains=intent.allowed_domains if intent is not None else (),
            proxy_hosts=self.proxy_hosts,
            at=engine.workspace.agent_root(),
        )

    def run(self, cmd: str | list[str], **options: Any) -> dict[str, Any]:
        """Run ``cmd`` in the sandbox and commit its in-scope changes (no pre policies:
        callers run those); the options and the result are those of
        :func:`ctxnb.sandbox.commit.run_governed`."""
        from .commit import run_governed

        out = run_governed(self.engine, cmd, **options)
        # File names are text too: a name holding a token leaves redacted.
        if isinstance(out.get("effects"), dict):
            out["effects"] = redact_data(out["effects"])
        return out

    def commit_held(
        self,
        hold_id: str,
        *,
        caller: str = "agent",
        tool: str = "run_command",
        expect: str | None = None,
    ) -> dict[str, Any]:
        """Commit the changes of the held command ``hold_id`` for the human who approved
        their diff (:func:`ctxnb.sandbox.commit.commit_held`)."""
        from .commit import commit_held
        from .held import load_hold

        hold = load_hold(self.engine.root, hold_id)
        out = commit_held(self.engine, hold, caller=caller, tool=tool, expect=expect)
        out["effects"] = redact_data(out["effects"])
        return out

    def tool(
        self,
        cmd: str,
        cwd: str | None = None,
        timeout: float | None = None,
        shell: bool = False,
    ) -> dict[str, Any]:
        """The ``run_command`` tool: run a command confined to the intent's scope, after
        the engine's pre policies.

        The command runs on an overlay of the workspace; the output is redacted; its
        in-scope file changes are committed (stored, traced) and the rest dropped
        (``result["effects"]``); destructive changes wait for the approver with their
        diff.
        """
        engine = self.engine

        def run(call: ToolCall) -> dict[str, Any]:
            workdir = engine.root
            if cwd:
                # An agent path (/workspace/src) names the host directory it maps to.
                workdir = engine.tools.policy.check(engine.workspace.host_path(cwd)).abs
                if not workdir.is_dir():
                    raise NotFoundError(f"working directory {cwd!r} does not exist")
            out = self.run(
                cmd,
                cwd=workdir,
                timeout=timeout or engine.command_timeout,
                shell=shell,
                session_id=call.session_id,
                caller=call.caller,
                call=call,
            )
            call.context["effects"] = out["effects"]
            if out.get("network"):
                call.context["network"] = out["network"]
            return out

        return engine.tools.run_call(
            "run_command", {"cmd": cmd, "cwd": cwd, "timeout": timeout, "shell": shell}, run
        )
