"""Live runs: mini-swe-agent's agent loop with ctxnb's context and governed commands.

ctxnb does not write an agent loop. :func:`run_task` runs mini-swe-agent's
``DefaultAgent`` with two parts swapped for ctxnb's:

- **the messages**: before every model call, the session is assembled under the
  strategy and the model gets ``Context.to_messages("openai")`` -- not the agent's own
  growing list. What the strategy masks, summarizes or drops is what the model misses.
- **the environment**: every command goes through the workspace's governed
  ``run_command`` tool (path policy, intent scope, risk and approval, the sandbox, the
  trace), under an intent that owns the task's scope. Each call is recorded in the
  session, which is how its output reaches the next context.

The model is any litellm model (``model="anthropic/claude-sonnet-4-5"``, or
``model="openai/<name>", api_base=...`` for an OpenAI-compatible server such as
:class:`~ctxnb.live.ScriptedModelServer`). The result holds the run in ctxnb's neutral
trajectory format (so the replay tools apply to it), whether the task's tests pass
afterwards, and the tokens and dollars of every call.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError, MissingDependencyError
from ..llm import CallUsage, call_usage, litellm_module, offline_environment
from ..prices import resolve_prices
from ..replay._shell import FileMemory, parse_command
from ..replay.model import Action, Step, Trajectory, Usage
from ..strategies import ContextStrategy, KeepAll
from ..tools.call import command_text
from .verdict import judge, pristine_files, refused_tests, touched_tests

if TYPE_CHECKING:
    import pandas as pd

    from ..govern.approval import Approver
    from ..session import Session
    from ..tools.filetools import FileTools
    from ..workspace import Workspace

__all__ = ["LiveResult", "RunEvents", "Task", "build_agent", "run_agent", "run_task", "sample_task"]

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# mini-swe-agent reads its retry count from the environment at every model call.
_RETRIES = "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"
SYSTEM_PROMPT = (
    "You are a software engineer working in a repository. Act with the bash tool, one "
    "command per call; commands run in the repository's root and are governed (some need "
    "a human's approval). Read before you edit. When the task is done, run `echo "
    f"{SUBMIT}` on its own."
)


@dataclass(frozen=True)
class Task:
    """What to do and how to tell that it is done.

    Attributes:
        prompt: the instruction the agent gets.
        test: a shell command run in the workspace after the agent stops; the task is
            solved when it exits 0.
        id: a name for the run.
        scope: globs the agent's intent owns (what its commands may change).
        tests: the task's test files (relative paths). They are outside the agent's
            scope, and the verdict runs the pristine copies of them, on a fresh copy of
            the workspace; a run that touched them is flagged and not solved (see
            :mod:`ctxnb.live.verdict`).
        check: a command that runs the hidden checks (after ``test``), or None.
        pristine: the task's own copy, where the pristine test files are read; None
            reads them from the workspace before the run.
        hidden: a directory of checks the agent never sees, added for the verdict.
    """

    prompt: str
    test: str
    id: str = "task"
    scope: tuple[str, ...] = ("**",)
    tests: tuple[str, ...] = ()
    check: str | None = None
    pristine: str | None = None
    hidden: str | None = None

    @property
    def owned_scope(self) -> list[str]:
        """The intent's globs: the task's scope without its test files."""
        return [*self.scope, *(f"!/{t}" for t in self.tests)]


@dataclass
class LiveResult:
    """What a live run did and what it cost.

    Attributes:
        trajectory: the run in ctxnb's neutral format (replayable).
        passed: whether the task's tests (the pristine ones, and its hidden check)
            exited 0 on a fresh copy of the work.
        test_output: what the test command printed.
        exit_status: how the agent stopped (``Submitted``, ``LimitsExceeded``, ...).
        calls: tokens and dollars of each model call, in order.
        tests_tampered: the run changed, or tried to change, one of the task's tests.
        tampered: those test files.
    """

    trajectory: Trajectory
    passed: bool
    test_output: str
    exit_status: str
    calls: list[CallUsage] = field(default_factory=list)
    tests_tampered: bool = False
    tampered: tuple[str, ...] = ()

    @property
    def solved(self) -> bool:
        """Passed without touching the tests."""
        return self.passed and not self.tests_tampered

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def cached_tokens(self) -> int:
        return sum(c.cached_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def cost_usd(self) -> float:
        return math.fsum(c.cost_usd for c in self.calls)

    @property
    def cost_usd_uncached(self) -> float:
        return math.fsum(c.cost_usd_uncached for c in self.calls)

    def frame(self) -> pd.DataFrame:
        """One row per model call: tokens and dollars."""
        import pandas as pd

        return pd.DataFrame([vars(c) for c in self.calls])

    def __repr__(self) -> str:
        return (
            # The task, not the run's session id: reprs stay comparable between runs.
            f"<LiveResult {self.trajectory.id.split('@')[0]} solved={self.solved} "
            f"passed={self.passed} tampered={self.tests_tampered} "
            f"exit={self.exit_status} "
            f"calls={len(self.calls)} prompt_tokens={self.prompt_tokens} "
            f"cached={self.cached_tokens} cost=${self.cost_usd:.4f}>"
        )


def sample_task(dest: str | Path) -> Task:
    """Copy the sample task (a two-file Python project whose test fails) to ``dest``.

    Returns:
        The task: fix ``add()`` so that ``python -m unittest -q`` passes.

    Example:
        >>> import tempfile
        >>> task = sample_task(tempfile.mkdtemp())
        >>> task.test
        'python -m unittest -q'
    """
    dest = Path(dest)
    base = files("ctxnb").joinpath("data/live")
    with as_file(base.joinpath("sample_task")) as src:
        shutil.copytree(src, dest, dirs_exist_ok=True)
    spec = json.loads(base.joinpath("sample_task.json").read_text(encoding="utf-8"))
    return Task(prompt=spec["prompt"], test=spec["test"], id=spec["id"], tests=tuple(spec["tests"]))


def sample_script() -> list[dict[str, Any]]:
    """The recorded responses that solve the sample task (for ScriptedModelServer)."""
    text = files("ctxnb").joinpath("data/live/sample_task_script.json").read_text("utf-8")
    return list(json.loads(text))


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


def _intent_file(root: Path, task: Task) -> str:
    """Make sure an active intent owns the task's scope; return its id."""
    import yaml

    from ..govern.intents import init_governance, load_intents

    init_governance(root)
    path = root / ".orchestration" / "active_intents.yaml"
    intent_id = f"LIVE-{task.id}"
    current = load_intents(path)
    if any(i.id == intent_id for i in current.active_intents):
        return intent_id
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    data.setdefault("active_intents", []).append(
        {
            "id": intent_id,
            "name": f"Live run: {task.id}",
            "status": "active",
            "owned_scope": task.owned_scope,
            "acceptance_criteria": [f"`{task.test}` exits 0"],
        }
    )
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return intent_id


def run_task(
    workspace: Workspace | str | Path,
    task: Task,
    *,
    model: str,
    strategy: ContextStrategy | None = None,
    budget: int | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    step_limit: int = 30,
    command_timeout: float = 60,
    approver: Approver | None = None,
    prices: Any = None,
    model_kwargs: dict[str, Any] | None = None,
    session_id: str | None = None,
    retries: int = 10,
) -> LiveResult:
    """Run an agent on a task, with ctxnb's context and governed commands, and test it.

    Args:
        workspace: the workspace (or its root) the agent works in; it is made governed
            (``.orchestration/``) with an intent that owns ``task.scope``.
        task: the instruction and the test command that decides success.
        model: any litellm model name.
        strategy: the context strategy the messages are assembled under (KeepAll).
        budget: the token budget of each context, or None.
        api_base: an OpenAI-compatible endpoint (a local server, a proxy).
        api_key: the key, when not in the provider's environment variable.
        step_limit: the most model calls.
        command_timeout: seconds per command.
        approver: who decides destructive commands (the workspace's default refuses).
        prices: the price table (see :func:`~ctxnb.prices.resolve_prices`).
        model_kwargs: passed on to ``litellm.completion``.
        session_id: the session that records the run (a new one when None).
        retries: attempts per model call before the run stops with the error
            (mini-swe-agent backs off exponentially between them).

    Returns:
        A :class:`LiveResult`.

    Example:
        >>> from ctxnb.live import ScriptedModelServer, run_task, sample_task
        >>> from ctxnb.live.run import sample_script
        >>> task = sample_task(root)  # doctest: +SKIP
        >>> with ScriptedModelServer(sample_script()) as server:  # doctest: +SKIP
        ...     result = run_task(root, task, **server.model_args)
        >>> result.passed  # doctest: +SKIP
        True
    """
    from ..workspace import Workspace

    _minisweagent()
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
    intent_id = _intent_file(ws.root, task)
    table = resolve_prices(prices)
    strategy = strategy or KeepAll()
    # Read before the agent starts: what the verdict trusts is never what it left.
    pristine, hidden = pristine_files(
        task.tests, source=task.pristine or ws.root, hidden=task.hidden
    )
    touched: list[str] = []
    session = ws.session(session_id, system_prompt=SYSTEM_PROMPT)
    tools = ws.tools(session, caller="mini-swe-agent", approver=approver, model_id=model)
    if tools.dispatch("select_active_intent", {"intent_id": intent_id}).get("ok") is not True:
        raise ConfigError(f"the workspace refused intent {intent_id!r}; check its .orchestration/")
    session.add_turn("user", task.prompt)

    def watch_tests(command: str, answer: dict[str, Any]) -> None:
        if answer.get("ok"):
            touched.extend(touched_tests(answer["result"].get("effects") or {}, pristine))
        else:
            # Asking to change a test is tampering, even when governance refused it.
            touched.extend(refused_tests(command, pristine))

    agent, turns, calls = build_agent(
        session,
        tools,
        model=model,
        strategy=strategy,
        budget=budget,
        api_base=api_base,
        api_key=api_key,
        on_answer=watch_tests,
        step_limit=step_limit,
        command_timeout=command_timeout,
        prices=table,
        model_kwargs=model_kwargs,
    )
    info = run_agent(agent, task.prompt, retries=retries)
    session.save()
    # The verdict runs the pristine tests on a fresh copy, confined with nothing
    # writable: it cannot change the work it judges, nor trust tests the agent edited.
    verdict = judge(
        ws.root,
        task.test,
        pristine=pristine,
        hidden=hidden,
        check=task.check,
        touched=touched,
        timeout=max(60.0, command_timeout),
    )
    passed = verdict.passed
    traj = Trajectory(
        id=f"{task.id}@{session.session_id}",
        source_format="ctxnb-live",
        task=task.prompt,
        system_prompt=SYSTEM_PROMPT,
        steps=_steps(turns, calls),
        metadata={
            "model": model,
            "strategy": getattr(strategy, "name", type(strategy).__name__),
            "exit_status": info.get("exit_status", ""),
            "passed": passed,
            "tests_tampered": verdict.tests_tampered,
            "session_id": session.session_id,
        },
    )
    return LiveResult(
        trajectory=traj,
        passed=passed,
        test_output=verdict.output,
        exit_status=str(info.get("exit_status", "")),
        calls=calls,
        tests_tampered=verdict.tests_tampered,
        tampered=verdict.tampered,
    )


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


def build_agent(
    session: Session,
    tools: FileTools,
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
    it. Returns the agent, the per-call turns (text and commands) and the usage list,
    both filled while it runs. ``events`` hears of messages and commands as they happen
    and can stop the run (exit status ``Cancelled``); ``on_answer`` gets each command
    and the governed tool's answer (the verdict watches the task's tests with it).
    """
    agents, local, models = _minisweagent()
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
            answer = tools.dispatch(
                "run_command",
                {"cmd": command, "shell": True, "timeout": timeout or command_timeout},
            )
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


def as_bash_history(messages: Any) -> list[dict[str, Any]]:
    """The context's messages in the terms of the tool the model was offered: each
    governed ``run_command`` call becomes the ``bash`` call the model made
    (``{"command": ...}``); the harness's own calls (selecting the intent), which the
    model never made, are left out with their results."""
    out: list[dict[str, Any]] = []
    hidden: set[str] = set()
    for m in messages:
        if m.get("role") == "tool" and m.get("tool_call_id") in hidden:
            continue
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and calls:
            kept = []
            for c in calls:
                fn = c.get("function", {})
                if fn.get("name") != "run_command":
                    hidden.add(c.get("id"))
                    continue
                try:
                    cmd = json.loads(fn.get("arguments") or "{}").get("cmd", "")
                except (json.JSONDecodeError, AttributeError):
                    cmd = ""
                args = json.dumps({"command": cmd})
                kept.append({**c, "function": {"name": "bash", "arguments": args}})
            m = {k: v for k, v in m.items() if k != "tool_calls"}
            if kept:
                m["tool_calls"] = kept
            elif not m.get("content"):
                continue  # nothing left of it
        out.append(m)
    return out


def _steps(turns: list[dict[str, Any]], calls: list[CallUsage]) -> list[Step]:
    """One step per command; a call's text and usage go to its first command."""
    memory = FileMemory()
    steps: list[Step] = []
    for turn, call in zip(turns, calls, strict=True):
        usage = Usage(
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            cached_tokens=call.cached_tokens,
        )
        thought = turn["thought"]
        if not turn["commands"]:
            text = thought or ""
            steps.append(
                Step(
                    index=len(steps),
                    thought=thought,
                    action=Action(tool="reply", raw=text),
                    usage=usage,
                )
            )
            continue
        for k, (command, output) in enumerate(turn["commands"]):
            text = str(output.get("output") or output.get("exception_info") or "")
            first = {"thought": thought, "usage": usage} if k == 0 else {}
            if command.strip() == f"echo {SUBMIT}":
                steps.append(
                    Step(
                        index=len(steps),
                        action=Action(tool="submit", raw=command),
                        observation=text,
                        **first,
                    )
                )
                continue
            parse = parse_command(command, text, memory)
            steps.append(
                Step(
                    index=len(steps),
                    action=Action(tool="bash", args={"command": command}, raw=command),
                    observation=text,
                    files=parse.files,
                    parsed=parse.ok,
                    note="; ".join(parse.notes) or None,
                    **first,
                )
            )
    return steps
