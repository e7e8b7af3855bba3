"""Observe: "changed? write a version", the one way file bytes enter the store.

Every caller that has read a file (the indexer, the file tools, a session adding a
path, resume, the watcher, the rules tracker) hands the bytes to :func:`observe_bytes`.
It compares their hash with the latest stored version and writes a version only when
they changed (``created``/``updated``), a deletion version when the file is gone
(``deleted``), and nothing otherwise (``unchanged``). Reading is done by the caller
through the race-free :class:`~ctxnb.access.fdio.PathPolicy`, so a denied path never
gets here.

Example:
    >>> import tempfile
    >>> from ctxnb.store import ObjectStore
    >>> from ctxnb.model import FilesystemSource
    >>> store = ObjectStore(tempfile.mkdtemp())
    >>> src = FilesystemSource(filesystem_id="fs", path="/ws/a.py")
    >>> [o.action for o in observe_bytes(store, [(src, b"x = 1\\n")])]
    ['created']
    >>> [o.action for o in observe_bytes(store, [(src, b"x = 1\\n"), (src, None)])]
    ['unchanged', 'deleted']
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._util.jsoncache import loads_paused
from .._util.record import FrozenRecord
from ..hashing import content_hash, identity_hash, source_hash

if TYPE_CHECKING:
    from ..model import FilesystemSource
    from ..store.objectstore import ObjectStore

__all__ = [
    "IndexResult",
    "Observation",
    "StatCache",
    "build_file_doc",
    "decode_bytes",
    "detect_file_type",
    "index_deletion",
    "index_file",
    "is_deleted",
    "observe_bytes",
    "observe_inline",
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
    src = _source_dict(source)
    shash = source_hash(data) if data is not None else None
    return _file_doc(src, identity_hash("file", src), data, shash, file_type)


def _file_doc(
    src: dict[str, Any],
    oid: str,
    data: bytes | None,
    shash: str | None,
    file_type: str | None = None,
) -> dict[str, Any]:
    """:func:`build_file_doc` with the identity and source hashes already computed."""
    ftype = file_type or detect_file_type(src["path"])
    if data is None:
        text = None
    else:
        text = decode_bytes(data)
        if text is None:
            ftype = "binary"
    count = len(text) if text is not None else 0
    return {
        "xt/id": oid,
        "type": "file",
        "source": src,
        "identity_hash": oid,
        "content": text,
        "file_type": ftype,
        "char_count": count,
        "source_hash": shash,
        # content_hash of the payload above (it leaves out source_hash), without copies.
        "content_hash": content_hash({"content": text, "file_type": ftype, "char_count": count}),
    }


def is_deleted(doc: Mapping[str, Any] | None) -> bool:
    """True for a deletion version (null content and no source hash)."""
    return doc is not None and doc.get("content") is None and doc.get("source_hash") is None


class Observation(FrozenRecord):
    """What observing one file did.

    Attributes:
        object_id: the file's object id.
        action: ``created``, ``updated``, ``deleted`` or ``unchanged``.
        tx_id: the transaction of the file's latest version now (None: never stored,
            e.g. a file that is gone and was never seen).
        doc: the version written, or None when nothing was written.
        source_hash: the hash of the bytes observed (None: the file is gone).
    """

    __slots__ = ("object_id", "action", "tx_id", "doc", "source_hash")
    object_id: str
    action: Action
    tx_id: int | None
    doc: dict[str, Any] | None
    source_hash: str | None

    def __init__(
        self,
        object_id: str,
        action: Action,
        tx_id: int | None,
        doc: dict[str, Any] | None = None,
        source_hash: str | None = None,
    ) -> None:
        self._fill(object_id, action, tx_id, doc, source_hash)

    @property
    def version_id(self) -> str | None:
        """``<object id>@<tx>`` of the latest version, as the tools report it."""
        return f"{self.object_id}@{self.tx_id}" if self.tx_id is not None else None


Source: TypeAlias = "FilesystemSource | Mapping[str, Any]"


def _source_dict(source: Source) -> dict[str, Any]:
    # A FilesystemSource, without importing its pydantic model to ask.
    to_dict = getattr(source, "to_dict", None)
    return to_dict() if to_dict is not None else dict(source)  # type: ignore[arg-type]


def observe_bytes(
    store: ObjectStore,
    items: Iterable[tuple[Source, bytes | None]],
    *,
    attached: Sequence[bytes] | None = None,
    durable_waits: list[Callable[[], None]] | None = None,
) -> list[Observation]:
    """Changed? Write a version: one transaction for every file that changed.

    Args:
        store: the object store.
        items: ``(source, bytes)`` pairs; ``None`` bytes mean the file is gone.
        attached: committed in the transaction's log line when one is written (an
            observation with a ``doc``), see :meth:`ObjectStore.put
            <ctxnb.store.objectstore.ObjectStore.put>`; dropped when nothing changed.
        durable_waits: passed to :meth:`ObjectStore.put <ctxnb.store.objectstore.ObjectStore.put>`
            (its log line's fsync runs in the background; the caller waits).

    Returns:
        One :class:`Observation` per item, in order.
    """
    pending: list[tuple[dict[str, Any], str, bytes | None, str | None]] = []
    for source, data in items:
        src = _source_dict(source)
        oid = identity_hash("file", src)
        pending.append((src, oid, data, source_hash(data) if data is not None else None))
    if not pending:
        return []
    old = store.get_many(list(dict.fromkeys(oid for _, oid, _, _ in pending)))
    to_write: list[dict[str, Any]] = []
    results: list[tuple[str, Action, dict[str, Any] | None, str | None]] = []
    latest: dict[str, dict[str, Any]] = {}
    for src, oid, data, shash in pending:
        prev: dict[str, Any] | None = latest.get(oid, old.get(oid))
        if data is None:
            if prev is None or is_deleted(prev):
                results.append((oid, "unchanged", None, None))
                continue
            doc = _file_doc(src, oid, None, None, prev.get("file_type"))
            action: Action = "deleted"
        else:
            # Comparing hashes first: building a document hashes its whole text.
            if prev is not None and prev.get("source_hash") == shash:
                results.append((oid, "unchanged", None, shash))
                continue
            doc = _file_doc(src, oid, data, shash)
            action = "created" if prev is None else "updated"
        latest[oid] = doc
        to_write.append(doc)
        results.append((oid, action, doc, shash))
    tx_new = (
        store.put(to_write, attached=attached, durable_waits=durable_waits).tx_id
        if to_write
        else None
    )
    out = []
    for oid, action, written, shash in results:
        if oid in latest:
            tx: int | None = tx_new
        else:
            tx = store.latest_tx_of(oid) if oid in old else None
        out.append(Observation(oid, action, tx, written, shash))
    return out


def observe_inline(
    store_dir: str | os.PathLike[str],
    items: Iterable[tuple[Source, bytes]],
) -> tuple[list[Observation], int, int, int | None] | None:
    """Write a version of each file as one inline transaction, without opening the store.

    For a process that records one edit and exits (the Claude Code post hook): the
    store is not opened, so nothing heavier than the standard library is imported. The
    caller knows the files changed (an edit tool said so), so the latest versions are
    not compared: every item becomes a version (action ``updated``). Returns None,
    having written nothing, when the store must be opened to commit them (see
    :mod:`ctxnb.store._append`); the caller then uses :func:`observe_bytes`.

    Returns:
        The observations; how many inline transactions now wait for a fold into
        Parquet, and how many transactions for a compaction (the caller opens the
        store to do either when too many wait), and when the oldest of the former was
        committed (µs since 1970; None: none waits), to fold those that waited too long.
    """
    from ..store._append import append_inline

    docs = []
    for source, data in items:
        src = _source_dict(source)
        oid = identity_hash("file", src)
        docs.append(_file_doc(src, oid, data, source_hash(data)))
    done = append_inline(store_dir, docs)
    if done is None:
        return None
    out = [Observation(d["xt/id"], "updated", done.tx_id, d, d["source_hash"]) for d in docs]
    return out, done.unfolded, done.uncompacted, done.oldest_unfolded_us


class IndexResult(FrozenRecord):
    """What indexing one file did."""

    __slots__ = ("object_id", "action", "tx_id")
    object_id: str
    action: Action
    tx_id: int | None

    def __init__(self, object_id: str, action: Action, tx_id: int | None = None) -> None:
        self._fill(object_id, action, tx_id)


def index_file(
    store: ObjectStore,
    source: FilesystemSource,
    data: bytes,
    file_type: str | None = None,
) -> IndexResult:
    """Index one file's bytes: ``created``, ``updated`` or ``unchanged`` (no write).

    ``file_type`` overrides the type detected from the name (a change of type alone
    is a new version).
    """
    if file_type is None:
        obs = observe_bytes(store, [(source, data)])[0]
        return IndexResult(obs.object_id, obs.action, obs.tx_id if obs.doc else None)
    doc = build_file_doc(source, data, file_type)
    old = store.get(doc["xt/id"])
    if old is not None and (old.get("source_hash"), old.get("file_type")) == (
        doc["source_hash"],
        doc["file_type"],
    ):
        return IndexResult(doc["xt/id"], "unchanged")
    tx = store.put([doc])
    return IndexResult(doc["xt/id"], "created" if old is None else "updated", tx.tx_id)


def index_deletion(store: ObjectStore, source: FilesystemSource) -> IndexResult:
    """Write a deletion version (null content, char_count 0); nothing if already deleted."""
    obs = observe_bytes(store, [(source, None)])[0]
    return IndexResult(obs.object_id, obs.action, obs.tx_id if obs.doc else None)


# -- the stat cache -----------------------------------------------------------------
# The parsed statcache.json of the last few workspaces, by the file's identity: a
# resume or a re-index in the same process reads the file only when it was replaced
# (each save writes a new file: a new inode and ctime). Entries are lists that the
# cache replaces and never changes in place, so a shallow copy per open suffices.
_PARSED: dict[str, tuple[tuple[int, int, int, int], dict[str, Any]]] = {}
_PARSED_MAX = 8


def _read_cache_file(path: Path) -> dict[str, Any]:
    key = str(path)
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())  # the identity of the very file read below
        ident = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        hit = _PARSED.get(key)
        if hit is not None and hit[0] == ident:
            return hit[1]
        raw = loads_paused(f.read())
    if isinstance(raw, dict):
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = (ident, raw)
    return raw if isinstance(raw, dict) else {}


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
    def open(cls, root: str | os.PathLike[str], fs_id: str, tip: int) -> StatCache:
        """The cache of the workspace at ``root`` (empty when missing or stale).

        ``tip`` is the store's last committed transaction id (0 when empty): a cache
        saved at a later one belongs to another store.
        """
        path = Path(root) / ".ctxnb" / "statcache.json"
        entries, tx = cls._load(path, fs_id, tip)
        return cls(path, fs_id, entries, tx)

    @staticmethod
    def _load(path: Path, fs_id: str, latest_tx: int) -> tuple[dict[str, list[Any]], int]:
        try:
            raw = _read_cache_file(path)
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
        # A copy: the caller records and forgets; the parsed file stays as it was read.
        return dict(entries), tx if isinstance(tx, int) else 0

    def lookup(self, path: str, st: os.stat_result) -> str | None:
        """The source hash recorded for ``path`` if its stat is unchanged and not racy."""
        e = self.entries.get(path)
        if (
            e is None
            or e[1] != st.st_mtime_ns
            or e[0] != st.st_size
            or e[2] != st.st_ctime_ns
            or e[3] != st.st_ino
            or st.st_mtime_ns + RACY_NS >= e[5]
        ):
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

    def save(self, tip: int) -> None:
        """Write the cache if anything changed (atomically: temp file + rename), as of
        the store's transaction ``tip``."""
        if not self.dirty:
            return
        self.dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps(
                {
                    "version": _CACHE_VERSION,
                    "filesystem_id": self.fs_id,
                    "tx": tip,
                    "entries": self.entries,
                },
                separators=(",", ":"),
            )
        )
        os.replace(tmp, self.path)
