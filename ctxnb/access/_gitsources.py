"""The ignore patterns git reads besides a workspace's own ``.gitignore`` files.

git decides whether a path is ignored from, highest precedence first: the
``.gitignore`` files of the path's directories (deepest first), then
``$GIT_COMMON_DIR/info/exclude``, then the file named by ``core.excludesFile``
(``$XDG_CONFIG_HOME/git/ignore`` when unset). When the workspace is a subdirectory of
a repository, the ``.gitignore`` files from the repository's top down to the
workspace's parent apply too, their patterns anchored at their own directories.

:func:`git_sources` finds these files for a workspace root and returns their lines,
lowest precedence first, each with its directory relative to the repository's top.
Nothing is run: the configuration files are read as data, and only
``core.excludesFile`` is taken from them, with the files their ``include.path`` and
``includeIf.<condition>.path`` entries name, where git reads them (conditions
``gitdir:``, ``gitdir/i:`` and ``onbranch:``; a ``hasconfig:`` condition is taken as
not met). Files inside the workspace (its ``.git``
when the workspace is the repository's top) are read through ``read_inside``, the
access layer's ``O_NOFOLLOW`` reads; the user's own configuration and the
directories above the workspace are the host's and read directly, following links
as git does, except ``.gitignore`` files, which git never follows.

Example:
    >>> import os, subprocess, tempfile
    >>> top = tempfile.mkdtemp()
    >>> _ = subprocess.run(["git", "init", "-q", top], check=True)
    >>> os.makedirs(os.path.join(top, "pkg", "ws"))
    >>> with open(os.path.join(top, ".gitignore"), "w") as f:
    ...     _ = f.write("*.log\\n")
    >>> src = git_sources(os.path.join(top, "pkg", "ws"), read_inside=lambda rel, limit: None)
    >>> src.prefix, [(base, lines) for base, lines in src.files if lines == ["*.log", ""]]
    ('pkg/ws', [('', ['*.log', ''])])
"""

from __future__ import annotations

import functools
import os
import pwd
import stat
from collections.abc import Callable

from ._gitindex import tracked_paths

__all__ = ["GitSources", "config_entries", "config_values", "git_sources", "tracked_dirs"]

_LIMIT = 1 << 20  # the most read of one ignore or configuration file, as in the walk
_INDEX_LIMIT = 256 << 20  # an index of a few million paths


class GitSources:
    """The ignore files git applies to a workspace from outside its own tree.

    Attributes:
        prefix: the workspace root relative to the repository's top (``""`` when it
            is the top, or when no repository holds it).
        files: ``(base, lines)`` per ignore file, lowest precedence first; ``base`` is
            the file's directory relative to the repository's top (``""`` for the
            top and for ``info/exclude`` and ``core.excludesFile``).
        tracked: the files git tracks below the workspace, relative to its root (never
            ignored); None outside a repository or when the index cannot be read.
    """

    __slots__ = ("files", "prefix", "tracked")

    def __init__(
        self, prefix: str, files: list[tuple[str, list[str]]], tracked: frozenset[str] | None
    ) -> None:
        self.prefix = prefix
        self.files = files
        self.tracked = tracked


def ignore_lines(data: bytes) -> list[str]:
    """An ignore file's lines: split at LF only (a CR before it goes line by line)."""
    return data.decode("utf-8", "surrogateescape").split("\n")


def git_sources(
    root: str | os.PathLike[str], *, read_inside: Callable[[str, int], bytes | None]
) -> GitSources:
    """The ignore files git applies to ``root`` besides those in its own tree.

    Args:
        root: the workspace root.
        read_inside: ``read_inside(rel, limit)`` reads a file by its path relative to
            ``root`` without following links (the access layer); None when there is no
            regular file of at most ``limit`` bytes.
    """
    real = os.path.realpath(root)

    def read(path: str, *, follow: bool, limit: int = _LIMIT) -> bytes | None:
        rel = os.path.relpath(path, real)
        if rel != os.curdir and not rel.startswith(os.pardir + os.sep):
            return read_inside(rel.replace(os.sep, "/"), limit)
        return _read_host(path, follow=follow, limit=limit)

    top, gitdir, common = _find_repo(real, read)
    files: list[tuple[str, list[str]]] = []
    excludes = _excludes_file(top, gitdir, common, read)
    if excludes is not None:
        data = read(excludes, follow=True)
        if data:
            files.append(("", ignore_lines(data)))
    if top is None or gitdir is None or common is None:
        return GitSources("", files, None)
    data = read(os.path.join(common, "info", "exclude"), follow=True)
    if data:
        files.append(("", ignore_lines(data)))
    prefix = os.path.relpath(real, top).replace(os.sep, "/")
    prefix = "" if prefix == "." else prefix
    # The .gitignore files from the top down to the workspace's parent (the
    # workspace's own is read by the walk). git opens them without following links.
    parts = prefix.split("/") if prefix else []
    for depth in range(len(parts)):
        base = "/".join(parts[:depth])
        data = _read_host(os.path.join(top, *parts[:depth], ".gitignore"), follow=False)
        if data:
            files.append((base, ignore_lines(data)))
    return GitSources(prefix, files, _tracked(gitdir, common, prefix, read))


def _tracked(
    gitdir: str, common: str, prefix: str, read: Callable[..., bytes | None]
) -> frozenset[str] | None:
    """The tracked files below the workspace, relative to it (None: index unreadable)."""
    index = os.path.join(gitdir, "index")
    try:
        st = os.stat(index)
    except OSError:
        return frozenset()  # no index yet: nothing is tracked
    # Parsing a large index costs tens of milliseconds: keep the answer while the
    # file is unchanged (git replaces it by a rename, so its inode changes too).
    key = (index, st.st_ino, st.st_mtime_ns, st.st_size, prefix)
    if key in _TRACKED_CACHE:
        return _TRACKED_CACHE[key]
    data = read(index, follow=True, limit=_INDEX_LIMIT)
    if data is None:
        return None
    config = read(os.path.join(common, "config"), follow=True) or b""
    formats = config_values(config, "extensions", "objectformat")
    hash_size = 32 if formats and formats[-1].lower() == "sha256" else 20
    paths = tracked_paths(data, hash_size=hash_size)
    if paths is None:
        return None
    start = prefix + "/" if prefix else ""
    found = frozenset(p[len(start) :] for p in paths if p.startswith(start))
    if len(_TRACKED_CACHE) >= 8:
        _TRACKED_CACHE.clear()
    _TRACKED_CACHE[key] = found
    return found


_TRACKED_CACHE: dict[tuple[str, int, int, int, str], frozenset[str]] = {}


@functools.lru_cache(maxsize=8)
def tracked_dirs(tracked: frozenset[str]) -> frozenset[str]:
    """Every directory above a tracked file (``a`` and ``a/b`` for ``a/b/c``)."""
    dirs: set[str] = set()
    for path in tracked:
        i = path.rfind("/")
        while i > 0:
            d = path[:i]
            if d in dirs:
                break
            dirs.add(d)
            i = path.rfind("/", 0, i)
    return frozenset(dirs)


def _read_host(path: str, *, follow: bool, limit: int = _LIMIT) -> bytes | None:
    """A regular file outside the workspace, or None (also when over ``limit`` bytes)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        return _read_all(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _find_repo(
    real: str, read: Callable[..., bytes | None]
) -> tuple[str | None, str | None, str | None]:
    """The repository's top, git directory and common git directory, searching up.

    As git's discovery: it stops below a directory of ``$GIT_CEILING_DIRECTORIES``
    and at a filesystem boundary (unless ``$GIT_DISCOVERY_ACROSS_FILESYSTEM``).
    """
    ceilings = {
        os.path.realpath(c) for c in os.environ.get("GIT_CEILING_DIRECTORIES", "").split(":") if c
    }
    d = real
    while True:
        dotgit = os.path.join(d, ".git")
        try:
            st = os.lstat(dotgit)
        except OSError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            if os.path.isfile(os.path.join(dotgit, "HEAD")):
                return d, dotgit, _common_dir(dotgit, read)
        elif st is not None and stat.S_ISREG(st.st_mode):
            # A linked worktree or a submodule: ".git" names the git directory.
            data = read(dotgit, follow=False) or b""
            line = data.split(b"\n", 1)[0].rstrip(b"\r")
            if line.startswith(b"gitdir:"):
                gitdir = os.path.normpath(
                    os.path.join(d, os.fsdecode(line[len(b"gitdir:") :].strip()))
                )
                return d, gitdir, _common_dir(gitdir, read)
        parent = os.path.dirname(d)
        if parent == d or parent in ceilings or not _same_filesystem(d, parent):
            return None, None, None
        d = parent


def _same_filesystem(d: str, parent: str) -> bool:
    if _truthy(os.environ.get("GIT_DISCOVERY_ACROSS_FILESYSTEM")):
        return True
    try:
        return os.stat(d).st_dev == os.stat(parent).st_dev
    except OSError:
        return False


def _common_dir(gitdir: str, read: Callable[..., bytes | None]) -> str:
    data = read(os.path.join(gitdir, "commondir"), follow=True)
    if not data:
        return gitdir
    rel = os.fsdecode(data.split(b"\n", 1)[0].rstrip(b"\r"))
    return os.path.normpath(os.path.join(gitdir, rel))


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _excludes_file(
    top: str | None,
    gitdir: str | None,
    common: str | None,
    read: Callable[..., bytes | None],
) -> str | None:
    """The path ``core.excludesFile`` names (system, global, then repository config)."""
    env = os.environ
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    configs: list[str] = []
    if not _truthy(env.get("GIT_CONFIG_NOSYSTEM")):
        configs.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    if "GIT_CONFIG_GLOBAL" in env:
        configs.append(env["GIT_CONFIG_GLOBAL"])
    else:
        if xdg:
            configs.append(os.path.join(xdg, "git", "config"))
        if home:
            configs.append(os.path.join(home, ".gitconfig"))
    if common is not None:
        configs.append(os.path.join(common, "config"))
    value: str | None = None
    where = _Where(gitdir, read)
    for path in configs:
        if path:
            # An included file only names core.excludesFile, whose patterns can hide
            # files, never show one: following the repository's own includes (which
            # agents cannot write: .git is a governance path) grants nothing.
            value = _config_value(path, read, home, value, where)
    if value is None:
        return os.path.join(xdg, "git", "ignore") if xdg else None
    if not value:
        return None
    expanded = _expand_user(value, home)
    if expanded is None:
        return None
    return os.path.join(top or os.getcwd(), expanded)  # relative: to the top, git's cwd


_EXCLUDES = ("core", "excludesfile")
_INCLUDE = ("include", "path")
_INCLUDE_IF = ("includeif", "path")
_MAX_INCLUDE_DEPTH = 10  # git's own limit on nested includes


class _Where:
    """What an ``includeIf`` condition is tested against: the repository's git
    directory and its current branch (None outside a repository)."""

    def __init__(self, gitdir: str | None, read: Callable[..., bytes | None]) -> None:
        self.gitdir = gitdir
        self._read = read
        self._branch: str | None | bool = False  # False: not read yet

    @property
    def branch(self) -> str | None:
        if self._branch is False:
            self._branch = None
            if self.gitdir is not None:
                head = self._read(os.path.join(self.gitdir, "HEAD"), follow=True) or b""
                ref = head.split(b"\n", 1)[0].rstrip(b"\r")
                if ref.startswith(b"ref: refs/heads/"):
                    self._branch = os.fsdecode(ref[len(b"ref: refs/heads/") :])
        return self._branch  # type: ignore[return-value]

    def holds(self, condition: str, config_dir: str, home: str) -> bool:
        """Whether git would include under ``condition`` (read in a file of
        ``config_dir``), as config.c's include_condition_is_true decides."""
        kind, sep, pattern = condition.partition(":")
        if not sep:
            return False
        if kind in ("gitdir", "gitdir/i"):
            return self.gitdir is not None and _gitdir_matches(
                pattern, self.gitdir, config_dir, home, fold=kind == "gitdir/i"
            )
        if kind == "onbranch":
            branch = self.branch
            if branch is None or not pattern:
                return False
            if pattern.endswith("/"):
                pattern += "**"
            return _glob_matches(pattern, branch, fold=False)
        return False  # hasconfig:… and conditions of later gits: not met


def _glob_matches(pattern: str, text: str, *, fold: bool) -> bool:
    from .._util.wildmatch import compile_glob

    if fold:
        pattern, text = pattern.lower(), text.lower()
    try:
        regex = compile_glob(os.fsencode(pattern))
    except Exception:  # a pattern git could not match either
        return False
    return regex.fullmatch(os.fsencode(text)) is not None


def _gitdir_matches(pattern: str, gitdir: str, config_dir: str, home: str, *, fold: bool) -> bool:
    """``gitdir:`` as git prepares it: ``~/`` is the home, ``./`` the including file's
    directory, a relative pattern gets ``**/`` in front and a trailing ``/`` gets
    ``**``; the git directory matches as it is or as its real path."""
    if pattern.startswith("~/"):
        if not home:
            return False
        pattern = os.path.join(home, pattern[2:])
    elif pattern.startswith("./"):
        pattern = os.path.join(config_dir, pattern[2:])
    elif not os.path.isabs(pattern):
        pattern = "**/" + pattern
    if pattern.endswith("/"):
        pattern += "**"
    candidates = {gitdir, os.path.realpath(gitdir)}
    return any(_glob_matches(pattern, text, fold=fold) for text in candidates)


def _config_value(
    path: str,
    read: Callable[..., bytes | None],
    home: str,
    value: str | None,
    where: _Where,
    *,
    depth: int = 0,
) -> str | None:
    """``core.excludesFile`` after reading ``path`` (``value``: the one before it);
    ``include.path`` and ``includeIf.<condition>.path`` entries are read where they
    stand, as git reads them."""
    data = read(path, follow=True)
    if not data:
        return value
    wanted = {_EXCLUDES}
    if depth < _MAX_INCLUDE_DEPTH:
        wanted |= {_INCLUDE, _INCLUDE_IF}
    config_dir = os.path.dirname(path)
    for name, found, condition in config_entries(data, wanted):
        if name == "core.excludesfile":
            value = found
        elif found and (condition is None or where.holds(condition, config_dir, home)):
            target = _expand_user(found, home)
            if target is not None:
                target = os.path.join(config_dir, target)  # relative: to the file
                value = _config_value(target, read, home, value, where, depth=depth + 1)
    return value


def _expand_user(value: str, home: str) -> str | None:
    """git's ``~/`` and ``~user/`` expansion of a path value (None: unknown user)."""
    if not value.startswith("~"):
        return value
    name, sep, rest = value[1:].partition("/")
    if not name:
        return os.path.join(home, rest) if home else None
    try:
        return os.path.join(pwd.getpwnam(name).pw_dir, rest if sep else "")
    except KeyError:
        return None


def config_values(data: bytes, section: str, key: str) -> list[str]:
    """Every value of ``section.key`` in a git configuration file, in file order.

    Read as git's ``config.c`` reads it: names case-insensitive, ``#``/``;`` comments,
    double quotes with ``\\\\ \\" \\n \\t \\b`` escapes, a backslash before the newline
    continuing the line. Includes are not followed here (:func:`_config_value` follows
    them in the host's files).

    Example:
        >>> data = b'[core]\\n\\texcludesFile = "~/my ignore" ; note\\n'
        >>> config_values(data, "core", "excludesfile")
        ['~/my ignore']
    """
    return [value for _, value, _ in config_entries(data, {(section.lower(), key.lower())})]


def config_entries(data: bytes, wanted: set[tuple[str, str]]) -> list[tuple[str, str, str | None]]:
    """The ``(section.key, value, subsection)`` entries of a git configuration file
    whose ``(section, key)`` is in ``wanted`` (lowercase), in file order.

    A ``[section "sub"]`` entry matches only when ``section`` is ``includeif`` (the one
    subsection section read here), with ``sub`` as its subsection; plain sections
    give None.

    Example:
        >>> config_entries(b'[includeIf "gitdir:~/w/"]\\n\\tpath = w.cfg\\n',
        ...                {("includeif", "path")})
        [('includeif.path', 'w.cfg', 'gitdir:~/w/')]
    """
    text = data.decode("utf-8", "surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    out: list[tuple[str, str, str | None]] = []
    current = ""
    sub: str | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c in "#;":
            i = _line_end(text, i)
        elif c == "[":
            end = text.find("]", i)
            if end < 0:
                return out  # git stops at a broken header
            header = text[i + 1 : end].strip()
            current, sub = _header(header)
            i = end + 1
        else:
            j = i
            while j < n and (text[j].isalnum() or text[j] == "-"):
                j += 1
            name = text[i:j].lower()
            if j == i:
                return out  # not a key: git refuses the file from here
            while j < n and text[j] in " \t":
                j += 1
            value = ""  # "key" alone: git's implicit true, printed as "" (no path)
            if j < n and text[j] == "=":
                value, j = _value(text, j + 1)
            else:
                j = _line_end(text, j)
            if (current, name) in wanted:
                out.append((f"{current}.{name}", value, sub))
            i = j
    return out


def _header(header: str) -> tuple[str, str | None]:
    """A section header's (section, subsection). '[core "sub"]' is a subsection, not
    plain [core]: only includeIf's subsection is kept (its condition); any other gives
    a section no caller asks for."""
    name, space, rest = header.partition(" ")
    if not space and '"' not in header:
        return header.lower(), None
    rest = rest.strip()
    if name.lower() != "includeif" or len(rest) < 2 or rest[0] != '"' or rest[-1] != '"':
        return "", None
    # Inside the quotes git keeps the character after a backslash and drops the backslash.
    chars, k, body = [], 0, rest[1:-1]
    while k < len(body):
        if body[k] == "\\" and k + 1 < len(body):
            k += 1
        chars.append(body[k])
        k += 1
    return "includeif", "".join(chars)


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end + 1


def _value(text: str, i: int) -> tuple[str, int]:
    """A value from ``i`` (after ``=``) to its line's end; returns (value, next index)."""
    out: list[str] = []
    quoted = False
    pending = ""  # whitespace kept only if more value follows, as git trims the end
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            i += 1
            break
        if c == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt == "\n":
                i += 2
                continue
            if nxt == "\r" and text[i + 2 : i + 3] == "\n":
                i += 3
                continue
            out.append(pending + {"n": "\n", "t": "\t", "b": "\b"}.get(nxt, nxt))
            pending = ""
            i += 2
            continue
        if not quoted and c in " \t\r":
            if out:
                pending += c
            i += 1
            continue
        if not quoted and c in "#;":
            i = _line_end(text, i)
            break
        if c == '"':
            quoted = not quoted
            out.append(pending)
            pending = ""
            i += 1
            continue
        out.append(pending + c)
        pending = ""
        i += 1
    return "".join(out), i
