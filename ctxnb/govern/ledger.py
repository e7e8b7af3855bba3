"""The Agent Trace ledger: ``.orchestration/agent_trace.jsonl``.

Every governed write appends one record, valid against the Agent Trace 0.1.0 schema
shipped in ``ctxnb/data/agent-trace-0.1.0.schema.json``. The file is append-only and
never rewritten: a record is written with a single ``write`` on a descriptor opened
with ``O_APPEND`` (under an advisory ``flock`` shared by ctxnb writers) and then
fsynced, so concurrent writers never interleave and a crash can at worst leave a cut
last line, which readers skip and report in ``TraceLedger.skipped_lines``. A governed
``write_file``'s record is made durable in its store transaction's log line instead,
and its ledger line is not fsynced: :mod:`ctxnb.govern.tracewal` restores it from there.

A record made by :func:`build_trace_record` looks like::

    {"version": "0.1.0", "id": "<uuid4>", "timestamp": "2025-01-01T12:00:00.000Z",
     "vcs": {"type": "git", "revision": "<HEAD sha>"},
     "tool": {"name": "ctxnb", "version": "0.1.0"},
     "files": [{"path": "src/app.py", "conversations": [{
         "contributor": {"type": "ai", "model_id": "anthropic/claude-sonnet-4"},
         "ranges": [{"start_line": 3, "end_line": 5, "content_hash": "sha256:<hex>"}],
         "related": [{"type": "intent", "url": "urn:ctxnb:intent:INT-001"},
                     {"type": "session", "url": "urn:ctxnb:session:s-1"}]}]}],
     "metadata": {"intent_id": "INT-001", "session_id": "s-1", "tool": "write_file",
                  "mutation_class": "INTENT_EVOLUTION"}}

``content_hash`` is position-independent: ``"sha256:"`` followed by the SHA-256 of the
range's text after normalization (``\\r\\n`` and ``\\r`` become ``\\n``, trailing
whitespace is stripped from every line, lines are joined with ``\\n``), so the same code
moved elsewhere, or re-saved with other line endings, keeps its hash.

``jsonschema`` is imported only when a record is validated, so importing this module
stays cheap for hook processes.

Example:
    >>> import tempfile, pathlib
    >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
    >>> rec = build_trace_record(file_path="a.py", ranges=[(1, 1)], new_text="x = 1\\n",
    ...                          intent_id="INT-1", session_id=None, model_id=None,
    ...                          repo_root=None)
    >>> ledger.append(rec)
    >>> [r["files"][0]["path"] for r in ledger.records(intent_id="INT-1")]
    ['a.py']
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._util.jsonl import SkippedLine, iter_jsonl
from ..errors import PolicyError, StoreError
from . import chain
from ._gitrev import git_head_revision
from ._tracecheck import SCHEMA_RESOURCE, check_record, load_schema, validate_record
from ._tracerecord import (
    AGENT_TRACE_VERSION,
    ContributorType,
    build_event_record,
    build_trace_record,
    normalized_content_hash,
    record_intent_id,
    record_session_id,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: O_APPEND alone keeps lines whole
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "AGENT_TRACE_VERSION",
    "ContributorType",
    "SCHEMA_RESOURCE",
    "SkippedLine",
    "TraceLedger",
    "build_event_record",
    "build_trace_record",
    "check_record",
    "git_head_revision",
    "ledger_html",
    "load_schema",
    "normalized_content_hash",
    "record_intent_id",
    "record_session_id",
    "validate_record",
]


def _durable() -> None:
    """The line is already durable."""


# What json.dumps(..., ensure_ascii=False, separators=(",", ":"), allow_nan=False) builds
# on every call (it keeps no encoder for arguments other than the defaults).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dump_record(record: Mapping[str, Any]) -> bytes:
    """A record's JSON as a ledger line (and a store log's attachment) holds it."""
    return _ENCODER.encode(record).encode("utf-8")


class TraceLedger:
    """The append-only ``agent_trace.jsonl`` file.

    Reading never fails on a damaged line: a line cut by a crash, or otherwise not a
    JSON object, is skipped and listed in :attr:`skipped_lines` for the last read.

    Example:
        >>> import tempfile, pathlib
        >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
        >>> for n in (1, 2, 3):
        ...     ledger.append(build_trace_record(
        ...         file_path=f"f{n}.py", ranges=[], new_text="", intent_id="I",
        ...         session_id=None, model_id=None, repo_root=None))
        >>> [r["files"][0]["path"] for r in ledger.tail(2)]
        ['f2.py', 'f3.py']
    """

    def __init__(self, path: str | Path, *, validate: bool = True) -> None:
        self.path = Path(path)
        self._strings: tuple[Path, str, str] | None = None
        self.validate = validate
        self.skipped_lines: list[SkippedLine] = []

    def _repr_html_(self) -> str:
        return ledger_html(self)

    def __repr__(self) -> str:
        return f"TraceLedger({str(self.path)!r})"

    def append(self, record: Mapping[str, Any]) -> None:
        """Validate a record and append it as one line, durably.

        Raises:
            StoreError: the record is not valid (nothing is written).
        """
        self._append(record, wait=True)

    def append_later(self, record: Mapping[str, Any]) -> Callable[[], None]:
        """Append like :meth:`append`, but fsync the line on a background thread.

        Returns as soon as the line is written. The caller goes on working and calls the
        returned function, which waits for the fsync (and raises its error), before it
        reports the change as done.

        Example:
            >>> import tempfile, pathlib
            >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
            >>> durable = ledger.append_later(build_trace_record(
            ...     file_path="a.py", ranges=[], new_text="", intent_id="I",
            ...     session_id=None, model_id=None, repo_root=None))
            >>> durable()  # returns once the line is on disk
            >>> len(ledger.tail(5))
            1
        """
        return self._append(record, wait=False)

    def append_many_later(self, records: Sequence[Mapping[str, Any]]) -> Callable[[], None]:
        """Append ``records`` in order, as one write under one lock, with one fsync on a
        background thread (a command's commit: one trace line per file it changed).

        Returns the function that waits for the fsync, as :meth:`append_later` does.
        Nothing is written unless every record is valid.
        """
        return self._append(records, wait=False)

    def _append(
        self, records: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, wait: bool
    ) -> Callable[[], None]:
        batch = [records] if isinstance(records, Mapping) else list(records)
        if not batch:
            return _durable
        prepared = self.prepare(batch)
        fd = self.open_locked()
        try:
            self.write_locked(fd, prepared)
            if not wait:
                # Imported here: the Claude Code hook process appends with wait=True and
                # does not pay for a thread pool's imports.
                from .._util.fsync import fsync_release_later

                # The lock is held until the fsync is done: the next writer's check
                # above sees these lines whole either way.
                durable = fsync_release_later(fd)
                fd = -1
                return durable
            os.fsync(fd)
        finally:
            if fd >= 0:
                os.close(fd)  # also releases the lock
        return _durable

    def prepare(self, batch: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The records as they are written: validated, redacted, ``metadata`` a new dict.

        Raises:
            StoreError: a record is not valid.
        """
        if self.validate:
            for record in batch:
                problems = check_record(record)
                if problems:
                    raise StoreError(f"not a valid Agent Trace 0.1.0 record: {'; '.join(problems)}")
        # The trace is a log others read (and the MCP trace resource shows to a model):
        # a secret in a record's free text (an intent name, a command's output) is redacted.
        # Imported here: compiling the rules costs the Claude Code hook process start-up.
        from ..redaction.redactor import redact_data

        prepared = []
        for record in batch:
            redacted = redact_data(record)
            meta = redacted.get("metadata")
            redacted["metadata"] = dict(meta) if isinstance(meta, Mapping) else {}
            prepared.append(redacted)
        return prepared

    def open_locked(self) -> int:
        """The ledger opened for appending, under its lock (closing it releases it).

        Raises:
            PolicyError: ``PATH_DENIED`` when the ledger or its folder is a symbolic
                link (``.orchestration/`` may be writable by an agent: ctxnb never
                appends through a link it could have planted).
        """
        parent, name = self._where()
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            try:
                folder = os.open(parent, dir_flags)
            except FileNotFoundError:
                # Made only when missing: it is there on every append but the first,
                # and mkdir would cost a failed mkdir and a stat each time.
                Path(parent).mkdir(parents=True, exist_ok=True)
                folder = os.open(parent, dir_flags)
            try:
                fd = os.open(name, flags, 0o644, dir_fd=folder)
            finally:
                os.close(folder)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            link = exc.errno == errno.ELOOP or _is_link(parent)  # else a file is there
            what, rule = (
                ("a symbolic link", "symlink") if link else ("not a folder", "not-a-directory")
            )
            raise PolicyError(
                "PATH_DENIED",
                f"the trace ledger {self.path} (or its folder) is {what}; ctxnb never "
                f"appends through it (rule: {rule})",
                recoverable=False,
                required_action=f"Replace it by the real file or folder: {self.path}.",
                details={"path": str(self.path), "rule": rule},
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            # A FIFO planted there would take the lines away (opened to read and write,
            # it does not even wait for a reader).
            os.close(fd)
            raise chain.not_regular(self.path)
        if fcntl is not None:
            # Writers of one ledger take turns so that the check below sees whole
            # lines; the lock dies with its process, so a crash cannot leave it held.
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        return fd

    def _where(self) -> tuple[str, str]:
        """The ledger's folder and name as strings, worked out again when ``path`` is
        set to another path."""
        where = self._strings
        if where is None or where[0] is not self.path:
            where = self._strings = (self.path, os.fspath(self.path.parent), self.path.name)
        return where[1], where[2]

    def checkpoint(self) -> tuple[int, str | None]:
        """The ledger's length and the hash of its last line, read under its lock.

        A true statement about the ledger as it is now, and so forever (it is only
        appended to): a store transaction that carries it pins every line before that
        offset (see :mod:`ctxnb.govern.ledgercheck`). The hash is None when the ledger
        is empty, or its last line is cut (a crash) or it is not a regular file.
        """
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags)
        except OSError:
            return 0, None  # missing (the first record), or a link: no line to pin
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return 0, None
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)  # a writer's lines are whole under it
            size = os.fstat(fd).st_size
            last, ended = chain.tail(fd, size)
            return size, chain.line_hash(last) if ended else None
        finally:
            os.close(fd)  # also releases the lock

    def write_locked(self, fd: int, prepared: Sequence[dict[str, Any]]) -> None:
        """Append prepared records as one write, each chained to the line before it
        (the caller holds the lock, see :meth:`open_locked`); not fsynced."""
        size = os.fstat(fd).st_size
        # Opened first: a head ctxnb may not write refuses the append before its lines.
        head = chain.open_head(self.path)
        try:
            self._write_lines(fd, size, prepared, head)
        finally:
            os.close(head)

    def _write_lines(
        self, fd: int, size: int, prepared: Sequence[dict[str, Any]], head: int
    ) -> None:
        last, ended = chain.tail(fd, size)
        lines = []
        for redacted in prepared:
            # The hash chain (see ctxnb.govern.chain): a link to the line before.
            redacted["metadata"][chain.PREV_KEY] = chain.line_hash(last)
            last = dump_record(redacted)
            lines.append(last)
        data = b"\n".join(lines) + b"\n"
        # A crash mid-write may have left a line without its newline; start ours on
        # a fresh line so the cut line cannot swallow it.
        if size and not ended:
            data = b"\n" + data
        written = os.write(fd, data)
        while written < len(data):  # only on a full disk or a signal; finish the line
            written += os.write(fd, data[written:])
        chain.write_head(self.path, size + len(data), last, head)

    def records(
        self, intent_id: str | None = None, file: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every readable record, oldest first, optionally filtered.

        Args:
            intent_id: only records made under this intent.
            file: only records that touch this path (relative, as stored).

        Raises:
            PolicyError: ``PATH_DENIED`` when the ledger is not a regular file.
        """
        self.skipped_lines = []
        want_file = file.replace("\\", "/").removeprefix("./") if file else None
        try:
            # Not blocking: opened to read, a FIFO planted there would wait for a writer.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise chain.not_regular(self.path)
        with os.fdopen(fd, "rb") as fh:
            for _, record in iter_jsonl(fh, skipped=self.skipped_lines):
                if intent_id is not None and record_intent_id(record) != intent_id:
                    continue
                if want_file is not None and not any(
                    f.get("path") == want_file for f in record.get("files") or []
                ):
                    continue
                yield record

    def tail(self, n: int = 10) -> list[dict[str, Any]]:
        """The last ``n`` readable records, oldest first."""
        if n <= 0:
            return []
        return list(deque(self.records(), maxlen=n))


# -- HTML ------------------------------------------------------------------------------------
_TAIL_BYTES = 256 * 1024  # how far back ledger_html reads: bounded, whatever the file size


def _tail_lines(path: Path, max_bytes: int = _TAIL_BYTES) -> tuple[list[bytes], int]:
    """The complete lines in the last ``max_bytes`` of a file, and the file size."""
    try:
        # Not blocking, and a regular file only: a FIFO planted as the ledger would hang
        # a notebook's display of it (the writers refuse one, see open_locked).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], 0
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [], 0
        size = st.st_size
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read(size - start)
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first line read is probably a partial one
    return [ln for ln in lines if ln.strip()], size


def ledger_html(ledger: TraceLedger | str | os.PathLike[str], *, n: int = 20) -> str:
    """The last ``n`` records of a trace ledger as an HTML table.

    Reads only the end of the file, so it stays fast on a ledger of any size.

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb.govern.ledger import TraceLedger, build_trace_record
        >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
        >>> ledger.append(build_trace_record(file_path="a.py", ranges=[(1, 1)],
        ...     new_text="x\\n", intent_id="INT-1", session_id=None, model_id=None,
        ...     repo_root=None))
        >>> "INT-1" in ledger_html(ledger)
        True
    """
    from .._html import esc, html_table  # the redaction rules load only when shown

    path = Path(getattr(ledger, "path", ledger))  # type: ignore[arg-type]
    lines, size = _tail_lines(path)
    rows: list[dict[str, Any]] = []
    # Newest first, until n readable records; a cut last line is the analysis readers'
    # to report.
    for _, rec in iter_jsonl(reversed(lines)):
        if len(rows) >= n:
            break
        files = [f for f in rec.get("files") or [] if isinstance(f, dict)]
        meta: dict[str, Any] = rec["metadata"] if isinstance(rec.get("metadata"), dict) else {}
        rows.append(
            {
                "time": rec.get("timestamp"),
                "intent": record_intent_id(rec),
                "files": ", ".join(str(f.get("path")) for f in files[:3])
                + (" …" if len(files) > 3 else ""),
                "tool": meta.get("tool"),
                "mutation": meta.get("mutation_class"),
            }
        )
    rows.reverse()
    head = (
        f"<div><b>TraceLedger</b> {esc(str(path))} ({size:,} bytes)"
        f"<br><small>last {len(rows)} records</small>"
    )
    if not rows:
        return head + "<p><i>no records</i></p></div>"
    return head + html_table(rows, ["time", "intent", "files", "tool", "mutation"]) + "</div>"


def _is_link(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False
