"""Resuming a stored session: its sets restored, its files checked against the disk.

``_restore`` brings back a saved session document (its sets, chat, system prompt and
restored items) without reading file contents; ``_reconcile`` then compares each file's
``stat`` and bytes with what was stored, through the access layer, and reports what
changed, went away or is out of reach (:class:`ctxnb.session.ResumeReport`).
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Sequence
from typing import Any

from ._session_state import _LIGHT, ResumeReport, _SessionState
from .access.observe import StatCache, observe_bytes
from .context import MetaEntry
from .errors import PolicyError
from .hashing import source_hash
from .resolver import _within


class _SessionResume(_SessionState):
    """How a :class:`ctxnb.session.Session` resumes."""

    # -- resume ---------------------------------------------------------------------------------
    def _restore(self, sdoc: dict[str, Any]) -> None:
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
        ids = [*self.session_index]
        extra = [x for x in (self.chat_id, self.system_prompt_id) if x]
        # Full documents (with content) only for what the prompt shows; the other files
        # come from the store's typed columns without their content, which is loaded
        # when they are activated. Resuming a session of thousands of files stays cheap.
        light, light_meta = self._light_file_docs(set(ids) - set(self._active))
        docs = self.store.get_many([i for i in [*ids, *extra] if i not in light])
        docs.update(light)
        chat = docs.get(self.chat_id) or {}
        self._turns = list(chat.get("turns") or [])
        self._toolcall_refs = list(chat.get("toolcall_refs") or [])
        if self.system_prompt_id and self.system_prompt_id in docs:
            self._system_prompt = docs[self.system_prompt_id].get("content") or ""
        meta_for, all_docs, all_meta = self._meta_for, self._docs, self._meta
        for oid in ids:
            d = docs.get(oid)
            if d is None:  # stored elsewhere or lost: keep the id, show it as orphaned
                d = {"xt/id": oid, "type": "file", "source": None, "content": None}
            all_docs[oid] = d
            m = light_meta.get(oid)
            all_meta[oid] = m or meta_for(
                d, orphaned=d.get("source") is None and d["type"] == "file"
            )
        # One pass instead of _set_meta per object: a resume touches every object.
        self._orphaned = {oid for oid in ids if all_meta[oid].orphaned}
        self._assembler.mark_many(ids)

    _LIGHT_COLUMNS = (
        "xt_id",
        "source_type",
        "source_filesystem_id",
        "source_path",
        "identity_hash",
        "file_type",
        "char_count",
        "source_hash",
        "content_hash",
    )

    def _light_file_docs(
        self, ids: set[str]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, MetaEntry]]:
        """Files without their content, and their metadata, from the typed columns."""
        if not ids or self.store.latest_tx() is None:
            return {}, {}
        cols = self.store.scan("file", columns=self._LIGHT_COLUMNS, format="arrow").to_pydict()
        docs: dict[str, dict[str, Any]] = {}
        metas: dict[str, MetaEntry] = {}
        reverse = self.workspace.display_path
        for oid, stype, fs, path, ih, ftype, chars, shash, chash in zip(
            *(cols[n] for n in self._LIGHT_COLUMNS), strict=True
        ):
            if oid not in ids:
                continue
            src = None
            if path is not None:
                src = {"type": stype or "filesystem", "filesystemId": fs, "path": path}
            docs[oid] = {
                "xt/id": oid,
                "type": "file",
                "source": src,
                "identity_hash": ih,
                "file_type": ftype,
                "char_count": chars or 0,
                "source_hash": shash,
                "content_hash": chash,
                _LIGHT: True,
            }
            metas[oid] = MetaEntry(
                oid,
                "file",
                path=reverse(path or "", fs),
                file_type=ftype,
                char_count=chars or 0,
                deleted=shash is None,
                orphaned=src is None,
            )
        return docs, metas

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
        report = ResumeReport(objects=len(self.session_index))
        ws = self.workspace
        res = ws.resolver
        default_fs, mounts = res.default_filesystem_id(), res.mounts
        ws_root = str(ws.root)
        root_slash = ws_root + "/"
        cache = StatCache.open(ws.root, res.filesystem_of(ws_root), self.store)
        roots_ok: dict[str, bool] = {}
        # First the files whose filesystem is reachable, then one batched lstat of all
        # of them through the policy (each directory walked to once), then the stat
        # cache: nothing per file but the lstat and a dict lookup when nothing changed.
        todo: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        for oid in self.session_index:
            doc = self._docs[oid]
            src = doc.get("source")
            if doc.get("type") != "file" or not src:
                continue
            root: str | None
            if not mounts and src.get("filesystemId") == default_fs:  # no mount to look at
                root = ws_root if (src.get("path") or "").startswith(root_slash) else "/"
            else:
                root = _root_for(src, mounts, default_fs, root_slash)
            if root is not None and root not in roots_ok:
                roots_ok[root] = os.path.isdir(root)
            if root is None or not roots_ok[root]:
                self._set_orphaned(oid, True)
                report.orphaned.append(oid)
                continue
            todo.append((oid, doc, src))
        # Through the policy: a file now behind a symbolic link, denied or outside
        # every root is not read; it is orphaned (latest version kept).
        stats = ws.policy.stat_many([src["path"] for _, _, src in todo])
        items: list[tuple[dict[str, Any], bytes | None]] = []
        lookup, orphaned = cache.lookup, self._orphaned
        for (oid, doc, src), st in zip(todo, stats, strict=True):
            if isinstance(st, PolicyError):
                self._set_orphaned(oid, True)
                report.orphaned.append(oid)
                continue
            if oid in orphaned:
                self._set_orphaned(oid, False)
            if type(st) is not os.stat_result or stat_mod.S_ISDIR(st.st_mode):
                items.append((src, None))  # gone (or a directory now)
                continue
            path = src["path"]
            cached = lookup(path, st)
            if cached is not None and cached == doc.get("source_hash"):
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
                cache.record(path, st, source_hash(data))
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
