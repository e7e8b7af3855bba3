"""The git revision a trace record names: the workspace's HEAD, read cheaply.

An Agent Trace record carries the ``vcs`` revision of the repository it was made in.
HEAD is read from ``.git`` as data (refs, packed refs, worktree ``gitdir`` files), cached
by the files' ``stat``, and asked of ``git rev-parse`` only when the files do not say.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def _find_git_root(start: str) -> str | None:
    """The nearest directory from ``start`` up that holds a ``.git`` (looked for now:
    a ``git init`` or a removed ``.git`` is seen on the next call)."""
    directory = start
    while True:
        # os.access: the existence test of os.path.exists (a stat, following a link),
        # without raising and catching an exception for each directory that has none.
        if os.access(os.path.join(directory, ".git"), os.F_OK):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def git_head_revision(repo_root: str | Path) -> str | None:
    """The commit sha ``HEAD`` points at, or None (no repository, or no commit yet).

    Reads ``.git/HEAD`` and the ref files directly, which costs a few file reads;
    falls back to ``git rev-parse HEAD`` for layouts it does not know.

    Example:
        >>> import tempfile
        >>> git_head_revision(tempfile.mkdtemp()) is None
        True
    """
    root = _find_git_root(os.path.realpath(repo_root))
    return None if root is None else _head_revision_at(Path(root))


def _head_revision_at(root: Path) -> str | None:
    """The ``HEAD`` revision of the repository whose top directory is ``root``."""
    # Every trace record needs the revision: remember it, and trust the memory while
    # the files it was read from (HEAD, the ref, packed-refs) have not changed.
    cached = _HEAD_CACHE.get(root)
    if cached is not None and all(_stat_key(p) == key for p, key in cached[0]):
        return cached[1]
    seen: list[Path] = []
    try:
        sha = _read_head(root / ".git", seen)
    except (OSError, ValueError):
        return _rev_parse_head(root)
    _HEAD_CACHE[root] = (tuple((p, _stat_key(p)) for p in seen), sha)
    return sha


_HEAD_CACHE: dict[
    Path, tuple[tuple[tuple[Path, tuple[int, int, int] | None], ...], str | None]
] = {}


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _read_head(dot_git: Path, seen: list[Path] | None = None) -> str | None:
    """Resolve HEAD by reading files; raises ValueError for layouts it cannot follow.

    Every file looked at (found or not) is added to ``seen``.
    """
    seen = seen if seen is not None else []
    seen.append(dot_git)
    if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
        content = dot_git.read_text(encoding="utf-8").strip()
        if not content.startswith("gitdir:"):
            raise ValueError("unknown .git file")
        git_dir = (dot_git.parent / content.removeprefix("gitdir:").strip()).resolve()
    else:
        git_dir = dot_git
    common = git_dir
    seen.append(git_dir / "commondir")
    if (git_dir / "commondir").is_file():
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    seen.append(git_dir / "HEAD")
    head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    for _ in range(5):  # symbolic refs may chain; git itself caps the depth
        if _SHA_RE.match(head):
            return head
        if not head.startswith("ref:"):
            raise ValueError("unknown HEAD format")
        ref = head.removeprefix("ref:").strip()
        for base in (git_dir, common):
            ref_file = base / ref
            seen.append(ref_file)
            if ref_file.is_file():
                head = ref_file.read_text(encoding="utf-8").strip()
                break
        else:
            seen.append(common / "packed-refs")
            packed = _packed_ref(common / "packed-refs", ref)
            if packed is None:
                return None  # an unborn branch: the repository has no commit yet
            head = packed
    raise ValueError("symbolic ref chain too long")


def _packed_ref(packed_refs: Path, ref: str) -> str | None:
    try:
        text = packed_refs.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        if line.startswith(("#", "^")):
            continue
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha
    return None


def _rev_parse_head(root: Path) -> str | None:
    import subprocess  # rarely: HEAD is read from .git's files first

    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and _SHA_RE.match(sha) else None
