"""The MCP SDK, imported in one place: one clear error when it is not installed.

The server, its approval and HTTP modules and the registry of outside servers all take
the SDK's names from here, so a missing ``mcp`` extra is reported the same way wherever
it is first needed.
"""

from __future__ import annotations

from ..errors import MissingDependencyError

try:
    import anyio
    import anyio.from_thread
    import anyio.to_thread
    import httpx2
    import mcp_types as types
    from mcp.client.client import Client
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "ctxnb's MCP server and registry need the official MCP SDK; install it with "
        "`pip install 'ctxnb[mcp]'`"
    ) from e

__all__ = [
    "MODERN_PROTOCOL_VERSIONS",
    "Client",
    "ClientSession",
    "MCPError",
    "RequestStateBoundary",
    "RequestStateSecurity",
    "Server",
    "StdioServerParameters",
    "TransportSecuritySettings",
    "anyio",
    "get_default_environment",
    "httpx2",
    "stdio_client",
    "streamable_http_client",
    "types",
]
