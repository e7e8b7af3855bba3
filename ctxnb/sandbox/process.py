"""Running a command for an agent: bounded in time and output, no stray processes.

:func:`run_command` starts the command in a new session (its own process group), reads
its output as it comes, keeps only the head and the tail of each stream when it says
too much, and at the timeout stops the whole group (SIGTERM, then SIGKILL after a grace
period), so a command's children and grandchildren cannot outlive it. When the command
itself exits, whatever it left running in its group is stopped the same way, because
such processes would keep the output pipes open and run on unsupervised.

Problems with the command itself never raise: a command that does not exist comes back
with return code 127 and one that cannot be executed with 126, as a shell reports
them, so agents get one kind of answer. Only a missing working directory raises.

Example:
    >>> from pathlib import Path
    >>> r = run_command(["echo", "hello"], cwd=Path("."))
    >>> r.returncode, r.stdout
    (0, 'hello\\n')
    >>> run_command("no-such-program --flag", cwd=Path(".")).returncode
    127
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import NotFoundError

__all__ = ["CommandResult", "run_command"]

_CHUNK = 65536


@dataclass(frozen=True)
class CommandResult:
    """What a command did.

    Attributes:
        returncode: the exit status; negative when a signal ended it (``-15`` for
            SIGTERM); 127 when the program was not found, 126 when it could not be run.
        stdout: standard output, decoded as UTF-8 (bad bytes replaced), capped.
        stderr: standard error, likewise.
        timed_out: the command was stopped at the timeout.
        truncated: some output was dropped; the text says where and how much.
        duration_ms: wall time from start to the end of output, in milliseconds.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        """Exited with status 0 in time."""
        return self.returncode == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data (for tool responses and the audit log)."""
        return asdict(self)


class _Capture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.tail_limit
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... ctxnb: {self.dropped} bytes of output dropped ...]\n{tail}"


def run_command(
    cmd: str | list[str],
    *,
    cwd: Path,
    timeout: float = 60,
    shell: bool = False,
    max_output_bytes: int = 64_000,
    env: Mapping[str, str] | None = None,
    redact: Callable[[str], str] | None = None,
    kill_grace: float = 2.0,
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> CommandResult:
    """Run a command with a timeout, capped output and no processes left behind.

    Args:
        cmd: an argument list, or a string: split like a shell would (``shlex``)
            when ``shell`` is False, passed to ``/bin/sh -c`` when it is True.
        cwd: the working directory.
        timeout: seconds before the command and everything it started are stopped.
        shell: run through ``/bin/sh`` (pipes, redirections); off by default.
        max_output_bytes: bytes kept per stream (head and tail halves).
        env: the complete environment for the command (as in :mod:`subprocess`);
            None inherits this process's environment.
        redact: applied to both output texts before they are returned (to hide
            secrets).
        kill_grace: seconds between SIGTERM and SIGKILL.
        wrap: turns the command's argv into the argv to start (a sandbox that runs
            it, see :class:`ctxnb.sandbox.Sandbox`).

    Raises:
        NotFoundError: ``cwd`` is not a directory.

    Example:
        >>> from pathlib import Path
        >>> r = run_command("sleep 5", cwd=Path("."), timeout=0.2)
        >>> r.timed_out, r.returncode < 0
        (True, True)
        >>> run_command("echo token=abc", cwd=Path("."), shell=True,
        ...             redact=lambda s: s.replace("abc", "***")).stdout
        'token=***\\n'
    """
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise NotFoundError(f"working directory {str(cwd)!r} does not exist or is not a directory")
    if max_output_bytes < 2:
        raise ValueError("max_output_bytes must be at least 2")
    if shell:
        argv = ["/bin/sh", "-c", cmd if isinstance(cmd, str) else shlex.join(cmd)]
    elif isinstance(cmd, str):
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            return CommandResult(2, "", f"ctxnb: cannot parse command: {exc}\n")
    else:
        argv = [str(a) for a in cmd]
    if not argv:
        return CommandResult(2, "", "ctxnb: empty command\n")
    if wrap is not None:
        argv = wrap(argv)

    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so the group can be killed
        )
    except FileNotFoundError:
        return CommandResult(127, "", f"ctxnb: command not found: {argv[0]}\n")
    except PermissionError:
        return CommandResult(126, "", f"ctxnb: permission denied: {argv[0]}\n")
    except OSError as exc:
        return CommandResult(126, "", f"ctxnb: cannot run {argv[0]}: {exc.strerror}\n")

    out, err = _Capture(max_output_bytes), _Capture(max_output_bytes)
    timed_out = False
    group_stopped = False
    stopped_at = 0.0
    deadline = start + timeout
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    try:
        while sel.get_map():
            now = time.monotonic()
            if not group_stopped and now >= deadline:
                timed_out = True
                _stop_group(proc, kill_grace)
                group_stopped, stopped_at = True, time.monotonic()
            elif not group_stopped and proc.poll() is not None:
                # The command is done; give late writers a moment, then stop leftovers
                # that hold the pipes open (background jobs it started).
                _drain(sel, 0.1)
                if sel.get_map():
                    _stop_group(proc, kill_grace)
                group_stopped, stopped_at = True, time.monotonic()
                if not sel.get_map():
                    break  # the output is complete: no need to wait on closed pipes
            wait = 0.2 if group_stopped else min(0.05, max(deadline - now, 0.001))
            for key, _ in sel.select(timeout=wait):
                _read_into(sel, key)
            if group_stopped and time.monotonic() > stopped_at + 2.0:
                break  # a process that left our group holds the pipe; stop waiting for it
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
        if proc.poll() is None:
            # The output is closed but the command may still be exiting (or running on
            # with its output redirected): wait for it until the deadline.
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
        # Whatever is left in the group (background jobs) goes with the command.
        _stop_group(proc, kill_grace)
        proc.wait()

    stdout, stderr = out.text(), err.text()
    if redact is not None:
        stdout, stderr = redact(stdout), redact(stderr)
    return CommandResult(
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        truncated=bool(out.dropped or err.dropped),
        duration_ms=int((time.monotonic() - start) * 1000),
    )


def _read_into(sel: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
    data = os.read(key.fd, _CHUNK)
    if data:
        key.data.feed(data)
    else:
        sel.unregister(key.fileobj)


def _drain(sel: selectors.BaseSelector, seconds: float) -> None:
    end = time.monotonic() + seconds
    while sel.get_map():
        left = end - time.monotonic()
        if left <= 0:
            return
        events = sel.select(timeout=left)
        if not events:
            return
        for key, _ in events:
            _read_into(sel, key)


def _stop_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is still alive after ``grace``."""
    pgid = proc.pid  # start_new_session made the child the leader of its own group
    if not _signal_group(pgid, signal.SIGTERM):
        return
    end = time.monotonic() + grace
    while time.monotonic() < end:
        proc.poll()  # reap the leader so it does not count as alive
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member changed its credentials
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies do not count)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():  # no procfs (macOS): ask the kernel, zombies included
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may contain spaces) start after ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
