"""The agent loop in a sandbox: its model calls inside, its tool calls across the boundary.

With ``--sandbox`` (or ``[sandbox] agent = true``) the live agent of ``ctxnb acp serve``
and ``ctxnb a2a serve`` does not run in the server's process. :func:`run_boxed` starts
it in bubblewrap (:func:`ctxnb.sandbox.service.confine_service`): the workspace
read-only, a private ``HOME``, no network interface but the model's endpoint and
``[sandbox] allowed_domains`` through ctxnb's proxy. The loop there (mini-swe-agent
with ctxnb's model and environment, :func:`ctxnb.live._agent.build_agent`) reaches the
workspace only by asking the server, one JSON line per request on its standard output,
one answer per line on its standard input:

* ``messages``: the context the server assembled from the session (under the strategy);
* ``add_turn``: a turn for the session's chat;
* ``dispatch``: a governed tool call (``run_command``): the loop's
  :class:`~ctxnb.tools.backend.Backend` sends it, the server's backend answers it with
  every policy, approval and trace as without the sandbox;
* ``cancelled``, ``message``, ``command_started``, ``command_finished``: the run's
  events, for the protocol's client;
* ``done`` (or ``error``): the exit info, and the end.

A write the loop tries on its own fails (the workspace is read-only there, ``EROFS``);
nothing else of the host is there to read. The server trusts nothing the child says
beyond a tool call's name and arguments, which pass the same governance as any agent's.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import ConfigError, CtxnbError, SandboxError
from ..llm.calls import CallUsage
from ..tools.backend import ExecuteByCall

if TYPE_CHECKING:
    from ..session.core import Session
    from ..strategies.builtin import ContextStrategy
    from ..tools.backend import Backend
    from ._agent import RunEvents

__all__ = ["BoxedRun", "run_boxed"]

_MAX_LINE = 64 * 1024 * 1024


@dataclass
class BoxedRun:
    """What a sandboxed run of the loop gives back.

    Attributes:
        info: mini-swe-agent's exit info (``exit_status``, ``submission``).
        turns: per model call, its text and the commands it ran (as
            :func:`~ctxnb.live._agent.build_agent` fills them).
        calls: the usage and cost of each model call.
    """

    info: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)
    calls: list[CallUsage] = field(default_factory=list)


def run_boxed(
    session: Session,
    backend: Backend,
    text: str,
    *,
    model: str,
    strategy: ContextStrategy,
    budget: int | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    step_limit: int = 30,
    command_timeout: float = 60,
    events: RunEvents | None = None,
    allowed_domains: Sequence[str] = (),
    proxy_hosts: Mapping[str, str] | None = None,
    proxy_endpoints: Mapping[tuple[str, int], str] | None = None,
    sandbox_settings: Mapping[str, Any] | None = None,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    on_answer: Callable[[str, dict[str, Any]], None] | None = None,
    prices: Mapping[str, Any] | str | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    retries: int = 2,
) -> BoxedRun:
    """Run the live agent on ``text`` in a sandbox, serving its requests until it ends.

    Args:
        session: the session (holds the user's turn already).
        backend: where its calls go (a session's governed tools, as a
            :class:`~ctxnb.tools.backend.ToolsBackend` or a
            :class:`~ctxnb.integrations.backend.WorkspaceBackend`).
        text: the prompt.
        model, strategy, budget, api_base, api_key, step_limit, command_timeout: as
            :func:`ctxnb.live._agent.build_agent` (the key is sent on the child's
            standard input, never on its command line or in its environment).
        events: the run's events (cancel, messages, commands).
        allowed_domains: more domains the loop may reach; the host of ``api_base`` is
            added (the model must be reachable).
        proxy_hosts: the proxy's ``hosts`` seam (tests, notebooks).
        proxy_endpoints: servers ctxnb started on the host that the loop may reach, each
            by its name on its port alone: a local model's
            (:attr:`~ctxnb.live.local.LocalModelServer.boxed`); no other loopback port.
        sandbox_settings: ``[sandbox]`` (limits, read paths, ``allowed_domains``).
        on_status: called with the sandbox's ``sandboxStatus`` once it started.
        on_answer: gets each command and the governed tool's answer, on this side.
        prices: the price table as a mapping or a path (a table object cannot cross).
        model_kwargs: passed on to ``litellm.completion`` in the sandbox (plain data).
        retries: attempts per model call before the run stops with the error.

    Returns:
        The exit info, the turns and the calls' usage.

    Raises:
        SandboxError: the sandbox cannot start, or the loop in it failed.
    """
    import subprocess

    from ..sandbox.plan import SandboxLimits
    from ..sandbox.service import confine_service

    if prices is not None and not isinstance(prices, (str, os.PathLike, Mapping)):
        raise ConfigError(
            "a price table object cannot cross into the agent's sandbox; pass prices as a "
            "mapping or the path of a JSON table"
        )
    s = dict(sandbox_settings or {})
    domains = [*(s.get("allowed_domains") or ()), *allowed_domains]
    if api_base:
        host = urlsplit(api_base).hostname
        if host:
            domains.append(host)
    # Where ctxnb is imported from (an editable install's source tree, or site-packages):
    # bound read-only for the loop's interpreter, which starts isolated (-I).
    package = str(Path(__file__).resolve().parents[2])
    limits = {
        k: s[k]
        for k in ("max_memory_mb", "max_file_mb", "max_processes", "max_open_files")
        if k in s
    }
    boot = f"import sys; sys.path.insert(0, {package!r}); from ctxnb.live.boxed import main; main()"
    svc = confine_service(
        session.workspace.root,
        [sys.executable, "-I", "-c", boot],
        allowed_domains=domains,
        read_paths=[*(s.get("read_paths") or ()), os.path.join(package, "ctxnb")],
        limits=SandboxLimits(**limits),
        proxy_hosts=proxy_hosts,
        git=s.get("git", "auto"),
        proxy_endpoints=proxy_endpoints,
    )
    stderr: list[bytes] = []
    try:
        with subprocess.Popen(
            svc.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=session.workspace.root,
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            err = threading.Thread(target=_drain, args=(proc.stderr, stderr), daemon=True)
            err.start()
            if on_status is not None:
                svc.wait_pid()  # so that the status names the process, not None
                on_status(svc.status())
            start = {
                "model": model,
                "budget": budget,
                "api_base": api_base,
                "api_key": api_key,
                "step_limit": step_limit,
                "command_timeout": command_timeout,
                "text": text,
                "root": str(session.workspace.root),
                "prices": os.fspath(prices) if isinstance(prices, os.PathLike) else prices,
                "model_kwargs": dict(model_kwargs or {}),
                "retries": retries,
            }
            try:
                _send(proc.stdin, start)
                return _serve(
                    proc.stdin, proc.stdout, session, backend, strategy, budget, events, on_answer
                )
            except (SandboxError, OSError) as e:
                proc.kill()
                err.join(timeout=5)
                tail = b"".join(stderr)[-2000:].decode("utf-8", "replace")
                raise SandboxError(f"{e}; its last output: {tail}") from None
            finally:
                proc.stdin.close()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                err.join(timeout=5)
    finally:
        svc.close()


def _drain(stream: IO[bytes] | None, into: list[bytes]) -> None:
    """Keep the loop's standard error (its tail names a failure), so it never blocks."""
    if stream is None:
        return
    while chunk := stream.read(65536):
        into.append(chunk)
        if len(into) > 64:
            del into[:32]


def _send(out: IO[bytes], msg: Any) -> None:
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


def _serve(
    to_child: IO[bytes],
    from_child: IO[bytes],
    session: Session,
    backend: Backend,
    strategy: ContextStrategy,
    budget: int | None,
    events: RunEvents | None,
    on_answer: Callable[[str, dict[str, Any]], None] | None = None,
) -> BoxedRun:
    """Answer the loop's requests until it says ``done``."""
    from ._agent import as_bash_history

    handles: dict[int, Any] = {}
    counter = itertools.count()
    while True:
        line = from_child.readline(_MAX_LINE)
        if not line:
            raise SandboxError(
                "the sandboxed agent loop ended without an answer (see the server's log); "
                "run with --no-sandbox to tell a sandbox problem from the agent's"
            )
        try:
            req = json.loads(line)
            op = req["op"]
        except (ValueError, KeyError, TypeError):
            raise SandboxError("the sandboxed agent loop sent a line that is no request") from None
        result: Any = None
        if op == "done":
            return _done(req)
        if op == "error":
            raise SandboxError(f"the sandboxed agent loop failed: {str(req.get('message'))[:2000]}")
        if op == "messages":
            result = as_bash_history(session.assemble(strategy, budget).to_messages("openai"))
        elif op == "add_turn" and req.get("role") in ("assistant", "user"):
            session.add_turn(req["role"], str(req.get("text", "")))
        elif op == "dispatch" and req.get("name") == "run_command":
            # The one tool the loop has; its arguments pass governance like any agent's.
            args = req.get("args") if isinstance(req.get("args"), dict) else {}
            result = backend.call("run_command", args)
            if on_answer is not None:
                on_answer(str(args.get("cmd", "")), result)
        elif op == "cancelled":
            result = bool(events is not None and events.cancelled())
        elif op == "message" and events is not None:
            events.message(str(req.get("text", "")))
        elif op == "command_started" and events is not None:
            result = next(counter)
            handles[result] = events.command_started(str(req.get("command", "")))
        elif op == "command_finished" and events is not None:
            handle = handles.pop(req.get("handle"), None)
            answer = req.get("answer")
            events.command_finished(
                handle, str(req.get("command", "")), answer if isinstance(answer, dict) else {}
            )
        elif op not in ("message", "command_started", "command_finished", "add_turn"):
            result = {"ok": False, "error_code": "UNKNOWN_REQUEST", "message": str(op)[:100]}
        _send(to_child, {"result": result})


def _done(req: dict[str, Any]) -> BoxedRun:
    """The loop's last message, read as data of the shapes it must have."""
    got = req.get("info")
    info: dict[str, Any] = got if isinstance(got, dict) else {"exit_status": "error"}
    turns = []
    for t in req.get("turns") or []:
        if isinstance(t, dict):
            cmds = [
                tuple(c) for c in t.get("commands") or [] if isinstance(c, list) and len(c) == 2
            ]
            turns.append({"thought": t.get("thought"), "commands": cmds})
    calls = []
    for c in req.get("calls") or []:
        try:
            calls.append(CallUsage(**c))
        except TypeError:
            continue
    return BoxedRun(info, turns, calls)


# -- inside the sandbox ------------------------------------------------------------------------
class _Link:
    """The loop's side: one request, one answer, in order."""

    def __init__(self, into: IO[bytes], out: IO[bytes]) -> None:
        self.into, self.out = into, out

    def ask(self, op: str, **fields: Any) -> Any:
        _send(self.out, {"op": op, **fields})
        line = self.into.readline(_MAX_LINE)
        if not line:
            raise SystemExit(1)  # the server went away
        return json.loads(line).get("result")


class _Assembled:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages

    def to_messages(self, _fmt: str) -> list[dict[str, Any]]:
        return self.messages


class _RemoteSession:
    """What :func:`build_agent` uses of a session, answered by the server."""

    def __init__(self, link: _Link, root: str) -> None:
        from types import SimpleNamespace

        self.link = link
        self.workspace = SimpleNamespace(root=Path(root))

    def assemble(self, _strategy: Any, _budget: Any) -> _Assembled:
        return _Assembled(self.link.ask("messages"))

    def add_turn(self, role: str, text: str) -> None:
        self.link.ask("add_turn", role=role, text=text)


class _RemoteBackend(ExecuteByCall):
    """The loop's :class:`~ctxnb.tools.backend.Backend`: each call crosses to the server,
    whose backend answers it (the server runs ``run_command`` and nothing else)."""

    def __init__(self, link: _Link) -> None:
        self.link = link

    def call(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        out = self.link.ask("dispatch", name=tool, args=dict(args))
        return out if isinstance(out, dict) else {"ok": False, "error_code": "NO_ANSWER"}


class _RemoteEvents:
    def __init__(self, link: _Link) -> None:
        self.link = link

    def cancelled(self) -> bool:
        return bool(self.link.ask("cancelled"))

    def message(self, text: str) -> None:
        self.link.ask("message", text=text)

    def command_started(self, command: str) -> Any:
        return self.link.ask("command_started", command=command)

    def command_finished(self, handle: Any, command: str, answer: dict[str, Any]) -> None:
        self.link.ask("command_finished", handle=handle, command=command, answer=answer)


def main() -> None:
    """The loop's process, in the sandbox (started by :func:`run_boxed`)."""
    # The protocol owns the real standard output; whatever a library prints goes to
    # standard error instead, so it cannot forge a request.
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    link = _Link(sys.stdin.buffer, proto)
    start = json.loads(sys.stdin.buffer.readline(_MAX_LINE))
    from ..strategies.builtin import KeepAll
    from ._agent import build_agent, run_agent

    try:
        agent, turns, calls = build_agent(
            _RemoteSession(link, start["root"]),  # type: ignore[arg-type]
            _RemoteBackend(link),
            model=start["model"],
            strategy=KeepAll(),  # the server assembles under the real one
            budget=start["budget"],
            api_base=start["api_base"],
            api_key=start["api_key"],
            step_limit=start["step_limit"],
            command_timeout=start["command_timeout"],
            events=_RemoteEvents(link),
            prices=start.get("prices"),
            model_kwargs=start.get("model_kwargs") or None,
        )
        info = run_agent(agent, start["text"], retries=int(start.get("retries") or 2))
    except (CtxnbError, Exception) as e:
        _send(proto, {"op": "error", "message": f"{type(e).__name__}: {e}"})
        return
    _send(
        proto,
        {
            "op": "done",
            "info": {k: v for k, v in info.items() if _plain(v)},
            "turns": [
                {"thought": t["thought"], "commands": [list(c) for c in t["commands"]]}
                for t in turns
            ],
            "calls": [asdict(c) for c in calls],
        },
    )


def _plain(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True
