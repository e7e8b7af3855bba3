"""The sandbox's way out: an HTTP proxy on the host that lets through listed domains only.

A command in the sandbox has no network interface but loopback (``--unshare-net``);
when ``[sandbox] allowed_domains`` (or the intent's) lists domains, a Unix socket of
this proxy is bound into the sandbox, and a small forwarder there
(:mod:`ctxnb.sandbox._netbridge`) offers it on ``127.0.0.1`` as ``HTTP_PROXY`` and
``HTTPS_PROXY``. The proxy speaks HTTP ``CONNECT`` (TLS passes through untouched, so
HTTPS works without a certificate of ctxnb's) and plain HTTP with an absolute URL.

For each request it decides on the *name* the client asked for
(:func:`ctxnb._util.domains.allowed_pattern`: exact names and ``*.`` suffixes):

* a name not listed is refused with ``403`` and the reason, in the status line (which
  ``curl`` and Python print) and in the body; nothing is resolved for it, so a refused
  name never reaches a DNS server either;
* a listed name is resolved here, on the host (DNS never leaves the sandbox: there is
  no resolver it could reach), and refused when it resolves to a loopback, private,
  link-local or otherwise local address (a listed name must not become a way to a
  service on the host or the local network);
* then the proxy connects and relays bytes both ways.

Every decision is a :class:`NetDecision`, kept in :attr:`NetworkProxy.decisions` (the
command's result carries them, and the audit records them) and passed to
``on_decision``.

``endpoints`` are the exceptions ctxnb itself makes: ``{(name, port): address}``, each
one endpoint of a server ctxnb started on the host (the local model's, reached by the
sandboxed agent loop). The name is reached on that port alone and never resolved; any
other port under it is refused, and every other loopback address and port stays refused
as before.

``hosts`` is a seam for tests and notebooks: ``{"allowed.test": "127.0.0.1"}`` resolves
that name to that address without DNS, and a name mapped there may reach a local
address (it was mapped on purpose). The allowlist still decides whether it is reached.

Example:
    >>> import socket
    >>> with NetworkProxy(["allowed.test"]) as proxy:
    ...     s = socket.socket(socket.AF_UNIX); s.connect(proxy.socket_path)
    ...     _ = s.sendall(b"CONNECT refused.test:443 HTTP/1.1\\r\\nHost: refused.test\\r\\n\\r\\n")
    ...     print(s.recv(4096).split(b"\\r\\n")[0].decode()); s.close()
    HTTP/1.1 403 Forbidden by ctxnb: refused.test is not in the sandbox's allowed domains
    >>> [(d.host, d.allowed) for d in proxy.decisions]
    [('refused.test', False)]
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from .._util.domains import allowed_pattern, normalize_host

__all__ = ["NetDecision", "NetworkProxy"]

HEAD_LIMIT = 65536
"""The most bytes a request's line and headers may take."""
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
_AUTHORITY = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]/@\s]+):([0-9]{1,5})")
_HOP_HEADERS = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authorization",
    b"proxy-authenticate",
    b"te",
    b"trailer",
    b"upgrade",
    b"host",
}


@dataclass(frozen=True)
class NetDecision:
    """One request to the proxy and what it decided.

    Attributes:
        host: the name asked for (normalized), or the raw target when it was no name.
        port: the port asked for (0 when the request was unreadable).
        method: ``CONNECT`` or the HTTP method of a plain request.
        allowed: whether the proxy connected.
        reason: why it refused (or the entry that allowed it).
        address: the address connected to, when it did.
        ts: seconds since the epoch.
    """

    host: str
    port: int
    method: str
    allowed: bool
    reason: str
    address: str | None = None
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The decision as plain data (command results, the audit log)."""
        return asdict(self)


class _Refused(Exception):
    def __init__(self, status: int, title: str, detail: str, host: str, port: int) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.host, self.port = (
            status,
            title,
            detail,
            host,
            port,
        )


class NetworkProxy:
    """An HTTP proxy on a Unix socket that connects only to ``allowed`` domains.

    Run it with ``with NetworkProxy(...) as proxy:`` (or :meth:`start` and
    :meth:`stop`): it serves on its own thread and event loop, so a synchronous caller
    (the sandbox runner) keeps it up while a command runs.

    Args:
        allowed: domain names and ``*.`` suffixes (see :mod:`ctxnb._util.domains`).
        hosts: names resolved without DNS, to the address given (a test seam; a name
            mapped here may reach a local address).
        on_decision: called with every :class:`NetDecision` (on the proxy's thread).
        connect_timeout: seconds to connect to an allowed host.
        endpoints: ``{(name, port): address}``: servers ctxnb started on the host, each
            reached by its name on its port only (see the module's docstring).
    """

    def __init__(
        self,
        allowed: Sequence[str],
        *,
        hosts: Mapping[str, str] | None = None,
        endpoints: Mapping[tuple[str, int], str] | None = None,
        on_decision: Callable[[NetDecision], None] | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.allowed = tuple(allowed)
        self.hosts = {normalize_host(k) or k: v for k, v in (hosts or {}).items()}
        self.endpoints = {
            (normalize_host(k) or k, int(port)): v for (k, port), v in (endpoints or {}).items()
        }
        self.on_decision = on_decision
        self.connect_timeout = connect_timeout
        self.decisions: list[NetDecision] = []
        self.socket_path = ""
        self._dir: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> str:
        """Listen (on a fresh socket in a private temporary directory) and return its path."""
        if self._thread is not None:
            return self.socket_path
        self._dir = tempfile.mkdtemp(prefix="ctxnb-net-")
        self.socket_path = os.path.join(self._dir, "proxy.sock")
        ready = threading.Event()
        failed: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_unix_server(self._handle, self.socket_path, limit=HEAD_LIMIT)
                )
            except BaseException as e:  # reported to start()
                failed.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._thread = threading.Thread(target=serve, name="ctxnb-netproxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            self._thread.join()
            self._thread = None
            self._cleanup_dir()
            raise failed[0]
        return self.socket_path

    def stop(self) -> None:
        """Stop serving, close every relayed connection and remove the socket."""
        loop, thread = self._loop, self._thread
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._thread = self._loop = None
        self._cleanup_dir()

    def __enter__(self) -> NetworkProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _cleanup_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- one request --------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve_one(reader, writer)
        except (ConnectionError, asyncio.CancelledError, OSError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method = "?"
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                raise _Refused(
                    400, "Bad Request", "ctxnb: no complete request head", "", 0
                ) from None
            lines = head[:-4].split(b"\r\n")
            parts = lines[0].split(b" ")
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
                raise _Refused(400, "Bad Request", "ctxnb: not an HTTP/1 request line", "", 0)
            method = parts[0].decode("ascii", "replace")
            target = parts[1].decode("ascii", "replace")
            if method == "CONNECT":
                (host, port), rest = self._authority(target), b""
            else:
                host, port, rest = self._absolute(target, method)
            name = normalize_host(host)
            if name is None:
                raise _Refused(
                    400, "Bad Request", f"ctxnb: {host!r} is not a host name", host, port
                )
            served = self.endpoints.get((name, port))
            if served is None and any(name == n for n, _ in self.endpoints):
                ports = ", ".join(str(p) for n, p in self.endpoints if n == name)
                raise _Refused(
                    403,
                    f"Forbidden by ctxnb: {name} is reached on port {ports} only",
                    f"ctxnb: {name} is a server ctxnb started, reached on port {ports} only; "
                    f"port {port} is refused",
                    name,
                    port,
                )
            pattern = (
                f"{name}:{port}, a server ctxnb started"
                if served is not None
                else allowed_pattern(name, self.allowed)
            )
            if pattern is None:
                listed = ", ".join(self.allowed) or "none"
                raise _Refused(
                    403,
                    f"Forbidden by ctxnb: {name} is not in the sandbox's allowed domains",
                    f"ctxnb: {name} is not in the sandbox's allowed domains ({listed}); a "
                    "human may add it to [sandbox] allowed_domains in ctxnb.toml or to the "
                    "intent's allowed_domains",
                    name,
                    port,
                )
            address = served if served is not None else await self._resolve(name, port)
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(address, port), self.connect_timeout
                )
            except (OSError, TimeoutError) as e:
                raise _Refused(
                    502,
                    "Bad Gateway",
                    f"ctxnb: cannot connect to {name}:{port} ({address}): {e or 'timed out'}",
                    name,
                    port,
                ) from None
        except _Refused as r:
            self._decide(r.host, r.port, method, False, r.detail)
            body = (r.detail + "\n").encode("utf-8", "replace")
            writer.write(
                f"HTTP/1.1 {r.status} {r.title}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n"
                f"X-Ctxnb-Refused: {r.title}\r\n\r\n".encode("ascii", "replace")
                + body
            )
            await writer.drain()
            return
        self._decide(name, port, method, True, f"allowed by {pattern}", address)
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(self._rewrite(lines, method, rest, host, port))
            await _relay(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()
            with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
                await up_writer.wait_closed()

    @staticmethod
    def _authority(target: str) -> tuple[str, int]:
        m = _AUTHORITY.fullmatch(target)
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise _Refused(
                400, "Bad Request", f"ctxnb: CONNECT needs host:port, not {target!r}", target, 0
            )
        return m.group(1), int(m.group(2))

    @staticmethod
    def _absolute(target: str, method: str) -> tuple[str, int, bytes]:
        """``(host, port, origin-form target)`` of a plain request's absolute URL."""
        url = urlsplit(target)
        if url.scheme.lower() != "http" or not url.netloc:
            raise _Refused(
                400,
                "Bad Request",
                f"ctxnb: a plain {method} through the proxy needs an absolute http:// URL "
                f"(https goes through CONNECT), not {target!r}",
                "",
                0,
            )
        if "@" in url.netloc:
            raise _Refused(
                400, "Bad Request", "ctxnb: a URL with user information is refused", "", 0
            )
        try:
            port = url.port or 80
        except ValueError:
            raise _Refused(400, "Bad Request", f"ctxnb: bad port in {target!r}", "", 0) from None
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        return url.hostname or "", port, path.encode("ascii", "replace")

    @staticmethod
    def _rewrite(lines: list[bytes], method: str, path: bytes, host: str, port: int) -> bytes:
        """The request for the origin server: origin-form, our Host, no hop headers, and
        one request per connection (the tunnel's destination never changes)."""
        first = b" ".join([method.encode("ascii"), path, lines[0].split(b" ")[2]])
        kept = [h for h in lines[1:] if h.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
        host_header = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):
            host_header = f"[{host}]" if port == 80 else f"[{host}]:{port}"
        extra = [f"Host: {host_header}".encode("ascii", "replace"), b"Connection: close"]
        return b"\r\n".join([first, *extra, *kept]) + b"\r\n\r\n"

    async def _resolve(self, name: str, port: int) -> str:
        """The address to connect to for an allowed name; local addresses are refused
        unless the name was mapped in ``hosts``."""
        if name in self.hosts:
            return self.hosts[name]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise _Refused(
                502, "Bad Gateway", f"ctxnb: cannot resolve {name}: {e}", name, port
            ) from None
        addresses = [str(info[4][0]) for info in infos]
        for a in addresses:
            ip = ipaddress.ip_address(a.split("%")[0])
            if not ip.is_global:
                raise _Refused(
                    403,
                    f"Forbidden by ctxnb: {name} resolves to a local address",
                    f"ctxnb: {name} resolves to {a}, a loopback, private or link-local "
                    "address; the sandbox's network reaches public addresses only",
                    name,
                    port,
                )
        if not addresses:
            raise _Refused(502, "Bad Gateway", f"ctxnb: {name} has no address", name, port)
        return addresses[0]

    def _decide(
        self,
        host: str,
        port: int,
        method: str,
        allowed: bool,
        reason: str,
        address: str | None = None,
    ) -> None:
        d = NetDecision(host, port, method, allowed, reason, address, time.time())
        self.decisions.append(d)
        if self.on_decision is not None:
            self.on_decision(d)


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy bytes both ways until both sides are done."""

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except (ConnectionError, OSError):
            dst.close()

    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
