"""Claude Code's compactions, recorded: what it dropped, restorable from the store.

When Claude Code compacts a conversation, every tool result before that point leaves
its context and the next prompt starts from one summary. ``ctxnb hook post-compact``
answers its ``PostCompact`` event (``trigger``: ``manual`` or ``auto``, and
``compact_summary``, the summary it wrote) in a governed workspace by recording the
compaction the way a context strategy's is recorded, so the same tools audit and undo it:

1. The tool results of the compacted part of the conversation are read from Claude
   Code's transcript (``transcript_path``, through :mod:`ctxnb.replay`'s reader: the
   main line since the previous compaction) and stored as tool calls of the ctxnb session
   ``claude-code-<session_id>`` (redacted like every tool output; a result already
   stored, when the hook runs again, is not stored twice).
2. A context of that session is assembled and recorded with
   :class:`ClaudeCodeCompaction`, which folds those results into the summary: each is a
   ``compacted`` row of ``session.context_changes(turn)`` by ``claude-code-compaction``,
   ``context_at(turn)`` shows the summary in the first one's place and a one-line
   placeholder for each other (ctxnb's rendering of a condensed block), and
   ``session.restore_item(change)`` brings a result back exactly as it was stored.
3. An audit line (tool ``PostCompact``) says how many results were dropped and which of
   them the summary does not mention (:func:`ctxnb.replay.compaction.survival`: none of
   their distinctive terms is in it).

A transcript ctxnb cannot read (missing, not Claude Code's format) still leaves the
summary and the audit line (``TRANSCRIPT_UNREADABLE``), and the hook tells the user
(``systemMessage``) that the dropped results could not be listed. Loaded only for this
event: it opens the store.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CtxnbError
from ..strategies.builtin import Selection, StrategyInput
from ._claude_hookio import HookResult, PayloadError, _answer, _cap, _Context, _error

if TYPE_CHECKING:
    from ..replay.model import Step

__all__ = ["STRATEGY", "ClaudeCodeCompaction", "compacted_steps", "post_compact"]

#: The strategy name a recorded Claude Code compaction carries (``ContextChange.by``).
STRATEGY = "claude-code-compaction"
_TRIGGERS = ("manual", "auto")
# The key of a stored result's step in the transcript: what makes a second run of the
# hook find it stored already.
_STEP_KEY = "transcript_step"


class ClaudeCodeCompaction:
    """The strategy of a recorded compaction: ``ids`` folded into ``summary``.

    Every other candidate is kept (the pinned startup items a new context starts with);
    the first of ``ids`` shows the summary, the others a placeholder, and all of them are
    ``compacted`` in the context's changes.

    Example:
        >>> import tempfile
        >>> from ctxnb import Workspace
        >>> s = Workspace.open(tempfile.mkdtemp()).session("cc", rules=False)
        >>> a, b = (s.record_toolcall("Read", {"n": n}, f"text {n}") for n in range(2))
        >>> _ = s.assemble(ClaudeCodeCompaction([a, b], "Read two files."))
        >>> [(c.op, c.by) for c in s.context_changes(0)]
        [('compacted', 'claude-code-compaction'), ('compacted', 'claude-code-compaction')]
    """

    name = STRATEGY

    def __init__(self, ids: Sequence[str], summary: str, trigger: str | None = None) -> None:
        self.ids = list(ids)
        self.summary = summary
        self.trigger = trigger

    def select(self, inp: StrategyInput) -> Selection:
        present = [i for i in self.ids if any(it.id == i for it in inp.items)]
        if not present:
            return Selection(active=[i.id for i in inp.items])
        head = present[0]
        return Selection(
            active=[i.id for i in inp.items],
            masked=present[1:],
            replace={head: self.summary},
            condensed=dict.fromkeys(present, head),
        )

    def __repr__(self) -> str:
        return f"ClaudeCodeCompaction({len(self.ids)} results, trigger={self.trigger!r})"


def compacted_steps(steps: Sequence[Step], summary: str) -> list[Step]:
    """The tool steps of the part of the main line this compaction dropped.

    When the transcript already holds this compaction (its last boundary, whose summary
    is ``summary`` or not yet written), that is the part between the boundary before it
    and it; otherwise everything after the last boundary.
    """
    bounds = [i for i, s in enumerate(steps) if s.compaction]
    end = len(steps)
    if bounds:
        last = steps[bounds[-1]]
        told = (last.observation or "").strip()
        if not told or told == summary.strip():
            end = bounds[-1]
            bounds = bounds[:-1]
    start = bounds[-1] + 1 if bounds else 0
    return [
        s
        for s in steps[start:end]
        if not s.compaction
        and s.observation is not None
        and s.action.tool not in ("user", "reply", "unknown")
    ]


def _transcript_steps(path: Any) -> list[Step]:
    """The main line of Claude Code's transcript at ``path``.

    Raises:
        CtxnbError: not an absolute path to a readable Claude Code transcript.
    """
    if not isinstance(path, str) or not os.path.isabs(path):
        raise CtxnbError(f"the payload's transcript_path {path!r} is not an absolute path")
    if not os.path.isfile(path):
        raise CtxnbError(f"the transcript {path} is not a file")
    from ..replay.claude_code import SOURCE_FORMAT
    from ..replay.converters import load

    trajectory = load(path)
    if trajectory.source_format != SOURCE_FORMAT:
        raise CtxnbError(
            f"{path} reads as {trajectory.source_format}, not a Claude Code transcript"
        )
    return list(trajectory.steps)


def post_compact(ctx: _Context) -> HookResult:
    """Answer ``PostCompact``: record the compaction (see the module docstring)."""
    if not ctx.governed:
        return HookResult()  # nothing is recorded in a project without governance
    summary = ctx.payload.get("compact_summary")
    if not isinstance(summary, str):
        raise PayloadError("a PostCompact payload needs 'compact_summary' (a string)")
    trigger = ctx.payload.get("trigger")
    if trigger is not None and trigger not in _TRIGGERS:
        raise PayloadError(f"'trigger' must be one of {', '.join(_TRIGGERS)}, got {trigger!r}")
    problem: str | None = None
    try:
        steps = compacted_steps(_transcript_steps(ctx.payload.get("transcript_path")), summary)
    except (CtxnbError, OSError, ValueError) as e:
        steps, problem = [], str(e)
    try:
        dropped, lost = _record(ctx, steps, summary, trigger)
    except (CtxnbError, OSError) as e:
        return _error("post-compact", f"could not record the compaction: {e}")
    _audit(ctx, trigger, summary, dropped, lost, problem)
    if problem is not None:
        # Said to the user (Claude Code shows a systemMessage), not hidden in a log.
        return _answer(
            {
                "systemMessage": _cap(
                    "ctxnb: the compaction's summary was recorded, but the tool results it "
                    f"replaced could not be listed, so they are not restorable: {problem}"
                )
            }
        )
    return HookResult()


def _record(
    ctx: _Context, steps: Sequence[Step], summary: str, trigger: str | None
) -> tuple[list[str], list[str]]:
    """Store the dropped results and the compaction in the Claude Code session; their
    ids, and the ids of those the summary does not mention."""
    from ..replay.compaction import survival
    from .backend import WorkspaceBackend

    sid = ctx.session_id
    states = ctx.state_dir

    def prepare(ws: Any) -> None:
        ws.protected_cache = states  # what runs on the host, from the hook's cache

    # The session is opened as every door opens one (closing the backend saves it).
    with WorkspaceBackend.open(
        ctx.root,
        session_id=f"claude-code-{sid}" if sid else None,
        caller="claude-code",
        prepare=prepare,
    ) as backend:
        session = backend.session
        stored: dict[int, str] = {}
        for oid in session.session_index:
            doc = session.get(oid)
            args = doc.get("args") if doc.get("type") == "toolcall" else None
            if isinstance(args, Mapping) and isinstance(args.get(_STEP_KEY), int):
                stored[args[_STEP_KEY]] = oid
        ids: list[str] = []
        for step in steps:
            known = stored.get(step.index)
            if known is None:
                args = {**step.action.args, _STEP_KEY: step.index}
                known = session.record_toolcall(step.action.tool, args, step.observation or "")
            else:
                session.activate(known)
            ids.append(known)
        session.add_turn(
            "system",
            f"Claude Code compacted the conversation ({trigger or 'trigger not given'}): "
            f"{len(ids)} tool results folded into its summary",
        )
        session.assemble(ClaudeCodeCompaction(ids, summary, trigger))
        verdict = survival({i: session.get(i).get("content") or "" for i in ids}, summary)
        for oid in ids:
            # They left Claude Code's context: a later compaction does not fold them again.
            session.deactivate(oid)
        session.save()
    return ids, [i for i in ids if verdict[i][0] is False]


def _audit(
    ctx: _Context,
    trigger: str | None,
    summary: str,
    dropped: list[str],
    lost: list[str],
    problem: str | None,
) -> None:
    args: dict[str, Any] = {
        "trigger": trigger,
        "summary_chars": len(summary),
        "dropped": len(dropped),
        "not_in_summary": lost,
    }
    ctx.audit(
        "PostCompact",
        args,
        success=problem is None,
        error_code=None if problem is None else "TRANSCRIPT_UNREADABLE",
    )
