"""Who may talk to ctxnb's HTTP servers (MCP over HTTP, A2A): loopback by default, a
bearer token for a wider bind, ``Host``/``Origin`` naming the bound address
(DNS-rebinding and cross-site protection), and a bounded request body. Plain ASGI, so
it wraps any app.

**Callers.** A server may accept several tokens, one per client; the token a request
carries names its caller (:func:`caller_of_token`: a hash, so that no log or store ever
holds the token), put in the ASGI scope under :data:`CALLER_SCOPE_KEY`. What a caller
starts (an MCP session, an approval's sealed state, an A2A task) is bound to that name,
so another client, even one with a valid token of its own, finds none of it.

Example:
    >>> allowed_hosts("127.0.0.1", 8000)[:2]
    ['127.0.0.1:8000', 'localhost:8000']
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
from collections.abc import Iterable
from typing import Any

__all__ = [
    "CALLER_SCOPE_KEY",
    "DEFAULT_MAX_BODY_BYTES",
    "BearerTokenMiddleware",
    "BodyLimitMiddleware",
    "HostCheckMiddleware",
    "allowed_hosts",
    "caller_of_token",
    "is_loopback",
]

CALLER_SCOPE_KEY = "ctxnb.caller"
"""The ASGI scope key :class:`BearerTokenMiddleware` names a request's caller under."""

# The MCP SDK's own limit for its HTTP transport: one ceiling for every ctxnb server.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


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


def caller_of_token(token: str) -> str:
    """The caller name of a bearer token: its hash, so that logs never hold the token.

    Example:
        >>> caller_of_token("tok-a") != caller_of_token("tok-b")
        True
        >>> "tok-a" in caller_of_token("tok-a")
        False
    """
    return "bearer:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``,
    one of ``tokens``; the request's caller (:func:`caller_of_token`) goes into its scope
    under :data:`CALLER_SCOPE_KEY`.

    ``public_paths``: paths a ``GET`` (or ``HEAD``) may read without a token, such as an
    A2A agent card, which is how a client learns that it must send one. Only those
    exact paths and methods: a ``POST`` there still needs the token.

    Raises:
        ValueError: no token, or an empty one (a server that accepts "" accepts anyone).
    """

    def __init__(
        self, app: Any, tokens: str | Iterable[str], *, public_paths: Iterable[str] = ()
    ) -> None:
        self.app = app
        given = [tokens] if isinstance(tokens, str) else list(tokens)
        if not given or not all(given):
            raise ValueError("a bearer token must not be empty; pass at least one token")
        self._tokens = [(t.encode("utf-8"), caller_of_token(t)) for t in dict.fromkeys(given)]
        self._public = frozenset(public_paths)

    def _caller(self, given: bytes) -> str | None:
        found = None
        for token, caller in self._tokens:  # every token compared: no early exit to time
            if hmac.compare_digest(given, token):
                found = caller
        return found

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        public = scope.get("method") in ("GET", "HEAD") and scope.get("path") in self._public
        if scope["type"] == "http" and not public:
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            caller = self._caller(given.strip()) if scheme.lower() == b"bearer" else None
            if caller is None:
                body = {"error": "unauthorized", "message": "send Authorization: Bearer <token>"}
                await _refuse(send, 401, body, [(b"www-authenticate", b'Bearer realm="ctxnb"')])
                return
            scope = {**scope, CALLER_SCOPE_KEY: caller}
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


class BodyLimitMiddleware:
    """ASGI middleware: a request body longer than ``max_bytes`` gets 413, unread.

    A declared ``Content-Length`` over the limit is refused before any byte is read; a
    chunked body is read up to the limit and refused there. A body within the limit is
    handed on whole, so the app never holds more than ``max_bytes`` of one request.
    """

    def __init__(self, app: Any, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _too_large(self, send: Any) -> None:
        msg = f"the request body is longer than {self.max_bytes} bytes, the most this server reads"
        await _refuse(send, 413, {"error": "too_large", "message": msg}, [])

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        body = bytearray()
        pending: list[Any] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)  # the client went away: let the app see it
                break
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._too_large(send)
                return
            if not message.get("more_body", False):
                break
        pending.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> Any:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)
