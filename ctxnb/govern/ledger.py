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
import re
import stat
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import quote, unquote

from .._jsonl import SkippedLine, iter_jsonl
from ..errors import PolicyError, StoreError
from ..hashing import sha256_hex
from . import chain
from ._gitrev import _find_git_root, _head_revision_at, git_head_revision
from ._tracecheck import SCHEMA_RESOURCE, check_record, load_schema, validate_record

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

AGENT_TRACE_VERSION = "0.1.0"
INTENT_URN_PREFIX = "urn:ctxnb:intent:"
SESSION_URN_PREFIX = "urn:ctxnb:session:"

ContributorType = Literal["ai", "human", "mixed", "unknown"]

# Keys build_trace_record owns in ``metadata``; extra_metadata may not override them.
_RESERVED_METADATA = ("intent_id", "session_id", "tool", "mutation_class")


def normalized_content_hash(text: str) -> str:
    """``"sha256:<hex>"`` of a range's text, normalized for position-independent tracking.

    The steps of ``docs/agent-trace-mapping.md``: ``\\r\\n`` and a lone ``\\r``
    become ``\\n``; trailing spaces and tabs are stripped from every line; the lines are
    joined with ``\\n``. One final newline ends the last line rather than adding an
    empty one, so ``"a\\n"`` and ``"a"`` hash alike while ``"a\\n\\n"`` (a range
    whose last line is blank) does not.

    Example:
        >>> normalized_content_hash("a = 1  \\r\\nb = 2\\r\\n") == normalized_content_hash(
        ...     "a = 1\\nb = 2")
        True
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]  # a final newline ends the last line; it is not an extra empty line
    norm = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return "sha256:" + sha256_hex(norm.encode("utf-8"))


# Lines as the ranges count them (ctxnb.tools.patching.changed_line_ranges): a line ends
# at "\n" or "\r\n"; a lone "\r" stays inside its line.
_LINE_END = re.compile(r"\r?\n")


def build_trace_record(
    *,
    file_path: str,
    ranges: list[tuple[int, int]],
    new_text: str,
    intent_id: str,
    session_id: str | None,
    contributor_type: ContributorType = "ai",
    model_id: str | None,
    repo_root: Path | None,
    tool: str | None = None,
    mutation_class: str | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    clock: Callable[[], datetime] | None = None,
    conversation_url: str | None = None,
) -> dict[str, Any]:
    """One Agent Trace 0.1.0 record for a change to one file.

    Args:
        file_path: the file, relative to ``repo_root`` (or absolute inside it).
            Stored relative to the git repository root when ``repo_root`` lies in a
            repository, else relative to ``repo_root``.
        ranges: 1-based inclusive ``(start_line, end_line)`` spans of ``new_text``
            that the change produced.
        new_text: the file's content after the change.
        intent_id: the intent the change was made under.
        session_id: the ctxnb session, if any.
        contributor_type: who wrote the ranges.
        model_id: the model, in models.dev form (``anthropic/claude-sonnet-4``).
        repo_root: the workspace root; ``vcs`` is filled from its git ``HEAD`` and
            left out when it is None, not in a repository or the repository has no
            commit yet.
        tool: the tool call that made the change (``write_file``, ``apply_patch``).
        mutation_class: ``AST_REFACTOR`` or ``INTENT_EVOLUTION``.
        extra_metadata: more keys for ``metadata``; may not reuse ctxnb's keys.
        clock: returns the current time (timezone-aware; naive means UTC).
        conversation_url: where the conversation that made the change can be read
            (a URL, or a ``file://`` URI of a transcript), when the client gives one;
            it becomes the conversation's ``url``.

    Raises:
        ValueError: a range is outside ``new_text`` or reversed, the path leaves
            ``repo_root``, or ``extra_metadata`` reuses a reserved key.

    Example:
        >>> from datetime import datetime, UTC
        >>> rec = build_trace_record(
        ...     file_path="src/a.py", ranges=[(1, 2)], new_text="a = 1\\nb = 2\\n",
        ...     intent_id="INT-1", session_id="s1", model_id="anthropic/claude-sonnet-4",
        ...     repo_root=None, clock=lambda: datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC))
        >>> rec["timestamp"], rec["files"][0]["conversations"][0]["related"][0]["url"]
        ('2025-01-02T03:04:05.000Z', 'urn:ctxnb:intent:INT-1')
    """
    timestamp = _timestamp(clock)

    lines = _LINE_END.split(new_text)
    if lines and lines[-1] == "":
        lines.pop()
    out_ranges = []
    for start, end in ranges:
        if not (1 <= start <= end <= len(lines)):
            raise ValueError(
                f"range ({start}, {end}) is not a 1-based inclusive span of the new text "
                f"({len(lines)} lines)"
            )
        out_ranges.append(
            {
                "start_line": start,
                "end_line": end,
                # Each line with its newline: a range ending in a blank line keeps it.
                "content_hash": normalized_content_hash(
                    "".join(line + "\n" for line in lines[start - 1 : end])
                ),
            }
        )

    contributor: dict[str, Any] = {"type": contributor_type}
    if model_id:
        contributor["model_id"] = model_id
    related = [{"type": "intent", "url": INTENT_URN_PREFIX + quote(intent_id, safe="")}]
    if session_id:
        related.append({"type": "session", "url": SESSION_URN_PREFIX + quote(session_id, safe="")})

    rel_path = file_path.replace("\\", "/")
    revision = None
    if repo_root is not None:
        repo_root = Path(repo_root)
        rel_path, git_root = _relative_path(file_path, repo_root)
        revision = _head_revision_at(git_root) if git_root is not None else None

    metadata: dict[str, Any] = {"intent_id": intent_id}
    if session_id:
        metadata["session_id"] = session_id
    if tool:
        metadata["tool"] = tool
    if mutation_class:
        metadata["mutation_class"] = mutation_class
    for key, value in (extra_metadata or {}).items():
        if key in _RESERVED_METADATA:
            raise ValueError(f"extra_metadata may not set {key!r}; pass it as an argument")
        metadata[key] = value

    record = _envelope(timestamp, revision)
    record["files"] = [
        {
            "path": rel_path,
            "conversations": [
                {
                    **({"url": conversation_url} if conversation_url else {}),
                    "contributor": contributor,
                    "ranges": out_ranges,
                    "related": related,
                }
            ],
        }
    ]
    record["metadata"] = metadata
    return record


def build_event_record(
    *,
    metadata: Mapping[str, Any],
    repo_root: Path | None,
    clock: Callable[[], datetime] | None = None,
) -> dict[str, Any]:
    """An Agent Trace record that changed no file (``files: []``), e.g. a human decision.

    Example:
        >>> rec = build_event_record(metadata={"intent_id": "INT-1"}, repo_root=None)
        >>> rec["files"], rec["metadata"]["intent_id"], check_record(rec)
        ([], 'INT-1', [])
    """
    revision = git_head_revision(repo_root) if repo_root is not None else None
    record = _envelope(_timestamp(clock), revision)
    record["files"] = []
    record["metadata"] = dict(metadata)
    return record


def _timestamp(clock: Callable[[], datetime] | None) -> str:
    now = (clock or (lambda: datetime.now(UTC)))()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _uuid4() -> str:
    """A random (version 4) UUID, as ``str(uuid.uuid4())`` gives, without importing
    :mod:`uuid` (which loads :mod:`platform`): the Claude Code hook writes records too.

    Example:
        >>> import uuid
        >>> u = uuid.UUID(_uuid4())
        >>> (u.version, u.variant == uuid.RFC_4122, str(u) == str(u).lower())
        (4, True, True)
    """
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _envelope(timestamp: str, revision: str | None) -> dict[str, Any]:
    """The fields every record has: version, id, time, vcs (when known), tool."""
    from .._version import __version__

    record: dict[str, Any] = {
        "version": AGENT_TRACE_VERSION,
        "id": _uuid4(),
        "timestamp": timestamp,
    }
    if revision:
        record["vcs"] = {"type": "git", "revision": revision}
    record["tool"] = {"name": "ctxnb", "version": __version__}
    return record


def _relative_path(file_path: str, repo_root: Path) -> tuple[str, Path | None]:
    """The path relative to the git root (or to repo_root outside git), and the git root."""
    # os.path on strings: this runs for every trace record, and pathlib costs several
    # times more for the same answer.
    root = os.path.realpath(repo_root)
    full = os.path.normpath(os.path.join(root, file_path))
    git_root = _find_git_root(root)
    base = git_root or root
    rel = os.path.relpath(full, base) if full.startswith(base) else ".."
    if rel == ".." or rel.startswith("../"):
        raise ValueError(f"{file_path!r} is outside the repository root {base}")
    if rel == ".":
        raise ValueError(f"{file_path!r} names the repository root, not a file")
    return PurePosixPath(rel).as_posix(), Path(git_root) if git_root else None


def _record_id(record: Mapping[str, Any], key: str, prefix: str) -> str | None:
    meta = record.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get(key), str) and meta[key]:
        return str(meta[key])
    for f in record.get("files") or []:
        for conv in f.get("conversations") or []:
            for rel in conv.get("related") or []:
                url = rel.get("url", "")
                if isinstance(url, str) and url.startswith(prefix):
                    return unquote(url.removeprefix(prefix))
    return None


def record_intent_id(record: Mapping[str, Any]) -> str | None:
    """The intent a record was made under: ``metadata.intent_id``, else the first
    ``urn:ctxnb:intent:`` URL in a conversation's ``related`` list.

    Example:
        >>> record_intent_id({"metadata": {"intent_id": "INT-7"}})
        'INT-7'
    """
    return _record_id(record, "intent_id", INTENT_URN_PREFIX)


def record_session_id(record: Mapping[str, Any]) -> str | None:
    """The session a record was made in: ``metadata.session_id``, else the first
    ``urn:ctxnb:session:`` URL in a conversation's ``related`` list.

    Example:
        >>> record_session_id({"files": [{"conversations": [{"related": [
        ...     {"type": "session", "url": "urn:ctxnb:session:s%201"}]}]}]})
        's 1'
    """
    return _record_id(record, "session_id", SESSION_URN_PREFIX)


def _durable() -> None:
    """The line is already durable."""


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
                from .._fsync import fsync_release_later

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
        from ..redaction import redact_data

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
        parent = self.path.parent
        parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            folder = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                fd = os.open(self.path.name, flags, 0o644, dir_fd=folder)
            finally:
                os.close(folder)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise PolicyError(
                "PATH_DENIED",
                f"the trace ledger {self.path} (or its folder) is a symbolic link; ctxnb "
                "never appends through one (rule: symlink)",
                recoverable=False,
                required_action=f"Replace the link by the real file or folder: {self.path}.",
                details={"path": str(self.path), "rule": "symlink"},
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
        last = chain.last_line(fd, size)
        lines = []
        for redacted in prepared:
            # The hash chain (see ctxnb.govern.chain): a link to the line before.
            redacted["metadata"][chain.PREV_KEY] = chain.line_hash(last)
            last = json.dumps(
                redacted, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode("utf-8")
            lines.append(last)
        data = b"\n".join(lines) + b"\n"
        # A crash mid-write may have left a line without its newline; start ours on
        # a fresh line so the cut line cannot swallow it.
        if size and os.pread(fd, 1, size - 1) != b"\n":
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
        size = path.stat().st_size
    except FileNotFoundError:
        return [], 0
    with open(path, "rb") as fh:
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read()
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
