"""Watching a session's files: a change on disk becomes a new version at once.

The watcher runs watchfiles in a background thread (so it works inside a Jupyter
kernel), watches the parent directories of the session's watchable files (canonical
host paths, never container-internal ones), and for each change writes a new version
(or a deletion version) and updates the session's metadata. It stops cleanly and is
a context manager.

The file-watch backend is a seam: pass ``backend=`` a callable
``(directories, stop_event) -> iterable of sets of (Change, path)`` to drive the
watcher with scripted events.

Example:
    >>> import tempfile, pathlib
    >>> from watchfiles import Change
    >>> from ctxnb import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.txt").write_text("one\\n")
    >>> s = Workspace.open(root).session("w")
    >>> oid = s.add_path("a.txt")
    >>> _ = (root / "a.txt").write_text("two\\n")
    >>> events = [{(Change.modified, str(root / "a.txt"))}]
    >>> with Watcher(s, backend=lambda dirs, stop: iter(events)) as w:
    ...     w.join(5)
    >>> s.get(oid)["content"]
    'two\\n'
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ..access.observe import observe_bytes
from ..errors import PolicyError

if TYPE_CHECKING:
    from ..access.door import Access
    from ..store.objectstore import ObjectStore

__all__ = ["Watcher"]


class WatchedSession(Protocol):
    """What the watcher needs of a session (a :class:`~ctxnb.session.core.Session`).

    A protocol, so that this module does not import the session (which starts it).
    """

    workspace: Access

    @property
    def store(self) -> ObjectStore: ...

    def watchable_paths(self) -> list[str]: ...

    def get(self, oid: str) -> dict[str, Any]: ...

    def refresh(self, oid: str) -> dict[str, Any] | None: ...

    def notify(self, oid: str, action: str) -> None: ...


Backend = Callable[[list[str], threading.Event], Iterable[set[tuple[Any, str]]]]


def _watchfiles_backend(debounce_ms: int, step_ms: int) -> Backend:
    def run(dirs: list[str], stop: threading.Event) -> Iterable[set[tuple[Any, str]]]:
        from watchfiles import watch

        return watch(
            *dirs,
            stop_event=stop,
            debounce=debounce_ms,
            step=step_ms,
            recursive=False,
            yield_on_timeout=True,
            rust_timeout=500,
            raise_interrupt=False,
        )

    return run


class Watcher:
    """Background watcher of one session's files.

    Args:
        session: the session whose files to watch.
        debounce_ms: watchfiles' debounce: changes within this window form one batch.
        step_ms: how often watchfiles checks for changes within a batch.
        backend: the file-watch backend (see the module docstring).
        on_error: called with an exception raised while handling a change
            (the watcher keeps running); errors are also kept in ``errors``.
    """

    def __init__(
        self,
        session: WatchedSession,
        *,
        debounce_ms: int = 50,
        step_ms: int = 10,
        backend: Backend | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.session = session
        self._backend = backend or _watchfiles_backend(debounce_ms, step_ms)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_error = on_error
        self.errors: list[BaseException] = []
        self.events = 0
        self._dirs: list[str] = []

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _tracked(self) -> dict[str, str]:
        s = self.session
        out = {}
        for path in s.watchable_paths():
            oid = s.workspace.object_id(path)
            out[path] = oid
        return out

    def start(self) -> Watcher:
        if self.running:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ctxnb-watcher", daemon=True)
        self._thread.start()
        return self

    @staticmethod
    def _dirs_of(tracked: dict[str, str]) -> dict[str, tuple[int, int]]:
        """The tracked files' directories that exist, each with its identity (device,
        inode): a directory removed and made again under the same name is another
        directory, whose changes the old watch never sees."""
        out: dict[str, tuple[int, int]] = {}
        for d in sorted({os.path.dirname(p) for p in tracked}):
            try:
                st = os.stat(d)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                out[d] = (st.st_dev, st.st_ino)
        return out

    def _run(self) -> None:
        watched: dict[str, tuple[int, int]] | None = None
        while not self._stop.is_set():
            tracked = self._tracked()
            found = self._dirs_of(tracked)
            if watched is not None:
                # A directory that appeared, or was made again, (or a file the session
                # gained there) since the last start: whatever was written before
                # watching began is caught up.
                fresh = {d for d, ident in found.items() if watched.get(d) != ident}
                if fresh:
                    changed = {(None, p) for p in tracked if os.path.dirname(p) in fresh}
                    self._handle(changed, tracked)
            watched = found
            dirs = list(found)
            self._dirs = dirs
            if not dirs:
                if self._stop.wait(0.2):
                    return
                continue
            restart = False
            for changes in self._backend(dirs, self._stop):
                if self._stop.is_set():
                    return
                if changes:
                    self._handle(changes, tracked)
                # A watched directory's own event (removed, perhaps made again at once,
                # often with its inode number reused): the watch on it is gone, so it is
                # watched afresh and its files are caught up.
                moved = {path for _, path in changes if path in found}
                if moved:
                    watched = {d: i for d, i in found.items() if d not in moved}
                    restart = True
                    break
                # Every batch, and every empty batch on timeout: the session may have
                # gained files, possibly in directories created after the start.
                tracked = self._tracked()
                if self._dirs_of(tracked) != found:
                    restart = True
                    break
            if not restart:
                return  # the backend ended (scripted events, or stopped)

    def _handle(self, changes: set[tuple[Any, str]], tracked: dict[str, str]) -> None:
        s = self.session
        for _, path in sorted(changes, key=lambda c: c[1]):
            oid = tracked.get(path)
            if oid is None:
                continue
            try:
                src = s.get(oid)["source"]
                try:
                    # Through the path policy: a file swapped for a link (or now
                    # denied) is not read; its last version stays.
                    data = s.workspace.read(path)
                except PolicyError:
                    continue
                res = observe_bytes(s.store, [(src, data)])[0]
                if res.action != "unchanged":
                    s.refresh(oid)
                    self.events += 1
                    s.notify(oid, res.action)
            except Exception as e:  # keep watching; report the failure
                self.errors.append(e)
                if self._on_error is not None:
                    self._on_error(e)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and wait for the thread to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the watcher thread to end (scripted backends end on their own)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Watcher {state} dirs={len(self._dirs)} events={self.events}>"
