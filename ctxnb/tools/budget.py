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

import json
import os
from collections.abc import Iterable
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
    """

    def __init__(
        self,
        limits: BudgetConfig,
        audit_path: str | os.PathLike[str],
        session_id: str,
        *,
        also: Iterable[str] = (),
    ) -> None:
        self.limits = limits
        self.path = os.fspath(audit_path)
        self.session_id = session_id
        self._ids = frozenset({session_id, *also})
        self.used = SessionUsage(session_id)
        self._offset = 0

    def _catch_up(self) -> None:
        """Count the whole lines appended to the log since the last look."""
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


def _exceeded(message: str, key: str) -> PolicyError:
    return PolicyError(
        BUDGET_EXCEEDED,
        message,
        recoverable=False,
        required_action=_RAISE.format(key=f"[budget] {key}"),
    )
