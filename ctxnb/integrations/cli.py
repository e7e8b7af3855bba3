"""The ``ctxnb mcp`` command: serve a workspace to MCP clients.

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
