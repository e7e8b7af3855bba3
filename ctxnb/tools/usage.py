"""What each session used, summed from the audit log: reads, writes, tokens, refusals.

The audit log (:mod:`ctxnb.tools.audit`) holds one line per tool call of every door
(the file tools through the API, MCP and the command line; Claude Code's hook). This
module folds those lines into one :class:`SessionUsage` per session: ``ctxnb stats``
prints it. Only the log is read (no store, no pandas), so the figures are those of the
calls as they were made, whatever happened to the files since.

A *read* is a successful call that returned file content (``read_bytes`` in its line);
a *write* is a successful call of a tool that may change files (``mutating``); a
*refusal* is any call that failed, counted by its ``error_code``.

Example:
    >>> lines = [
    ...     {"session_id": "s", "tool": "read_file", "success": True, "read_bytes": 12,
    ...      "read_tokens": 3},
    ...     {"session_id": "s", "tool": "write_file", "success": True, "mutating": True},
    ...     {"session_id": "s", "tool": "write_file", "success": False,
    ...      "error_code": "SCOPE_VIOLATION", "mutating": True},
    ... ]
    >>> u = usage_by_session(lines)["s"]
    >>> u.reads, u.writes, u.read_tokens, u.refusals
    (1, 1, 3, {'SCOPE_VIOLATION': 1})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SessionUsage", "usage_by_session"]


@dataclass
class SessionUsage:
    """The calls of one session, as its audit lines add up.

    Attributes:
        session_id: the session.
        calls: every audited call, refused ones included.
        reads: successful calls that returned file content.
        read_bytes: UTF-8 bytes of file content returned to the model.
        read_tokens: tokens of that content, by the session's token counter.
        writes: successful calls of tools that may change files.
        refusals: failed calls by error code.
    """

    session_id: str
    calls: int = 0
    reads: int = 0
    read_bytes: int = 0
    read_tokens: int = 0
    writes: int = 0
    refusals: dict[str, int] = field(default_factory=dict)

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one audit line of this session."""
        self.calls += 1
        if not record.get("success"):
            code = str(record.get("error_code") or "UNKNOWN")
            self.refusals[code] = self.refusals.get(code, 0) + 1
            return
        if record.get("read_bytes") is not None:
            self.reads += 1
            self.read_bytes += int(record["read_bytes"])
            self.read_tokens += int(record.get("read_tokens") or 0)
        if record.get("mutating"):
            self.writes += 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def usage_by_session(records: Iterable[Mapping[str, Any]]) -> dict[str, SessionUsage]:
    """Audit lines summed per session, in the order each session first appears."""
    out: dict[str, SessionUsage] = {}
    for rec in records:
        sid = str(rec.get("session_id") or "")
        if sid not in out:
            out[sid] = SessionUsage(sid)
        out[sid].add(rec)
    return out
