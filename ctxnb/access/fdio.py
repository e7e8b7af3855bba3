"""The race-free I/O half of the path policy: every open is a descriptor walk.

:class:`PathPolicy` adds file operations to :class:`~ctxnb.access.pathrules.PathRules`.
It answers *how to touch a path without a race*: every open walks the path one
component at a time from an open descriptor of the root, never by name from the top.
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

Out of scope, by design: hard links (a hard link placed inside the root by someone
else reads the shared inode; a ctxnb write replaces the name and never modifies the
other link), mount points inside a root, changes an outside process makes to the
directories above a root, and Windows (``O_NOFOLLOW`` and ``dir_fd`` are POSIX).
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Literal, NoReturn

from ..errors import NotFoundError, PolicyError
from .pathrules import TEMP_PREFIX, PathRules, SafePath, _build_spec, _deny, _Parsed, _Root, _short

__all__ = ["FileEntry", "PathPolicy"]

WriteMode = Literal["truncate", "append", "create"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
# O_NONBLOCK on directories is harmless and means a FIFO met where a directory was
# expected can never block the walk.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _NOCTTY | _CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _NOCTTY | _CLOEXEC
_READ_CHUNK = 1 << 20
_S_IFMT, _S_IFDIR, _S_IFREG, _S_IFLNK = (
    0o170000,
    stat_mod.S_IFDIR,
    stat_mod.S_IFREG,
    stat_mod.S_IFLNK,
)
_UNJUDGED = "\x00unjudged"  # no rule name holds a NUL
_JUDGED_MAX = 1 << 17  # names whose walk judgment is remembered (a few MB at most)


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
        p = self._parse(path)
        if for_write:
            self._require_file_name(p)
        kind = self._probe(p)
        if kind == "dir":
            if for_write:
                _deny(p.display, "not-a-regular-file", "it is a directory")
        else:
            if p.dir_form and kind == "file":
                _deny(p.display, "trailing-slash", "it is a file, not a directory")
            if p.parts:
                self._check_allow(p)
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
        p = self._parse(path)
        self._require_file_name(p)
        self._check_allow(p)
        parent = self._open_parent(p)
        try:
            fd, st = self._open_regular(parent, p)
        finally:
            os.close(parent)
        try:
            return self._read_fd(fd, p, max_bytes, st.st_size)
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
            fd = self._open_root(p)
            try:
                return os.fstat(fd)
            finally:
                os.close(fd)
        parent = self._open_parent(p)
        try:
            st = self._lstat_at(parent, p)
        finally:
            os.close(parent)
        if st is None:
            raise NotFoundError(f"Nothing at {_short(p.display)!r} in {p.root.real}.")
        self._require_plain(st, p, allow_dir=True)
        if stat_mod.S_ISREG(st.st_mode):
            if p.dir_form:
                _deny(p.display, "trailing-slash", "it is a file, not a directory")
            self._check_allow(p)
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
                fd = self._enter(opened, dparts, items[0][1])
                if fd is None:  # a parent is missing or refused: each path says how
                    for i, _ in items:
                        out[i] = self._stat_one(paths[i])
                    continue
                for i, p in items:
                    out[i] = self._stat_in(fd, p, allow)
        finally:
            _close_all(opened)
        return out  # type: ignore[return-value]  # every slot was filled

    def _enter(
        self, opened: list[tuple[tuple[str, ...], int]], dparts: tuple[str, ...], p: _Parsed
    ) -> int | None:
        """The descriptor of ``dparts`` (below ``p``'s root), reusing the open chain."""
        while opened and opened[-1][0] != dparts[: len(opened[-1][0])]:
            os.close(opened.pop()[1])
        try:
            if not opened:
                opened.append(((), self._open_root(p)))
            while len(opened[-1][0]) < len(dparts):
                have, fd = opened[-1]
                depth = len(have)
                nfd = self._open_subdir(fd, dparts[depth], p, depth, False)
                if nfd is None:
                    return None
                opened.append((dparts[: depth + 1], nfd))
        except (NotFoundError, PolicyError):
            return None
        return opened[-1][1]

    def _stat_in(
        self, fd: int, p: _Parsed, allow: bool
    ) -> os.stat_result | NotFoundError | PolicyError:
        """What :meth:`stat` answers for ``p``, its parent open as ``fd``."""
        try:
            st = os.stat(p.parts[-1], dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return NotFoundError(f"Nothing at {_short(p.display)!r} in {p.root.real}.")
        fmt = st.st_mode & _S_IFMT
        if fmt == _S_IFREG and not p.dir_form and not allow:
            return st  # the common answer, decided without the checks below
        try:
            self._require_plain(st, p, allow_dir=True)
            if fmt == _S_IFREG:
                if p.dir_form:
                    _deny(p.display, "trailing-slash", "it is a file, not a directory")
                self._check_allow(p)
        except PolicyError as e:
            return e
        return st

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
                displaced is checked too, so a save landing in between is put back.
            expected_sha256: the SHA-256 of the content the new bytes were computed from;
                with ``check_replaced``, None means they were computed for a new file.
            new_file_mode: the permission bits (``0o777`` part) of a file that did not
                exist, set on the temporary file's descriptor before the rename, so no
                path is followed to set them; an existing file keeps its own.

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
        p = self._parse(path)
        self._require_file_name(p)
        self._check_allow(p)
        name = p.parts[-1]
        parent = self._open_parent(p, make_parents=make_parents)
        try:
            old = self._lstat_at(parent, p)
            if old is not None:
                self._require_plain(old, p, allow_dir=False)
                if mode == "create":
                    self._file_exists(p)
            payload = bytes(data)
            if mode == "append" and old is not None:
                fd, st = self._open_regular(parent, p)
                try:
                    payload = self._read_fd(fd, p, None, st.st_size) + payload
                finally:
                    os.close(fd)
            tmp = self._write_temp(parent, payload, old, new_file_mode)
            try:
                if mode == "create":
                    self._link_new(parent, tmp, p)
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
                    )
                    tmp = ""
                else:
                    os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
                    tmp = ""
            finally:
                if tmp:
                    _unlink_quiet(tmp, parent)
            if durable_waits is not None:
                from .._fsync import fsync_close_later

                durable_waits.append(fsync_close_later(parent))
                parent = -1  # closed by the background fsync
            else:
                os.fsync(parent)
        finally:
            if parent >= 0:
                os.close(parent)
        return p.safe

    def delete(self, path: str | os.PathLike[str] | SafePath) -> None:
        """Unlink a regular file through the walk; a link, directory or special file is refused.

        Raises:
            PolicyError: ``PATH_DENIED``.
            NotFoundError: no such file.

        Example:
            >>> import pathlib, tempfile
            >>> policy = PathPolicy([pathlib.Path(tempfile.mkdtemp())])
            >>> _ = policy.write_bytes_atomic("old.txt", b"x")
            >>> policy.delete("old.txt")
            >>> policy.is_allowed("old.txt"), (policy.roots[0] / "old.txt").exists()
            (True, False)
        """
        p = self._parse(path)
        self._require_file_name(p)
        self._check_allow(p)
        parent = self._open_parent(p)
        try:
            st = self._lstat_at(parent, p)
            if st is None:
                raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.")
            self._require_plain(st, p, allow_dir=False)
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
        for root in self._roots:
            probe = _Parsed(root, (), True, str(root.real))
            fd = self._open_root(probe)
            try:
                yield from self._walk_dir(root, fd, (), skip, on_dir, on_refused, temps=False)
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
            fd = self._open_root(_Parsed(root, (), True, str(root.real)))
            try:
                for entry in self._walk_dir(root, fd, (), None, None, None, temps=True):
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

    # ------------------------------------------------------------ descriptor walk

    def _open_root(self, p: _Parsed) -> int:
        nested = self._nested_roots.get(p.root.real)
        try:
            if nested is not None:
                return self._open_nested_root(p, *nested)
            return os.open(p.root.real, _DIR_FLAGS)
        except OSError as exc:
            raise NotFoundError(
                f"Workspace root {str(p.root.real)!r} cannot be opened ({exc.strerror})."
            ) from exc

    @cached_property
    def _nested_roots(self) -> dict[Path, tuple[Path, tuple[str, ...]]]:
        """Roots inside another root (the skills folder), with that root and the way down.

        Such a root is opened by a descriptor walk from the outer one: opened by name, a
        folder above it swapped for a symbolic link after the policy was made (``.ctxnb``
        -> elsewhere) would be followed.
        """
        found = {}
        for r in self._roots:
            outer = next(
                (o for o in self._roots if o is not r and r.real.is_relative_to(o.real)), None
            )
            if outer is not None:
                found[r.real] = (outer.real, r.real.relative_to(outer.real).parts)
        return found

    @staticmethod
    def _open_nested_root(p: _Parsed, outer: Path, parts: tuple[str, ...]) -> int:
        fd = os.open(outer, _DIR_FLAGS)
        try:
            for depth, name in enumerate(parts):
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    st = _lstat_quiet(name, fd)
                    if st is not None and not stat_mod.S_ISDIR(st.st_mode):
                        where = "/".join(parts[: depth + 1])
                        what = "a symbolic link" if stat_mod.S_ISLNK(st.st_mode) else "no folder"
                        _deny(p.display, "symlink", f"{where!r}, on the way to its root, is {what}")
                    raise
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_parent(self, p: _Parsed, *, make_parents: bool = False) -> int:
        fd = self._walk_parents(p, make_parents=make_parents)
        if fd is None:
            hint = " (pass make_parents=True to create it)" if not make_parents else ""
            raise NotFoundError(
                f"A parent directory of {_short(p.display)!r} does not exist or is a file{hint}."
            )
        return fd

    def _walk_parents(self, p: _Parsed, *, make_parents: bool = False) -> int | None:
        """Descriptor of the directory holding the last name, or None if one is missing."""
        fd = self._open_root(p)
        ok = False
        try:
            for depth, name in enumerate(p.parts[:-1]):
                nfd = self._open_subdir(fd, name, p, depth, make_parents)
                if nfd is None:
                    return None
                os.close(fd)
                fd = nfd
            ok = True
            return fd
        finally:
            if not ok:
                os.close(fd)

    def _open_subdir(self, fd: int, name: str, p: _Parsed, depth: int, make: bool) -> int | None:
        prefix = "/".join(p.parts[: depth + 1])
        made = False
        for _ in range(4):
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make or made:
                    return None
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # someone else made it, or it is not a directory: the open decides
                made = True
            except OSError as exc:
                st = _lstat_quiet(name, fd)
                if st is None:
                    return None
                if stat_mod.S_ISLNK(st.st_mode):
                    _deny(p.display, "symlink", f"{prefix!r} is a symbolic link")
                if stat_mod.S_ISREG(st.st_mode):
                    return None  # a file where a directory should be: the path cannot exist
                if not stat_mod.S_ISDIR(st.st_mode):
                    _deny(p.display, "special-file", f"{prefix!r} is not a directory")
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                # It was a link when opened and is a directory again now: it is being
                # swapped under us. Try again; a steady swap is refused below.
        _deny(p.display, "symlink", f"{prefix!r} keeps changing into a symbolic link")

    def _probe(self, p: _Parsed) -> Literal["missing", "file", "dir"]:
        if not p.parts:
            return "dir"
        parent = self._walk_parents(p)
        if parent is None:
            return "missing"
        try:
            st = self._lstat_at(parent, p)
        finally:
            os.close(parent)
        if st is None:
            return "missing"
        self._require_plain(st, p, allow_dir=True)
        return "dir" if stat_mod.S_ISDIR(st.st_mode) else "file"

    @staticmethod
    def _lstat_at(parent: int, p: _Parsed) -> os.stat_result | None:
        try:
            return os.stat(p.parts[-1], dir_fd=parent, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    @staticmethod
    def _require_plain(st: os.stat_result, p: _Parsed, *, allow_dir: bool) -> None:
        mode = st.st_mode
        if stat_mod.S_ISLNK(mode):
            _deny(p.display, "symlink", "it is a symbolic link")
        if stat_mod.S_ISDIR(mode):
            if not allow_dir:
                _deny(p.display, "not-a-regular-file", "it is a directory")
            return
        if not stat_mod.S_ISREG(mode):
            _deny(p.display, "special-file", f"it is a {_kind(mode)}, not a regular file")

    @staticmethod
    def _open_regular(
        parent: int, p: _Parsed, lstat: os.stat_result | None = None
    ) -> tuple[int, os.stat_result]:
        """Open a regular file of ``parent``: its descriptor and its ``fstat``.

        ``lstat``: the entry's ``lstat`` if the caller has just taken it (a walk).
        """
        name = p.parts[-1]
        # lstat first so that a device node is never opened (opening one can act on
        # the device); the O_NOFOLLOW | O_NONBLOCK open plus fstat below is what makes
        # it safe if the entry is swapped in between.
        st = lstat if lstat is not None else PathPolicy._lstat_at(parent, p)
        if st is None:
            raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.")
        PathPolicy._require_plain(st, p, allow_dir=False)
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: FreeBSD's O_NOFOLLOW
                _deny(p.display, "symlink", "it is a symbolic link")
            if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):
                _deny(p.display, "special-file", "it is not a regular file")
            if exc.errno == errno.EISDIR:
                _deny(p.display, "not-a-regular-file", "it is a directory")
            raise
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                _deny(p.display, "special-file", f"it is a {_kind(st.st_mode)}, not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    @staticmethod
    def _read_fd(fd: int, p: _Parsed, max_bytes: int | None, size: int) -> bytes:
        """The file's bytes; ``size`` is its ``fstat`` size: the first read asks for all
        of it and a byte more, so a file that does not change takes one read (and one
        that returns nothing at its end)."""
        if max_bytes is not None and size > max_bytes:
            _too_large(p, size, max_bytes)
        chunks: list[bytes] = []
        total = 0
        while True:
            want = size + 1 if not chunks else _READ_CHUNK
            if max_bytes is not None:
                want = min(want, max_bytes + 1 - total)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                _too_large(p, total, max_bytes)  # it grew while we read
        return b"".join(chunks)

    @staticmethod
    def _write_temp(
        parent: int, data: bytes, old: os.stat_result | None, new_mode: int | None = None
    ) -> str:
        # An existing file's temp starts private (0o600) so a secret file's new content
        # is never briefly readable by others; a new file gets 0o666 minus the umask.
        create_mode = 0o600 if old is not None else 0o666
        for _ in range(16):
            name = f"{TEMP_PREFIX}{os.urandom(8).hex()}"
            try:
                fd = os.open(name, _TEMP_FLAGS, create_mode, dir_fd=parent)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 16 collisions of 64 random bits
            raise FileExistsError("could not create a unique temporary file")
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if old is not None:
                mine = os.fstat(fd)
                if (mine.st_uid, mine.st_gid) != (old.st_uid, old.st_gid):
                    try:
                        os.fchown(fd, old.st_uid, old.st_gid)
                    except PermissionError:
                        pass  # only root may give a file away; keep ours
                os.fchmod(fd, stat_mod.S_IMODE(old.st_mode) & 0o777)
            elif new_mode is not None:
                os.fchmod(fd, new_mode & 0o777)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink_quiet(name, parent)
            raise
        os.close(fd)
        return name

    def _link_new(self, parent: int, tmp: str, p: _Parsed) -> None:
        name = p.parts[-1]
        try:
            # link() fails if the name exists: an O_EXCL create whose content is
            # complete the moment it appears.
            os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
        except FileExistsError:
            self._file_exists(p)
        except (OSError, NotImplementedError) as exc:
            # NotImplementedError: a platform without linkat(); OSError: a filesystem
            # without hard links (FAT, some FUSE and network filesystems).
            no_links = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK)
            if isinstance(exc, OSError) and exc.errno not in no_links:
                raise
            # Filesystems without hard links: check again, then rename (a small window).
            if self._lstat_at(parent, p) is not None:
                self._file_exists(p)
            os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            return
        _unlink_quiet(tmp, parent)

    @staticmethod
    def _file_exists(p: _Parsed) -> NoReturn:
        raise PolicyError(
            "FILE_EXISTS",
            f"File {_short(p.display)!r} already exists and mode='create' does not replace it.",
            recoverable=True,
            required_action="Use mode='truncate' to replace the file, or pick a new path.",
            details={"path": _short(p.display, 512)},
        )

    def _walk_dir(
        self,
        root: _Root,
        fd: int,
        prefix: tuple[str, ...],
        skip: Callable[[str, bool], bool] | None,
        on_dir: Callable[[str, Callable[[str], bytes | None]], None] | None,
        on_refused: Callable[[str, str], None] | None,
        *,
        temps: bool,
    ) -> Iterator[FileEntry]:
        """Yield the accepted files below the open directory ``fd`` (not closed here)."""
        if on_dir is not None:
            on_dir("/".join(prefix), lambda name: _read_small(fd, name))
        try:
            with os.scandir(fd) as it:
                names = sorted(e.name for e in it)
        except OSError:
            return  # removed or unreadable since it was opened
        # The nothing-changed path of a re-index runs this loop once per file: no
        # per-file objects beyond the lstat, and a name's lexical judgment (a pure
        # function of its path) is remembered across walks by the rules.
        judged = self._walk_judged
        allow = self._allow_spec
        base = "/".join(prefix) + "/" if prefix else ""
        for name in names:
            rel = base + name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # vanished while we looked
            fmt = st.st_mode & _S_IFMT
            is_dir, is_file = fmt == _S_IFDIR, fmt == _S_IFREG
            if is_file and name.startswith(TEMP_PREFIX):
                if temps:
                    yield FileEntry(root, rel, st, fd)
                continue
            if temps:
                if is_dir and self._judge(judged, prefix, name, rel) is None:
                    yield from self._descend(
                        root, fd, (*prefix, name), None, None, None, temps=True
                    )
                continue
            if not (is_dir or is_file):
                if on_refused is not None:
                    on_refused(rel, "symlink" if fmt == _S_IFLNK else "special-file")
                continue
            got = judged.get(rel, _UNJUDGED)
            rule = self._judge(judged, prefix, name, rel) if got is _UNJUDGED else got
            if rule is None and is_file and allow is not None:
                rule = None if allow.match_file(rel) else "not-allowed"
            if rule is not None:
                if on_refused is not None:
                    on_refused(rel, rule)
                continue
            if skip is not None and skip(rel, is_dir):
                continue
            if is_dir:
                yield from self._descend(
                    root, fd, (*prefix, name), skip, on_dir, on_refused, temps=False
                )
            else:
                yield FileEntry(root, rel, st, fd)

    def _judge(
        self, judged: dict[str, str | None], prefix: tuple[str, ...], name: str, rel: str
    ) -> str | None:
        """The walk's refusal of ``rel`` (its parent accepted), remembered by path."""
        got = judged.get(rel, _UNJUDGED)
        if got is not _UNJUDGED:
            return got
        if len(judged) >= _JUDGED_MAX:
            judged.clear()
        judged[rel] = rule = self._refusal((*prefix, name), parent_checked=True)
        return rule

    def _descend(
        self,
        root: _Root,
        fd: int,
        parts: tuple[str, ...],
        skip: Callable[[str, bool], bool] | None,
        on_dir: Callable[[str, Callable[[str], bytes | None]], None] | None,
        on_refused: Callable[[str, str], None] | None,
        *,
        temps: bool,
    ) -> Iterator[FileEntry]:
        try:
            nfd = os.open(parts[-1], _DIR_FLAGS, dir_fd=fd)
        except OSError:
            # Replaced by a link (O_NOFOLLOW refuses it) or removed since the scan.
            if on_refused is not None:
                st = _lstat_quiet(parts[-1], fd)
                if st is not None and stat_mod.S_ISLNK(st.st_mode):
                    on_refused("/".join(parts), "symlink")
            return
        try:
            yield from self._walk_dir(root, nfd, parts, skip, on_dir, on_refused, temps=temps)
        finally:
            os.close(nfd)


class FileEntry:
    """A file found by :meth:`PathPolicy.walk`: its name, its ``lstat`` and a way to read it.

    ``read`` opens the name relative to its directory's descriptor (``O_NOFOLLOW``,
    regular files only), so it is valid only while the walk stands at this entry.
    ``rel`` and ``root`` are plain attributes; the :class:`SafePath` (``safe``) is made
    when first asked for, so a walk over unchanged files builds no path objects.
    """

    # A plain class: the hook process imports this module, and dataclasses cost it time.
    __slots__ = ("_root", "_safe", "dir_fd", "rel", "stat")

    def __init__(self, root: _Root, rel: str, stat: os.stat_result, dir_fd: int) -> None:
        self._root = root
        self._safe: SafePath | None = None
        self.rel = rel
        self.stat = stat
        self.dir_fd = dir_fd

    @property
    def root(self) -> Path:
        """The real path of the root the file was found under."""
        return self._root.real

    @property
    def safe(self) -> SafePath:
        """The file as a :class:`SafePath`."""
        if self._safe is None:
            self._safe = self._parsed().safe
        return self._safe

    def _parsed(self) -> _Parsed:
        return _Parsed(self._root, tuple(self.rel.split("/")), False, self.rel)

    def __repr__(self) -> str:
        return f"FileEntry(safe={self.safe!r}, dir_fd={self.dir_fd})"

    def read(self, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes, read race-free through its directory's descriptor.

        Raises:
            PolicyError: ``PATH_DENIED`` when the name became a link or special file.
            NotFoundError: the file is gone.
        """
        p = self._parsed()
        fd, st = PathPolicy._open_regular(self.dir_fd, p, self.stat)
        try:
            return PathPolicy._read_fd(fd, p, max_bytes, st.st_size)
        finally:
            os.close(fd)


def _too_large(p: _Parsed, size: int, limit: int) -> NoReturn:
    raise PolicyError(
        "FILE_TOO_LARGE",
        f"File {_short(p.display)!r} is {size} bytes or more, over the limit of {limit}.",
        recoverable=True,
        required_action="Read a line range or an excerpt instead of the whole file.",
        details={"path": _short(p.display, 512), "size": size, "max_bytes": limit},
    )


def _kind(mode: int) -> str:
    if stat_mod.S_ISFIFO(mode):
        return "FIFO"
    if stat_mod.S_ISSOCK(mode):
        return "socket"
    if stat_mod.S_ISCHR(mode):
        return "character device"
    if stat_mod.S_ISBLK(mode):
        return "block device"
    if stat_mod.S_ISDIR(mode):
        return "directory"
    return "special file"


def _read_small(dir_fd: int, name: str, limit: int = 1 << 20) -> bytes | None:
    """A small regular file of an open directory (an ignore file), or None."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _lstat_quiet(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def _close_all(opened: list[tuple[tuple[str, ...], int]]) -> None:
    while opened:
        os.close(opened.pop()[1])


def _unlink_quiet(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass  # best effort; clean_temp_files() sweeps what is left
