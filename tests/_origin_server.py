"""A real HTTP server on 127.0.0.1 that answers with what it was asked, for the network
proxy's tests: the tests reach it *by name* (``allowed.test``) through ctxnb's proxy."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = json.dumps(
            {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        ).encode()
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def origin_server() -> Iterator[tuple[int, list[str]]]:
    """``(port, paths seen)`` of an echoing HTTP server on 127.0.0.1, while open."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    srv.daemon_threads = True
    srv.seen = []  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    t.start()
    try:
        yield srv.server_address[1], srv.seen  # type: ignore[attr-defined]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()
