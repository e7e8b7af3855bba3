"""The path policy and the race-free file access layer under ctxnb's governed file tools.

Every path argument of every file tool goes through a :class:`PathPolicy`. It answers
two questions: *may this path be touched at all* (workspace roots, allow and deny globs,
no traversal, no symbolic links, no special files) and *how to touch it without a race*
(every open walks the path one component at a time from an open descriptor of the root,
never by name from the top).

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

The rules, in the order they are applied (the first one that fails names itself in the
``PolicyError``; its ``error_code`` is ``PATH_DENIED`` and ``details["rule"]`` is the
rule's name):

* ``empty`` (also a blank name such as ``" /x"``), ``not-a-string``, ``nul-byte``,
  ``control-char`` (C0/C1 controls and the bidirectional overrides used to disguise
  names), ``unencodable``.
* ``path-too-long`` (more than ``max_path_bytes`` bytes, 4096 by default) and
  ``component-too-long`` (a name over 255 bytes).
* ``backslash``: a backslash is refused outright, because agents send Windows paths
  (``..\\..\\x``) and on POSIX the whole thing would be one odd file name.
* ``home-tilde``: a leading ``~`` is refused, never expanded.
* ``traversal``: any ``..`` component is refused, even ``a/../b``. Resolving ``..``
  lexically disagrees with the kernel when ``a`` is a symbolic link, so ctxnb does not
  try. ``.`` components and repeated slashes are dropped.
* ``unicode-lookalike``: a path whose NFKC form has a different shape (``．．／x``
  becomes ``../x``) is refused; deny globs are also matched against the NFKC form.
* ``outside-roots``: a relative path is relative to the first root. An absolute path is
  accepted only when it lies inside a root, compared whole component by component
  against the root as configured or its real path, so ``/ws_evil`` never matches the
  root ``/ws``. The path is then handled as the relative remainder.
* ``reserved-name``: names starting with ``.ctxnb-tmp-`` belong to atomic writes.
* ``deny:<glob>``: deny globs use gitignore ("gitwildmatch") semantics via
  ``pathspec.GitIgnoreSpec``: a pattern without a slash matches at any depth, a trailing
  slash matches directories only and everything inside them. Denial is matched
  case-insensitively, and also after NFKC normalization and after stripping trailing
  dots and spaces from names (what Windows and some network filesystems do), so
  ``.GIT/config``, ``.ｅnv`` and ``.env.`` are all refused. Every ancestor directory is
  matched too: nothing inside a denied directory can be re-included. Deny always wins
  over allow. :data:`DEFAULT_DENY` covers ``.git`` (directory, and the ``.git`` file of
  worktrees and submodules), ``.env*``, ``*.pem``, ``id_*`` and ``.ctxnb/``.
* ``not-allowed``: when allow globs are given, a file must match one of them
  (case-sensitively, gitignore semantics). Directories are not subject to allow globs;
  :meth:`PathPolicy.iter_files` only yields allowed files.
* ``symlink``: ctxnb follows no symbolic link below a root, not even one that stays
  inside it. Go's ``os.Root`` follows in-root links while resolution never leaves the
  root; ctxnb is stricter because an in-root link makes one file reachable under two
  names, and ``ok -> .git`` would walk straight past the deny globs. The root itself is
  resolved once, with ``os.path.realpath``, when the policy is made.
* ``special-file``: FIFOs, sockets and device nodes are never opened (a FIFO would
  block a reader forever; a device open can have side effects). ``not-a-regular-file``
  refuses a directory where a file is needed; ``trailing-slash`` a file named with a
  trailing ``/``.
* Percent-encoded names are literal names: ``%2e%2e%2f`` is a file called
  ``%2e%2e%2f`` inside the root, never decoded.

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
import secrets
import stat as stat_mod
import time
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, NoReturn

import pathspec

from ..errors import ConfigError, NotFoundError, PolicyError

__all__ = [
    "DEFAULT_DENY",
    "TEMP_PREFIX",
    "PathPolicy",
    "SafePath",
]

DEFAULT_DENY: tuple[str, ...] = (".git", ".env*", "**/*.pem", "**/id_*", ".ctxnb/")
"""Deny globs used when ``deny`` is not given (gitignore semantics)."""

TEMP_PREFIX = ".ctxnb-tmp-"
"""Name prefix of the temporary files of atomic writes; such names are reserved."""

NAME_MAX = 255  # bytes per name on every filesystem ctxnb targets (ext4, APFS, xfs, btrfs)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
# O_NONBLOCK on directories is harmless and means a FIFO met where a directory was
# expected can never block the walk.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _NOCTTY | _CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _NOCTTY | _CLOEXEC
_READ_CHUNK = 1 << 20

# Characters that make a name look like something it is not: bidirectional overrides
# and isolates (the "Trojan Source" family). C0/C1 controls are caught by category.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

WriteMode = Literal["truncate", "append", "create"]

_REQUIRED_ACTION = {
    "empty": "Pass a non-empty path relative to the workspace root.",
    "not-a-string": "Pass the path as a str.",
    "nul-byte": "Remove the NUL byte from the path.",
    "control-char": "Remove control and bidirectional-override characters from the path.",
    "unencodable": "Pass a path that can be encoded for the filesystem (no lone surrogates).",
    "path-too-long": "Use a shorter path.",
    "component-too-long": "Use names of at most 255 bytes.",
    "backslash": "Use '/' as the separator; backslashes are not accepted.",
    "home-tilde": "Use a path relative to the workspace root; '~' is not expanded.",
    "traversal": "Use a path without '..' components, relative to the workspace root.",
    "unicode-lookalike": "Use plain characters for '.', '/' and '~' in the path.",
    "outside-roots": "Use a path inside one of the workspace roots.",
    "reserved-name": "Pick another name; '.ctxnb-tmp-' names are reserved for atomic writes.",
    "deny": "This path is protected by the deny list; work on another file.",
    "not-allowed": "Use a path that matches the allow list.",
    "symlink": "Use the path of the link's target inside the workspace; links are not followed.",
    "special-file": "Only regular files and directories can be used.",
    "not-a-regular-file": "Name a regular file, not a directory.",
    "trailing-slash": "Remove the trailing '/': it names a directory.",
}


@dataclass(frozen=True)
class SafePath:
    """A path that passed the policy's checks, relative to one workspace root.

    A ``SafePath`` is a validated *name*, not a capability: the file operations of
    :class:`PathPolicy` accept it and validate it again. ``abs`` is for display and
    logs; opening ``abs`` by name would give up the race-free walk.

    Attributes:
        rel: posix form relative to ``root``, normalized (no ``.``, no ``//``); ``"."``
            for the root itself.
        root: the root's real path.
        abs: ``root / rel``.

    Example:
        >>> SafePath(rel="src/app.py", root=Path("/ws"), abs=Path("/ws/src/app.py")).rel
        'src/app.py'
    """

    rel: str
    root: Path
    abs: Path

    @property
    def parts(self) -> tuple[str, ...]:
        """The names from the root down; empty for the root itself."""
        return () if self.rel == "." else tuple(self.rel.split("/"))


class _Root(NamedTuple):
    real: Path  # realpath at construction; what is opened
    given: Path  # absolute but unresolved, so absolute paths spelled that way match


class _Parsed(NamedTuple):
    root: _Root
    parts: tuple[str, ...]
    dir_form: bool  # the caller wrote a trailing '/' (or '/.')
    display: str  # the path as the caller gave it, for messages

    @property
    def safe(self) -> SafePath:
        rel = "/".join(self.parts) or "."
        abs_path = self.root.real.joinpath(*self.parts) if self.parts else self.root.real
        return SafePath(rel=rel, root=self.root.real, abs=abs_path)


def _short(text: str, limit: int = 120) -> str:
    # Refusals go back to agents and into logs; a 5000-byte hostile path must not.
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit} chars)"


def _deny(display: str, rule: str, why: str, **details: str) -> NoReturn:
    base = rule.split(":", 1)[0]
    raise PolicyError(
        "PATH_DENIED",
        f"Path {_short(display)!r} is refused: {why} (rule: {rule}).",
        recoverable=True,
        required_action=_REQUIRED_ACTION.get(base, "Use another path."),
        details={"path": _short(display, 512), "rule": rule, **details},
    )


def _build_spec(patterns: Sequence[str], what: str) -> tuple[pathspec.GitIgnoreSpec, list[str]]:
    if isinstance(patterns, str):
        raise ConfigError(f"{what} must be a list of glob strings, not the string {patterns!r}")
    lines = [p for p in patterns if p.strip() and not p.lstrip().startswith("#")]
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines), lines
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"Bad {what} glob in {lines!r}: {exc}") from exc


def _fs_bytes(text: str, display: str) -> bytes:
    try:
        return os.fsencode(text)
    except UnicodeEncodeError:
        _deny(display, "unencodable", "it contains characters the filesystem cannot encode")


class PathPolicy:
    """Decides which paths a governed tool may touch, and touches them without races.

    Args:
        roots: the workspace roots (existing directories). Relative paths are relative
            to the first one. Each root is resolved with ``os.path.realpath`` once, here.
        allow: gitignore-style globs; when given, a file must match one of them.
            ``None`` allows every file that is not denied.
        deny: gitignore-style globs that are refused, matched case-insensitively;
            ``None`` means :data:`DEFAULT_DENY`, ``[]`` denies nothing beyond the
            built-in rules (traversal, symlinks, special files, reserved names).
        max_path_bytes: the longest path accepted, in bytes of its filesystem encoding.

    Raises:
        ConfigError: no roots, a root that is not a directory, or a bad glob.

    Example:
        >>> import pathlib, tempfile
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> policy = PathPolicy([ws], allow=["src/**/*.py"], deny=[*DEFAULT_DENY, "*.lock"])
        >>> policy.is_allowed("src/app.py"), policy.is_allowed("README.md")
        (True, False)
    """

    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]],
        *,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] | None = DEFAULT_DENY,
        max_path_bytes: int = 4096,
    ) -> None:
        if isinstance(roots, str | os.PathLike):
            roots = [roots]
        if not roots:
            raise ConfigError("PathPolicy needs at least one workspace root directory.")
        resolved: list[_Root] = []
        for r in roots:
            given = Path(os.path.abspath(os.fspath(r)))
            real = Path(os.path.realpath(given))
            if not real.is_dir():
                raise ConfigError(
                    f"Workspace root {os.fspath(r)!r} is not an existing directory; "
                    "create it or pass another root."
                )
            resolved.append(_Root(real=real, given=given))
        self._roots: tuple[_Root, ...] = tuple(resolved)
        if max_path_bytes < 1:
            raise ConfigError(f"max_path_bytes must be positive, got {max_path_bytes}")
        self.max_path_bytes = max_path_bytes
        deny_list = DEFAULT_DENY if deny is None else deny
        self._deny_spec, self._deny_lines = _build_spec(deny_list, "deny")
        # Denial is case-insensitive: a second spec of lower-cased patterns is matched
        # against lower-cased paths (case-insensitive filesystems would open .GIT as .git).
        self._deny_spec_lower, _ = _build_spec([p.lower() for p in self._deny_lines], "deny")
        self._deny_cache: dict[tuple[str, ...], str | None] = {}
        self._allow_spec: pathspec.GitIgnoreSpec | None = None
        self._allow_lines: list[str] = []
        if allow is not None:
            self._allow_spec, self._allow_lines = _build_spec(allow, "allow")

    # ------------------------------------------------------------------ public API

    @property
    def roots(self) -> tuple[Path, ...]:
        """The real paths of the workspace roots, first one first."""
        return tuple(r.real for r in self._roots)

    @property
    def deny(self) -> tuple[str, ...]:
        """The deny globs in force."""
        return tuple(self._deny_lines)

    @property
    def allow(self) -> tuple[str, ...] | None:
        """The allow globs in force, or ``None`` when every non-denied file is allowed."""
        return tuple(self._allow_lines) if self._allow_spec is not None else None

    def __repr__(self) -> str:
        roots = ", ".join(str(r.real) for r in self._roots)
        return f"PathPolicy(roots=[{roots}], deny={len(self._deny_lines)} globs)"

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
            fd = self._open_regular(parent, p)
        finally:
            os.close(parent)
        try:
            return self._read_fd(fd, p, max_bytes)
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

    def write_bytes_atomic(
        self,
        path: str | os.PathLike[str] | SafePath,
        data: bytes,
        *,
        mode: WriteMode = "truncate",
        make_parents: bool = False,
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

        Returns:
            The :class:`SafePath` written.

        Raises:
            PolicyError: ``PATH_DENIED``, or ``FILE_EXISTS`` for ``mode="create"``.
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
                fd = self._open_regular(parent, p)
                try:
                    payload = self._read_fd(fd, p, None) + payload
                finally:
                    os.close(fd)
            tmp = self._write_temp(parent, payload, old)
            try:
                if mode == "create":
                    self._link_new(parent, tmp, p)
                else:
                    os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
                    tmp = ""
            finally:
                if tmp:
                    _unlink_quiet(tmp, parent)
            os.fsync(parent)
        finally:
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
        and special files are skipped, ``.ctxnb-tmp-*`` files are never yielded. Entries
        are visited in sorted order, files of a directory before its subdirectories.

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
        for root in self._roots:
            for _dir_fd, parts in self._walk(root, temps=False):
                rel = "/".join(parts)
                if self._allow_spec is not None and not self._allow_spec.match_file(rel):
                    continue
                if spec is not None and not spec.match_file(rel):
                    continue
                yield _Parsed(root, parts, False, rel).safe

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
            for dir_fd, parts in self._walk(root, temps=True):
                try:
                    st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
                    if stat_mod.S_ISREG(st.st_mode) and now - st.st_mtime >= older_than:
                        os.unlink(parts[-1], dir_fd=dir_fd)
                        removed += 1
                except FileNotFoundError:
                    continue
        return removed

    # ------------------------------------------------------------ lexical checks

    def _parse(self, path: str | os.PathLike[str] | SafePath) -> _Parsed:
        root: _Root | None = None
        if isinstance(path, SafePath):
            root = next((r for r in self._roots if r.real == path.root), None)
            if root is None:
                _deny(path.rel, "outside-roots", f"its root {path.root} is not a workspace root")
            raw = path.rel
            if raw.startswith("/"):
                _deny(raw, "outside-roots", "a SafePath's rel must be relative")
        else:
            if isinstance(path, os.PathLike):
                path = os.fspath(path)
            if not isinstance(path, str):
                _deny(repr(path), "not-a-string", f"a {type(path).__name__} is not a path string")
            raw = path
        display = raw
        if not raw.strip():
            _deny(display, "empty", "the path is empty")
        if "\x00" in raw:
            _deny(display, "nul-byte", "it contains a NUL byte")
        encoded = _fs_bytes(raw, display)
        if len(encoded) > self.max_path_bytes:
            _deny(
                display, "path-too-long", f"it is {len(encoded)} bytes, over {self.max_path_bytes}"
            )
        for ch in raw:
            if ch in _BIDI or unicodedata.category(ch) == "Cc":
                _deny(display, "control-char", f"it contains the control character {ch!r}")
        if "\\" in raw:
            _deny(display, "backslash", "it contains a backslash")
        if raw.startswith("~"):
            _deny(display, "home-tilde", "a leading '~' is not expanded")
        raw_parts = raw.split("/")
        if ".." in raw_parts:
            _deny(display, "traversal", "it contains a '..' component")
        nfkc = unicodedata.normalize("NFKC", raw)
        if nfkc != raw:
            nfkc_parts = nfkc.split("/")
            if (
                len(nfkc_parts) != len(raw_parts)
                or "\\" in nfkc
                or nfkc.startswith("~")
                or any(
                    n in (".", "..") and n != r for n, r in zip(nfkc_parts, raw_parts, strict=True)
                )
            ):
                _deny(display, "unicode-lookalike", f"its NFKC form {nfkc!r} has another shape")
        parts = tuple(c for c in raw_parts if c not in ("", "."))
        if raw.startswith("/"):
            best: tuple[_Root, int] | None = None
            for r in self._roots:
                for form in (r.given, r.real):
                    rp = form.parts[1:]  # drop the leading '/'
                    if parts[: len(rp)] == rp and (best is None or len(rp) > best[1]):
                        best = (r, len(rp))
            if best is None:
                _deny(display, "outside-roots", "it is an absolute path outside every root")
            root, parts = best[0], parts[best[1] :]
        elif root is None:
            root = self._roots[0]
        dir_form = raw.endswith(("/", "/.")) or raw == "."
        self._check_parts(parts, display)
        return _Parsed(root, parts, dir_form, display)

    def _check_parts(self, parts: tuple[str, ...], display: str) -> None:
        for name in parts:
            if not name.strip():
                # Legal on POSIX, but a blank name is invisible in every listing.
                _deny(display, "empty", "a name in it is blank")
            size = len(_fs_bytes(name, display))
            if size > NAME_MAX:
                _deny(display, "component-too-long", f"a name is {size} bytes, over {NAME_MAX}")
            if name.startswith(TEMP_PREFIX):
                _deny(display, "reserved-name", f"{TEMP_PREFIX!r} names are reserved")
        pattern = self._denied_by(parts)
        if pattern is not None:
            _deny(display, f"deny:{pattern}", f"it matches the deny glob {pattern!r}")

    def _denied_by(self, parts: tuple[str, ...]) -> str | None:
        if not parts or not self._deny_lines:
            return None
        # The answer depends on the names only (the globs never change), and one tool
        # call checks the same path several times: remember recent answers.
        cache = self._deny_cache
        if parts in cache:
            return cache[parts]
        if len(cache) > 4096:
            cache.clear()
        cache[parts] = found = self._denied_by_uncached(parts)
        return found

    def _denied_by_uncached(self, parts: tuple[str, ...]) -> str | None:
        hit = self._match_prefixes(self._deny_spec, parts)
        if hit is not None:
            return self._deny_lines[hit]
        variants = {tuple(p.lower() for p in parts)}
        variants.add(tuple(unicodedata.normalize("NFKC", p).lower() for p in parts))
        variants.add(tuple((p.rstrip(" .") or p).lower() for p in parts))
        for variant in sorted(variants):
            hit = self._match_prefixes(self._deny_spec_lower, variant)
            if hit is not None:
                return self._deny_lines[hit]
        return None

    @staticmethod
    def _match_prefixes(spec: pathspec.GitIgnoreSpec, parts: tuple[str, ...]) -> int | None:
        # Each ancestor as a directory, then the path itself as file and as directory:
        # the kind of an entry is not known here, and a denied directory denies its content.
        candidates = ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]
        full = "/".join(parts)
        candidates += [full, full + "/"]
        for candidate in candidates:
            result = spec.check_file(candidate)
            if result.include and result.index is not None:
                return result.index
        return None

    def _check_allow(self, p: _Parsed) -> None:
        if self._allow_spec is None or not p.parts:
            return
        if not self._allow_spec.match_file("/".join(p.parts)):
            _deny(
                p.display,
                "not-allowed",
                f"it matches none of the allow globs {self._allow_lines!r}",
            )

    @staticmethod
    def _require_file_name(p: _Parsed) -> None:
        if not p.parts:
            _deny(p.display, "not-a-regular-file", "it is the workspace root")
        if p.dir_form:
            _deny(p.display, "trailing-slash", "a path ending in '/' names a directory")

    # ------------------------------------------------------------ descriptor walk

    def _open_root(self, p: _Parsed) -> int:
        try:
            return os.open(p.root.real, _DIR_FLAGS)
        except OSError as exc:
            raise NotFoundError(
                f"Workspace root {str(p.root.real)!r} cannot be opened ({exc.strerror})."
            ) from exc

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

    def _open_regular(self, parent: int, p: _Parsed) -> int:
        name = p.parts[-1]
        # lstat first so that a device node is never opened (opening one can act on
        # the device); the O_NOFOLLOW | O_NONBLOCK open plus fstat below is what makes
        # it safe if the entry is swapped in between.
        st = self._lstat_at(parent, p)
        if st is None:
            raise NotFoundError(f"No file {_short(p.display)!r} in {p.root.real}.")
        self._require_plain(st, p, allow_dir=False)
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
        return fd

    @staticmethod
    def _read_fd(fd: int, p: _Parsed, max_bytes: int | None) -> bytes:
        if max_bytes is not None:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                _too_large(p, size, max_bytes)
        chunks: list[bytes] = []
        total = 0
        while True:
            want = _READ_CHUNK if max_bytes is None else min(_READ_CHUNK, max_bytes + 1 - total)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                _too_large(p, total, max_bytes)  # it grew while we read
        return b"".join(chunks)

    @staticmethod
    def _write_temp(parent: int, data: bytes, old: os.stat_result | None) -> str:
        # An existing file's temp starts private (0o600) so a secret file's new content
        # is never briefly readable by others; a new file gets 0o666 minus the umask.
        create_mode = 0o600 if old is not None else 0o666
        for _ in range(16):
            name = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
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

    def _walk(self, root: _Root, *, temps: bool) -> Iterator[tuple[int, tuple[str, ...]]]:
        """Yield (directory descriptor, parts) for accepted files (or for temp files)."""
        probe = _Parsed(root, (), True, str(root.real))
        stack: list[tuple[int, tuple[str, ...]]] = [(self._open_root(probe), ())]
        try:
            while stack:
                fd, prefix = stack.pop()
                try:
                    with os.scandir(fd) as it:
                        entries = sorted(it, key=lambda e: e.name)
                    subdirs: list[str] = []
                    for entry in entries:
                        parts = (*prefix, entry.name)
                        try:
                            if entry.is_symlink():
                                continue
                            is_dir = entry.is_dir(follow_symlinks=False)
                            is_file = entry.is_file(follow_symlinks=False)
                        except OSError:
                            continue  # vanished while we looked
                        if is_file and entry.name.startswith(TEMP_PREFIX):
                            if temps:
                                yield fd, parts
                            continue
                        if not (is_dir or is_file) or not self._acceptable(root, parts):
                            continue
                        if is_dir:
                            subdirs.append(entry.name)
                        elif not temps:
                            yield fd, parts
                    for name in reversed(subdirs):
                        try:
                            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue  # replaced by a link or removed since the scan
                        stack.append((nfd, (*prefix, name)))
                finally:
                    os.close(fd)
        finally:
            for fd, _ in stack:
                os.close(fd)

    def _acceptable(self, root: _Root, parts: tuple[str, ...]) -> bool:
        display = "/".join(parts)
        name = parts[-1]
        try:
            # The same name rules _parse applies to a path string, for names found on disk.
            for ch in name:
                if ch in _BIDI or unicodedata.category(ch) == "Cc" or ch == "\\":
                    return False
            folded = unicodedata.normalize("NFKC", name)
            if folded in (".", "..") or "/" in folded or "\\" in folded:
                return False
            if len(parts) == 1 and (name.startswith("~") or folded.startswith("~")):
                return False
            if len(_fs_bytes(display, display)) > self.max_path_bytes:
                return False
            self._check_parts(parts, display)
        except PolicyError:
            return False
        return True


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


def _lstat_quiet(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def _unlink_quiet(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass  # best effort; clean_temp_files() sweeps what is left
