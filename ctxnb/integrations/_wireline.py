"""One line of a JSON-RPC wire read as JSON, or why it cannot be: shared by the MCP stdio
guard (:mod:`ctxnb.integrations.mcp_stdio`) and the ACP one
(:mod:`ctxnb.integrations._acp_wire`), which go on to check what their protocol needs.

Example:
    >>> parse_line(b'{"id": 1}')
    ({'id': 1}, None)
    >>> parse_line(b"{oops")[1][0], parse_line(b"[" * 100_000)[1][0]
    (-32700, -32600)
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "parse_line"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def parse_line(line: bytes) -> tuple[Any, tuple[int, str] | None]:
    """``(value, None)``, or ``(None, (code, message))`` for a line that is not UTF-8 JSON
    (``-32700``) or is nested deeper than Python's parser follows (``-32600``: a line of
    brackets must not end a server's reader)."""
    try:
        return json.loads(line.decode("utf-8")), None
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None, (PARSE_ERROR, f"Parse error: {e}")
    except RecursionError:
        return None, (INVALID_REQUEST, "Invalid Request: the message is nested too deeply to read")
