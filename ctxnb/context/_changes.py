"""Context operations you can audit: what each assembly did to each item, and undoing it.

Every assembly decides, for every candidate item, one operation:

==============  ===================================================================
``kept``        shown in full
``masked``      shown as a one-line placeholder
``truncated``   its content was cut
``summarized``  shown as a replacement text (a strategy's summary of it)
``evicted``     left out (by the strategy, or by the budget: ``by == "budget"``)
``compacted``   folded into a summary of several items (a condenser's block, a
                replayed Claude Code compaction)
``restored``    brought back by :meth:`ctxnb.session.core.Session.restore_item`
==============  ===================================================================

The assembler records one compact row per item in the assembly record it stores
(``assembly["changes"]``: ``id -> [op, by, tokens_before, tokens_after]``), from the
counts it has already made: ``tokens_before`` is the item's block rendered in full
(what the strategy saw as :attr:`ctxnb.strategies.builtin.Item.tokens`), ``tokens_after`` the
block as shown (0 when left out). Reading them back needs no rendering.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import ObservationMasking, Workspace
    >>> s = Workspace.open(pathlib.Path(tempfile.mkdtemp())).session("audit", rules=False)
    >>> old = s.record_toolcall("run_command", {"cmd": "seq 50"}, "1\\n" * 50)
    >>> new = s.record_toolcall("run_command", {"cmd": "ls"}, "a.py\\n")
    >>> ctx = s.assemble(ObservationMasking(keep_last=1))
    >>> [(c.op, c.by) for c in s.context_changes(0)]
    [('masked', 'observation-masking'), ('kept', 'observation-masking')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import NotFoundError
from ._framing import inline

if TYPE_CHECKING:
    import pandas as pd

    from ..store.objectstore import ObjectStore, Version
    from ..strategies.builtin import Item, Selection
    from ._assemblystate import MetaEntry

__all__ = [
    "CHANGE_COLUMNS",
    "ContextChange",
    "changes_frame",
]

Op = Literal["kept", "masked", "truncated", "summarized", "evicted", "compacted", "restored"]
#: The operations that drop or shorten an item: what :meth:`Session.restore_item` undoes.
LOSSY_OPS = frozenset({"masked", "truncated", "summarized", "evicted", "compacted"})
#: Who evicted an item that the strategy kept: the assembler's least-recently-used pass.
BY_BUDGET = "budget"
BY_RESTORE = "restore_item"

CHANGE_COLUMNS = (
    "turn",
    "id",
    "label",
    "type",
    "op",
    "by",
    "tokens_before",
    "tokens_after",
    "tx_id",
    "survived",
    "evidence",
)


@dataclass(frozen=True)
class ContextChange:
    """What one operation did to one item of the context at one turn.

    Attributes:
        turn: the turn of the assembly (for a replayed compaction: the step).
        id: the object id.
        label: the path or the call, as the context labels it.
        type: ``file`` or ``toolcall`` (or another content type).
        op: ``kept``, ``masked``, ``truncated``, ``summarized``, ``evicted``,
            ``compacted`` or ``restored``.
        by: the strategy's name; ``budget`` for an eviction by the assembler's budget
            pass; ``restore_item`` for a restore; the compaction for a compacted item.
        tokens_before: tokens of the item's block in full.
        tokens_after: tokens of the block as shown (0 when left out).
        tx_id: the store transaction the item was read at: its stored version then.
        survived: for a compacted tool result, whether its distinctive content is in
            the summary (None: it has none to look for; see ``docs/context.md``).
        evidence: the distinctive terms of a compacted result found in the summary.
    """

    turn: int
    id: str
    label: str
    type: str
    op: Op
    by: str
    tokens_before: int
    tokens_after: int
    tx_id: int | None = None
    survived: bool | None = None
    evidence: tuple[str, ...] = field(default=(), compare=False)

    @property
    def tokens_saved(self) -> int:
        """Tokens the operation took out of the context (negative for a restore)."""
        return self.tokens_before - self.tokens_after


def changes_frame(changes: Iterable[ContextChange]) -> pd.DataFrame:
    """Context changes as a pandas DataFrame, one row each (columns :data:`CHANGE_COLUMNS`).

    Example:
        >>> c = ContextChange(3, "t1", "ls()", "toolcall", "masked", "masking", 40, 9)
        >>> changes_frame([c])[["op", "tokens_before", "tokens_after"]].values.tolist()
        [['masked', 40, 9]]
    """
    import pandas as pd

    rows = [asdict(c) for c in changes]
    df = pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))
    return df.astype({"turn": "int64", "tokens_before": "int64", "tokens_after": "int64"})


# -- recording (at assembly) ---------------------------------------------------------------
def record_changes(
    cands: Sequence[Item],
    chosen: Selection,
    final: Selection,
    shown: Mapping[str, tuple[int, bool]],
    strategy: str,
) -> dict[str, list[Any]]:
    """The rows an assembly record keeps: ``id -> [op, by, tokens_before, tokens_after]``.

    Args:
        cands: the candidates, with their full tokens.
        chosen: the strategy's selection (validated, before the budget pass).
        final: the selection after the budget pass.
        shown: ``id -> (tokens as shown, truncated)`` of every kept item (the context's
            items).
        strategy: the strategy's name.
    """
    by_strategy = set(chosen.active)
    masked, replace, evicted = set(final.masked), final.replace, set(final.evicted)
    condensed = final.condensed
    rows: dict[str, list[Any]] = {}
    for item in cands:
        oid = item.id
        if oid in evicted:
            by = strategy if oid not in by_strategy else BY_BUDGET
            rows[oid] = ["evicted", by, item.tokens, 0]
            continue
        tokens, truncated = shown[oid]
        if oid in condensed:
            op = "compacted"
        elif oid in masked:
            op = "masked"
        elif oid in replace:
            op = "summarized"
        elif truncated:
            op = "truncated"
        else:
            op = "kept"
        rows[oid] = [op, strategy, item.tokens, tokens]
    return rows


def changes_from_record(
    assembly: Mapping[str, Any], meta: Mapping[str, MetaEntry]
) -> tuple[ContextChange, ...]:
    """The changes an assembly record holds: kept items in reading order, then the others."""
    rows = assembly.get("changes") or {}
    order = dict.fromkeys([*assembly.get("active", ()), *assembly.get("evicted", ()), *rows])
    out = []
    for oid in order:
        row = rows.get(oid)
        if row is None:
            continue
        m = meta.get(oid)
        op, by, before, after = row
        out.append(
            ContextChange(
                turn=int(assembly["turn"]),
                id=oid,
                label=_label(m, oid),
                type=m.type if m is not None else "?",
                op=op,
                by=str(by),
                tokens_before=int(before),
                tokens_after=int(after),
                tx_id=assembly.get("tx_id"),
            )
        )
    return tuple(out)


def _label(m: MetaEntry | None, oid: str) -> str:
    return inline(m.path or m.args_display or oid) if m is not None else oid


# -- reading (from the store) ---------------------------------------------------------------
def recorded_assembly(store: ObjectStore, session_id: str, turn: int) -> Version:
    """The session version holding the last assembly recorded at ``turn``.

    Raises:
        NotFoundError: no context was assembled (with ``record=True``) at that turn.
    """
    if isinstance(turn, bool) or not isinstance(turn, int):
        raise NotFoundError(
            f"turn {turn!r} is not a turn: give the number of chat turns at the assembly "
            "(an int, as Context.turn and ContextChange.turn are)"
        )
    versions = store.history(session_id)
    chosen = None
    for v in versions:
        a = v.doc.get("assembly")
        if a and a.get("turn") == turn:
            chosen = v
    if chosen is None:
        turns = sorted({v.doc["assembly"]["turn"] for v in versions if v.doc.get("assembly")})
        raise NotFoundError(
            f"no context was recorded at turn {turn!r} of session {session_id!r}; "
            f"recorded turns: {turns or 'none'} (assemble with record=True to record one)"
        )
    return chosen


def changes_at(
    store: ObjectStore,
    session_id: str,
    turn: int,
    *,
    meta_of: Callable[[Mapping[str, Any]], MetaEntry],
    restores: Sequence[Mapping[str, Any]] = (),
) -> list[ContextChange]:
    """The changes recorded at ``turn``, read from the store, then the restores made then.

    Raises:
        NotFoundError: nothing was recorded at that turn.
    """
    done = [r for r in restores if r.get("turn") == turn]
    try:
        version = recorded_assembly(store, session_id, turn)
    except NotFoundError:
        if not done:
            raise
        return [restored_change(r) for r in done]
    assembly = version.doc["assembly"]
    if "changes" not in assembly:
        raise NotFoundError(
            f"turn {turn} of session {session_id!r} was recorded by a ctxnb that kept no "
            "context changes; assemble again (record=True) to record them"
        )
    tx = assembly.get("tx_id")
    meta = {}
    for oid in assembly["changes"]:
        doc = store.as_of(oid, tx) if tx else None
        if doc is not None:
            meta[oid] = meta_of(doc)
    return [*changes_from_record(assembly, meta), *(restored_change(r) for r in done)]


def find_change(changes: Sequence[ContextChange], oid: str, turn: int) -> ContextChange:
    """The change of ``oid`` among a turn's changes.

    Raises:
        NotFoundError: the item was not a candidate at that turn, or was shown in full.
    """
    for c in changes:
        if c.id == oid and c.op != "restored":
            if c.op not in LOSSY_OPS:
                raise NotFoundError(
                    f"item {oid!r} ({c.label}) was shown in full at turn {turn}: nothing to "
                    "restore; restore_item brings back what was masked, truncated, "
                    "summarized or evicted"
                )
            return c
    raise NotFoundError(
        f"item {oid!r} was not in the context at turn {turn} (neither shown nor left out); "
        f"see session.context_changes({turn}) for the items of that turn"
    )


def restore_record(change: ContextChange, *, turn: int, pinned: bool) -> dict[str, Any]:
    """What the session keeps of a restore (persisted with it)."""
    return {
        "id": change.id,
        "turn": turn,
        "from_turn": change.turn,
        "tx_id": change.tx_id,
        "label": change.label,
        "type": change.type,
        # Back from what it was reduced to, to the whole block it was then.
        "tokens_before": change.tokens_after,
        "tokens_after": change.tokens_before,
        "pinned": pinned,
    }


def restored_change(r: Mapping[str, Any]) -> ContextChange:
    return ContextChange(
        turn=int(r["turn"]),
        id=str(r["id"]),
        label=str(r.get("label") or r["id"]),
        type=str(r.get("type") or "?"),
        op="restored",
        by=BY_RESTORE,
        tokens_before=int(r["tokens_before"]),
        tokens_after=int(r["tokens_after"]),
        tx_id=r.get("tx_id"),
    )


def changes_html(changes: Iterable[ContextChange], *, all_ops: bool = False) -> str:
    """A small HTML table of context changes (what the session and replay views show).

    Items kept in full are left out unless ``all_ops``; compacted tool results show
    whether they survived in the summary and the evidence.

    Example:
        >>> c = ContextChange(3, "t1", "ls()", "toolcall", "masked", "masking", 40, 9)
        >>> "40 → 9</td>" in changes_html([c])
        True
    """
    from .._html import html_table

    rows = [
        {
            "op": c.op,
            "item": c.label,
            "type": c.type,
            "by": c.by,
            "tokens": f"{c.tokens_before:,} → {c.tokens_after:,}",
            "survived": {True: "yes", False: "no", None: "-"}[c.survived],
            "evidence": ", ".join(c.evidence),
        }
        for c in changes
        if all_ops or c.op != "kept"
    ]
    if not rows:
        return "<div><small>no item masked, truncated, summarized or evicted</small></div>"
    columns = ["op", "item", "type", "by", "tokens"]
    if any(r["op"] == "compacted" for r in rows):
        columns += ["survived", "evidence"]
    return html_table(rows, columns, max_rows=40, nowrap=("op", "tokens"))
