"""The workspace as its lower layers see it: one door to its files.

:class:`Access` holds a workspace's root, settings, resolver and store, and the two path
policies built from its settings: :attr:`Access.policy` for ctxnb's own reads (the
indexer, sessions, resume, the watcher, the rules tracker, skills) and
:attr:`Access.agent_policy` for every agent-facing tool, which also refuses
governance's files (:data:`~ctxnb.access.pathrules.GOVERNANCE`) and writes to what runs
on the host (:attr:`Access.protected`, :mod:`ctxnb.access.protected`). Every read goes through
the race-free descriptor walk; every "changed? write a version" through
:meth:`Access.observe` (:func:`~ctxnb.access.observe.observe_bytes`).

:class:`~ctxnb.workspace.Workspace` is an :class:`Access` with the user-facing methods
on top (index, sessions, tools); modules below it take an :class:`Access`, so nothing
imports upward.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1\\n")
    >>> _ = (root / ".env").write_text("TOKEN=1\\n")
    >>> ws = Workspace.open(root)
    >>> [o.action for o in ws.observe(["a.py", "a.py"])]
    ['created', 'unchanged']
    >>> ws.observe([".env"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ctxnb.errors.PolicyError: Path '.env' is refused: ... (rule: deny:.env*).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ResolverError
from ..hashing import identity_hash
from ..resolver import FilesystemResolver, normalize_path
from .fdio import PathPolicy
from .observe import Observation, observe_bytes
from .pathrules import GOVERNANCE, SafePath, in_agent_terms, map_mount_prefix

if TYPE_CHECKING:
    from ..config import CtxnbConfig
    from ..model import FilesystemSource
    from ..store.objectstore import ObjectStore
    from .protected import ProtectedSet

__all__ = ["Access", "own_roots"]

PathArg = str | os.PathLike[str] | SafePath


def own_roots(root: Path) -> list[Path]:
    """The roots of ctxnb's own reads in a workspace: the root, and its skills folder.

    Skills live under ``.ctxnb/`` (denied), and ctxnb loads them on purpose: their
    folder is a root of its own, unless it or ``.ctxnb`` is a symbolic link.
    """
    roots = [root]
    skills = root / ".ctxnb" / "skills"
    if skills.is_dir() and not skills.is_symlink() and not skills.parent.is_symlink():
        roots.append(skills)
    return roots


class Access:
    """A workspace's root, settings, resolver, store and its one door to the files.

    Args:
        root: the absolute, symlink-free path of the tree.
        config: the workspace's settings.
        resolver: agent paths to sources and back.
        store: the versioned object store; None opens the one in ``store_dir`` when it
            is first used (see :attr:`store`).
        store_dir: where the store lives when ``store`` is None.
    """

    def __init__(
        self,
        root: Path,
        *,
        config: CtxnbConfig,
        resolver: FilesystemResolver,
        store: ObjectStore | None = None,
        store_dir: Path | None = None,
    ) -> None:
        self.root = root
        self.config = config
        self.resolver = resolver
        if store is not None:
            self.__dict__["store"] = store
            store_dir = store.path
        elif store_dir is None:
            raise TypeError("Access needs a store or a store_dir")
        self.store_dir: Path = store_dir
        # Where a process that serves one call of a longer session (Claude Code's Bash
        # through `ctxnb sandbox exec`) finds the session's derived protected set, cached
        # by the files it came from; None derives it here.
        self.protected_cache: Path | None = None

    # -- the store ----------------------------------------------------------------------
    @cached_property
    def store(self) -> ObjectStore:
        """The versioned object store, opened (and created) on first use.

        Opening imports pyarrow and reads the store's segments; a caller that only needs
        to know whether anything was committed asks :meth:`store_tip` first.
        """
        from ..store.objectstore import ObjectStore

        return ObjectStore(self.store_dir)

    @property
    def store_is_open(self) -> bool:
        """Whether :attr:`store` was opened (or handed in)."""
        return "store" in self.__dict__

    def store_tip(self) -> int:
        """The id of the store's last committed transaction (0: none yet): from the open
        store, else from its log alone (:func:`~ctxnb.store._tip.read_tip`), else by
        opening it when the log cannot answer (no store yet, another format, damage the
        store reports)."""
        from ..store._tip import read_tip

        if not self.store_is_open:
            tip = read_tip(self.store_dir)
            if tip is not None:
                return tip.tx_id
        latest = self.store.latest_tx()
        return latest.tx_id if latest else 0

    # -- the policies -------------------------------------------------------------------
    @cached_property
    def policy(self) -> PathPolicy:
        """ctxnb's own reads: the deny globs of ``[policy]``; the root, skills, host mounts."""
        roots = own_roots(self.root)
        fs = self.resolver.default_filesystem_id()
        for m in self.resolver.mounts:
            prefix = Path(m.canonical_prefix)
            if m.filesystem_id == fs and prefix.is_dir() and prefix not in roots:
                roots.append(prefix)
        cfg = self.config.policy
        return PathPolicy(roots, deny=cfg.deny, max_path_bytes=cfg.max_path_bytes)

    @cached_property
    def agent_policy(self) -> PathPolicy:
        """Every agent-facing tool: ``[policy]`` allow and deny, governance's files, and
        no write to what runs on the host (:attr:`protected`, derived on the first write)."""
        cfg = self.config.policy
        return PathPolicy(
            [self.root],
            allow=cfg.allow,
            deny=cfg.deny,
            protect=self.governance_globs(),
            protected=lambda: self.protected,
            max_path_bytes=cfg.max_path_bytes,
        )

    @cached_property
    def protected(self) -> ProtectedSet:
        """What runs on the host from this workspace (:mod:`ctxnb.access.protected`):
        derived once, from the real files, the first time it is asked for.

        Raises:
            ConfigError: a file that names what runs cannot be read.
        """
        from .protected import protected_set

        try:
            cwd: str | None = os.getcwd()
        except OSError:  # the current directory was removed: it holds no settings then
            cwd = None
        return protected_set(self.root, env=os.environ, cwd=cwd, state_dir=self.protected_cache)

    def governance_globs(self) -> tuple[str, ...]:
        """:data:`GOVERNANCE`, plus ``pyproject.toml`` when it holds the settings, plus
        the Python environment ctxnb runs in where it lies inside the workspace."""
        from .ownenv import environment_globs

        source = self.config.source or ""
        extra = ("/pyproject.toml",) if source.endswith("[tool.ctxnb]") else ()
        return (*GOVERNANCE, *extra, *environment_globs(self.root))

    # -- paths --------------------------------------------------------------------------
    def abspath(self, path: str | os.PathLike[str]) -> str:
        """The canonical absolute path of a workspace-relative or absolute path."""
        s = os.fspath(path)
        if not s:
            raise ResolverError("empty path")
        full = s if s.startswith("/") else f"{self.root}/{s}"
        return normalize_path(full)

    def relpath(self, canonical_path: str) -> str:
        """The workspace-relative posix path of a canonical path (or it unchanged if outside)."""
        root = str(self.root)
        if canonical_path.startswith(root + "/"):
            return canonical_path[len(root) + 1 :]
        return canonical_path

    def display_path(self, canonical_path: str, filesystem_id: str | None = None) -> str:
        """How a stored file is named toward the agent and in its context: the agent's
        path when a mount covers it, else the workspace-relative path, never the host
        layout (a path outside the workspace stays as it is).

        Example:
            >>> import pathlib, tempfile
            >>> from ctxnb import MountMapping, Workspace
            >>> root = pathlib.Path(tempfile.mkdtemp()).resolve()
            >>> Workspace.open(root).display_path(f"{root}/src/a.py")
            'src/a.py'
            >>> fs = Workspace.open(root).resolver.default_filesystem_id()
            >>> mounted = Workspace.open(root, mounts=[MountMapping("/workspace", str(root), fs)])
            >>> mounted.display_path(f"{root}/src/a.py")
            '/workspace/src/a.py'
        """
        shown = self.resolver.reverse_resolve(canonical_path, filesystem_id)
        if shown != canonical_path:
            return shown
        return self.relpath(shown)

    def source_for(self, path: str | os.PathLike[str]) -> FilesystemSource:
        """The source of a workspace file, by relative or absolute host path: on the
        filesystem of the mount that covers it, if one does (so that the file is one
        object however it is named), else the default one."""
        from ..model import FilesystemSource  # pydantic: only when a source is asked for

        canonical = self.abspath(path)
        return FilesystemSource(
            filesystem_id=self.resolver.filesystem_of(canonical), path=canonical
        )

    def object_id(self, path: str | os.PathLike[str]) -> str:
        """The object id of the file at ``path`` (whether or not it is stored yet)."""
        # A governed write asks for it three times; it depends on the path and the
        # mounts alone.
        key = os.fspath(path)
        memo: tuple[object, dict[str, str]] | None = self.__dict__.get("_oid_memo")
        if memo is None or memo[0] is not self.resolver or len(memo[1]) > 4096:
            memo = self.__dict__["_oid_memo"] = (self.resolver, {})
        ids = memo[1]
        found = ids.get(key)
        if found is None:
            found = ids[key] = identity_hash("file", self.source_for(path).to_dict())
        return found

    def host_path(self, agent_path: Any) -> Any:
        """An agent's path with its mount prefix replaced by the host directory.

        Only the prefix is rewritten, on whole components and without normalizing, so
        ``..`` and the like stay for the path policy to refuse. Relative paths, paths
        no mount covers and non-strings come back unchanged.

        Example:
            >>> import pathlib, tempfile
            >>> from ctxnb import MountMapping, Workspace
            >>> root = pathlib.Path(tempfile.mkdtemp()).resolve()
            >>> ws = Workspace.open(root, mounts=[MountMapping("/workspace", str(root), "x")])
            >>> ws.host_path("/workspace/src/a.py") == f"{root}/src/a.py"
            True
            >>> ws.host_path("src/a.py")
            'src/a.py'
        """
        if not isinstance(agent_path, str) or not agent_path.startswith("/"):
            return agent_path
        return map_mount_prefix(
            agent_path, [(m.agent_prefix, m.canonical_prefix) for m in self.resolver.mounts]
        )

    def agent_root(self) -> str | None:
        """The workspace root as the agent names it (``/workspace``) when a mount covers
        it, else None (the agent sees the host's paths). Commands run there
        (:mod:`ctxnb.sandbox`).

        Example:
            >>> import pathlib, tempfile
            >>> from ctxnb import MountMapping, Workspace
            >>> root = pathlib.Path(tempfile.mkdtemp()).resolve()
            >>> fs = Workspace.open(root).resolver.default_filesystem_id()
            >>> mounted = Workspace.open(root, mounts=[MountMapping("/workspace", str(root), fs)])
            >>> mounted.agent_root()
            '/workspace'
            >>> Workspace.open(root).agent_root() is None
            True
        """
        resolver = self.resolver
        if not resolver.mounts:
            return None
        root = str(self.root)
        shown = resolver.reverse_resolve(root, resolver.filesystem_of(root))
        return shown if shown != root and shown.startswith("/") else None

    def in_agent_terms(self, value: Any) -> Any:
        """``value`` with every host directory of the mounts named by its agent path,
        in every string at any depth (see :func:`~ctxnb.access.pathrules.in_agent_terms`);
        unchanged without mounts."""
        mounts = self.resolver.mounts
        if not mounts:
            return value
        pairs = [(m.agent_prefix, m.canonical_prefix) for m in mounts]
        # The root as the resolver sees it (symlinks resolved) may differ from the
        # prefix as configured: both name the same directory.
        at = self.agent_root()
        if at is not None:
            pairs.append((at, str(self.root)))
        return in_agent_terms(value, pairs)

    # -- reading and observing ----------------------------------------------------------
    def read(self, path: PathArg, *, max_bytes: int | None = None) -> bytes | None:
        """A file's bytes through :attr:`policy`, or None when there is no such file.

        Raises:
            PolicyError: the path is refused (denied, a symbolic link, outside the roots).
        """
        try:
            return self.policy.read_bytes(path, max_bytes=max_bytes)
        except NotFoundError:
            return None

    def observe(
        self,
        paths: Iterable[PathArg],
        *,
        data: Sequence[bytes | None] | None = None,
        attached: Sequence[bytes] | None = None,
        durable_waits: list[Callable[[], None]] | None = None,
        walked: bool = False,
    ) -> list[Observation]:
        """Read files through :attr:`policy` and write a version of each one that changed.

        Args:
            paths: workspace-relative or absolute paths (or :class:`SafePath`).
            data: the bytes the caller already read through a policy, one per path
                (``None``: gone); when omitted, each file is read here.
            attached: trace records to commit with the versions, in the same log line
                (see :func:`~ctxnb.access.observe.observe_bytes`).
            durable_waits: the log line's fsync runs in the background and its wait is
                appended here (see :meth:`ctxnb.store.ObjectStore.put`).
            walked: ``data`` was read, written or deleted through a policy's descriptor
                walk in this same call, which refused links and special files without a
                race: the paths pass :attr:`policy`'s rules by name only
                (:meth:`~ctxnb.access.fdio.PathPolicy.check_name`), with no second look.

        Returns:
            One :class:`~ctxnb.access.observe.Observation` per path; a file that is
            gone and was never stored has action ``unchanged`` and ``tx_id`` None.

        Raises:
            PolicyError: a path is refused; nothing is written then.
        """
        items = []
        listed = list(paths)
        if data is not None and len(data) != len(listed):
            raise ValueError("observe() needs one data item per path")
        check = self.policy.check_name if walked and data is not None else self.policy.check
        for i, path in enumerate(listed):
            safe = check(path)
            raw = data[i] if data is not None else self.read(safe)
            items.append((self.source_for(str(safe.abs)), raw))
        return observe_bytes(self.store, items, attached=attached, durable_waits=durable_waits)
