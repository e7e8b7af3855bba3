"""Resuming a stored session: its sets restored, its files checked against the disk.

``_restore`` brings back a saved session document (its sets, chat, system prompt and
restored items) without reading file contents; ``_reconcile`` then compares each file's
``stat`` and bytes with what was stored, through the access layer, and reports what
changed, went away or is out of reach (:class:`ctxnb.session.core.ResumeReport`).
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..access.observe import StatCache, observe_bytes
from ..context import MetaEntry
from ..errors import PolicyError
from ..hashing import source_hash
from ..redaction.redactor import redact_text
from ..resolver import _within
from ._state import _LIGHT, ResumeReport, _SessionState

if TYPE_CHECKING:
    from ._columns import FileColumns


class _SessionResume(_SessionState):
    """How a :class:`ctxnb.session.core.Session` resumes."""

    # -- resume ---------------------------------------------------------------------------------
    _columns: FileColumns

    def _restore(self, sdoc: dict[str, Any]) -> None:
        # Imported here: numpy and pyarrow's compute cost a process that only makes or
        # uses a session (the CLI, a hook) ~0.1 s, and only a resume needs them.
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from ._columns import LazyRows, file_columns

        self.session_index = list(sdoc.get("session_index") or [])
        self._index_set = set(self.session_index)
        self.metadata_pool = list(sdoc.get("metadata_pool") or [])
        self._pool_set = set(self.metadata_pool)
        self._active = dict.fromkeys(sdoc.get("active_set") or [])
        self._pinned = dict.fromkeys(sdoc.get("pinned_set") or [])
        assembly = sdoc.get("assembly") or {}
        entered = sdoc.get("entered") or assembly.get("entered") or {}
        if isinstance(assembly.get("hash"), str) and isinstance(sdoc.get("turn"), int):
            self.last_context = (sdoc["turn"], assembly["hash"])
        for i, oid in enumerate(self._active):
            self._seq[oid] = i + 1
            self._last_used[oid] = i + 1
            self._entered[oid] = int(entered.get(oid, 0))
        self._tick = len(self._active)
        self._restores = list(sdoc.get("restores") or [])
        self.chat_id = sdoc.get("chat_ref") or self.chat_id
        self.system_prompt_id = sdoc.get("system_prompt_ref")
        ids = self.session_index
        extra = [x for x in (self.chat_id, self.system_prompt_id) if x]
        # Full documents (with content) only for what the prompt shows; the other files
        # are rows of the store's typed columns, made into a document (without its
        # content, loaded when activated) or a metadata entry when first asked for.
        # Resuming a session of thousands of files builds nothing per file.
        cols = self._columns = file_columns(self.store, ids)
        light = cols.found
        if self._active:
            shown = pa.array(list(self._active), type=pa.string())
            light = light & ~pc.is_in(cols.ids, value_set=shown).to_numpy(zero_copy_only=False)
        light_rows = np.flatnonzero(light)
        every = len(light_rows) == len(ids)
        light_ids = ids if every else cols.ids.take(light_rows).to_pylist()
        rows = dict(zip(light_ids, light_rows.tolist(), strict=True))
        full = [] if every else cols.ids.filter(pa.array(~light)).to_pylist()
        docs = self.store.get_many([*full, *extra])
        chat = docs.get(self.chat_id) or {}
        self._turns = list(chat.get("turns") or [])
        self._toolcall_refs = list(chat.get("toolcall_refs") or [])
        if self.system_prompt_id and self.system_prompt_id in docs:
            self._system_prompt = docs[self.system_prompt_id].get("content") or ""
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
        self._docs = LazyRows(built_docs, rows, self._light_doc)
        self._meta = LazyRows(built_meta, dict(rows), self._light_meta)
        # A light row without a path is orphaned (as its entry would say).
        lost = light & pc.is_null(cols.column("source_path")).to_numpy(zero_copy_only=False)
        self._orphaned = {o for o, m in built_meta.items() if m.orphaned}
        self._orphaned.update(cols.ids.filter(pa.array(lost)).to_pylist())
        self._assembler.mark_many(ids)

    def _light_doc(self, row: int) -> dict[str, Any]:
        """A file without its content, from row ``row`` of the store's typed columns."""
        c = self._columns.lists()
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
            _LIGHT: True,
        }

    def _light_meta(self, row: int) -> MetaEntry:
        c = self._columns.lists()
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

    def _accessible_root(self, src: dict[str, Any]) -> str | None:
        """The directory whose presence says a file's filesystem is reachable, or None.

        The longest mount covering the path; for host paths no mount covers, the
        workspace root (or ``/``); None for another filesystem no mount reaches.
        """
        res = self.workspace.resolver
        return _root_for(
            src, res.mounts, res.default_filesystem_id(), str(self.workspace.root) + "/"
        )

    def _reconcile(self) -> ResumeReport:
        import numpy as np
        import pyarrow.compute as pc

        from ._columns import ResumeBlock, StatRows, block_path, pick

        report = ResumeReport(objects=len(self.session_index))
        ws = self.workspace
        res = ws.resolver
        default_fs, mounts = res.default_filesystem_id(), res.mounts
        ws_root = str(ws.root)
        root_slash = ws_root + "/"
        cols, ids = self._columns, self.session_index
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
                root = _root_for(self._docs[ids[i]]["source"], mounts, default_fs, root_slash)
                if root is not None and root not in roots_ok:
                    roots_ok[root] = os.path.isdir(root)
                reach[k] = root is not None and roots_ok[root]
        for i in rows[~reach].tolist():
            self._set_orphaned(ids[i], True)
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
        if self._orphaned:  # reachable again (rare): as the entry will say
            for k, oid in enumerate(cols.ids.take(todo).to_pylist()):
                if oid in self._orphaned and not isinstance(stats[k], PolicyError):
                    self._set_orphaned(oid, False)
        if same.all() and block is not None:
            return report
        look = np.flatnonzero(~same)
        cache = StatCache.open(ws.root, fs_id, self.store)
        items: list[tuple[dict[str, Any], bytes | None]] = []
        lookup = cache.lookup
        for k in look.tolist():
            oid, st_k = ids[todo[k]], stats[k]
            if isinstance(st_k, PolicyError):
                self._set_orphaned(oid, True)
                report.orphaned.append(oid)
                continue
            src = self._docs[oid]["source"]
            if type(st_k) is not os.stat_result or stat_mod.S_ISDIR(st_k.st_mode):
                items.append((src, None))  # gone (or a directory now)
                continue
            path = src["path"]
            cached = lookup(path, st_k)
            if cached is not None and cached == doc_hash[int(todo[k])].as_py():
                report.unchanged += 1
                continue
            try:
                data = ws.read(path)
            except (OSError, PolicyError):
                self._set_orphaned(oid, True)
                report.orphaned.append(oid)
                continue
            if data is not None:
                report.hashed += 1
                cache.record(path, st_k, source_hash(data))
            items.append((src, data))
        new_docs = []
        for obs in observe_bytes(self.store, items):
            if obs.action == "unchanged":
                report.unchanged += 1
                continue
            (report.deleted if obs.action == "deleted" else report.updated).append(obs.object_id)
            if obs.doc is not None:
                new_docs.append(obs.doc)
        for d in new_docs:
            self._install(d["xt/id"], d)
            self._set_meta(d["xt/id"], self._meta_for(d, orphaned=False))
        cache.save(self.store)
        # What the stat cache now knows of the files looked at goes into the block, so
        # that the next resume finds them unchanged by the compare alone.
        if block is None:
            block, look = ResumeBlock.empty(cols.ids), np.arange(len(todo))
        redo = todo[look]
        block.record(redo.tolist(), [cache.entries.get(p) for p in paths.take(redo).to_pylist()])
        tip = self.store.latest_tx()
        with contextlib.suppress(OSError):
            block.save(where, fs_id, tip.tx_id if tip else 0)
        return report


def _root_for(
    src: dict[str, Any], mounts: Sequence[Any], default_fs: str | None, root_slash: str
) -> str | None:
    """See :meth:`Session._accessible_root`."""
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
