"""Sessions: what an agent has seen, what is active, and what the model sees (DESIGN §6).

A session keeps four sets of object ids:

- ``session_index``: every object the session ever touched (append-only);
- ``metadata_pool``: objects whose one-line metadata the model sees;
- ``active_set``: objects whose full content is in the prompt;
- ``pinned_set``: objects no strategy may evict.

Files and tool calls are content objects and live in those sets. The chat and the
system prompt are infrastructure objects: stored and versioned, referenced from the
session document, rendered in fixed places, and never in the sets.

One class in one module, over the usual ~800 lines, because it is one concept: the sets,
the chat, saving and assembling all change the same state under the same lock, and
cutting the class by its methods would only hide that. The parts that stand on their
own are objects it uses: :mod:`ctxnb.context` lays out and renders the prompt,
:class:`~ctxnb.session._resume.SessionResume` brings a stored session back, and
:mod:`ctxnb.session._columns` makes a resumed session's files from the store's columns.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1\\n")
    >>> ws = Workspace.open(root)
    >>> s = ws.session("demo", system_prompt="You are a careful engineer.")
    >>> fid = s.add_path("a.py")
    >>> _ = s.add_turn("user", "What is x?")
    >>> ctx = s.assemble()
    >>> [sec.name for sec in ctx.sections]
    ['system', 'metadata', 'active', 'chat']
    >>> s.context_at(1).hash == ctx.hash
    True
"""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..context import (
    Assembler,
    AssemblyState,
    Context,
    ContextChange,
    MetaEntry,
    changes_frame,
    context_at,
    meta_for,
)
from ..context import _changes as changes
from ..errors import NotFoundError
from ..hashing import content_hash, stable_stringify
from ..llm.tokens import TokenCounter, resolve_token_counter
from ..model import INFRA_TYPES, new_id
from ..redaction.redactor import redact_data, redact_text
from ..strategies.builtin import ContextStrategy, KeepAll
from ._resume import LIGHT, ResumeReport, SessionResume

if TYPE_CHECKING:
    from ..access.door import Access
    from ..store.objectstore import TxRecord
    from .watch import Watcher

__all__ = ["MetaEntry", "ResumeReport", "Session", "open_session"]


class RuleTracking(Protocol):
    """What a session asks of the instruction-file tracker attached to it (a seam: the
    tracker, :class:`ctxnb.instructions.RulesTracker`, sits in a package that imports
    sessions, so the session knows it only by these calls)."""

    def on_query(self, text: str | None = None) -> Sequence[object]: ...

    def on_tool_call(self, tool: str, args: Mapping[str, Any]) -> Sequence[object]: ...

    def rule_ids(self) -> list[str]: ...


class Session:
    """One agent session over a workspace. Create or resume with ``ws.session(id)``."""

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
        # A hidden call (the harness's own) is indexed and stored, but the model never
        # reads a line of it.
        if oid not in self._pool_set and not doc.get("hidden"):
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
        if doc.get(LIGHT):
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

    # -- tool calls and chat ----------------------------------------------------------------
    def record_toolcall(
        self,
        tool: str,
        args: dict[str, Any],
        content: str | None,
        status: str = "ok",
        file_refs: Sequence[str] = (),
        *,
        activate: bool = True,
        id: str | None = None,
        shown_as: tuple[str, Mapping[str, Any]] | None = None,
        hidden: bool = False,
    ) -> str:
        """Store a tool call and its output as a content object of this session.

        Args:
            tool: the tool's name.
            args: its arguments.
            content: what it returned (None: no output).
            status: ``ok`` or ``fail``.
            file_refs: ids of the files it touched.
            activate: put its output in the prompt.
            id: a deterministic id (replays use one so their contexts hash the same);
                a fresh UUID by default.
            shown_as: the call's name and arguments as the model made it (a live run's
                ``bash`` call for ctxnb's ``run_command``): the prompt shows these, the
                record keeps ``tool`` and ``args`` too (see
                :data:`~ctxnb.tools.call.CallView`).
            hidden: a call the model did not make (the harness selecting its intent):
                kept in the store and the session's index, never in the metadata pool
                or the prompt.
        """
        with self._lock:
            tid = id or new_id()
            # A tool call's record is what the model and the logs see: its output and its
            # arguments are redacted (whole, before the display form cuts them).
            args = redact_data(dict(args))
            content = None if content is None else redact_text(content)
            name, shown_args = tool, args
            if shown_as is not None:
                name, shown_args = shown_as[0], redact_data(dict(shown_as[1]))
            shown = ", ".join(f"{k}={_short(v)}" for k, v in shown_args.items())
            doc: dict[str, Any] = {
                "xt/id": tid,
                "type": "toolcall",
                "source": None,
                "identity_hash": None,
                "content": content,
                "tool": tool,
                "args": dict(args),
                "args_display": f"{name}({shown})",
                "status": status,
                "chat_ref": self.chat_id,
                "file_refs": list(file_refs),
            }
            if shown_as is not None:
                doc["shown"] = {"tool": name, "args": dict(shown_args)}
            if hidden:
                doc["hidden"] = True
            doc["content_hash"] = content_hash(_payload(doc))
            # Tool calls are written in batches (at save, assemble or flush) so that a
            # tool call costs no store commit of its own.
            self._pending.append(doc)
            self._admit(doc)
            self._toolcall_refs.append(tid)
            if activate and not hidden:
                self.activate(tid)
            for ref in file_refs:
                if self.in_index(ref):
                    self._touch(ref)
            self._follow_rules(tool, args, file_refs)
            return tid

    def _follow_rules(self, tool: str, args: dict[str, Any], file_refs: Sequence[str]) -> None:
        """Tier 3: a tracker attached to this session loads the nested rules of every
        subtree a tool call touched -- the paths in its arguments (a shell command's
        included) and the files it was observed to change."""
        tracker = self.rules_tracker
        if tracker is None:
            return
        for key in _QUERY_ARGS:  # tier 2: a search's query may call for linked docs
            if isinstance(args.get(key), str):
                tracker.on_query(args[key])
        touched = [self._meta[r].path for r in file_refs if r in self._meta]
        paths = [p for p in touched if p]
        if paths:
            given = args.get("paths")
            args = {**args, "paths": [*(given if isinstance(given, list) else []), *paths]}
        tracker.on_tool_call(tool, args)

    def add_turn(self, role: str, content: str) -> int:
        """Append a chat turn; returns the new turn count."""
        if role not in ("user", "assistant", "system", "tool"):
            raise ValueError(f"unknown chat role {role!r}; use user, assistant, system or tool")
        with self._lock:
            self._turns.append({"role": role, "content": content})
            self._notify(self.chat_id, "turn")
            count = len(self._turns)
        tracker = self.rules_tracker
        if tracker is not None and role == "user":
            tracker.on_query(content)  # tier 2: a user turn may call for linked docs
        return count

    @property
    def turns(self) -> list[dict[str, Any]]:
        return list(self._turns)

    # -- documents ----------------------------------------------------------------------------
    def _chat_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "xt/id": self.chat_id,
            "type": "chat",
            "source": None,
            "identity_hash": None,
            "turns": list(self._turns),
            "turn_count": len(self._turns),
            "toolcall_refs": list(self._toolcall_refs),
            "session_ref": self.session_id,
        }
        doc["content_hash"] = content_hash(_payload(doc))
        return doc

    def _session_doc(self, assembly: dict[str, Any] | None) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "xt/id": self.session_id,
            "type": "session",
            "source": None,
            "identity_hash": None,
            "session_id": self.session_id,
            "chat_ref": self.chat_id,
            "system_prompt_ref": self.system_prompt_id,
            "session_index": list(self.session_index),
            "metadata_pool": list(self.metadata_pool),
            # In reading order, so that a resumed session lays its context out the same way.
            "active_set": sorted(self._active, key=lambda o: self._seq.get(o, 0)),
            "pinned_set": list(self._pinned),
            # Where each active item sits among the chat turns (the layout's order).
            "entered": {o: self._entered.get(o, 0) for o in self._active},
            "turn": self.turn,
            "assembly": assembly,
            "metadata_log": list(self._meta_log),
        }
        if self._restores:
            doc["restores"] = list(self._restores)
        doc["content_hash"] = content_hash(_payload(doc))
        return doc

    def flush(self) -> None:
        """Write the tool calls recorded since the last write (one transaction)."""
        with self._lock:
            if self._pending:
                self.store.put(self._pending)
                self._pending = []

    def save(self, *, assembly: dict[str, Any] | None = None) -> TxRecord:
        """Store the session (and its chat and system prompt) in one transaction."""
        with self._lock:
            docs = [*self._pending, self._chat_doc(), self._session_doc(assembly)]
            self._pending = []
            if self._sp_dirty and self.system_prompt_id:
                sp = {
                    "xt/id": self.system_prompt_id,
                    "type": "system_prompt",
                    "source": None,
                    "identity_hash": None,
                    "content": self._system_prompt,
                }
                sp["content_hash"] = content_hash(_payload(sp))
                docs.append(sp)
                self._sp_dirty = False
            tx = self.store.put(docs)
            # A saved session is in Parquet for outside readers (docs/store-format.md).
            self.store.fold()
            return tx

    def metadata_frame(self) -> Any:
        """The metadata pool as a pandas DataFrame (one row per object)."""
        import pandas as pd

        rows = []
        for oid in self.metadata_pool:
            m = self._meta[oid]
            rows.append(
                {
                    "id": oid,
                    "type": m.type,
                    "path": m.path,
                    "file_type": m.file_type,
                    "char_count": m.char_count,
                    "tool": m.tool,
                    "status": m.status,
                    "active": oid in self._active,
                    "pinned": oid in self._pinned,
                    "deleted": m.deleted,
                    "orphaned": m.orphaned,
                }
            )
        return pd.DataFrame(rows)

    # -- assembly (ctxnb.context does the work) ------------------------------------------------
    def _assembly_state(self) -> AssemblyState:
        return AssemblyState(
            active=self._active,
            pinned=self._pinned,
            pool=self.metadata_pool,
            meta=self._meta,
            doc=self._doc,
            last_used=self._last_used,
            seq=self._seq,
            entered=self._entered,
            orphaned=self._orphaned,
            system_prompt=self._system_prompt,
            turns=self._turns,
            head=self._head(),
            overlays=self._overlays,
            meta_log=self._meta_log,
        )

    def _head(self) -> list[str]:
        """Rules files a tracker loaded, root to leaf: read right after the system prompt."""
        tracker = self.rules_tracker
        return list(tracker.rule_ids()) if tracker is not None else []

    def assemble(
        self,
        strategy: ContextStrategy | None = None,
        budget: int | None = None,
        *,
        record: bool = True,
    ) -> Context:
        """Assemble the context under a strategy and a token budget.

        The budget covers the whole context: the system prompt, metadata and chat are
        counted first and the rest is what the strategy may spend on content. After
        the strategy, the least recently used unpinned items are evicted until the
        content fits. Pinned items always stay (``over_budget`` tells when they alone
        do not fit). See :class:`ctxnb.context.Assembler`.

        Args:
            strategy: a context strategy; :class:`~ctxnb.strategies.builtin.KeepAll` by default.
            budget: total tokens, or None for no limit.
            record: store what was assembled so that :meth:`context_at` can rebuild it.
        """
        with self._lock:
            if record:
                self.flush()  # context_at reads items as of the assembly's transaction
            self._sync_with_store()
            tx = self.store.latest_tx()
            ctx, assembly = self._assembler.assemble(
                self._assembly_state(),
                strategy or KeepAll(),
                budget,
                tx_id=tx.tx_id if tx else 0,
            )
            if record:
                assembly["hash"] = ctx.hash
                self.save(assembly=assembly)
                self.last_context = (ctx.turn, ctx.hash)
            return ctx

    # -- the past -------------------------------------------------------------------------------
    def context_at(self, turn: int) -> Context:
        """Rebuild, from the store's history alone, the context the model saw at ``turn``.

        See :func:`ctxnb.context.context_at`.

        Raises:
            NotFoundError: when no context was assembled (with ``record=True``) at that turn.
        """
        return context_at(
            self.store,
            self.session_id,
            turn,
            assembler=self._assembler,
            reverse_resolve=self.workspace.display_path,
        )

    def context_changes(self, turn: int, *, as_frame: bool = False) -> Any:
        """What each strategy did to each item of the context at ``turn``, from the store.

        One :class:`~ctxnb.context.ContextChange` per candidate item (``kept``,
        ``masked``, ``truncated``, ``summarized``, ``compacted`` or ``evicted``, by
        whom, with its tokens before and after), then the items :meth:`restore_item`
        brought back at that turn. See ``docs/context.md``.

        Example:
            >>> import tempfile
            >>> from ctxnb import Workspace
            >>> from ctxnb.strategies import RecencyWindow
            >>> s = Workspace.open(tempfile.mkdtemp()).session("doc", rules=False)
            >>> a, b = (s.record_toolcall("ls", {}, f"f{n}.py") for n in range(2))
            >>> _ = s.assemble(RecencyWindow(1))
            >>> [(c.op, c.by, c.tokens_after) for c in s.context_changes(0)][1]
            ('evicted', 'recency-window', 0)
            >>> s.restore_item(a)["content"], s.pinned_set == [a]
            ('f0.py', True)

        Args:
            turn: a turn at which a context was assembled with ``record=True``.
            as_frame: return a pandas DataFrame (:func:`ctxnb.context.changes_frame`).

        Raises:
            NotFoundError: nothing was recorded at that turn.
        """
        found = changes.changes_at(
            self.store, self.session_id, turn, meta_of=self._stored_meta, restores=self._restores
        )
        return changes_frame(found) if as_frame else found

    def restore_item(
        self, item: str | ContextChange, *, turn: int | None = None, pin: bool = True
    ) -> dict[str, Any]:
        """Bring back an item a strategy dropped or shortened at ``turn``.

        The item returns to the context -- pinned (the default: shown in full whatever
        the strategy, until :meth:`unpin`) or only active (``pin=False``: a strategy may
        drop it again) -- and the restore is recorded as a ``restored`` change at the
        current turn (saved with the session at once). A file shows its current
        version; the version returned is the one stored at ``turn``.

        Args:
            item: an object id, or a change from :meth:`context_changes`.
            turn: the turn it was dropped at (a change's own turn; else the last turn
                with a recorded context).

        Returns:
            The object's full stored document at that turn (its exact content).

        Raises:
            NotFoundError: no such turn, the item was not in that turn's context or was
                shown in full, or the store lost that version.
        """
        with self._lock:
            oid = item.id if isinstance(item, ContextChange) else item
            if turn is None:
                turn = item.turn if isinstance(item, ContextChange) else self._last_recorded()
            found = changes.find_change(self.context_changes(turn), oid, turn)
            doc = self.store.as_of(oid, found.tx_id) if found.tx_id else None
            if doc is None:
                raise NotFoundError(f"the store holds no version of {oid!r} as of turn {turn}")
            self._require(oid)
            if pin:
                self.pin(oid)
            else:
                self.activate(oid)
            self._restores.append(changes.restore_record(found, turn=self.turn, pinned=pin))
            self.save()
            return doc

    def _last_recorded(self) -> int:
        versions = [v for v in self.store.history(self.session_id) if v.doc.get("assembly")]
        if not versions:
            raise NotFoundError(
                f"session {self.session_id!r} has no recorded context; assemble with "
                "record=True first"
            )
        return int(versions[-1].doc["assembly"]["turn"])

    def _stored_meta(self, doc: Mapping[str, Any]) -> MetaEntry:
        return meta_for(doc, orphaned=False, reverse_resolve=self.workspace.display_path)

    def watchable_paths(self) -> list[str]:
        """Canonical paths of the session's files the host can watch."""
        out = []
        for oid in self.session_index:
            d = self._docs.get(oid) or {}
            src = d.get("source")
            if d.get("type") != "file" or not src or self._meta[oid].orphaned:
                continue
            agent_path = self._meta[oid].path or src["path"]
            # A path no mount covers is container-internal when the agent runs behind
            # mounts; with no mounts at all the agent runs on the host.
            res = self.workspace.resolver
            # On this host's filesystem, or on the one of the mount that covers it.
            if src.get("filesystemId") == res.filesystem_of(src["path"]) and res.is_watchable(
                agent_path
            ):
                out.append(src["path"])
        return out

    def watch(self, **kwargs: Any) -> Watcher:
        """Start (or return) the background watcher of this session's files."""
        from .watch import Watcher

        if self._watcher is None or not self._watcher.running:
            self._watcher = Watcher(self, **kwargs)
            self._watcher.start()
        return self._watcher

    def close(self) -> None:
        """Stop the watcher and save."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self.save()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- display --------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (
            f"<Session {self.session_id!r} index={len(self.session_index)} "
            f"pool={len(self.metadata_pool)} active={len(self._active)} "
            f"pinned={len(self._pinned)} turns={self.turn}>"
        )

    def _repr_html_(self) -> str:
        rows = []
        for oid in self.metadata_pool[:50]:
            m = self._meta[oid]
            state = "pinned" if oid in self._pinned else ("active" if oid in self._active else "")
            flags = " ".join(
                f for f, on in (("deleted", m.deleted), ("orphaned", m.orphaned)) if on
            )
            rows.append(
                f"<tr><td>{m.type}</td><td>{html.escape(m.path or m.args_display or oid)}</td>"
                f"<td>{m.char_count}</td><td>{state}</td><td>{flags}</td></tr>"
            )
        more = (
            f"<p>… {len(self.metadata_pool) - 50} more</p>" if len(self.metadata_pool) > 50 else ""
        )
        return (
            f"<div><b>Session</b> {html.escape(self.session_id)}: "
            f"{len(self.session_index)} objects, {len(self._active)} active, "
            f"{len(self._pinned)} pinned, {self.turn} turns"
            "<table><tr><th>type</th><th>object</th><th>chars</th><th>state</th><th></th></tr>"
            f"{''.join(rows)}</table>{more}</div>"
        )


def _version(doc: dict[str, Any]) -> str:
    """What tells two versions of an object apart: its content hash (or, for documents
    stored without one, such as plans, the whole document)."""
    return doc.get("content_hash") or stable_stringify(_payload(doc))


def _payload(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("xt/id", "type", "source", "identity_hash")}


# The arguments of a tool call that are a query in words (search_tools' query, search's
# pattern): a rules tracker matches them against the links of the loaded rules files.
_QUERY_ARGS = ("query", "pattern")


def _short(v: Any, limit: int = 60) -> str:
    s = v if isinstance(v, str) else stable_stringify(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def open_session(
    workspace: Access,
    session_id: str | None = None,
    *,
    system_prompt: str | None = None,
    token_counter: TokenCounter | Callable[[str], int] | str | None = None,
    watch: bool = False,
) -> Session:
    """Create a session, or resume the stored one with that id (see ``Workspace.session``)."""
    sid = session_id or new_id()
    s = Session(workspace, sid, token_counter=token_counter)
    sdoc = workspace.store.get(sid)
    if sdoc is not None:
        if sdoc.get("type") != "session":
            raise NotFoundError(f"object {sid!r} is a {sdoc.get('type')}, not a session")
        resume = SessionResume(s)
        resume.restore(sdoc)
        # A session saved before the metadata log has none: its next context lists
        # every object in one first block.
        s._meta_log = list(sdoc.get("metadata_log") or [])
        s.last_resume = resume.reconcile()
        if system_prompt is not None and system_prompt != s.system_prompt:
            s.set_system_prompt(system_prompt)
            s.save()
    else:
        s.set_system_prompt(system_prompt or "")
        s.save()
    if watch:
        s.watch()
        if s.last_resume is not None:
            s.last_resume.watching = len(s.watchable_paths())
    return s
