"""Sessions: what an agent has seen, what is active, and what the model sees (DESIGN §6).

A session keeps four sets of object ids:

- ``session_index``: every object the session ever touched (append-only);
- ``metadata_pool``: objects whose one-line metadata the model sees;
- ``active_set``: objects whose full content is in the prompt;
- ``pinned_set``: objects no strategy may evict.

Files and tool calls are content objects and live in those sets. The chat and the
system prompt are infrastructure objects: stored and versioned, referenced from the
session document, rendered in fixed places, and never in the sets.

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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..context import (
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
from ..llm.tokens import TokenCounter
from ..model import new_id
from ..redaction.redactor import redact_data, redact_text
from ..strategies.builtin import ContextStrategy, KeepAll
from ._resume import _SessionResume
from ._state import ResumeReport, _payload

if TYPE_CHECKING:
    from ..access.door import Access
    from ..store.objectstore import TxRecord
    from .watch import Watcher

__all__ = ["MetaEntry", "ResumeReport", "Session", "open_session"]


class Session(_SessionResume):
    """One agent session over a workspace. Create or resume with ``ws.session(id)``."""

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
        """
        with self._lock:
            tid = id or new_id()
            # A tool call's record is what the model and the logs see: its output and its
            # arguments are redacted (whole, before the display form cuts them).
            args = redact_data(dict(args))
            content = None if content is None else redact_text(content)
            shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
            doc: dict[str, Any] = {
                "xt/id": tid,
                "type": "toolcall",
                "source": None,
                "identity_hash": None,
                "content": content,
                "tool": tool,
                "args": dict(args),
                "args_display": f"{tool}({shown})",
                "status": status,
                "chat_ref": self.chat_id,
                "file_refs": list(file_refs),
            }
            doc["content_hash"] = content_hash(_payload(doc))
            # Tool calls are written in batches (at save, assemble or flush) so that a
            # tool call costs no store commit of its own.
            self._pending.append(doc)
            self._admit(doc)
            self._toolcall_refs.append(tid)
            if activate:
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
        s._restore(sdoc)
        # A session saved before the metadata log has none: its next context lists
        # every object in one first block.
        s._meta_log = list(sdoc.get("metadata_log") or [])
        s.last_resume = s._reconcile()
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
