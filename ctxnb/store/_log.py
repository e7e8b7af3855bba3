"""The store's transaction log: parsing, validating and appending ``txlog`` lines.

Private to :mod:`ctxnb.store.objectstore`. One JSON object per line; a line counts once its
trailing newline is in the file. Appending one line and fsyncing it is the commit
point of every transaction and every compaction.

A small transaction carries its documents in its line (``"op":"txdocs"``) instead of
naming a Parquet segment: one fsync commits it, where a segment costs three (file,
directory, log). Compaction folds those documents into the snapshot like segments.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from typing import TYPE_CHECKING, Any

from .._util.record import FrozenRecord
from ..errors import CorruptStoreError

if TYPE_CHECKING:
    from datetime import datetime

MARKER = "ctxnb-store.json"
TXLOG = "txlog"
WRITER_LOCK = "writer.lock"
# A transaction whose documents' JSON is at most this many bytes is committed inline, in
# its log line (one fsync); a larger one as a Parquet segment (three). Small enough that
# the log stays cheap to read, large enough for a tool's write of a source file.
INLINE_MAX_BYTES = 32 * 1024
# Inline transactions are folded into Parquet once this many wait (ObjectStore.fold).
FOLD_EVERY_TX = 64
# ``[index] compact_after``'s default: compact once more transactions than this wait.
COMPACT_AFTER = 32
# Inline transactions are folded at the latest this many seconds after their commit
# (the default of ObjectStore's ``fold_after``; ``CTXNB_FOLD_AFTER`` overrides it).
FOLD_AFTER_SECONDS = 30.0
FOLD_AFTER_ENV = "CTXNB_FOLD_AFTER"


class Inherit:
    """The type of :data:`INHERIT`: "use the default", kept apart from None ("off")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT = Inherit()


def fold_after_seconds(explicit: float | None | Inherit = INHERIT) -> float | None:
    """The fold interval: ``explicit`` (None: no timer), else ``CTXNB_FOLD_AFTER`` (in
    seconds; ``off`` for none), else :data:`FOLD_AFTER_SECONDS`.

    Raises:
        ConfigError: the environment variable is neither a number of seconds nor ``off``.
    """
    if not isinstance(explicit, Inherit):
        return explicit
    raw = os.environ.get(FOLD_AFTER_ENV, "").strip()
    if not raw:
        return FOLD_AFTER_SECONDS
    if raw.lower() == "off":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        from ..errors import ConfigError

        raise ConfigError(
            f"{FOLD_AFTER_ENV}={raw!r}: give the seconds after which inline transactions "
            "are folded into Parquet (e.g. 30), or 'off'"
        )
    return value


FORMAT_NAME = "ctxnb-store"
FORMAT_VERSION = 5
# The first format whose log may carry inline transactions (``"op":"txdocs"``). A
# format-1 store stays format 1 until its first inline transaction.
INLINE_FORMAT_VERSION = 2
# The first format whose log may carry folds (``"op":"fold"``), marked the same way.
FOLD_FORMAT_VERSION = 3
# The first format whose log may start with a base line (``"op":"base"``): the log was
# rotated at a compaction, and older transactions are in an archive file.
ROTATE_FORMAT_VERSION = 4
# The first format whose base line may name an archive of attachments (``att``): the
# attachments of the lines a rotation dropped, kept as the anchors of another log.
ATT_FORMAT_VERSION = 5

SEG_RE = re.compile(r"seg-(\d{12})-([0-9a-f]{8})\.parquet")
SNAP_RE = re.compile(r"snap-(\d{12})-([0-9a-f]{8})\.parquet")
DOCS_RE = re.compile(r"snap-(\d{12})-([0-9a-f]{8})\.docs\.arrow")
TXS_RE = re.compile(r"txs-(\d{12})-([0-9a-f]{8})\.arrow")
ATT_RE = re.compile(r"att-(\d{12})-([0-9a-f]{8})\.jsonl")
TMP_PREFIX = ".tmp-"


# One encoder, made once: ``json.dumps`` with these options builds one per call (an
# encoder keeps no state between calls, so the text is the same).
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def dumps(value: Any) -> str:
    """JSON for stored values: compact, key order kept, NaN refused."""
    return _DUMPS(value)


# datetime is imported by the two functions that convert, not by the module: a process
# the log answers alone (an unchanged re-index, the hook) never converts a time.
def to_us(dt: datetime) -> int:
    from datetime import UTC, datetime, timedelta

    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    from datetime import UTC, datetime, timedelta

    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


class TxEntry(FrozenRecord):
    """A committed transaction as the log records it."""

    __slots__ = ("tx", "time_us", "count", "file", "size", "docs", "sha")

    tx: int
    time_us: int
    count: int
    file: str | None  # relative to the store directory; None: empty or inline
    size: int
    # The documents of an inline (``txdocs``) transaction; None for the others, and for
    # an inline one that a later compaction in the same read already covers.
    docs: list[dict[str, Any]] | None
    # SHA-256 (hex) of the segment's bytes; None for inline transactions and for lines
    # written before segments carried one.
    sha: str | None

    def __init__(
        self,
        tx: int,
        time_us: int,
        count: int,
        file: str | None,
        size: int,
        docs: list[dict[str, Any]] | None = None,
        sha: str | None = None,
    ) -> None:
        self._fill(tx, time_us, count, file, size, docs, sha)


class CompactEntry(FrozenRecord):
    """A committed compaction: ``file`` and ``docs`` replace everything up to ``upto``."""

    __slots__ = ("upto", "file", "size", "docs", "docs_size", "rows", "replaces", "sha", "foot")

    upto: int
    file: str
    size: int
    docs: str
    docs_size: int
    rows: int
    replaces: tuple[str, ...]
    sha: str | None  # SHA-256 of the snapshot Parquet file (None: written before it was kept)
    foot: str | None  # SHA-256 of its footer, checked at every open (the whole file: verify)

    def __init__(
        self,
        upto: int,
        file: str,
        size: int,
        docs: str,
        docs_size: int,
        rows: int,
        replaces: tuple[str, ...],
        sha: str | None = None,
        foot: str | None = None,
    ) -> None:
        self._fill(upto, file, size, docs, docs_size, rows, replaces, sha, foot)


class FoldEntry(FrozenRecord):
    """A committed fold: ``file`` holds the inline transactions ``first..upto``.

    Nothing is replaced: the documents stay in their ``txdocs`` lines too, so a fold
    changes no reader's answer; it puts those versions in Parquet for outside readers.
    """

    __slots__ = ("first", "upto", "file", "size", "rows", "sha")

    first: int
    upto: int
    file: str
    size: int
    rows: int
    sha: str | None  # SHA-256 of the segment's bytes (None: written before it was kept)

    def __init__(
        self, first: int, upto: int, file: str, size: int, rows: int, sha: str | None = None
    ) -> None:
        self._fill(first, upto, file, size, rows, sha)


class BaseEntry(FrozenRecord):
    """The first line of a rotated log: what the log's earlier generations committed.

    ``gen`` counts rotations. Transactions ``1..upto`` are in the archive ``txs`` (the
    last committed at ``last_us``, with ``last_count`` documents); ``compact`` is the
    compaction that covers them all. ``att`` (format 5, optional) is the archive of the
    attachments those transactions' lines carried (see :mod:`ctxnb.store._attach`), of
    ``att_size`` bytes with SHA-256 ``att_sha``.
    """

    __slots__ = (
        "gen",
        "upto",
        "last_us",
        "last_count",
        "txs",
        "txs_size",
        "txs_crc",
        "compact",
        "att",
        "att_size",
        "att_sha",
    )

    gen: int
    upto: int
    last_us: int
    last_count: int
    txs: str
    txs_size: int
    txs_crc: int  # CRC-32 of the archive's bytes: it is checked when it is read
    compact: CompactEntry
    att: str | None
    att_size: int
    att_sha: str | None

    def __init__(
        self,
        gen: int,
        upto: int,
        last_us: int,
        last_count: int,
        txs: str,
        txs_size: int,
        txs_crc: int,
        compact: CompactEntry,
        att: str | None = None,
        att_size: int = 0,
        att_sha: str | None = None,
    ) -> None:
        self._fill(
            gen, upto, last_us, last_count, txs, txs_size, txs_crc, compact, att, att_size, att_sha
        )


Entry = TxEntry | CompactEntry | FoldEntry | BaseEntry


# Every line written since format 3 starts with its op and a CRC-32 of the rest of the
# line: a flipped bit in a document or a time is refused instead of read as committed.
_SEALED = re.compile(rb'\{"op":"[a-z]+","crc":"([0-9a-f]{8})",')


def _sealed(op: str, rest: bytes) -> bytes:
    """``{"op":…,"crc":…,`` + ``rest`` (the line's other keys and its closing brace)."""
    return b'{"op":"%s","crc":"%08x",%s\n' % (op.encode(), zlib.crc32(rest), rest)


def _json_line(op: str, obj: dict[str, Any]) -> bytes:
    return _sealed(op, json.dumps(obj, separators=(",", ":")).encode()[1:])


def tx_line(e: TxEntry, attached: list[bytes] | None = None, ids: list[str] | None = None) -> bytes:
    """A transaction's line; with ``attached``, also the ids of its documents (``ids``:
    what an attachment may name, as a ``txdocs`` line's documents show them)."""
    obj: dict[str, Any] = {"tx": e.tx, "t": e.time_us, "n": e.count, "file": e.file}
    obj["size"] = e.size
    if e.sha is not None:
        obj["sha"] = e.sha
    if not attached:
        return _json_line("tx", obj)
    obj["ids"] = ids or []
    body = json.dumps(obj, separators=(",", ":")).encode()[1:-1]
    return _sealed("tx", body + _attach(attached) + b"}")


def compact_line(e: CompactEntry) -> bytes:
    obj = {
        "upto": e.upto,
        "file": e.file,
        "size": e.size,
        "docs": e.docs,
        "docs_size": e.docs_size,
        "rows": e.rows,
        "replaces": list(e.replaces),
    }
    _digests(obj, e.sha, e.foot)
    return _json_line("compact", obj)


def _digests(obj: dict[str, Any], sha: str | None, foot: str | None = None) -> None:
    if sha is not None:
        obj["sha"] = sha
    if foot is not None:
        obj["foot"] = foot


def fold_line(e: FoldEntry) -> bytes:
    obj = {"first": e.first, "upto": e.upto, "file": e.file, "size": e.size, "rows": e.rows}
    _digests(obj, e.sha)
    return _json_line("fold", obj)


def base_line(e: BaseEntry) -> bytes:
    # "tx" and "t" first, as a transaction's line has them: the standard-library
    # appender reads the last transaction of a rotated log from this header.
    c = e.compact
    obj = {
        "tx": e.upto,
        "t": e.last_us,
        "gen": e.gen,
        "n": e.last_count,
        "txs": e.txs,
        "txs_size": e.txs_size,
        "txs_crc": e.txs_crc,
        "file": c.file,
        "size": c.size,
        "docs": c.docs,
        "docs_size": c.docs_size,
        "rows": c.rows,
    }
    _digests(obj, c.sha, c.foot)
    if e.att is not None:
        obj.update(att=e.att, att_size=e.att_size, att_sha=e.att_sha)
    return _json_line("base", obj)


TXDOCS_PREFIX = b'{"op":"txdocs",'
_COMPACT_PREFIX = b'{"op":"compact",'
_DOCS_KEY = b',"docs":['


def txdocs_line(
    tx: int, time_us: int, blobs: list[bytes], attached: list[bytes] | None = None
) -> bytes:
    """The log line of an inline transaction; ``blobs`` are its documents' JSON.

    The header comes first and ``docs`` last (before ``attached``, when the line
    carries attachments), so that a reader can take a line's tx id without decoding its
    documents (see :func:`parse`). JSON text never holds a raw newline, so the line
    stays one line.
    """
    head = b'"tx":%d,"t":%d,"n":%d' % (tx, time_us, len(blobs))
    docs = _DOCS_KEY + b",".join(blobs) + b"]"
    return _sealed("txdocs", head + docs + (_attach(attached) if attached else b"") + b"}")


ATTACHED_KEY = b',"attached":['


def _attach(attached: list[bytes]) -> bytes:
    """``,"attached":[…]``: JSON objects a transaction's line carries for another log
    (see :mod:`ctxnb.store._attach`); last in the line, after the documents, so that an
    attachment's keys can never be taken for the line's own."""
    return ATTACHED_KEY + b",".join(attached) + b"]"


def _compacted_upto(lines: list[bytes]) -> int:
    """The ``upto`` of the last compaction among ``lines`` (0: none, or unreadable).

    Only a hint: every line is still parsed and checked in order.
    """
    for raw in reversed(lines):
        if raw.startswith(_COMPACT_PREFIX):
            try:
                upto = json.loads(raw)["upto"]
            except (ValueError, KeyError, TypeError):
                return 0
            return upto if type(upto) is int else 0
    return 0


def _header(raw: bytes) -> Any:
    """An inline transaction's line without its documents (their count is kept)."""
    cut = raw.find(_DOCS_KEY)
    if cut < 0:
        return None
    try:
        obj = json.loads(raw[:cut] + b"}")
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def parse(data: bytes, *, log_path: str, first_line: int, next_tx: int) -> list[Entry]:
    """Parse complete lines (``data`` ends at a newline). Tx ids must run on densely.

    The documents of an inline transaction that a later compaction line in ``data``
    covers are not decoded (the snapshot holds them): opening a store with a long log
    reads each such line's short header only.
    """
    out: list[Entry] = []
    lineno = first_line
    lines = data.split(b"\n")[:-1]
    covered = _compacted_upto(lines)
    for raw in lines:
        lineno += 1
        sealed = _SEALED.match(raw)
        if sealed is not None and int(sealed.group(1), 16) != zlib.crc32(raw[sealed.end() :]):
            raise CorruptStoreError(
                f"{log_path} line {lineno} fails its checksum: its bytes changed after it "
                f"was committed ({raw[:120]!r}). Restore the log from a backup",
                path=log_path,
            )
        try:
            obj = None
            if covered and raw.startswith(TXDOCS_PREFIX):
                head = _header(raw)
                if head is not None and type(head.get("tx")) is int and head["tx"] <= covered:
                    obj = head
            if obj is None:
                obj = json.loads(raw)
            entry = _entry(obj)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptStoreError(
                f"{log_path} line {lineno} is not a valid log entry ({exc}): {raw[:120]!r}. "
                "The transaction log is damaged; restore the store directory from a backup",
                path=log_path,
            ) from exc
        if isinstance(entry, BaseEntry):
            if lineno != 1 or next_tx != 1:
                raise CorruptStoreError(
                    f"{log_path} line {lineno} is a base line, which only a log's first "
                    "line can be; the transaction log is damaged",
                    path=log_path,
                )
            next_tx = entry.upto + 1
        elif isinstance(entry, TxEntry):
            if entry.tx != next_tx:
                raise CorruptStoreError(
                    f"{log_path} line {lineno}: transaction {entry.tx} follows "
                    f"{next_tx - 1}; the transaction log is damaged",
                    path=log_path,
                )
            next_tx += 1
        elif entry.upto >= next_tx:
            what = "compaction" if isinstance(entry, CompactEntry) else "fold"
            raise CorruptStoreError(
                f"{log_path} line {lineno}: {what} up to tx {entry.upto} names a "
                "transaction that is not in the log; the transaction log is damaged",
                path=log_path,
            )
        out.append(entry)
    return out


def _entry(obj: Any) -> Entry:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    op = obj["op"]
    if op == "tx":
        file = obj["file"]
        if file is not None:
            _check_name(file, "segments/", SEG_RE)
        return TxEntry(
            tx=_int(obj["tx"]),
            time_us=_int(obj["t"]),
            count=_int(obj["n"]),
            file=file,
            size=_int(obj["size"]),
            sha=_digest(obj, "sha"),
        )
    if op == "compact":
        _check_name(obj["file"], "snapshots/", SNAP_RE)
        _check_name(obj["docs"], "snapshots/", DOCS_RE)
        replaces = obj["replaces"]
        for name in replaces:
            if not isinstance(name, str) or not (
                _matches(name, "segments/", SEG_RE)
                or _matches(name, "snapshots/", SNAP_RE)
                or _matches(name, "snapshots/", DOCS_RE)
            ):
                raise ValueError(f"bad file name {name!r}")
        return CompactEntry(
            upto=_int(obj["upto"]),
            file=obj["file"],
            size=_int(obj["size"]),
            docs=obj["docs"],
            docs_size=_int(obj["docs_size"]),
            rows=_int(obj["rows"]),
            replaces=tuple(replaces),
            sha=_digest(obj, "sha"),
            foot=_digest(obj, "foot"),
        )
    if op == "fold":
        _check_name(obj["file"], "segments/", SEG_RE)
        first, upto = _int(obj["first"]), _int(obj["upto"])
        if not 1 <= first <= upto:
            raise ValueError(f"bad fold range {first}..{upto}")
        return FoldEntry(
            first=first,
            upto=upto,
            file=obj["file"],
            size=_int(obj["size"]),
            rows=_int(obj["rows"]),
            sha=_digest(obj, "sha"),
        )
    if op == "base":
        _check_name(obj["txs"], "snapshots/", TXS_RE)
        _check_name(obj["file"], "snapshots/", SNAP_RE)
        _check_name(obj["docs"], "snapshots/", DOCS_RE)
        upto = _int(obj["tx"])
        if upto < 1 or _int(obj["gen"]) < 1:
            raise ValueError(f"bad base line: tx {upto}, gen {obj['gen']}")
        compact = CompactEntry(
            upto=upto,
            file=obj["file"],
            size=_int(obj["size"]),
            docs=obj["docs"],
            docs_size=_int(obj["docs_size"]),
            rows=_int(obj["rows"]),
            replaces=(),
            sha=_digest(obj, "sha"),
            foot=_digest(obj, "foot"),
        )
        return BaseEntry(
            gen=obj["gen"],
            upto=upto,
            last_us=_int(obj["t"]),
            last_count=_int(obj["n"]),
            txs=obj["txs"],
            txs_size=_int(obj["txs_size"]),
            txs_crc=_int(obj["txs_crc"]),
            compact=compact,
            **_att_fields(obj),
        )
    if op == "txdocs":
        count = _int(obj["n"])
        docs = obj.get("docs")  # absent when only the header was read (see parse)
        if docs is not None:
            if not isinstance(docs, list) or len(docs) != count:
                raise ValueError(f"'docs' must be a list of {count} documents")
            for doc in docs:
                if not (
                    isinstance(doc, dict)
                    and type(doc.get("xt/id")) is str
                    and type(doc.get("type")) is str
                ):
                    raise ValueError("an inline document lacks a string 'xt/id' or 'type'")
        return TxEntry(
            tx=_int(obj["tx"]),
            time_us=_int(obj["t"]),
            count=count,
            file=None,
            size=0,
            docs=docs,
        )
    raise ValueError(f"unknown op {op!r}")


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _att_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A base line's archive of attachments (format 5), when it names one."""
    if "att" not in obj:
        return {}
    _check_name(obj["att"], "snapshots/", ATT_RE)
    sha = _digest(obj, "att_sha")
    if sha is None:
        raise ValueError("the archive of attachments has no 'att_sha'")
    return {"att": obj["att"], "att_size": _int(obj["att_size"]), "att_sha": sha}


def _digest(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or _HEX64.fullmatch(v) is None:
        raise ValueError(f"{key!r} must be a SHA-256 in hex, not {v!r}")
    return v


def _int(v: Any) -> int:
    if type(v) is not int:
        raise ValueError(f"expected an integer, got {v!r}")
    return v


def _matches(name: Any, folder: str, pattern: re.Pattern[str]) -> bool:
    return (
        isinstance(name, str)
        and name.startswith(folder)
        and pattern.fullmatch(name[len(folder) :]) is not None
    )


def _check_name(name: Any, folder: str, pattern: re.Pattern[str]) -> None:
    # Log entries name files; refusing anything else keeps a damaged log from
    # pointing the store outside its directory.
    if not _matches(name, folder, pattern):
        raise ValueError(f"bad file name {name!r}")


def append(fd: int, line: bytes, *, sync: bool = True) -> None:
    """Write one line completely and fsync it (unless ``sync`` is false: the caller
    fsyncs it later): the commit point."""
    view = memoryview(line)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    if sync:
        os.fsync(fd)
