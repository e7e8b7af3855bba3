"""The race-free I/O half of the path policy: every open is a descriptor walk.

:class:`PathPolicy` adds file operations to :class:`~ctxnb.access.pathrules.PathRules`.
It answers *how to touch a path without a race*: every open walks the path one
component at a time from an open descriptor of the root, never by name from the top.
A policy *is* its rules (every check of a name is theirs) and *has* a walk
(:class:`~ctxnb.access._fdwalk.FdWalk`, given the rules): this module holds the public
operations, which compose the walk's steps.
Directory walks (:meth:`PathPolicy.walk`) work the same way, so the indexer and the
search never follow a directory swapped for a symbolic link while they run.

Example:
    >>> import pathlib, tempfile
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> policy = PathPolicy([ws])
    >>> policy.write_bytes_atomic("notes/todo.txt", b"ship it", make_parents=True).rel
    'notes/todo.txt'
    >>> policy.read_bytes("notes/todo.txt")
    b'ship it'
    >>> policy.is_allowed(".env"), policy.is_allowed("../etc/passwd")
    (False, False)

I/O rules (after the lexical ones of :mod:`ctxnb.access.pathrules`):

* ``symlink``: ctxnb follows no symbolic link below a root, not even one that stays
  inside it. Go's ``os.Root`` follows in-root links while resolution never leaves the
  root; ctxnb is stricter because an in-root link makes one file reachable under two
  names, and ``ok -> .git`` would walk straight past the deny globs. The root itself is
  resolved once, with ``os.path.realpath``, when the policy is made.
* ``special-file``: FIFOs, sockets and device nodes are never opened (a FIFO would
  block a reader forever; a device open can have side effects). ``not-a-regular-file``
  refuses a directory where a file is needed; ``trailing-slash`` a file named with a
  trailing ``/``.

Check and open do not race. :meth:`PathPolicy.check` is advice for early, clear
messages; the file operations do not trust it. Each of them opens the root with
``O_DIRECTORY | O_NOFOLLOW``, then every intermediate directory with ``openat`` and
``O_DIRECTORY | O_NOFOLLOW`` relative to the previous descriptor, then looks at the last
name with ``fstatat(AT_SYMLINK_NOFOLLOW)`` and opens it with ``O_NOFOLLOW | O_NONBLOCK``,
checking ``S_ISREG`` with ``fstat`` on the open descriptor. A directory swapped for a
symbolic link after the check therefore fails the walk instead of leading outside, and
a FIFO swapped in cannot block. Writes go to a temporary file created with ``O_EXCL``
in the target's own directory (through that directory's descriptor), are fsynced, and
replace the target with ``renameat``, which replaces a directory entry and never
follows a link there; the directory is fsynced afterwards. Linux's ``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` would do the walk in one call, but Python
does not expose it.

Prior art. The reference MCP filesystem server (``modelcontextprotocol/servers``,
``src/filesystem``) had two 2025 advisories: CVE-2025-53110, a string-prefix check
that let ``/allowed_evil`` pass for the allowed directory ``/allowed``, and
CVE-2025-53109, a symbolic link inside an allowed directory that led reads and writes
outside it. Its fix validates real paths, which is still check-then-open-by-name; here
containment is enforced by the descriptor walk itself. Go's ``os.Root`` (Go 1.24) works
the same way with descriptors.

* ``identity:<denied path>``: a regular file that is a hard link of a denied file (the
  same ``st_dev`` and ``st_ino``) is refused as that file is, to every operation and
  in every walk; judged on the ``fstat`` of the very descriptor read (see
  :mod:`ctxnb.access.identity`). A ctxnb write replaces a name and never modifies the
  other links of an inode.

Out of scope, by design: mount points inside a root, changes an outside process makes
to the directories above a root, and Windows (``O_NOFOLLOW`` and ``dir_fd`` are POSIX).
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from ..errors import NotFoundError, PolicyError
from ._fdwalk import (
    FdWalk,
    FileEntry,
    PathKind,
    WriteMode,
    _close_all,
    _unlink_quiet,
)
from .pathrules import PathRules, SafePath, _build_spec, _deny, _Parsed, _short

if TYPE_CHECKING:
    from ._judgments import Judgments

__all__ = ["FileEntry", "PathKind", "PathPolicy"]


class PathPolicy(PathRules):
    """Decides which paths a governed tool may touch, and touches them without races.

    Takes the arguments of :class:`~ctxnb.access.pathrules.PathRules`.

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb.access.pathrules import DEFAULT_DENY
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> policy = PathPolicy([ws], allow=["src/**/*.py"], deny=[*DEFAULT_DENY, "*.lock"])
        >>> policy.is_allowed("src/app.py"), policy.is_allowed("README.md")
        (True, False)
    """

    @cached_property
    def _walk(self) -> FdWalk:
        """The descriptor walk over these rules (made on the first file operation)."""
        return FdWalk(self)

    def check(
        self, path: str | os.PathLike[str] | SafePath, *, for_write: bool = False
    ) -> SafePath:
        """Validate a path and look at what is there now, without following links.

        A missing file (or missing parent directories) passes: reading it will raise
        ``NotFoundError`` and writing it may create it. What exists must be a regular
        file or a directory reached without symbolic links. The file operations repeat
        the walk themselves; ``check`` only gives an early, clear answer.

        Args:
            path: relative to the first root, or absolute inside a root.
            for_write: also refuse the root itself, directories and a trailing ``/``.

        Returns:
            The normalized :class:`SafePath`.

        Raises:
            PolicyError: ``PATH_DENIED``, naming the path and the rule.

        Example:
            >>> import pathlib, tempfile
            >>> policy = PathPolicy([pathlib.Path(tempfile.mkdtemp())])
            >>> policy.check("./src//main.py").rel
            'src/main.py'
        """
        return self.check_kind(path, for_write=for_write)[0]

    def check_kind(
        self, path: str | os.PathLike[str] | SafePath, *, for_write: bool = False
    ) -> tuple[SafePath, PathKind]:
        """:meth:`check`, and what its look found: ``"missing"``, ``"file"`` or ``"dir"``.

        The kind is what was there when it looked: a caller may answer "does it exist"
        from it within the same call (sparing a second walk), never trust it for I/O.
        """
        p = self._parse(path)
        if for_write:
            self._require_file_name(p)
            self._check_protected(p)
        kind = self._walk.probe(p)
        if kind == "dir":
            if for_write:
                _deny(p.display, "not-a-regular-file", "it is a directory")
        else:
            if p.dir_form and kind == "file":
                _deny(p.display, "trailing-slash", "it is a file, not a directory")
            if p.parts:
                self.check_allow(p)
        return p.safe, kind

    def check_name(self, path: str | os.PathLike[str] | SafePath) -> SafePath:
        """:meth:`check` without the look at the disk: the lexical rules and the allow
        globs, as for a path with nothing there. For a path whose bytes the caller has
        just read or written through a policy's own walk (which looked, race-free)."""
        p = self._parse(path)
        self.check_allow(p)
        return p.safe

    def is_allowed(self, path: str | os.PathLike[str] | SafePath) -> bool:
        """Whether :meth:`check` accepts ``path`` for reading.

        Example:
            >>> import pathlib, tempfile
            >>> policy = PathPolicy([pathlib.Path(tempfile.mkdtemp())])
            >>> policy.is_allowed("src/app.py"), policy.is_allowed(".git/config")
            (True, False)
        """
        try:
            self.check(path)
        except PolicyError:
            return False
        return True

    def denied_by_identity(self, st: os.stat_result) -> str | None:
        """The rule refusing the regular file whose ``lstat`` (or ``fstat``) is ``st``
        as a hard link of a denied file (``identity:<denied path>``), or None.

        For a caller that lists files by other means (ripgrep's ``--files``) and must
        refuse what the descriptor walk would. A file with one link is never one.

        Example:
            >>> import os, pathlib, tempfile
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (ws / ".env").write_text("TOKEN=1\\n")
            >>> os.link(ws / ".env", ws / "notes.txt")
            >>> PathPolicy([ws]).denied_by_identity(os.lstat(ws / "notes.txt"))
            'identity:.env'
        """
        return self._walk.identity_rule(st, time.time_ns())

    def read_bytes(
        self, path: str | os.PathLike[str] | SafePath, *, max_bytes: int | None = None
    ) -> bytes:
        """Read a regular file through the race-free walk.

        Args:
            path: the file.
            max_bytes: refuse files larger than this instead of reading them.

        Raises:
            PolicyError: ``PATH_DENIED``; ``FILE_TOO_LARGE`` when ``max_bytes`` is exceeded.
            NotFoundError: no such file.

        Example:
            >>> import pathlib, tempfile
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (ws / "a.txt").write_bytes(b"hello")
            >>> PathPolicy([ws]).read_bytes("a.txt")
            b'hello'
        """
        began = time.time_ns()
        p = self._parse(path)
        self._require_file_name(p)
        self.check_allow(p)
        parent = self._walk.open_parent(p)
        try:
            fd, st = self._walk.open_regular(parent, p)
        finally:
            os.close(parent)
        try:
            if st.st_nlink > 1:
                self._walk.refuse_identity(st, p, began)  # the file open here, by its fstat
            return self._walk.read_fd(fd, p, max_bytes, st.st_size)
        finally:
            os.close(fd)

    def stat(self, path: str | os.PathLike[str] | SafePath) -> os.stat_result:
        """``lstat`` a file or directory through the walk; links and special files refused.

        Raises:
            PolicyError: ``PATH_DENIED``.
            NotFoundError: nothing there.

        Example:
            >>> import pathlib, tempfile
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (ws / "a.txt").write_bytes(b"hello")
            >>> PathPolicy([ws]).stat("a.txt").st_size
            5
        """
        p = self._parse(path)
        if not p.parts:
            fd = self._walk.open_root(p)
            try:
                return os.fstat(fd)
            finally:
                os.close(fd)
        parent = self._walk.open_parent(p)
        try:
            st = self._walk.lstat_at(parent, p)
        finally:
            os.close(parent)
        if st is None:
            raise NotFoundError(f"Nothing at {_short(p.display)!r} in {p.root.real}.")
        self._walk.require_plain(st, p, allow_dir=True)
        if stat_mod.S_ISREG(st.st_mode):
            if p.dir_form:
                _deny(p.display, "trailing-slash", "it is a file, not a directory")
            self.check_allow(p)
            self._walk.refuse_identity(st, p, time.time_ns())
        return st

    def stat_many(self, paths: Sequence[str]) -> list[os.stat_result | NotFoundError | PolicyError]:
        """:meth:`stat` of many paths, each parent directory walked to once.

        The answer for each path is what :meth:`stat` returns or raises, in order:
        the same rules, the same descriptor walk (``O_NOFOLLOW`` from the root at
        every step), the same ``lstat``; the files of one directory share its walk.

        Example:
            >>> import pathlib, tempfile
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (ws / "a.txt").write_bytes(b"hello")
            >>> [getattr(r, "st_size", type(r).__name__)
            ...  for r in PathPolicy([ws]).stat_many(["a.txt", "gone.txt", ".env"])]
            [5, 'NotFoundError', 'PolicyError']
        """
        began = time.time_ns()
        out: list[os.stat_result | NotFoundError | PolicyError | None] = [None] * len(paths)
        # Keyed by the root's identity (one of this policy's own, alive as long as it
        # is) and the parent's names: hashing a Path per file would cost more.
        groups: dict[tuple[int, tuple[str, ...]], list[tuple[int, _Parsed]]] = {}
        allow = self._allow_spec is not None
        parse = self._parse
        for i, path in enumerate(paths):
            try:
                p = parse(path)
            except PolicyError as e:
                out[i] = e
                continue
            if p.parts:
                key = (id(p.root), p.parts[:-1])
                group = groups.get(key)
                if group is None:
                    groups[key] = group = []
                group.append((i, p))
            else:
                out[i] = self._stat_one(path)
        # Directories in order of their names, so that each one is opened once, from
        # its parent's descriptor (O_NOFOLLOW), while the parent is still open.
        opened: list[tuple[tuple[str, ...], int]] = []  # the open chain below a root
        root_id = None
        try:
            for (rid, dparts), items in sorted(groups.items(), key=lambda kv: kv[0]):
                if rid != root_id:
                    _close_all(opened)
                    root_id = rid
                fd = self._walk.enter(opened, dparts, items[0][1])
                if fd is None:  # a parent is missing or refused: each path says how
                    for i, _ in items:
                        out[i] = self._stat_one(paths[i])
                    continue
                for i, p in items:
                    out[i] = self._walk.stat_in(fd, p, allow, began)
        finally:
            _close_all(opened)
        return out  # type: ignore[return-value]  # every slot was filled

    def _stat_one(self, path: str) -> os.stat_result | NotFoundError | PolicyError:
        try:
            return self.stat(path)
        except (NotFoundError, PolicyError) as e:
            return e

    def write_bytes_atomic(
        self,
        path: str | os.PathLike[str] | SafePath,
        data: bytes,
        *,
        mode: WriteMode = "truncate",
        make_parents: bool = False,
        durable_waits: list[Callable[[], None]] | None = None,
        check_replaced: bool = False,
        expected_sha256: str | None = None,
        new_file_mode: int | None = None,
        while_syncing: Callable[[], object] | None = None,
        before_replace: Callable[[], object] | None = None,
    ) -> SafePath:
        """Replace (or create) a file so that readers see all-old or all-new content.

        The data goes to a ``.ctxnb-tmp-*`` file in the same directory, is fsynced, and
        is renamed over the target; then the directory is fsynced. An existing file keeps
        its permission bits (``0o777`` part; set-id bits are dropped) and, where the
        process may, its owner.

        Args:
            path: the file.
            data: the new bytes (for ``"append"``, the bytes to add).
            mode: ``"truncate"`` replaces or creates; ``"create"`` refuses an existing
                file (``FILE_EXISTS``), race-free, via ``link``; ``"append"`` writes old
                content plus ``data`` as one atomic replacement (a concurrent writer's
                change made between the read and the rename is lost; use the
                optimistic lock of the governance layer against that).
            make_parents: create missing parent directories.
            durable_waits: when given, the directory's fsync (which makes the rename
                durable) runs on a background thread and a function that waits for it
                is appended here: the caller does its next work meanwhile and calls it
                before it reports the write as done. The file's own data is fsynced
                before the rename either way.
            check_replaced: right before the rename, check the file being replaced
                again: the same file as when the write began (inode, size, mtime), with
                the content ``expected_sha256`` (when given), or still no file if there
                was none. Where Linux allows, the new file is swapped in and the one it
                displaced is checked too, so a save landing in between is put back; a
                read lease held from the check to the swap also catches a program
                writing in place through a descriptor (see ``ctxnb.access._replace``).
            expected_sha256: the SHA-256 of the content the new bytes were computed from;
                with ``check_replaced``, None means they were computed for a new file.
            new_file_mode: the permission bits (``0o777`` part) of a file that did not
                exist, minus the umask, given when the temporary file is created (no path
                is followed to set them); an existing file keeps its own.
            while_syncing: work to do while the temporary file's data is fsynced (on
                the fsync thread); the rename waits for both. If it raises, nothing is
                written and its error is raised.
            before_replace: what must be durable before the new content is visible (a
                governed write's store version and trace record): called once the new
                bytes are durable under the temporary name and, with ``check_replaced``,
                the file to replace has been checked; the rename follows only when it
                returns. If it raises, the temporary file is removed, the file is left
                as it was, and its error is raised.

        Returns:
            The :class:`SafePath` written.

        Raises:
            PolicyError: ``PATH_DENIED``, or ``FILE_EXISTS`` for ``mode="create"``.
            StaleFileError: ``check_replaced`` found the file changed by someone else;
                nothing was written and ``.outside`` holds the bytes found.
            NotFoundError: a parent directory is missing and ``make_parents`` is false.

        Example:
            >>> import pathlib, tempfile
            >>> policy = PathPolicy([pathlib.Path(tempfile.mkdtemp())])
            >>> _ = policy.write_bytes_atomic("log.txt", b"a\\n")
            >>> _ = policy.write_bytes_atomic("log.txt", b"b\\n", mode="append")
            >>> policy.read_bytes("log.txt")
            b'a\\nb\\n'
        """
        if mode not in ("truncate", "append", "create"):
            raise ValueError(f"mode must be 'truncate', 'append' or 'create', not {mode!r}")
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        began = time.time_ns()
        p = self._parse(path)
        self._require_file_name(p)
        self.check_allow(p)
        self._check_protected(p)
        name = p.parts[-1]
        parent = self._walk.open_parent(p, make_parents=make_parents)
        try:
            old = self._walk.lstat_at(parent, p)
            if old is not None:
                self._walk.require_plain(old, p, allow_dir=False)
                if mode == "create":
                    self._walk.file_exists(p)
                # Replacing the name would leave the denied file as it is, but an append
                # reads it, and a refusal must not depend on the mode.
                self._walk.refuse_identity(old, p, began)
            payload = bytes(data)
            if mode == "append" and old is not None:
                fd, st = self._walk.open_regular(parent, p)
                try:
                    if st.st_nlink > 1:
                        self._walk.refuse_identity(st, p, began)
                    payload = self._walk.read_fd(fd, p, None, st.st_size) + payload
                finally:
                    os.close(fd)
            tmp = self._walk.write_temp(parent, payload, old, new_file_mode, while_syncing)
            try:
                if mode == "create":
                    if before_replace is not None:
                        # Refused before the commit when the name is taken already (the
                        # link below still refuses, race-free, one taken since).
                        if self._walk.lstat_at(parent, p) is not None:
                            self._walk.file_exists(p)
                        before_replace()
                    self._walk.link_new(parent, tmp, p)
                elif check_replaced:
                    # Imported here: the Claude Code hook's policy path never writes.
                    from ._replace import replace_checked

                    replace_checked(
                        parent,
                        tmp,
                        name,
                        rel=p.safe.rel,
                        began=old,
                        expected_sha256=expected_sha256,
                        before=before_replace,
                    )
                    tmp = ""
                else:
                    if before_replace is not None:
                        before_replace()
                    os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
                    tmp = ""
            finally:
                if tmp:
                    _unlink_quiet(tmp, parent)
            if durable_waits is not None:
                from .._util.fsync import fsync_close_later

                durable_waits.append(fsync_close_later(parent))
                parent = -1  # closed by the background fsync
            else:
                os.fsync(parent)
        finally:
            if parent >= 0:
                os.close(parent)
        return p.safe

    def delete(
        self,
        path: str | os.PathLike[str] | SafePath,
        *,
        expected_sha256: str | None = None,
        before_unlink: Callable[[], object] | None = None,
    ) -> None:
        """Unlink a regular file through the walk; a link, directory or special file is refused.

        Args:
            path: the file.
            expected_sha256: the content the deletion was decided on: checked right
                before the unlink, so a save by another program since is kept.
            before_unlink: what must be durable before the file is gone (a governed
                deletion's store version), called after the checks; the unlink follows
                only when it returns.

        Raises:
            PolicyError: ``PATH_DENIED``.
            NotFoundError: no such file.
            StaleFileError: the file no longer holds ``expected_sha256``; it was kept.

        Example:
            >>> import pathlib, tempfile
            >>> policy = PathPolicy([pathlib.Path(tempfile.mkdtemp())])
            >>> _ = policy.write_bytes_atomic("old.txt", b"x")
            >>> policy.delete("old.txt")
            >>> policy.is_allowed("old.txt"), (policy.roots[0] / "old.txt").exists()
            (True, False)
        """
        began = time.time_ns()
        p = self._parse(path)
        self._require_file_name(p)
        self.check_allow(p)
        self._check_protected(p)
        parent = self._walk.open_parent(p)
        try:
            st = self._walk.lstat_at(parent, p)
            if st is None:
                raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.")
            self._walk.require_plain(st, p, allow_dir=False)
            self._walk.refuse_identity(st, p, began)
            if expected_sha256 is not None:
                from ._replace import check_unchanged

                check_unchanged(
                    parent, p.parts[-1], rel=p.safe.rel, expected_sha256=expected_sha256
                )
            if before_unlink is not None:
                before_unlink()
            # If the entry is swapped between the lstat and here, unlinkat removes a
            # link itself (never its target) and fails on a directory: still contained.
            try:
                os.unlink(p.parts[-1], dir_fd=parent)
            except FileNotFoundError:
                raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.") from None
            os.fsync(parent)
        finally:
            os.close(parent)

    def iter_files(self, globs: Sequence[str] | None = None) -> Iterator[SafePath]:
        """Yield every regular file under the roots that the policy accepts.

        Denied directories are not entered, symbolic links (to files or directories)
        and special files are skipped, ``.ctxnb-tmp-*`` files are never yielded. Paths
        come in order of their components (``a/b`` before ``a.txt``).

        Args:
            globs: gitignore-style patterns (case-sensitive) the relative path must
                match; ``None`` yields every accepted file.

        Example:
            >>> import pathlib, tempfile
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> (ws / "pkg").mkdir()
            >>> for name in ["a.py", "b.txt", ".env", "pkg/c.py", ".git/x.py"]:
            ...     _ = (ws / name).parent.mkdir(exist_ok=True)
            ...     _ = (ws / name).write_bytes(b"")
            >>> [sp.rel for sp in PathPolicy([ws]).iter_files(["*.py"])]
            ['a.py', 'pkg/c.py']
        """
        spec = _build_spec(globs, "iter_files")[0] if globs is not None else None
        for entry in self.walk():
            if spec is None or spec.match_file(entry.safe.rel):
                yield entry.safe

    def walk(
        self,
        *,
        skip: Callable[[str, bool], bool] | None = None,
        on_dir: Callable[[str, Callable[[str], bytes | None]], None] | None = None,
        on_refused: Callable[[str, str], None] | None = None,
        judgments: Judgments | None = None,
    ) -> Iterator[FileEntry]:
        """Walk the roots by descriptors and yield every file the policy accepts.

        Each directory is opened with ``O_NOFOLLOW`` relative to its parent's
        descriptor, so a directory swapped for a symbolic link during the walk is never
        entered; :meth:`FileEntry.read` opens the file relative to its directory's
        descriptor in the same way. Order: by path components (``a/b`` before
        ``a.txt``), roots in the order given.

        Args:
            skip: ``skip(rel, is_dir)`` true leaves an entry out (an ignore rule); a
                skipped directory is not entered. Not called for refused entries.
            on_dir: ``on_dir(rel_dir, read)`` is called on entering a directory
                (``""`` for a root) before its entries are judged; ``read(name)``
                returns the bytes of a regular file of that directory or None (for
                ``.gitignore`` files).
            on_refused: ``on_refused(rel, rule)`` for each entry the policy refuses
                (a denied name, a symbolic link, a special file); a refused directory
                is reported once and not entered.
            judgments: the judgments of names kept from earlier walks of these rules
                (:class:`~ctxnb.access._judgments.Judgments`, made for this policy's
                rules), reused where they still hold and brought up to date; the
                caller saves them when the walk is done. Same answers, less work.

        Example:
            >>> import pathlib, tempfile
            >>> ws = pathlib.Path(tempfile.mkdtemp())
            >>> _ = (ws / "a.txt").write_bytes(b"hi")
            >>> _ = (ws / ".env").write_bytes(b"KEY=1")
            >>> refused = []
            >>> walk = PathPolicy([ws]).walk(on_refused=lambda rel, rule: refused.append(rel))
            >>> [(e.safe.rel, e.read()) for e in walk], refused
            ([('a.txt', b'hi')], ['.env'])
        """
        began = time.time_ns()
        for root in self._roots:
            probe = _Parsed(root, (), True, str(root.real))
            fd = self._walk.open_root(probe)
            try:
                yield from self._walk.walk_dir(
                    root, fd, (), skip, on_dir, on_refused, temps=False, since_ns=began,
                    memo=judgments if root is self._roots[0] else None,
                )  # fmt: skip
            finally:
                os.close(fd)

    def clean_temp_files(self, *, older_than: float = 3600.0) -> int:
        """Remove ``.ctxnb-tmp-*`` files left behind by writers that were killed.

        A live writer's temporary file is young; ``older_than`` (seconds since its last
        modification) keeps this from pulling one out from under it.

        Returns:
            How many files were removed.

        Example:
            >>> import pathlib, tempfile
            >>> PathPolicy([pathlib.Path(tempfile.mkdtemp())]).clean_temp_files(older_than=0)
            0
        """
        removed = 0
        now = time.time()
        for root in self._roots:
            fd = self._walk.open_root(_Parsed(root, (), True, str(root.real)))
            try:
                for entry in self._walk.walk_dir(root, fd, (), None, None, None, temps=True):
                    if now - entry.stat.st_mtime < older_than:
                        continue
                    try:
                        os.unlink(entry.safe.parts[-1], dir_fd=entry.dir_fd)
                        removed += 1
                    except FileNotFoundError:
                        continue
            finally:
                os.close(fd)
        return removed
