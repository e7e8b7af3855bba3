"""MCP over stdio with a guard at the door: every malformed line gets the JSON-RPC error
the specification names, instead of silence.

The SDK's stdio transport drops a line it cannot decode, so a client whose request was
truncated or garbled waits forever for an answer. Here each line is checked before the
SDK sees it:

* not UTF-8, or not JSON (a truncated line, plain garbage): ``-32700`` parse error,
  ``"id": null`` (no id can be read from it);
* JSON but not a JSON-RPC 2.0 message (a batch, a wrong ``jsonrpc``, a ``method`` that
  is not a string, an ``id`` that is neither a string nor an integer …): ``-32600``
  invalid request, with the request's id when one can be read (an object with a
  ``method`` and a string or integer ``id``), else ``null``;
* nested deeper than Python's JSON parser can follow: ``-32600``, ``"id": null``;
* longer than ``max_message_bytes``: ``-32600`` invalid request, ``"id": null``; the
  line is skipped in bounded chunks, never held in memory whole.

Blank lines are ignored. A good line goes on to the SDK unchanged, and serving goes on
after a bad one.

Example:
    >>> check_line(b"{not json", max_bytes=100).error.code
    -32700
    >>> check_line(b'{"jsonrpc": "2.0", "id": 7, "method": 1}', max_bytes=100).id
    7
    >>> check_line(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', max_bytes=100) is None
    True
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, Any, cast

from ._mcp_sdk import anyio, types
from ._wireline import parse_line

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "check_line", "guarded_stdio_server"]

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024


def _error(code: int, message: str, request_id: Any = None) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def _oversized(max_bytes: int) -> types.JSONRPCError:
    return _error(
        types.INVALID_REQUEST,
        f"Invalid Request: message longer than {max_bytes} bytes (adapters.mcp.max_message_bytes)",
    )


def _readable_id(raw: bytes) -> str | int | None:
    """The id of a request that failed validation, when it can be read without guessing."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or "method" not in obj:
        return None
    rid = obj.get("id")
    # JSON-RPC ids are strings or integers; a bool is an int to Python, not to JSON.
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def check_line(line: bytes, *, max_bytes: int) -> types.JSONRPCError | None:
    """The error a line of the wire deserves, or None when it is a valid JSON-RPC message.

    ``line`` may still end with its newline. A line longer than ``max_bytes`` is
    refused without parsing.
    """
    body = line.rstrip(b"\r\n")
    if len(body) > max_bytes:
        return _oversized(max_bytes)
    obj, bad = parse_line(body)
    if bad is not None:
        return _error(*bad)
    text = body.decode("utf-8")
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError as e:  # pydantic's ValidationError
        first = e.errors()[0] if hasattr(e, "errors") else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:])
        why = first.get("msg", str(e))
        return _error(
            types.INVALID_REQUEST,
            f"Invalid Request: not a JSON-RPC 2.0 message ({where + ': ' if where else ''}{why})",
            _readable_id(body),
        )
    if isinstance(message, types.JSONRPCNotification) and "id" in obj:
        # The SDK reads a request whose id is not a string or an integer (null, true,
        # 1.5, an object) as a notification and never answers it; the client would wait.
        return _error(
            types.INVALID_REQUEST,
            "Invalid Request: a request's id must be a string or an integer "
            f"(got {json.dumps(obj['id'])[:40]})",
        )
    return None


class _GuardedLines:
    """The async line iterator handed to the SDK's stdio transport: good lines only.

    Bad lines are turned into errors on ``errors`` for :func:`guarded_stdio_server` to send.
    """

    def __init__(self, stream: IO[bytes], max_bytes: int) -> None:
        self._stream = stream
        self._max = max_bytes
        self.errors_in, self.errors_out = anyio.create_memory_object_stream[types.JSONRPCError](
            max_buffer_size=64
        )

    def _readline(self) -> tuple[bytes, bool] | None:
        """One line (at most max+1 bytes kept) and whether it was cut, or None at EOF."""
        line = self._stream.readline(self._max + 2)
        if not line:
            return None
        if line.endswith(b"\n") or len(line) < self._max + 2:
            return line, False
        while True:  # skip the rest of an oversized line without keeping it
            rest = self._stream.readline(_SKIP_CHUNK)
            if not rest or rest.endswith(b"\n"):
                return line, True

    def __aiter__(self) -> _GuardedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            got = await anyio.to_thread.run_sync(self._readline, abandon_on_cancel=True)
            if got is None:
                self.errors_in.close()
                raise StopAsyncIteration
            line, cut = got
            if not line.strip():
                continue
            error = _oversized(self._max) if cut else check_line(line, max_bytes=self._max)
            if error is None:
                return line.decode("utf-8")
            log.warning(
                "answered a malformed line with %s: %s", error.error.code, error.error.message
            )
            await self.errors_in.send(error)


def _claim_stdin() -> tuple[int, int | None]:
    """A private duplicate of fd 0, with fd 0 pointed at the null device while serving,
    so that a child process reads EOF instead of eating the client's messages."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved: int | None = None
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(devnull, 0)
            saved = private
        finally:
            os.close(devnull)
    except OSError:
        pass
    return private, saved


@asynccontextmanager
async def guarded_stdio_server(
    *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server`` with every incoming line checked by :func:`check_line`.

    Yields the same ``(read_stream, write_stream)`` pair; errors for bad lines are
    written to the client alongside the server's own messages.
    """
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    private, saved = _claim_stdin()
    # closefd=False: the reader thread may still block on it when serving ends.
    stream = os.fdopen(private, "rb", closefd=False)
    lines = _GuardedLines(stream, max_message_bytes)
    try:
        async with stdio_server(stdin=cast(Any, lines)) as (read, write):

            async def answer() -> None:
                async with lines.errors_out:
                    async for error in lines.errors_out:
                        await write.send(SessionMessage(error))

            async with anyio.create_task_group() as tg:
                tg.start_soon(answer)
                yield read, write
                tg.cancel_scope.cancel()
    finally:
        if saved is not None:
            os.dup2(saved, 0)
