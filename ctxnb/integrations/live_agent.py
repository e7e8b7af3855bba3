"""What the protocol front ends of the live agent share (``ctxnb acp serve``,
``ctxnb a2a serve``): their settings, a ctxnb session opened under an intent, one
prompt's run, and a changed file's last diff.

The front ends differ only in the wire: how a message reaches the agent, how its
events are shown and how an approval is asked. The governed agent itself
(:func:`ctxnb.live.run.build_agent`) and everything it records are the same.

Example:
    >>> settings = LiveAgentSettings(model="openai/gpt-4o-mini", strategy="observation-masking:3")
    >>> settings.context_strategy()
    ObservationMasking(keep_last=3)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ..errors import ConfigError
from ..redaction.redactor import redact_text
from .backend import WorkspaceBackend

if TYPE_CHECKING:
    from ..govern.approval import Approver
    from ..live.local import LocalModelServer
    from ..live.run import RunEvents
    from ..strategies.builtin import ContextStrategy
    from ..workspace import Workspace

__all__ = ["LiveAgentSettings", "LiveSession", "LoopBridge", "is_submit", "only_active_intent"]

_CALL_TIMEOUT = 60.0


@dataclass(frozen=True)
class LiveAgentSettings:
    """How the live agent runs: the model, the context strategy and the limits.

    Resolved once per process: flags, then ``[adapters.<section>]`` in the workspace
    config, then these defaults (see :meth:`resolve`).

    Attributes:
        workspace: the workspace; None uses each session's ``cwd`` (ACP) or the
            current directory.
        model: a litellm model name, or ``local/smollm2`` (``local/<path>.gguf``): a model
            this process serves while it serves the protocol (:meth:`serving`).
        api_base: an OpenAI-compatible endpoint, if any.
        api_key_env: the environment variable holding the API key (never the key).
        strategy: a strategy spec such as ``keep-all`` or ``observation-masking:5``.
        budget: the token budget of each context.
        intent: the intent sessions start under.
        step_limit: the most model calls per prompt.
        command_timeout: seconds per command.
        permission_timeout: seconds to wait for the user's answer (then: refused).
        sandbox: run the agent loop in bubblewrap with the workspace read-only, its
            tool calls crossing to the server (:mod:`ctxnb.live.boxed`); None: as
            ``[sandbox] agent`` says.
        local: the server of a ``local/...`` model, set by :meth:`serving` (its key goes
            to the agent loop; never read from a file).
    """

    section: ClassVar[str] = "acp"

    workspace: str | None = None
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    strategy: str = "keep-all"
    budget: int | None = None
    intent: str | None = None
    step_limit: int = 30
    command_timeout: float = 60.0
    permission_timeout: float = 300.0
    sandbox: bool | None = None
    local: LocalModelServer | None = field(default=None, repr=False, compare=False)

    @classmethod
    def resolve(cls, workspace: str | None = None, **flags: Any) -> Self:
        """Flags that were given, then ``[adapters.<section>]`` of the workspace's config
        (WORKSPACE, else the current directory), then the defaults.

        Example:
            >>> import tempfile
            >>> LiveAgentSettings.resolve(tempfile.mkdtemp(), model="openai/x").step_limit
            30
        """
        from ..config import load_config

        cfg = load_config(workspace or os.getcwd())
        values = asdict(getattr(cfg.adapters, cls.section))
        values.update({k: v for k, v in flags.items() if v is not None})
        if values.get("sandbox") is None:
            values["sandbox"] = cfg.sandbox.agent
        if cfg.sandbox.production and not values["sandbox"]:
            raise ConfigError(
                "[sandbox] production = true refuses to run the agent loop without isolation; "
                "drop --no-sandbox (or set [sandbox] agent = true) in ctxnb.toml"
            )
        return cls(workspace=workspace, **values)

    @contextmanager
    def serving(self) -> Iterator[Self]:
        """These settings while their model is reachable: a ``local/...`` model is served
        for the block (:func:`ctxnb.live.local.serve_local`, the one way every door starts
        it) and named as the loop calls it; any other model is left as it is.

        Raises:
            ConfigError: a local model beside ``api_base``, or a model file that does not
                exist.
            MissingDependencyError: the ``local`` extra is not installed.
        """
        from ..live.local import is_local, serve_local

        if not is_local(self.model):
            yield self
            return
        with serve_local(str(self.model), api_base=self.api_base) as server:
            yield replace(self, model=server.model_args["model"], api_base=server.url, local=server)

    def api_key(self) -> str | None:
        """The model's key: the served local model's own, else ``$api_key_env``'s value."""
        if self.local is not None:
            return self.local.api_key
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def sandbox_status(self) -> dict[str, Any]:
        """``sandboxStatus`` before a run: whether the loop will be isolated (the pid is
        the run's, reported by :attr:`LiveSession.sandbox_status` once it started)."""
        if self.sandbox:
            return {"isolated": True, "backend": "bwrap", "pid": None, "running": False}
        return {"isolated": False, "backend": "none", "pid": os.getpid(),
                "reason": "the agent loop runs in the server's process (--no-sandbox)"}  # fmt: skip

    def context_strategy(self) -> ContextStrategy:
        """The strategy object of :attr:`strategy`.

        Raises:
            ConfigError: an unknown strategy name or bad settings.
        """
        from ..strategies.registry import parse_strategy

        try:
            return parse_strategy(self.strategy)
        except ValueError as e:
            raise ConfigError(f"[adapters.{self.section}] strategy / --strategy: {e}") from None


class LoopBridge:
    """Runs coroutines on the server's event loop from the agent's worker thread, with a
    deadline (the agent loop is synchronous; the protocol SDKs are asyncio)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def call(self, coro_fn: Callable[[], Any], timeout: float = _CALL_TIMEOUT) -> Any:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro_fn(), self.loop).result(timeout)


class LiveSession(WorkspaceBackend):
    """The :class:`~ctxnb.integrations.backend.WorkspaceBackend` of the live agent (ACP,
    A2A): a new session under an intent, and one prompt's run."""

    proxy_hosts: dict[str, str] | None = None
    """Names the sandboxed loop's proxy resolves without DNS (a seam for tests)."""
    last_sandbox_status: dict[str, Any] | None = None
    """``sandboxStatus`` of the last sandboxed run (isolated, pid), once it started."""

    @property
    def id(self) -> str:
        return str(self.session.session_id)

    @classmethod
    def start(
        cls, root: Path, settings: LiveAgentSettings, *, caller: str, approver: Approver
    ) -> Self:
        """Open the workspace at ``root`` and a new session in it, under the intent of
        ``settings`` (else the only active intent, else none: nothing may change).

        Raises:
            ConfigError: ``root`` is not an existing absolute directory, or the intent
                cannot be selected.
        """
        from ..live.run import SYSTEM_PROMPT

        if not root.is_absolute() or not root.is_dir():
            raise ConfigError(f"the workspace {str(root)!r} is not an existing absolute directory")
        state = cls.open(
            root,
            caller=caller,
            approver=approver,
            system_prompt=SYSTEM_PROMPT,
            model_id=settings.model,
            # The model hears of its bash tool only (see below): startup excerpts are
            # ctxnb's reads, which its own harness would not have made for it.
            excerpts=False,
        )
        from ..live.run import bash_view

        # The model is offered its bash tool only: the intent selected here, on its
        # behalf, is never shown to it (ctxnb's names stay in the audit and the trace).
        state.tools.call_view = bash_view
        try:
            intent = settings.intent or only_active_intent(state.workspace)
            if intent is not None:
                state.select(intent)  # refused now if another session holds the scope
                # ... but held only while a prompt runs (work): an idle session keeps no
                # other conversation off the files.
                state.engine.release()
            return state
        except BaseException:
            state.workspace.close()
            raise

    def select(self, intent_id: str) -> None:
        """Select the intent the agent's changes are made under.

        Raises:
            ConfigError: the workspace refused it (unknown, not active, not governed).
        """
        out = self.call("select_active_intent", {"intent_id": intent_id})
        if not out.get("ok"):
            raise ConfigError(f"intent {intent_id!r} cannot be selected: {out.get('message')}")

    def work(self, settings: LiveAgentSettings, text: str, events: RunEvents) -> dict[str, Any]:
        """Run the governed live agent on ``text`` (blocking); mini-swe-agent's exit info.

        The session holds its lease on the intent's scope while the prompt runs and
        releases it when the run ends (or pauses for nothing more): a server keeps its
        conversations open between prompts, and an idle one must not keep another
        conversation, or another agent, off the files (write partitioning).

        Raises:
            PolicyError: ``SCOPE_OVERLAP``, another live session holds an overlapping
                scope now; nothing ran.
        """
        self.engine.hold_lease()
        try:
            return self._work(settings, text, events)
        finally:
            self.engine.release()

    def _work(self, settings: LiveAgentSettings, text: str, events: RunEvents) -> dict[str, Any]:
        from ..live.run import build_agent, offer_recall, run_agent

        s = settings
        self.session.add_turn("user", text)
        strategy = s.context_strategy()
        if s.sandbox:
            from ..live.boxed import run_boxed

            def seen(status: dict[str, Any]) -> None:
                self.last_sandbox_status = status

            try:
                return run_boxed(
                    self.session,
                    self,  # the loop's calls cross to this backend
                    text,
                    model=s.model or "",
                    strategy=strategy,
                    budget=s.budget,
                    # A local model: by name, through the proxy, on its port alone.
                    api_base=s.local.boxed[0] if s.local is not None else s.api_base,
                    api_key=s.api_key(),
                    step_limit=s.step_limit,
                    command_timeout=s.command_timeout,
                    events=events,
                    proxy_hosts=self.proxy_hosts,
                    proxy_endpoints=s.local.boxed[1] if s.local is not None else None,
                    sandbox_settings=asdict(self.workspace.config.sandbox),
                    on_status=seen,
                ).info
            finally:
                self.session.save()
        offer_recall(self.tools, strategy)
        agent, _, _ = build_agent(
            self.session,
            self,  # every command of the agent is this backend's execute
            model=s.model or "",
            strategy=strategy,
            budget=s.budget,
            api_base=s.api_base,
            api_key=s.api_key(),
            step_limit=s.step_limit,
            command_timeout=s.command_timeout,
            events=events,
        )
        try:
            return run_agent(agent, text, retries=2)
        finally:
            self.session.save()

    def last_change(self, rel: str) -> tuple[str, str | None, str] | None:
        """The last change to a file from the store's versions, redacted: its absolute
        path, the text before (None: it was new) and after; None when binary."""
        versions = self.workspace.history(rel)
        if not versions:
            return None
        new = versions[-1].doc.get("content")
        old = versions[-2].doc.get("content") if len(versions) > 1 else None
        if not isinstance(new, str) and not isinstance(old, str):
            return None  # binary either side: no text diff to show
        return (
            str(self.workspace.root / rel),
            redact_text(old) if isinstance(old, str) else None,
            redact_text(new) if isinstance(new, str) else "",
        )


def is_submit(command: str) -> bool:
    """The agent's way to say "done" (no work a user wants to see)."""
    from ..live.run import SUBMIT

    return command.strip() == f"echo {SUBMIT}"


def only_active_intent(ws: Workspace) -> str | None:
    """The id of the workspace's only active intent, else None."""
    path = ws.root / ".orchestration" / "active_intents.yaml"
    if not path.is_file():
        return None
    from ..govern.intents import load_intents

    active = load_intents(path).active()
    return active[0].id if len(active) == 1 else None
