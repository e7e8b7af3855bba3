"""The sandbox's network proxy, attacked over its real Unix socket (no sandbox needed).

A real HTTP server on 127.0.0.1 is reached by name (``allowed.test``, mapped by the
proxy's ``hosts`` seam); every other name, trick and local address must be refused
with a reason, before anything is resolved for a name that is not listed.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from _origin_server import origin_server

from ctxnb._util.domains import allowed_pattern, check_pattern, normalize_host
from ctxnb.sandbox.netproxy import HEAD_LIMIT, NetworkProxy

HOSTS = {
    "allowed.test": "127.0.0.1",
    "refused.test": "127.0.0.1",
    "a.example.test": "127.0.0.1",
    "a.b.example.test": "127.0.0.1",
    "example.test": "127.0.0.1",
    "badexample.test": "127.0.0.1",
    "allowed.test.refused.test": "127.0.0.1",
}


def ask(proxy: NetworkProxy, raw: bytes) -> tuple[str, bytes]:
    """Send one raw request to the proxy; (status line, everything after the head)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(proxy.socket_path)
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), rest


def get(host: str, port: int, path: str = "/") -> bytes:
    return f"GET http://{host}:{port}{path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


def test_a_listed_name_is_reached_by_name_and_the_origin_sees_a_clean_request():
    with origin_server() as (port, seen), NetworkProxy(["allowed.test"], hosts=HOSTS) as proxy:
        raw = (
            f"GET http://allowed.test:{port}/a?b=1 HTTP/1.1\r\nHost: refused.test\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
            "X-Kept: yes\r\n\r\n"
        ).encode()
        status, body = ask(proxy, raw)
    assert status == "HTTP/1.1 200 OK"
    echoed = json.loads(body)
    assert echoed["path"] == "/a?b=1"  # origin-form, not the absolute URL
    # The Host the client sent cannot steer the origin to another virtual host.
    assert echoed["headers"]["host"] == f"allowed.test:{port}"
    assert "proxy-authorization" not in echoed["headers"]
    assert "proxy-connection" not in echoed["headers"]
    assert echoed["headers"]["x-kept"] == "yes"
    assert seen == ["/a?b=1"]
    [d] = proxy.decisions
    assert (d.host, d.port, d.method, d.allowed, d.address) == (
        "allowed.test",
        port,
        "GET",
        True,
        "127.0.0.1",
    )


def test_connect_tunnels_bytes_to_a_listed_name():
    with origin_server() as (port, seen), NetworkProxy(["allowed.test"], hosts=HOSTS) as proxy:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(proxy.socket_path)
            s.sendall(f"CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n".encode())
            assert s.recv(4096) == b"HTTP/1.1 200 Connection Established\r\n\r\n"
            s.sendall(b"GET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b"/tunnelled" in data
    assert seen == ["/tunnelled"]


@pytest.mark.parametrize("method", ["GET", "CONNECT"])
def test_a_name_not_listed_gets_403_with_the_reason_and_is_never_resolved(monkeypatch, method):
    asked: list[str] = []
    real = socket.getaddrinfo

    def recording(host, *args, **kwargs):  # observes the proxy's DNS, answers for real
        asked.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording)
    with origin_server() as (port, seen), NetworkProxy(["allowed.test"]) as proxy:
        raw = (
            f"CONNECT exfil-d41d8cd98f.refused.test:{port} HTTP/1.1\r\n\r\n".encode()
            if method == "CONNECT"
            else get("exfil-d41d8cd98f.refused.test", port)
        )
        status, body = ask(proxy, raw)
    assert status.startswith("HTTP/1.1 403 Forbidden by ctxnb: exfil-d41d8cd98f.refused.test")
    assert b"not in the sandbox's allowed domains (allowed.test)" in body
    assert b"[sandbox] allowed_domains" in body  # the fix, for the human
    assert asked == [] and seen == []  # not resolved, not reached
    [d] = proxy.decisions
    assert (d.allowed, d.method) == (False, method) and "allowed domains" in d.reason


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("a.example.test", True),
        ("a.b.example.test", True),
        ("example.test", False),  # a suffix entry allows what is below it only
        ("badexample.test", False),
        ("allowed.test.refused.test", False),
    ],
)
def test_suffix_entries_allow_names_below_them_only(host, allowed):
    with origin_server() as (port, seen), NetworkProxy(["*.example.test"], hosts=HOSTS) as proxy:
        status, _ = ask(proxy, get(host, port))
    assert status.startswith("HTTP/1.1 200") is allowed
    assert bool(seen) is allowed


@pytest.mark.parametrize(
    "raw",
    [
        # user information: a parser that takes the first name would connect to it
        b"GET http://allowed.test@refused.test/ HTTP/1.1\r\n\r\n",
        b"GET http://allowed.test:80@refused.test/ HTTP/1.1\r\n\r\n",
        b"CONNECT allowed.test:80@refused.test:80 HTTP/1.1\r\n\r\n",
        b"CONNECT allowed.test HTTP/1.1\r\n\r\n",
        b"CONNECT allowed.test:99999 HTTP/1.1\r\n\r\n",
        # a request meant for the origin itself, smuggling its target in Host
        b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        b"GET https://allowed.test/ HTTP/1.1\r\n\r\n",
        b"GET http://allowed.test/ HTTP/2.0\r\n\r\n",
        b"GET http://allowed%2etest/ HTTP/1.1\r\n\r\n",
        b"GET http://allowed.test\x00.refused.test/ HTTP/1.1\r\n\r\n",
    ],
)
def test_tricky_targets_are_refused_and_nothing_is_reached(raw):
    with origin_server() as (_, seen), NetworkProxy(["allowed.test"], hosts=HOSTS) as proxy:
        status, body = ask(proxy, raw)
    assert status.split(" ")[1] in ("400", "403"), status
    assert body.startswith(b"ctxnb: ")
    assert seen == []
    assert all(not d.allowed for d in proxy.decisions)


@pytest.mark.parametrize("entry", ["localhost", "127.0.0.1", "::1"])
def test_a_listed_name_that_resolves_to_a_local_address_is_refused(entry):
    """A listed name must not become a way to a service on the host (DNS rebinding)."""
    with origin_server() as (port, seen), NetworkProxy([entry]) as proxy:
        host = f"[{entry}]" if ":" in entry else entry
        status, body = ask(proxy, get(host, port))
    assert status.startswith("HTTP/1.1 403 Forbidden by ctxnb:") and "local address" in status
    assert b"public addresses only" in body
    assert seen == []


def test_an_endless_request_head_is_refused():
    with NetworkProxy(["allowed.test"], hosts=HOSTS) as proxy:
        raw = b"GET http://allowed.test/ HTTP/1.1\r\nX: " + b"a" * (HEAD_LIMIT + 10) + b"\r\n\r\n"
        status, _ = ask(proxy, raw)
    assert status.startswith("HTTP/1.1 400")


def test_stop_closes_relayed_connections_and_removes_the_socket():
    with origin_server() as (port, _):
        proxy = NetworkProxy(["allowed.test"], hosts=HOSTS)
        path = proxy.start()
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(path)
        s.sendall(f"CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        proxy.stop()
        assert s.recv(4096) == b""  # the tunnel ended with the proxy
        s.close()
    assert not os.path.exists(path)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("PyPI.org.", "pypi.org"),
        ("[::1]", "::1"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("a..b", None),
        ("a b", None),
        ("-a.test", None),
        ("a" * 64 + ".test", None),
        ("evil.test/", None),
    ],
)
def test_host_names_normalize_once(given, expected):
    assert normalize_host(given) == expected


@pytest.mark.parametrize(
    "bad", ["*", "*.", "https://pypi.org", "pypi.org:443", "a.*.test", "*.1.2.3.4"]
)
def test_allowlist_entries_that_are_not_domains_are_refused(bad):
    with pytest.raises(ValueError, match="domain|IP address"):
        check_pattern(bad)


def test_an_odd_entry_allows_nothing():
    assert allowed_pattern("anything.test", ["*", "a.*.test"]) is None
    assert allowed_pattern("10.0.0.1", ["*.0.0.1"]) is None
