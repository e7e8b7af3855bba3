"""Per-session budgets: how much file content a session may read, and how many writes.

The limits come from ``[budget]`` in ``ctxnb.toml`` (:class:`~ctxnb.config.BudgetConfig`)
and are enforced by the tool runner (:mod:`ctxnb.tools.call`), where every door's call
passes: the API, ``dispatch``, MCP, the command line. A write past the limit is refused
before it runs; a read is refused after the file is read but before its content is
returned or enters the session's context, when what it would return crosses a limit.
Either way the refusal is ``BUDGET_EXCEEDED``, not recoverable by the agent.

What a session has used is read from the audit log, the record of every call: a new
process on the same session (the command line's next command, a restarted MCP server)
starts where the last one stopped, and each check first reads the lines appended since
the last one, so two processes on one session see each other's calls. (Two calls that
check at the same instant may both pass: the budget bounds use; it is not a lock.)

A process that lives for one call (Claude Code's hook) would read the whole log every
time; given a ``counter`` file it keeps the session's running totals there with the log
offset they reach, and reads only the lines after it. The counter is a cache of the log,
never trusted on its word: it names the sessions it sums, carries a digest of its own
fields and of the 4 KiB of log before its offset, and a counter that is missing, cut,
edited, written for other sessions, or ahead of or out of step with the log (a log
replaced, truncated or rewritten) is set aside and the totals are counted again from
the whole log, the record they come from. What the counter cannot show is a forgery by
someone who can also read the log; the log itself is the budget's ground truth.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb.config import BudgetConfig
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl"
    >>> _ = log.write_text('{"session_id": "s", "success": true, "mutating": true}\\n')
    >>> budget = SessionBudget(BudgetConfig(writes=1), log, "s")
    >>> budget.remaining()
    {'writes': 0}
    >>> try:
    ...     budget.check_write("write_file")
    ... except PolicyError as e:
    ...     print(e.error_code, e.recoverable)
    BUDGET_EXCEEDED False
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PolicyError
from .usage import SessionUsage

if TYPE_CHECKING:
    from ..config import BudgetConfig

__all__ = ["BUDGET_EXCEEDED", "SessionBudget"]

BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
_RAISE = (
    "A human can raise the session's [budget] limit ({key}) in ctxnb.toml, or start a new "
    "session; the agent cannot."
)


class SessionBudget:
    """The budget of one session: its limits and what its audit lines say it used.

    Args:
        limits: the ``[budget]`` settings (any object with their three attributes).
        audit_path: the audit log (``.ctxnb/audit.jsonl``).
        session_id: the session whose lines count.
        also: more session ids whose lines count toward the same budget (a Claude Code
            session's commands are recorded by ``sandbox exec`` as ``claude-code-<id>``).
        counter: a file (under ``.ctxnb/``) to keep the running totals in between
            processes, so that each reads only the log lines after the last one's; see
            the module docstring for how it is checked.

    Attributes:
        recounted: why the counter was set aside and the whole log read, or None.
    """

    def __init__(
        self,
        limits: BudgetConfig,
        audit_path: str | os.PathLike[str],
        session_id: str,
        *,
        also: Iterable[str] = (),
        counter: str | os.PathLike[str] | None = None,
    ) -> None:
        self.limits = limits
        self.path = os.fspath(audit_path)
        self.session_id = session_id
        self._ids = frozenset({session_id, *also})
        self.used = SessionUsage(session_id)
        self._offset = 0
        self.counter = Path(counter) if counter is not None else None
        self.recounted: str | None = None
        self._loaded = False
        self._stale = False  # a counter set aside is replaced even if no line is new

    def _catch_up(self) -> None:
        """Count the whole lines appended to the log since the last look."""
        if not self._loaded:
            self._loaded = True
            if self.counter is not None:
                self._resume()
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line a crash cut short: the audit reader skips it too
            sid = rec.get("session_id") if isinstance(rec, dict) else None
            if isinstance(sid, str) and sid in self._ids:
                self.used.add(rec)
        self._offset += end
        if self.counter is not None and (end or self._stale):
            self._save()

    # -- the counter ---------------------------------------------------------------------

    def _tail(self, offset: int) -> str | None:
        """Digest of the log's 4 KiB before ``offset`` (None: the log is shorter)."""
        try:
            with open(self.path, "rb") as f:
                start = max(0, offset - _TAIL)
                f.seek(start)
                data = f.read(offset - start)
        except FileNotFoundError:
            data = b""
        if len(data) != offset - max(0, offset - _TAIL):
            return None
        return hashlib.sha256(data).hexdigest()

    def _resume(self) -> None:
        """Start from the counter's totals and offset, if it checks out against the log."""
        assert self.counter is not None
        try:
            raw = self.counter.read_bytes()
        except FileNotFoundError:
            return  # the first call of the session: counted from the log, then kept
        except OSError as e:
            self.recounted, self._stale = f"the counter cannot be read ({e.strerror})", True
            return
        why = self._check(raw)
        if why is not None:
            self.recounted, self._stale = why, True
            return
        state = json.loads(raw)
        usage = state["usage"]
        self.used = SessionUsage(
            self.session_id, **{k: usage[k] for k in _TOTALS}, refusals=dict(usage["refusals"])
        )
        self._offset = state["offset"]

    def _check(self, raw: bytes) -> str | None:
        """Why the counter cannot be trusted, or None."""
        try:
            state = json.loads(raw)
        except ValueError:
            return "the counter is not JSON"
        if not isinstance(state, dict) or state.get("version") != 1:
            return "the counter is not a version 1 budget counter"
        body = {k: v for k, v in state.items() if k != "digest"}
        if state.get("digest") != _digest(body):
            return "the counter's digest does not match its fields"
        if state.get("sessions") != sorted(self._ids):
            return "the counter sums other sessions"
        usage, offset = state.get("usage"), state.get("offset")
        if not (
            isinstance(offset, int)
            and _count(offset)
            and isinstance(usage, dict)
            and all(_count(usage.get(k)) for k in _TOTALS)
            and isinstance(usage.get("refusals"), dict)
            and all(isinstance(k, str) and _count(v) for k, v in usage["refusals"].items())
        ):
            return "the counter's fields are not counts"
        if self._tail(offset) != state.get("tail"):
            return "the audit log does not hold what the counter counted"
        return None

    def _save(self) -> None:
        assert self.counter is not None
        u = self.used
        body = {
            "version": 1,
            "sessions": sorted(self._ids),
            "offset": self._offset,
            "tail": self._tail(self._offset),
            "usage": {**{k: getattr(u, k) for k in _TOTALS}, "refusals": dict(u.refusals)},
        }
        state = {**body, "digest": _digest(body)}
        tmp = self.counter.with_name(f".{self.counter.name}.{os.getpid()}.tmp")
        try:
            self.counter.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.counter)  # whole or not at all, whoever reads it
            self._stale = False
        except OSError:
            # Not kept: the next process counts from the log again, slower but exact.
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def remaining(self) -> dict[str, int]:
        """What is left of each limit that is set (never below 0)."""
        self._catch_up()
        used = {"read_bytes": self.used.read_bytes, "read_tokens": self.used.read_tokens,
                "writes": self.used.writes}  # fmt: skip
        out: dict[str, int] = {}
        for key, spent in used.items():
            limit = getattr(self.limits, key)
            if limit is not None:
                out[key] = max(0, limit - spent)
        return out

    def check_write(self, tool: str) -> None:
        """Refuse a write when the session has none left.

        Raises:
            PolicyError: ``BUDGET_EXCEEDED``.
        """
        left = self.remaining()
        if left.get("writes", 1) <= 0:
            raise _exceeded(
                f"{tool}: session {self.session_id!r} has used its budget of "
                f"{self.limits.writes} write(s); nothing was written",
                "writes",
            )

    def check_read(self, tool: str, path: str, nbytes: int, tokens: int) -> None:
        """Refuse a read whose content (``nbytes``, ``tokens``) would cross a limit.

        Raises:
            PolicyError: ``BUDGET_EXCEEDED``; the content is not returned.
        """
        left = self.remaining()
        for key, amount in (("read_bytes", nbytes), ("read_tokens", tokens)):
            if key in left and amount > left[key]:
                unit = "bytes" if key == "read_bytes" else "tokens"
                raise _exceeded(
                    f"{tool} {path}: {amount} {unit} would cross session "
                    f"{self.session_id!r}'s read budget ({left[key]} of "
                    f"{getattr(self.limits, key)} {unit} left); nothing was returned",
                    key,
                )

    def __repr__(self) -> str:
        return f"<SessionBudget {self.session_id!r} remaining={self.remaining()}>"


_TAIL = 4096
_TOTALS = ("calls", "reads", "read_bytes", "read_tokens", "writes")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _digest(body: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _exceeded(message: str, key: str) -> PolicyError:
    return PolicyError(
        BUDGET_EXCEEDED,
        message,
        recoverable=False,
        required_action=_RAISE.format(key=f"[budget] {key}"),
    )
