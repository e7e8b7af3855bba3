"""Resuming a stored session: its sets restored, its files checked against the disk.

:meth:`SessionResume.restore` brings back a saved session document (its sets, chat,
system prompt and restored items) into a :class:`~ctxnb.session.state.SessionState`
without reading file contents; :meth:`~SessionResume.reconcile` then compares each
file's ``stat`` and bytes with what was stored, through the access layer, and reports
what changed, went away or is out of reach (:class:`ResumeReport`). It is handed the
state, the workspace and the store, never the session.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..access.observe import StatCache, observe_bytes
from ..context import MetaEntry, meta_for
from ..errors import PolicyError
from ..hashing import source_hash
from ..redaction.redactor import redact_text
from ..resolver import _within

#: Marks a file document made from the store's columns without its content.
LIGHT = "__ctxnb_light__"

if TYPE_CHECKING:
    from ..access.door import Access
    from ..store.objectstore import ObjectStore
    from ._columns import FileColumns, ResumeBlock
    from .state import SessionState


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


class SessionResume:
    """How a :class:`~ctxnb.session.core.Session` resumes: an object given the session's
    state, workspace and store (the session makes one when it is opened on a stored id).

    It keeps the store's typed columns of the session's files, from which the files not
    in the prompt are made into documents and metadata entries when first asked for (the
    state's lazy mappings hold its ``light_doc`` and ``light_meta``).

    Args:
        state: the state to fill (a new session's).
        workspace: the workspace the session reads through.
        store: the workspace's store.
        session_id: the id of the stored session.
    """

    def __init__(self, state: SessionState, workspace: Access, session_id: str) -> None:
        self.state = state
        self.workspace = workspace
        self.session_id = session_id
        self.columns: FileColumns
        # The columns as lists: a cold resume's (from its file), else made from
        # ``columns`` when a row is first built.
        self.lists: dict[str, list[Any]] | None = None
        # What restore read, for the cold-resume file a reconcile may leave behind.
        self._sdoc: dict[str, Any] = {}
        self._tip = 0
        # A cold resume's store transaction: the versions it shows are as of it; and
        # its rows read from the store (shown files, tool calls), not the columns.
        self._as_of = 0
        self._full: set[int] = set()
        self._fetched: dict[str, dict[str, Any]] | None = None
        #: After a cold resume: each regular file it found unchanged, by canonical
        #: path, with its id and the stat it was found with.
        self.verified: dict[str, tuple[str, tuple[int, int, int, int]]] = {}

    @property
    def store(self) -> ObjectStore:
        """The workspace's store (a cold resume that finds nothing changed never opens it)."""
        return self.workspace.store

    def _meta_for(self, doc: dict[str, Any], *, orphaned: bool) -> MetaEntry:
        return meta_for(doc, orphaned=orphaned, reverse_resolve=self.workspace.display_path)

    def _restore_session(self, sdoc: dict[str, Any]) -> None:
        """The parts of the state the session document holds: sets, order, log."""
        s = self.state
        s.restore_sets(
            list(sdoc.get("session_index") or []),
            list(sdoc.get("metadata_pool") or []),
            list(sdoc.get("active_set") or []),
            list(sdoc.get("pinned_set") or []),
        )
        assembly = sdoc.get("assembly") or {}
        entered = sdoc.get("entered") or assembly.get("entered") or {}
        if isinstance(assembly.get("hash"), str) and isinstance(sdoc.get("turn"), int):
            s.last_context = (sdoc["turn"], assembly["hash"])
        for i, oid in enumerate(s.active):
            s.seq[oid] = i + 1
            s.last_used[oid] = i + 1
            s.entered[oid] = int(entered.get(oid, 0))
        s.tick = len(s.active)
        s.restores = list(sdoc.get("restores") or [])
        # A session saved before the metadata log has none: its next context lists
        # every object in one first block.
        s.meta_log = list(sdoc.get("metadata_log") or [])
        s.chat_id = sdoc.get("chat_ref") or s.chat_id
        s.system_prompt_id = sdoc.get("system_prompt_ref")

    def resume_cold(self) -> ResumeReport | None:
        """Fill the state from the session's cold-resume file (:mod:`._cold`) when it
        matches the store's tip and every file is as it recorded, checked through the
        path policy; None (the state untouched) when the full path must run.

        Nothing per file is made: documents and entries are built from the file's
        columns when first asked for, and the files the prompt shows (and tool calls)
        are read from the store, as of the recorded transaction, when first asked for.
        """
        from . import _cold

        ws = self.workspace
        cold = _cold.load(ws, self.session_id)
        if cold is None:
            return None
        res = ws.resolver
        if res.mounts:  # which filesystem holds what: the full path's question
            return None
        cols, found = cold.columns, cold.found
        paths, fss = cols["source_path"], cols["source_filesystem_id"]
        default_fs, ws_root = res.default_filesystem_id(), str(ws.root)
        rows = [i for i, f in enumerate(found) if f and paths[i] is not None]
        todo = [paths[i] for i in rows]
        root_slash = ws_root + "/"
        if any(fss[i] != default_fs for i in rows):
            return None
        under = [p.startswith(root_slash) for p in todo]
        if (any(under) and not os.path.isdir(ws_root)) or (
            not all(under) and not os.path.isdir("/")
        ):
            return None
        stats = ws.policy.stat_many(todo)
        if not _cold.unchanged(cold, rows, stats):
            _cold.drop(ws.root, self.session_id)
            return None
        index = cold.session.get("session_index") or []
        for i, path, st in zip(rows, todo, stats, strict=True):
            if type(st) is os.stat_result and stat_mod.S_ISREG(st.st_mode):
                key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                self.verified[path] = (index[i], key)
        from .state import LazyRows

        s = self.state
        self._restore_session(cold.session)
        s.turns, s.toolcall_refs = list(cold.turns), list(cold.toolcall_refs)
        s.system_prompt = cold.system_prompt
        self.lists, self._as_of = cols, cold.tip[0]
        # As restore orders them: the documents read in full first, then the light rows.
        full, light = {}, {}
        for i, oid in enumerate(s.index):
            if found[i] and oid not in s.active:
                light[oid] = i
            else:
                full[oid] = i
        self._full = set(full.values())
        s.docs = LazyRows({}, {**full, **light}, self._cold_doc)
        s.meta = LazyRows({}, {**full, **light}, self._cold_meta)
        s.orphaned = set(cold.orphaned)
        return ResumeReport(objects=len(s.index), unchanged=len(rows))

    def _cold_doc(self, row: int) -> dict[str, Any]:
        """A cold resume's document: a light row, or the store's version as of its tip."""
        if row not in self._full:
            return self.light_doc(row)
        oid = self.state.index[row]
        if self._fetched is None:
            # The first one asked for: all of them in one read while the store is still
            # at the kept transaction (its latest versions are those as of it).
            self._fetched = {}
            tip = self.store.latest_tx()
            if tip is not None and tip.tx_id == self._as_of:
                index = self.state.index
                self._fetched = self.store.get_many([index[i] for i in sorted(self._full)])
        d = self._fetched.pop(oid) if oid in self._fetched else self.store.as_of(oid, self._as_of)
        if d is None:  # stored elsewhere or lost: keep the id, show it as orphaned
            d = {"xt/id": oid, "type": "file", "source": None, "content": None}
        return d

    def _cold_meta(self, row: int) -> MetaEntry:
        if row not in self._full:
            return self.light_meta(row)
        d = self.state.docs[self.state.index[row]]
        return self._meta_for(d, orphaned=d.get("source") is None and d["type"] == "file")

    def restore(self, sdoc: dict[str, Any]) -> None:
        """Fill the state from a stored session document (no file content is read)."""
        s = self.state
        # Imported here: numpy and pyarrow's compute cost a process that only makes or
        # uses a session (the CLI, a hook) ~0.1 s, and only a resume needs them.
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from ._columns import file_columns
        from .state import LazyRows

        tip = self.store.latest_tx()
        self._sdoc, self._tip = sdoc, tip.tx_id if tip else 0
        self._restore_session(sdoc)
        ids = s.index
        extra = [x for x in (s.chat_id, s.system_prompt_id) if x]
        # Full documents (with content) only for what the prompt shows; the other files
        # are rows of the store's typed columns, made into a document (without its
        # content, loaded when activated) or a metadata entry when first asked for.
        # Resuming a session of thousands of files builds nothing per file.
        cols = self.columns = file_columns(self.store, ids)
        light = cols.found
        if s.active:
            shown = pa.array(list(s.active), type=pa.string())
            light = light & ~pc.is_in(cols.ids, value_set=shown).to_numpy(zero_copy_only=False)
        light_rows = np.flatnonzero(light)
        every = len(light_rows) == len(ids)
        light_ids = ids if every else cols.ids.take(light_rows).to_pylist()
        rows = dict(zip(light_ids, light_rows.tolist(), strict=True))
        full = [] if every else cols.ids.filter(pa.array(~light)).to_pylist()
        docs = self.store.get_many([*full, *extra])
        chat = docs.get(s.chat_id) or {}
        s.turns = list(chat.get("turns") or [])
        s.toolcall_refs = list(chat.get("toolcall_refs") or [])
        if s.system_prompt_id and s.system_prompt_id in docs:
            s.system_prompt = docs[s.system_prompt_id].get("content") or ""
        built_docs: dict[str, dict[str, Any]] = {}
        built_meta: dict[str, MetaEntry] = {}
        for oid in full:
            d = docs.get(oid)
            if d is None:  # stored elsewhere or lost: keep the id, show it as orphaned
                d = {"xt/id": oid, "type": "file", "source": None, "content": None}
            built_docs[oid] = d
            built_meta[oid] = self._meta_for(
                d, orphaned=d.get("source") is None and d["type"] == "file"
            )
        s.docs = LazyRows(built_docs, rows, self.light_doc)
        s.meta = LazyRows(built_meta, dict(rows), self.light_meta)
        # A light row without a path is orphaned (as its entry would say).
        lost = light & pc.is_null(cols.column("source_path")).to_numpy(zero_copy_only=False)
        s.orphaned = {o for o, m in built_meta.items() if m.orphaned}
        s.orphaned.update(cols.ids.filter(pa.array(lost)).to_pylist())

    def light_doc(self, row: int) -> dict[str, Any]:
        """A file without its content, from row ``row`` of the store's typed columns."""
        c = self.lists if self.lists is not None else self.columns.lists()
        path, fs = c["source_path"][row], c["source_filesystem_id"][row]
        src = None
        if path is not None:
            src = {"type": c["source_type"][row] or "filesystem", "filesystemId": fs, "path": path}
        return {
            "xt/id": c["xt_id"][row],
            "type": "file",
            "source": src,
            "identity_hash": c["identity_hash"][row],
            "file_type": c["file_type"][row],
            "char_count": c["char_count"][row] or 0,
            "source_hash": c["source_hash"][row],
            "content_hash": c["content_hash"][row],
            LIGHT: True,
        }

    def light_meta(self, row: int) -> MetaEntry:
        """A file's metadata entry, from row ``row`` of the store's typed columns."""
        c = self.lists if self.lists is not None else self.columns.lists()
        path = c["source_path"][row]
        return MetaEntry(
            c["xt_id"][row],
            "file",
            # As meta_for shows a stored file: a secret in its name leaves redacted.
            path=redact_text(
                self.workspace.display_path(path or "", c["source_filesystem_id"][row])
            ),
            file_type=c["file_type"][row],
            char_count=c["char_count"][row] or 0,
            deleted=c["source_hash"][row] is None,
            orphaned=path is None,
        )

    def reconcile(self, *, observe: bool = True) -> ResumeReport:
        """Check the restored files against the disk; new versions go to the store.

        Args:
            observe: False checks without writing to the store: at the first file that
                changed, went away or is refused it stops (its report then tells nothing
                more); only when every file is as stored does it leave the cold-resume
                file (what a session does when it closes).
        """
        s = self.state
        import numpy as np
        import pyarrow.compute as pc

        from ._columns import ResumeBlock, StatRows, block_path, pick  # noqa: F811

        report = ResumeReport(objects=len(s.index))
        ws = self.workspace
        res = ws.resolver
        default_fs, mounts = res.default_filesystem_id(), res.mounts
        ws_root = str(ws.root)
        root_slash = ws_root + "/"
        cols, ids = self.columns, s.index
        paths = cols.column("source_path")
        # The stored files of the session with a path; first those whose filesystem is
        # reachable, as vectors when no mount is involved.
        rows = np.flatnonzero(cols.found & pc.is_valid(paths).to_numpy(zero_copy_only=False))
        if not mounts:
            fs = pick(cols.column("source_filesystem_id"), rows)
            here = pc.fill_null(pc.equal(fs, default_fs), False).to_numpy(zero_copy_only=False)
            under = pc.starts_with(pick(paths, rows), root_slash).to_numpy(zero_copy_only=False)
            reach = here & np.where(under, os.path.isdir(ws_root), os.path.isdir("/"))
        else:
            roots_ok: dict[str, bool] = {}
            reach = np.zeros(len(rows), dtype=bool)
            for k, i in enumerate(rows.tolist()):
                root = _root_for(s.docs[ids[i]]["source"], mounts, default_fs, root_slash)
                if root is not None and root not in roots_ok:
                    roots_ok[root] = os.path.isdir(root)
                reach[k] = root is not None and roots_ok[root]
        for i in rows[~reach].tolist():
            s.set_orphaned(ids[i], True)
            report.orphaned.append(ids[i])
        todo = rows[reach]
        # One batched lstat of all of them through the policy (each directory walked to
        # once): a file now behind a symbolic link, denied or outside every root is not
        # read; it is orphaned (latest version kept).
        stats = ws.policy.stat_many(pick(paths, todo).to_pylist())
        fs_id = res.filesystem_of(ws_root)
        tip = self.store.latest_tx()
        where = block_path(ws.root, self.session_id)
        block = ResumeBlock.load(where, cols.ids, fs_id, tip.tx_id if tip else 0)
        # Then one compare of the stats with the session's block of stat-cache entries:
        # nothing per file in Python for the files that did not change.
        st = StatRows(stats)
        doc_hash = cols.column("source_hash")
        quiet = st.gone & pc.is_null(pick(doc_hash, todo)).to_numpy(zero_copy_only=False)
        same = quiet if block is None else block.unchanged(st, todo, doc_hash) | quiet
        report.unchanged += int(same.sum())
        if s.orphaned:  # reachable again (rare): as the entry will say
            for k, oid in enumerate(cols.ids.take(todo).to_pylist()):
                if oid in s.orphaned and not isinstance(stats[k], PolicyError):
                    s.set_orphaned(oid, False)
        if same.all() and block is not None:
            self._leave_cold(report, block)
            return report
        look = np.flatnonzero(~same)
        cache = StatCache.open(ws.root, fs_id, tip.tx_id if tip else 0)
        items: list[tuple[dict[str, Any], bytes | None]] = []
        lookup = cache.lookup
        for k in look.tolist():
            oid, st_k = ids[todo[k]], stats[k]
            if isinstance(st_k, PolicyError):
                if not observe:
                    return report
                s.set_orphaned(oid, True)
                report.orphaned.append(oid)
                continue
            src = s.docs[oid]["source"]
            if type(st_k) is not os.stat_result or stat_mod.S_ISDIR(st_k.st_mode):
                if not observe:
                    return report
                items.append((src, None))  # gone (or a directory now)
                continue
            path = src["path"]
            cached = lookup(path, st_k)
            if cached is not None and cached == doc_hash[int(todo[k])].as_py():
                report.unchanged += 1
                continue
            if not observe:
                return report
            try:
                data = ws.read(path)
            except (OSError, PolicyError):
                s.set_orphaned(oid, True)
                report.orphaned.append(oid)
                continue
            if data is not None:
                report.hashed += 1
                cache.record(path, st_k, source_hash(data))
            items.append((src, data))
        new_docs = []
        for obs in observe_bytes(self.store, items) if items else ():
            if obs.action == "unchanged":
                report.unchanged += 1
                continue
            (report.deleted if obs.action == "deleted" else report.updated).append(obs.object_id)
            if obs.doc is not None:
                new_docs.append(obs.doc)
        for d in new_docs:
            s.install(d["xt/id"], d)
            s.set_meta(d["xt/id"], self._meta_for(d, orphaned=False))
        latest = self.store.latest_tx()
        cache.save(latest.tx_id if latest else 0)
        # What the stat cache now knows of the files looked at goes into the block, so
        # that the next resume finds them unchanged by the compare alone.
        if block is None:
            block, look = ResumeBlock.empty(cols.ids), np.arange(len(todo))
        redo = todo[look]
        block.record(redo.tolist(), [cache.entries.get(p) for p in paths.take(redo).to_pylist()])
        tip = self.store.latest_tx()
        with contextlib.suppress(OSError):
            block.save(where, fs_id, tip.tx_id if tip else 0)
        if block.unchanged(StatRows(stats), todo, doc_hash).all():
            self._leave_cold(report, block)
        return report

    def _leave_cold(self, report: ResumeReport, block: ResumeBlock) -> None:
        """Write what this resume derived for the next process (:mod:`._cold`), when it
        found every file as stored and the store did not move since :meth:`restore`."""
        from . import _cold

        if report.updated or report.deleted or report.orphaned:
            return
        tip = _cold.current_tip(self.workspace)
        if tip is None or tip[0] != self._tip:
            return
        if _cold.is_current(self.workspace, self.session_id, tip):
            return  # written by this process for this tip already
        s, cols = self.state, self.columns
        lists = cols.lists()
        hashes = block.hashes.to_pylist()
        keys = [k.tolist() for k in block.keys]
        clean = block.clean.tolist()
        stats: list[list[Any] | None] = [
            [keys[0][i], keys[1][i], keys[2][i], keys[3][i], h] if clean[i] and h else None
            for i, h in enumerate(hashes)
        ]
        state = _cold.ColdState(
            session=self._sdoc,
            turns=s.turns,
            toolcall_refs=s.toolcall_refs,
            system_prompt=s.system_prompt,
            columns=lists,
            found=cols.found.tolist(),
            stats=stats,
            orphaned=sorted(s.orphaned),
            tip=tip,
        )
        _cold.save(self.workspace, self.session_id, state)


def _root_for(
    src: dict[str, Any], mounts: Sequence[Any], default_fs: str | None, root_slash: str
) -> str | None:
    """The directory whose presence says a file's filesystem is reachable, or None.

    The longest mount covering the path; for host paths no mount covers, the
    workspace root (or ``/``); None for another filesystem no mount reaches.
    """
    fs, path = src.get("filesystemId"), src.get("path") or ""
    covering = [
        m.canonical_prefix
        for m in mounts
        if m.filesystem_id == fs and _within(path, m.canonical_prefix) is not None
    ]
    if covering:
        return max(covering, key=len)
    if fs != default_fs:
        return None
    return root_slash[:-1] if path.startswith(root_slash) else "/"
