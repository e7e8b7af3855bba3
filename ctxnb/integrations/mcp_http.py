"""The HTTP side of the MCP server: who may connect, and with which ``Host``.

A wide bind needs a bearer token; ``Host`` and ``Origin`` must name the bound address
(DNS-rebinding protection).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
from typing import Any

from ..errors import ConfigError
from ._mcp_sdk import Server, TransportSecuritySettings

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


def is_loopback(host: str) -> bool:
    """Whether ``host`` names the loopback interface only.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(token: str | None) -> str | None:
    """The bearer token: the explicit argument, else ``$CTXNB_MCP_TOKEN``, else None."""
    if token:
        return token
    return os.environ.get(TOKEN_ENV) or None


def _host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def transport_security(
    host: str, port: int, *, extra_hosts: tuple[str, ...] = ()
) -> TransportSecuritySettings:
    """DNS-rebinding protection: only ``Host``/``Origin`` values naming the bound address."""
    names = [host]
    if is_loopback(host):
        names += ["127.0.0.1", "localhost", "::1"]
    elif host in ("0.0.0.0", "::"):
        names += ["127.0.0.1", "localhost", socket.gethostname(), socket.getfqdn()]
    names += list(extra_hosts)
    hosts = list(dict.fromkeys(_host_header(n, port) for n in names))
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self._token):
                body = b'{"error":"unauthorized","message":"send Authorization: Bearer <token>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="ctxnb"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


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
