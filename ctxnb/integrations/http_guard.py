"""Who may talk to ctxnb's HTTP servers (MCP over HTTP, A2A): loopback by default, a
bearer token for a wider bind, and ``Host``/``Origin`` naming the bound address
(DNS-rebinding and cross-site protection). Plain ASGI, so it wraps any app.

Example:
    >>> allowed_hosts("127.0.0.1", 8000)[:2]
    ['127.0.0.1:8000', 'localhost:8000']
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from typing import Any

__all__ = ["BearerTokenMiddleware", "HostCheckMiddleware", "allowed_hosts", "is_loopback"]


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


def _host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def allowed_hosts(host: str, port: int, *, extra_hosts: tuple[str, ...] = ()) -> list[str]:
    """The ``Host`` header values that name the bound address (``host:port``)."""
    names = [host]
    if is_loopback(host):
        names += ["127.0.0.1", "localhost", "::1"]
    elif host in ("0.0.0.0", "::"):
        names += ["127.0.0.1", "localhost", socket.gethostname(), socket.getfqdn()]
    names += list(extra_hosts)
    return list(dict.fromkeys(_host_header(n, port) for n in names))


async def _refuse(send: Any, status: int, body: dict[str, str], headers: list[Any]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


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
                body = {"error": "unauthorized", "message": "send Authorization: Bearer <token>"}
                await _refuse(send, 401, body, [(b"www-authenticate", b'Bearer realm="ctxnb"')])
                return
        await self.app(scope, receive, send)


class HostCheckMiddleware:
    """ASGI middleware: ``Host`` must be one of ``hosts`` and an ``Origin``, when sent,
    must name one of them (a web page elsewhere cannot drive the server)."""

    def __init__(self, app: Any, hosts: list[str]) -> None:
        self.app = app
        self._hosts = {h.lower().encode() for h in hosts}
        self._origins = {
            f"{scheme}://{h}".lower().encode() for h in hosts for scheme in ("http", "https")
        }

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").lower()
            origin = headers.get(b"origin")
            if host not in self._hosts:
                msg = "the Host header does not name this server's address"
                await _refuse(send, 421, {"error": "misdirected", "message": msg}, [])
                return
            if origin is not None and origin.lower() not in self._origins:
                msg = "requests from another origin are refused"
                await _refuse(send, 403, {"error": "forbidden", "message": msg}, [])
                return
        await self.app(scope, receive, send)
