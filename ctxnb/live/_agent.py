"""The agent of a live run: mini-swe-agent's ``DefaultAgent`` with ctxnb's parts.

:func:`build_agent` swaps two parts of the agent for ctxnb's (the messages come from the
session's assembled context; the environment executes each command through a
:class:`~ctxnb.tools.backend.Backend`, the governed ``run_command`` tool, as every door
reaches a workspace); :func:`run_agent` runs it. :mod:`ctxnb.live.run` runs a task with
them, the ACP and A2A agents use them directly, and the sandboxed loop
(:mod:`ctxnb.live.boxed`) hands in a backend whose calls cross to the server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..context import unframe
from ..errors import MissingDependencyError
from ..llm.calls import CallUsage, call_usage, litellm_module, offline_environment
from ..llm.prices import resolve_prices
from ..strategies.builtin import ContextStrategy
from ..tools.call import command_text
from ..tools.recall import RECALL, parse_recall, recall_command, register_recall

if TYPE_CHECKING:
    from ..session.core import Session
    from ..tools.backend import Backend
    from ..tools.call import ToolRunner

__all__ = [
    "SUBMIT",
    "SYSTEM_PROMPT",
    "RunEvents",
    "as_bash_history",
    "bash_view",
    "build_agent",
    "offer_recall",
    "run_agent",
]

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# mini-swe-agent reads its retry count from the environment at every model call.
_RETRIES = "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"
SYSTEM_PROMPT = (
    "You are a software engineer working in a repository. Act with the bash tool, one "
    "command per call; commands run in the repository's root and are governed (some need "
    "a human's approval). Read before you edit. When the task is done, run `echo "
    f"{SUBMIT}` on its own."
)


def _minisweagent() -> Any:
    offline_environment()
    # litellm prints a provider-list banner when it cannot place a model (cost lookups
    # do this for every custom name); set its switch before mini-swe-agent uses it, so
    # no live-run path depends on what a litellm release prints.
    litellm_module()
    try:
        import minisweagent.agents.default as agents
        import minisweagent.environments.local as local
        import minisweagent.models.litellm_model as models
    except ImportError:
        raise MissingDependencyError(
            "live runs need mini-swe-agent and litellm; install them with: "
            "pip install 'ctxnb[live]'"
        ) from None
    return agents, local, models


def run_agent(agent: Any, prompt: str, *, retries: int = 10) -> dict[str, Any]:
    """Run an agent from :func:`build_agent` on ``prompt``; returns mini-swe-agent's exit
    info (``exit_status``, ``submission``).

    ``retries``: attempts per model call before the run stops with the error.
    """
    previous = os.environ.get(_RETRIES)
    os.environ[_RETRIES] = str(max(1, retries))
    try:
        info: dict[str, Any] = agent.run(prompt)
    finally:
        if previous is None:
            os.environ.pop(_RETRIES, None)
        else:
            os.environ[_RETRIES] = previous
    return info


class RunEvents(Protocol):
    """What a front end (the ACP agent) hears of a run while it goes on.

    Every method is called from the thread that runs the agent.
    """

    def cancelled(self) -> bool:
        """True when the run should stop before its next model call or command."""
        ...

    def message(self, text: str) -> None:
        """The model said something (the text of one model call)."""
        ...

    def command_started(self, command: str) -> Any:
        """A command is about to run; the value returned comes back to command_finished."""
        ...

    def command_finished(self, handle: Any, command: str, answer: dict[str, Any]) -> None:
        """The command's answer from the governed ``run_command`` tool."""
        ...


def _stop_if_cancelled(events: RunEvents | None) -> None:
    if events is not None and events.cancelled():
        from minisweagent.exceptions import UserInterruption

        raise UserInterruption(
            {
                "role": "exit",
                "content": "Cancelled",
                "extra": {"exit_status": "Cancelled", "submission": ""},
            }
        )


def offer_recall(tools: ToolRunner, strategy: ContextStrategy) -> None:
    """Give ``tools`` the ``recall`` tool when ``strategy`` pairs masking with recall (its
    placeholders name ``recall HANDLE``; the command is then answered from the session,
    not run). Called where the tools are, before :func:`build_agent`."""
    if getattr(strategy, "recall", False) and tools.tool_info(RECALL.name) is None:
        register_recall(tools)


def build_agent(
    session: Session,
    backend: Backend,
    *,
    model: str,
    strategy: ContextStrategy,
    budget: int | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    step_limit: int = 30,
    command_timeout: float = 60,
    prices: Any = None,
    model_kwargs: dict[str, Any] | None = None,
    events: RunEvents | None = None,
    on_answer: Callable[[str, dict[str, Any]], None] | None = None,
) -> tuple[Any, list[dict[str, Any]], list[CallUsage]]:
    """mini-swe-agent's ``DefaultAgent`` with ctxnb's messages and governed commands.

    The session must already hold the user's turn; ``agent.run(prompt)`` then works on
    it. Every command goes to ``backend`` (:meth:`~ctxnb.tools.backend.Backend.execute`,
    a ``recall`` to its ``call``), never to the disk: the tools behind it must show the
    model its own call (``call_view = bash_view``) and offer ``recall`` when the strategy
    uses it (:func:`offer_recall`).

    Returns the agent, the per-call turns (text and commands) and the usage list, both
    filled while it runs. ``events`` hears of messages and commands as they happen
    and can stop the run (exit status ``Cancelled``); ``on_answer`` gets each command
    and the governed tool's answer (the verdict watches the task's tests with it).
    """
    agents, local, models = _minisweagent()
    # A strategy that pairs masking with recall names `recall HANDLE` in its
    # placeholders; the command is then answered from the session, not run.
    recalls = bool(getattr(strategy, "recall", False))
    table = resolve_prices(prices)
    calls: list[CallUsage] = []
    turns: list[dict[str, Any]] = []  # per model call: its text and the commands it ran

    class ContextModel(models.LitellmModel):  # type: ignore[misc, name-defined]
        def _prepare_messages_for_api(self, messages: list[dict[str, Any]]) -> Any:
            # The agent's own history is ignored: the model sees the assembled context.
            ctx = session.assemble(strategy, budget)
            return as_bash_history(ctx.to_messages("openai"))

        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
            _stop_if_cancelled(events)
            try:
                message: dict[str, Any] = super().query(messages, **kwargs)
            except Exception as exc:  # a format error was billed too
                extra = (getattr(exc, "messages", None) or [{}])[0].get("extra", {})
                self._count(extra.get("response"), None)
                raise
            self._count(message.get("extra", {}).get("response"), message.get("content"))
            if events is not None and message.get("content"):
                events.message(str(message["content"]))
            return message

        def _count(self, response: Any, text: str | None) -> None:
            usage = response.get("usage") if isinstance(response, dict) else None
            calls.append(call_usage(usage or {}, self.config.model_name, table))
            turns.append({"thought": text or None, "commands": []})

    class GovernedEnvironment(local.LocalEnvironment):  # type: ignore[misc, name-defined]
        def execute(
            self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None
        ) -> dict[str, Any]:
            command = str(action.get("command", ""))
            _stop_if_cancelled(events)
            handle = events.command_started(command) if events is not None else None
            recall = parse_recall(command) if recalls else None
            if recall is not None:
                answer = backend.call(RECALL.name, recall)
                if answer.get("ok"):  # the shape of a command's answer: output, status 0
                    text = str(answer["result"])
                    answer = {**answer, "result": {"stdout": text, "returncode": 0}}
            else:
                answer = backend.execute(command, shell=True, timeout=timeout or command_timeout)
            if on_answer is not None:
                on_answer(command, answer)
            if answer.get("ok"):
                res = answer["result"]
                output = {
                    # What the model reads of it in the context: output, then exit
                    # status and what was committed or dropped.
                    "output": command_text(res),
                    "returncode": res.get("returncode"),
                    "exception_info": "",
                }
            else:
                output = {
                    "output": "",
                    "returncode": -1,
                    "exception_info": f"{answer.get('error_code')}: {answer.get('message')} "
                    f"{answer.get('required_action') or ''}".strip(),
                }
            if turns:
                turns[-1]["commands"].append((command, output))
            if events is not None:
                events.command_finished(handle, command, answer)
            self._check_finished(output)
            return output

    class RecordingAgent(agents.DefaultAgent):  # type: ignore[misc, name-defined]
        def add_messages(self, *messages: dict[str, Any]) -> list[dict[str, Any]]:
            for m in messages:
                # The first two messages are the agent's own prompt; ctxnb has its own.
                if len(self.messages) < 2 and m.get("role") in ("system", "user"):
                    continue
                if m.get("role") == "assistant" and m.get("content"):
                    session.add_turn("assistant", str(m["content"]))
                elif m.get("role") == "user" and m.get("content"):
                    session.add_turn("user", str(m["content"]))  # a format error, say
            return list(super().add_messages(*messages))

    agent = RecordingAgent(
        ContextModel(
            model_name=model,
            model_kwargs={
                **({"api_base": api_base} if api_base else {}),
                **({"api_key": api_key} if api_key else {}),
                **(model_kwargs or {}),
            },
            cost_tracking="ignore_errors",  # ctxnb prices the calls itself
        ),
        GovernedEnvironment(cwd=str(session.workspace.root), timeout=int(command_timeout)),
        system_template=SYSTEM_PROMPT,
        instance_template="{{task}}",
        step_limit=step_limit,
        cost_limit=0,
    )
    return agent, turns, calls


def bash_view(tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """How the model of a live run is shown a call (a :data:`~ctxnb.tools.call.CallView`):
    the governed ``run_command``, and a ``recall`` it typed, as the ``bash`` call it made;
    every other call (the harness selecting the intent) it did not make, and is not
    shown."""
    if tool == "run_command":
        return "bash", {"command": str(args.get("cmd", ""))}
    if tool == RECALL.name:  # the model's `recall ...` command, answered by ctxnb
        return "bash", {"command": recall_command(args)}
    return None


def as_bash_history(messages: Any) -> list[dict[str, Any]]:
    """The context's messages in the terms of the tool the model was offered: each
    ``bash`` call the model made, with its output as plain text (the provider's API binds
    a result to its call; ctxnb's frame is taken off). A governed ``run_command``
    recorded without :func:`bash_view` (a session made before it) becomes the ``bash``
    call it was; any other tool's call, which the model never made, is left out with
    its result."""
    out: list[dict[str, Any]] = []
    hidden: set[str] = set()
    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") in hidden:
                continue
            m = {**m, "content": unframe(str(m.get("content") or ""))}
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and calls:
            kept = []
            for c in calls:
                fn = c.get("function", {})
                name = fn.get("name")
                if name not in ("bash", "run_command"):
                    hidden.add(c.get("id"))
                    continue
                try:
                    parsed = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    parsed = {}
                parsed = parsed if isinstance(parsed, dict) else {}
                cmd = parsed.get("command" if name == "bash" else "cmd", "")
                args = json.dumps({"command": cmd})
                kept.append({**c, "function": {"name": "bash", "arguments": args}})
            m = {k: v for k, v in m.items() if k != "tool_calls"}
            if kept:
                m["tool_calls"] = kept
            elif not m.get("content"):
                continue  # nothing left of it
        out.append(m)
    return out
