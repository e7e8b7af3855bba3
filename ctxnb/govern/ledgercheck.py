"""The one verifier every reader of the trace ledger goes through.

``ctxnb why``, :func:`ctxnb.analysis.load_trace` (and the trace widget built on it), the
OpenTelemetry export and ``ctxnb trace verify`` read ``.orchestration/agent_trace.jsonl``
through :func:`check_ledger`, which gives each line a verdict from two kinds of evidence:

* **the hash chain** (:mod:`ctxnb.govern.chain`): every record links to the hash of the
  line before it, and the head file names the ledger's length and last line. A line
  edited, inserted, deleted or moved breaks a link; both lines of a broken link are
  marked, since the chain alone cannot tell which of the two was changed;
* **the anchors outside the ledger**: a governed ``write_file`` commits its record in the
  store's log line with its file version (:mod:`ctxnb.govern.tracewal`); a compaction's
  rotation moves the copy to the store's archive of attachments
  (:mod:`ctxnb.store._attach`), so it outlives the log line. A ledger line whose record
  has a copy there must equal it (apart from ``prev_hash``, and a ``version_id`` that
  must name that transaction), so an edit whose following hashes and head were
  recomputed is still caught; a record the store holds and the ledger lacks is reported
  as missing (deleted, or lost in a crash; ``trace verify`` puts it back);
* **the checkpoints** (:class:`Checkpoint`): every copy also holds the ledger's length
  and last line's hash when the record was prepared, and every rotation one more. The
  ledger is only appended to, so each stays true, and with the chain it pins every line
  before it: a reorder, an insertion, a deletion or an edit there, chain recomputed or
  not, is caught, records with no copy of their own included.

Verdicts (:data:`INTEGRITY`), per record:

``verified``
    the chain holds around it and it equals its copy in the store's log;
``chained``
    the chain holds around it, but the store holds no copy to compare it with (an event
    or a command's record): an edit that recomputes the chain and the head goes
    unnoticed here only after the newest checkpoint;
``unchained``
    written before ctxnb kept the chain, and not in the log;
``tampered``
    it breaks the chain, differs from its copy in the store, repeats another line's
    record id, lies past the end the head file recorded, or lies where a checkpoint no
    longer matches the ledger.

What an attacker who can write ``.orchestration/`` or ``.ctxnb/`` can and cannot forge
is spelled out in ``docs/agent-trace-mapping.md``.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb.govern.ledger import TraceLedger, build_trace_record
    >>> ledger = TraceLedger(pathlib.Path(tempfile.mkdtemp()) / "agent_trace.jsonl")
    >>> for n in (1, 2):
    ...     ledger.append(build_trace_record(
    ...         file_path=f"f{n}.py", ranges=[], new_text="", intent_id="I",
    ...         session_id=None, model_id=None, repo_root=None))
    >>> check = check_ledger(ledger.path)
    >>> check.ok, [check.integrity[n] for n, _ in check.records]
    (True, ['chained', 'chained'])
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._util.record import FrozenRecord
from ..errors import PolicyError, TamperedTraceError
from . import chain

__all__ = [
    "INTEGRITY",
    "Anchor",
    "Anchors",
    "Checkpoint",
    "LedgerCheck",
    "check_data",
    "check_ledger",
    "store_anchors",
    "verify_ledger",
]

VERIFIED, CHAINED, UNCHAINED, TAMPERED = "verified", "chained", "unchained", "tampered"
INTEGRITY = (VERIFIED, CHAINED, UNCHAINED, TAMPERED)
KIND = "agent-trace"  # the attachment kind tracewal writes (kept here: no import of it)
HEAD_KIND = "agent-trace-head"  # a checkpoint alone, kept by a rotation
# A line's link, when the line is not a record: it is kept in the chain as it is.
NOT_A_RECORD = object()


class Anchor(FrozenRecord):
    """A record's copy in the store's log: the transaction that committed it with the
    version of object ``oid``, and the record as ctxnb prepared it."""

    __slots__ = ("tx", "oid", "record", "at", "head")
    tx: int
    oid: str
    record: dict[str, Any]
    at: int | None
    head: str | None

    def __init__(
        self,
        tx: int,
        oid: str,
        record: dict[str, Any],
        at: int | None = None,
        head: str | None = None,
    ) -> None:
        self._fill(tx, oid, record, at, head)

    def __hash__(self) -> int:
        return hash((self.tx, self.oid, self.record.get("id")))


class Checkpoint(FrozenRecord):
    """What the ledger was when store transaction ``tx`` was prepared: ``at`` bytes long,
    its last line hashing to ``head``. The ledger is only appended to, so this stays
    true: with the chain, it pins every line before ``at``."""

    __slots__ = ("tx", "at", "head")
    tx: int
    at: int
    head: str

    def __init__(self, tx: int, at: int, head: str) -> None:
        self._fill(tx, at, head)


class Anchors(dict[str, list[Anchor]]):
    """The records' copies in the store (by record id), and the ledger checkpoints the
    store committed (:attr:`checkpoints`, in commit order)."""

    def __init__(self) -> None:
        super().__init__()
        self.checkpoints: list[Checkpoint] = []


def store_anchors(store_dir: str | os.PathLike[str] | None) -> Anchors:
    """The trace records in the store's log and its archive of rotated ones, by record
    id, with the ledger checkpoints they carry (empty without a store).

    Only what tracewal's restore would trust counts: a complete line whose checksum
    holds, an attachment of the trace kind naming a document of that transaction.

    Raises:
        CorruptStoreError: the archive of rotated records is missing or damaged (then
            nothing before the last rotation could be checked).
    """
    out = Anchors()
    if store_dir is None or not os.path.isdir(store_dir):
        return out
    from ..store._attach import attached_lines  # only readers that anchor pay for it

    for line in attached_lines(store_dir, archived=True):
        for att in line.attached:
            if not isinstance(att, dict):
                continue
            kind, at, head = att.get("kind"), att.get("at"), att.get("head")
            pin = None
            if type(at) is int and at > 0 and isinstance(head, str):
                # A ledger that had lines then, its last one whole.
                pin = Checkpoint(line.tx, at, head)
            if kind == HEAD_KIND and pin is not None:
                out.checkpoints.append(pin)
            if kind != KIND:
                continue
            oid, record = att.get("oid"), att.get("record")
            if not isinstance(oid, str) or oid not in line.doc_ids or not isinstance(record, dict):
                continue
            rid = record.get("id")
            if isinstance(rid, str):
                if pin is not None:
                    out.checkpoints.append(pin)
                at_ = at if type(at) is int else None
                head_ = head if pin is not None else None
                out.setdefault(rid, []).append(Anchor(line.tx, oid, record, at_, head_))
    return out


def default_store_dir(ledger: Path) -> Path | None:
    """The store beside a workspace's ledger (``<root>/.ctxnb/store``), if it is one."""
    if ledger.parent.name != ".orchestration":
        return None
    return ledger.parent.parent / ".ctxnb" / "store"


def _without_link(record: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """The record without ``metadata.prev_hash`` and ``version_id``, and the version id."""
    rec = dict(record)
    meta = rec.get("metadata")
    version = None
    if isinstance(meta, Mapping):
        meta = dict(meta)
        meta.pop(chain.PREV_KEY, None)
        version = meta.pop("version_id", None)
        rec["metadata"] = meta
    return rec, version


def _matches(record: Mapping[str, Any], anchor: Anchor) -> bool:
    """Whether a ledger line's record is its copy in the log.

    Equal apart from the link and the version: ``version_id`` must name the anchor's
    object (its transaction is not compared: a copy of the same attachment committed
    again later, by a replay into the log, names another one). The copy is compared as
    it is first, then as restoring writes it (redacted again): ctxnb's own attachments
    are redacted already, so the second, slower comparison runs only for a record
    restored from an attachment that was not.
    """
    mine, version = _without_link(record)
    if not isinstance(version, str) or version.partition("@")[0] != anchor.oid:
        return False
    theirs, _ = _without_link(anchor.record)
    if mine == theirs:
        return True
    from ..redaction.redactor import redact_data

    return bool(mine == _without_link(redact_data(anchor.record))[0])


class LedgerCheck:
    """What :func:`check_ledger` found, line by line.

    Attributes:
        path: the ledger.
        lines: lines in the ledger (a cut or damaged line included).
        records: ``(line number, record)`` of every readable record, oldest first (empty
            when the caller parsed the lines itself, see :func:`check_data`).
        integrity: line number → verdict (see :data:`INTEGRITY`), for every record.
        reasons: line number → why the line is ``tampered``.
        problems: ``(line number, message)`` of everything wrong, in ledger order; a
            problem of the ledger as a whole (its head) is numbered
            one past the last line.
        missing: records the store's log holds and the ledger lacks: deleted, or lost in
            a crash before their line was written; ``ctxnb trace verify`` (and every
            recorder's first governed write) restores them from the log.
        unreadable: lines that are not records (cut by a crash), kept in the chain.
        unchained: leading records written before ctxnb kept the chain.
        first_bad_line, message: the first problem as ``trace verify`` names it (the
            chain's own diagnosis of its first broken link), or a summary when ``ok``.
    """

    def __init__(self, path: Path, lines: int) -> None:
        self.path = path
        self.lines = lines
        self.records: list[tuple[int, dict[str, Any]]] = []
        self.integrity: dict[int, str] = {}
        self.reasons: dict[int, str] = {}
        self.problems: list[tuple[int, str]] = []
        self.missing: list[Anchor] = []
        self.unreadable: list[int] = []
        self.unchained = 0
        self.first_bad_line: int | None = None
        self.message = ""
        # Set when the ledger is not a regular file (a FIFO, a device): nothing was read.
        self.refused: PolicyError | None = None

    def __repr__(self) -> str:
        return f"LedgerCheck({str(self.path)!r}, ok={self.ok}, lines={self.lines})"

    @property
    def ok(self) -> bool:
        """No line was changed (a record only :attr:`missing` does not count: restoring
        puts it back)."""
        return not self.problems

    @property
    def tampered(self) -> list[int]:
        """The lines whose verdict is ``tampered``, in order."""
        return sorted(n for n, v in self.integrity.items() if v == TAMPERED)

    def verdict(self, line: int) -> str:
        """The verdict of the record on ``line``."""
        return self.integrity[line]

    def _bad(self, n: int, why: str) -> None:
        self.problems.append((n, why))
        if n in self.integrity:
            self.integrity[n] = TAMPERED
            self.reasons.setdefault(n, why)
        if self.first_bad_line is None:
            self.first_bad_line, self.message = n, why

    def summary(self) -> str:
        """One paragraph: the verdicts counted, then every problem."""
        counts = {v: 0 for v in INTEGRITY}
        for v in self.integrity.values():
            counts[v] += 1
        head = f"{self.lines} lines: " + ", ".join(f"{counts[v]} {v}" for v in INTEGRITY)
        if self.unreadable:
            head += f"; unreadable (cut by a crash): {self.unreadable}"
        if self.missing:
            head += (
                f"; {len(self.missing)} record(s) in the store's log are not in the ledger "
                "(deleted, or lost in a crash; `ctxnb trace verify` restores them)"
            )
        return "\n".join([head, *(f"line {n}: {msg}" for n, msg in self.problems)])

    def raise_if_tampered(self) -> None:
        """Raise when anything is wrong.

        Raises:
            TamperedTraceError: a line was changed; the message names every problem
                and the fix.
        """
        if self.ok:
            return
        shown = "; ".join(f"line {n}: {msg}" for n, msg in self.problems[:5])
        more = len(self.problems) - 5
        raise TamperedTraceError(
            f"{self.path} was changed outside ctxnb: {shown}"
            + (f" (and {more} more)" if more > 0 else "")
            + ". Run `ctxnb trace verify` for the full report; restore the ledger from a "
            "copy you trust, or read it with the tampered lines marked instead of raising",
            path=str(self.path),
            lines=self.tampered,
        )


def _read(path: Path) -> bytes | None:
    try:
        return chain._read_regular(path)
    except FileNotFoundError:
        return b""


def split_lines(data: bytes) -> list[bytes]:
    """A ledger's lines as the chain counts them: split on ``\\n``, the empty piece after
    the last newline dropped."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def parse_line(raw: bytes) -> tuple[dict[str, Any] | None, Any]:
    """A line's record (None when it is not one) and its link (see :func:`check_data`)."""
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        return None, NOT_A_RECORD
    if not isinstance(rec, dict):
        return None, NOT_A_RECORD
    meta = rec.get("metadata")
    got = meta.get(chain.PREV_KEY) if isinstance(meta, dict) else None
    if got is not None and not isinstance(got, str):
        got = ""  # a link to nothing a line hashes to
    return rec, got


def check_ledger(
    path: str | os.PathLike[str],
    *,
    store_dir: str | os.PathLike[str] | None = None,
    anchors: Mapping[str, Sequence[Anchor]] | None = None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> LedgerCheck:
    """Read and check a ledger: every record with its verdict.

    Every line is parsed (its link is in it), but only the records ``keep`` accepts are
    kept in :attr:`LedgerCheck.records` (all by default): ``why`` keeps one file's, and
    a large ledger's other records are not held in memory at once.

    Args:
        path: the ledger (``.orchestration/agent_trace.jsonl``).
        store_dir: the store whose log anchors the records; by default the workspace's
            (``.ctxnb/store`` beside ``.orchestration/``), when there is one.
        anchors: the anchors already read (:func:`store_anchors`); wins over
            ``store_dir``.
        keep: which records to keep in :attr:`LedgerCheck.records`.

    Example:
        >>> import pathlib, tempfile
        >>> check_ledger(pathlib.Path(tempfile.mkdtemp()) / "none.jsonl").ok
        True
    """
    ledger = Path(path)
    data = _read(ledger)
    if data is None:
        out = LedgerCheck(ledger, 0)
        out.refused = chain.not_regular(ledger)
        out._bad(1, str(out.refused))
        return out
    raws = split_lines(data)
    if anchors is None:
        anchors = store_anchors(store_dir if store_dir is not None else default_store_dir(ledger))
    links: list[Any] = []
    ids: list[str | None] = []
    kept: dict[int, dict[str, Any]] = {}
    # JSON makes no reference cycles, but every record parsed counts towards the cyclic
    # collector's next pass, which walks all the records held so far: on a large ledger
    # those passes cost more than the parsing. Paused for the loop, as it was.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for n, raw in enumerate(raws, 1):
            rec, link = parse_line(raw)
            links.append(link)
            rid = rec.get("id") if rec is not None else None
            ids.append(rid if isinstance(rid, str) else None)
            # Held only when asked for or compared with the log.
            if rec is not None and (keep is None or keep(rec) or rid in anchors):
                kept[n] = rec
    finally:
        if collecting:
            gc.enable()
    out = check_data(ledger, data, raws, links, ids=ids, anchors=anchors, records=kept)
    out.records = [(n, rec) for n, rec in kept.items() if keep is None or keep(rec)]
    return out


def check_data(
    ledger: Path,
    data: bytes,
    raws: Sequence[bytes],
    links: Sequence[Any],
    *,
    ids: Sequence[str | None] | None = None,
    anchors: Mapping[str, Sequence[Anchor]],
    records: Mapping[int, dict[str, Any]] | None = None,
) -> LedgerCheck:
    """The verdicts for a ledger's bytes, when the caller has read its lines' links.

    Args:
        ledger: the ledger's path (its head file is read beside it).
        data: its bytes; ``raws`` are its lines (``data`` split on ``\\n``, without a
            trailing empty piece).
        links: per line, its ``metadata.prev_hash`` (None when it has none) or
            :data:`NOT_A_RECORD` (a cut or damaged line). :func:`ctxnb.analysis.load_trace`
            takes them from Arrow's parse, so that no line is parsed twice.
        ids: per line, the record id (None when not a record).
        anchors: the records' copies in the store's log, by id.
        records: line number → record, for lines the caller parsed; a line with an
            anchor that is not among them is parsed here.
    """
    out = LedgerCheck(ledger, len(raws))
    hashes = [chain.line_hash(raw) for raw in raws]
    chained = False
    for n, got in enumerate(links, 1):
        if got is NOT_A_RECORD:
            out.unreadable.append(n)
            continue
        out.integrity[n] = CHAINED
        expected = hashes[n - 2] if n > 1 else chain.GENESIS
        if got is None:
            if chained:
                out._bad(n, f"line {n} has no {chain.PREV_KEY}: it was inserted or edited")
            else:
                out.unchained += 1
                out.integrity[n] = UNCHAINED
            continue
        chained = True
        if got == expected:
            continue
        # The first broken link gets the chain's own diagnosis (which line to blame);
        # both lines of every broken link are marked: either may be the changed one.
        first = out.first_bad_line is None
        where, why = chain._diagnose(list(raws), n, got)
        if first:
            out.first_bad_line, out.message = where, why
        out._bad(n, f"its link to line {n - 1} does not hold: {why}")
        if n > 1 and links[n - 2] is not NOT_A_RECORD:
            out._bad(n - 1, f"line {n} does not link to it: it, or what followed it, changed")
    _check_head(out, ledger, data, raws, chained)
    _check_anchors(out, raws, ids, anchors, records or {})
    _check_checkpoints(out, data, raws, hashes, getattr(anchors, "checkpoints", ()))
    out.problems.sort(key=lambda p: p[0])  # stable: a line's problems keep their order
    if out.ok:
        out.message = (
            f"{len(raws)} lines, chain intact"
            + (f"; {out.unchained} written before the chain" if out.unchained else "")
            + (f"; unreadable (cut by a crash): {out.unreadable}" if out.unreadable else "")
        )
    return out


def _check_head(
    out: LedgerCheck, ledger: Path, data: bytes, raws: Sequence[bytes], chained: bool
) -> None:
    """The head file names the ledger's length and last line after the last append."""
    end_no = len(raws) + 1
    name = chain.head_path(ledger).name
    head = chain._read_head(ledger)
    if head is None:
        if chained:
            out._bad(
                end_no, f"{name} is missing, so lines removed from the end cannot be ruled out"
            )
        return
    end, last = head
    if end < 0:
        out._bad(end_no, f"{name} is damaged")
        return
    if end > len(data):
        out._bad(
            end_no,
            f"the ledger is {len(data)} bytes but had {end} after its last append: "
            f"lines from line {end_no} on were deleted",
        )
        return
    # Without copying the ledger: the line that ends at ``end`` and the lines before it.
    n_head = data.count(b"\n", 0, end)
    ended = end > 0 and data[end - 1 : end] == b"\n"
    start = data.rfind(b"\n", 0, max(end - 1, 0)) + 1
    if not ended or chain.line_hash(data[start : end - 1]) != last:
        where = max(1, n_head)
        out._bad(
            where,
            f"line {where} is not the line the last append ended with (recorded in {name})",
        )
    if end < len(data):
        for n in range(n_head + 1, len(raws) + 1):
            out._bad(
                n,
                f"line {n} was added after the last append ctxnb recorded (in {name}): "
                "it was not written by ctxnb",
            )


def _check_anchors(
    out: LedgerCheck,
    raws: Sequence[bytes],
    ids: Sequence[str | None] | None,
    anchors: Mapping[str, Sequence[Anchor]],
    records: Mapping[int, dict[str, Any]],
) -> None:
    """Each record against its copy in the store's log; copies, and missing records."""
    seen: dict[str, int] = {}
    for n in list(out.integrity):
        rid = ids[n - 1] if ids is not None else None
        if not isinstance(rid, str):
            continue
        if rid in seen:
            out._bad(n, f"record {rid} is already line {seen[rid]}: a copy was inserted")
            continue
        seen[rid] = n
        copies = anchors.get(rid)
        if not copies:
            continue
        rec = records.get(n)
        if rec is None:
            rec = parse_line(raws[n - 1])[0] or {}
        if any(_matches(rec, a) for a in copies):
            if out.integrity[n] != TAMPERED:
                out.integrity[n] = VERIFIED
            continue
        out._bad(
            n,
            f"record {rid} differs from its copy committed in store transaction "
            f"{copies[-1].tx} (.ctxnb/store/txlog): it was edited after ctxnb wrote it",
        )
    # Not a problem of the ledger's lines: a crash between the log's fsync and the
    # ledger's write leaves exactly this, and restoring (every recorder's first write,
    # ``trace verify``) puts the record back, so a deletion does not hold either.
    out.missing = [copies[-1] for rid, copies in anchors.items() if rid not in seen]


def _check_checkpoints(
    out: LedgerCheck,
    data: bytes,
    raws: Sequence[bytes],
    hashes: Sequence[str],
    checkpoints: Sequence[Checkpoint],
) -> None:
    """Each checkpoint the store committed against the ledger as it is.

    A checkpoint that holds pins every line before it (each line's hash covers the link
    to the one before). One that does not says that a line at or before its offset was
    edited, moved, inserted or removed after the store committed it, even when every
    following hash and the head were recomputed; the chain cannot say which line, so
    every line after the nearest checkpoint that holds, up to the first that does not,
    is marked. A later checkpoint's failure follows from that one (its last line's hash
    covers the changed prefix), so it marks nothing more: a line after it is judged by
    its own copy in the store, when it has one.
    """
    if not checkpoints:
        return
    ends: dict[int, int] = {}  # offset after a line's newline -> its number
    pos = 0
    for n, raw in enumerate(raws, 1):
        pos += len(raw) + 1
        ends[pos] = n
    starts = [0, *ends][: len(raws)]  # where each line starts
    held: list[int] = sorted(
        {c.at for c in checkpoints if c.at in ends and hashes[ends[c.at] - 1] == c.head}
    )
    failed = [c for c in checkpoints if not (c.at in ends and hashes[ends[c.at] - 1] == c.head)]
    if not failed:
        return
    c = min(failed, key=lambda f: (f.at, f.tx))
    at = c.at
    below = [h for h in held if h < at]
    good = below[-1] if below else 0
    lines = [n for n, start in enumerate(starts, 1) if good <= start < at]
    if at > len(data):
        why = (
            f"the ledger is {len(data)} bytes, but it was {at} when store transaction "
            f"{c.tx} was committed (.ctxnb/store): lines were removed, or the ledger "
            "was replaced by an older copy"
        )
    else:
        why = (
            f"the ledger's first {at} bytes are not what they were when store "
            f"transaction {c.tx} was committed (.ctxnb/store keeps their last line's "
            "hash): a line among these was edited, moved, inserted or removed, and the "
            "chain recomputed after it"
        )
    for n in lines or [len(raws) + 1]:
        out._bad(n, why)


def verify_ledger(
    path: str | os.PathLike[str], *, store_dir: str | os.PathLike[str] | None = None
) -> chain.ChainReport:
    """:func:`check_ledger`'s verdict as one report: the first bad line and its message.

    Example:
        >>> import pathlib, tempfile
        >>> verify_ledger(pathlib.Path(tempfile.mkdtemp()) / "none.jsonl").ok
        True
    """
    check = check_ledger(path, store_dir=store_dir)
    return chain.ChainReport(
        ok=check.ok,
        lines=check.lines,
        first_bad_line=check.first_bad_line,
        message=check.message,
        unreadable=check.unreadable,
        unchained=check.unchained,
    )
