"""The indexer: a whole tree through the access layer, in few transactions (DESIGN §5).

``index_tree`` walks a workspace by descriptors (:meth:`ctxnb.access.PathPolicy.walk`),
honours ``.gitignore``-style ignores, reads each file that changed and hands the bytes
to :func:`ctxnb.access.observe.observe_bytes` ("changed? write a version") in
batches; a stat cache means a re-index of an unchanged tree hashes nothing (as
``git status`` does). Denied files (``.env``, ``*.pem`` …) and symbolic links are
never read: the report counts them as ``denied``. ``index_file`` and
``index_deletion`` (one file) live in :mod:`ctxnb.access.observe` and are re-exported.

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

import os
import stat as stat_mod
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .access._judgments import Judgments
from .access.ignore import TreeIgnores
from .access.observe import (
    IndexResult,
    StatCache,
    build_file_doc,
    decode_bytes,
    detect_file_type,
    index_deletion,
    index_file,
    is_deleted,
    observe_bytes,
)
from .errors import CtxnbError

if TYPE_CHECKING:
    from .access.door import Access
    from .store.objectstore import ObjectStore

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


@dataclass
class IndexReport:
    """Counts per action of one ``index_tree`` run."""

    root: str
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    denied: int = 0
    files: int = 0
    bytes: int = 0
    hashed: int = 0
    transactions: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    changed_paths: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    denied_paths: list[tuple[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "skipped": self.skipped,
            "denied": self.denied,
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
        import html  # a notebook's display only: not on the command line's path

        rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in self.counts().items())
        return (
            f"<div><b>IndexReport</b> {html.escape(self.root)} "
            f"({self.files} files, {self.duration_s:.2f}s)"
            f"<table>{rows}</table></div>"
        )


_BAR_AFTER = 500  # files: a shorter run needs no progress bar


def _want_progress(progress: bool | None) -> bool:
    if progress is not None:
        return progress
    if "ipykernel" in sys.modules:
        return True
    return sys.stderr.isatty()


def index_tree(
    workspace: Access,
    *,
    progress: bool | None = None,
    batch_bytes: int = 8 * 1024 * 1024,
) -> IndexReport:
    """Index every file of a workspace that is not ignored; write deletions for gone files.

    Honours ``.gitignore`` and ``.ctxnbignore`` (and ``[index] ignore`` in the config),
    reads through the workspace's path policy (denied names, ``.git/`` and ``.ctxnb/``
    and symbolic links are counted as ``denied`` and never read), streams the tree in
    batches of at most ``batch_size`` files or ``batch_bytes`` bytes (one transaction
    each), and shows a progress bar in notebooks and terminals for long runs
    (``progress=None``: when there is a terminal or a notebook to show it).

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.py").write_text("x = 1\\n")
        >>> _ = (root / "key.pem").write_text("-----BEGIN\\n")
        >>> report = Workspace.open(root).index()
        >>> report.created, report.denied, report.denied_paths
        (1, 1, [('key.pem', 'deny:**/*.pem')])
    """
    t0 = time.perf_counter()
    cfg = workspace.config.index
    root_str = str(workspace.root)
    fs_id = workspace.resolver.filesystem_of(root_str)
    # A mount below the root may put part of the tree on another filesystem.
    fs_of = workspace.resolver.filesystem_of if workspace.resolver.mounts else None
    report = IndexReport(root=root_str)
    # The store is opened only when something is to be written or looked up: an
    # unchanged tree is answered by the stat cache and the store's log.
    tip = workspace.store_tip()
    cache = StatCache.open(workspace.root, fs_id, tip)
    prefix = root_str + "/"
    seen: set[str] = set()

    def source_of(rel: str) -> dict[str, str]:
        path = f"{root_str}/{rel}"
        return {
            "type": "filesystem",
            "filesystemId": fs_id if fs_of is None else fs_of(path),
            "path": path,
        }

    def refused(rel: str, rule: str) -> None:
        if rel == ".ctxnb":
            return  # ctxnb's own store, not a file of the workspace
        report.denied += 1
        report.denied_paths.append((rel, rule))

    known_paths = {p[len(prefix) :] for p in cache.entries if p.startswith(prefix)}
    if not known_paths or tip > cache.tx:
        # Files stored since the cache was saved (a tool wrote them, the watcher saw
        # them) are known too, so that their deletion on disk is noticed.
        if tip:
            known_paths |= _stored_paths(
                workspace.store, fs_id, root_str, since_tx=cache.tx if known_paths else 0
            )
        cache.dirty = True  # saved with the new tip: the next run need not look again
    ignores = TreeIgnores(cfg.ignore, use_gitignore=cfg.use_gitignore, root=workspace.root)
    # Only the workspace root: mounts elsewhere are indexed by their own workspace.
    policy = workspace.policy
    home = next((r for r in policy.roots if r == workspace.root), workspace.root)
    # The judgments of names by the last walks (a fresh process would judge each again).
    memo = Judgments.open(workspace.root / ".ctxnb", policy) if policy.roots[0] == home else None
    walk = (
        e
        for e in policy.walk(
            skip=ignores.skip, on_dir=ignores.on_dir, on_refused=refused, judgments=memo
        )
        if e.root is home or e.root == home
    )

    bar: Any = None
    show_bar = _want_progress(progress)

    def tick(n: int = 1) -> None:
        nonlocal bar
        if bar is None and show_bar and (progress or report.files >= _BAR_AFTER):
            from tqdm.auto import tqdm

            # The walk streams, so the total is unknown; the bar counts files.
            bar = tqdm(desc="ctxnb index", unit="file", initial=report.files - n)
        if bar is not None:
            bar.update(n)

    pending: list[tuple[str, os.stat_result, bytes]] = []
    pending_bytes = 0
    now_ns = time.time_ns()

    def flush() -> None:
        nonlocal pending, pending_bytes
        if not pending:
            return
        seen_obs = observe_bytes(
            workspace.store, [(source_of(rel), data) for rel, _, data in pending]
        )
        for (rel, st, _), obs in zip(pending, seen_obs, strict=True):
            setattr(report, obs.action, getattr(report, obs.action) + 1)
            if obs.doc is not None:
                report.changed_paths[rel] = obs.action
                if obs.tx_id is not None and obs.tx_id not in report.transactions:
                    report.transactions.append(obs.tx_id)
            cache.record(prefix + rel, st, obs.source_hash, now_ns)
        pending = []
        pending_bytes = 0

    try:
        lookup, max_bytes = cache.lookup, cfg.max_file_bytes
        for entry in walk:
            rel, st = entry.rel, entry.stat
            seen.add(rel)
            report.files += 1
            report.bytes += st.st_size
            if show_bar:
                tick()
            if st.st_size > max_bytes:
                report.skipped += 1
                continue
            if lookup(prefix + rel, st) is not None:
                report.unchanged += 1
                continue
            try:
                data = entry.read(max_bytes=cfg.max_file_bytes)
            except (OSError, CtxnbError) as e:
                report.errors.append((rel, str(e)))  # unreadable (or swapped) is not deleted
                continue
            report.hashed += 1
            pending.append((rel, st, data))
            pending_bytes += len(data)
            if len(pending) >= cfg.batch_size or pending_bytes >= batch_bytes:
                flush()
        flush()
        gone = _gone(workspace, known_paths - seen, cache, prefix, now_ns)
        if gone:
            obs_gone = observe_bytes(workspace.store, [(source_of(rel), None) for rel in gone])
            for rel, obs in zip(gone, obs_gone, strict=True):
                if obs.action == "deleted":
                    report.deleted += 1
                    report.changed_paths[rel] = "deleted"
                    if obs.tx_id is not None and obs.tx_id not in report.transactions:
                        report.transactions.append(obs.tx_id)
                cache.forget(prefix + rel)
    finally:
        if bar is not None:
            bar.close()
    cache.save(workspace.store_tip() if cache.dirty else tip)
    if memo is not None:
        memo.save()
    report.duration_s = time.perf_counter() - t0
    return report


def _gone(
    workspace: Access, candidates: set[str], cache: StatCache, prefix: str, now_ns: int
) -> list[str]:
    """The known paths that are no longer files ctxnb may read.

    A path the walk did not list may still be a file: an ignored one, or one under an
    ignored directory. It is not deleted (its last version stays), and it stays in the
    cache so that its removal later is noticed; otherwise it would flip between deleted
    and live each time a tool read it and the tree was indexed again. A path that is
    now refused (a link, a denied name) gets a deletion version: its last content is
    no longer what the workspace holds there.
    """
    out = []
    for rel in sorted(candidates):
        try:
            st = workspace.policy.stat(rel)
        except (OSError, CtxnbError):
            out.append(rel)
            continue
        if not stat_mod.S_ISREG(st.st_mode):
            out.append(rel)  # replaced by a directory
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
