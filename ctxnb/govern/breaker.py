"""The circuit breaker's counts, kept on disk so that they survive a restart.

After ``threshold`` consecutive failures of one tool, governance refuses that tool until a
human resets it. A Claude Code hook is a new process for every tool call, and a notebook
kernel restarts: counts that lived in memory were forgotten each time, so the breaker
never opened there. :class:`BreakerState` keeps them in ``.ctxnb/breaker.json`` (a
governance file no agent tool may write), updated under a file lock so that concurrent
hook processes lose no count, and replaced atomically so that a crash leaves the old or
the new state, never half of one.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "breaker.json"
    >>> state = BreakerState(path)
    >>> state.record("run_command", failed=True), state.record("run_command", failed=True)
    (1, 2)
    >>> BreakerState(path).get("run_command")  # another process, later
    2
    >>> state.record("run_command", failed=False)
    0
"""

from __future__ import annotations

import _thread  # threading.Lock itself, without importing threading (hook start-up)
import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["BreakerState"]


class BreakerState:
    """Consecutive failure counts per tool, in memory or persisted to ``path``.

    Args:
        path: the JSON file, or ``None`` to keep the counts in memory only.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        # A string for the stat every tool call makes (pathlib costs several times more).
        self._where = os.fspath(path) if path is not None else ""
        self._lock = _thread.allocate_lock()
        self._counts: dict[str, int] = {}
        # Tools opened by trip(): a later success does not close them, only reset().
        self._tripped: set[str] = set()
        self._mtime: int | None = None

    def __repr__(self) -> str:
        return f"BreakerState({str(self.path) if self.path else 'in memory'})"

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _load(self) -> dict[str, int]:
        if self.path is None:
            return self._counts
        try:
            st = os.stat(self._where)
        except FileNotFoundError:
            self._counts, self._tripped, self._mtime = {}, set(), None
            return self._counts
        if st.st_mtime_ns == self._mtime:
            return self._counts
        tripped = self._tripped
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            raw = data.get("failures", {}) if isinstance(data, dict) else {}
            counts = {str(k): int(v) for k, v in raw.items() if int(v) > 0}
            listed = data.get("tripped", []) if isinstance(data, dict) else []
            tripped = {str(t) for t in listed if str(t) in counts}
        except (ValueError, TypeError, AttributeError):
            # An unreadable state must not silently close an open breaker: keep what we
            # knew, and the next write replaces the file with a readable one.
            counts = dict(self._counts)
        self._counts, self._tripped, self._mtime = counts, tripped, st.st_mtime_ns
        return counts

    def _save(self, counts: dict[str, int]) -> None:
        self._counts = counts
        self._tripped = {t for t in self._tripped if t in counts}
        if self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        state: dict[str, object] = {"failures": counts}
        if self._tripped:
            state["tripped"] = sorted(self._tripped)
        tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)
        self._mtime = self.path.stat().st_mtime_ns

    def get(self, tool: str) -> int:
        """Consecutive failures of ``tool`` so far."""
        with self._lock:
            if self.path is None:
                return self._counts.get(tool, 0)
            return self._load().get(tool, 0)

    def tripped(self) -> frozenset[str]:
        """The tools whose breaker :meth:`trip` opened (closed only by :meth:`reset`)."""
        with self._lock:
            self._load()
            return frozenset(self._tripped)

    def counts(self) -> dict[str, int]:
        """Every tool with at least one consecutive failure."""
        with self._lock:
            return dict(self._load())

    def record(self, tool: str, *, failed: bool) -> int:
        """Count a failure (or reset on a success); returns the new count."""
        if not failed:
            # The common case, a success with no failure on record, changes nothing: it
            # needs no file lock. (A failure another process records meanwhile is then
            # simply counted after this success.)
            with self._lock:
                if self._load().get(tool, 0) == 0:
                    return 0
        with self._lock, self._file_lock() if self.path else contextlib.nullcontext():
            counts = dict(self._load())
            if not failed and tool in self._tripped:
                return counts[tool]  # opened by trip(): only a human closes it
            n = counts.get(tool, 0) + 1 if failed else 0
            if n == counts.get(tool, 0):
                return n  # nothing changed: no write
            if n:
                counts[tool] = n
            else:
                counts.pop(tool, None)
            self._save(counts)
            return n

    def trip(self, tool: str, threshold: int) -> int:
        """Open the breaker of ``tool`` now: its count becomes at least ``threshold``
        (what a failure that must stop the tool at once records), and a later success
        does not close it; only :meth:`reset` does. Returns the count.

        Example:
            >>> state = BreakerState()
            >>> state.trip("run_command", 3), state.record("run_command", failed=False)
            (3, 3)
            >>> state.reset(); state.get("run_command")
            0
        """
        with self._lock, self._file_lock() if self.path else contextlib.nullcontext():
            counts = dict(self._load())
            n = max(counts.get(tool, 0), threshold, 1)
            if n != counts.get(tool, 0) or tool not in self._tripped:
                counts[tool] = n
                self._tripped.add(tool)
                self._save(counts)
            return n

    def reset(self, tool: str | None = None) -> None:
        """Close the breaker of one tool, or of every tool."""
        with self._lock, self._file_lock() if self.path else contextlib.nullcontext():
            counts = {} if tool is None else {k: v for k, v in self._load().items() if k != tool}
            self._save(counts)
