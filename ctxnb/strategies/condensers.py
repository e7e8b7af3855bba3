"""Condensing strategies researchers compare: a token-triggered condenser and a hybrid.

- :class:`TokenCondenser` (OpenHands' condenser): nothing changes until the shown
  context passes ``max_tokens``; then the oldest tool outputs (all but the last
  ``keep_last``) are condensed at once into one summary, which stays as it is until
  the next time the context overflows. Between two condensations the prompt only grows
  at its end, so a prefix cache serves it.
- :class:`MaskingSummaryHybrid` ("The Complexity Trap", Lindenbauer et al., 2025):
  observation masking of all but the last ``keep_last`` outputs at every step, and,
  once ``summarize_after`` outputs have piled up since the last summary, one summary
  of the older ones (the paper's hybrid masks with a window of 10 and summarizes every
  43 turns).

Both take any summarizer with the signature ``(label, text, max_tokens) -> str`` (the
extractive outline by default; :class:`ctxnb.llm.calls.LiteLLMSummarizer` for a model). A
condensed block shows as its summary in place of its first output; its other outputs
are masked (one line each), so the model still sees which calls were made.

Example:
    >>> from ctxnb.strategies import Item, StrategyInput
    >>> items = tuple(Item(f"t{n}", "toolcall", tokens=400, seq=n, tool="bash",
    ...                    content="x\\n" * 400) for n in range(6))
    >>> sel = TokenCondenser(max_tokens=2000, keep_last=2).select(
    ...     StrategyInput(items, None, 6))
    >>> sorted(sel.replace), sorted(sel.masked)
    (['t0'], ['t1', 't2', 't3'])
"""

from __future__ import annotations

from collections.abc import Callable

from .builtin import Item, Selection, StrategyInput

__all__ = ["MaskingSummaryHybrid", "TokenCondenser"]

Summarizer = Callable[[str, str, int], str]


class _Blocks:
    """Condensed blocks of one run: (ids, summary), oldest first."""

    def __init__(self, summarizer: Summarizer | None, summary_tokens: int) -> None:
        from .summaries import OutlineSummarizer

        self.summarizer = summarizer or OutlineSummarizer()
        self.summary_tokens = summary_tokens
        self._blocks: list[tuple[tuple[str, ...], str]] = []

    def condensed(self, items: dict[str, Item]) -> list[tuple[tuple[str, ...], str]]:
        # Blocks of another run (a strategy object replayed over many) do not apply.
        return [(ids, s) for ids, s in self._blocks if ids and ids[0] in items]

    def add(self, block: list[Item]) -> None:
        if not block:
            return
        text = "\n\n".join(f"$ {i.tool or i.path or i.id}\n{i.content or ''}" for i in block)
        label = f"{len(block)} earlier tool outputs"
        self._blocks.append(
            (tuple(i.id for i in block), self.summarizer(label, text, self.summary_tokens))
        )

    def selection(self, inp: StrategyInput, masked: set[str]) -> Selection:
        items = {i.id: i for i in inp.items}
        replace: dict[str, str] = {}
        condensed: dict[str, str] = {}
        for ids, summary in self.condensed(items):
            replace[ids[0]] = summary
            masked.update(ids[1:])
            condensed.update(dict.fromkeys((i for i in ids if i in items), ids[0]))
        masked -= set(replace)
        return Selection(
            active=[i.id for i in inp.items],
            masked=[i.id for i in inp.items if i.id in masked],
            replace=replace,
            condensed=condensed,
        )

    def done(self, items: dict[str, Item]) -> set[str]:
        return {i for ids, _ in self.condensed(items) for i in ids}

    def take_usage(self) -> tuple[int, float]:
        take = getattr(self.summarizer, "take_usage", None)
        return take() if callable(take) else (0, 0.0)


def _outputs(inp: StrategyInput) -> list[Item]:
    return sorted(
        (i for i in inp.items if i.type == "toolcall" and not i.pinned), key=lambda i: i.seq
    )


class _Condensing:
    """What both condensers share: their blocks, the summarizer's usage, pickling."""

    summary_tokens: int
    _blocks: _Blocks

    def take_usage(self) -> tuple[int, float]:
        """(tokens, dollars) the summarizer spent since the last call, when it counts them."""
        return self._blocks.take_usage()

    def __getstate__(self) -> dict[str, object]:
        # Condensed blocks belong to one run: a copy sent to another process starts clean.
        state = dict(vars(self))
        state["_blocks"] = _Blocks(self._blocks.summarizer, self.summary_tokens)
        return state


class TokenCondenser(_Condensing):
    """Condense the oldest tool outputs at once when the context passes ``max_tokens``.

    Args:
        max_tokens: the content tokens (items as shown) that trigger a condensation.
        keep_last: the most recent outputs never condensed.
        summarizer: ``(label, text, max_tokens) -> str``; the extractive outline when None.
        summary_tokens: the budget of one summary.
    """

    name = "token-condenser"

    def __init__(
        self,
        max_tokens: int = 20_000,
        keep_last: int = 5,
        *,
        summarizer: Summarizer | None = None,
        summary_tokens: int = 400,
    ) -> None:
        if max_tokens < 1 or keep_last < 0 or summary_tokens < 1:
            raise ValueError(
                "TokenCondenser needs max_tokens >= 1, keep_last >= 0 and summary_tokens >= 1, "
                f"got {max_tokens}, {keep_last}, {summary_tokens}"
            )
        self.max_tokens = max_tokens
        self.keep_last = keep_last
        self.summary_tokens = summary_tokens
        self._blocks = _Blocks(summarizer, summary_tokens)

    def select(self, inp: StrategyInput) -> Selection:
        items = {i.id: i for i in inp.items}
        done = self._blocks.done(items)
        shown = sum(i.tokens for i in inp.items if i.id not in done)
        shown += len(self._blocks.condensed(items)) * self.summary_tokens
        if shown > self.max_tokens:
            fresh = [i for i in _outputs(inp) if i.id not in done]
            self._blocks.add(fresh[: max(0, len(fresh) - self.keep_last)])
        return self._blocks.selection(inp, set())

    def __repr__(self) -> str:
        return f"TokenCondenser(max_tokens={self.max_tokens}, keep_last={self.keep_last})"


class MaskingSummaryHybrid(_Condensing):
    """Observation masking every step, one summary every ``summarize_after`` outputs.

    Args:
        keep_last: outputs shown whole (the masking window).
        summarize_after: outputs not yet summarized that trigger a summary of all but
            the last ``keep_last`` of them.
        summarizer: ``(label, text, max_tokens) -> str``; the extractive outline when None.
        summary_tokens: the budget of one summary.
    """

    name = "masking-summary-hybrid"

    def __init__(
        self,
        keep_last: int = 10,
        summarize_after: int = 43,
        *,
        summarizer: Summarizer | None = None,
        summary_tokens: int = 400,
    ) -> None:
        if keep_last < 0 or summarize_after <= keep_last or summary_tokens < 1:
            raise ValueError(
                "MaskingSummaryHybrid needs keep_last >= 0, summarize_after > keep_last and "
                f"summary_tokens >= 1, got {keep_last}, {summarize_after}, {summary_tokens}"
            )
        self.keep_last = keep_last
        self.summarize_after = summarize_after
        self.summary_tokens = summary_tokens
        self._blocks = _Blocks(summarizer, summary_tokens)

    def select(self, inp: StrategyInput) -> Selection:
        items = {i.id: i for i in inp.items}
        done = self._blocks.done(items)
        fresh = [i for i in _outputs(inp) if i.id not in done]
        if len(fresh) >= self.summarize_after:
            self._blocks.add(fresh[: len(fresh) - self.keep_last])
            fresh = fresh[len(fresh) - self.keep_last :]
        masked = {i.id for i in fresh[: max(0, len(fresh) - self.keep_last)]}
        return self._blocks.selection(inp, masked)

    def __repr__(self) -> str:
        return (
            f"MaskingSummaryHybrid(keep_last={self.keep_last}, "
            f"summarize_after={self.summarize_after})"
        )
