"""The HTTP side of the MCP server: who may connect, and with which ``Host``.

A wide bind needs a bearer token; ``Host`` and ``Origin`` must name the bound address
(DNS-rebinding protection).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ._mcp_sdk import Server, TransportSecuritySettings
from .http_guard import BearerTokenMiddleware, allowed_hosts, is_loopback

__all__ = [
    "TOKEN_ENV",
    "BearerTokenMiddleware",
    "check_bind",
    "http_app",
    "is_loopback",
    "resolve_token",
    "transport_security",
]

TOKEN_ENV = "CTXNB_MCP_TOKEN"


def resolve_token(token: str | None) -> str | None:
    """The bearer token: the explicit argument, else ``$CTXNB_MCP_TOKEN``, else None."""
    if token:
        return token
    return os.environ.get(TOKEN_ENV) or None


def transport_security(
    host: str, port: int, *, extra_hosts: tuple[str, ...] = ()
) -> TransportSecuritySettings:
    """DNS-rebinding protection: only ``Host``/``Origin`` values naming the bound address."""
    hosts = allowed_hosts(host, port, extra_hosts=extra_hosts)
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def check_bind(host: str, token: str | None) -> str | None:
    """The token to require (see :func:`resolve_token`); refuses an unprotected wide bind.

    Raises:
        ConfigError: when ``host`` is not loopback and there is no token.
    """
    token = resolve_token(token)
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve MCP on {host!r} without a bearer token: anyone who can reach "
            f"that address could read and change the workspace. Pass --token or set "
            f"{TOKEN_ENV}, or bind 127.0.0.1"
        )
    return token


def http_app(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int,
    token: str | None = None,
    extra_hosts: tuple[str, ...] = (),
) -> Any:
    """The ASGI app of the streamable HTTP transport (endpoint ``/mcp``).

    Raises:
        ConfigError: when ``host`` is not loopback and there is no token.
    """
    token = check_bind(host, token)
    app = server.streamable_http_app(
        host=host, transport_security=transport_security(host, port, extra_hosts=extra_hosts)
    )
    return BearerTokenMiddleware(app, token) if token else app
