"""A long-running process in bubblewrap with the workspace read-only: an outside MCP server.

A command (:class:`~ctxnb.sandbox.Sandbox`) writes an overlay that is committed or
dropped when it ends. A *service* runs as long as its client keeps it (an outside MCP
server of the registry) and has no commit: it sees the workspace read-only, with the
same masks as a command (denied files and their hard links, ``.ctxnb``, git object
stores that hold denied bytes, host sockets), a private ``/tmp`` that is its ``HOME``,
none of the caller's variables but the allowed ones and those named for it, the
resource limits, and no network interface: listed domains go through its own
:class:`~ctxnb.sandbox.netproxy.NetworkProxy`, kept up while the service runs.

:func:`confine_service` returns the argv to start (the caller starts it: the MCP SDK's
stdio client does) and a :class:`ConfinedService` whose :meth:`~ConfinedService.status`
is the ``sandboxStatus`` a server reports: isolated or not, the sandbox's process id,
the network. The argv writes its own process id to a private file before it becomes
``bwrap`` (``exec`` keeps the id), so the status names the real process without the
starter's help.

Example:
    >>> import subprocess, tempfile
    >>> ws = tempfile.mkdtemp()
    >>> svc = confine_service(ws, ["sh", "-c", "echo hi > x 2>/dev/null || echo read-only"])
    >>> subprocess.run(svc.argv, capture_output=True, text=True).stdout
    'read-only\\n'
    >>> st = svc.status(); st["isolated"], st["backend"], st["pid"] > 0, st["network"]
    (True, 'bwrap', True, 'none')
    >>> svc.close()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .netproxy import NetworkProxy
from .plan import SandboxLimits, bwrap_argv, plan_sandbox
from .runner import check_bwrap

__all__ = ["ConfinedService", "confine_service", "unconfined_status"]


class ConfinedService:
    """One confined long-running process: its argv, its proxy, its status.

    Attributes:
        argv: what to start (``sh`` that records its id and becomes ``bwrap``).
        allowed_domains: the domains its proxy lets through (empty: no network).
        network: ``none``, ``domains`` or ``host`` (shares the host's network).
    """

    def __init__(
        self,
        argv: list[str],
        *,
        state: Path,
        proxy: NetworkProxy | None,
        network: str,
        allowed_domains: Sequence[str],
    ) -> None:
        self.argv = argv
        self.network = network
        self.allowed_domains = list(allowed_domains)
        self._state: Path | None = state
        self._proxy = proxy
        self._pid: int | None = None

    @property
    def pid(self) -> int | None:
        """The process id of the sandbox (``bwrap``), once it started."""
        if self._pid is None and self._state is not None:
            with contextlib.suppress(OSError, ValueError):
                self._pid = int((self._state / "pid").read_text().strip())
        return self._pid

    def wait_pid(self, timeout: float = 5.0) -> int | None:
        """The sandbox's process id, waiting up to ``timeout`` seconds for the started
        process to write it (it does so first thing, before it becomes ``bwrap``)."""
        import time

        end = time.monotonic() + timeout
        while self.pid is None and time.monotonic() < end:
            time.sleep(0.005)
        return self.pid

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """What its proxy decided for each request (see :class:`NetDecision`)."""
        return [d.to_dict() for d in self._proxy.decisions] if self._proxy is not None else []

    def status(self) -> dict[str, Any]:
        """``sandboxStatus``: ``isolated``, ``backend``, ``pid``, ``network`` and the
        ``allowed_domains``; ``running`` says whether that process is still alive."""
        pid = self.pid
        return {
            "isolated": True,
            "backend": "bwrap",
            "pid": pid,
            "running": pid is not None and _alive(pid),
            "workspace": "read-only",
            "network": self.network,
            "allowed_domains": list(self.allowed_domains),
        }

    def close(self) -> None:
        """Stop its proxy and remove its private state (the process is its starter's)."""
        if self._proxy is not None:
            self._proxy.stop()
        if self._state is not None:
            shutil.rmtree(self._state, ignore_errors=True)
            self._state = None

    def __repr__(self) -> str:
        return f"<ConfinedService pid={self.pid} network={self.network}>"


def unconfined_status(reason: str, pid: int | None = None) -> dict[str, Any]:
    """``sandboxStatus`` of a process that runs on the host, and why.

    Example:
        >>> unconfined_status("[mcp.servers.docs] sandbox = false")["isolated"]
        False
    """
    return {"isolated": False, "backend": "none", "pid": pid, "reason": reason}


def confine_service(
    root: str | os.PathLike[str],
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    env_allow: Sequence[str] = (),
    deny: Sequence[str] | None = None,
    network: bool = False,
    allowed_domains: Sequence[str] = (),
    read_paths: Sequence[str] = (),
    limits: SandboxLimits | None = None,
    proxy_hosts: Mapping[str, str] | None = None,
    git: str = "auto",
    proxy_endpoints: Mapping[tuple[str, int], str] | None = None,
) -> ConfinedService:
    """Plan a read-only sandbox for the service ``argv`` in the workspace ``root``.

    Args:
        root: the workspace, bound read-only (denied files masked).
        argv: the service's program and arguments.
        cwd: its working directory (default: ``root``); outside the workspace it must
            be among ``read_paths`` to exist in the sandbox.
        env: the environment to filter (``os.environ`` by default).
        env_allow: names passed through besides the default ones.
        deny: the deny list (None: the default).
        network: share the host's network (no proxy).
        allowed_domains: without ``network``, the domains reachable through its proxy.
        read_paths: more host paths readable in the sandbox (the server's own files).
        limits: resource limits (the defaults of :class:`SandboxLimits`).
        proxy_hosts: the proxy's ``hosts`` seam (tests, notebooks).
        git: ``read`` keeps git's object stores readable.
        proxy_endpoints: servers ctxnb started on the host that the service may reach,
            each by its name on its port alone (the proxy's ``endpoints``); their names
            join ``allowed_domains`` so that the proxy is there.

    Raises:
        SandboxError: ``SANDBOX_UNAVAILABLE``: no bubblewrap here can confine it.
    """
    exe = check_bwrap()
    endpoints = dict(proxy_endpoints or {})
    plan = plan_sandbox(
        root,
        deny=deny,
        network=network,
        allowed_domains=[*allowed_domains, *(name for name, _ in endpoints)],
        env=env,
        env_allow=env_allow,
        read_paths=read_paths,
        limits=limits,
        git=git,
    )
    state = Path(tempfile.mkdtemp(prefix="ctxnb-svc-"))
    proxy = None
    try:
        if plan.allowed_domains:
            proxy = NetworkProxy(plan.allowed_domains, hosts=proxy_hosts, endpoints=endpoints)
            proxy.start()
        inner = bwrap_argv(
            plan,
            list(argv),
            cwd=cwd or plan.root,
            bwrap=exe,
            overlay=None,
            proxy_socket=proxy.socket_path if proxy is not None else None,
        )
    except BaseException:
        if proxy is not None:
            proxy.stop()
        shutil.rmtree(state, ignore_errors=True)
        raise
    # `exec` keeps the process id: the id written is bwrap's.
    started = ["/bin/sh", "-c", 'echo $$ > "$0"; exec "$@"', str(state / "pid"), *inner]
    mode = "host" if network else "domains" if plan.allowed_domains else "none"
    return ConfinedService(
        started, state=state, proxy=proxy, network=mode, allowed_domains=plan.allowed_domains
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
