"""The assembled context: exactly what the model sees at one turn (DESIGN §6).

Sections come in a fixed order: the system prompt, the metadata section (one line per
object in the pool), the active content (each item in its own delimited block, see
:mod:`ctxnb.context._framing`) and the chat.

Example:
    >>> ctx = Context((Section("system", "Be brief.", 3),), 0, {"name": "keep-all"}, None)
    >>> print(ctx.to_text())
    ## system
    Be brief.
"""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Context", "ContextItem", "Section"]

SECTION_ORDER = ("system", "metadata", "active", "chat")


@dataclass(frozen=True)
class ContextItem:
    """One object as it appears in the context."""

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


@dataclass(frozen=True)
class Section:
    """One section of the context, in order: system, metadata, active, chat."""

    name: str
    text: str
    tokens: int
    items: tuple[ContextItem, ...] = ()
    hash: str = ""


@dataclass(frozen=True)
class Context:
    """What the model sees at one turn.

    Attributes:
        sections: system, metadata, active and chat, in that order.
        turn: the number of chat turns when it was assembled.
        strategy: the strategy's description (name, class, parameters).
        budget: the token budget it was assembled under (None: no limit).
        evicted: ids the strategy or the budget left out.
        over_budget: True when pinned items alone exceed the budget.
        hash: a digest of every section and item; equal contexts have equal hashes.
    """

    sections: tuple[Section, ...]
    turn: int
    strategy: dict[str, Any]
    budget: int | None
    evicted: tuple[str, ...] = ()
    over_budget: bool = False
    chat: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    hash: str = ""

    @staticmethod
    def compute_hash(sections: tuple[Section, ...]) -> str:
        h = hashlib.sha256()
        for s in sections:
            h.update(s.name.encode())
            h.update(b"\x00")
            h.update(s.hash.encode())
            for it in s.items:
                h.update(it.hash.encode())
            h.update(b"\x01")
        return h.hexdigest()

    # -- views ---------------------------------------------------------------------------
    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(f"no section {name!r}; sections: {[s.name for s in self.sections]}")

    @property
    def items(self) -> list[ContextItem]:
        """The content items (active section) in order."""
        return list(self.section("active").items)

    @property
    def total_tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    def item_tokens(self) -> dict[str, int]:
        """Tokens per content item id."""
        return {it.id: it.tokens for it in self.items}

    def tokens_by_section(self) -> dict[str, int]:
        return {s.name: s.tokens for s in self.sections}

    def to_text(self) -> str:
        """The whole context as one plain text."""
        parts = []
        for s in self.sections:
            if s.text:
                parts.append(f"## {s.name}\n{s.text}")
        return "\n".join(parts)

    def _system_text(self) -> str:
        return "\n".join(
            s.text for s in self.sections if s.name in ("system", "metadata", "active") and s.text
        )

    def to_messages(
        self, format: Literal["openai", "anthropic"] = "openai"
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """Chat messages: OpenAI's list, or Anthropic's ``{"system", "messages"}``.

        The system prompt, the metadata section and the active content form the system
        part; the chat turns follow as messages.
        """
        turns = [
            {"role": t["role"], "content": t["content"]}
            for t in self.chat
            if t.get("role") in ("user", "assistant")
        ]
        if format == "openai":
            return [{"role": "system", "content": self._system_text()}, *turns]
        if format == "anthropic":
            return {"system": self._system_text(), "messages": turns}
        raise ValueError(f"unknown message format {format!r}; use 'openai' or 'anthropic'")

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
