"""A sandboxed agent loop reaches the local model ctxnb serves, and nothing else on the
host's loopback: real bubblewrap, ctxnb's real proxy, real HTTP servers on 127.0.0.1.

The loop's sandbox has no network interface but its own loopback; the one way out is the
proxy, which maps :data:`~ctxnb.live.local.BOXED_HOST` to exactly the model server's
``127.0.0.1:<port>``. From inside, a script tries that endpoint (with and without the
server's key) and every neighbour: another port under the same name, another server on
the host's loopback by address (directly and through the proxy), ``localhost``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _agent_workspace import make_workspace, require_live_agent
from _origin_server import origin_server

from ctxnb.live.local import BOXED_HOST, LocalModelServer
from ctxnb.sandbox.service import confine_service

# Run in the sandbox with -I: each attempt's outcome, as JSON on standard output.
PROBE = r"""
import http.client, json, os, sys, urllib.error, urllib.request, urllib.parse

model, key, other = sys.argv[1], sys.argv[2], int(sys.argv[3])
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
port = int(model.rsplit(":", 1)[1].split("/")[0])
name = model.split("//")[1].split(":")[0]
BODY = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()


def headers(key):
    out = {"Content-Type": "application/json"}
    if key:
        out["Authorization"] = "Bearer " + key
    return out


def proxied(url, key=None):
    # Straight to the proxy, whatever NO_PROXY says (a client that ignores it).
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
    try:
        conn.request("POST", url, BODY, headers(key))
        r = conn.getresponse()
        data = r.read().decode(errors="replace")
    except OSError as e:
        return ["oserror", str(e)[:300]]
    finally:
        conn.close()
    if r.status == 200:
        return [200, json.loads(data)["choices"][0]["message"]["content"]]
    return [r.status, data[:300]]


def default(url, key=None):
    # As a library does: the environment's proxy variables, NO_PROXY included.
    try:
        req = urllib.request.Request(url, BODY, headers(key))
        with urllib.request.urlopen(req, timeout=20) as r:
            return [r.status, json.load(r)["choices"][0]["message"]["content"]]
    except urllib.error.HTTPError as e:
        e.close()
        return [e.code, ""]
    except OSError as e:
        return ["oserror", str(e)[:300]]


print(json.dumps({
    "model": proxied(model + "/chat/completions", key),
    "model_without_key": proxied(model + "/chat/completions"),
    "model_by_default": default(model + "/chat/completions", key),
    "same_name_other_port": proxied(f"http://{name}:{other}/v1/chat/completions", key),
    "other_by_address_direct": default(f"http://127.0.0.1:{other}/", key),
    "other_by_address_proxied": proxied(f"http://127.0.0.1:{other}/", key),
    "model_by_address_proxied": proxied(f"http://127.0.0.1:{port}/v1/chat/completions", key),
    "other_by_localhost_proxied": proxied(f"http://localhost:{other}/", key),
}))
"""


class _Engine:
    """Stands in for llama.cpp (the boundary, not the model, is what is tested here)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def handle_chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        message = {"role": "assistant", "content": "hello from the host"}
        return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {}}


def test_the_sandboxed_loop_reaches_the_model_server_and_no_other_loopback_port(
    tmp_path: Path,
) -> None:
    require_live_agent()
    ws = make_workspace(tmp_path)
    engine = _Engine()
    server = LocalModelServer()
    server._engine = engine
    super(LocalModelServer, server).start()  # the HTTP door alone, no model loaded
    try:
        with origin_server() as (other, seen):
            api_base, endpoints = server.boxed
            assert api_base.startswith(f"http://{BOXED_HOST}:")
            # The settings allow 127.0.0.1 and localhost as domains, as a careless
            # ctxnb.toml might: still no way to a loopback port but the model's.
            svc = confine_service(
                ws,
                [sys.executable, "-I", "-c", PROBE, api_base, str(server.api_key), str(other)],
                allowed_domains=["127.0.0.1", "localhost"],
                proxy_endpoints=endpoints,
            )
            try:
                out = subprocess.run(svc.argv, capture_output=True, text=True, timeout=120)
                decisions = svc.decisions
            finally:
                svc.close()
            assert out.returncode == 0, out.stderr
            got = json.loads(out.stdout)
            assert seen == []  # the other server on the host's loopback was never reached
    finally:
        server.stop()

    assert got["model"] == [200, "hello from the host"]
    assert got["model_by_default"] == [200, "hello from the host"]  # HTTP_PROXY as set
    assert got["model_without_key"][0] == 401  # through, but the server wants its key
    assert len(engine.requests) == 2  # only the two requests that carried the key
    assert got["same_name_other_port"][0] == 403
    assert f"port {other} is refused" in got["same_name_other_port"][1]
    assert got["other_by_address_direct"][0] == "oserror"  # the sandbox's own loopback
    for name in ("other_by_address_proxied", "model_by_address_proxied"):
        assert got[name][0] == 403 and "local" in got[name][1], got[name]
    assert got["other_by_localhost_proxied"][0] == 403
    allowed = [(d["host"], d["port"]) for d in decisions if d["allowed"]]
    port = int(api_base.rsplit(":", 1)[1].split("/")[0])
    assert set(allowed) == {(BOXED_HOST, port)}


def test_a_served_name_is_never_resolved_and_is_refused_on_other_ports() -> None:
    # The proxy alone, over its Unix socket: the endpoint's name is answered from the
    # mapping; the same name on another port is refused before anything is resolved.
    import socket

    from ctxnb.sandbox.netproxy import NetworkProxy

    with origin_server() as (port, seen):
        endpoints = {(BOXED_HOST, port): "127.0.0.1"}
        with NetworkProxy([BOXED_HOST], endpoints=endpoints) as proxy:
            for p in (port, port + 1 if port < 65535 else port - 1):
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(10)
                    s.connect(proxy.socket_path)
                    s.sendall(f"GET http://{BOXED_HOST}:{p}/x HTTP/1.1\r\n\r\n".encode())
                    data = b""
                    while chunk := s.recv(65536):
                        data += chunk
                status = data.split(b"\r\n")[0].decode()
                if p == port:
                    assert status == "HTTP/1.1 200 OK", data
                else:
                    assert status.startswith("HTTP/1.1 403"), data
    assert seen == ["/x"]
    assert [d.allowed for d in proxy.decisions] == [True, False]
    assert proxy.decisions[0].address == "127.0.0.1"
