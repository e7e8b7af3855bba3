"""The audit log: one JSON line per tool call in ``.ctxnb/audit.jsonl``.

Each record has ``ts`` (ISO 8601 UTC), ``caller``, ``session_id``, ``tool``, ``args``,
``duration_ms``, ``success``, ``error_code``, ``before_sha256``, ``after_sha256``,
``intent_id``, ``mutating`` (the tool may change files) and, for a read, ``read_bytes``
and ``read_tokens``: what the read returned to the model (UTF-8 bytes, and tokens by
the session's counter); :mod:`ctxnb.tools.usage` sums them per session. A command that
used the sandbox's network proxy adds ``network``, its requests with what the proxy
decided (``host``, ``port``, ``method``, ``allowed``, ``reason``).
The log is append-only: each record is written with one ``write`` on a descriptor
opened with ``O_APPEND``, so concurrent writers never interleave inside a line and a
crash loses at most the last, partial line, which the reader skips and counts.

Example:
    >>> import tempfile, pathlib
    >>> log = AuditLog(pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl")
    >>> log.append({"tool": "read_file", "success": True})
    >>> [r["tool"] for r in log.records()]
    ['read_file']
"""

from __future__ import annotations

import _thread  # threading's lock, without importing threading (hook start-up)
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._util.jsonl import SkippedLine, iter_jsonl
from ..redaction.redactor import redact_data, redact_text

__all__ = ["AuditLog", "audit_args", "audit_record"]


class AuditLog:
    """Append-only JSON-lines audit log.

    Args:
        path: the log file (created with its parent directory on first append).
        fsync: fsync after every record (durable across power loss, slower); a killed
            process loses nothing either way, since each record is one ``write``.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.skipped_lines = 0
        self._fd: int | None = None
        self._lock = _thread.allocate_lock()

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
        return self._fd

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (``ts`` is added when missing)."""
        rec = record if "ts" in record else {"ts": datetime.now(UTC).isoformat(), **record}
        # Every caller's arguments (a write's content, a command line) are redacted here,
        # at the one door to the log.
        rec = redact_data(rec)
        line = (json.dumps(rec, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            fd = self._open()
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every whole record, oldest first; a line a crash cut short is skipped and counted."""
        self.skipped_lines = 0
        try:
            f = self.path.open("rb")
        except FileNotFoundError:
            return
        skipped: list[SkippedLine] = []
        with f:
            for _, record in iter_jsonl(f, skipped=skipped):
                self.skipped_lines = len(skipped)
                yield record
        self.skipped_lines = len(skipped)

    def frame(self) -> Any:
        """The log as a pandas DataFrame (``attrs["skipped_lines"]`` says what was skipped)."""
        import pandas as pd

        rows = list(self.records())
        df = pd.DataFrame(rows)
        if "ts" in df:
            df["ts"] = pd.to_datetime(df["ts"], utc=True, format="ISO8601")
        df.attrs["skipped_lines"] = self.skipped_lines
        return df

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


def audit_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as recorded: long texts are cut (the file versions keep the content)."""
    out: dict[str, Any] = {}
    for k, v in args.items():
        if isinstance(v, str) and len(v) > 500:
            # Redacted whole, then cut: a secret cut in half is no longer recognisable.
            out[k] = redact_text(v)[:200] + f"… [{len(v)} chars]"
        elif hasattr(v, "rel") and hasattr(v, "root"):  # a SafePath
            out[k] = v.rel
        else:
            out[k] = v
    return out


def audit_record(
    *,
    ts: datetime | None = None,
    caller: str,
    session_id: str | None,
    tool: str,
    args: dict[str, Any],
    duration_ms: float,
    success: bool,
    error_code: str | None,
    before: str | None = None,
    after: str | None = None,
    intent_id: str | None = None,
    network: list[dict[str, Any]] | None = None,
    mutating: bool = False,
    read_bytes: int | None = None,
    read_tokens: int | None = None,
) -> dict[str, Any]:
    """The one audit line of a tool call, whichever engine ran it.

    ``network`` (a command's requests to the sandbox's proxy, each allowed or refused
    with its reason) is added only when there were any.

    Example:
        >>> rec = audit_record(caller="claude-code", session_id="s", tool="Edit",
        ...                    args={"file_path": "a.py"}, duration_ms=1.23456,
        ...                    success=True, error_code=None)
        >>> rec["tool"], rec["duration_ms"], rec["args"]
        ('Edit', 1.235, {'file_path': 'a.py'})
    """
    out: dict[str, Any] = {
        "ts": (ts or datetime.now(UTC)).isoformat(),
        "caller": caller,
        "session_id": session_id,
        "tool": tool,
        "args": audit_args(args),
        "duration_ms": round(duration_ms, 3),
        "success": success,
        "error_code": error_code,
        "before_sha256": before,
        "after_sha256": after,
        "intent_id": intent_id,
        "mutating": mutating,
        "read_bytes": read_bytes,
        "read_tokens": read_tokens,
    }
    if network:
        out["network"] = network
    return out
