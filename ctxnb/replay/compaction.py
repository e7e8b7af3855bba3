"""What a replayed compaction kept: which tool results survived in its summary.

When Claude Code compacts a conversation, the next context starts from one summary;
every tool result before it is gone, and the summary says in prose what it kept. For
each compaction of a replayed run, :func:`ctxnb.replay.compaction_changes` (and
``replay(on_compaction=...)``) lists every tool result
that was in the context as a ``compacted`` :class:`~ctxnb.context.ContextChange` (its
tokens before, 0 after) and says whether it *survived*.

The rule (see ``docs/context.md``): a tool result survives when at least one of its
**distinctive terms** appears, verbatim, in the summary.

- A *term* is a run of letters, digits and ``_ . -`` (so ``annotation.ex``,
  ``close_review_session``, ``spotter-gqc.4``, ``Spotter.Transcripts`` are one term
  each; ``/`` and ``:`` split paths and URLs into their parts) that is at least
  :data:`MIN_TERM` characters long and looks like code or data rather than prose: it
  holds a digit, one of ``_ . -``, or a lower-case letter followed by a capital.
- A term is *distinctive* of a result when at most :data:`MAX_SHARED` of the tool
  results compacted together contain it: what every result shares (the project's
  name, its root path) says nothing about any one of them.
- A result without distinctive terms (an empty output, a bare "ok") gets
  ``survived=None``: there is nothing to look for.

``evidence`` lists the distinctive terms found in the summary (longest first, at most
five), so every verdict can be checked by eye.

Example:
    >>> results = {"t1": "def parse_header(x): ...", "t2": "total 0", "t3": "retry_count = 5"}
    >>> v = survival(results, "Fixed parse_header; tests pass.")
    >>> v["t1"], v["t2"], v["t3"]
    ((True, ('parse_header',)), (None, ()), (False, ()))
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..context import ContextChange
from ..strategies.builtin import KeepAll

if TYPE_CHECKING:
    from ..session.core import Session
    from .model import Step

__all__ = ["MAX_SHARED", "MIN_TERM", "compacted", "survival"]

MIN_TERM = 6
MAX_SHARED = 3
MAX_EVIDENCE = 5
_TERM = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?")
_CAMEL = re.compile(r"[a-z][A-Z]")


def terms(text: str) -> set[str]:
    """The code-like terms of a text (see the module docstring)."""
    out = set()
    for m in _TERM.finditer(text):
        t = m.group()
        if len(t) >= MIN_TERM and (
            any(c.isdigit() or c in "_.-" for c in t) or _CAMEL.search(t) is not None
        ):
            out.add(t)
    return out


def survival(
    results: Mapping[str, str], summary: str
) -> dict[str, tuple[bool | None, tuple[str, ...]]]:
    """Which of ``results`` (id -> text) survived in ``summary``: ``(survived, evidence)``."""
    each = {oid: terms(text) for oid, text in results.items()}
    shared = Counter(t for ts in each.values() for t in ts)
    out: dict[str, tuple[bool | None, tuple[str, ...]]] = {}
    for oid, ts in each.items():
        distinctive = [t for t in ts if shared[t] <= MAX_SHARED]
        if not distinctive:
            out[oid] = (None, ())
            continue
        found = sorted((t for t in distinctive if t in summary), key=lambda t: (-len(t), t))
        out[oid] = (bool(found), tuple(found[:MAX_EVIDENCE]))
    return out


def compacted(session: Session, step: Step) -> list[ContextChange]:
    """The tool results of a replay session's context as compaction ``step`` drops them."""
    summary = step.observation or ""
    trigger = step.action.args.get("trigger")
    by = f"compaction ({trigger})" if trigger else "compaction"
    # Until it compacts, the recorded agent kept every result: the keep-all context.
    ctx = session.assemble(KeepAll(), None, record=False)
    calls = [it for it in ctx.items if it.type == "toolcall"]
    verdict = survival({it.id: session.get(it.id).get("content") or "" for it in calls}, summary)
    return [
        ContextChange(
            turn=step.index,
            id=it.id,
            label=it.label,
            type=it.type,
            op="compacted",
            by=by,
            tokens_before=it.tokens,
            tokens_after=0,
            survived=verdict[it.id][0],
            evidence=verdict[it.id][1],
        )
        for it in calls
    ]
