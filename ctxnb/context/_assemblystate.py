"""What assembly reads: a session's state as references, and the metadata of its items.

:class:`AssemblyState` is what a session hands :class:`~ctxnb.context.Assembler` (its
own dictionaries, no copies); :class:`MetaEntry` is one item's metadata line, made from
a stored document by :func:`meta_for` (redacted, as everything the model sees);
``view_doc`` is the document the prompt shows, a client's active copy when one is
registered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hashing import sha256_hex
from ..indexer import is_deleted
from ..redaction.redactor import redact_text
from ._framing import inline


@dataclass
class MetaEntry:
    """The one-line metadata of an object, as the model sees it in the pool."""

    id: str
    type: str
    path: str | None = None
    file_type: str | None = None
    char_count: int = 0
    tool: str | None = None
    status: str | None = None
    args_display: str | None = None
    deleted: bool = False
    orphaned: bool = False

    def line(self, *, active: bool, pinned: bool) -> str:
        return meta_line(self.head(), self.flags(active=active, pinned=pinned))

    def head(self) -> str:
        """The line without its flags: what the object is."""
        if self.type == "file":
            head = f"- file {self.path} ({self.file_type}, {self.char_count} chars)"
        elif self.type == "toolcall":
            head = f"- toolcall {self.args_display or self.tool} [{self.status}]"
        else:
            head = f"- {self.type} {self.id}"
        # Paths and arguments come from the agent or the disk: one line, whatever they hold.
        return inline(head)

    def flags(self, *, active: bool, pinned: bool) -> tuple[str, ...]:
        """The line's flags, in their fixed order."""
        return tuple(
            f
            for f, on in (
                ("active", active),
                ("pinned", pinned),
                ("deleted", self.deleted),
                ("orphaned", self.orphaned),
            )
            if on
        )


def meta_line(head: str, flags: Sequence[str]) -> str:
    """One metadata line from its head and flags (see :meth:`MetaEntry.line`)."""
    return head + (f" [{', '.join(flags)}]" if flags else "")


def meta_for(
    doc: Mapping[str, Any],
    *,
    orphaned: bool,
    reverse_resolve: Callable[[str, str | None], str],
) -> MetaEntry:
    """The metadata entry of a stored document; file paths shown as the agent sees them."""
    t = doc.get("type", "")
    if t == "file":
        src = doc.get("source") or {}
        return MetaEntry(
            doc["xt/id"],
            "file",
            # The path labels the item in the metadata pool and the active content: a
            # secret in a file name is redacted like one in the file.
            path=redact_text(reverse_resolve(src.get("path", ""), src.get("filesystemId"))),
            file_type=doc.get("file_type"),
            char_count=int(doc.get("char_count") or 0),
            deleted=is_deleted(dict(doc)),
            orphaned=orphaned,
        )
    if t == "toolcall":
        return MetaEntry(
            doc["xt/id"],
            "toolcall",
            # The name the model gave the call, when it was recorded as a call of another
            # tool (a live run's bash for ctxnb's run_command): the prompt speaks its terms.
            tool=shown_call(doc)[0],
            status=doc.get("status"),
            # Stored calls predating redaction, or recorded by other writers, are
            # shown redacted too.
            args_display=redact_text(doc.get("args_display") or "") or None,
            char_count=len(doc.get("content") or ""),
        )
    return MetaEntry(doc["xt/id"], t, char_count=len(str(doc.get("content") or "")))


def shown_call(doc: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A tool call's name and arguments as the model made it (the record's ``shown``
    form, see :meth:`~ctxnb.session.Session.record_toolcall`), else as ctxnb ran it."""
    shown = doc.get("shown")
    if isinstance(shown, Mapping) and isinstance(shown.get("tool"), str):
        return shown["tool"], dict(shown.get("args") or {})
    return doc.get("tool"), dict(doc.get("args") or {})


@dataclass
class AssemblyState:
    """The live state of a session that assembly reads (references, not copies).

    Attributes:
        active: active ids in activation order.
        pinned: pinned ids.
        pool: the metadata pool in order.
        meta: metadata per id.
        doc: the session's full document of an id (loads content when needed).
        last_used: recency tick per id.
        seq: when each active id entered the active set.
        entered: the number of chat turns when each active id entered (its place among
            the turns).
        orphaned: ids whose filesystem is not reachable.
        system_prompt: the system prompt's text.
        turns: the chat turns so far.
        head: ids read right after the system prompt, in this order (the rules files a
            tracker loaded, root to leaf); pinned items follow them. Only those that
            entered before the first chat turn are read there (see :meth:`in_head`).
        overlays: id -> a client's active copy of a file, shown instead of its content.
        meta_log: the metadata log (:mod:`ctxnb.context._metalog`); assembly appends
            a block to it when a line is new or changed.
    """

    active: Mapping[str, None]
    pinned: Mapping[str, None]
    pool: Sequence[str]
    meta: Mapping[str, MetaEntry]
    doc: Callable[[str], dict[str, Any]]
    last_used: Mapping[str, int]
    seq: Mapping[str, int]
    entered: Mapping[str, int]
    orphaned: Iterable[str]
    system_prompt: str
    turns: Sequence[dict[str, Any]]
    head: Sequence[str] = ()
    overlays: Mapping[str, str] = field(default_factory=dict)
    meta_log: list[dict[str, Any]] = field(default_factory=list)

    def in_head(self, oid: str) -> bool:
        """Whether ``oid`` is read in the head, with the system prompt.

        Rules and pinned items that entered before the first chat turn are; one found
        or pinned later (a folder's AGENTS.md when the agent first reads a file there)
        enters after everything so far, like any new item: putting it in the head
        would change the first message, and the provider's prefix cache would miss
        the whole prompt at that step.
        """
        if self.entered.get(oid, 0) > 0:
            return False
        return oid in self.pinned or oid in self.head


def with_active_copy(doc: Mapping[str, Any], text: str) -> dict[str, Any]:
    """``doc`` showing a client's active copy ``text`` instead of its stored content."""
    return {
        **doc,
        "content": text,
        "char_count": len(text),
        "content_hash": sha256_hex("active-copy\x00" + text),
    }


def view_doc(state: AssemblyState, oid: str) -> dict[str, Any]:
    """The document the prompt shows for ``oid``: its active copy when one is registered."""
    doc = state.doc(oid)
    text = state.overlays.get(oid)
    return doc if text is None else with_active_copy(doc, text)
