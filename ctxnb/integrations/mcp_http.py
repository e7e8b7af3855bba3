"""The HTTP side of the MCP server: who may connect, with which ``Host``, and as whom.

A wide bind needs a bearer token; ``Host`` and ``Origin`` must name the bound address
(DNS-rebinding protection).

**Callers.** The server may accept several tokens (``--token`` once per client). The
token a request carries names its caller
(:func:`~ctxnb.integrations.http_guard.caller_of_token`), handed to the MCP SDK as the
request's authenticated user, so that:

* an ``Mcp-Session-Id`` is usable only with the token that opened the session (the SDK
  answers another caller ``404 Session not found``, as for a session that does not
  exist); a pending approval travels on its session, so no other caller can see or
  answer it;
* a stateless (2026-07-28) approval's sealed ``requestState`` names its caller
  (:func:`caller_principal`): sent by another caller it is ``Invalid or expired
  requestState``, and nothing runs.

Without a token every request is the same anonymous caller: on loopback that trusts
every local user, as ``ctxnb mcp serve --http`` always has; pass a token per client to
tell them apart.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ._mcp_sdk import Server, TransportSecuritySettings
from .http_guard import CALLER_SCOPE_KEY, BearerTokenMiddleware, allowed_hosts, is_loopback

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "TOKEN_ENV",
    "BearerTokenMiddleware",
    "caller_principal",
    "check_bind",
    "http_app",
    "is_loopback",
    "resolve_token",
    "transport_security",
]

TOKEN_ENV = "CTXNB_MCP_TOKEN"


def resolve_token(token: str | Sequence[str] | None) -> tuple[str, ...]:
    """The bearer tokens: the explicit ones, else ``$CTXNB_MCP_TOKEN``, else none.

    Example:
        >>> resolve_token(["tok-a", "tok-b"])
        ('tok-a', 'tok-b')
    """
    given = (token,) if isinstance(token, str) else tuple(token or ())
    given = tuple(t for t in given if t)
    if given:
        return given
    env = os.environ.get(TOKEN_ENV)
    return (env,) if env else ()


def caller_principal(ctx: ServerRequestContext[Any] | None) -> str | None:
    """The caller a request came from (its token's name), or None (stdio, no token).

    The principal a stateless approval's sealed state is bound to (the SDK's
    ``RequestStateSecurity(bind_principal=...)``): a state sent back by another caller
    is refused."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    caller = scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None
    return caller if isinstance(caller, str) else None


class _SdkUser:
    """Hands the caller :class:`BearerTokenMiddleware` found to the MCP SDK as the
    request's authenticated user: the SDK binds each session to the user that opened it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        caller = scope.get(CALLER_SCOPE_KEY) if scope["type"] == "http" else None
        if isinstance(caller, str):
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
            from mcp.server.auth.provider import AccessToken

            # The token itself never goes further than the guard: its name stands for it.
            user = AuthenticatedUser(AccessToken(token=caller, client_id=caller, scopes=[]))
            scope = {**scope, "user": user}
        await self.app(scope, receive, send)


def transport_security(
    host: str, port: int, *, extra_hosts: tuple[str, ...] = ()
) -> TransportSecuritySettings:
    """DNS-rebinding protection: only ``Host``/``Origin`` values naming the bound address."""
    hosts = allowed_hosts(host, port, extra_hosts=extra_hosts)
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def check_bind(host: str, token: str | Sequence[str] | None) -> tuple[str, ...]:
    """The tokens to require (see :func:`resolve_token`); refuses an unprotected wide bind.

    Raises:
        ConfigError: when ``host`` is not loopback and there is no token.
    """
    tokens = resolve_token(token)
    if not is_loopback(host) and not tokens:
        raise ConfigError(
            f"refusing to serve MCP on {host!r} without a bearer token: anyone who can reach "
            f"that address could read and change the workspace. Pass --token or set "
            f"{TOKEN_ENV}, or bind 127.0.0.1"
        )
    return tokens


def http_app(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int,
    token: str | Sequence[str] | None = None,
    extra_hosts: tuple[str, ...] = (),
) -> Any:
    """The ASGI app of the streamable HTTP transport (endpoint ``/mcp``), behind the
    bearer tokens when there are any (each a caller; see the module).

    Raises:
        ConfigError: when ``host`` is not loopback and there is no token.
    """
    tokens = check_bind(host, token)
    app = server.streamable_http_app(
        host=host, transport_security=transport_security(host, port, extra_hosts=extra_hosts)
    )
    return BearerTokenMiddleware(_SdkUser(app), tokens) if tokens else app
