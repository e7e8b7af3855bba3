"""``[budget]`` limits on Claude Code's own tools, decided in the pre-tool-use hook.

ctxnb's own tools are held to a session's ``[budget]`` by the tool runner
(:mod:`ctxnb.tools.budget`); Claude Code's Read, Grep, Glob, Write, Edit, MultiEdit,
NotebookEdit and Bash never pass it, so the pre-tool-use hook applies the same limits
with the same :class:`~ctxnb.tools.budget.SessionBudget`, on the same audit log:

* a write (Write, Edit, MultiEdit, NotebookEdit; and Bash, which the runner counts as a
  write too) is refused when the session has none left, before any other policy; it is
  counted once it ran, by the post hook's audit line of the edit or by ``sandbox exec``'s
  line of the command;
* a read is charged when the hook lets it through, because Claude Code runs no post hook
  for reads: Read with the lines it will return (``offset``, ``limit``, 2,000 lines of at
  most 2,000 characters by default), Glob with the names it lists, Grep with what
  ripgrep prints for the call's pattern and output mode. A read whose content would cross
  a limit is refused before it runs. A read Claude Code then fails to make (or its user
  declines, for a file marked sensitive) stays charged: the safe side.

The session is Claude Code's ``session_id``; the lines ``sandbox exec`` writes for its
commands (the ctxnb session ``claude-code-<id>``) count toward the same budget. A refusal
is ``BUDGET_EXCEEDED``, its reason says what is left of every limit, and it counts toward
the circuit breaker as the hook's other refusals do. Only a governed workspace keeps the
audit log the budget is counted from; this module is loaded only when ``[budget]`` sets a
limit, so the hook of a project without one pays nothing for it.

Each hook is a new process, so the session's running totals are kept between calls in
``.ctxnb/budget/<digest of the session id>.json`` with the log offset they reach: a
call reads only the audit lines after it, not the whole log. The counter is checked
against itself and the log, and one that does not check out is set aside and the log
counted again (:class:`~ctxnb.tools.budget.SessionBudget`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from ..errors import NotFoundError, PolicyError
from ._claude_hookio import PayloadError, _Context, _path_arg

__all__ = ["LINE_CHARS", "READ_LINES", "charge_read", "check_write", "read_shown"]

#: Lines Claude Code's Read returns when the call gives no ``limit``.
READ_LINES = 2000
#: Characters of a line Claude Code's Read shows; the rest of a longer line is cut.
LINE_CHARS = 2000
# A file read only to size what Read returns; past this, what Read shows is sized on it.
_READ_CAP = 64 * 1024 * 1024


def _budget(ctx: _Context) -> Any:
    from ..tools.budget import SessionBudget

    sid = ctx.session_id
    if sid is None:
        # Fail closed: without a session there is nothing to count the call against.
        raise PayloadError(
            "the payload has no 'session_id', and [budget] limits each session; Claude "
            "Code sends one with every call"
        )
    limits = {"read_bytes": None, "read_tokens": None, "writes": None, **ctx.settings["budget"]}
    # Named by a digest: the session id comes from the payload and is no path.
    name = hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return SessionBudget(
        SimpleNamespace(**limits),  # type: ignore[arg-type]  # the three limits, as BudgetConfig
        ctx.root / ".ctxnb" / "audit.jsonl",
        sid,
        also=[f"claude-code-{sid}"],
        counter=ctx.root / ".ctxnb" / "budget" / f"{name}.json",
    )


def _with_remaining(e: PolicyError, budget: Any) -> PolicyError:
    """The refusal with its code and what is left of every limit in its message: Claude
    Code shows the model the reason only."""
    left = ", ".join(f"{k} {v}" for k, v in budget.remaining().items())
    return PolicyError(
        e.error_code,
        f"{e.error_code}: {e.message}. Left of this session's budget: {left}",
        recoverable=e.recoverable,
        required_action=e.required_action,
        details={"budget_remaining": budget.remaining()},
    )


def check_write(ctx: _Context, tool: str) -> None:
    """Refuse a write (or a Bash command) when the session has no write left.

    Raises:
        PolicyError: ``BUDGET_EXCEEDED``.
    """
    budget = _budget(ctx)
    try:
        budget.check_write(tool)
    except PolicyError as e:
        raise _with_remaining(e, budget) from None


def read_shown(data: bytes, tool_input: Mapping[str, Any]) -> str:
    """What Claude Code's Read returns of a file's bytes: ``limit`` lines (2,000 by
    default) from line ``offset`` (1-based), each cut at 2,000 characters (line numbers,
    which Read adds, are not file content and are not counted)."""
    offset, limit = tool_input.get("offset"), tool_input.get("limit")
    start = offset - 1 if isinstance(offset, int) and not isinstance(offset, bool) else 0
    # A limit that is not a positive number may be read as none at all (JavaScript's
    # `limit || default`): sized as the default, the larger answer.
    count = READ_LINES
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        count = limit
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    picked = lines[max(0, start) : max(0, start) + count]
    return "".join(line[:LINE_CHARS] + ("\n" if len(line) > LINE_CHARS else "") for line in picked)


def charge_read(ctx: _Context, tool: str, tool_input: Mapping[str, Any], reach: Any = None) -> None:
    """Refuse a Read, Grep or Glob whose output would cross the session's read budget;
    else charge it (an audit line with its bytes and tokens).

    ``reach`` is what :func:`~ctxnb.integrations._claude_search.check_search` found the
    search reaches (Grep and Glob).

    Raises:
        PolicyError: ``BUDGET_EXCEEDED``; nothing is charged.
    """
    budget = _budget(ctx)
    path, shown = _output(ctx, tool, tool_input, reach)
    nbytes = len(shown.encode("utf-8"))
    tokens = 0
    if shown and budget.limits.read_tokens is not None:
        from ..llm.tokens import default_token_counter  # only a token limit pays for it

        tokens = default_token_counter().count(shown)
    try:
        budget.check_read(tool, path, nbytes, tokens)
    except PolicyError as e:
        raise _with_remaining(e, budget) from None
    ctx.audit(tool, tool_input, read_bytes=nbytes, read_tokens=tokens)


def _output(ctx: _Context, tool: str, tool_input: Mapping[str, Any], reach: Any) -> tuple[str, str]:
    """The path a refusal names, and the text the call will return."""
    if tool == "Read":
        path = _path_arg(tool_input, "file_path") or ""
        try:
            safe = ctx.policy.check(ctx.abs_path(path))
            data = ctx.policy.read_bytes(safe, max_bytes=_READ_CAP)
        except NotFoundError:
            return path, ""  # Claude Code's Read fails too: nothing is returned
        # A file too large to size (FILE_TOO_LARGE) is refused: ctxnb cannot tell what
        # the Read would return.
        return safe.rel, read_shown(data, tool_input)
    assert reach is not None, "a search is charged on what check_search found"
    where = _path_arg(tool_input, "path") or "."
    if tool == "Glob":
        return where, "".join(f"{name}\n" for name in reach.files)
    from ._claude_search import grep_output

    return where, grep_output(ctx, tool_input, reach)
