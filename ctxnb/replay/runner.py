"""Replay a recorded agent run through a ctxnb session, under several context strategies.

:func:`replay` feeds a :class:`~ctxnb.replay.model.Trajectory` step by step into a fresh
:class:`~ctxnb.session.core.Session` and, before each step, assembles the context every
strategy would have given the model at that point. The run is replayed once; each
strategy chooses among the same candidates, so comparing strategies costs one assembly
per strategy per step and nothing more.

How a run becomes ctxnb objects:

- **chat**: the task is the first user turn; each step's thought and action, as the
  agent wrote them, form one assistant turn (a user message in the middle of a session
  is a user turn). Strategies never drop chat turns.
- **tool calls**: every tool call is a ``toolcall`` object whose content is the
  observation exactly as the agent saw it and whose ``file_refs`` name the files it
  touched. Observation masking and recency strategies act on these.
- **files**: each file the run touched is a ``file`` object on a synthetic filesystem,
  ``replay:<trajectory id>``, keyed by the path the agent used (the files do not exist
  on this machine). The object holds the *best-known content* of the file: a whole-file
  read, write or create replaces it; a line-range read splices the lines it showed into
  what is known, and lines never seen appear as a one-line gap marker; an edit whose
  result the converter computed is a new version; an edit whose result is unknown
  gives a version that says so (the agent did not know it either); a deletion is a
  deletion version. A range read therefore updates the file object *and* records a
  tool call with the observation.

Step ``i`` of the frame is the context the model saw when it chose step ``i``'s action:
it is assembled after steps ``0 … i-1`` were fed in, which is also when the provider
measured the step's ``prompt_tokens``.

Two signs of lost information are counted per row:

- ``re_reads``: files the step reads that the run had seen before, but whose content
  the strategy had dropped from the context the step was chosen in: neither the file
  object nor any tool call that showed the file is there in full.
- ``stale_reads``: tool calls in the context, in full, that show a file as it was
  before the agent later changed it.

Masked and truncated items are not "in full".

Example:
    >>> from ctxnb.replay import Trajectory, Step, Action, FileTouch
    >>> from ctxnb.strategies import KeepAll, MetadataOnly
    >>> t = Trajectory(id="demo", source_format="ctxnb", task="Fix a.py", steps=[
    ...     Step(index=0, action=Action(tool="read", args={"path": "a.py"}),
    ...          observation="x = 1\\n",
    ...          files=[FileTouch(path="a.py", op="read", content="x = 1\\n")]),
    ...     Step(index=1, action=Action(tool="read", args={"path": "a.py"}),
    ...          observation="x = 1\\n",
    ...          files=[FileTouch(path="a.py", op="read", content="x = 1\\n")]),
    ... ])
    >>> df = replay(t, [KeepAll(), MetadataOnly()])
    >>> df.groupby("strategy")["re_reads"].sum().to_dict()
    {'keep-all': 0, 'metadata-only': 1}
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..context import Context, ContextChange
from ..llm.prices import CacheTTL, PriceTable, resolve_prices
from ..llm.tokens import TokenCounter, resolve_token_counter
from ..strategies.builtin import (
    ContextStrategy,
    FileViewLimits,
    KeepAll,
    MetadataOnly,
    ObservationMasking,
    RecencyWindow,
    TokenBudgetLRU,
    strategy_spec,
)
from ._replayer import FileMode, HiddenPrompt, OnCompaction, _fast_tmp, _Replayer
from .frame import COLUMNS, PromptTracker, StepMeasure, frame, row
from .model import Step, Trajectory

if TYPE_CHECKING:
    import pandas as pd


__all__ = [
    "COLUMNS",
    "compaction_changes",
    "default_strategies",
    "recorded_cache_ttl",
    "replay",
    "replay_contexts",
    "strategy_labels",
]


def default_strategies() -> list[ContextStrategy]:
    """The six strategies of the standard experiment grid.

    Keep-all (the baseline), observation masking of all but the last 5 tool outputs,
    a recency window of 10 items, a 32k-token LRU, Letta-style file views (5 open
    files of at most 20,000 characters) and metadata only.

    Example:
        >>> [s.name for s in default_strategies()][:2]
        ['keep-all', 'observation-masking']
    """
    return [
        KeepAll(),
        ObservationMasking(5),
        RecencyWindow(10),
        TokenBudgetLRU(32_000),
        FileViewLimits(5, 20_000),
        MetadataOnly(),
    ]


def strategy_labels(strategies: Sequence[ContextStrategy]) -> list[str]:
    """The label of each strategy in a frame's ``strategy`` column.

    A strategy's ``label`` attribute wins; otherwise its ``name``. When two strategies
    share a name, their settings are appended (``observation-masking:3``) so that every
    row can be told apart.

    Raises:
        ValueError: two strategies still end up with the same label.

    Example:
        >>> strategy_labels([ObservationMasking(3), ObservationMasking(10), KeepAll()])
        ['observation-masking:3', 'observation-masking:10', 'keep-all']
    """
    base = [str(getattr(s, "label", None) or s.name) for s in strategies]
    out = []
    for s, b in zip(strategies, base, strict=True):
        if base.count(b) > 1 and not getattr(s, "label", None):
            params = strategy_spec(s)["params"]
            assert isinstance(params, dict)
            b = f"{b}:{','.join(str(v) for v in params.values())}" if params else b
        out.append(b)
    dupes = sorted({x for x in out if out.count(x) > 1})
    if dupes:
        raise ValueError(
            f"strategies {dupes} appear more than once with the same settings; give each "
            "a distinct `label` attribute or drop the duplicate"
        )
    return out


def replay_contexts(
    trajectory: Trajectory,
    strategies: Sequence[ContextStrategy],
    *,
    budget: int | None = None,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    stop_after: int | None = None,
    files: FileMode = "pool",
) -> Iterator[tuple[Step, str, Context, tuple[int, int]]]:
    """Replay a run and yield, step by step, the context under each strategy.

    This is the engine under :func:`replay`; use it to look at the contexts themselves.
    A compaction in the run (``Step.compaction``) starts the context again from its
    summary, as the agent did.

    Args:
        trajectory: the run.
        strategies: context strategies (see :mod:`ctxnb.strategies.builtin`).
        budget: total token budget per context, or None for no limit.
        token_counter: a counter, a name such as ``"heuristic"``, or None for the default.
        stop_after: stop once this step's contexts have been yielded.
        files: ``"pool"`` (the default): file objects are versioned and listed in
            the metadata pool but never shown in full, so the context holds what the
            recorded agent saw (tool outputs only): the faithful mode for mini-swe-agent,
            SWE-agent and Claude Code, whose prompts hold a file only as the output of
            the call that read it. ``"active"``: file objects are also content the
            strategies manage, shown beside the outputs that read them, which models an
            agent that keeps its open files in the prompt (ctxnb's own sessions, a
            Cursor-style "open files" pane); it puts a Claude Code session at 1.3x its
            recorded prompt sizes.

    Yields:
        ``(step, strategy label, context, (re_reads, stale_reads))``.

    Example:
        >>> from ctxnb.replay import Trajectory, Step, Action
        >>> t = Trajectory(id="t", source_format="ctxnb",
        ...                steps=[Step(index=0, action=Action(tool="submit"))])
        >>> [(s.index, label) for s, label, _, _ in replay_contexts(t, [KeepAll()])]
        [(0, 'keep-all')]
    """
    for step, label, ctx, losses, _ in _replay_measured(
        trajectory, strategies, budget, token_counter, stop_after, files, None
    ):
        yield step, label, ctx, losses


def _replay_measured(
    trajectory: Trajectory,
    strategies: Sequence[ContextStrategy],
    budget: int | None,
    token_counter: TokenCounter | Callable[[str], int] | str | None,
    stop_after: int | None,
    files: FileMode,
    hidden_prompt_tokens: HiddenPrompt,
    *,
    on_compaction: OnCompaction | None = None,
) -> Iterator[tuple[Step, str, Context, tuple[int, int], StepMeasure]]:
    labels = strategy_labels(strategies)
    counter = resolve_token_counter(token_counter)
    if files not in ("active", "pool"):
        raise ValueError(f"files must be 'active' or 'pool', got {files!r}")
    if not (
        hidden_prompt_tokens is None
        or hidden_prompt_tokens == "auto"
        or (isinstance(hidden_prompt_tokens, int) and hidden_prompt_tokens >= 0)
    ):
        raise ValueError(
            "hidden_prompt_tokens must be None, 'auto' or a number of tokens >= 0, "
            f"got {hidden_prompt_tokens!r}"
        )
    hidden = hidden_prompt_tokens if isinstance(hidden_prompt_tokens, int) else 0
    estimate = hidden_prompt_tokens == "auto"
    tracker = PromptTracker()
    with tempfile.TemporaryDirectory(prefix="ctxnb-replay-", dir=_fast_tmp()) as root:
        r = _Replayer(trajectory, counter, root, files, on_compaction)
        try:
            for step in trajectory.steps:
                r.memo.new_step()
                recorded = step.usage.prompt_tokens if step.usage is not None else None
                if estimate and recorded:
                    # What the provider counted beyond everything the run recorded is
                    # the agent's own prompt (instructions, tool definitions).
                    seen = r.session.assemble(KeepAll(), None, record=False).total_tokens
                    hidden, estimate = max(0, recorded - seen), False
                for label, strategy in zip(labels, strategies, strict=True):
                    ctx = r.session.assemble(strategy, budget, record=False)
                    take = getattr(strategy, "take_usage", None)
                    spent = take() if callable(take) else (0, 0.0)
                    shared = tracker.shared(label, ctx, hidden)
                    measure = StepMeasure(r.segment, hidden, shared, *spent)
                    yield step, label, ctx, r.losses(ctx, step), measure
                if stop_after is not None and step.index >= stop_after:
                    return
                r.feed(step)
        finally:
            r.close()


def replay(
    trajectory: Trajectory | str | Path,
    strategies: Sequence[ContextStrategy] | None = None,
    budget: int | None = None,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    *,
    files: FileMode = "pool",
    hidden_prompt_tokens: HiddenPrompt = None,
    model: str | None = None,
    prices: PriceTable | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    on_context: Callable[[Step, str, Context], None] | None = None,
    on_compaction: OnCompaction | None = None,
    cache_hit_rate: float = 1.0,
    cache_write_ttl: CacheTTL | Literal["auto"] = "auto",
) -> pd.DataFrame:
    """Replay a recorded run and measure the context every strategy gives at every step.

    Args:
        trajectory: a :class:`~ctxnb.replay.model.Trajectory`, or a path that
            :func:`ctxnb.replay.load` reads.
        strategies: the strategies to compare; :func:`default_strategies` when None.
        budget: total token budget per context, or None for no limit.
        token_counter: a counter, a name such as ``"heuristic"``, or None for the default.
        files: ``"active"`` or ``"pool"``; see :func:`replay_contexts`.
        hidden_prompt_tokens: the size of the agent's own prompt that the run does not
            record (Claude Code's instructions and tool definitions): a number of tokens,
            ``"auto"`` (estimated at the first step with recorded usage, as the recorded
            prompt size less everything the replay sees there), or None (nothing added).
            It is counted in ``total_tokens`` and ``tokens_hidden``.
        model: the model whose prices apply; the run's own model when None.
        prices: a :class:`~ctxnb.llm.prices.PriceTable`, a mapping or a JSON file
            (see :func:`~ctxnb.llm.prices.resolve_prices`); the shipped table when None.
        on_context: called with ``(step, strategy label, context)`` for every context as
            it is built, to keep what the frame does not (a view's item lists) without
            replaying the run a second time.
        on_compaction: called with ``(step, changes)`` at each compaction of the run:
            the tool results it dropped and whether each survived in its summary
            (see :mod:`ctxnb.replay.compaction`).
        cache_hit_rate: the share of a cacheable prefix the provider's cache serves.
            1.0 (the default) models an explicit cache (Anthropic's ``cache_control``),
            which serves every cached prefix; providers that cache implicitly serve less
            (the recorded Gemini runs read 82% of their prompts from the cache, where an
            ideal prefix cache would have served 96%). ``cache_read_tokens`` is then
            the shared prefix times this rate; compare it with ``recorded_cached_tokens``
            (:func:`~ctxnb.replay.analysis.summarize` gives both shares).
        cache_write_ttl: how long the modelled cache keeps what is written to it, which
            sets the price of ``new_tokens``: ``"5m"`` (the table's ``cache_write``),
            ``"1h"`` (twice the input price: Anthropic's one-hour cache, which Claude
            Code asks for), or ``"auto"`` (the default): the cache the run itself wrote
            to most, as its recorded usage says (:func:`recorded_cache_ttl`).

    Returns:
        A tidy frame with one row per (trajectory, strategy, step) and the columns of
        :data:`COLUMNS` (see :mod:`ctxnb.replay.frame` for the cache and cost columns).
        The same inputs give the same frame, context hashes included.

    Raises:
        NotFoundError: ``model`` is given and the price table does not know it.
        ValueError: ``cache_hit_rate`` is not between 0 and 1, or ``cache_write_ttl``
            is not one of ``"5m"``, ``"1h"``, ``"auto"``.

    Example:
        >>> from ctxnb.replay import load
        >>> from ctxnb.strategies import KeepAll, ObservationMasking
        >>> t = load("data/trajectories/django__django-13670.traj.json")  # doctest: +SKIP
        >>> df = replay(t, [KeepAll(), ObservationMasking(5)])  # doctest: +SKIP
        >>> df.groupby("strategy")["total_tokens"].sum()  # doctest: +SKIP
    """

    check_hit_rate(cache_hit_rate)
    check_cache_ttl(cache_write_ttl)
    if not isinstance(trajectory, Trajectory):
        from .converters import load

        trajectory = load(trajectory)
    strategies = list(strategies) if strategies is not None else default_strategies()
    table = resolve_prices(prices)
    price = table.get(model) if model else table.price_or_warn(trajectory.metadata.get("model"))
    if price is not None:
        ttl = recorded_cache_ttl(trajectory) if cache_write_ttl == "auto" else cache_write_ttl
        price = price.with_cache_ttl(ttl)
    rows = []
    for step, label, ctx, losses, measure in _replay_measured(
        trajectory,
        strategies,
        budget,
        token_counter,
        None,
        files,
        hidden_prompt_tokens,
        on_compaction=on_compaction,
    ):
        if on_context is not None:
            on_context(step, label, ctx)
        if cache_hit_rate != 1.0:
            measure = dataclasses.replace(
                measure, cache_read=round(measure.cache_read * cache_hit_rate)
            )
        rows.append(row(trajectory, label, step, ctx, losses, measure, price))
    return frame(rows)


def recorded_cache_ttl(trajectory: Trajectory) -> CacheTTL:
    """The cache a recorded run wrote to most: ``"1h"`` when its recorded usage holds
    more one-hour cache writes than five-minute ones (Claude Code's sessions), else
    ``"5m"`` (also when the run records no usage).

    Example:
        >>> from ctxnb.replay.model import Action, Step, Trajectory, Usage
        >>> used = Usage(prompt_tokens=900, cache_write_tokens=10, cache_write_1h_tokens=800)
        >>> t = Trajectory(id="t", source_format="ctxnb",
        ...                steps=[Step(index=0, action=Action(tool="bash"), usage=used)])
        >>> recorded_cache_ttl(t)
        '1h'
    """
    five = hour = 0
    for step in trajectory.steps:
        if step.usage is not None:
            five += step.usage.cache_write_tokens or 0
            hour += step.usage.cache_write_1h_tokens or 0
    return "1h" if hour > five else "5m"


def check_cache_ttl(ttl: object) -> None:
    """Refuse a cache lifetime other than ``"5m"``, ``"1h"`` or ``"auto"``, naming it.

    Example:
        >>> check_cache_ttl("1h")
        >>> check_cache_ttl("1d")
        Traceback (most recent call last):
        ...
        ValueError: cache_write_ttl must be "5m", "1h" or "auto" (the run's own), got '1d'
    """
    if ttl not in ("5m", "1h", "auto"):
        raise ValueError(
            f'cache_write_ttl must be "5m", "1h" or "auto" (the run\'s own), got {ttl!r}'
        )


def check_hit_rate(rate: float) -> None:
    """Refuse a cache hit rate outside 0..1 (NaN included), naming the argument.

    Example:
        >>> check_hit_rate(0.82)
        >>> check_hit_rate(82)
        Traceback (most recent call last):
        ...
        ValueError: cache_hit_rate must be between 0 and 1 (a share of the cacheable prefix), got 82
    """
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= rate <= 1.0:
        raise ValueError(
            "cache_hit_rate must be between 0 and 1 (a share of the cacheable prefix), "
            f"got {rate!r}"
        )


def compaction_changes(
    trajectory: Trajectory,
    *,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
) -> list[ContextChange]:
    """Every tool result each compaction of a run dropped, and whether it survived.

    Replays the run once (no strategies) and, at each ``compact`` step, lists the tool
    results of the context it ends. ``turn`` is the compaction's step index.
    :func:`replay` gives the same lists through ``on_compaction``; the rule is in
    :mod:`ctxnb.replay.compaction`.

    Example:
        >>> from ctxnb.replay import Action, Step, Trajectory
        >>> run = Trajectory(id="c", source_format="ctxnb", task="fix", steps=[
        ...     Step(index=0, action=Action(tool="bash", args={"command": "grep -n"}),
        ...          observation="app.py:12: retry_limit = 0"),
        ...     Step(index=1, action=Action(tool="compact"), compaction=True,
        ...          observation="Summary: retry_limit in app.py is 0."),
        ... ])
        >>> [(c.op, c.survived, c.evidence) for c in compaction_changes(run)]
        [('compacted', True, ('retry_limit', 'app.py'))]
    """
    out: list[ContextChange] = []
    steps = _replay_measured(
        trajectory,
        [],
        None,
        token_counter,
        None,
        "active",
        None,
        on_compaction=lambda step, changes: out.extend(changes),
    )
    for _ in steps:
        pass
    return out
