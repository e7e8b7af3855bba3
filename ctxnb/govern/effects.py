"""A command's effects, governed: stored, traced, or put back.

The sandbox (:class:`ctxnb.sandbox.Sandbox`) decides what a command *can* change; this
module handles what it *did* change, the same for ``run_command``, the MCP server, the
quality loop and Claude Code's Bash (``ctxnb sandbox exec``):

1. Before the command, every file of the writable directories is in the store as it is
   now (a new version only where the bytes differ from the latest one; the stat cache
   spares reading unchanged files), so any change can be put back and diffed.
2. After it, each change in the intent's scope gets a store version (a deletion version
   for a removed file) and one Agent Trace record naming the intent, the contributor,
   the redacted command, the changed line ranges, their content hash and the mutation
   class; ``intent_map.md`` lists the file under the intent.
3. A change in a writable directory but outside the scope's globs, or to a denied path,
   is put back from the store (created entries are removed), and reported.

Files ignored by the workspace's ignore rules (``.gitignore``, ``.ctxnbignore``,
``[index] ignore``; root-level files only) are neither stored nor traced, as the
indexer does not store them; outside the scope they are still removed when created.
"""

from __future__ import annotations

import os
import stat as stat_mod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..access.observe import StatCache, decode_bytes, is_deleted, observe_bytes
from ..errors import CtxnbError

if TYPE_CHECKING:
    from ..access.door import Access
    from ..govern.ledger import ContributorType, TraceLedger
    from ..sandbox.observe import Snapshot
    from ..sandbox.runner import SandboxResult
    from ..tools.filetools import FileTools
    from .intents import Intent

__all__ = ["CommandEffects", "EffectsReport", "GoverningEngine"]


class GoverningEngine(Protocol):
    """What the effects need of a :class:`~ctxnb.govern.engine.HookEngine`.

    A protocol, so that this module does not import the engine (which starts it).
    """

    workspace: Access
    root: Path
    tools: FileTools
    ledger: TraceLedger
    contributor_type: ContributorType
    model_id: str | None

    def update_intent_map(self, intent: Intent, path: str, symbols: list[str]) -> None: ...


@dataclass
class EffectsReport:
    """What happened to a command's changes.

    Attributes:
        changed: in-scope changes kept: ``{path, kind, version, trace_id}``.
        reverted: out-of-scope or denied changes put back: ``{path, kind, reason}``.
        not_reverted: changes that could not be put back (no stored version):
            ``{path, kind, reason}``.
        untracked: in-scope changes to ignored files or files over ``[index]
            max_file_bytes`` (kept, not stored): paths.
    """

    changed: list[dict[str, Any]] = field(default_factory=list)
    reverted: list[dict[str, Any]] = field(default_factory=list)
    not_reverted: list[dict[str, Any]] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "reverted": self.reverted,
            "not_reverted": self.not_reverted,
            "untracked": self.untracked,
        }


class CommandEffects:
    """Stores, traces and puts back the effects of commands run under one hook engine.

    Args:
        engine: the hook engine (workspace, tools, ledger, intent map).
    """

    def __init__(self, engine: GoverningEngine) -> None:
        self.engine = engine
        self.ws = engine.workspace
        self.root = str(engine.root)
        self._synced: dict[str, tuple[int, ...]] = {}
        self._stat_cache: Any = None
        self._ignore: Any = None
        self._max_bytes = self.ws.config.index.max_file_bytes

    # -- before ----------------------------------------------------------------------------
    def _ignored(self, rel: str) -> bool:
        if self._ignore is None:
            from .._wildmatch import GlobList

            lines = list(self.ws.config.index.ignore)
            for name in (".gitignore", ".ctxnbignore"):
                try:
                    with open(
                        os.path.join(self.root, name), encoding="utf-8", errors="replace"
                    ) as f:
                        lines += f.read().splitlines()
                except OSError:
                    pass
            self._ignore = GlobList(lines)
        return bool(self._ignore.match_file(rel))

    def sync(self, snap: Snapshot) -> None:
        """Make the store hold the current bytes of every tracked file in ``snap``."""
        store = self.ws.store
        prefix = self.root + "/"
        todo: list[tuple[str, os.stat_result]] = []
        for rel, key in snap.entries.items():
            if not stat_mod.S_ISREG(key[0]) or self._synced.get(rel) == key:
                continue
            if key[1] > self._max_bytes or self._ignored(rel):
                continue
            try:
                st = os.lstat(prefix + rel)
            except OSError:
                continue
            if self._stat_cache is None:
                fs = self.ws.resolver.default_filesystem_id()
                self._stat_cache = StatCache.open(self.ws.root, fs, store)
            if self._stat_cache.lookup(prefix + rel, st) is not None:
                self._synced[rel] = key
                continue
            todo.append((rel, st))
        if not todo:
            return
        items, stats = [], []
        for rel, st in todo:
            data = self._read(rel)
            if data is None:
                continue  # gone, or refused by the path policy (denied files are never stored)
            items.append((self.ws.source_for(rel), data))
            stats.append((rel, st))
        # Changed? Write a version: the access layer's one decision, in one transaction.
        for (rel, st), obs in zip(stats, observe_bytes(store, items), strict=True):
            self._stat_cache.record(prefix + rel, st, obs.source_hash)
            self._synced[rel] = snap.entries[rel]
        self._stat_cache.save(store)

    # -- after -----------------------------------------------------------------------------
    def apply(
        self,
        sres: SandboxResult,
        *,
        intent: Intent | None,
        command: str,
        session_id: str | None,
        caller: str,
        tool: str = "run_command",
    ) -> EffectsReport:
        """Store and trace in-scope changes; put back the others."""
        report = EffectsReport()
        policy = self.engine.tools.policy
        plan = sres.plan
        masked = set(plan.masked_files) if plan is not None else set()
        before = sres.before
        # Deepest first: files before the directories that hold them.
        for ch in sorted(sres.changes, key=lambda c: c.path.count("/"), reverse=True):
            rel = ch.path
            denied = rel in masked or not policy.is_allowed(rel)
            allowed = intent is not None and intent.in_scope(rel) and not denied
            if ch.is_dir or (before is not None and before.is_dir(rel)):
                if not allowed and ch.kind == "created":
                    try:
                        os.rmdir(os.path.join(self.root, rel))
                        report.reverted.append(
                            {"path": rel, "kind": ch.kind, "reason": "outside the scope"}
                        )
                    except OSError:
                        pass  # it holds in-scope files, or it could not be removed
                continue
            if allowed:
                assert intent is not None  # allowed implies an intent
                self._keep(
                    ch.path, ch.kind, ch.racy, report, intent, command, session_id, caller, tool
                )
            elif not ch.racy or self._differs(rel):
                self._put_back(
                    rel, ch.kind, before, "a denied path" if denied else "outside the scope", report
                )
        for ch in sres.changes:  # their stat changed: the next sync looks at them again
            self._synced.pop(ch.path, None)
        return report

    def _read(self, rel: str) -> bytes | None:
        """A file's bytes through the workspace's path policy (descriptor walk, no
        links); None when it is gone or refused."""
        try:
            return self.ws.read(rel)
        except CtxnbError:
            return None

    def _differs(self, rel: str) -> bool:
        data = self._read(rel)
        old = self.ws.store.get(self.ws.object_id(rel))
        if old is None or data is None:
            return True
        from ..hashing import source_hash

        return old.get("source_hash") != source_hash(data)

    def _keep(
        self,
        rel: str,
        kind: str,
        racy: bool,
        report: EffectsReport,
        intent: Intent,
        command: str,
        session_id: str | None,
        caller: str,
        tool: str,
    ) -> None:
        engine = self.engine
        path = os.path.join(self.root, rel)
        if self._ignored(rel) or (kind != "deleted" and _size(path) > self._max_bytes):
            # As the indexer: ignored and huge files are not stored. A racy entry (a file
            # written within the snapshot's clock tick) may not have changed at all, and
            # with no stored version to compare against it is not reported.
            if not racy:
                report.untracked.append(rel)
            return
        data = None if kind == "deleted" else self._read(rel)
        if kind != "deleted" and data is None:
            return  # a symlink or special file: not a file version
        oid = self.ws.object_id(rel)
        prev = self.ws.store.get(oid)
        old_text = "" if prev is None or is_deleted(prev) else (prev.get("content") or "")
        if data is None and (prev is None or is_deleted(prev)):
            return
        if data is not None and prev is not None and not is_deleted(prev):
            from ..hashing import source_hash

            if prev.get("source_hash") == source_hash(data):
                return  # a racy candidate that did not change
        _, version = engine.tools._index_bytes(rel, data)
        new_text = "" if data is None else (decode_bytes(data) or "")
        from ..tools.patching import changed_line_ranges
        from .ledger import build_trace_record
        from .mutation import classify_mutation, touched_symbols

        ranges = changed_line_ranges(old_text, new_text) if new_text else []
        mclass = classify_mutation(rel, old_text, new_text)
        from ..redaction import redact

        meta: dict[str, Any] = {"caller": caller, "command": redact(command).text, "change": kind}
        if version:
            meta["version_id"] = version
        record = build_trace_record(
            file_path=rel,
            ranges=ranges,
            new_text=new_text,
            intent_id=intent.id,
            session_id=session_id,
            contributor_type=engine.contributor_type,
            model_id=engine.model_id,
            repo_root=engine.root,
            tool=tool,
            mutation_class=mclass,
            extra_metadata=meta,
        )
        engine.ledger.append(record)
        if mclass == "INTENT_EVOLUTION":
            engine.update_intent_map(intent, rel, touched_symbols(rel, old_text, new_text))
        report.changed.append(
            {"path": rel, "kind": kind, "version": version, "trace_id": record["id"]}
        )

    def _put_back(
        self, rel: str, kind: str, before: Snapshot | None, reason: str, report: EffectsReport
    ) -> None:
        path = os.path.join(self.root, rel)
        if kind == "created":
            try:
                os.unlink(path)
            except IsADirectoryError:
                return
            except OSError as e:
                report.not_reverted.append(
                    {"path": rel, "kind": kind, "reason": f"{reason}; {e.strerror}"}
                )
                return
            report.reverted.append({"path": rel, "kind": kind, "reason": reason})
            return
        prev = self.ws.store.get(self.ws.object_id(rel))
        if prev is None or is_deleted(prev) or self._ignored(rel):
            report.not_reverted.append(
                {"path": rel, "kind": kind, "reason": f"{reason}; no stored version to put back"}
            )
            return
        data = _stored_bytes(self.ws, prev)
        if data is None:
            report.not_reverted.append(
                {"path": rel, "kind": kind, "reason": f"{reason}; the stored version is binary"}
            )
            return
        try:
            if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
                os.unlink(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.ctxnb-restore-{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            if before is not None and rel in before.entries:
                os.chmod(tmp, stat_mod.S_IMODE(before.entries[rel][0]))
            os.replace(tmp, path)
        except OSError as e:
            report.not_reverted.append(
                {"path": rel, "kind": kind, "reason": f"{reason}; {e.strerror}"}
            )
            return
        report.reverted.append({"path": rel, "kind": kind, "reason": reason})


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _stored_bytes(ws: Any, doc: dict[str, Any]) -> bytes | None:
    """The bytes of a stored text version (binary versions keep no content)."""
    content = doc.get("content")
    if not isinstance(content, str):
        return None
    data = content.encode("utf-8")
    from ..hashing import source_hash

    if doc.get("source_hash") not in (None, source_hash(data)):
        return None  # the text is a decoding of other bytes: cannot rebuild them exactly
    return data
