"""Agent Trace records: how ctxnb builds one, and how it reads whom a record names.

:func:`build_trace_record` makes the record of a change (its ranges, each with a
position-independent content hash, its intent, session, tool and mutation class);
:func:`build_event_record` the record of a decision that changed no file. The ledger
that stores them is :mod:`ctxnb.govern.ledger`, which exports these names too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import quote, unquote

from .._version import __version__
from ..hashing import sha256_hex
from ._gitrev import _find_git_root, _head_revision_at, git_head_revision

__all__ = [
    "AGENT_TRACE_VERSION",
    "ContributorType",
    "build_event_record",
    "build_trace_record",
    "normalized_content_hash",
    "record_intent_id",
    "record_session_id",
]

AGENT_TRACE_VERSION = "0.1.0"
INTENT_URN_PREFIX = "urn:ctxnb:intent:"
SESSION_URN_PREFIX = "urn:ctxnb:session:"
# conversations[].url of a change made through one of ctxnb's doors (API, MCP, ACP, A2A,
# live runs): the session whose chat the workspace's store keeps (`ws.session(id)`).
# Claude Code's own transcript, when its hook names one, is a file:// URI instead.
CONVERSATION_URN_PREFIX = "urn:ctxnb:conversation:"

ContributorType = Literal["ai", "human", "mixed", "unknown"]

# Keys build_trace_record owns in ``metadata``; extra_metadata may not override them.
_RESERVED_METADATA = ("intent_id", "session_id", "tool", "mutation_class")


def normalized_content_hash(text: str) -> str:
    """``"sha256:<hex>"`` of a range's text, normalized for position-independent tracking.

    The steps of ``docs/agent-trace-mapping.md``: ``\\r\\n`` and a lone ``\\r``
    become ``\\n``; trailing spaces and tabs are stripped from every line; the lines are
    joined with ``\\n``. One final newline ends the last line rather than adding an
    empty one, so ``"a\\n"`` and ``"a"`` hash alike while ``"a\\n\\n"`` (a range
    whose last line is blank) does not.

    Example:
        >>> normalized_content_hash("a = 1  \\r\\nb = 2\\r\\n") == normalized_content_hash(
        ...     "a = 1\\nb = 2")
        True
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]  # a final newline ends the last line; it is not an extra empty line
    norm = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return "sha256:" + sha256_hex(norm.encode("utf-8"))


# Lines as the ranges count them (ctxnb.tools.patching.changed_line_ranges): a line ends
# at "\n" or "\r\n"; a lone "\r" stays inside its line.
_LINE_END = re.compile(r"\r?\n")


def build_trace_record(
    *,
    file_path: str,
    ranges: list[tuple[int, int]],
    new_text: str,
    intent_id: str,
    session_id: str | None,
    contributor_type: ContributorType = "ai",
    model_id: str | None,
    repo_root: Path | RepoRoot | None,
    tool: str | None = None,
    mutation_class: str | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    clock: Callable[[], datetime] | None = None,
    conversation_url: str | None = None,
) -> dict[str, Any]:
    """One Agent Trace 0.1.0 record for a change to one file.

    Args:
        file_path: the file, relative to ``repo_root`` (or absolute inside it).
            Stored relative to the git repository root when ``repo_root`` lies in a
            repository, else relative to ``repo_root``.
        ranges: 1-based inclusive ``(start_line, end_line)`` spans of ``new_text``
            that the change produced.
        new_text: the file's content after the change.
        intent_id: the intent the change was made under.
        session_id: the ctxnb session, if any.
        contributor_type: who wrote the ranges.
        model_id: the model, in models.dev form (``anthropic/claude-sonnet-4``).
        repo_root: the workspace root; ``vcs`` is filled from its git ``HEAD`` and
            left out when it is None, not in a repository or the repository has no
            commit yet. A :class:`RepoRoot` is a root resolved once (a recorder's).
        tool: the tool call that made the change (``write_file``, ``apply_patch``).
        mutation_class: ``AST_REFACTOR`` or ``INTENT_EVOLUTION``.
        extra_metadata: more keys for ``metadata``; may not reuse ctxnb's keys.
        clock: returns the current time (timezone-aware; naive means UTC).
        conversation_url: where the conversation that made the change can be read
            (a URL, or a ``file://`` URI of a transcript), when the client gives one;
            it becomes the conversation's ``url``.

    Raises:
        ValueError: a range is outside ``new_text`` or reversed, the path leaves
            ``repo_root``, or ``extra_metadata`` reuses a reserved key.

    Example:
        >>> from datetime import datetime, UTC
        >>> rec = build_trace_record(
        ...     file_path="src/a.py", ranges=[(1, 2)], new_text="a = 1\\nb = 2\\n",
        ...     intent_id="INT-1", session_id="s1", model_id="anthropic/claude-sonnet-4",
        ...     repo_root=None, clock=lambda: datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC))
        >>> rec["timestamp"], rec["files"][0]["conversations"][0]["related"][0]["url"]
        ('2025-01-02T03:04:05.000Z', 'urn:ctxnb:intent:INT-1')
    """
    timestamp = _timestamp(clock)

    lines = _LINE_END.split(new_text)
    if lines and lines[-1] == "":
        lines.pop()
    out_ranges = []
    for start, end in ranges:
        if not (1 <= start <= end <= len(lines)):
            raise ValueError(
                f"range ({start}, {end}) is not a 1-based inclusive span of the new text "
                f"({len(lines)} lines)"
            )
        out_ranges.append(
            {
                "start_line": start,
                "end_line": end,
                # Each line with its newline: a range ending in a blank line keeps it.
                "content_hash": normalized_content_hash(
                    "".join(line + "\n" for line in lines[start - 1 : end])
                ),
            }
        )

    contributor: dict[str, Any] = {"type": contributor_type}
    if model_id:
        contributor["model_id"] = model_id
    related = [{"type": "intent", "url": INTENT_URN_PREFIX + quote(intent_id, safe="")}]
    if session_id:
        related.append({"type": "session", "url": SESSION_URN_PREFIX + quote(session_id, safe="")})

    rel_path = file_path.replace("\\", "/")
    revision = None
    if repo_root is not None:
        where = repo_root if isinstance(repo_root, RepoRoot) else RepoRoot(repo_root)
        rel_path, git_root = where.relative(file_path)
        revision = _head_revision_at(Path(git_root)) if git_root is not None else None

    metadata: dict[str, Any] = {"intent_id": intent_id}
    if session_id:
        metadata["session_id"] = session_id
    if tool:
        metadata["tool"] = tool
    if mutation_class:
        metadata["mutation_class"] = mutation_class
    for key, value in (extra_metadata or {}).items():
        if key in _RESERVED_METADATA:
            raise ValueError(f"extra_metadata may not set {key!r}; pass it as an argument")
        metadata[key] = value

    record = _envelope(timestamp, revision)
    record["files"] = [
        {
            "path": rel_path,
            "conversations": [
                {
                    **({"url": conversation_url} if conversation_url else {}),
                    "contributor": contributor,
                    "ranges": out_ranges,
                    "related": related,
                }
            ],
        }
    ]
    record["metadata"] = metadata
    return record


def build_event_record(
    *,
    metadata: Mapping[str, Any],
    repo_root: Path | None,
    clock: Callable[[], datetime] | None = None,
) -> dict[str, Any]:
    """An Agent Trace record that changed no file (``files: []``), e.g. a human decision.

    Example:
        >>> from ctxnb.govern.ledger import check_record
        >>> rec = build_event_record(metadata={"intent_id": "INT-1"}, repo_root=None)
        >>> rec["files"], rec["metadata"]["intent_id"], check_record(rec)
        ([], 'INT-1', [])
    """
    revision = git_head_revision(repo_root) if repo_root is not None else None
    record = _envelope(_timestamp(clock), revision)
    record["files"] = []
    record["metadata"] = dict(metadata)
    return record


def _timestamp(clock: Callable[[], datetime] | None) -> str:
    now = (clock or (lambda: datetime.now(UTC)))()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _uuid4() -> str:
    """A random (version 4) UUID, as ``str(uuid.uuid4())`` gives, without importing
    :mod:`uuid` (which loads :mod:`platform`): the Claude Code hook writes records too.

    Example:
        >>> import uuid
        >>> u = uuid.UUID(_uuid4())
        >>> (u.version, u.variant == uuid.RFC_4122, str(u) == str(u).lower())
        (4, True, True)
    """
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _envelope(timestamp: str, revision: str | None) -> dict[str, Any]:
    """The fields every record has: version, id, time, vcs (when known), tool."""
    record: dict[str, Any] = {
        "version": AGENT_TRACE_VERSION,
        "id": _uuid4(),
        "timestamp": timestamp,
    }
    if revision:
        record["vcs"] = {"type": "git", "revision": revision}
    record["tool"] = {"name": "ctxnb", "version": __version__}
    return record


class RepoRoot:
    """A workspace root, resolved once, and the git repository it lies in.

    The root is resolved with ``os.path.realpath`` when this is made, as the access
    layer resolves its root once when its policy is made (:mod:`ctxnb.access.fdio`,
    :meth:`Workspace.open <ctxnb.Workspace.open>`): the recorded path is relative to
    the directory the writes went to. Resolving it again for every record cost an
    ``lstat`` per component of the root's path. The git root is looked for on every
    record (a ``git init`` above or in the workspace may come at any time).
    """

    __slots__ = ("real",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.real = os.path.realpath(root)

    def relative(self, file_path: str) -> tuple[str, str | None]:
        """The path relative to the git root (or to the root outside git), and the git
        root.

        Raises:
            ValueError: the path leaves the root, or names it.
        """
        # os.path on strings: this runs for every trace record, and pathlib costs several
        # times more for the same answer.
        root = self.real
        full = os.path.normpath(os.path.join(root, file_path))
        git_root = _find_git_root(root)
        base = git_root or root
        rel = os.path.relpath(full, base) if full.startswith(base) else ".."
        if rel == ".." or rel.startswith("../"):
            raise ValueError(f"{file_path!r} is outside the repository root {base}")
        if rel == ".":
            raise ValueError(f"{file_path!r} names the repository root, not a file")
        return PurePosixPath(rel).as_posix(), git_root


def _relative_path(file_path: str, repo_root: Path) -> tuple[str, Path | None]:
    """The path relative to the git root (or to repo_root outside git), and the git root."""
    rel, git_root = RepoRoot(repo_root).relative(file_path)
    return rel, Path(git_root) if git_root else None


def _record_id(record: Mapping[str, Any], key: str, prefix: str) -> str | None:
    meta = record.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get(key), str) and meta[key]:
        return str(meta[key])
    for f in record.get("files") or []:
        for conv in f.get("conversations") or []:
            for rel in conv.get("related") or []:
                url = rel.get("url", "")
                if isinstance(url, str) and url.startswith(prefix):
                    return unquote(url.removeprefix(prefix))
    return None


def record_intent_id(record: Mapping[str, Any]) -> str | None:
    """The intent a record was made under: ``metadata.intent_id``, else the first
    ``urn:ctxnb:intent:`` URL in a conversation's ``related`` list.

    Example:
        >>> record_intent_id({"metadata": {"intent_id": "INT-7"}})
        'INT-7'
    """
    return _record_id(record, "intent_id", INTENT_URN_PREFIX)


def record_session_id(record: Mapping[str, Any]) -> str | None:
    """The session a record was made in: ``metadata.session_id``, else the first
    ``urn:ctxnb:session:`` URL in a conversation's ``related`` list.

    Example:
        >>> record_session_id({"files": [{"conversations": [{"related": [
        ...     {"type": "session", "url": "urn:ctxnb:session:s%201"}]}]}]})
        's 1'
    """
    return _record_id(record, "session_id", SESSION_URN_PREFIX)
