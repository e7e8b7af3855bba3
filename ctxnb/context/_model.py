"""The assembled context: exactly what the model sees at one turn (DESIGN §6).

A context has four sections -- the system prompt, the metadata section (one line per
object in the pool), the active content (each item in its own framed block, see
:mod:`ctxnb.context._framing`) and the chat -- and a *layout*: the order in which the
model reads them. The layout is cache-aware (see ``docs/context.md``): a stable prefix
first (the system prompt, then pinned items such as rules), then the items and the
chat turns in the order they entered, append-only, with the metadata lines placed the
same way: each step's new or changed lines form a block where that step's items are
(:mod:`ctxnb.context._metalog`), so that consecutive prompts share the longest
possible prefix.

Example:
    >>> ctx = Context((Section("system", "Be brief.", 3),), 0, {"name": "keep-all"}, None)
    >>> print(ctx.to_text())
    ## system
    Be brief.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._changes import ContextChange

__all__ = ["Context", "ContextItem", "Section", "Segment"]

SECTION_ORDER = ("system", "metadata", "active", "chat")


@dataclass(frozen=True)
class ContextItem:
    """One object as it appears in the context.

    Attributes:
        id: the object id.
        type: ``file`` or ``toolcall``.
        label: the path or the call, on one line.
        tokens: tokens of its framed block.
        text: its framed block.
        hash: a digest of ``text``.
        masked: its content was replaced by a placeholder.
        truncated: its content was cut.
        pinned: a strategy cannot leave it out.
        version: the store transaction of the version shown, when known.
        entered: the number of chat turns when it entered the context (its place).
        tool: a tool call's tool.
        args: a tool call's arguments as canonical JSON on one line.
    """

    id: str
    type: str
    label: str
    tokens: int
    text: str
    hash: str
    masked: bool = False
    truncated: bool = False
    pinned: bool = False
    version: int | None = None
    entered: int = 0
    tool: str | None = None
    args: str | None = None


@dataclass(frozen=True)
class Section:
    """One section of the context: system, metadata, active or chat."""

    name: str
    text: str
    tokens: int
    items: tuple[ContextItem, ...] = ()
    hash: str = ""


@dataclass(frozen=True)
class Segment:
    """One piece of the layout, in reading order.

    Attributes:
        kind: ``system``, ``item``, ``turn`` or ``metadata``.
        index: the item's index in ``Context.items`` or the turn's in ``Context.chat``.
        text: what the model reads.
        tokens: its tokens.
        hash: a digest of ``text`` (equal segments share a cached prefix).
        stable: False for a volatile tail: the whole metadata pool at the end, as
            contexts recorded before the metadata log were laid out.
        head: True for the system part: the system prompt, then pinned items and rules.
    """

    kind: Literal["system", "item", "turn", "metadata"]
    index: int
    text: str
    tokens: int
    hash: str
    stable: bool = True
    head: bool = False


@dataclass(frozen=True)
class Context:
    """What the model sees at one turn.

    Attributes:
        sections: system, metadata, active and chat (their texts and token counts).
        turn: the number of chat turns when it was assembled.
        strategy: the strategy's description (name, class, parameters).
        budget: the token budget it was assembled under (None: no limit).
        evicted: ids the strategy or the budget left out.
        over_budget: True when pinned items alone exceed the budget.
        chat: the chat turns (``role``, ``content``).
        hash: a digest of every section, item and the layout; equal contexts have
            equal hashes.
        layout: the segments in reading order (empty for a context built by hand from
            sections: it then reads section by section).
        change_source: what :attr:`changes` is read from (the assembly record).
    """

    sections: tuple[Section, ...]
    turn: int
    strategy: dict[str, Any]
    budget: int | None
    evicted: tuple[str, ...] = ()
    over_budget: bool = False
    chat: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    hash: str = ""
    layout: tuple[Segment, ...] = field(default=(), repr=False)
    # (assembly record, metadata of its items): ``changes`` is built from it when read.
    change_source: tuple[Mapping[str, Any], Mapping[str, Any]] | None = field(
        default=None, repr=False, compare=False
    )

    @staticmethod
    def compute_hash(sections: tuple[Section, ...], layout: tuple[Segment, ...] = ()) -> str:
        h = hashlib.sha256()
        for s in sections:
            h.update(s.name.encode())
            h.update(b"\x00")
            h.update(s.hash.encode())
            for it in s.items:
                h.update(it.hash.encode())
            h.update(b"\x01")
        for seg in layout:
            h.update(f"{seg.kind}:{seg.index}:{seg.hash}\x02".encode())
        return h.hexdigest()

    @property
    def changes(self) -> tuple[ContextChange, ...]:
        """What the strategy and the budget did to each candidate item
        (:class:`~ctxnb.context.ContextChange`; empty for a context built by hand).

        Built when first read: most assemblies are never audited.
        """
        done = self.__dict__.get("_changes")
        if done is None:
            from ._changes import changes_from_record

            src = self.change_source
            done = () if src is None else changes_from_record(*src)
            object.__setattr__(self, "_changes", done)
        return done

    # -- views ---------------------------------------------------------------------------
    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(f"no section {name!r}; sections: {[s.name for s in self.sections]}")

    @property
    def items(self) -> list[ContextItem]:
        """The content items (active section) in reading order."""
        return list(self.section("active").items)

    @property
    def total_tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    @property
    def stable_tokens(self) -> int:
        """Tokens of the stable prefix: everything before the volatile tail."""
        return sum(seg.tokens for seg in self.layout if seg.stable)

    def item_tokens(self) -> dict[str, int]:
        """Tokens per content item id."""
        return {it.id: it.tokens for it in self.items}

    def tokens_by_section(self) -> dict[str, int]:
        return {s.name: s.tokens for s in self.sections}

    def to_text(self) -> str:
        """The whole context as one plain text, in reading order."""
        if self.layout:
            return "".join(seg.text for seg in self.layout)
        parts = []
        for s in self.sections:
            if s.text:
                parts.append(f"## {s.name}\n{s.text}")
        return "\n".join(parts)

    def to_messages(
        self,
        format: Literal["openai", "anthropic"] = "openai",
        *,
        cache: bool = True,
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The context as a chat transcript: OpenAI's message list or Anthropic's request.

        The system message holds the system prompt and the pinned items; then come the
        chat turns, the assistant's tool calls and their results, the files and the
        blocks of the metadata log (user messages) in the order they entered. With
        ``cache=True`` the Anthropic form marks the end of the system part and of the
        stable transcript with ``cache_control`` breakpoints (OpenAI caches prefixes
        without markers). See :func:`ctxnb.context.to_messages`.

        Args:
            format: ``"openai"`` (a list of messages) or ``"anthropic"``
                (``{"system": [...], "messages": [...]}``).
            cache: mark cache breakpoints where the provider supports them.
        """
        from ._messages import to_messages

        return to_messages(self, format, cache=cache)

    def __repr__(self) -> str:
        return (
            f"<Context turn={self.turn} strategy={self.strategy.get('name')} "
            f"items={len(self.items)} tokens={self.total_tokens} hash={self.hash[:12]}>"
        )

    def _repr_html_(self) -> str:
        total = max(1, self.total_tokens)
        colors = {
            "system": "#6c8ebf",
            "metadata": "#d6b656",
            "active": "#82b366",
            "chat": "#b85450",
        }
        bar = "".join(
            f'<div title="{s.name}: {s.tokens} tokens" style="display:inline-block;height:12px;'
            f'width:{100 * s.tokens / total:.2f}%;background:{colors.get(s.name, "#999")}"></div>'
            for s in self.sections
        )
        budget = f" / budget {self.budget}" if self.budget else ""
        rows = "".join(
            f"<tr><td>{html.escape(it.label)}</td><td>{it.type}</td><td>{it.tokens}</td>"
            f"<td>{'masked' if it.masked else ('truncated' if it.truncated else '')}</td></tr>"
            for it in self.items[:50]
        )
        more = f"<p>… {len(self.items) - 50} more items</p>" if len(self.items) > 50 else ""
        legend = " ".join(f"{s.name} {s.tokens}" for s in self.sections)
        return (
            f"<div><b>Context</b> turn {self.turn}, strategy "
            f"{html.escape(str(self.strategy.get('name')))}, {self.total_tokens} tokens{budget}"
            f'<div style="width:100%;border:1px solid #ccc">{bar}</div><small>{legend}</small>'
            f"<table><tr><th>item</th><th>type</th><th>tokens</th><th></th></tr>{rows}</table>"
            f"{more}<small>hash {self.hash[:16]}</small></div>"
        )
