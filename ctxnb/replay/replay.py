"""Replay a recorded agent run through a ctxnb session, under several context strategies.

:func:`replay` feeds a :class:`~ctxnb.replay.model.Trajectory` step by step into a fresh
:class:`~ctxnb.session.Session` and, before each step, assembles the context every
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

import os
import posixpath
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..context import Context, ContextChange
from ..indexer import build_file_doc
from ..model import FilesystemSource
from ..prices import PriceTable, resolve_prices
from ..strategies import (
    ContextStrategy,
    FileViewLimits,
    KeepAll,
    MetadataOnly,
    ObservationMasking,
    RecencyWindow,
    TokenBudgetLRU,
    strategy_spec,
)
from ..tokens import HeuristicTokenCounter, TokenCounter, resolve_token_counter
from .compaction import compacted
from .frame import COLUMNS, PromptTracker, StepMeasure, frame, row
from .model import FileTouch, Step, Trajectory

if TYPE_CHECKING:
    import pandas as pd

    from ..session import Session

__all__ = [
    "COLUMNS",
    "compaction_changes",
    "default_strategies",
    "replay",
    "replay_contexts",
    "strategy_labels",
]


FileMode = Literal["active", "pool"]
OnCompaction = Callable[[Step, list[ContextChange]], None]
HiddenPrompt = int | Literal["auto"] | None

# A fixed namespace so that tool call ids, and so context hashes, are the same in every
# run and every process.
_ID_NAMESPACE = uuid.UUID("6f1f0c0e-3a57-5c2b-9a41-7c7e0b7d2f10")


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


class _StepMemo:
    """A token counter that remembers counts within one step and counts the chat
    incrementally.

    Each assembly counts the chat and system sections again; at one step they are the
    same text for every strategy, so each is counted once. The chat only grows, so with
    the heuristic counter the text already counted at the previous step is not counted
    again: its features end at a line break, where the heuristic is additive, so the
    result equals a direct count (up to float rounding in the last bit).
    """

    _INCREMENTAL_MIN = 4096

    def __init__(self, base: TokenCounter) -> None:
        self.base = base
        self.name = base.name
        self._memo: dict[str, int] = {}
        self._heuristic = base if type(base) is HeuristicTokenCounter else None
        self._prefix: tuple[str, float] | None = None

    def count(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            if self._heuristic is not None and len(text) >= self._INCREMENTAL_MIN:
                n = self._count_incremental(text, self._heuristic)
            else:
                n = self.base.count(text)
            self._memo[text] = n
        return n

    def _count_incremental(self, text: str, counter: HeuristicTokenCounter) -> int:
        p = self._prefix
        if p is not None and text.startswith(p[0]):
            raw = p[1] + counter.raw(text[len(p[0]) :])
        else:
            raw = counter.raw(text)
        if text.endswith("\n"):
            self._prefix = (text, raw)
        return counter.from_raw(raw)

    def new_step(self) -> None:
        self._memo.clear()


@dataclass
class _Known:
    """The best-known content of one file."""

    full: str | None = None
    lines: dict[int, str] = field(default_factory=dict)
    note: str | None = None
    deleted: bool = False

    def render(self) -> str:
        if self.full is not None:
            return self.full
        if not self.lines:
            return self.note or ""
        out: list[str] = []
        prev = 0
        for n in sorted(self.lines):
            if n > prev + 1:
                out.append(f"[… lines {prev + 1}-{n - 1} not seen …]\n")
            line = self.lines[n]
            out.append(line if line.endswith("\n") else line + "\n")
            prev = n
        return "".join(out)

    def read(self, touch: FileTouch) -> bool:
        """Take in what a read showed; False when it showed nothing usable."""
        if touch.content is None:
            return False
        self.deleted = False
        if touch.start_line is None:
            self.full, self.lines, self.note = touch.content, {}, None
            return True
        new = touch.content.splitlines(keepends=True)
        start = touch.start_line
        if self.full is not None:
            # Splice the range in: the observation is the truth about those lines, even
            # when the file changed in a way the replay could not follow.
            old = self.full.splitlines(keepends=True)
            end = start - 1 + len(new)
            if len(old) < start - 1:
                old += ["\n"] * (start - 1 - len(old))
            if new and not new[-1].endswith("\n") and end < len(old):
                new[-1] += "\n"
            self.full = "".join(old[: start - 1] + new + old[end:])
        else:
            self.note = None
            for k, line in enumerate(new):
                self.lines[start + k] = line
        return True

    def write(self, touch: FileTouch, step: int) -> None:
        self.deleted = False
        if touch.content is not None:
            self.full, self.lines, self.note = touch.content, {}, None
            return
        if (
            touch.op == "edit"
            and self.full is not None
            and touch.old_text
            and touch.new_text is not None
            and touch.old_text in self.full
        ):
            self.full = self.full.replace(touch.old_text, touch.new_text, 1)
            return
        self.full, self.lines = None, {}
        self.note = (
            f"[{touch.path} was changed at step {step}; its new content has not been seen]\n"
        )


class _Replayer:
    """One trajectory fed into one session; assembles under any strategy at any point."""

    def __init__(
        self,
        traj: Trajectory,
        counter: TokenCounter,
        root: str,
        files: FileMode = "active",
        on_compaction: OnCompaction | None = None,
    ) -> None:
        from ..store import ObjectStore
        from ..workspace import Workspace

        self.traj = traj
        self.on_compaction = on_compaction
        self.files_active = files == "active"
        self.fs_id = f"replay:{traj.id}"
        self.memo = _StepMemo(counter)
        self.store = ObjectStore(Path(root) / "store")
        self.workspace = Workspace.open(root, store=self.store)
        self.segment = 0
        self.session: Session = self._new_session(traj.task)
        self.known: dict[str, _Known] = {}
        self.file_ids: dict[str, str] = {}
        self.written: dict[str, str | None] = {}  # oid -> last source hash written
        self.version: dict[str, int] = {}  # path -> changes by the agent so far
        self.seen: set[str] = set()
        self.admitted: set[str] = set()  # file ids in the session
        self.refs_by_path: dict[str, list[str]] = {}
        self.shown: dict[str, dict[str, int]] = {}  # read toolcall -> {path: version}

    def close(self) -> None:
        self.store.close()

    def _new_session(self, first_turn: str | None) -> Session:
        s = self.workspace.session(
            f"replay-{self.segment}" if self.segment else "replay",
            system_prompt=self.traj.system_prompt or "",
            token_counter=self.memo,
            # A replay rebuilds what the recorded agent saw: rules it did not have stay out.
            rules=False,
        )
        if first_turn:
            s.add_turn("user", first_turn)
        return s

    def compact(self, summary: str | None) -> None:
        """Start the context again from a compaction's summary, as the agent did.

        The files stay in the store (their versions and what the run has seen), but
        the new context holds nothing of the old one but the summary: items come back
        only when the agent touches them again.
        """
        self.segment += 1
        self.session = self._new_session(summary)
        self.admitted.clear()
        self.refs_by_path.clear()
        self.shown.clear()

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, step: Step) -> None:
        if step.compaction:
            if self.on_compaction is not None:
                self.on_compaction(step, compacted(self.session, step))
            self.compact(step.observation)
            return
        s = self.session
        tool = step.action.tool
        text = _turn_text(step)
        if tool == "user":
            if text:
                s.add_turn("user", text)
        elif text:
            s.add_turn("assistant", text)
        docs: list[dict[str, Any]] = []
        touched: list[str] = []
        shown: dict[str, int] = {}
        for touch in step.files:
            path = _norm(touch.path)
            known = self.known.setdefault(path, _Known())
            if touch.op == "read":
                self.seen.add(path)
                shown[path] = self.version.get(path, 0)
                if not known.read(touch):
                    if path not in touched:
                        touched.append(path)
                    continue
            else:
                self.version[path] = self.version.get(path, 0) + 1
                self.seen.add(path)
                if touch.op == "delete":
                    known.deleted, known.full, known.lines, known.note = True, None, {}, None
                else:
                    known.write(touch, step.index)
            doc = self._file_doc(path, known)
            if doc is not None:
                docs = [d for d in docs if d["xt/id"] != doc["xt/id"]] + [doc]
            if path not in touched:
                touched.append(path)
        if docs:
            self.store.put(docs)
        for d in docs:
            oid = d["xt/id"]
            if d["type"] == "file":
                if oid in self.admitted:
                    s.refresh(oid)
                    if self.files_active:
                        s.activate(oid)
                else:
                    s.add(oid, activate=self.files_active)
                    self.admitted.add(oid)
        for path in touched:
            oid = self._file_id(path)
            if oid in self.admitted:
                s.touch(oid)
        if tool not in ("reply", "user", "compact"):
            # The id comes from the run and the step: equal inputs give equal contexts.
            tid = s.record_toolcall(
                step.action.tool,
                dict(step.action.args),
                step.observation or "",
                status="ok" if step.parsed else "fail",
                file_refs=[self._file_id(p) for p in touched],
                id=str(uuid.uuid5(_ID_NAMESPACE, f"{self.traj.id}\x00{step.index}")),
            )
            for path in touched:
                self.refs_by_path.setdefault(path, []).append(tid)
            if shown:
                self.shown[tid] = shown

    def _file_id(self, path: str) -> str:
        oid = self.file_ids.get(path)
        if oid is None:
            doc = build_file_doc(self._source(path), b"")
            oid = self.file_ids[path] = doc["xt/id"]
        return oid

    def _source(self, path: str) -> FilesystemSource:
        return FilesystemSource(filesystem_id=self.fs_id, path=path)

    def _file_doc(self, path: str, known: _Known) -> dict[str, Any] | None:
        src = self._source(path)
        if known.deleted:
            doc = build_file_doc(src, None)
        else:
            doc = build_file_doc(src, known.render().encode("utf-8", "surrogatepass"))
        oid = doc["xt/id"]
        self.file_ids[path] = oid
        if oid in self.written and self.written[oid] == doc.get("source_hash"):
            return None  # unchanged: no new version
        self.written[oid] = doc.get("source_hash")
        return doc

    # -- measuring -------------------------------------------------------------------------
    def losses(self, ctx: Context, step: Step) -> tuple[int, int]:
        """(re_reads, stale_reads) of ``step`` chosen in context ``ctx``."""
        # A truncated item is not there in full: its file may need reading again, and
        # what it shows of an old version is not counted as a stale read.
        full = {it.id for it in ctx.items if not it.masked and not it.truncated}
        re_reads = 0
        counted: set[str] = set()
        for touch in step.files:
            path = _norm(touch.path)
            if touch.op != "read" or path in counted or path not in self.seen:
                continue
            counted.add(path)
            fid = self.file_ids.get(path)
            if fid in full and not self.known[path].deleted:
                continue
            if any(t in full for t in self.refs_by_path.get(path, ())):
                continue
            re_reads += 1
        stale = sum(
            1
            for tid, shown in self.shown.items()
            if tid in full and any(self.version.get(p, 0) > v for p, v in shown.items())
        )
        return re_reads, stale


def _fast_tmp() -> str | None:
    # A replay's store is scratch: on a RAM-backed directory its commits cost no disk
    # flushes. Fall back to the ordinary temp directory elsewhere.
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _turn_text(step: Step) -> str:
    raw = step.action.raw or ""
    thought = step.thought or ""
    if not raw and step.action.tool not in ("reply", "user", "compact"):
        raw = f"{step.action.tool}({', '.join(f'{k}={v}' for k, v in step.action.args.items())})"
    if thought and thought in raw:
        return raw
    return "\n\n".join(x for x in (thought, raw) if x)


def replay_contexts(
    trajectory: Trajectory,
    strategies: Sequence[ContextStrategy],
    *,
    budget: int | None = None,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    stop_after: int | None = None,
    files: FileMode = "active",
) -> Iterator[tuple[Step, str, Context, tuple[int, int]]]:
    """Replay a run and yield, step by step, the context under each strategy.

    This is the engine under :func:`replay`; use it to look at the contexts themselves.
    A compaction in the run (``Step.compaction``) starts the context again from its
    summary, as the agent did.

    Args:
        trajectory: the run.
        strategies: context strategies (see :mod:`ctxnb.strategies`).
        budget: total token budget per context, or None for no limit.
        token_counter: a counter, a name such as ``"heuristic"``, or None for the default.
        stop_after: stop once this step's contexts have been yielded.
        files: ``"active"``: file objects are content the strategies manage (the
            default); ``"pool"``: they are versioned and listed in the metadata pool
            but never shown in full, so the context holds what a shell-only agent saw
            (tool outputs only); the fidelity check uses this.

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
    files: FileMode = "active",
    hidden_prompt_tokens: HiddenPrompt = None,
    model: str | None = None,
    prices: PriceTable | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    on_context: Callable[[Step, str, Context], None] | None = None,
    on_compaction: OnCompaction | None = None,
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
        prices: a :class:`~ctxnb.prices.PriceTable`, a mapping or a JSON file
            (see :func:`~ctxnb.prices.resolve_prices`); the shipped table when None.
        on_context: called with ``(step, strategy label, context)`` for every context as
            it is built, to keep what the frame does not (a view's item lists) without
            replaying the run a second time.
        on_compaction: called with ``(step, changes)`` at each compaction of the run:
            the tool results it dropped and whether each survived in its summary
            (see :mod:`ctxnb.replay.compaction`).

    Returns:
        A tidy frame with one row per (trajectory, strategy, step) and the columns of
        :data:`COLUMNS` (see :mod:`ctxnb.replay.frame` for the cache and cost columns).
        The same inputs give the same frame, context hashes included.

    Raises:
        NotFoundError: ``model`` is given and the price table does not know it.

    Example:
        >>> from ctxnb.replay import load
        >>> from ctxnb.strategies import KeepAll, ObservationMasking
        >>> t = load("data/trajectories/django__django-13670.traj.json")  # doctest: +SKIP
        >>> df = replay(t, [KeepAll(), ObservationMasking(5)])  # doctest: +SKIP
        >>> df.groupby("strategy")["total_tokens"].sum()  # doctest: +SKIP
    """

    if not isinstance(trajectory, Trajectory):
        from .converters import load

        trajectory = load(trajectory)
    strategies = list(strategies) if strategies is not None else default_strategies()
    table = resolve_prices(prices)
    price = table.get(model) if model else table.price_or_warn(trajectory.metadata.get("model"))
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
        rows.append(row(trajectory, label, step, ctx, losses, measure, price))
    return frame(rows)


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
