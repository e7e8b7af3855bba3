"""The sandbox runner: one command, confined by bubblewrap, and what it changed.

:class:`Sandbox` plans the mounts (:func:`~ctxnb.sandbox.plan.plan_sandbox`), snapshots
the writable directories, runs the command under ``bwrap`` with the existing timeout and
process-group kill (:func:`~ctxnb.sandbox.process.run_command`), snapshots again and
reports the changes. It writes nothing itself: putting back what changed outside the
scope, storing versions and tracing is the governed layer's job
(:mod:`ctxnb.govern.effects`), the same for every caller.

``backend="none"`` runs the command unconfined (the environment is still filtered and
the whole workspace is observed, so changes are still traced and put back); it is
unsafe and only for machines without bubblewrap, when the config says so.

Example:
    >>> import tempfile, pathlib
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> (ws / "src").mkdir(); _ = (ws / "README.md").write_text("hi\\n")
    >>> sb = Sandbox(ws, owned_scope=["src/**"])
    >>> r = sb.run("echo x > src/a.txt; echo y > README.md", shell=True)
    >>> [c.path for c in r.changes], (ws / "README.md").read_text()
    (['src/a.txt'], 'hi\\n')
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import NotFoundError, SandboxError
from .observe import FileChange, Snapshot, diff_snapshots, take_snapshot
from .plan import (
    HIDDEN,
    PROTECTED,
    SandboxLimits,
    SandboxPlan,
    bwrap_argv,
    find_bwrap,
    plan_sandbox,
)
from .process import CommandResult, run_command

__all__ = ["Backend", "Sandbox", "SandboxResult", "check_bwrap"]

Backend = Literal["bwrap", "none"]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap), or, knowing that commands then run "
    'unconfined, set sandbox = "none" in ctxnb.toml'
)
_probed: dict[str, str | None] = {}


@dataclass
class SandboxResult:
    """A confined command's result and what it changed.

    Attributes:
        result: exit status and (capped) output.
        changes: entries created, modified or deleted under the writable directories
            (in scope or not; see :attr:`in_scope`).
        before: the snapshot taken before the command.
        plan: what was bound, masked and passed.
        backend: ``bwrap`` or ``none``.
    """

    result: CommandResult
    changes: list[FileChange] = field(default_factory=list)
    before: Snapshot | None = None
    plan: SandboxPlan | None = None
    backend: Backend = "bwrap"


def check_bwrap(bwrap: str | None = None) -> str:
    """The path of a working ``bwrap``; runs it once per process to be sure.

    Raises:
        SandboxError: bwrap is missing or cannot create namespaces here; the message
            names the fix.
    """
    exe = bwrap or find_bwrap()
    if exe is None:
        raise SandboxError(
            f"bubblewrap (bwrap) is not installed, so commands cannot be confined; {INSTALL_HINT}"
        )
    if exe not in _probed:
        import subprocess

        argv = [exe, "--ro-bind", "/", "/", "--unshare-user", "--disable-userns",
                "--unshare-pid", "--unshare-net", "--cap-drop", "ALL", "--", "true"]  # fmt: skip
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            _probed[exe] = (
                None if p.returncode == 0 else (p.stderr.strip() or f"exit {p.returncode}")
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            _probed[exe] = str(e)
    err = _probed[exe]
    if err is not None:
        raise SandboxError(
            f"bubblewrap ({exe}) cannot create a sandbox here: {err}. Allow unprivileged "
            "user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
            "also kernel.apparmor_restrict_unprivileged_userns=0), run in a container "
            f"that permits them, or {INSTALL_HINT.split(', or, ')[1]}"
        )
    return exe


_LIMIT_KEYS = ("max_memory_mb", "max_file_mb", "max_processes", "max_open_files")


class Sandbox:
    """Runs commands in one workspace, writable only where the scope says.

    Args:
        root: the workspace root.
        owned_scope: the selected intent's globs; empty: nothing is writable.
        in_scope: decides whether a workspace-relative path is in the scope
            (``Intent.in_scope``); by default every path under a writable directory.
        deny: the deny list (None: the default).
        backend: ``bwrap`` (default) or ``none`` (unconfined; see the module doc).
        network: let commands reach the network.
        env_allow: more environment variable names to pass through.
        read_paths: more host paths readable in the sandbox.
        limits: resource limits.
        env: the environment to filter (``os.environ`` by default).

    Raises:
        SandboxError: on :meth:`run`, when bubblewrap is missing or unusable and the
            backend is ``bwrap``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        owned_scope: Sequence[str] = (),
        in_scope: Callable[[str], bool] | None = None,
        deny: Sequence[str] | None = None,
        backend: Backend = "bwrap",
        network: bool = False,
        env_allow: Sequence[str] = (),
        read_paths: Sequence[str] = (),
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if backend not in ("bwrap", "none"):
            raise SandboxError(f"unknown sandbox backend {backend!r}; use 'bwrap' or 'none'")
        self.root = Path(os.path.realpath(root))
        self.owned_scope = list(owned_scope)
        self._in_scope = in_scope
        self.deny = deny
        self.backend: Backend = backend
        self.network = network
        self.env_allow = list(env_allow)
        self.read_paths = list(read_paths)
        self.limits = limits
        self.env = env

    @classmethod
    def from_settings(
        cls,
        root: str | os.PathLike[str],
        settings: Mapping[str, Any],
        *,
        owned_scope: Sequence[str] = (),
        in_scope: Callable[[str], bool] | None = None,
        deny: Sequence[str] | None = None,
        network: bool = False,
    ) -> Sandbox:
        """The sandbox a ``[sandbox]`` section describes, as a mapping (the configuration
        model's dump, or the settings the Claude Code hooks cache); a missing key takes
        its default here, in one place.

        Args:
            root: the workspace root.
            settings: ``backend``, ``network``, ``env``, ``read_paths`` and the
                ``max_*`` limits of :class:`SandboxLimits`.
            owned_scope: the selected intent's scope (writable).
            in_scope: see the class.
            deny: the deny list (None: the default).
            network: let commands reach the network even when ``settings`` does not
                (the intent asks for it).

        Example:
            >>> import tempfile
            >>> sb = Sandbox.from_settings(tempfile.mkdtemp(), {"max_file_mb": 8})
            >>> sb.backend, sb.network, sb.limits.max_file_mb, sb.limits.max_processes
            ('bwrap', False, 8, 4096)
        """
        limits = {k: settings[k] for k in _LIMIT_KEYS if k in settings}
        return cls(
            root,
            owned_scope=owned_scope,
            in_scope=in_scope,
            deny=deny,
            backend=settings.get("backend", "bwrap"),
            network=network or bool(settings.get("network")),
            env_allow=settings.get("env") or (),
            read_paths=settings.get("read_paths") or (),
            limits=SandboxLimits(**limits),
        )

    def in_scope(self, rel: str) -> bool:
        """Whether a command may change ``rel`` (workspace-relative)."""
        if self._in_scope is not None:
            return self._in_scope(rel)
        return any(d == "" or rel == d or rel.startswith(d + "/") for d in self.plan().writable)

    def plan(self) -> SandboxPlan:
        """The mounts, masks and environment for the next command."""
        return plan_sandbox(
            self.root,
            owned_scope=self.owned_scope,
            deny=self.deny,
            network=self.network,
            env=self.env,
            env_allow=self.env_allow,
            read_paths=self.read_paths,
            limits=self.limits,
        )

    def run(
        self,
        cmd: str | list[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = 120,
        shell: bool = False,
        max_output_bytes: int = 64_000,
        redact: Callable[[str], str] | None = None,
        before_run: Callable[[Snapshot], None] | None = None,
    ) -> SandboxResult:
        """Run one command confined; return its result and the changes it made.

        Args:
            cmd: an argv list, or a string (split like a shell; ``shell=True`` passes
                it to ``/bin/sh -c``).
            cwd: the working directory, inside the workspace (default: the root).
            timeout: seconds before the command and all it started are killed.
            shell: run through ``/bin/sh``.
            max_output_bytes: output kept per stream.
            redact: applied to the output texts.
            before_run: called with the snapshot just before the command starts (the
                governed layer stores the current bytes there, to put them back).

        Raises:
            SandboxError: bubblewrap is missing or unusable (backend ``bwrap``), or a
                scope directory cannot be bound.
            NotFoundError: ``cwd`` is not a directory inside the workspace.
        """
        exe = check_bwrap() if self.backend == "bwrap" else None
        workdir = Path(os.path.realpath(cwd)) if cwd is not None else self.root
        if workdir != self.root and self.root not in workdir.parents:
            raise NotFoundError(
                f"working directory {str(cwd)!r} is not inside the workspace {self.root}"
            )
        plan = self.plan()
        observed = plan.writable if self.backend == "bwrap" else ("",)
        skip = {*PROTECTED, *HIDDEN, *plan.masked_files, *plan.masked_dirs, *plan.pinned}
        before = take_snapshot(self.root, observed, skip=skip)
        if before_run is not None:
            before_run(before)

        with contextlib.ExitStack() as stack:
            env: Mapping[str, str] = plan.env
            wrap: Callable[[list[str]], list[str]] | None = None
            if exe is not None:

                def wrap(argv: list[str]) -> list[str]:
                    # exec through sh: a missing program is 127 and a non-executable
                    # 126, as without the sandbox.
                    inner = argv if shell else ["/bin/sh", "-c", 'exec "$@"', "sh", *argv]
                    return bwrap_argv(plan, inner, cwd=workdir, bwrap=exe)

            else:
                # Unconfined: the private HOME and /tmp of the plan become a fresh
                # directory of the host.
                home = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxnb-home-"))
                env = {**plan.env, "HOME": home, "TMPDIR": home}
                env.update(XDG_CACHE_HOME=f"{home}/.cache", PYTHONPYCACHEPREFIX=f"{home}/pycache")
            result = run_command(
                cmd,
                cwd=workdir,
                timeout=timeout,
                shell=shell,
                max_output_bytes=max_output_bytes,
                env=env,
                redact=redact,
                wrap=wrap,
            )
        after = take_snapshot(self.root, observed, skip=skip)
        changes = diff_snapshots(before, after)
        return SandboxResult(result, changes, before, plan, self.backend)

    def __repr__(self) -> str:
        return f"<Sandbox {self.root} backend={self.backend} scope={self.owned_scope}>"
