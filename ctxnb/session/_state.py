"""A session's state: its four sets of object ids and the operations on them.

The part of :class:`ctxnb.session.core.Session` that holds what the agent has seen and has
active (``session_index``, ``metadata_pool``, ``active_set``, ``pinned_set``), adds,
activates, pins and refreshes objects, and tells listeners what changed. Resuming a
stored session is in ``_session_resume.py``; tool calls, the chat, saving and the
context are in ``session.py``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..context import (
    Assembler,
    MetaEntry,
    meta_for,
)
from ..errors import NotFoundError
from ..hashing import stable_stringify
from ..llm.tokens import TokenCounter, resolve_token_counter
from ..model import INFRA_TYPES, new_id

if TYPE_CHECKING:
    from ..access.door import Access
    from .watch import Watcher


class RuleTracking(Protocol):
    """What a session asks of the instruction-file tracker attached to it (a seam: the
    tracker, :class:`ctxnb.instructions.RulesTracker`, sits in a package that imports
    sessions, so the session knows it only by these calls)."""

    def on_query(self, text: str | None = None) -> Sequence[object]: ...

    def on_tool_call(self, tool: str, args: Mapping[str, Any]) -> Sequence[object]: ...

    def rule_ids(self) -> list[str]: ...


@dataclass
class ResumeReport:
    """What resuming a session found."""

    objects: int = 0
    unchanged: int = 0
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    hashed: int = 0
    watching: int = 0


class _SessionState:
    """The sets of a :class:`ctxnb.session.core.Session` and the operations on them."""

    def __init__(
        self,
        workspace: Access,
        session_id: str,
        *,
        token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    ) -> None:
        self.workspace = workspace
        self.store = workspace.store
        self.session_id = session_id
        self.token_counter = resolve_token_counter(token_counter)
        self._lock = threading.RLock()
        self.session_index: list[str] = []
        self.metadata_pool: list[str] = []
        self._active: dict[str, None] = {}
        self._pinned: dict[str, None] = {}
        self._index_set: set[str] = set()
        self._pool_set: set[str] = set()
        # Plain dicts, or after a resume mappings that make a file's row of the store's
        # columns into its document or entry when first asked for (_session_columns).
        self._docs: MutableMapping[str, dict[str, Any]] = {}
        self._meta: MutableMapping[str, MetaEntry] = {}
        self._last_used: dict[str, int] = {}
        self._seq: dict[str, int] = {}
        # The number of chat turns when each active item entered: its place in the
        # append-only layout of the context (ctxnb.context).
        self._entered: dict[str, int] = {}
        # Client-registered active copies (unsaved editor buffers): what the prompt shows
        # instead of the stored content (DESIGN §3: active copy > stored > snippet).
        self._overlays: dict[str, str] = {}
        # The store transaction each active file was last checked against, and the
        # store's latest transaction at the last check (see _sync_with_store).
        self._seen_tx: dict[str, int] = {}
        self._synced_tx: int | None = None
        self._tick = 0
        self._turns: list[dict[str, Any]] = []
        # (turn, hash) of the last context assembled with record=True: what the model
        # saw when it asked for a change; the recorder puts it in the change's trace.
        self.last_context: tuple[int, str] | None = None
        self._toolcall_refs: list[str] = []
        self.chat_id = new_id()
        self.system_prompt_id: str | None = None
        self._system_prompt = ""
        self._sp_dirty = False
        # Rendering and its caches live in ctxnb.context; the session tells it what changed.
        self._assembler = Assembler(self.token_counter)
        self._orphaned: set[str] = set()
        self._watcher: Watcher | None = None
        self._listeners: list[Callable[[str, str], None]] = []
        self.last_resume: ResumeReport | None = None
        self._pending: list[dict[str, Any]] = []
        #: The instruction-file tracker attached to this session (it attaches itself,
        #: :class:`ctxnb.instructions.RulesTracker`), or None.
        self.rules_tracker: RuleTracking | None = None
        #: True when the session was opened with ``rules=False``: nothing attaches a
        #: rules tracker to it later (``ws.tools`` included).
        self.rules_off = False
        # Items brought back with restore_item (ctxnb.context._changes): saved with the session.
        self._restores: list[dict[str, Any]] = []
        # The metadata lines the prompt has shown, in blocks (ctxnb.context._metalog):
        # append-only, saved with the session so that past contexts rebuild exactly.
        self._meta_log: list[dict[str, Any]] = []

    def in_index(self, object_id: str) -> bool:
        """Whether the object is in this session's index (it was read or indexed in it)."""
        return object_id in self._index_set

    def _set_meta(self, oid: str, entry: MetaEntry) -> None:
        self._meta[oid] = entry
        if entry.orphaned:
            self._orphaned.add(oid)
        else:
            self._orphaned.discard(oid)
        self._dirty(oid)

    def _set_orphaned(self, oid: str, value: bool) -> None:
        m = self._meta[oid]
        if m.orphaned != value:
            self._set_meta(oid, MetaEntry(**{**vars(m), "orphaned": value}))

    def _dirty(self, oid: str) -> None:
        self._assembler.mark(oid)

    # -- sets -----------------------------------------------------------------------------
    @property
    def active_set(self) -> list[str]:
        return list(self._active)

    @property
    def pinned_set(self) -> list[str]:
        return list(self._pinned)

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    def set_system_prompt(self, text: str) -> None:
        """Replace the system prompt (a new version is stored at the next save)."""
        with self._lock:
            if text != self._system_prompt or self.system_prompt_id is None:
                self._system_prompt = text
                self.system_prompt_id = self.system_prompt_id or new_id()
                self._sp_dirty = True
                self._notify(self.system_prompt_id, "system prompt")

    def _touch(self, oid: str) -> None:
        self._tick += 1
        self._last_used[oid] = self._tick

    def _install(self, oid: str, doc: dict[str, Any]) -> None:
        """Take a new version of an object; an active item whose content changed re-enters."""
        old = self._docs.get(oid)
        self._docs[oid] = doc
        if old is not None and _version(old) != _version(doc):
            self._reenter(oid)

    def _reenter(self, oid: str) -> None:
        """An active item's content changed: it takes its place after everything so far.

        The model reads the new content after what happened since the old one, as in a
        transcript; everything before the item's old place stays a cacheable prefix.
        """
        if oid in self._active and oid not in self._overlays:
            self._tick += 1
            self._seq[oid] = self._tick
            self._entered[oid] = self.turn

    def set_active_copy(self, oid: str, text: str | None) -> None:
        """Show a client's active copy of a file (e.g. an unsaved buffer) instead of its
        stored content; ``None`` goes back to the stored content.

        :meth:`ctxnb.tools.FileTools.set_active_copy` calls this; assembled contexts record
        the copy so that :meth:`context_at` rebuilds it.
        """
        with self._lock:
            self._require(oid)
            if self._overlays.get(oid) == text:
                return
            if text is None:
                self._overlays.pop(oid, None)
            else:
                self._overlays[oid] = text
            if oid in self._active:
                self._tick += 1
                self._seq[oid] = self._tick
                self._entered[oid] = self.turn
            self._dirty(oid)
            self._notify(oid, "active copy")

    def _sync_with_store(self) -> None:
        """Take every newer stored version of an active file (index, watcher, other
        sessions and processes write them), so the prompt shows the workspace as it is."""
        latest = self.store.latest_tx()
        mark = latest.tx_id if latest else 0
        if mark == self._synced_tx:
            return
        for oid in list(self._active):
            if self._meta[oid].type == "toolcall":  # tool calls never change
                continue
            tx = self.store.latest_tx_of(oid)
            if tx is None or tx == self._seen_tx.get(oid):
                continue
            self._seen_tx[oid] = tx
            doc = self.store.get(oid)
            if doc is not None and _version(doc) != _version(self._docs[oid]):
                self.refresh(oid)
        self._synced_tx = mark

    def _admit(self, doc: dict[str, Any]) -> str:
        oid = doc["xt/id"]
        if doc.get("type") in INFRA_TYPES:
            raise ValueError(
                f"{doc.get('type')} objects are infrastructure: they are referenced from the "
                "session, never added to its index, pool or sets"
            )
        self._install(oid, doc)
        self._set_meta(
            oid, self._meta_for(doc, orphaned=self._meta.get(oid, MetaEntry(oid, "")).orphaned)
        )
        new = oid not in self._index_set
        if new:
            self._index_set.add(oid)
            self.session_index.append(oid)
        if oid not in self._pool_set:
            self._pool_set.add(oid)
            self.metadata_pool.append(oid)
        if new:
            self._notify(oid, "added")
        return oid

    def _require(self, oid: str) -> None:
        if oid not in self._index_set:
            raise NotFoundError(
                f"object {oid!r} is not in session {self.session_id!r}; add it first "
                "(add_path, add or record_toolcall)"
            )

    def add(self, oid: str, *, activate: bool = True) -> str:
        """Add a stored object (by id) to the session's index and pool, and activate it."""
        with self._lock:
            doc = self.store.get(oid)
            if doc is None:
                raise NotFoundError(f"no stored object with id {oid!r}")
            self._admit(doc)
            if activate:
                self.activate(oid)
            return oid

    def add_path(self, path: str | os.PathLike[str], *, activate: bool = True) -> str:
        """Read the file at ``path`` (workspace-relative or absolute) and add it.

        The file is read through the workspace's path policy: a denied path, a
        symbolic link or a path outside the workspace is refused and never stored.

        Raises:
            PolicyError: ``PATH_DENIED``.
            NotFoundError: no such file, and none was ever stored.
        """
        return self.add_paths([path], activate=activate)[0]

    def add_paths(
        self, paths: Iterable[str | os.PathLike[str]], *, activate: bool = True
    ) -> list[str]:
        """Read several files (one transaction for those that changed) and add them.

        Raises:
            PolicyError: a path is refused; nothing is written or added then.
            NotFoundError: a file does not exist and was never stored.
        """
        with self._lock:
            listed = list(paths)
            policy = self.workspace.policy
            # An agent's path (``/workspace/README.md``) through its mount, as every door.
            safe = [policy.check(self.workspace.host_path(p)) for p in listed]
            data = [self.workspace.read(sp) for sp in safe]
            for p, sp, d in zip(listed, safe, data, strict=True):
                if d is None and self.store.get(self.workspace.object_id(str(sp.abs))) is None:
                    raise NotFoundError(f"{os.fspath(p)!r} does not exist")
            seen = self.workspace.observe(safe, data=data)
            ids = [o.object_id for o in seen]
            found = self.store.get_many(ids)
            for oid in ids:
                self._admit(found[oid])
                if activate:
                    self.activate(oid)
            return ids

    def activate(self, oid: str) -> None:
        """Put an object's full content in the prompt (and mark it used now)."""
        with self._lock:
            self._require(oid)
            new = oid not in self._active
            if new:
                self._active[oid] = None
                self._seq.setdefault(oid, self._tick + 1)
                self._entered.setdefault(oid, self.turn)
                self._dirty(oid)
            self._touch(oid)
            if oid not in self._pool_set:
                self._pool_set.add(oid)
                self.metadata_pool.append(oid)
            if new:
                self._notify(oid, "activated")

    def deactivate(self, oid: str) -> None:
        """Take an object's content out of the prompt; it stays in the index and the pool."""
        with self._lock:
            self._require(oid)
            was = oid in self._active
            self._active.pop(oid, None)
            self._seq.pop(oid, None)
            self._entered.pop(oid, None)
            self._dirty(oid)
            if was:
                self._notify(oid, "deactivated")

    def pin(self, oid: str) -> None:
        """Keep an object in the prompt whatever the strategy (activates it)."""
        with self._lock:
            self.activate(oid)
            new = oid not in self._pinned
            self._pinned[oid] = None
            self._dirty(oid)
            if new:
                self._notify(oid, "pinned")

    def unpin(self, oid: str) -> None:
        with self._lock:
            self._require(oid)
            was = oid in self._pinned
            self._pinned.pop(oid, None)
            self._dirty(oid)
            if was:
                self._notify(oid, "unpinned")

    def touch(self, oid: str) -> None:
        """Mark an object as used now (recency strategies keep recent items)."""
        with self._lock:
            self._require(oid)
            self._touch(oid)

    def took_version(self, oid: str) -> None:
        """A new version of ``oid`` was stored by this session's tools: reload it if the
        session holds it, else add it to the index without activating it."""
        with self._lock:
            if oid in self._index_set:
                self.refresh(oid)
            else:
                self.add(oid, activate=False)

    def refresh(self, oid: str) -> dict[str, Any] | None:
        """Reload an object's latest version from the store into the session."""
        with self._lock:
            doc = self.store.get(oid)
            if doc is not None and oid in self._index_set:
                self._install(oid, doc)
                self._set_meta(oid, self._meta_for(doc, orphaned=False))
            return doc

    def get(self, oid: str) -> dict[str, Any]:
        """The session's copy of an object (its latest known version)."""
        self._require(oid)
        return self._doc(oid)

    def metadata(self, oid: str) -> MetaEntry:
        self._require(oid)
        return self._meta[oid]

    def find(self, path: str | os.PathLike[str]) -> str | None:
        """The id of a file in this session by path, or None."""
        oid = self.workspace.object_id(path)
        return oid if oid in self._index_set else None

    @property
    def turn(self) -> int:
        """The number of chat turns so far."""
        return len(self._turns)

    # -- metadata ----------------------------------------------------------------------------
    def _meta_for(self, doc: dict[str, Any], *, orphaned: bool) -> MetaEntry:
        return meta_for(doc, orphaned=orphaned, reverse_resolve=self.workspace.display_path)

    def _doc(self, oid: str) -> dict[str, Any]:
        """The session's copy of an object, loading its content if it was left out."""
        doc = self._docs[oid]
        if doc.get(_LIGHT):
            full = self.store.get(oid)
            if full is not None:
                self._docs[oid] = doc = full
        return doc

    def on_change(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(object_id, action)`` whenever what the model would see changes.

        Actions: the watcher's (``updated``, ``deleted`` ... when a file changed on
        disk), ``added``, ``activated``, ``deactivated``, ``pinned``, ``unpinned``,
        ``active copy`` (for an object), ``turn`` (for the chat) and ``system prompt``.
        Views such as :class:`~ctxnb.widgets.ContextView` follow a session this way.
        The callback runs in the thread that made the change, often with the session's
        lock held: it should be quick (schedule heavy work, as the views do).
        """
        self._listeners.append(callback)

    def _notify(self, oid: str, action: str) -> None:
        for cb in list(self._listeners):
            cb(oid, action)


_LIGHT = "__ctxnb_light__"
# The arguments of a tool call that are a query in words (search_tools' query, search's


def _version(doc: dict[str, Any]) -> str:
    """What tells two versions of an object apart: its content hash (or, for documents
    stored without one, such as plans, the whole document)."""
    return doc.get("content_hash") or stable_stringify(_payload(doc))


def _payload(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("xt/id", "type", "source", "identity_hash")}
