"""Agent paths to canonical sources, and back (DESIGN §3).

An agent sees paths through its own mounts (``/workspace/src/a.py`` inside a
container); ctxnb keys objects by the canonical path on a filesystem (``/home/me/
proj/src/a.py`` on this machine). The resolver translates both ways.

Example:
    >>> r = FilesystemResolver("host", [MountMapping("/workspace", "/home/me/proj", "host")])
    >>> r.resolve("/workspace/src/a.py").path
    '/home/me/proj/src/a.py'
    >>> r.reverse_resolve("/home/me/proj/src/a.py", "host")
    '/workspace/src/a.py'
    >>> r.resolve("/workspace2/x").path   # whole components only
    '/workspace2/x'
"""

from __future__ import annotations

import os
import posixpath
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ._util.record import FrozenRecord
from .errors import ResolverError
from .hashing import sha256_hex

if TYPE_CHECKING:
    from .model import FilesystemSource

__all__ = [
    "FilesystemResolver",
    "MountMapping",
    "default_filesystem_id",
    "doc_path",
    "filesystem_of",
    "normalize_path",
]


class MountMapping(FrozenRecord):
    """One agent-visible prefix and where it really lives.

    Args:
        agent_prefix: the prefix the agent sees, e.g. ``/workspace``.
        canonical_prefix: the same directory on the host, e.g. ``/home/me/proj``.
        filesystem_id: the filesystem the canonical prefix is on.
    """

    __slots__ = ("agent_prefix", "canonical_prefix", "filesystem_id")
    agent_prefix: str
    canonical_prefix: str
    filesystem_id: str

    def __init__(self, agent_prefix: str, canonical_prefix: str, filesystem_id: str) -> None:
        prefixes = []
        for name, value in (("agent_prefix", agent_prefix), ("canonical_prefix", canonical_prefix)):
            if not value or not value.startswith("/"):
                raise ResolverError(
                    f"MountMapping.{name} must be an absolute POSIX path, got {value!r}"
                )
            prefixes.append(normalize_path(value))
        self._fill(*prefixes, filesystem_id)


def normalize_path(path: str) -> str:
    """Normalize a POSIX path lexically: collapse ``//``, ``.`` and ``..``; keep it absolute.

    Raises:
        ResolverError: for a NUL byte or an empty path.
    """
    if not path:
        raise ResolverError("empty path")
    # Already normal (the common case: a stored canonical path): no '//', no component
    # starting with '.', no trailing '/'; normpath would return it unchanged.
    if path[0] == "/" and "//" not in path and "/." not in path and path[-1] != "/":
        if "\x00" not in path:
            return path
    if "\x00" in path:
        raise ResolverError(f"path contains a NUL byte: {path!r}")
    norm = posixpath.normpath(path)
    if norm.startswith("//"):  # POSIX allows a leading '//' to mean something else; we do not
        norm = "/" + norm.lstrip("/")
    return norm


def _within(path: str, prefix: str) -> str | None:
    """The remainder of ``path`` under ``prefix`` on whole components, or None."""
    if prefix == "/":
        return path
    if path == prefix:
        return ""
    if path.startswith(prefix + "/"):
        return path[len(prefix) :]
    return None


@lru_cache(maxsize=1)
def default_filesystem_id() -> str:
    """SHA-256 of ``/etc/machine-id``, falling back to a hash of the host name.

    The environment variable ``CTXNB_FILESYSTEM_ID`` overrides both (useful when
    several machines share one network filesystem and should agree on its id).
    """
    env = os.environ.get("CTXNB_FILESYSTEM_ID")
    if env:
        return env
    for candidate in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            text = Path(candidate).read_text().strip()
        except OSError:
            continue
        if text:
            return sha256_hex(text.encode())
    import socket  # rarely: machines have a machine-id

    return sha256_hex(f"host:{socket.gethostname()}".encode())


def filesystem_of(canonical_path: str, table: Sequence[tuple[str, str]], default: str) -> str:
    """The filesystem a canonical path is on: that of the longest mount (``table``:
    ``(canonical_prefix, filesystem_id)`` pairs) whose canonical prefix covers it on
    whole components, else ``default``. One file has one identity (DESIGN §2), whether
    it is named through its mount or by its host path.

    Example:
        >>> table = [("/home/me/proj", "proj-fs"), ("/home/me/proj/data", "nfs")]
        >>> [filesystem_of(p, table, "host") for p in
        ...  ["/home/me/proj/a.py", "/home/me/proj/data/x.csv", "/home/me/projx/a.py"]]
        ['proj-fs', 'nfs', 'host']
    """
    best, best_len = default, -1
    for prefix, fs in table:
        p = prefix.rstrip("/") or "/"
        if len(p) > best_len and _within(canonical_path, p) is not None:
            best, best_len = fs, len(p)
    return best


class FilesystemResolver:
    """Resolve agent paths to sources on filesystems, and back for display.

    Args:
        default_filesystem_id: the filesystem of paths no mount covers; defaults to
            :func:`default_filesystem_id`.
        mounts: the agent's mount mappings. The longest matching agent prefix wins,
            matched on whole path components.
    """

    def __init__(
        self,
        default_filesystem_id: str | None = None,
        mounts: Sequence[MountMapping] = (),
    ) -> None:
        self._default_fs = default_filesystem_id or globals()["default_filesystem_id"]()
        # Longest prefix first so the first match is the longest one.
        self._mounts = sorted(mounts, key=lambda m: len(m.agent_prefix), reverse=True)
        self._by_canonical = sorted(mounts, key=lambda m: len(m.canonical_prefix), reverse=True)

    @property
    def mounts(self) -> tuple[MountMapping, ...]:
        return tuple(self._mounts)

    def default_filesystem_id(self) -> str:
        """The filesystem id used for paths no mount covers."""
        return self._default_fs

    def filesystem_of(self, canonical_path: str) -> str:
        """The filesystem of a canonical path (see :func:`filesystem_of`)."""
        if not self._mounts:
            return self._default_fs
        table = [(m.canonical_prefix, m.filesystem_id) for m in self._by_canonical]
        return filesystem_of(canonical_path, table, self._default_fs)

    def _match(self, agent_path: str) -> tuple[MountMapping, str] | None:
        for m in self._mounts:
            rest = _within(agent_path, m.agent_prefix)
            if rest is not None:
                return m, rest
        return None

    def as_seen_through(self, agent_path: str, canonical_path: str) -> str | None:
        """``canonical_path`` under the mount ``agent_path`` came through (its longest
        agent prefix), or None when no mount covers ``agent_path`` or that mount does
        not hold ``canonical_path``.

        Example:
            >>> r = FilesystemResolver("fs", [MountMapping("/w", "/home/me/p", "fs")])
            >>> r.as_seen_through("/w/src/app.py", "/home/me/p/src/App.py")
            '/w/src/App.py'
        """
        hit = self._match(normalize_path(agent_path))
        if hit is None:
            return None
        mount = hit[0]
        rest = _within(canonical_path, mount.canonical_prefix)
        if rest is None:
            return None
        return mount.agent_prefix.rstrip("/") + rest if rest else mount.agent_prefix

    def resolve(self, agent_path: str) -> FilesystemSource:
        """The source of an agent-visible absolute path.

        Raises:
            ResolverError: for a relative path, an empty path or a NUL byte.
        """
        if not agent_path.startswith("/"):
            raise ResolverError(
                f"resolve() takes an absolute agent path, got {agent_path!r}; "
                "join it with the agent's working directory first"
            )
        from .model import FilesystemSource  # pydantic: not for the hooks' imports

        path = normalize_path(agent_path)
        hit = self._match(path)
        if hit is None:
            return FilesystemSource(filesystem_id=self._default_fs, path=path)
        mount, rest = hit
        canonical = mount.canonical_prefix.rstrip("/") + rest if rest else mount.canonical_prefix
        return FilesystemSource(filesystem_id=mount.filesystem_id, path=canonical or "/")

    def reverse_resolve(self, canonical_path: str, filesystem_id: str | None = None) -> str:
        """The agent-visible path of a canonical path (itself when no mount covers it)."""
        if not self._mounts:  # the common case on a host: nothing to translate
            return normalize_path(canonical_path)
        fs = filesystem_id or self._default_fs
        path = normalize_path(canonical_path)
        for m in self._by_canonical:
            if m.filesystem_id != fs:
                continue
            rest = _within(path, m.canonical_prefix)
            if rest is not None:
                return m.agent_prefix.rstrip("/") + rest if rest else m.agent_prefix
        return path

    def is_watchable(self, agent_path: str) -> bool:
        """True when the path came through a mount mapping (so the host can see it).

        Paths with no mount are container-internal from the host's point of view.
        A resolver with no mounts at all runs on the host itself: every path is watchable.
        """
        if not self._mounts:
            return True
        return self._match(normalize_path(agent_path)) is not None


def doc_path(path: str) -> str:
    """The docPath key of a path: opaque, lowercase, normalized, one per file in a workspace.

    Backslashes become slashes, ``.`` and ``..`` collapse, duplicate slashes go, a
    leading ``./`` goes, Unicode is NFC-normalized and the result is lowercased. The key
    is never parsed for meaning; compare keys, do not split them.

    Example:
        >>> doc_path("./Src\\\\Main.PY")
        'src/main.py'
    """
    if "\x00" in path:
        raise ResolverError(f"path contains a NUL byte: {path!r}")
    p = unicodedata.normalize("NFC", path.replace("\\", "/"))
    absolute = p.startswith("/")
    p = posixpath.normpath(p) if p else "."
    if not absolute:
        p = p.lstrip("/")
    if p == ".":
        p = ""
    return p.lower()
