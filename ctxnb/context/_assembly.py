"""Assembly: from a session's state to the :class:`Context` the model sees (DESIGN §6).

The session owns its sets and documents; this module owns how they become a context:
the metadata lines, the rendered item blocks, the strategy and the budget, and the
rebuilding of a past context from the store's history. Nothing here imports the
session: it passes an :class:`AssemblyState` (references to its own dictionaries, no
copies) and gets back the context and the assembly record it stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CtxnbError
from ..hashing import sha256_hex, stable_stringify
from ..llm.tokens import TokenCounter
from ..redaction.redactor import redact_data, redact_text
from ..strategies.builtin import ContextStrategy, Item, Selection, StrategyInput, strategy_spec
from ._assemblystate import (
    AssemblyState,
    MetaEntry,
    meta_for,
    shown_call,
    view_doc,
    with_active_copy,
)
from ._changes import record_changes, recorded_assembly
from ._framing import inline, render_block
from ._metalog import META_HEADER, MetaBlock, MetaLog, place_blocks, render_log, section_of
from ._model import Context, ContextItem, Section, Segment
from .relations import DOC_TYPE as RELATIONS_TYPE
from .relations import RelationStore

if TYPE_CHECKING:
    from ..store.objectstore import ObjectStore

__all__ = ["AssemblyState", "Assembler", "MetaEntry", "context_at", "meta_for"]

_KINDS = {"toolcall": "tool", "relations": "plan"}  # an item block's tag word, by type


class Assembler:
    """Renders items and sections with caches that make re-assembling cheap.

    One per session. The render cache is keyed by content hash and the header's
    metadata; the metadata log (:mod:`ctxnb.context._metalog`) recomputes only the
    lines of ids marked with :meth:`mark`, so assembling a 10,000-object pool stays
    cheap.
    """

    def __init__(self, token_counter: TokenCounter) -> None:
        self.token_counter = token_counter
        self._render_cache: dict[tuple[Any, ...], tuple[str, int, str]] = {}
        self.metalog = MetaLog(token_counter)
        self._turn_cache: dict[tuple[str, str], tuple[str, int, str]] = {}

    def mark(self, oid: str) -> None:
        """The metadata line of ``oid`` (its entry or its flags) changed."""
        self.metalog.mark(oid)

    def mark_many(self, ids: Iterable[str]) -> None:
        self.metalog.mark_many(ids)

    # -- items ----------------------------------------------------------------------------
    def render_item(
        self,
        oid: str,
        doc: Mapping[str, Any],
        meta: MetaEntry,
        *,
        masked: bool,
        truncate: int | None,
    ) -> tuple[str, int, str, bool]:
        """(block text, tokens, hash, truncated) of one item."""
        # The rendered block depends on the content and on the metadata shown in its header.
        version = doc.get("content_hash") or sha256_hex(stable_stringify(dict(doc)))
        key = (oid, version, masked, truncate, meta.path, meta.args_display)
        hit = self._render_cache.get(key)
        content = doc.get("content")
        if hit is None:
            if content is None and meta.type == RELATIONS_TYPE:
                body = _plan_text(doc)
            elif content is None:
                if meta.type == "toolcall":
                    body = "(no output)"
                elif meta.deleted:
                    body = "(deleted)"
                else:
                    body = "(binary file: no text content)"
            else:
                # The whole content is redacted before it is cut, so that a secret
                # straddling the cut (or a key body below its header) is still found.
                body = redact_text(content)
            if masked:
                # The block's label already names the call; the placeholder stays short.
                body = "[output elided]"
            elif truncate is not None and len(body) > truncate:
                cut = body[:truncate]
                rest_lines = body[truncate:].count("\n")
                body = (
                    f"{cut}\n[… truncated: {len(body) - truncate} more chars, about "
                    f"{rest_lines} more lines; read them by line range]"
                )
            kind, label = _KINDS.get(meta.type, meta.type), meta.path or meta.args_display or oid
            text = render_block(kind, body, label)
            hit = (text, self.token_counter.count(text), sha256_hex(text))
            if len(self._render_cache) > 50_000:
                self._render_cache.clear()
            self._render_cache[key] = hit
        truncated = truncate is not None and content is not None and len(content) > truncate
        return (*hit, truncated)

    def candidates(self, state: AssemblyState) -> tuple[Item, ...]:
        """The active items as a strategy sees them, oldest use first."""
        items = []
        for oid in state.active:
            meta = state.meta[oid]
            doc = view_doc(state, oid)
            _, tokens, _, _ = self.render_item(oid, doc, meta, masked=False, truncate=None)
            items.append(
                Item(
                    id=oid,
                    type=meta.type,
                    tokens=tokens,
                    last_used=state.last_used.get(oid, 0),
                    pinned=oid in state.pinned,
                    path=meta.path,
                    tool=meta.tool,
                    char_count=meta.char_count,
                    seq=state.seq.get(oid, 0),
                    content=doc.get("content"),
                )
            )
        items.sort(key=lambda i: i.last_used)
        return tuple(items)

    # -- the live context ---------------------------------------------------------------------
    def assemble(
        self,
        state: AssemblyState,
        strategy: ContextStrategy,
        budget: int | None,
        *,
        tx_id: int,
    ) -> tuple[Context, dict[str, Any]]:
        """The context of the live state, and the assembly record that rebuilds it.

        ``tx_id`` is the store's latest transaction: :func:`context_at` reads every item
        as of it.
        """
        turn = len(state.turns)
        cands = self.candidates(state)
        system = self.system_section(state.system_prompt)
        chat = self.chat_section(state.turns)
        # New or changed metadata lines become a block of the log now, whatever the
        # strategy: every strategy's context at this step shows the same lines. Every
        # candidate is flagged active there: an upper bound on the final metadata, so
        # the content budget is never overdrawn.
        self.metalog.update(state)
        fixed = system.tokens + chat.tokens + self.metalog.tokens(state)
        content_budget = None if budget is None else max(0, budget - fixed)
        sel = strategy.select(StrategyInput(items=cands, budget=content_budget, turn=turn))
        sel.validate(cands, strategy=getattr(strategy, "name", None))
        chosen = sel
        sel = self.enforce_budget(sel, cands, content_budget, state)
        # Reading order: the head (rules, then pinned items, present from the start)
        # first, then by entry (append-only), whatever order the strategy listed them
        # in -- so consecutive prompts share their prefix. A rule found mid-session is
        # not head: it enters after everything so far (AssemblyState.in_head).
        rank = {oid: n for n, oid in enumerate(state.head)}

        def place(oid: str) -> tuple[int, int]:
            if not state.in_head(oid):
                return (2, state.seq.get(oid, 0))
            if oid in rank:
                return (0, rank[oid])
            return (1, state.seq.get(oid, 0))

        order = sorted(sel.active, key=place)
        assembly: dict[str, Any] = {
            "turn": turn,
            "strategy": strategy_spec(strategy),
            "budget": budget,
            "active": order,
            "entered": {o: state.entered.get(o, 0) for o in order},
            "head": [o for o in order if place(o)[0] < 2],
            # Active copies live in no store version: the record keeps what was shown.
            "overlays": {o: state.overlays[o] for o in order if o in state.overlays},
            "masked": sel.masked,
            "truncate": sel.truncate,
            "evicted": sel.evicted,
            "replace": sel.replace,
            "orphaned": sorted(state.orphaned),
            "tx_id": tx_id,
            # The first blocks of the session's metadata log this context shows.
            "metadata_blocks": len(state.meta_log),
        }
        blocks, meta_section = self.metalog.blocks(state, evicted=sel.evicted, shown=set(order))
        docs = {oid: view_doc(state, oid) for oid in order}
        ctx = self.build(
            assembly,
            docs,
            state.meta,
            state.system_prompt,
            state.turns,
            pinned=state.pinned,
            meta_blocks=blocks,
            meta_section=meta_section,
        )
        # What the strategy and the budget did to each candidate (ctxnb.context._changes),
        # from the counts already made: the candidates' in full, the built items' as shown.
        shown = {it.id: (it.tokens, it.truncated) for it in ctx.items}
        assembly["changes"] = record_changes(cands, chosen, sel, shown, strategy.name)
        names = {o: state.meta[o] for o in assembly["changes"]}  # as they are now
        object.__setattr__(ctx, "change_source", (assembly, names))
        return ctx, assembly

    def enforce_budget(
        self,
        sel: Selection,
        cands: tuple[Item, ...],
        budget: int | None,
        state: AssemblyState,
    ) -> Selection:
        """Drop unknown ids, evict what the strategy left out, then fit the budget (LRU).

        Pinned items are shown in full: a strategy's mask, truncation or replacement of
        one is dropped here, as its eviction is (see :meth:`Selection.validate`).
        """
        known = {i.id: i for i in cands}
        pins = {i.id for i in cands if i.pinned}
        if pins & (set(sel.masked) | set(sel.truncate) | set(sel.replace) | set(sel.condensed)):
            sel = Selection(
                sel.active,
                [m for m in sel.masked if m not in pins],
                {k: v for k, v in sel.truncate.items() if k not in pins},
                sel.evicted,
                {k: v for k, v in sel.replace.items() if k not in pins},
                {k: v for k, v in sel.condensed.items() if k not in pins and v not in pins},
            )
        active = [a for a in dict.fromkeys(sel.active) if a in known]
        # Pinned items stay whatever the strategy returned (it may have forgotten them).
        active += [i.id for i in cands if i.pinned and i.id not in set(active)]
        chosen = set(active)
        evicted = [e for e in dict.fromkeys(sel.evicted) if e in known and e not in chosen]
        gone = chosen | set(evicted)
        evicted += [i.id for i in cands if i.id not in gone]
        if budget is None:
            return Selection(
                active, list(sel.masked), dict(sel.truncate), evicted, sel.replace, sel.condensed
            )

        def cost(oid: str) -> int:
            return self.render_item(
                oid,
                replaced(view_doc(state, oid), sel.replace.get(oid)),
                state.meta[oid],
                masked=oid in sel.masked,
                truncate=sel.truncate.get(oid),
            )[1]

        total = sum(cost(a) for a in active)
        if total > budget:
            for item in sorted((known[a] for a in active), key=lambda i: i.last_used):
                if total <= budget:
                    break
                if item.pinned:
                    continue
                active.remove(item.id)
                evicted.append(item.id)
                total -= cost(item.id)
        kept = set(active)
        return Selection(
            active,
            [m for m in sel.masked if m in kept],
            {k: v for k, v in sel.truncate.items() if k in kept},
            evicted,
            {k: v for k, v in sel.replace.items() if k in kept},
            {k: v for k, v in sel.condensed.items() if k in kept and v in kept},
        )

    # -- sections -------------------------------------------------------------------------------
    def system_section(self, text: str) -> Section:
        text = redact_text(text)
        return Section(
            "system", text, self.token_counter.count(text) if text else 0, (), sha256_hex(text)
        )

    def turn_block(self, turn: Mapping[str, Any]) -> tuple[str, int, str]:
        """(framed text, tokens, hash) of one chat turn; framed so it cannot forge another."""
        key = (str(turn["role"]), str(turn["content"]))
        hit = self._turn_cache.get(key)
        if hit is None:
            text = render_block(key[0], redact_text(key[1]))
            hit = (text, self.token_counter.count(text), sha256_hex(text))
            if len(self._turn_cache) > 50_000:
                self._turn_cache.clear()
            self._turn_cache[key] = hit
        return hit

    def chat_section(self, turns: Sequence[Mapping[str, Any]]) -> Section:
        blocks = [self.turn_block(t) for t in turns]
        text = "".join(b[0] for b in blocks)
        return Section("chat", text, sum(b[1] for b in blocks), (), sha256_hex(text))

    def metadata_section(
        self,
        active: set[str],
        pinned: set[str],
        meta: Mapping[str, MetaEntry],
        pool: Sequence[str],
    ) -> Section:
        """The metadata section as one block at the end, as contexts were laid out before
        the metadata log (used to rebuild their records)."""
        lines = [meta[o].line(active=o in active, pinned=o in pinned) for o in pool if o in meta]
        if not lines:
            return Section("metadata", "", 0, (), sha256_hex(""))
        total = self.token_counter.count(META_HEADER) + sum(
            self.token_counter.count(line) + 1 for line in lines
        )
        text = META_HEADER + "".join(line + "\n" for line in lines)
        return Section("metadata", text, total, (), sha256_hex(text))

    def build(
        self,
        assembly: Mapping[str, Any],
        docs: Mapping[str, Mapping[str, Any]],
        meta: Mapping[str, MetaEntry],
        system_prompt: str,
        turns: Sequence[dict[str, Any]],
        *,
        pinned: Iterable[str],
        pool: Sequence[str] = (),
        meta_blocks: Sequence[MetaBlock] | None = None,
        meta_section: Section | None = None,
    ) -> Context:
        """The context an assembly record describes, from the documents it names.

        ``meta_blocks`` are the metadata log's blocks it shows; without them (a record
        made before the log) the metadata is one section at the end, made from ``pool``.
        ``meta_section`` is the section they make, when already made.
        """
        pinned_set = set(pinned)
        masked = set(assembly["masked"])
        truncate = {k: int(v) for k, v in assembly["truncate"].items()}
        replace = assembly.get("replace") or {}
        entered = assembly.get("entered") or {}
        items = []
        for oid in assembly["active"]:
            m, doc = meta[oid], replaced(docs[oid], replace.get(oid))
            text, tokens, h, truncated = self.render_item(
                oid, doc, m, masked=oid in masked, truncate=truncate.get(oid)
            )
            items.append(
                ContextItem(
                    id=oid,
                    type=m.type,
                    label=inline(m.path or m.args_display or oid),
                    tokens=tokens,
                    text=text,
                    hash=h,
                    masked=oid in masked,
                    truncated=truncated,
                    pinned=oid in pinned_set,
                    entered=int(entered.get(oid, 0)),
                    tool=m.tool,
                    args=(
                        inline(stable_stringify(redact_data(shown_call(doc)[1])))
                        if m.type == "toolcall"
                        else None
                    ),
                )
            )
        active_text = "".join(it.text for it in items)
        active = Section("active", active_text, sum(it.tokens for it in items), tuple(items), "")
        system = self.system_section(system_prompt)
        if meta_blocks is None:
            metadata = self.metadata_section(set(assembly["active"]), pinned_set, meta, pool)
        else:
            metadata = meta_section or section_of(meta_blocks)
        sections = (system, metadata, active, self.chat_section(turns))
        # The record says which items were read in the head; a record older than the
        # "head" key read every pinned item there.
        head = set(assembly["head"]) if "head" in assembly else pinned_set
        layout = self.layout(system, items, turns, metadata, head=head, blocks=meta_blocks)
        ctx = Context(
            sections=sections,
            turn=assembly["turn"],
            strategy=assembly["strategy"],
            budget=assembly["budget"],
            evicted=tuple(assembly["evicted"]),
            over_budget=(
                assembly["budget"] is not None
                and sum(s.tokens for s in sections) > assembly["budget"]
            ),
            # to_messages() sends the turns themselves: redacted like the chat section.
            chat=tuple({**t, "content": redact_text(t["content"])} for t in turns),
            layout=layout,
            change_source=(assembly, meta),
        )
        object.__setattr__(ctx, "hash", Context.compute_hash(sections, layout))
        return ctx

    def layout(
        self,
        system: Section,
        items: Sequence[ContextItem],
        turns: Sequence[Mapping[str, Any]],
        metadata: Section,
        *,
        head: set[str],
        blocks: Sequence[MetaBlock] | None = None,
    ) -> tuple[Segment, ...]:
        """The reading order: system, head items, then items, metadata blocks and turns
        in the order they entered (append-only).

        Without ``blocks`` (a record made before the metadata log) the metadata is one
        volatile segment at the end.
        """
        text = system.text if not system.text or system.text.endswith("\n") else system.text + "\n"
        out = [Segment("system", 0, text, system.tokens, system.hash, head=True)]
        by_turn: dict[int, list[int]] = {}
        for i, it in enumerate(items):
            if it.id in head:
                out.append(Segment("item", i, it.text, it.tokens, it.hash, head=True))
            else:
                by_turn.setdefault(min(max(it.entered, 0), len(turns)), []).append(i)
        placed = place_blocks(
            blocks or (), {k: [items[i].id for i in v] for k, v in by_turn.items()}, len(turns)
        )

        def add_blocks(k: int, n: int) -> None:
            for b in placed.get((k, n), ()):
                blk = (blocks or ())[b]
                out.append(Segment("metadata", b, blk.text, blk.tokens, blk.hash))

        for k in range(len(turns) + 1):
            slot = by_turn.get(k, ())
            add_blocks(k, 0)
            for n, i in enumerate(slot, 1):
                it = items[i]
                out.append(Segment("item", i, it.text, it.tokens, it.hash))
                add_blocks(k, n)
            if k < len(turns):
                t_text, t_tokens, t_hash = self.turn_block(turns[k])
                out.append(Segment("turn", k, t_text, t_tokens, t_hash))
        if blocks is None:
            out.append(
                Segment("metadata", 0, metadata.text, metadata.tokens, metadata.hash, stable=False)
            )
        return tuple(out)


def replaced(doc: Mapping[str, Any], text: str | None) -> Mapping[str, Any]:
    """``doc`` as a strategy's replacement shows it (the stored object is unchanged)."""
    if text is None:
        return doc
    return {**doc, "content": text, "content_hash": "replaced:" + sha256_hex(text)}


def context_at(
    store: ObjectStore,
    session_id: str,
    turn: int,
    *,
    assembler: Assembler,
    reverse_resolve: Callable[[str, str | None], str],
) -> Context:
    """Rebuild, from the store's history alone, the context the model saw at ``turn``.

    Uses the last assembly recorded at that turn; files that changed since are read
    as they were then, and the metadata log is cut where that assembly saw it.

    Raises:
        NotFoundError: when no context was assembled (with ``record=True``) at that turn.
    """
    chosen = recorded_assembly(store, session_id, turn)
    sdoc = chosen.doc
    assembly = sdoc["assembly"]
    tx = assembly["tx_id"]
    pool = sdoc["metadata_pool"]
    docs = {}
    for oid in set(pool) | set(assembly["active"]):
        d = store.as_of(oid, tx) if tx else None
        if d is not None:
            docs[oid] = d
    orphaned = set(assembly.get("orphaned", []))
    meta = {
        oid: meta_for(d, orphaned=oid in orphaned, reverse_resolve=reverse_resolve)
        for oid, d in docs.items()
    }
    for oid, text in (assembly.get("overlays") or {}).items():
        if oid in docs:  # the metadata line, as live, describes the stored file
            docs[oid] = with_active_copy(docs[oid], text)
    chat = store.as_of(sdoc["chat_ref"], chosen.tx_id) if sdoc.get("chat_ref") else None
    turns = (chat or {}).get("turns", [])[:turn]
    sp_ref = sdoc.get("system_prompt_ref")
    sp = store.as_of(sp_ref, chosen.tx_id) if sp_ref else None
    blocks = None
    if "metadata_blocks" in assembly:  # recorded with the metadata log
        log = (sdoc.get("metadata_log") or [])[: int(assembly["metadata_blocks"])]
        blocks = render_log(log, shown=set(assembly["active"]), counter=assembler.token_counter)
    return assembler.build(
        assembly,
        docs,
        meta,
        (sp or {}).get("content", ""),
        turns,
        pinned=sdoc["pinned_set"],
        pool=pool,
        meta_blocks=blocks,
    )


def _plan_text(doc: Mapping[str, Any]) -> str:
    """A relation store's plan as the indented task list the model reads."""
    try:
        return RelationStore.from_doc(dict(doc)).to_context()
    except CtxnbError as exc:  # a malformed plan is shown as such, not hidden
        return f"(unreadable plan: {exc})"
