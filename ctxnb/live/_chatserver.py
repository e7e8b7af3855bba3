"""An OpenAI-compatible chat-completions endpoint on 127.0.0.1, whatever answers it.

The scripted model and the local model serve the same door: a ``POST
.../chat/completions`` with a JSON body, answered with a JSON reply, on a loopback port
of their own, started and stopped as a context manager. This module is that door; a
subclass says only how a request body is answered (:meth:`ChatServer.answer`).

A server given an ``api_key`` answers only requests that carry it (``Authorization:
Bearer``, as OpenAI's clients and litellm send it): the local model's port is on loopback,
where any program of the machine, or a sandboxed loop let through to it, could otherwise
use it; the key goes to the one agent loop ctxnb started.
"""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["ChatServer", "RequestError"]


class RequestError(Exception):
    """A request the server cannot answer; sent to the client as an HTTP error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ChatServer:
    """A chat-completions server on 127.0.0.1 (any free port); subclasses answer."""

    #: The name of the serving thread (seen in a debugger or a thread dump).
    thread_name = "ctxnb-chat-server"

    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request body; raise :class:`RequestError` to refuse it."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """The base URL to pass as ``api_base`` (ends in ``/v1``)."""
        if self._server is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                if owner.api_key is not None:
                    sent = self.headers.get("Authorization") or ""
                    wanted = f"Bearer {owner.api_key}"
                    if not hmac.compare_digest(sent.encode(), wanted.encode()):
                        # Not read, not answered: the body may be large, and whoever sent
                        # it has no business with this model.
                        self.close_connection = True
                        self._send(401, {"error": {"message": "a valid API key is required"}})
                        return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "the body is not JSON"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    reply = owner.answer(body)
                except RequestError as exc:
                    self._send(exc.status, {"error": {"message": str(exc)}})
                    return
                self._send(200, reply)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests and notebooks do not want request logs

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            # A short poll: stop() waits for it, once per run of a suite.
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
