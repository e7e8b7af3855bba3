"""The trace ledger's hash chain: every record names the hash of the line before it.

Each record that :class:`ctxnb.govern.ledger.TraceLedger` appends carries
``metadata.prev_hash``: ``"sha256:"`` and the SHA-256 of the previous line's bytes
exactly as they are in the file (without the newline), or of nothing for the first
line. ``metadata`` is the Agent Trace schema's place for such data, so records stay
valid. A *head* file next to the ledger (``agent_trace.jsonl.head``) holds the byte
length of the ledger and the hash of its last line after every append, so that a
line removed from the end is noticed too.

:func:`ctxnb.govern.ledgercheck.verify_ledger` walks the file (through the verifier every
reader of the ledger uses): a line edited, inserted, deleted or moved breaks the link of
the line after it (or the head), and the first broken line is named. A
line a crash cut short (not JSON) is kept in the chain: the next record links to it as
it is, so it is reported but is not a forgery. Records written before ctxnb kept the
chain (no ``prev_hash``) are accepted up to the first chained one.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb.govern.ledger import TraceLedger, build_trace_record
    >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
    >>> for n in (1, 2):
    ...     ledger.append(build_trace_record(
    ...         file_path=f"f{n}.py", ranges=[], new_text="", intent_id="I",
    ...         session_id=None, model_id=None, repo_root=None))
    >>> from ctxnb.govern.ledgercheck import verify_ledger
    >>> verify_ledger(ledger.path).ok
    True
"""

from __future__ import annotations

import errno
import functools
import json
import os
import stat
from pathlib import Path

from .._util.record import Record
from ..errors import PolicyError
from ..hashing import sha256_hex

__all__ = ["ChainReport", "line_hash"]

PREV_KEY = "prev_hash"
_HEAD_SUFFIX = ".head"


def line_hash(line: bytes) -> str:
    """``"sha256:<hex>"`` of one line's bytes (without its newline)."""
    return "sha256:" + sha256_hex(line)


GENESIS = line_hash(b"")


def head_path(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + _HEAD_SUFFIX)


@functools.lru_cache(maxsize=64)
def _head_name(ledger: Path) -> str:
    """:func:`head_path` as a string (a function of the path alone; opened on every
    append, where pathlib's with_name and str cost more than the open)."""
    return os.fspath(head_path(ledger))


def last_line(fd: int, size: int) -> bytes:
    """The file's last line, complete or cut (b"" for an empty file)."""
    return tail(fd, size)[0]


def tail(fd: int, size: int) -> tuple[bytes, bool]:
    """The file's last line, complete or cut (b"" for an empty file), and whether the
    file ends with a newline (False for an empty one).

    One ``pread`` when the last line fits in the first chunk read (a ledger's lines do):
    the newline test and the line come from the same bytes.
    """
    if not size:
        return b"", False
    chunk = 4096
    start = max(0, size - chunk)
    data = os.pread(fd, size - start, start)
    if not data:  # the file shrank under us: as an empty one
        return b"", False
    ended = data.endswith(b"\n")
    if ended:
        data = data[:-1]
    pos = start
    while True:
        cut = data.rfind(b"\n")
        if cut >= 0:
            return data[cut + 1 :], ended
        if pos == 0:
            return data, ended
        chunk *= 2
        start = max(0, pos - chunk)
        data = os.pread(fd, pos - start, start) + data
        pos = start


def not_regular(path: Path) -> PolicyError:
    """The refusal of a trace file that is not a regular file (a FIFO, a link...)."""
    return PolicyError(
        "PATH_DENIED",
        f"{path} is not a regular file; ctxnb never writes trace lines through a link, "
        "a FIFO or a device (rule: not-a-regular-file)",
        recoverable=False,
        required_action=f"Replace it by a regular file: {path}.",
        details={"path": str(path), "rule": "not-a-regular-file"},
    )


def open_head(ledger: Path) -> int:
    """The head file, opened to be written (the caller holds the ledger's lock).

    Raises:
        PolicyError: ``PATH_DENIED`` when it is not a regular file: a FIFO planted
            there would block the open forever (with the ledger's lock held) or take
            the writes, and a link would send them elsewhere.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(_head_name(ledger), flags, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENXIO):  # a link; a FIFO nobody reads
            raise
        raise not_regular(head_path(ledger)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise not_regular(head_path(ledger))
    return fd


def write_head(ledger: Path, end: int, last: bytes, fd: int | None = None) -> None:
    """Record the ledger's length and last line (the caller holds the ledger's lock),
    through ``fd`` when the caller opened it with :func:`open_head`.

    Fixed width, overwritten in place: no rename, so one ``pwrite`` per append. It
    is evidence, not data: not fsynced, so after a power loss it may lag the ledger,
    which :func:`verify_ledger` accepts.
    """
    body = b"%020d %s\n" % (end, line_hash(last).encode())
    if fd is not None:
        os.pwrite(fd, body, 0)
        return
    fd = open_head(ledger)
    try:
        os.pwrite(fd, body, 0)
    finally:
        os.close(fd)


def _read_regular(path: Path) -> bytes | None:
    """A file's bytes; None when it is not a regular file (never waits on a FIFO)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def _read_head(ledger: Path) -> tuple[int, str] | None:
    try:
        raw = _read_regular(head_path(ledger))
    except FileNotFoundError:
        return None
    if raw is None:
        return (-1, "")
    parts = raw.split(b"\n", 1)[0].split(b" ")
    if len(parts) != 2 or not parts[0].isdigit():
        return (-1, "")
    return int(parts[0]), parts[1].decode("ascii", "replace")


def _prev_of(raw: bytes) -> str | None:
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    meta = rec.get("metadata") if isinstance(rec, dict) else None
    got = meta.get(PREV_KEY) if isinstance(meta, dict) else None
    return got if isinstance(got, str) else None


def _diagnose(lines: list[bytes], n: int, got: str) -> tuple[int, str]:
    """The first bad line when line ``n``'s link (``got``) does not match line n-1."""
    hashes = [line_hash(raw) for raw in lines]
    before = hashes[n - 2] if n > 1 else GENESIS
    if n < len(lines) and _prev_of(lines[n]) == before:
        return n, f"line {n} was inserted: line {n + 1} links to line {n - 1}"
    if got == GENESIS or got in hashes:
        return n, f"line {n} was moved or copied here: it links to another line than {n - 1}"
    return (
        max(1, n - 1),
        f"line {max(1, n - 1)} was edited, or a line after it was deleted: line {n} "
        f"links to {got[:19]}…, which no line of the ledger hashes to",
    )


class ChainReport(Record):
    """What :func:`verify_ledger` found.

    Attributes:
        ok: the chain is intact.
        lines: lines in the ledger.
        first_bad_line: 1-based number of the first line that breaks the chain.
        message: what is wrong there (or a summary when ``ok``).
        unreadable: lines that are not records (cut by a crash), kept in the chain.
        unchained: leading records written before ctxnb kept the chain.
    """

    __slots__ = ("ok", "lines", "first_bad_line", "message", "unreadable", "unchained")
    ok: bool
    lines: int
    first_bad_line: int | None
    message: str
    unreadable: list[int]
    unchained: int

    def __init__(
        self,
        ok: bool,
        lines: int,
        first_bad_line: int | None = None,
        message: str = "",
        unreadable: list[int] | None = None,
        unchained: int = 0,
    ) -> None:
        self._fill(
            ok, lines, first_bad_line, message, [] if unreadable is None else unreadable, unchained
        )
