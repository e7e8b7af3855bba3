"""How much of a prompt a provider's prefix cache can serve from the previous prompt.

Providers cache prompt prefixes (Anthropic at ``cache_control`` breakpoints, OpenAI
automatically): the tokens a prompt shares, from its start, with the previous one are
read from the cache at about a tenth of the price, the rest are new. :func:`prefix_reuse`
measures that for two consecutive contexts from their layouts, segment by segment: the
shared prefix runs until the first segment whose text differs.

Example:
    >>> from ctxnb.context import Context, Segment
    >>> def ctx(*segs):
    ...     return Context((), 0, {}, None, layout=tuple(Segment("item", i, t, n, t)
    ...                                                 for i, (t, n) in enumerate(segs)))
    >>> r = prefix_reuse(ctx(("a", 10), ("b", 5)), ctx(("a", 10), ("b", 5), ("c", 5)))
    >>> (r.shared, r.new, r.ratio)
    (15, 5, 0.75)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._model import Context

__all__ = ["PrefixReuse", "prefix_reuse"]


@dataclass(frozen=True)
class PrefixReuse:
    """Tokens of a prompt shared with the previous prompt's prefix, and the rest.

    Attributes:
        shared: tokens from the start that equal the previous prompt's (cache-readable).
        new: the other tokens of this prompt.
        total: ``shared + new``.
    """

    shared: int
    new: int

    @property
    def total(self) -> int:
        return self.shared + self.new

    @property
    def ratio(self) -> float:
        """``shared / total`` (0.0 for an empty prompt)."""
        return self.shared / self.total if self.total else 0.0


def prefix_reuse(prev: Context | None, cur: Context) -> PrefixReuse:
    """The tokens of ``cur`` a prefix cache could serve after ``prev`` was sent.

    Segments (the system part, each item, each chat turn, each block of the metadata
    log) are compared in reading order by their hashes; the shared prefix ends at the
    first difference.
    Contexts built by hand without a layout share nothing.

    Args:
        prev: the previous step's context (None: the first step, nothing is cached).
        cur: this step's context.
    """
    shared = 0
    if prev is not None:
        for a, b in zip(prev.layout, cur.layout, strict=False):
            if a.hash != b.hash or a.kind != b.kind:
                break
            shared += b.tokens
    total = sum(seg.tokens for seg in cur.layout)
    return PrefixReuse(shared=shared, new=total - shared)
