"""The indexer: a new version only when bytes change (DESIGN §5).

``index_file`` compares the raw-bytes hash of what is on disk with the latest stored
version and writes ``created``, ``updated`` or nothing (``unchanged``).
``index_deletion`` writes a version with null content. ``index_tree`` does this for a
whole workspace in few transactions, with a progress bar, and a stat cache so that a
re-index of an unchanged tree hashes nothing (as ``git status`` does).

Example:
    >>> import tempfile
    >>> from ctxnb.store import ObjectStore
    >>> from ctxnb.model import FilesystemSource
    >>> store = ObjectStore(tempfile.mkdtemp())
    >>> src = FilesystemSource(filesystem_id="fs", path="/ws/a.py")
    >>> index_file(store, src, b"x = 1\\n").action
    'created'
    >>> index_file(store, src, b"x = 1\\n").action
    'unchanged'
    >>> index_file(store, src, b"x = 2\\n").action
    'updated'
    >>> index_deletion(store, src).action
    'deleted'
"""

from __future__ import annotations

import html
import json
import os
import stat as stat_mod
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .hashing import content_hash, identity_hash, source_hash
from .ignore import iter_tree
from .model import FilesystemSource

if TYPE_CHECKING:
    from .store import ObjectStore
    from .workspace import Workspace

__all__ = [
    "IndexReport",
    "IndexResult",
    "StatCache",
    "build_file_doc",
    "decode_bytes",
    "detect_file_type",
    "index_deletion",
    "index_file",
    "index_tree",
    "is_deleted",
]

Action = Literal["created", "updated", "unchanged", "deleted"]

_EXT_TYPES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".ipynb": "notebook",
    ".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".txt": "text",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".json": "json", ".jsonl": "jsonl",
    ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini", ".cfg": "ini",
    ".rs": "rust", ".go": "go", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".hpp": "cpp", ".java": "java", ".kt": "kotlin", ".rb": "ruby", ".php": "php",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".html": "html", ".htm": "html",
    ".css": "css", ".scss": "css", ".sql": "sql", ".xml": "xml", ".csv": "csv",
    ".swift": "swift", ".lua": "lua", ".r": "r", ".jl": "julia", ".cs": "csharp",
}  # fmt: skip
_NAME_TYPES = {"Makefile": "makefile", "Dockerfile": "dockerfile", "AGENTS.md": "markdown"}


def detect_file_type(path: str) -> str:
    """A coarse file type from the name: ``python``, ``markdown``, ``text`` …"""
    name = path.rsplit("/", 1)[-1]
    if name in _NAME_TYPES:
        return _NAME_TYPES[name]
    dot = name.rfind(".")
    if dot > 0:
        return _EXT_TYPES.get(name[dot:].lower(), "text")
    return "text"


def decode_bytes(data: bytes) -> str | None:
    """UTF-8 text, or None for binary (invalid UTF-8 or a NUL byte)."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def build_file_doc(
    source: FilesystemSource | Mapping[str, Any],
    data: bytes | None,
    file_type: str | None = None,
) -> dict[str, Any]:
    """The file document for ``data`` at ``source`` (``data=None`` means deleted)."""
    src = source.to_dict() if isinstance(source, FilesystemSource) else dict(source)
    oid = identity_hash("file", src)
    ftype = file_type or detect_file_type(src["path"])
    if data is None:
        text, shash = None, None
    else:
        text = decode_bytes(data)
        shash = source_hash(data)
        if text is None:
            ftype = "binary"
    payload: dict[str, Any] = {
        "content": text,
        "file_type": ftype,
        "char_count": len(text) if text is not None else 0,
        "source_hash": shash,
    }
    payload["content_hash"] = content_hash(payload)
    return {"xt/id": oid, "type": "file", "source": src, "identity_hash": oid, **payload}


def is_deleted(doc: Mapping[str, Any] | None) -> bool:
    """True for a deletion version (null content and no source hash)."""
    return doc is not None and doc.get("content") is None and doc.get("source_hash") is None


@dataclass(frozen=True)
class IndexResult:
    """What indexing one file did."""

    object_id: str
    action: Action
    tx_id: int | None = None


def _action_for(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> Action:
    if old is None:
        return "created"
    if old.get("source_hash") == new.get("source_hash") and old.get("file_type") == new.get(
        "file_type"
    ):
        return "unchanged"
    return "updated"


def index_file(
    store: ObjectStore,
    source: FilesystemSource,
    data: bytes,
    file_type: str | None = None,
) -> IndexResult:
    """Index one file's bytes: ``created``, ``updated`` or ``unchanged`` (no write)."""
    doc = build_file_doc(source, data, file_type)
    action = _action_for(store.get(doc["xt/id"]), doc)
    if action == "unchanged":
        return IndexResult(doc["xt/id"], action)
    tx = store.put([doc])
    return IndexResult(doc["xt/id"], action, tx.tx_id)


def index_deletion(store: ObjectStore, source: FilesystemSource) -> IndexResult:
    """Write a deletion version (null content, char_count 0); nothing if already deleted."""
    src = source.to_dict()
    oid = identity_hash("file", src)
    old = store.get(oid)
    if old is None or is_deleted(old):
        return IndexResult(oid, "unchanged")
    doc = build_file_doc(src, None, old.get("file_type"))
    tx = store.put([doc])
    return IndexResult(oid, "deleted", tx.tx_id)


@dataclass
class IndexReport:
    """Counts per action of one ``index_tree`` run."""

    root: str
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    files: int = 0
    bytes: int = 0
    hashed: int = 0
    transactions: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    changed_paths: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "skipped": self.skipped,
        }

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        return (
            f"indexed {self.files} files ({self.bytes / 1e6:.1f} MB) in {self.duration_s:.2f}s: "
            f"{parts}; {len(self.transactions)} transaction(s)"
        )

    def __repr__(self) -> str:
        return f"<IndexReport {self.root}: {self.counts()}>"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in self.counts().items())
        return (
            f"<div><b>IndexReport</b> {html.escape(self.root)} "
            f"({self.files} files, {self.duration_s:.2f}s)"
            f"<table>{rows}</table></div>"
        )


# -- the stat cache -----------------------------------------------------------------
# Re-indexing an unchanged tree must not hash 100 MB. As git does, a file whose size,
# mtime, ctime and inode are what they were when it was last hashed is taken as
# unchanged -- unless its mtime was within RACY_NS of that moment, since a write in
# the same timestamp tick would leave the stat unchanged ("racily clean" in git).
RACY_NS = 2_000_000_000
_CACHE_VERSION = 2


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class StatCache:
    """Canonical path -> (stat, source hash) of the last time the file was hashed.

    Lives in ``.ctxnb/statcache.json``. It is only a cache: a lost or stale file costs
    re-hashing, never a wrong answer (a cache newer than the store is ignored).
    """

    def __init__(self, path: Path, fs_id: str, entries: dict[str, list[Any]], tx: int = 0) -> None:
        self.path = path
        self.fs_id = fs_id
        self.entries = entries
        self.tx = tx  # the store's tip when the cache was saved
        self.dirty = False

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> StatCache:
        fs_id = workspace.resolver.default_filesystem_id()
        path = Path(workspace.root) / ".ctxnb" / "statcache.json"
        latest = workspace.store.latest_tx()
        entries, tx = cls._load(path, fs_id, latest.tx_id if latest else 0)
        return cls(path, fs_id, entries, tx)

    @staticmethod
    def _load(path: Path, fs_id: str, latest_tx: int) -> tuple[dict[str, list[Any]], int]:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}, 0
        if (
            not isinstance(raw, dict)
            or raw.get("version") != _CACHE_VERSION
            or raw.get("filesystem_id") != fs_id
            or raw.get("tx", 0) > latest_tx  # the store is older than the cache
        ):
            return {}, 0
        entries = raw.get("entries")
        if not isinstance(entries, dict):
            return {}, 0
        tx = raw.get("tx", 0)
        return entries, tx if isinstance(tx, int) else 0

    def lookup(self, path: str, st: os.stat_result) -> str | None:
        """The source hash recorded for ``path`` if its stat is unchanged and not racy."""
        e = self.entries.get(path)
        if e is None or e[:4] != _stat_key(st) or st.st_mtime_ns + RACY_NS >= e[5]:
            return None
        return e[4]

    def record(
        self, path: str, st: os.stat_result, shash: str | None, now_ns: int | None = None
    ) -> None:
        self.entries[path] = [*_stat_key(st), shash, now_ns or time.time_ns()]
        self.dirty = True

    def forget(self, path: str) -> None:
        if self.entries.pop(path, None) is not None:
            self.dirty = True

    def save(self, store: ObjectStore) -> None:
        """Write the cache if anything changed (atomically: temp file + rename)."""
        if not self.dirty:
            return
        self.dirty = False
        tip = store.latest_tx()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps(
                {
                    "version": _CACHE_VERSION,
                    "filesystem_id": self.fs_id,
                    "tx": tip.tx_id if tip else 0,
                    "entries": self.entries,
                },
                separators=(",", ":"),
            )
        )
        os.replace(tmp, self.path)


def _want_progress(progress: bool | None, total: int) -> bool:
    if progress is not None:
        return progress
    if total < 500:
        return False
    if "ipykernel" in sys.modules:
        return True
    return sys.stderr.isatty()


def index_tree(
    workspace: Workspace,
    *,
    progress: bool | None = None,
    batch_bytes: int = 8 * 1024 * 1024,
) -> IndexReport:
    """Index every file of a workspace that is not ignored; write deletions for gone files.

    Honours ``.gitignore`` and ``.ctxnbignore`` (and ``[index] ignore`` in the config),
    skips ``.git/`` and ``.ctxnb/``, streams the tree in batches of at most
    ``batch_size`` files or ``batch_bytes`` bytes (one transaction each), and shows a
    progress bar in notebooks and terminals for long runs (``progress=None``: when the
    tree has 500+ files and there is a terminal or a notebook to show it).

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.py").write_text("x = 1\\n")
        >>> Workspace.open(root).index().created
        1
    """
    t0 = time.perf_counter()
    ws_root = Path(workspace.root)
    store = workspace.store
    cfg = workspace.config.index
    fs_id = workspace.resolver.default_filesystem_id()
    report = IndexReport(root=str(ws_root))
    cache = StatCache.for_workspace(workspace)
    root_str = str(ws_root)
    prefix = root_str + "/"
    seen: set[str] = set()

    def source_of(rel: str) -> dict[str, str]:
        return {"type": "filesystem", "filesystemId": fs_id, "path": f"{root_str}/{rel}"}

    entries = list(iter_tree(ws_root, extra_ignores=cfg.ignore, use_gitignore=cfg.use_gitignore))
    known_paths = {p[len(prefix) :] for p in cache.entries if p.startswith(prefix)}
    tip = store.latest_tx()
    if not known_paths or (tip is not None and tip.tx_id > cache.tx):
        # Files stored since the cache was saved (a tool wrote them, the watcher saw
        # them) are known too, so that their deletion on disk is noticed.
        known_paths |= _stored_paths(
            store, fs_id, root_str, since_tx=cache.tx if known_paths else 0
        )
        cache.dirty = True  # saved with the new tip: the next run need not look again

    bar = None
    if _want_progress(progress, len(entries)):
        from tqdm.auto import tqdm

        bar = tqdm(total=len(entries), desc="ctxnb index", unit="file")

    pending: list[tuple[str, os.stat_result, bytes]] = []
    pending_bytes = 0
    now_ns = time.time_ns()

    def flush() -> None:
        nonlocal pending, pending_bytes
        if not pending:
            return
        docs = [build_file_doc(source_of(rel), data) for rel, _, data in pending]
        old = store.get_many([d["xt/id"] for d in docs])
        to_write = []
        for (rel, st, _), doc in zip(pending, docs, strict=True):
            action = _action_for(old.get(doc["xt/id"]), doc)
            setattr(report, action, getattr(report, action) + 1)
            if action != "unchanged":
                to_write.append(doc)
                report.changed_paths[rel] = action
            cache.record(prefix + rel, st, doc["source_hash"], now_ns)
        if to_write:
            report.transactions.append(store.put(to_write).tx_id)
        if bar is not None:
            bar.update(len(pending))
        pending = []
        pending_bytes = 0

    try:
        for rel, st in entries:
            report.files += 1
            report.bytes += st.st_size
            if st.st_size > cfg.max_file_bytes:
                seen.add(rel)
                report.skipped += 1
                if bar is not None:
                    bar.update(1)
                continue
            seen.add(rel)
            if cache.lookup(prefix + rel, st) is not None:
                report.unchanged += 1
                if bar is not None:
                    bar.update(1)
                continue
            try:
                with open(ws_root / rel, "rb") as f:
                    data = f.read()
            except OSError as e:
                seen.add(rel)  # unreadable is not deleted
                report.errors.append((rel, str(e)))
                continue
            report.hashed += 1
            pending.append((rel, st, data))
            pending_bytes += len(data)
            if len(pending) >= cfg.batch_size or pending_bytes >= batch_bytes:
                flush()
        flush()
        gone = _gone(ws_root, known_paths - seen, cache, prefix, now_ns)
        if gone:
            deletions = _deletions(store, [source_of(rel) for rel in gone])
            if deletions:
                report.transactions.append(store.put(deletions).tx_id)
                report.deleted += len(deletions)
                for d in deletions:
                    rel = d["source"]["path"][len(prefix) :]
                    report.changed_paths[rel] = "deleted"
            for rel in gone:
                cache.forget(prefix + rel)
    finally:
        if bar is not None:
            bar.close()
    cache.save(store)
    report.duration_s = time.perf_counter() - t0
    return report


def _deletions(store: ObjectStore, sources: Iterable[dict[str, str]]) -> list[dict[str, Any]]:
    srcs = list(sources)
    ids = [identity_hash("file", s) for s in srcs]
    old = store.get_many(ids)
    out = []
    for s, oid in zip(srcs, ids, strict=True):
        prev = old.get(oid)
        if prev is not None and not is_deleted(prev):
            out.append(build_file_doc(s, None, prev.get("file_type")))
    return out


def _gone(
    root: Path, candidates: set[str], cache: StatCache, prefix: str, now_ns: int
) -> list[str]:
    """The known paths that are no longer files on disk.

    A path the walk did not list may still be a file: an ignored one, or one under an
    ignored directory. It is not deleted (its last version stays), and it stays in the
    cache so that its removal later is noticed; otherwise it would flip between deleted
    and live each time a tool read it and the tree was indexed again.
    """
    out = []
    for rel in sorted(candidates):
        try:
            st = os.lstat(root / rel)
        except OSError:
            out.append(rel)
            continue
        if not stat_mod.S_ISREG(st.st_mode):
            out.append(rel)  # replaced by a directory, a link or a device
        elif prefix + rel not in cache.entries:
            cache.record(prefix + rel, st, None, now_ns)  # known, never looked up
    return out


def _stored_paths(store: ObjectStore, fs_id: str, root: str, *, since_tx: int = 0) -> set[str]:
    """Relative paths of live file objects under ``root`` whose latest version is newer
    than ``since_tx`` (all of them by default)."""
    if store.latest_tx() is None:
        return set()
    # A deletion version has no source hash; every live one (binary too) has one.
    df = store.scan(
        "file",
        columns=["source_filesystem_id", "source_path", "source_hash", "tx_id"],
        format="arrow",
    ).to_pydict()
    out: set[str] = set()
    prefix = root + "/"
    for fs, path, shash, tx in zip(
        df["source_filesystem_id"], df["source_path"], df["source_hash"], df["tx_id"], strict=True
    ):
        if fs != fs_id or not path or tx <= since_tx:
            continue
        if path.startswith(prefix) and shash is not None:
            out.add(path[len(prefix) :])
    return out
