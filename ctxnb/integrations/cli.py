"""The ``ctxnb mcp`` and ``ctxnb acp`` commands: serve a workspace to MCP and ACP clients.

``ctxnb acp serve [WORKSPACE]`` runs ctxnb's live agent as an ACP agent on
stdin/stdout (what Zed starts); see :mod:`ctxnb.integrations.acp`.

``ctxnb mcp serve [WORKSPACE]`` speaks MCP on stdin/stdout (what Claude Code, Cursor
and most clients start). ``--http PORT`` serves streamable HTTP at
``http://127.0.0.1:PORT/mcp`` instead; a host other than loopback (``--host``) needs a
bearer token (``--token`` or ``$CTXNB_MCP_TOKEN``).

Example:
    >>> from ctxnb.cli import build_parser
    >>> ns = build_parser().parse_args(["mcp", "serve", "/tmp/ws", "--http", "8765"])
    >>> (ns.action, ns.workspace, ns.http, ns.host)
    ('serve', '/tmp/ws', 8765, '127.0.0.1')
"""

from __future__ import annotations

import argparse
import os

from ..cli import arg, command
from ..errors import ConfigError

__all__: list[str] = []


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port {port} is out of range 1-65535")
    return port


@command("mcp", help="serve a workspace to MCP clients (stdio or streamable HTTP)")
@arg("action", choices=["serve"], help="what to do: serve")
@arg("workspace", nargs="?", default=None, help="workspace directory (default: current)")
@arg("--http", type=_port, default=None, metavar="PORT", help="serve streamable HTTP on PORT")
@arg("--host", default="127.0.0.1", help="address to bind with --http (default: 127.0.0.1)")
@arg(
    "--token",
    default=None,
    help="bearer token HTTP clients must send (default: $CTXNB_MCP_TOKEN); "
    "required for a non-loopback --host",
)
@arg("--session", default=None, metavar="ID", help="session id to resume (default: a new one)")
@arg("--allow-host", action="append", default=[], metavar="NAME",
     help="another Host header name clients may use with --http (repeatable)")  # fmt: skip
def _cmd_mcp(ns: argparse.Namespace) -> int:
    # Raises MissingDependencyError (a clean CLI message) when the SDK is missing.
    from . import mcp_server

    root = ns.workspace or os.getcwd()
    if ns.http is None:
        if ns.token or ns.host != "127.0.0.1" or ns.allow_host:
            raise ConfigError("--host, --token and --allow-host only apply with --http PORT")
        mcp_server.serve_stdio(root, session_id=ns.session)
        return 0
    mcp_server.serve_http(
        root,
        port=ns.http,
        host=ns.host,
        token=ns.token,
        session_id=ns.session,
        extra_hosts=tuple(ns.allow_host),
    )
    return 0


@command("acp", help="serve ctxnb's live agent to ACP clients (Zed …) over stdio")
@arg("action", choices=["serve"], help="what to do: serve")
@arg("workspace", nargs="?", default=None,
     help="workspace directory (default: each session's cwd)")  # fmt: skip
@arg("--model", default=None, help="litellm model name (default: [adapters.acp] model)")
@arg("--api-base", default=None, help="an OpenAI-compatible endpoint for the model")
@arg("--api-key-env", default=None, metavar="VAR",
     help="environment variable holding the model's API key")  # fmt: skip
@arg("--strategy", default=None, metavar="SPEC",
     help="context strategy, e.g. keep-all or observation-masking:5")  # fmt: skip
@arg("--budget", type=int, default=None, help="token budget of each context")
@arg("--intent", default=None, metavar="ID", help="the intent sessions start under")
@arg("--step-limit", type=int, default=None, help="most model calls per prompt")
@arg("--adapter", default=None, metavar="MODULE",
     help="serve MODULE's create_agent(settings) instead of ctxnb's agent")  # fmt: skip
def _cmd_acp(ns: argparse.Namespace) -> int:
    # Raises MissingDependencyError (a clean CLI message) when the SDK is missing.
    from . import acp

    workspace = os.path.abspath(ns.workspace) if ns.workspace else None
    settings = acp.AcpSettings.resolve(
        workspace,
        model=ns.model,
        api_base=ns.api_base,
        api_key_env=ns.api_key_env,
        strategy=ns.strategy,
        budget=ns.budget,
        intent=ns.intent,
        step_limit=ns.step_limit,
    )
    if not settings.model and not ns.adapter:
        raise ConfigError(
            "no model for the ACP agent: pass --model NAME or set [adapters.acp] model "
            "in ctxnb.toml (any litellm model name, e.g. anthropic/claude-sonnet-4-5)"
        )
    settings.context_strategy()  # a bad --strategy fails here, before serving
    acp.serve_acp(settings, adapter=ns.adapter)
    return 0
