"""A guard on the ACP wire: every line the client sends is checked before the ACP SDK
reads it.

The SDK's line reader keeps a line however long it grows, drops a line that is not
JSON without a word (a client waiting for the answer waits forever), and stops the whole
connection on a line that is JSON but not an object (a batch, a number). Here, as on
ctxnb's MCP stdio wire (:mod:`ctxnb.integrations.mcp_stdio`):

* not UTF-8, or not JSON: ``-32700`` parse error, ``"id": null``;
* JSON but not one object (a batch, a scalar), or nested deeper than Python's JSON
  parser follows: ``-32600`` invalid request, ``"id": null``;
* longer than :data:`MAX_LINE_BYTES`: ``-32600``, ``"id": null``; the line is skipped
  in bounded chunks, never held whole.

A good line goes on to the SDK unchanged; blank lines are dropped.

Example:
    >>> line_error(b"[1]")["error"]["code"], line_error(b"{oops")["error"]["code"]
    (-32600, -32700)
    >>> line_error(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}') is None
    True
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ._wireline import INVALID_REQUEST, parse_line

__all__ = ["MAX_LINE_BYTES", "guard_lines", "line_error"]

MAX_LINE_BYTES = 16 * 1024 * 1024


def _error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def line_error(line: bytes, *, cut: bool = False) -> dict[str, Any] | None:
    """The JSON-RPC error a line of the wire deserves, or None when the SDK may read it."""
    if cut:
        return _error(
            INVALID_REQUEST, f"Invalid Request: message longer than {MAX_LINE_BYTES} bytes"
        )
    obj, bad = parse_line(line)
    if bad is not None:
        return _error(*bad)
    if not isinstance(obj, dict):
        kind = "a batch" if isinstance(obj, list) else type(obj).__name__
        return _error(
            INVALID_REQUEST,
            f"Invalid Request: a message must be one JSON object, not {kind} (ACP has no batches)",
        )
    return None


async def _next_line(wire: asyncio.StreamReader) -> tuple[bytes, bool] | None:
    """One line of at most ``wire``'s limit and whether it was cut, or None at EOF."""
    try:
        return await wire.readuntil(b"\n"), False
    except asyncio.IncompleteReadError as e:  # the last line, without its newline
        return (e.partial, False) if e.partial else None
    except asyncio.LimitOverrunError as e:
        await wire.readexactly(e.consumed)
    while True:  # skip the rest of the oversized line, one buffer at a time
        try:
            await wire.readuntil(b"\n")
            return b"", True
        except asyncio.IncompleteReadError:
            return b"", True
        except asyncio.LimitOverrunError as e:
            await wire.readexactly(e.consumed)


async def guard_lines(
    wire: asyncio.StreamReader, sdk: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Move good lines from ``wire`` to the ``sdk``'s reader; answer bad ones on ``writer``.

    ``wire`` must have been made with ``limit=MAX_LINE_BYTES``. Each error is written in
    one call, as the SDK writes each of its messages, so the two never interleave.
    """
    try:
        while (got := await _next_line(wire)) is not None:
            line, cut = got
            if not cut and not line.strip():
                continue
            error = line_error(line, cut=cut)
            if error is None:
                sdk.feed_data(line if line.endswith(b"\n") else line + b"\n")
            else:
                writer.write(json.dumps(error).encode() + b"\n")
                await writer.drain()
    finally:
        sdk.feed_eof()
