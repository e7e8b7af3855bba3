"""A context's token usage as text: per section and per item, like Claude Code's ``/context``.

Example:
    >>> from ctxnb.context import Context, Section
    >>> ctx = Context((Section("system", "Be brief.", 3), Section("chat", "", 0)), turn=0,
    ...               strategy={"name": "keep-all"}, budget=100)
    >>> print(usage_report(ctx))
    context at turn 0 · strategy keep-all · 3 of 100 tokens (3.0%)
      system            3 tokens   3.0%
      chat              0 tokens   0.0%
      free             97 tokens  97.0%
"""

from __future__ import annotations

from ._model import Context

__all__ = ["usage_report"]


def _pct(n: int, whole: int) -> str:
    return f"{100 * n / whole:5.1f}%" if whole else "    -"


def usage_report(ctx: Context, *, items: int | None = None, title: str = "") -> str:
    """The context's tokens per section and per active item, one line each.

    Args:
        ctx: an assembled context.
        items: list at most this many items, largest first (None: all; 0: none).
        title: words to put before the first line's figures (e.g. the session id).

    Percentages are of the budget when there is one, else of the whole context.
    """
    total = ctx.total_tokens
    whole = ctx.budget or total
    head = f"{title} · " if title else ""
    budget = f" of {ctx.budget:,}" if ctx.budget else ""
    lines = [
        f"{head}context at turn {ctx.turn} · strategy {ctx.strategy.get('name', '?')} · "
        f"{total:,}{budget} tokens ({_pct(total, whole).strip()})"
        + (" · OVER BUDGET (pinned items alone)" if ctx.over_budget else "")
    ]
    for s in ctx.sections:
        n = f" ({len(s.items)} items)" if s.items else ""
        lines.append(f"  {s.name:<10} {s.tokens:>8,} tokens {_pct(s.tokens, whole)}{n}")
    if ctx.budget:
        free = max(0, ctx.budget - total)
        lines.append(f"  {'free':<10} {free:>8,} tokens {_pct(free, whole)}")
    all_items = [it for s in ctx.sections if s.name == "active" for it in s.items]
    listed = sorted(all_items, key=lambda it: (-it.tokens, it.label))
    if items is not None:
        listed = listed[:items]
    if listed:
        lines.append("active items, largest first:")
        for it in listed:
            flags = "".join(
                f" [{f}]"
                for f, on in (("pinned", it.pinned), ("masked", it.masked), ("cut", it.truncated))
                if on
            )
            lines.append(f"  {it.tokens:>8,}  {it.type:<8} {it.label}{flags}")
        hidden = len(all_items) - len(listed)
        if hidden:
            lines.append(f"  … and {hidden} more")
    if ctx.evicted:
        lines.append(f"left out by the strategy or the budget: {len(ctx.evicted)} items")
    return "\n".join(lines)
