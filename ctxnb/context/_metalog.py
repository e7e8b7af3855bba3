"""The metadata of a session's objects as an append-only log the prompt grows with.

The model sees one line per object of the metadata pool (path, size, flags). Shown as
one block at the end of the prompt, those lines would change every step (a new tool
call, a flag) and a provider's prefix cache could never serve them. Instead a session
keeps a log of *blocks*: at each assembly, the lines that are new or changed since
the line last shown for their object form a new block, placed where the step's new
items are. A line once shown stays where it is; a change appends the object's new line
to a later block, and the latest line of an object is the one that holds. Under
``KeepAll`` the prompt of one step is then a prefix of the next step's.

A block is stored as ``{"turn": k, "after": id | None, "ids": [id, ...], "heads": "…",
"flags": "…"}``: ``turn`` is the number of chat turns when it was made and ``after`` the
last item that had entered at that turn (None: before any), so that the layout puts it
back in the same place; ``heads`` and ``flags`` hold each line's head and its flags
(comma-separated), one line each, joined by newlines (a head is one line, see
:func:`~ctxnb.context.inline`): flat strings keep a session's saves cheap. The log
is saved with the session (``metadata_log``) and an assembly record keeps how many
blocks it showed (``metadata_blocks``), so a past context is rebuilt exactly.

The one thing a strategy changes is the ``active`` flag: an item it leaves out is not
active in that context, so the latest line of such an item loses the flag there (the
block is rewritten in place; the item's own place changed at the same point anyway).

Example:
    >>> from ctxnb.llm.tokens import HeuristicTokenCounter
    >>> log = [make_block(1, None, [("a", "- file a.py (python, 5 chars)", ("active",))]),
    ...        make_block(2, "t", [("a", "- file a.py (python, 9 chars)", ("active",))])]
    >>> blocks = render_log(log, shown={"a"}, counter=HeuristicTokenCounter())
    >>> print(blocks[0].text + blocks[1].text, end="")
    Objects in this session:
    - file a.py (python, 5 chars) [active]
    Objects in this session, new or changed:
    - file a.py (python, 9 chars) [active]
    >>> render_log(log, shown=set(), counter=HeuristicTokenCounter())[1].text.splitlines()[1]
    '- file a.py (python, 9 chars)'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..hashing import sha256_hex
from ..llm.tokens import TokenCounter
from ._assemblystate import AssemblyState, meta_line
from ._model import Section

__all__ = [
    "META_HEADER",
    "META_UPDATE_HEADER",
    "MetaBlock",
    "MetaLog",
    "block_lines",
    "make_block",
    "place_blocks",
    "render_log",
    "section_of",
]

META_HEADER = "Objects in this session:\n"
META_UPDATE_HEADER = "Objects in this session, new or changed:\n"

# (block index, line index, head, flags) of an object's latest line in the log
_Latest = tuple[int, int, str, tuple[str, ...]]
_Line = tuple[str, str, tuple[str, ...]]  # (id, head, flags)


def make_block(turn: int, after: str | None, lines: Sequence[_Line]) -> dict[str, Any]:
    """A block of the log as the session stores it (see the module's docstring)."""
    return {
        "turn": turn,
        "after": after,
        "ids": [oid for oid, _, _ in lines],
        "heads": "\n".join(head for _, head, _ in lines),
        "flags": "\n".join(",".join(flags) for _, _, flags in lines),
    }


def block_lines(raw: Mapping[str, Any]) -> list[_Line]:
    """The lines of a stored block: (id, head, flags)."""
    ids = raw["ids"]
    if not ids:
        return []
    heads, flags = raw["heads"].split("\n"), raw["flags"].split("\n")
    rows = zip(ids, heads, flags, strict=True)
    return [(o, h, tuple(f.split(",")) if f else ()) for o, h, f in rows]


@dataclass(frozen=True)
class MetaBlock:
    """One block of the metadata log as rendered for one context."""

    turn: int
    after: str | None
    text: str
    tokens: int
    hash: str


class _Lines:
    """Lines' texts and token counts, counted once each (a block's tokens are its
    header's and its lines', each with its newline, as the pool's always were)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._tokens: dict[str, int] = {}

    def tokens(self, line: str) -> int:
        n = self._tokens.get(line)
        if n is None:
            if len(self._tokens) > 100_000:
                self._tokens.clear()
            n = self._tokens[line] = self.counter.count(line) + 1
        return n

    def block(
        self, index: int, raw: Mapping[str, Any], lines: Sequence[str] | None = None
    ) -> tuple[MetaBlock, list[str]]:
        """A block and its lines (``lines``: already made, with any override)."""
        if lines is None:
            lines = [meta_line(head, flags) for _, head, flags in block_lines(raw)]
        header = META_HEADER if index == 0 else META_UPDATE_HEADER
        text = header + "".join(line + "\n" for line in lines)
        tokens = self.tokens(header[:-1]) + sum(self.tokens(line) for line in lines)
        blk = MetaBlock(int(raw["turn"]), raw.get("after"), text, tokens, sha256_hex(text))
        return blk, list(lines)


def section_of(blocks: Sequence[MetaBlock]) -> Section:
    """The metadata section of a context: its blocks in order (hashed by their hashes)."""
    return Section(
        "metadata",
        "".join(b.text for b in blocks),
        sum(b.tokens for b in blocks),
        (),
        sha256_hex("".join(b.hash for b in blocks)),
    )


def _latest(log: Sequence[Mapping[str, Any]], start: int, into: dict[str, _Latest]) -> None:
    for i in range(start, len(log)):
        for n, (oid, head, flags) in enumerate(block_lines(log[i])):
            into[oid] = (i, n, head, flags)


def _inactive(
    latest: Mapping[str, _Latest], candidates: Iterable[str], shown: set[str]
) -> dict[int, list[tuple[int, str]]]:
    """Per block, the lines (index, text) that lose their ``active`` flag: the latest
    line of an object flagged active that the context does not show."""
    out: dict[int, list[tuple[int, str]]] = {}
    for oid in candidates:
        hit = latest.get(oid)
        if hit is not None and "active" in hit[3] and oid not in shown:
            flags = [f for f in hit[3] if f != "active"]
            out.setdefault(hit[0], []).append((hit[1], meta_line(hit[2], flags)))
    return out


def _override(lines: list[str], changes: Iterable[tuple[int, str]]) -> list[str]:
    out = list(lines)
    for n, text in changes:
        out[n] = text
    return out


def render_log(
    log: Sequence[Mapping[str, Any]], *, shown: set[str], counter: TokenCounter
) -> list[MetaBlock]:
    """Every block of ``log`` as a context that shows the items ``shown`` renders it."""
    latest: dict[str, _Latest] = {}
    _latest(log, 0, latest)
    off = _inactive(latest, latest, shown)
    lines = _Lines(counter)
    out = []
    for i, raw in enumerate(log):
        made = [meta_line(head, flags) for _, head, flags in block_lines(raw)]
        out.append(lines.block(i, raw, _override(made, off.get(i, ())))[0])
    return out


class MetaLog:
    """A session's view of its metadata log: what changed, and the rendered blocks.

    One per session (kept by :class:`~ctxnb.context.Assembler`). The log itself is the
    session's list (``AssemblyState.meta_log``); this keeps the latest line of every
    object and each block's rendering, so an assembly costs the changed lines only.
    """

    def __init__(self, token_counter: TokenCounter) -> None:
        self.token_counter = token_counter
        self._log: list[dict[str, Any]] | None = None
        self._latest: dict[str, _Latest] = {}
        self._rendered: list[MetaBlock] = []
        self._lines: list[list[str]] = []  # each block's lines, as rendered
        self._count = _Lines(token_counter)
        self._section: tuple[tuple[str, ...], Section] | None = None
        self._pos: dict[str, int] = {}  # pool order
        self._pool_seen = 0
        self._dirty: set[str] = set()

    def mark(self, oid: str) -> None:
        """The line of ``oid`` (its entry or its flags) may have changed."""
        self._dirty.add(oid)

    def mark_many(self, ids: Iterable[str]) -> None:
        self._dirty.update(ids)

    def _sync(self, log: list[dict[str, Any]]) -> None:
        if log is not self._log or len(log) < len(self._rendered):
            # Another log (a resumed session's): start over from it, and compare every
            # object's line with what that log last showed.
            self._log, self._latest, self._rendered, self._lines = log, {}, [], []
            self._pool_seen = 0
        start = len(self._rendered)
        _latest(log, start, self._latest)
        for i in range(start, len(log)):
            blk, lines = self._count.block(i, log[i])
            self._rendered.append(blk)
            self._lines.append(lines)

    def update(self, state: AssemblyState) -> None:
        """Append a block with the lines that are new or changed since last shown."""
        log = state.meta_log
        self._sync(log)
        for oid in state.pool[self._pool_seen :]:
            self._pos.setdefault(oid, len(self._pos))
            self._dirty.add(oid)
        self._pool_seen = len(state.pool)
        pos, meta = self._pos, state.meta
        lines: list[_Line] = []
        for oid in sorted((o for o in self._dirty if o in pos and o in meta), key=pos.__getitem__):
            m = meta[oid]
            head = m.head()
            flags = m.flags(active=oid in state.active, pinned=oid in state.pinned)
            hit = self._latest.get(oid)
            if hit is None or hit[2:] != (head, flags):
                lines.append((oid, head, flags))
        self._dirty.clear()
        if not lines:
            return
        turn = len(state.turns)
        log.append(make_block(turn, _anchor(state, turn), lines))
        self._sync(log)

    def blocks(
        self, state: AssemblyState, *, evicted: Iterable[str], shown: set[str]
    ) -> tuple[list[MetaBlock], Section]:
        """The log's blocks for a context showing ``shown`` (``evicted`` lose their
        flag), and the metadata section they make."""
        self._sync(state.meta_log)
        out = list(self._rendered)
        for i, changes in _inactive(self._latest, evicted, shown).items():
            lines = _override(self._lines[i], changes)
            out[i] = self._count.block(i, state.meta_log[i], lines)[0]
        key = tuple(b.hash for b in out)
        if self._section is None or self._section[0] != key:
            self._section = (key, section_of(out))
        return out, self._section[1]

    def tokens(self, state: AssemblyState) -> int:
        """Tokens of every block as the session state flags them (an upper bound)."""
        self._sync(state.meta_log)
        return sum(b.tokens for b in self._rendered)


def _anchor(state: AssemblyState, turn: int) -> str | None:
    """The item a block made now follows: the last to enter at ``turn`` outside the head."""
    best: tuple[int, str] | None = None
    for oid in state.active:
        if state.in_head(oid) or state.entered.get(oid, 0) < turn:
            continue
        key = (state.seq.get(oid, 0), oid)
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


def place_blocks(
    blocks: Sequence[MetaBlock], slot_items: Mapping[int, Sequence[str]], turns: int
) -> dict[tuple[int, int], list[int]]:
    """Where each block goes: ``(turn, n)`` -> block indexes, to read after the first
    ``n`` items that entered at that turn (of ``turns`` so far).

    A block follows its ``after`` item; when that item is not shown in that place (a
    strategy left it out, or it moved), the block stays right after the block before
    it, where the item was. Blocks never change their order.
    """
    out: dict[tuple[int, int], list[int]] = {}
    prev: tuple[int, int] = (-1, 0)
    where: dict[int, dict[str, int]] = {}
    for i, b in enumerate(blocks):
        turn = min(max(b.turn, 0), turns)
        if turn not in where:
            where[turn] = {oid: n for n, oid in enumerate(slot_items.get(turn, ()))}
        ids = where[turn]
        if b.after is None:
            n = 0
        elif b.after in ids:
            n = ids[b.after] + 1
        else:
            n = prev[1] if prev[0] == turn else 0
        if prev[0] == turn:
            n = max(n, prev[1])
        prev = (turn, n)
        out.setdefault(prev, []).append(i)
    return out
