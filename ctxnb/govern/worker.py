"""The compact context a worker starts from: its supervisor's rules, its files, the plan.

:meth:`ctxnb.session.Session.spawn_worker` narrows a worker's scope
(:mod:`ctxnb.govern.partition` checks the subset); this module fills the worker's
session so that it starts small and on task instead of with its supervisor's whole
history:

- the system prompt: the supervisor's system prompt, the intent's constraints and
  acceptance criteria (the rules the worker must keep), and a summary of the
  supervisor's plan (its latest turns, each cut to one short paragraph);
- the worker's files: the indexed files of its scope, active while they fit in
  ``budget`` tokens, the rest in its index, inactive, to open when needed.

Example:
    >>> plan_summary([{"role": "user", "content": "Split the parser."},
    ...               {"role": "assistant", "content": "1. lexer 2. grammar"}])
    '- user: Split the parser.\\n- assistant: 1. lexer 2. grammar'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session.core import Session
    from .intents import Intent

__all__ = ["plan_summary", "worker_context"]

_TURNS = 6  # the latest turns of the supervisor that make the plan
_TURN_CHARS = 400


def plan_summary(turns: Sequence[Mapping[str, Any]], *, limit: int = _TURNS) -> str:
    """The supervisor's latest turns, one line each (cut at 400 characters)."""
    lines = []
    for t in list(turns)[-limit:]:
        text = " ".join(str(t.get("content", "")).split())
        if len(text) > _TURN_CHARS:
            text = text[: _TURN_CHARS - 1] + "…"
        lines.append(f"- {t.get('role', '?')}: {text}")
    return "\n".join(lines)


def worker_context(
    supervisor: Session,
    worker: Session,
    intent: Intent,
    files: Sequence[str],
    *,
    budget: int | None,
) -> None:
    """Fill ``worker`` with its compact context (see the module docstring)."""
    parts = [f"You are a worker of session {supervisor.session_id}, under intent {intent.id}."]
    parts.append("Your scope (you may change only these): " + ", ".join(intent.owned_scope))
    if supervisor.system_prompt:
        parts.append("Supervisor's rules:\n" + supervisor.system_prompt)
    if intent.constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in intent.constraints))
    if intent.acceptance_criteria:
        parts.append(
            "Acceptance criteria:\n" + "\n".join(f"- {c}" for c in intent.acceptance_criteria)
        )
    plan = plan_summary(supervisor.turns)
    if plan:
        parts.append("Supervisor's plan (latest turns):\n" + plan)
    prompt = "\n\n".join(parts)
    count = worker.token_counter.count
    used = count(prompt)
    if budget is not None and used > budget:
        # The rules come first and are kept; the plan is what gives way.
        prompt = prompt[: max(0, len(prompt) * budget // max(used, 1))]
        used = count(prompt)
    worker.set_system_prompt(prompt)
    for rel in files:
        oid = worker.add_path(rel, activate=False)
        text = worker.get(oid).get("content") or ""
        cost = count(text) if isinstance(text, str) else 0
        if budget is None or used + cost <= budget:
            worker.activate(oid)
            used += cost
