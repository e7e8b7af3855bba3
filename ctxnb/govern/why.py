"""Why was this line written: a file's lines traced back to the Agent Trace records.

:func:`why` answers, in one call, which record of ``.orchestration/agent_trace.jsonl``
wrote each line of a file (or one line): the contributor, the intent, the tool, the
mutation class, the approval, the session and turn, and the context the model had,
rebuilt from the store with :func:`ctxnb.context.context_at`. ``ws.why(path, line)``
and ``ctxnb why FILE[:LINE]`` call it.

Lines are matched to records by content, so that attribution survives edits above a
change and history rewrites (rebase, squash, fixup, amend, cherry-pick). For every
range of every record:

1. the version of the file the record was made on is looked up in the store: the one
   whose lines at the recorded position hash to every range's ``content_hash``
   (:func:`~ctxnb.govern.ledger.normalized_content_hash`), closest in time to the
   record. A line diff of that version against the file today carries the range's
   lines over, as ``git blame`` carries lines between commits: **in place** when the
   whole range arrives at its recorded lines, **moved** when it arrives whole
   elsewhere, **partial** when only some of its lines survive (the others were changed
   since by someone else);
2. with no such version in the store (a writer that stored none), the range is **in
   place** when the file's lines at the recorded position still hash to its
   ``content_hash``; otherwise the hash is looked for among the file's windows of the
   same length, and the occurrence nearest the recorded position is **moved** (a range
   of blank lines alone is never matched away from its place).

A line claimed by several records goes to the newest; it is **ambiguous** only when
the claimants' contributors differ. A line no record claims says so.

The ledger is read through :func:`~ctxnb.govern.ledgercheck.check_ledger`, the verifier
every reader uses: each record carries its verdict (``verified``, ``chained``,
``unchained`` or ``tampered``, see :attr:`RecordWhy.integrity`), a tampered record is
marked wherever it is printed, and ``ctxnb why`` exits with status 1 when a line it
answers for was written by one.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb import Workspace
    >>> from ctxnb.govern import init_governance
    >>> from ctxnb.govern.ledger import TraceLedger, build_trace_record
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = init_governance(root)
    >>> _ = (root / "a.py").write_text("x = 1\\ny = 2\\n")
    >>> TraceLedger(root / ".orchestration" / "agent_trace.jsonl").append(build_trace_record(
    ...     file_path="a.py", ranges=[(2, 2)], new_text="x = 1\\ny = 2\\n",
    ...     intent_id="INT-1", session_id=None, model_id="acme/m1", repo_root=root))
    >>> answer = Workspace.open(root).why("a.py", 2)
    >>> answer.record_for(2).intent_id, answer.record_for(2).model_id
    ('INT-1', 'acme/m1')
    >>> Workspace.open(root).why("a.py", 1).record_for(1) is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ._linematch import LineMatcher, MatchKind, Range, line_key, split_lines
from ._tracerecord import _relative_path, record_intent_id, record_session_id
from .ledgercheck import TAMPERED, check_ledger

if TYPE_CHECKING:
    from ..access.door import Access
    from ..context import Context

__all__ = ["Approval", "LineWhy", "RecordWhy", "WhyResult", "why"]


@dataclass(frozen=True)
class Approval:
    """A human's decision on the change, from the record's ``metadata.approval``."""

    approved: bool | None
    by: str | None
    at: str | None
    diff_hash: str | None = None

    def __str__(self) -> str:
        verdict = {True: "approved", False: "refused", None: "decided"}[self.approved]
        out = f"{verdict} by {self.by or 'unknown'}" + (f" at {self.at}" if self.at else "")
        return out + (f" (diff {self.diff_hash})" if self.diff_hash else "")


@dataclass
class RecordWhy:
    """One trace record (one conversation of it), as far as ``why`` tells about it.

    Attributes:
        key: the record id (``<id>#<n>`` for the n-th conversation of a record with
            several).
        context: the context the model had at ``turn`` of ``session_id``, rebuilt from
            the store; None when the record names no session and turn, or it cannot be
            rebuilt (``context_note`` says why).
        context_note: how the context was rebuilt, or why not.
        integrity: the ledger verifier's verdict on the record's line: ``verified``
            (the chain holds and it equals its copy in the store's log), ``chained``
            (the chain holds; the log has no copy), ``unchained`` (written before the
            chain) or ``tampered``.
        integrity_note: why it is ``tampered``.
    """

    key: str
    record_id: str
    timestamp: str | None
    contributor_type: str
    model_id: str | None
    intent_id: str | None
    tool: str | None
    mutation_class: str | None
    approval: Approval | None
    session_id: str | None
    turn: int | None
    context_id: str | None
    revision: str | None
    context: Context | None = field(default=None, repr=False, compare=False)
    context_note: str = ""
    integrity: str = "chained"
    integrity_note: str = ""
    # A worker's change: the supervisor session that spawned it (metadata.parent_session)
    # and, for a worker of a worker, every supervisor up the chain, the first one first.
    parent_session: str | None = None
    supervisors: tuple[str, ...] = ()

    @property
    def chain(self) -> list[str]:
        """The sessions from the first supervisor down to this record's (empty when the
        change was not a worker's)."""
        if not self.parent_session or not self.session_id:
            return []
        ups = list(self.supervisors) or [self.parent_session]
        return [*ups, self.session_id]

    @property
    def tampered(self) -> bool:
        """The record's line was changed outside ctxnb: nothing it says is evidence."""
        return self.integrity == TAMPERED

    @property
    def contributor(self) -> str:
        """``type (model)``, e.g. ``ai (anthropic/claude-sonnet-4)``."""
        return self.contributor_type + (f" ({self.model_id})" if self.model_id else "")

    def to_dict(self, *, context_text: bool = False) -> dict[str, Any]:
        """The fields as JSON-ready values (the context by its hash; ``context_text``
        adds its text)."""
        out: dict[str, Any] = {
            k: getattr(self, k)
            for k in (
                "record_id",
                "timestamp",
                "contributor_type",
                "model_id",
                "intent_id",
                "tool",
                "mutation_class",
                "session_id",
                "parent_session",
                "turn",
                "context_id",
                "revision",
                "context_note",
                "integrity",
                "integrity_note",
            )
        }
        out["chain"] = self.chain
        out["approval"] = None if self.approval is None else vars(self.approval).copy()
        ctx = self.context
        out["context"] = None
        if ctx is not None:
            out["context"] = {"hash": ctx.hash, "turn": ctx.turn}
            if context_text:
                out["context"]["text"] = ctx.to_text()
        return out

    def describe(self) -> list[str]:
        """The record's details, one ``label  value`` line each."""
        rows = []
        if self.tampered:
            rows.append(
                ("TAMPERED", f"this record was changed outside ctxnb: {self.integrity_note}")
            )
        rows += [
            ("contributor", self.contributor),
            ("intent", self.intent_id or "none"),
            ("tool", self.tool or "unknown"),
            ("mutation", self.mutation_class or "not classified"),
            ("approval", str(self.approval) if self.approval else "none recorded"),
        ]
        if self.session_id:
            turn = f", turn {self.turn}" if self.turn is not None else ""
            rows.append(("session", f"{self.session_id}{turn}"))
            if self.chain:
                # Supervisor → worker: who handed this session its narrowed scope.
                rows.append(("chain", " → ".join(self.chain) + " (worker)"))
        if self.context_id or self.context_note:
            ctx = f"{self.context_id}: " if self.context_id else ""
            rows.append(("context", ctx + self.context_note))
        if self.revision:
            rows.append(("git HEAD", self.revision))
        if not self.tampered:
            rows.append(("integrity", _INTEGRITY_NOTES.get(self.integrity, self.integrity)))
        return [f"{label:<12} {value}" for label, value in rows]


_INTEGRITY_NOTES = {
    "verified": "verified (hash chain intact; equals its copy in the store's log)",
    "chained": "chained (hash chain intact; the store's log holds no copy to compare)",
    "unchained": "unchained (written before ctxnb kept the hash chain)",
}


@dataclass(frozen=True)
class LineWhy:
    """The answer for one line of the file.

    Attributes:
        line: 1-based line number.
        text: the line (redacted when printed).
        record: the key of the record that wrote it (in :attr:`WhyResult.records`),
            or None when no record did.
        match: how it was found (see the module docs).
        ambiguous: other records with another contributor claim the same line.
        others: the keys of those records.
    """

    line: int
    text: str
    record: str | None
    match: MatchKind | None = None
    ambiguous: bool = False
    others: tuple[str, ...] = ()


@dataclass
class WhyResult:
    """What :func:`why` found for a file (or one line of it).

    Attributes:
        path: the file, workspace-relative.
        lines: one entry per line asked about, in order.
        records: the records those lines were written by, by key, oldest first.
        skipped_ledger_lines: damaged ledger lines that could not be read.
        asked: the line asked about, or None when the whole file was.
        ledger_problems: everything the ledger verifier found wrong, ``(line, message)``,
            whether or not it concerns this file.
        missing_records: records of this file that the store's log holds and the
            ledger lacks (deleted, or lost in a crash; ``ctxnb trace verify`` restores
            them).
    """

    path: str
    lines: list[LineWhy]
    records: dict[str, RecordWhy]
    skipped_ledger_lines: int = 0
    asked: int | None = None
    ledger_problems: list[tuple[int, str]] = field(default_factory=list)
    missing_records: list[str] = field(default_factory=list)

    @property
    def tampered(self) -> bool:
        """A line of the answer was written by a tampered record."""
        return any(
            self.records[k].tampered
            for lw in self.lines
            for k in ((lw.record,) if lw.record else ()) + lw.others
        )

    def line(self, n: int) -> LineWhy:
        """The answer for line ``n``.

        Raises:
            NotFoundError: the result holds no line ``n``.
        """
        for lw in self.lines:
            if lw.line == n:
                return lw
        raise NotFoundError(f"line {n} of {self.path} is not in this answer; ask why(path, {n})")

    def record_for(self, n: int) -> RecordWhy | None:
        """The record that wrote line ``n``, or None when none did."""
        key = self.line(n).record
        return None if key is None else self.records[key]

    def context(self, n: int) -> Context | None:
        """The context the model had when it wrote line ``n`` (rebuilt from the store)."""
        rec = self.record_for(n)
        return None if rec is None else rec.context

    @property
    def unattributed(self) -> list[int]:
        """The lines no record claims."""
        return [lw.line for lw in self.lines if lw.record is None]

    def to_dict(self, *, context_text: bool = False) -> dict[str, Any]:
        from ..redaction.redactor import redact_data

        data = {
            "path": self.path,
            "lines": [
                {
                    "line": lw.line,
                    "text": lw.text,
                    "record": lw.record,
                    "match": lw.match,
                    "ambiguous": lw.ambiguous,
                    "others": list(lw.others),
                }
                for lw in self.lines
            ],
            "records": {k: r.to_dict(context_text=context_text) for k, r in self.records.items()},
            "skipped_ledger_lines": self.skipped_ledger_lines,
            "asked": self.asked,
            "tampered": self.tampered,
            "ledger_problems": [list(p) for p in self.ledger_problems],
            "missing_records": list(self.missing_records),
        }
        # Lines and record fields hold what files and agents wrote: they leave redacted.
        return dict(redact_data(data))

    def to_json(self, *, context_text: bool = False) -> str:
        return json.dumps(self.to_dict(context_text=context_text), ensure_ascii=False, indent=2)

    def __str__(self) -> str:
        from ..redaction.redactor import redact_text

        out: list[str] = []
        if self.tampered:
            out.append(
                "WARNING: the trace ledger was changed outside ctxnb; records marked "
                "TAMPERED below are not evidence (run `ctxnb trace verify`)"
            )
        if self.asked is not None:
            lw = self.lines[0]
            out.append(f"{self.path}:{lw.line}: {lw.text.rstrip()}")
            if lw.record is None:
                out.append("  no trace record wrote this line (written outside a recorded")
                out.append("  change, or changed since by someone no record names)")
            else:
                out.append(f"  record {self.records[lw.record].record_id} ({lw.match})")
                out.extend("  " + row for row in self.records[lw.record].describe())
        else:
            n_att = len(self.lines) - len(self.unattributed)
            out.append(
                f"{self.path}: {len(self.lines)} lines, {n_att} written by "
                f"{len(self.records)} trace record(s), {len(self.unattributed)} by none"
            )
            for first, last, lw in _runs(self.lines):
                span = f"{first}" if first == last else f"{first}-{last}"
                if lw.record is None:
                    out.append(f"  {span:<9} no record")
                    continue
                rec = self.records[lw.record]
                mark = "TAMPERED " if rec.tampered else ""
                out.append(
                    f"  {span:<9} {mark}{rec.contributor} · intent {rec.intent_id or 'none'} · "
                    f"{rec.tool or 'unknown tool'} · record {rec.record_id[:8]} ({lw.match})"
                )
            for key, rec in self.records.items():
                out.append(f"record {key} · {rec.timestamp}")
                out.extend("  " + row for row in rec.describe())
        for lw in self.lines:
            if lw.ambiguous:
                out.append(
                    f"  line {lw.line} is ambiguous: its content was also written by "
                    + ", ".join(f"{self.records[k].contributor} in record {k}" for k in lw.others)
                )
        if self.skipped_ledger_lines:
            out.append(f"({self.skipped_ledger_lines} damaged ledger line(s) were skipped)")
        if self.missing_records:
            out.append(
                f"({len(self.missing_records)} record(s) of this file are in the store's log "
                "but not in the ledger: deleted, or lost in a crash; `ctxnb trace verify` "
                "restores them)"
            )
        return redact_text("\n".join(out))


def _runs(lines: Sequence[LineWhy]) -> list[tuple[int, int, LineWhy]]:
    """Consecutive lines with the same record and match, as ``(first, last, line)``."""
    runs: list[tuple[int, int, LineWhy]] = []
    for lw in lines:
        if runs:
            first, last, head = runs[-1]
            if (head.record, head.match) == (lw.record, lw.match) and lw.line == last + 1:
                runs[-1] = (first, lw.line, head)
                continue
        runs.append((lw.line, lw.line, lw))
    return runs


# -- the query ------------------------------------------------------------------------------
def _when(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _approval(value: Any) -> Approval | None:
    if not isinstance(value, Mapping):
        return None
    approved = value.get("approved")
    diff = value.get("diff_hash") or value.get("diff_sha256")
    return Approval(
        approved=approved if isinstance(approved, bool) else None,
        by=str(value["by"]) if value.get("by") is not None else None,
        at=str(value["at"]) if value.get("at") is not None else None,
        diff_hash=str(diff) if diff else None,
    )


def _record_why(record: Mapping[str, Any], key: str, conv: Mapping[str, Any]) -> RecordWhy:
    meta = record.get("metadata") if isinstance(record.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    contributor = conv.get("contributor") if isinstance(conv.get("contributor"), Mapping) else {}
    assert isinstance(contributor, Mapping)
    turn = meta.get("turn")
    vcs = record.get("vcs") if isinstance(record.get("vcs"), Mapping) else {}
    assert isinstance(vcs, Mapping)

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    return RecordWhy(
        key=key,
        record_id=str(record.get("id")),
        timestamp=text(record.get("timestamp")),
        contributor_type=text(contributor.get("type")) or "unknown",
        model_id=text(contributor.get("model_id")),
        intent_id=record_intent_id(record),
        tool=text(meta.get("tool")),
        mutation_class=text(meta.get("mutation_class")),
        approval=_approval(meta.get("approval")),
        session_id=record_session_id(record),
        turn=turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
        context_id=text(meta.get("context_id")),
        revision=text(vcs.get("revision")),
        parent_session=text(meta.get("parent_session")),
        supervisors=_supervisors(meta.get("supervisors"), text(meta.get("parent_session"))),
    )


def _supervisors(value: Any, parent: str | None) -> tuple[str, ...]:
    """A record's chain of supervisors, kept only when it is well formed and ends in its
    parent (a hand-edited chain that contradicts the parent is not shown as evidence)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        return ()
    return tuple(value) if value and value[-1] == parent else ()


def _rebuild_contexts(access: Access, records: Sequence[RecordWhy]) -> None:
    """Fill ``context`` and ``context_note`` of every record with a session and turn."""
    from ..context import Assembler, context_at
    from ..llm.tokens import resolve_token_counter

    assembler: Assembler | None = None
    done: dict[tuple[str, int], tuple[Context | None, str]] = {}
    for rec in records:
        if rec.session_id is None or rec.turn is None:
            if rec.context_id or rec.session_id:
                rec.context_note = (
                    "not rebuilt: the record names no "
                    + ("session" if rec.session_id is None else "turn")
                    + " (metadata.turn is written for changes made in a ctxnb session)"
                )
            continue
        where = (rec.session_id, rec.turn)
        if where not in done:
            sdoc = access.store.get(rec.session_id)
            if sdoc is None or sdoc.get("type") != "session":
                done[where] = (None, f"session {rec.session_id!r} is not in this store")
            else:
                # As Session.context_at does, without resuming the session: a question
                # about the past writes nothing (no re-index, no new session version).
                assembler = assembler or Assembler(resolve_token_counter(None))
                try:
                    ctx = context_at(
                        access.store,
                        rec.session_id,
                        rec.turn,
                        assembler=assembler,
                        reverse_resolve=access.display_path,
                    )
                except NotFoundError as e:
                    done[where] = (None, str(e))
                else:
                    done[where] = (ctx, "")
        rebuilt, note = done[where]
        rec.context = rebuilt
        if rebuilt is None:
            rec.context_note = note
        elif rec.context_id is None or rec.context_id == rebuilt.hash:
            same = " (its hash is the recorded context id)" if rec.context_id else ""
            rec.context_note = f"rebuilt from the store, turn {rec.turn}{same}"
        else:
            rec.context_note = (
                f"rebuilt from the store, turn {rec.turn}, but its hash {rebuilt.hash[:16]} "
                "is not the recorded context id"
            )


def why(
    access: Access,
    path: str,
    line: int | None = None,
    *,
    context: bool = True,
) -> WhyResult:
    """Which trace record wrote each line of ``path`` (or line ``line``), and why.

    Args:
        access: the workspace (``ws.why`` passes itself).
        path: the file, relative to the workspace root or absolute.
        line: one 1-based line; every line of the file when None.
        context: rebuild from the store the context each record's session had at its
            turn (``metadata.session_id`` and ``metadata.turn``).

    Raises:
        NotFoundError: the workspace is not governed, there is no such file, or the
            line is out of range.
        PolicyError: the path is refused (denied, a symbolic link, outside the workspace).
    """
    root = Path(access.root)
    trace = root / ".orchestration" / "agent_trace.jsonl"
    if not trace.parent.is_dir():
        raise NotFoundError(
            f"{root} is not governed (no .orchestration/), so no change was traced; "
            "run `ctxnb init-governance` to start recording why files change"
        )
    rel = access.relpath(access.abspath(path))
    data = access.read(rel)
    if data is None:
        raise NotFoundError(f"{path!r}: no such file in {root}; give a path to an existing file")
    current = split_lines(data.decode("utf-8", errors="replace"))
    if line is not None and not 1 <= line <= len(current):
        raise NotFoundError(
            f"{rel} has {len(current)} line(s); line {line} is out of range "
            f"(ask for 1..{len(current)}, or leave the line out for every line)"
        )
    try:
        ledger_path, _ = _relative_path(rel, root)
    except ValueError as e:
        raise NotFoundError(f"{path!r}: {e}") from None

    def about_this_file(record: Mapping[str, Any]) -> bool:
        files = record.get("files")
        return isinstance(files, list) and any(
            isinstance(f, Mapping) and f.get("path") == ledger_path for f in files
        )

    check = check_ledger(trace, keep=about_this_file)
    if check.refused is not None:
        raise check.refused
    infos: dict[str, RecordWhy] = {}
    ranges: list[list[Range]] = []  # per record (and conversation), its ranges here
    times: list[datetime | None] = []
    for n, record in check.records:
        for f in record.get("files") or []:
            if not isinstance(f, Mapping) or f.get("path") != ledger_path:
                continue
            convs = [c for c in f.get("conversations") or [] if isinstance(c, Mapping)]
            for j, conv in enumerate(convs):
                key = str(record.get("id")) + (f"#{j}" if len(convs) > 1 else "")
                info = infos[key] = _record_why(record, key, conv)
                info.integrity = check.integrity[n]
                info.integrity_note = check.reasons.get(n, "")
                order = len(ranges)
                ranges.append(
                    [
                        Range(order, key, r["start_line"], r["end_line"], r["content_hash"])
                        for r in conv.get("ranges") or []
                        if isinstance(r, Mapping)
                        and isinstance(r.get("start_line"), int)
                        and isinstance(r.get("end_line"), int)
                        and isinstance(r.get("content_hash"), str)
                    ]
                )
                times.append(_when(record.get("timestamp")))

    matcher = LineMatcher(current, access.store.history(access.object_id(rel)) if ranges else [])
    claims: dict[int, list[tuple[int, str, MatchKind]]] = {}
    want = line_key(current[line - 1]) if line is not None else ""
    for order, rs in enumerate(ranges):
        if not rs:
            continue
        version = matcher.version_for(times[order], rs)
        if line is not None and version is not None:
            # One line asked: a record whose ranges never held that text cannot have
            # written it, wherever it moved; no diff is needed to say so.
            held = matcher.lines(version)
            if not any(line_key(held[i]) == want for r in rs for i in range(r.start - 1, r.end)):
                continue
        for r in rs:
            for n, kind in matcher.lines_of(r, version):
                claims.setdefault(n, []).append((order, r.key, kind))

    wanted = [line] if line is not None else range(1, len(current) + 1)
    lines: list[LineWhy] = []
    for n in wanted:
        found = claims.get(n)
        if not found:
            lines.append(LineWhy(n, current[n - 1], None))
            continue
        _, key, kind = max(found)  # the newest record wins
        who = (infos[key].contributor_type, infos[key].model_id)
        others = tuple(
            dict.fromkeys(
                k for _, k, _ in found if (infos[k].contributor_type, infos[k].model_id) != who
            )
        )
        lines.append(LineWhy(n, current[n - 1], key, kind, bool(others), others))

    used = {lw.record for lw in lines} | {k for lw in lines for k in lw.others}
    records = {k: r for k, r in infos.items() if k in used}
    if context:
        _rebuild_contexts(access, list(records.values()))
    missing = [a.record["id"] for a in check.missing if about_this_file(a.record)]
    return WhyResult(
        rel,
        lines,
        records,
        len(check.unreadable),
        asked=line,
        ledger_problems=list(check.problems),
        missing_records=missing,
    )
