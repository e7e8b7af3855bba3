"""Recall: what a masking strategy elided from the prompt, fetched back from the session.

A strategy paired with recall (:class:`~ctxnb.strategies.WithRecall`) shows an elided
output as a placeholder naming a handle. :func:`recall` answers the agent's ``recall``
command from the session's own records, never from the disk or a re-run:

- ``recall HANDLE`` (or an object id): the output exactly as it was recorded, redacted
  as every text the model reads;
- ``recall --search WORDS``: the lines of the session's outputs that hold every word
  (case-insensitive), each under the handle that fetches its whole output.

Only the session's own objects are reachable (not another session's, not a call the
harness made and the model never saw). :func:`register_recall` adds the tool to a tool
runner, where each call is audited and recorded like any other; :func:`parse_recall`
tells a shell command that is a recall from one that is not.

Example:
    >>> import tempfile
    >>> from ctxnb import Workspace
    >>> from ctxnb.strategies.recall import recall_handle
    >>> ws = Workspace.open(tempfile.mkdtemp())
    >>> s = ws.session("demo")
    >>> oid = s.record_toolcall("run_command", {"cmd": "seq 3"}, "1\\n2\\n3\\n", id="t1")
    >>> recall(s, ref=recall_handle(oid))
    '1\\n2\\n3\\n'
    >>> print(recall(s, query="2"), end="")
    recall 628b49d9 (run_command(cmd=seq 3)):
      2: 2
    >>> parse_recall("recall --search def add")
    {'query': 'def add'}
    >>> ws.close()
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, NotFoundError
from ..redaction.redactor import redact_text
from ..strategies.recall import RECALL_COMMAND, recall_handle
from .schemas import ToolInfo

if TYPE_CHECKING:
    from ..session.core import Session
    from .call import ToolRunner

__all__ = ["RECALL", "RecallArgs", "parse_recall", "recall", "register_recall"]

_MAX_HITS = 20  # lines a search shows (each output's handle fetches the rest)
_LINES_PER_ITEM = 3


class RecallArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str | None = Field(
        default=None, description="The handle an elided output names (or an object id)."
    )
    query: str | None = Field(
        default=None, description="Words to find in the session's outputs (all of them)."
    )


RECALL = ToolInfo(
    name=RECALL_COMMAND,
    description="Show an elided output again by its handle, or search every output of "
    "this session for lines holding all the given words.",
    args=RecallArgs,
    mutating=False,
    idempotent=True,
)


def _recallable(session: Session) -> list[str]:
    # The session's outputs the model could have seen: not the harness's hidden calls,
    # not recalls (a search would find its own earlier answers).
    out = []
    for oid in session.session_index:
        doc = session.get(oid)
        if doc.get("hidden") or doc.get("tool") == RECALL_COMMAND:
            continue
        if doc.get("type") in ("toolcall", "file"):
            out.append(oid)
    return out


def recall(session: Session, *, ref: str | None = None, query: str | None = None) -> str:
    """An elided output by its handle (``ref``), or the lines matching ``query``.

    Raises:
        ConfigError: neither or both of ``ref`` and ``query``, or an empty query.
        NotFoundError: no output of this session has that handle.
    """
    if (ref is None) == (query is None):
        raise ConfigError(
            f"{RECALL_COMMAND}: give a handle (`{RECALL_COMMAND} 3fa2c91b`) or a search "
            f"(`{RECALL_COMMAND} --search WORDS`), one of them"
        )
    ids = _recallable(session)
    if ref is not None:
        want = ref.strip()
        for oid in ids:
            if want in (oid, recall_handle(oid)):
                content = session.get(oid).get("content")
                return "(no output)\n" if content is None else redact_text(str(content))
        raise NotFoundError(
            f"{RECALL_COMMAND}: no output of this session has the handle {want!r}; a handle "
            "is the 8 characters after `recall` in an elided output's placeholder"
        )
    words = [w.lower() for w in (query or "").split()]
    if not words:
        raise ConfigError(f"{RECALL_COMMAND} --search: give at least one word to look for")
    lines: list[str] = []
    for oid in reversed(ids):  # the latest outputs first: usually the ones wanted
        content = session.get(oid).get("content")
        if not isinstance(content, str):
            continue
        hits = [
            (n, line)
            for n, line in enumerate(redact_text(content).splitlines(), 1)
            if all(w in line.lower() for w in words)
        ]
        if not hits:
            continue
        meta = session.metadata(oid)
        lines.append(f"{RECALL_COMMAND} {recall_handle(oid)} ({meta.path or meta.args_display}):")
        lines += [f"  {n}: {line}" for n, line in hits[:_LINES_PER_ITEM]]
        if len(hits) > _LINES_PER_ITEM:
            lines.append(f"  … {len(hits) - _LINES_PER_ITEM} more lines")
        if len(lines) >= _MAX_HITS:
            lines.append("[more outputs match: search with more words]")
            break
    if not lines:
        return f"no output of this session has a line with: {' '.join(words)}\n"
    return "\n".join(lines) + "\n"


def parse_recall(command: str) -> dict[str, str] | None:
    """The recall arguments of a shell command, or None when it is not a recall.

    ``recall HANDLE`` and ``recall --search WORDS`` (``-s`` too) are recalls; anything
    else (a pipe, a second command, no argument) runs as the command it is.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) < 2 or words[0] != RECALL_COMMAND:
        return None
    if any(ch in command for ch in ";|&<>`$\n"):
        return None  # shell syntax: not a plain recall
    if words[1] in ("--search", "-s"):
        return {"query": " ".join(words[2:])} if len(words) > 2 else None
    return {"ref": words[1]} if len(words) == 2 else None


def recall_command(args: dict[str, Any]) -> str:
    """The shell command that makes a recall with ``args`` (see :func:`parse_recall`)."""
    if args.get("query") is not None:
        return f"{RECALL_COMMAND} --search {args['query']}"
    return f"{RECALL_COMMAND} {args.get('ref') or ''}".rstrip()


def register_recall(tools: ToolRunner) -> None:
    """Add the ``recall`` tool to ``tools``: audited and recorded like any other call."""
    tools.register_tool(
        RECALL,
        lambda ref=None, query=None: recall(tools.session, ref=ref, query=query),
        governed=True,
    )
