"""Sessions: what an agent has seen, what is active, and what the model sees (DESIGN §6).

A session keeps four sets of object ids:

- ``session_index``: every object the session ever touched (append-only);
- ``metadata_pool``: objects whose one-line metadata the model sees;
- ``active_set``: objects whose full content is in the prompt;
- ``pinned_set``: objects no strategy may evict.

Files and tool calls are content objects and live in those sets. The chat and the
system prompt are infrastructure objects: stored and versioned, referenced from the
session document, rendered in fixed places, and never in the sets.

A session *has* its parts, as httpx's ``Client`` has a transport: what it holds (the
sets, each object's copy and entry, the chat and their order) is a
:class:`~ctxnb.session.state.SessionState` (``session.state``), the one object the
session's helpers are handed; :class:`~ctxnb.session._resume.SessionResume` fills a
state from a stored session and checks its files against the disk; :mod:`ctxnb.context`
lays out and renders the prompt; :mod:`ctxnb.session._columns` makes a resumed session's
files from the store's columns; the :class:`~ctxnb.session.watch.Watcher` follows the
disk through the session's public methods. ``Session`` itself keeps the lock, the store,
the listeners and the write buffer, and every public method changes its state under
that lock.

One class in one module, over the usual ~800 lines, because it is one concept: the sets,
the chat, saving and assembling change the same state under the same lock, and cutting
the class by its methods would only hide that (most of its length is the docstrings of
its public methods).

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
import stat as stat_mod
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from ..ids import new_id
from ..llm.tokens import TokenCounter, resolve_token_counter
from ..redaction.redactor import redact_data, redact_text
from ..strategies.builtin import ContextStrategy, KeepAll
from ._resume import LIGHT, ResumeReport, SessionResume
from .state import SessionState, payload_of, version_of

if TYPE_CHECKING:
    from ..access._safepath import SafePath
    from ..access.door import Access
    from ..store.objectstore import ObjectStore, TxRecord
    from .watch import Watcher

__all__ = ["MetaEntry", "ResumeReport", "Session", "open_session"]


class Governor(Protocol):
    """What a session asks of the governance engine of its tools (a seam: the engine,
    :class:`ctxnb.govern.engine.HookEngine`, sits in a wing above sessions)."""

    def release(self) -> None: ...

    def spawn_worker(
        self, *, scope: list[str], budget: int | None, session_id: str | None
    ) -> Session: ...


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
        self.session_id = session_id
        self.token_counter = resolve_token_counter(token_counter)
        self._lock = threading.RLock()
        # Rendering and its caches live in ctxnb.context; the state tells it what changed.
        self._assembler = Assembler(self.token_counter)
        #: What the session holds (its sets, copies, chat and their order): the part a
        #: saved session stores and a resume brings back (:class:`SessionState`).
        self.state = SessionState(mark=self._assembler.mark)
        # The store transaction each active file was last checked against, and the
        # store's latest transaction at the last check (see _sync_with_store).
        self._seen_tx: dict[str, int] = {}
        self._synced_tx: int | None = None
        self._sp_dirty = False
        self._watcher: Watcher | None = None
        self._listeners: list[Callable[[str, str], None]] = []
        self.last_resume: ResumeReport | None = None
        # What a cold resume found unchanged: canonical path -> (id, size, mtime, ctime,
        # inode); an add of one of them whose stat is still that reads nothing.
        self._verified: dict[str, tuple[str, tuple[int, int, int, int]]] = {}
        # Tool calls recorded since the last write (written in one transaction).
        self._pending: list[dict[str, Any]] = []
        #: The instruction-file tracker attached to this session (it attaches itself,
        #: :class:`ctxnb.instructions.RulesTracker`), or None.
        self.rules_tracker: RuleTracking | None = None
        #: True when the session was opened with ``rules=False``: nothing attaches a
        #: rules tracker to it later (``ws.tools`` included).
        self.rules_off = False
        #: The governance engine of this session's tools (set by ``ws.tools`` on a
        #: governed workspace): it holds the session's lease and spawns its workers.
        self.governor: Governor | None = None

    @property
    def store(self) -> ObjectStore:
        """The workspace's object store (opened when first used: a resume that finds
        nothing changed answers from ``.ctxnb/sessions`` and the store's log)."""
        return self.workspace.store

    def in_index(self, object_id: str) -> bool:
        """Whether the object is in this session's index (it was read or indexed in it)."""
        return self.state.in_index(object_id)

    # -- sets -----------------------------------------------------------------------------
    @property
    def session_index(self) -> list[str]:
        """Every object the session ever touched, in order (append-only)."""
        return self.state.index

    @property
    def metadata_pool(self) -> list[str]:
        """The objects whose one-line metadata the model sees, in order."""
        return self.state.pool

    @property
    def active_set(self) -> list[str]:
        return list(self.state.active)

    @property
    def pinned_set(self) -> list[str]:
        return list(self.state.pinned)

    @property
    def chat_id(self) -> str:
        """The id of the session's chat object."""
        return self.state.chat_id

    @property
    def system_prompt_id(self) -> str | None:
        """The id of the session's system prompt object (None before one is set)."""
        return self.state.system_prompt_id

    @property
    def last_context(self) -> tuple[int, str] | None:
        """(turn, hash) of the last context assembled with ``record=True``, or None: what
        the model saw when it asked for a change (the recorder puts it in the trace)."""
        return self.state.last_context

    @property
    def system_prompt(self) -> str:
        return self.state.system_prompt

    def set_system_prompt(self, text: str) -> None:
        """Replace the system prompt (a new version is stored at the next save)."""
        with self._lock:
            st = self.state
            if text != st.system_prompt or st.system_prompt_id is None:
                st.system_prompt = text
                st.system_prompt_id = st.system_prompt_id or new_id()
                self._sp_dirty = True
                self.notify(st.system_prompt_id, "system prompt")

    def set_active_copy(self, oid: str, text: str | None) -> None:
        """Show a client's active copy of a file (e.g. an unsaved buffer) instead of its
        stored content; ``None`` goes back to the stored content.

        :meth:`ctxnb.tools.FileTools.set_active_copy` calls this; assembled contexts record
        the copy so that :meth:`context_at` rebuilds it.
        """
        with self._lock:
            self._require(oid)
            st = self.state
            if st.overlays.get(oid) == text:
                return
            if text is None:
                st.overlays.pop(oid, None)
            else:
                st.overlays[oid] = text
            if oid in st.active:
                st.move_to_end(oid)
            st.mark(oid)
            self.notify(oid, "active copy")

    def _sync_with_store(self) -> None:
        """Take every newer stored version of an active file (index, watcher, other
        sessions and processes write them), so the prompt shows the workspace as it is."""
        latest = self.store.latest_tx()
        mark = latest.tx_id if latest else 0
        if mark == self._synced_tx:
            return
        st = self.state
        for oid in list(st.active):
            if st.meta[oid].type == "toolcall":  # tool calls never change
                continue
            tx = self.store.latest_tx_of(oid)
            if tx is None or tx == self._seen_tx.get(oid):
                continue
            self._seen_tx[oid] = tx
            doc = self.store.get(oid)
            if doc is not None and version_of(doc) != version_of(st.docs[oid]):
                self.refresh(oid)
        self._synced_tx = mark

    def _admit(self, doc: dict[str, Any]) -> str:
        # pydantic's models: a stored document is at hand, so the store (which imports
        # them) is open already; a resume that admits nothing does not load them.
        from ..model import INFRA_TYPES

        oid = doc["xt/id"]
        if doc.get("type") in INFRA_TYPES:
            raise ValueError(
                f"{doc.get('type')} objects are infrastructure: they are referenced from the "
                "session, never added to its index, pool or sets"
            )
        st = self.state
        st.install(oid, doc)
        st.set_meta(
            oid, self._meta_for(doc, orphaned=st.meta.get(oid, MetaEntry(oid, "")).orphaned)
        )
        new = st.add_to_index(oid)
        # A hidden call (the harness's own) is indexed and stored, but the model never
        # reads a line of it.
        if not doc.get("hidden"):
            st.add_to_pool(oid)
        if new:
            self.notify(oid, "added")
        return oid

    def _require(self, oid: str) -> None:
        if not self.state.in_index(oid):
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
            known = self._unchanged_since_resume(safe)
            if known is not None:
                for oid in known:
                    self.state.add_to_pool(oid)  # a file (only a tool call is hidden)
                    if activate:
                        self.activate(oid)
                return known
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

    def _unchanged_since_resume(self, safe: Sequence[SafePath]) -> list[str] | None:
        """The ids of ``safe`` when a cold resume found each of them unchanged and its
        ``lstat`` (through the policy) is still the one it found: the store holds that
        file's bytes as its latest version, so reading and hashing it again (and opening
        the store to ask) would find nothing new. None when any of them is otherwise."""
        verified = self._verified
        if not verified:
            return None
        paths = [str(sp.abs) for sp in safe]
        if any(p not in verified for p in paths):
            return None
        out = []
        for path, st in zip(paths, self.workspace.policy.stat_many(paths), strict=True):
            oid, was = verified[path]
            if type(st) is not os.stat_result or not stat_mod.S_ISREG(st.st_mode):
                return None
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != was:
                return None
            if not self.state.in_index(oid) or oid in self.state.orphaned:
                return None
            out.append(oid)
        return out

    def activate(self, oid: str) -> None:
        """Put an object's full content in the prompt (and mark it used now)."""
        with self._lock:
            self._require(oid)
            st = self.state
            new = oid not in st.active
            if new:
                st.active[oid] = None
                st.seq.setdefault(oid, st.tick + 1)
                st.entered.setdefault(oid, st.turn)
                st.mark(oid)
            st.touch(oid)
            st.add_to_pool(oid)
            if new:
                self.notify(oid, "activated")

    def deactivate(self, oid: str) -> None:
        """Take an object's content out of the prompt; it stays in the index and the pool."""
        with self._lock:
            self._require(oid)
            st = self.state
            was = oid in st.active
            st.active.pop(oid, None)
            st.seq.pop(oid, None)
            st.entered.pop(oid, None)
            st.mark(oid)
            if was:
                self.notify(oid, "deactivated")

    def pin(self, oid: str) -> None:
        """Keep an object in the prompt whatever the strategy (activates it)."""
        with self._lock:
            self.activate(oid)
            st = self.state
            new = oid not in st.pinned
            st.pinned[oid] = None
            st.mark(oid)
            if new:
                self.notify(oid, "pinned")

    def unpin(self, oid: str) -> None:
        with self._lock:
            self._require(oid)
            st = self.state
            was = oid in st.pinned
            st.pinned.pop(oid, None)
            st.mark(oid)
            if was:
                self.notify(oid, "unpinned")

    def touch(self, oid: str) -> None:
        """Mark an object as used now (recency strategies keep recent items)."""
        with self._lock:
            self._require(oid)
            self.state.touch(oid)

    def took_version(self, oid: str) -> None:
        """A new version of ``oid`` was stored by this session's tools: reload it if the
        session holds it, else add it to the index without activating it."""
        with self._lock:
            if self.state.in_index(oid):
                self.refresh(oid)
            else:
                self.add(oid, activate=False)

    def refresh(self, oid: str) -> dict[str, Any] | None:
        """Reload an object's latest version from the store into the session."""
        with self._lock:
            doc = self.store.get(oid)
            if doc is not None and self.state.in_index(oid):
                self.state.install(oid, doc)
                self.state.set_meta(oid, self._meta_for(doc, orphaned=False))
            return doc

    def get(self, oid: str) -> dict[str, Any]:
        """The session's copy of an object (its latest known version)."""
        self._require(oid)
        return self._doc(oid)

    def metadata(self, oid: str) -> MetaEntry:
        self._require(oid)
        return self.state.meta[oid]

    def find(self, path: str | os.PathLike[str]) -> str | None:
        """The id of a file in this session by path, or None."""
        oid = self.workspace.object_id(path)
        return oid if self.state.in_index(oid) else None

    @property
    def turn(self) -> int:
        """The number of chat turns so far."""
        return self.state.turn

    # -- metadata ----------------------------------------------------------------------------
    def _meta_for(self, doc: dict[str, Any], *, orphaned: bool) -> MetaEntry:
        return meta_for(doc, orphaned=orphaned, reverse_resolve=self.workspace.display_path)

    def _doc(self, oid: str) -> dict[str, Any]:
        """The session's copy of an object, loading its content if it was left out."""
        docs = self.state.docs
        doc = docs[oid]
        if doc.get(LIGHT):
            full = self.store.get(oid)
            if full is not None:
                docs[oid] = doc = full
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

    def notify(self, oid: str, action: str) -> None:
        """Call every :meth:`on_change` callback with ``(oid, action)``.

        The session calls it for its own changes; the :class:`~ctxnb.session.watch.Watcher`
        calls it when a file of the session changed on disk (``updated``, ``deleted`` …).
        """
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
                "chat_ref": self.state.chat_id,
                "file_refs": list(file_refs),
            }
            if shown_as is not None:
                doc["shown"] = {"tool": name, "args": dict(shown_args)}
            if hidden:
                doc["hidden"] = True
            doc["content_hash"] = content_hash(payload_of(doc))
            # Tool calls are written in batches (at save, assemble or flush) so that a
            # tool call costs no store commit of its own.
            self._pending.append(doc)
            self._admit(doc)
            self.state.toolcall_refs.append(tid)
            if activate and not hidden:
                self.activate(tid)
            for ref in file_refs:
                if self.in_index(ref):
                    self.state.touch(ref)
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
        meta = self.state.meta
        touched = [meta[r].path for r in file_refs if r in meta]
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
            self.state.turns.append({"role": role, "content": content})
            self.notify(self.state.chat_id, "turn")
            count = self.state.turn
        tracker = self.rules_tracker
        if tracker is not None and role == "user":
            tracker.on_query(content)  # tier 2: a user turn may call for linked docs
        return count

    @property
    def turns(self) -> list[dict[str, Any]]:
        return list(self.state.turns)

    # -- documents ----------------------------------------------------------------------------
    def _chat_doc(self) -> dict[str, Any]:
        st = self.state
        doc: dict[str, Any] = {
            "xt/id": st.chat_id,
            "type": "chat",
            "source": None,
            "identity_hash": None,
            "turns": list(st.turns),
            "turn_count": st.turn,
            "toolcall_refs": list(st.toolcall_refs),
            "session_ref": self.session_id,
        }
        doc["content_hash"] = content_hash(payload_of(doc))
        return doc

    def _session_doc(self, assembly: dict[str, Any] | None) -> dict[str, Any]:
        st = self.state
        doc: dict[str, Any] = {
            "xt/id": self.session_id,
            "type": "session",
            "source": None,
            "identity_hash": None,
            "session_id": self.session_id,
            "chat_ref": st.chat_id,
            "system_prompt_ref": st.system_prompt_id,
            "session_index": list(st.index),
            "metadata_pool": list(st.pool),
            # In reading order, so that a resumed session lays its context out the same way.
            "active_set": sorted(st.active, key=lambda o: st.seq.get(o, 0)),
            "pinned_set": list(st.pinned),
            # Where each active item sits among the chat turns (the layout's order).
            "entered": {o: st.entered.get(o, 0) for o in st.active},
            "turn": st.turn,
            "assembly": assembly,
            "metadata_log": list(st.meta_log),
        }
        if st.restores:
            doc["restores"] = list(st.restores)
        doc["content_hash"] = content_hash(payload_of(doc))
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
            st = self.state
            if self._sp_dirty and st.system_prompt_id:
                sp = {
                    "xt/id": st.system_prompt_id,
                    "type": "system_prompt",
                    "source": None,
                    "identity_hash": None,
                    "content": st.system_prompt,
                }
                sp["content_hash"] = content_hash(payload_of(sp))
                docs.append(sp)
                self._sp_dirty = False
            tx = self.store.put(docs)
            # A saved session is in Parquet for outside readers (docs/store-format.md).
            self.store.fold()
            return tx

    def metadata_frame(self) -> Any:
        """The metadata pool as a pandas DataFrame (one row per object)."""
        import pandas as pd

        st = self.state
        rows = []
        for oid in st.pool:
            m = st.meta[oid]
            rows.append(
                {
                    "id": oid,
                    "type": m.type,
                    "path": m.path,
                    "file_type": m.file_type,
                    "char_count": m.char_count,
                    "tool": m.tool,
                    "status": m.status,
                    "active": oid in st.active,
                    "pinned": oid in st.pinned,
                    "deleted": m.deleted,
                    "orphaned": m.orphaned,
                }
            )
        return pd.DataFrame(rows)

    # -- assembly (ctxnb.context does the work) ------------------------------------------------
    def _assembly_state(self) -> AssemblyState:
        st = self.state
        return AssemblyState(
            active=st.active,
            pinned=st.pinned,
            pool=st.pool,
            meta=st.meta,
            doc=self._doc,
            last_used=st.last_used,
            seq=st.seq,
            entered=st.entered,
            orphaned=st.orphaned,
            system_prompt=st.system_prompt,
            turns=st.turns,
            head=self._head(),
            overlays=st.overlays,
            meta_log=st.meta_log,
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
                self.state.last_context = (ctx.turn, ctx.hash)
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
            self.store,
            self.session_id,
            turn,
            meta_of=self._stored_meta,
            restores=self.state.restores,
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
            self.state.restores.append(changes.restore_record(found, turn=self.turn, pinned=pin))
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

    # -- resume and watch -----------------------------------------------------------------------
    def _resume(self, sdoc: dict[str, Any]) -> None:
        """Take back a stored session document, then check its files against the disk.

        The resume is handed the session's state, the workspace and the store, not the
        session: it fills the state and reports what changed (``last_resume``).
        """
        with self._lock:
            resume = SessionResume(self.state, self.workspace, self.session_id)
            resume.restore(sdoc)
            self._assembler.mark_many(self.state.index)
            self.last_resume = resume.reconcile()

    def _resume_cold(self) -> bool:
        """Resume from what the last resume wrote down (:mod:`ctxnb.session._cold`),
        without opening the store, when the store did not move and no file changed;
        False (nothing changed in the session) when the full resume must run."""
        with self._lock:
            resume = SessionResume(self.state, self.workspace, self.session_id)
            report = resume.resume_cold()
            if report is None:
                return False
            self._verified = resume.verified
            self._assembler.mark_many(self.state.index)
            self.last_resume = report
            return True

    def watchable_paths(self) -> list[str]:
        """Canonical paths of the session's files the host can watch."""
        st = self.state
        out = []
        for oid in st.index:
            d = st.docs.get(oid) or {}
            src = d.get("source")
            if d.get("type") != "file" or not src or st.meta[oid].orphaned:
                continue
            agent_path = st.meta[oid].path or src["path"]
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
        """Stop the watcher, release the session's lease on its scope, and save."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self.governor is not None:
            self.governor.release()
        self.save()
        self._leave_resume()

    def _leave_resume(self) -> None:
        """Leave the next process what its resume needs (:mod:`ctxnb.session._cold`),
        derived as a full resume derives it: the saved document and the store's columns,
        every file checked through the policy against the stat cache. Nothing is read,
        hashed or stored: when a file changed since it was stored, nothing is left and
        the next resume runs in full. A process that never opened the store wrote
        nothing, and what the last resume left still holds or was outdated by another."""
        from ..errors import CtxnbError

        if not self.workspace.store_is_open:
            return
        sdoc = self.store.get(self.session_id)
        if sdoc is None:
            return
        resume = SessionResume(
            SessionState(mark=lambda _oid: None), self.workspace, self.session_id
        )
        try:
            resume.restore(sdoc)
            resume.reconcile(observe=False)
        except (OSError, CtxnbError):
            return  # a cache: the next resume runs in full

    def spawn_worker(
        self, *, scope: Sequence[str], budget: int | None = None, session_id: str | None = None
    ) -> Session:
        """A worker session under this one's intent, narrowed to ``scope``.

        The worker's intent is this session's active intent with ``scope`` as its owned
        scope, which must lie inside this session's (refused otherwise); its context is
        compact: this session's rules, the worker's files and a summary of this
        session's plan, within ``budget`` tokens. The worker's trace records name this
        session as ``metadata.parent_session``; ``ws.tools(worker)`` are its narrowed tools.

        Raises:
            PolicyError: no governed tools or no active intent here, or ``scope`` is not
                a subset of this session's scope (``SCOPE_NOT_SUBSET``).

        Example:
            >>> import pathlib, tempfile
            >>> from ctxnb import Workspace
            >>> from ctxnb.govern import init_governance
            >>> root = pathlib.Path(tempfile.mkdtemp()); (root / "src").mkdir()
            >>> _ = (root / "src" / "a.py").write_text("x = 1\\n")
            >>> _ = init_governance(root)
            >>> _ = (root / ".orchestration" / "active_intents.yaml").write_text(
            ...     "active_intents:\\n  - id: INT-1\\n    name: App\\n"
            ...     "    owned_scope: [src/**]\\n")
            >>> ws = Workspace.open(root); _ = ws.index()
            >>> boss = ws.session("boss"); tools = ws.tools(boss)
            >>> _ = tools.dispatch("select_active_intent", {"intent_id": "INT-1"})
            >>> worker = boss.spawn_worker(scope=["src/a.py"], budget=2000)
            >>> ws.tools(worker).engine.current_intent().owned_scope
            ['src/a.py']
        """
        if self.governor is None:
            from ..errors import PolicyError

            raise PolicyError(
                "NOT_GOVERNED",
                f"session {self.session_id} has no governed tools to narrow a worker from",
                recoverable=False,
                required_action="Open ws.tools(session) on a governed workspace "
                "(one with .orchestration/) and select an intent first.",
            )
        return self.governor.spawn_worker(scope=list(scope), budget=budget, session_id=session_id)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- display --------------------------------------------------------------------------------
    def __repr__(self) -> str:
        st = self.state
        return (
            f"<Session {self.session_id!r} index={len(st.index)} "
            f"pool={len(st.pool)} active={len(st.active)} "
            f"pinned={len(st.pinned)} turns={st.turn}>"
        )

    def _repr_html_(self) -> str:
        st = self.state
        rows = []
        for oid in st.pool[:50]:
            m = st.meta[oid]
            state = "pinned" if oid in st.pinned else ("active" if oid in st.active else "")
            flags = " ".join(
                f for f, on in (("deleted", m.deleted), ("orphaned", m.orphaned)) if on
            )
            rows.append(
                f"<tr><td>{m.type}</td><td>{html.escape(m.path or m.args_display or oid)}</td>"
                f"<td>{m.char_count}</td><td>{state}</td><td>{flags}</td></tr>"
            )
        more = f"<p>… {len(st.pool) - 50} more</p>" if len(st.pool) > 50 else ""
        return (
            f"<div><b>Session</b> {html.escape(self.session_id)}: "
            f"{len(st.index)} objects, {len(st.active)} active, "
            f"{len(st.pinned)} pinned, {st.turn} turns"
            "<table><tr><th>type</th><th>object</th><th>chars</th><th>state</th><th></th></tr>"
            f"{''.join(rows)}</table>{more}</div>"
        )


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
    # The cold path is for a process that has not opened the store: one that has keeps
    # the store's columns and the resume block in memory, and resumes faster from them.
    cold = not workspace.store_is_open and s._resume_cold()
    sdoc = None if cold else workspace.store.get(sid)
    if s.last_resume is not None:
        if system_prompt is not None and system_prompt != s.system_prompt:
            s.set_system_prompt(system_prompt)
            s.save()
    elif sdoc is not None:
        if sdoc.get("type") != "session":
            raise NotFoundError(f"object {sid!r} is a {sdoc.get('type')}, not a session")
        s._resume(sdoc)
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
