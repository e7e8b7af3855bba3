"""Context strategies: which items of a session go into the model's context.

A strategy is a plain object with a ``name`` and a ``select(inp)`` method. It gets
the session's candidate items (the active set plus the pinned set, oldest use first,
each with its token count and, read-only, its content) and the token budget left for
content, and returns a :class:`Selection`: the ids to show in full, the ids to show as
a one-line placeholder (masked), per-item character caps, texts shown in place of an
item's content (a summary, say), and what it left out. Pinned items always stay; the
assembler checks the selection (:meth:`Selection.validate`) and enforces the budget
after the strategy, so a strategy can be simple.

Writing your own takes a few lines in a notebook cell::

    class LastTwoFiles:
        name = "last-two-files"

        def select(self, inp):
            files = [i for i in inp.items if i.type == "file"]
            keep = {i.id for i in files[-2:]} | {i.id for i in inp.items if i.pinned}
            keep |= {i.id for i in inp.items if i.type != "file"}
            return Selection.keep(inp, keep)

    ctx = session.assemble(strategy=LastTwoFiles(), budget=8000)

Example:
    >>> inp = StrategyInput(items=(
    ...     Item("a", "file", tokens=50, last_used=1),
    ...     Item("b", "file", tokens=50, last_used=2),
    ...     Item("p", "file", tokens=10, last_used=0, pinned=True)), budget=None, turn=3)
    >>> RecencyWindow(1).select(inp).active
    ['b', 'p']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..errors import SelectionError

__all__ = [
    "BlockMasking",
    "ContextStrategy",
    "FileViewLimits",
    "Item",
    "KeepAll",
    "MetadataOnly",
    "ObservationMasking",
    "RecencyWindow",
    "RuleSource",
    "RulesTiered",
    "Selection",
    "StrategyInput",
    "Summarize",
    "TokenBudgetLRU",
    "strategy_spec",
]


@dataclass(frozen=True)
class Item:
    """One candidate for the context.

    Attributes:
        id: the object id.
        type: ``file`` or ``toolcall`` (or another content type).
        tokens: tokens of its full content as rendered.
        last_used: a monotonic counter of the last time the agent touched it.
        pinned: pinned items are never left out.
        path: the agent-visible path of a file.
        tool: the tool of a toolcall.
        char_count: characters of its content.
        seq: when it first entered the active set (render order).
        content: the item's text (None: no text content). Strings are immutable, so a
            strategy can read it but not change what the session holds; to show
            something else, put it in :attr:`Selection.replace`.
    """

    id: str
    type: str
    tokens: int = 0
    last_used: int = 0
    pinned: bool = False
    path: str | None = None
    tool: str | None = None
    char_count: int = 0
    seq: int = 0
    content: str | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class StrategyInput:
    """What a strategy decides over.

    Attributes:
        items: candidates, ordered by ``last_used`` (oldest first).
        budget: tokens available for content items, or None for no limit.
        turn: the number of chat turns so far.
    """

    items: tuple[Item, ...]
    budget: int | None
    turn: int

    def by_recency(self) -> list[Item]:
        """Candidates, most recently used first."""
        return sorted(self.items, key=lambda i: i.last_used, reverse=True)


@dataclass
class Selection:
    """A strategy's decision.

    Attributes:
        active: ids shown in full.
        masked: ids shown as a one-line placeholder (their output was elided).
        truncate: id -> at most this many characters of its content.
        evicted: candidates left out.
        replace: id -> the text shown instead of its content (a summary, say). The
            stored object is unchanged; ``context_at`` shows the same text again.
        condensed: id -> the kept id whose replacement summarizes it together with
            other items (one condensed block; the head maps to itself). It changes
            nothing shown: ``session.context_changes`` reports these items as
            ``compacted`` instead of masked or summarized.
    """

    active: list[str]
    masked: list[str] = field(default_factory=list)
    truncate: dict[str, int] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)
    replace: dict[str, str] = field(default_factory=dict)
    condensed: dict[str, str] = field(default_factory=dict)

    @classmethod
    def keep(cls, inp: StrategyInput, ids: Iterable[str], **kw: object) -> Selection:
        """Keep ``ids`` (plus every pinned item), evict the rest, in candidate order."""
        keep = set(ids) | {i.id for i in inp.items if i.pinned}
        return cls(
            active=[i.id for i in inp.items if i.id in keep],
            evicted=[i.id for i in inp.items if i.id not in keep],
            **kw,  # type: ignore[arg-type]
        )

    def validate(self, items: Sequence[Item], *, strategy: str | None = None) -> None:
        """Check the selection against the candidates it was made from.

        Pinned items are not the strategy's to hide: whatever the selection says, the
        assembler shows every pinned item in full. Evicting, masking, truncating or
        replacing one is allowed here (a strategy need not know about pins) and has no
        effect on it.

        Raises:
            SelectionError: an id that is not a candidate; an id both kept and evicted;
                a masked, truncated or replaced id that is not kept; an id both masked
                and truncated or replaced; a truncation that is not a whole number of
                characters >= 0; a replacement that is not text.

        Example:
            >>> inp = StrategyInput(items=(Item("a", "toolcall"),), budget=None, turn=1)
            >>> Selection(active=["a"], masked=["b"]).validate(inp.items)
            Traceback (most recent call last):
            ...
            ctxnb.errors.SelectionError: masked names ids that are not candidates: ['b']; ...
        """
        who = f"strategy {strategy!r}: " if strategy else ""

        def fail(msg: str) -> None:
            raise SelectionError(who + msg, strategy=strategy)

        known = {i.id for i in items}
        kept = set(self.active)
        named = {
            "active": self.active,
            "masked": self.masked,
            "truncate": list(self.truncate),
            "evicted": self.evicted,
            "replace": list(self.replace),
            "condensed": list(self.condensed),
        }
        for part, ids in named.items():
            unknown = [i for i in ids if i not in known]
            if unknown:
                fail(
                    f"{part} names ids that are not candidates: {unknown[:5]}; choose among "
                    "StrategyInput.items"
                )
        both = kept & set(self.evicted)
        if both:
            fail(f"ids both kept (active) and evicted: {sorted(both)[:5]}")
        for part in ("masked", "truncate", "replace"):
            outside = [i for i in named[part] if i not in kept]
            if outside:
                fail(
                    f"{part} names ids outside the kept set: {outside[:5]}; an item must be "
                    "in Selection.active to be shown masked, truncated or replaced"
                )
        masked = set(self.masked)
        for part in ("truncate", "replace"):
            clash = sorted(masked & set(named[part]))
            if clash:
                fail(f"ids both masked and in {part}: {clash[:5]}; choose one")
        for oid, n in self.truncate.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                fail(f"truncate[{oid!r}] = {n!r}: a truncation is a number of characters >= 0")
        for oid, text in self.replace.items():
            if not isinstance(text, str):
                fail(f"replace[{oid!r}] is {type(text).__name__}: a replacement is text")
        for oid, head in self.condensed.items():
            if head not in self.replace:
                fail(
                    f"condensed[{oid!r}] = {head!r}, which has no replacement: a condensed "
                    "item names the kept item whose replace text summarizes it"
                )


@runtime_checkable
class ContextStrategy(Protocol):
    """The protocol every strategy follows."""

    name: str

    def select(self, inp: StrategyInput) -> Selection: ...


def strategy_spec(strategy: ContextStrategy) -> dict[str, object]:
    """A JSON description of a strategy (its name and public settings), for records."""
    params = {
        k: v
        for k, v in vars(strategy).items()
        if not k.startswith("_") and isinstance(v, int | float | str | bool | type(None))
    }
    return {"name": strategy.name, "class": type(strategy).__name__, "params": params}


class KeepAll:
    """Everything in the active set stays (the budget still applies at assembly)."""

    name = "keep-all"

    def select(self, inp: StrategyInput) -> Selection:
        return Selection(active=[i.id for i in inp.items])

    def __repr__(self) -> str:
        return "KeepAll()"


class RecencyWindow:
    """Only the ``n`` most recently used items (plus pins) stay."""

    name = "recency-window"

    def __init__(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"RecencyWindow(n) needs n >= 0, got {n}")
        self.n = n

    def select(self, inp: StrategyInput) -> Selection:
        recent = [i.id for i in inp.by_recency() if not i.pinned][: self.n]
        return Selection.keep(inp, recent)

    def __repr__(self) -> str:
        return f"RecencyWindow({self.n})"


class TokenBudgetLRU:
    """Most recently used first until the token budget is spent; pins count first.

    Args:
        budget: tokens for content items; None uses the budget given to ``assemble``.
    """

    name = "token-budget-lru"

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget

    def select(self, inp: StrategyInput) -> Selection:
        limits = [b for b in (self.budget, inp.budget) if b is not None]
        budget = min(limits) if limits else None
        if budget is None:
            return Selection(active=[i.id for i in inp.items])
        used = sum(i.tokens for i in inp.items if i.pinned)
        keep: list[str] = []
        for item in inp.by_recency():
            if item.pinned:
                continue
            if used + item.tokens <= budget:
                keep.append(item.id)
                used += item.tokens
        return Selection.keep(inp, keep)

    def __repr__(self) -> str:
        return f"TokenBudgetLRU({self.budget})"


class ObservationMasking:
    """Older tool outputs become a one-line placeholder; the last ``keep_last`` stay whole.

    Files stay as they are. This is the observation masking of SWE-agent and OpenHands.
    """

    name = "observation-masking"

    def __init__(self, keep_last: int = 5) -> None:
        if keep_last < 0:
            raise ValueError(f"ObservationMasking(keep_last) needs keep_last >= 0, got {keep_last}")
        self.keep_last = keep_last

    def select(self, inp: StrategyInput) -> Selection:
        calls = [i for i in inp.items if i.type == "toolcall" and not i.pinned]
        calls.sort(key=lambda i: i.seq)
        old = calls[: max(0, len(calls) - self.keep_last)]
        return Selection(active=[i.id for i in inp.items], masked=[i.id for i in old])

    def __repr__(self) -> str:
        return f"ObservationMasking(keep_last={self.keep_last})"


class BlockMasking:
    """Observation masking that keeps the prompt's prefix stable, for prompt caching.

    Sliding masking (:class:`ObservationMasking`) masks one more output at every step,
    so the prompt changes near its start every step and a provider's prefix cache
    serves almost nothing. This strategy masks in blocks: it waits until ``block``
    outputs beyond the last ``keep_last`` have piled up and masks them all at once.
    Between two such steps the prompt only grows at its end (a cache hit for all but
    the new part); a block costs one cache miss every ``block`` tool calls. Between
    ``keep_last`` and ``keep_last + block - 1`` outputs stay whole.

    Example:
        >>> items = tuple(Item(f"t{n}", "toolcall", seq=n) for n in range(14))
        >>> s = BlockMasking(keep_last=3, block=5)
        >>> len(s.select(StrategyInput(items[:12], None, 12)).masked)   # 9 old, one block
        5
        >>> len(s.select(StrategyInput(items[:14], None, 14)).masked)   # 11 old, two blocks
        10
    """

    name = "block-masking"

    def __init__(self, keep_last: int = 5, block: int = 10) -> None:
        if keep_last < 0 or block < 1:
            raise ValueError(
                f"BlockMasking needs keep_last >= 0 and block >= 1, got {keep_last}, {block}"
            )
        self.keep_last = keep_last
        self.block = block

    def select(self, inp: StrategyInput) -> Selection:
        old = _older(inp, ("toolcall",), self.keep_last, self.block)
        return Selection(active=[i.id for i in inp.items], masked=[i.id for i in old])

    def __repr__(self) -> str:
        return f"BlockMasking(keep_last={self.keep_last}, block={self.block})"


def _older(inp: StrategyInput, types: Iterable[str], keep_last: int, block: int) -> list[Item]:
    """Unpinned items of ``types`` beyond the last ``keep_last``, whole blocks of ``block``."""
    kinds = set(types)
    items = sorted((i for i in inp.items if i.type in kinds and not i.pinned), key=lambda i: i.seq)
    old = max(0, len(items) - keep_last)
    return items[: old - old % block]


class Summarize:
    """Older items are shown as a summary; the last ``keep_last`` stay whole.

    The summary comes from a pluggable summarizer, anything with the
    :class:`~ctxnb.strategies.summaries.Summarizer` signature ``(label, text, max_tokens) ->
    str``: by default ctxnb's extractive :class:`~ctxnb.strategies.summaries.OutlineSummarizer`
    (a code outline, or the first and last lines of other text), no model involved;
    :class:`ctxnb.llm.calls.LiteLLMSummarizer` asks a model through litellm and counts its
    tokens and dollars. Each item is summarized once (summaries are kept per content),
    so a summary never changes from one step to the next. Items already no larger than
    a summary stay whole. Like :class:`BlockMasking`, ``block`` > 1 summarizes in
    blocks so that the prompt's prefix stays stable for prompt caching.

    Args:
        keep_last: the most recent items of ``types`` kept whole.
        summarizer: the summarizer; the extractive outline when None.
        max_tokens: the budget of one summary.
        block: summarize older items in blocks of this many.
        types: the item types summarized (tool outputs by default; add ``"file"``).

    Example:
        >>> items = tuple(Item(f"t{n}", "toolcall", tokens=900, seq=n, tool="bash",
        ...                    content="".join(f"line {k}\\n" for k in range(300)))
        ...               for n in range(3))
        >>> sel = Summarize(keep_last=1, max_tokens=40).select(StrategyInput(items, None, 3))
        >>> sorted(sel.replace)
        ['t0', 't1']
        >>> print(sel.replace["t0"].splitlines()[0])
        bash: text, 300 lines
    """

    name = "summarize"

    def __init__(
        self,
        keep_last: int = 5,
        *,
        summarizer: Callable[[str, str, int], str] | None = None,
        max_tokens: int = 200,
        block: int = 1,
        types: Sequence[str] = ("toolcall",),
    ) -> None:
        if keep_last < 0 or block < 1 or max_tokens < 1:
            raise ValueError(
                "Summarize needs keep_last >= 0, block >= 1 and max_tokens >= 1, got "
                f"{keep_last}, {block}, {max_tokens}"
            )
        from .summaries import OutlineSummarizer

        self.keep_last = keep_last
        self.max_tokens = max_tokens
        self.block = block
        self.types = tuple(types)
        self.summarizer = summarizer or OutlineSummarizer()
        self._cache: dict[tuple[str, str], str] = {}

    def select(self, inp: StrategyInput) -> Selection:
        replace = {}
        for item in _older(inp, self.types, self.keep_last, self.block):
            if item.content is None or item.tokens <= self.max_tokens:
                continue
            key = (item.id, item.content)
            summary = self._cache.get(key)
            if summary is None:
                label = item.path or item.tool or item.id
                summary = self._cache[key] = self.summarizer(label, item.content, self.max_tokens)
            replace[item.id] = summary
        return Selection(active=[i.id for i in inp.items], replace=replace)

    def take_usage(self) -> tuple[int, float]:
        """(tokens, dollars) the summarizer spent since the last call, when it counts them."""
        take = getattr(self.summarizer, "take_usage", None)
        return take() if callable(take) else (0, 0.0)

    def __getstate__(self) -> dict[str, object]:
        # Summaries are a cache: a copy sent to another process starts without them.
        return {**vars(self), "_cache": {}}

    def __repr__(self) -> str:
        return (
            f"Summarize(keep_last={self.keep_last}, max_tokens={self.max_tokens}, "
            f"block={self.block}, summarizer={self.summarizer!r})"
        )


class MetadataOnly:
    """Nothing in full but the pins: the model sees the metadata pool only."""

    name = "metadata-only"

    def select(self, inp: StrategyInput) -> Selection:
        return Selection.keep(inp, [])

    def __repr__(self) -> str:
        return "MetadataOnly()"


class FileViewLimits:
    """Open and closed files with an LRU cap, as Letta's file tools do.

    At most ``max_files_open`` files are open (most recently used first; pins count),
    and each open file shows at most ``per_file_char_limit`` characters. Tool calls
    are not files and stay.
    """

    name = "file-view-limits"

    def __init__(self, max_files_open: int = 5, per_file_char_limit: int = 20_000) -> None:
        if max_files_open < 0 or per_file_char_limit <= 0:
            raise ValueError(
                "FileViewLimits needs max_files_open >= 0 and per_file_char_limit > 0, "
                f"got {max_files_open}, {per_file_char_limit}"
            )
        self.max_files_open = max_files_open
        self.per_file_char_limit = per_file_char_limit

    def select(self, inp: StrategyInput) -> Selection:
        files = [i for i in inp.by_recency() if i.type == "file"]
        pinned_files = sum(1 for i in files if i.pinned)
        room = max(0, self.max_files_open - pinned_files)
        open_files = [i.id for i in files if not i.pinned][:room]
        others = [i.id for i in inp.items if i.type != "file"]
        sel = Selection.keep(inp, [*open_files, *others])
        sel.truncate = {
            i.id: self.per_file_char_limit
            for i in inp.items
            if i.type == "file" and i.id in sel.active and i.char_count > self.per_file_char_limit
        }
        return sel

    def __repr__(self) -> str:
        return f"FileViewLimits({self.max_files_open}, {self.per_file_char_limit})"


@runtime_checkable
class RuleSource(Protocol):
    """Where :class:`RulesTiered` gets the ids of the rules to keep (a ``RulesTracker``)."""

    def rule_ids(self) -> list[str]: ...


class RulesTiered:
    """A strategy that keeps the tracked rules and lets a base strategy decide the rest.

    The rules come first in the context, in :meth:`RulesTracker.rule_ids` order; the
    base strategy sees only the other items and the budget left after the rules.
    Because the assembler evicts the least recently used items when content overflows
    the budget, and rules are usually the oldest, this strategy fits the rest into the
    budget itself (counting each item at its full size, so masked or truncated items
    may be evicted a little early). Rules that alone exceed the budget stay; the context reports
    ``over_budget``.

    Args:
        base: the strategy for everything that is not a rule.
        rules: a :class:`~ctxnb.instructions.RulesTracker` (anything with ``rule_ids()``: its
            loads are followed as they happen) or a fixed collection of object ids.

    Example:
        >>> from ctxnb.strategies import Item, MetadataOnly, StrategyInput
        >>> inp = StrategyInput((Item("r", "file", 10, 1), Item("f", "file", 10, 2)), None, 1)
        >>> RulesTiered(MetadataOnly(), {"r"}).select(inp).active
        ['r']
    """

    name = "rules-tiered"

    def __init__(self, base: ContextStrategy, rules: RuleSource | Iterable[str]) -> None:
        self.base = base
        self.base_name = base.name
        self._rules: RuleSource | list[str] = (
            rules if isinstance(rules, RuleSource) else list(rules)
        )

    def _rule_ids(self) -> list[str]:
        if isinstance(self._rules, RuleSource):
            return self._rules.rule_ids()
        return self._rules

    def select(self, inp: StrategyInput) -> Selection:
        order = {oid: n for n, oid in enumerate(self._rule_ids())}
        rules = sorted((i for i in inp.items if i.id in order), key=lambda i: order[i.id])
        rest = tuple(i for i in inp.items if i.id not in order)
        budget = inp.budget
        if budget is not None:
            budget = max(0, budget - sum(i.tokens for i in rules))
        sub = self.base.select(StrategyInput(items=rest, budget=budget, turn=inp.turn))
        known = {i.id: i for i in rest}
        chosen = [a for a in sub.active if a in known]
        evicted = [e for e in sub.evicted if e in known]
        evicted += [i.id for i in rest if i.id not in chosen and i.id not in evicted]
        if budget is not None:
            total = sum(known[a].tokens for a in chosen)
            for item in sorted((known[a] for a in chosen), key=lambda i: i.last_used):
                if total <= budget:
                    break
                if not item.pinned:
                    chosen.remove(item.id)
                    evicted.append(item.id)
                    total -= item.tokens
        kept = set(chosen)
        return Selection(
            active=[i.id for i in rules] + chosen,
            masked=[m for m in sub.masked if m in kept],
            truncate={k: v for k, v in sub.truncate.items() if k in kept},
            evicted=evicted,
            replace={k: v for k, v in sub.replace.items() if k in kept},
            condensed={k: v for k, v in sub.condensed.items() if k in kept and v in kept},
        )

    def __repr__(self) -> str:
        return f"RulesTiered({self.base!r})"
