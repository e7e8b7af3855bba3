"""Inside the sandbox: offer the host's proxy socket on 127.0.0.1, then run the command.

Run as ``python -I -S _netbridge.py SOCKET -- COMMAND...`` by the sandbox when the
command may reach allowed domains (:mod:`ctxnb.sandbox.netproxy`). The sandbox has no
network interface but its own loopback, and the proxy is a Unix socket bound in; most
tools speak to a proxy over TCP only, so this listens on a free port of the sandbox's
loopback, relays each connection to the socket, and runs the command with
``HTTP_PROXY``/``HTTPS_PROXY`` (and their lower-case forms) pointing there. Listening
starts before the command does, so its first request finds the port open. It exits with
the command's status (a signal that ended the command ends it the same way).

Standard library only, and no import of ctxnb: it runs with the sandbox's Python in
isolated mode and must start in a few milliseconds.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")
NO_PROXY = "localhost,127.0.0.1,::1"


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: _netbridge.py SOCKET -- COMMAND [ARG...]\n")
        return 2
    path, command = argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = dict(os.environ)
    env.update(dict.fromkeys(PROXY_VARS, url))
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY
    pid = os.fork()
    if pid == 0:
        listener.close()
        try:
            os.execvpe(command[0], command, env)
        except OSError as e:
            sys.stderr.write(f"ctxnb: cannot run {command[0]}: {e.strerror}\n")
            os._exit(127 if isinstance(e, FileNotFoundError) else 126)
    threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    # Signals meant for the command reach it (it is in our process group); we wait on.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
