"""A workspace: one directory tree, its settings, its resolver and its object store.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "main.py").write_text("print('hi')\\n")
    >>> ws = Workspace.open(root)
    >>> ws.index().created
    1
    >>> [v.doc["content"] for v in ws.history("main.py")]
    ["print('hi')\\n"]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .access.door import Access
from .config import CtxnbConfig, load_config
from .errors import NotFoundError
from .resolver import FilesystemResolver, MountMapping, default_filesystem_id

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from .govern.approval import Approver
    from .govern.authors import AuthoredVersion
    from .govern.why import WhyResult
    from .indexer import IndexReport
    from .session.core import Session
    from .store.objectstore import ObjectStore
    from .tools.filetools import FileTools

__all__ = ["Workspace"]


class Workspace(Access):
    """A directory tree that ctxnb indexes, versions and governs.

    Use :meth:`open` rather than the constructor. The paths, the policies and
    :meth:`~ctxnb.access.door.Access.observe` come from :class:`~ctxnb.access.Access`.

    Attributes:
        root: the absolute, symlink-free path of the tree.
        config: the settings from ``ctxnb.toml`` / ``[tool.ctxnb]`` (defaults otherwise).
        resolver: agent paths to sources and back.
        store: the versioned object store in ``<root>/.ctxnb/store``.
    """

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        mounts: Sequence[MountMapping] | None = None,
        config: CtxnbConfig | None = None,
        store: ObjectStore | None = None,
    ) -> Workspace:
        """Open the workspace at ``path`` (its store, ``.ctxnb/store``, is opened, and
        created if missing, when first used).

        Args:
            path: the workspace directory; it must exist.
            mounts: the agent's mount mappings; added to those of the config file.
            config: settings to use instead of reading ``ctxnb.toml``.
            store: an object store to use instead of ``<root>/.ctxnb/store`` (which is
                opened when first used: an index that finds nothing changed reads only
                its log).

        Raises:
            NotFoundError: when the directory does not exist.
            ConfigError: when its settings are invalid.
        """
        p = Path(path).expanduser()
        if not p.is_dir():
            raise NotFoundError(
                f"workspace directory {str(p)!r} does not exist; create it or pass another path"
            )
        root = p.resolve()
        cfg = config if config is not None else load_config(root)
        fs = default_filesystem_id()
        all_mounts = [
            MountMapping(m.agent_prefix, m.canonical_prefix, m.filesystem_id or fs)
            for m in cfg.mounts
        ]
        all_mounts.extend(mounts or ())
        resolver = FilesystemResolver(fs, all_mounts)
        return cls(
            root,
            config=cfg,
            resolver=resolver,
            store=store,
            store_dir=root / ".ctxnb" / "store",
        )

    # -- indexing and history -----------------------------------------------------------
    def index(self, *, progress: bool | None = None, settle: bool = True) -> IndexReport:
        """Index the whole tree (see :func:`ctxnb.indexer.index_tree`).

        Args:
            progress: show a progress bar (None: when a terminal or notebook shows it).
            settle: then fold and, when due, compact the store (:meth:`settle_store`);
                False leaves that to the caller (the command line prints its summary
                first, since a compaction of a large index takes seconds).
        """
        from .indexer import index_tree

        report = index_tree(self, progress=progress)
        if settle:
            self.settle_store()
        return report

    def settle_store(self) -> None:
        """Compact the store when more than ``[index] compact_after`` transactions wait,
        and fold inline transactions into Parquet; from the log alone, without opening
        the store, when nothing waits.

        Example:
            >>> import pathlib, tempfile
            >>> root = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (root / "a.py").write_text("x = 1\\n")
            >>> ws = Workspace.open(root)
            >>> ws.index(settle=False).created
            1
            >>> ws.settle_store()  # one transaction: folded, not worth a compaction
            >>> ws.store.pending_segments()
            1
        """
        threshold = self.config.index.compact_after
        if not self.store_is_open:
            from .store._tip import read_tip

            # Nothing was written: the log says whether anything waits (another process's
            # commits), and the store is opened only then. A count the log's tail cannot
            # tell (None) or a log it cannot read opens the store, which then decides.
            tip = read_tip(self.store_dir)
            if tip is not None and tip.unfolded == 0:
                if tip.uncompacted is not None and tip.uncompacted <= threshold:
                    return
        # Every scan and every open reads each transaction not yet compacted; indexing
        # is the natural moment to fold them into the snapshot.
        self.store.maybe_compact(threshold)
        # ... and after it every version is in a Parquet file outside readers see.
        self.store.fold()

    def get(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """The latest stored version of a file.

        Raises:
            NotFoundError: when the file was never indexed.
        """
        doc = self.store.get(self.object_id(path))
        if doc is None:
            raise NotFoundError(
                f"{os.fspath(path)!r} has no stored version; run ws.index() or `ctxnb index`"
            )
        return doc

    def history(self, path: str | os.PathLike[str]) -> list[AuthoredVersion]:
        """Every stored version of a file, oldest first, each with who wrote it.

        A version's ``author`` is the caller of the Agent Trace record of its change
        (``caller`` and ``contributor`` as the record gives them), ``index`` for a
        first version no record names, ``outside edit`` for a later one; see
        :mod:`ctxnb.govern.authors`.

        Example:
            >>> import pathlib, tempfile
            >>> root = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (root / "a.py").write_text("x = 1\\n")
            >>> ws = Workspace.open(root)
            >>> _ = ws.index()
            >>> _ = (root / "a.py").write_text("x = 2\\n")
            >>> _ = ws.index()
            >>> [v.author for v in ws.history("a.py")]
            ['index', 'outside edit']
        """
        from .govern.authors import authored_history

        return authored_history(self, path)

    def why(
        self, path: str | os.PathLike[str], line: int | None = None, *, context: bool = True
    ) -> WhyResult:
        """Which Agent Trace record wrote each line of a file (or one line), and why.

        The contributor, intent, tool, mutation class, approval, session and turn of
        the change, and the context the model had then, rebuilt from the store. Lines
        are matched to records by content, so the answer survives edits and history
        rewrites; see :mod:`ctxnb.govern.why`.

        Args:
            path: the file, relative to the workspace or absolute.
            line: one 1-based line; every line of the file when None.
            context: rebuild each record's context from the store.

        Raises:
            NotFoundError: the workspace is not governed, no such file, no such line.
            PolicyError: the path is refused.

        Example:
            >>> import pathlib, tempfile
            >>> from ctxnb.govern import init_governance
            >>> root = pathlib.Path(tempfile.mkdtemp())
            >>> _ = init_governance(root)
            >>> _ = (root / "a.py").write_text("x = 1\\n")
            >>> print(Workspace.open(root).why("a.py", 1))  # doctest: +NORMALIZE_WHITESPACE
            a.py:1: x = 1
              no trace record wrote this line (written outside a recorded
              change, or changed since by someone no record names)
        """
        from .govern.why import why

        return why(self, os.fspath(path), line, context=context)

    # -- sessions ---------------------------------------------------------------------------
    def session(
        self,
        session_id: str | None = None,
        *,
        system_prompt: str | None = None,
        token_counter: Any = None,
        watch: bool = False,
        rules: bool = True,
        excerpts: bool | None = None,
    ) -> Session:
        """Create a session, or resume the stored one with this id.

        Resuming restores the sets, re-indexes every accessible file of the session
        (changed: a new version; gone: a deletion version; not reachable: orphaned)
        and, with ``watch=True``, watches the session's files for changes.

        Args:
            session_id: the id; a new UUID when omitted.
            system_prompt: the system prompt (a new version when it differs on resume).
            token_counter: a :class:`~ctxnb.llm.tokens.TokenCounter`, a callable or a name.
            watch: start the background file watcher.
            rules: follow the workspace's rules files (:func:`~ctxnb.instructions.follow_rules`):
                the root ``AGENTS.md`` pinned in every context, linked docs loaded on a
                matching user turn or tool query, nested ``AGENTS.md`` files when the agent
                touches their subtree. ``False`` leaves rules out of this session.
            excerpts: a new session pins shaped excerpts of the README and the package
                manifest before the chat, within ``[rules] startup_tokens``
                (:mod:`ctxnb.session.excerpts`); by default when ``rules`` is on.

        Example:
            >>> import pathlib, tempfile
            >>> root = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (root / "AGENTS.md").write_text("Run the tests with make test.\\n")
            >>> ws = Workspace.open(root)
            >>> "make test" in ws.session("s").assemble().to_text()
            True
            >>> "make test" in ws.session("bare", rules=False).assemble().to_text()
            False
        """
        from .session.core import open_session

        session = open_session(
            self,
            session_id,
            system_prompt=system_prompt,
            token_counter=token_counter,
            watch=watch,
        )
        if rules:
            from .instructions.tracker import follow_rules

            follow_rules(session)
        else:
            session.rules_off = True
        if (rules if excerpts is None else excerpts) and session.last_resume is None:
            # Only a new session: a resumed one holds the excerpts it started with, and
            # its earlier contexts must rebuild as they were.
            from .session.excerpts import preload_excerpts

            preload_excerpts(session, self.config.rules.startup_tokens)
        return session

    def tools(
        self,
        session: Session,
        *,
        caller: str = "agent",
        profile: str | None = None,
        approver: Approver | None = None,
        clock: Callable[[], datetime] | None = None,
        rules: bool = True,
        **kwargs: Any,
    ) -> FileTools:
        """The file tools of ``session``, governed when the workspace has ``.orchestration/``.

        Args:
            session: the session that records every call.
            caller: who calls (an agent name), for the audit log and the trace.
            profile: ``local`` or ``cloud`` (or one from ``ctxnb.toml``).
            approver: who decides destructive acts in a governed workspace (an
                :class:`~ctxnb.govern.approval.Approver`: the notebook panel, a queue, a
                callback); without one they are refused. Unused when not governed.
            clock: returns the current time, timezone-aware (audit lines, trace records,
                lessons); a seam for tests. ``datetime.now(UTC)`` by default.
            rules: follow the rules files in ``session`` when it does not yet (a session
                opened with ``rules=False`` stays without); see :meth:`session`.
            **kwargs: passed on to :class:`~ctxnb.tools.filetools.FileTools` (``policy``,
                ``summarizer``, ``search_backend`` …) or, governed, to the engine
                (``model_id``).

        Example:
            >>> import pathlib, tempfile
            >>> from datetime import UTC, datetime
            >>> ws = Workspace.open(tempfile.mkdtemp())
            >>> fixed = lambda: datetime(2030, 1, 2, tzinfo=UTC)
            >>> tools = ws.tools(ws.session("s"), caller="docs", clock=fixed)
            >>> _ = tools.dispatch("list_files", {})
            >>> tools.audit()["ts"].iloc[-1].isoformat()
            '2030-01-02T00:00:00+00:00'
        """
        from .tools.filetools import FileTools

        if rules and not session.rules_off:
            from .instructions.tracker import follow_rules

            follow_rules(session)
        if (self.root / ".orchestration").is_dir():
            from .govern.engine import governed_tools

            return governed_tools(
                self,
                session,
                caller=caller,
                profile=profile,
                approver=approver,
                clock=clock,
                **kwargs,
            )
        return FileTools(self, session, caller=caller, profile=profile, clock=clock, **kwargs)

    def close(self) -> None:
        if self.store_is_open:
            self.store.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Workspace {str(self.root)!r}>"
