"""Context strategies: which items of a session go into the model's context.

A strategy is a plain object with a ``name`` and a ``select(inp)`` method. It gets
the session's candidate items (the active set plus the pinned set, oldest use first,
each with its token count) and the token budget left for content, and returns a
:class:`Selection`: the ids to show in full, the ids to show as a one-line
placeholder (masked), per-item character caps, and what it left out. Pinned items
always stay; the assembler enforces the budget after the strategy, so a strategy can
be simple.

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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "ContextStrategy",
    "FileViewLimits",
    "Item",
    "KeepAll",
    "MetadataOnly",
    "ObservationMasking",
    "RecencyWindow",
    "Selection",
    "StrategyInput",
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
    """

    active: list[str]
    masked: list[str] = field(default_factory=list)
    truncate: dict[str, int] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)

    @classmethod
    def keep(cls, inp: StrategyInput, ids: Iterable[str], **kw: object) -> Selection:
        """Keep ``ids`` (plus every pinned item), evict the rest, in candidate order."""
        keep = set(ids) | {i.id for i in inp.items if i.pinned}
        return cls(
            active=[i.id for i in inp.items if i.id in keep],
            evicted=[i.id for i in inp.items if i.id not in keep],
            **kw,  # type: ignore[arg-type]
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
