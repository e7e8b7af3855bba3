"""Which git object stores a command may not read: those that hold denied bytes.

A denied file is masked in the sandbox, but git keeps every version it was ever given:
``git show HEAD~1:.env`` prints a ``.env`` removed from the index long ago, and a
submodule's store (``.git/modules/lib/objects``) or a repository nested in the
workspace holds its own history. So, before each command, every git directory in the
workspace (the root's ``.git``, ``.git/modules/**``, nested repositories, bare ones
too: any directory holding ``HEAD``, ``objects/`` and ``refs/`` that the deny list does
not mask already) is asked whether it holds denied bytes:

* **by name**: a path the deny list matches anywhere in its history, its reflogs or
  its index (``git rev-list --objects --all --reflog --indexed-objects``, each path
  matched with the deny globs as the path rules match them, case-insensitively);
* **by content**: the blob of a denied file as it is now (``git cat-file
  --batch-check`` on its hash), reachable or not, under any name: ``git add .env``
  then ``git reset`` leaves it in the store, named by nothing.

A store that does is hidden (an empty read-only directory over ``objects/``, packs
included, and over the stores its ``objects/info/alternates`` names inside the
workspace), and the command's result says which and why. When git cannot answer (not
installed, a repository it refuses, a history too long to read in
:data:`HISTORY_TIMEOUT` seconds) the store is hidden too: ctxnb does not guess. A human
who wants commands to read git's objects anyway sets ``[sandbox] git = "read"``.

The answer for each git directory is kept in ``.ctxnb/cache/git-stores.json`` (out of
every command's and file tool's reach) under a key of what it depends on: the deny
globs, the state of the repository's refs, reflogs and index (their files' sizes,
times and inodes), its object directories' times, and the denied files' ``lstat``;
anything else changes nothing, so a command pays for ``rev-list`` only after a commit,
a fetch or a change to a denied file.

Git's own files are denied to the file tools (``.git``) but bound read-only in the
sandbox so that git works; a configuration file of a git directory that holds a secret
(a remote URL with a token, an ``http.extraHeader``, a password) is masked instead
(:func:`secret_configs`): git runs with its defaults, and the result says so.

Out of scope: a denied file's *earlier* bytes that git holds only as an unreachable
object (added, reset, then changed; ``git gc --prune=now`` removes them); denied files
over :data:`BLOB_MAX_BYTES` or past the first :data:`BLOB_MAX_FILES` are checked by
name only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_mod
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BLOB_MAX_BYTES",
    "BLOB_MAX_FILES",
    "HISTORY_TIMEOUT",
    "HiddenStore",
    "find_gitdirs",
    "is_gitdir",
    "secret_configs",
    "stores_to_hide",
]

HISTORY_TIMEOUT = 60.0
"""Seconds a repository's history may take to read before its store is hidden unread."""

BLOB_MAX_BYTES = 1 << 20
"""Denied files larger than this are looked for in git by name only."""

BLOB_MAX_FILES = 512
"""How many denied files are looked for in git by content."""

# 2: paths are matched as the access layer matches them (folded forms too).
_CACHE_VERSION = 2
_GITDIR_SHAPE = ("HEAD", "objects", "refs")
# What rev-list's answer depends on, inside a git directory (besides objects/).
_STATE_DIRS = ("refs", "logs", "reftable", "worktrees")
_OBJECT_ID = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_NOT_RUN = "git could not be run"
_SHA256_FORMAT = re.compile(r"(?im)^\s*objectformat\s*=\s*sha256\s*$")

Denied = Callable[[str], bool]  # a path in a repository -> the deny list matches it


@dataclass(frozen=True)
class HiddenStore:
    """An object store a command does not see.

    Attributes:
        objects: its workspace-relative directory (``.git/objects``).
        reason: why, for the command's result.
    """

    objects: str
    reason: str


def is_gitdir(names: Iterable[str]) -> bool:
    """Whether a directory listing ``names`` is a git directory's (``HEAD``, ``objects/``,
    ``refs/``): a ``.git``, a submodule's under ``.git/modules``, a bare repository.

    Example:
        >>> is_gitdir(["HEAD", "config", "objects", "refs"]), is_gitdir(["src", "HEAD"])
        (True, False)
    """
    have = set(names)
    return all(n in have for n in _GITDIR_SHAPE)


# The files of a git directory that git reads as configuration or where it writes the
# URLs it fetched from: where a credential given on a remote's URL or in a header lies.
_CONFIG_FILES = ("config", "config.worktree", "FETCH_HEAD")
_CONFIG_MAX_BYTES = 1 << 20


def secret_configs(root: Path, gitdirs: Iterable[str]) -> list[str]:
    """The configuration files of the git directories ``gitdirs`` (and of their linked
    worktrees) whose text holds a secret, as the one redaction finds it: workspace
    relative, to be masked. A file too large to be configuration is masked unread.

    Example:
        >>> import pathlib, subprocess, tempfile
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> _ = subprocess.run(["git", "init", "-q", str(ws)], check=True)
        >>> secret_configs(ws, [".git"])
        []
        >>> url = "https://bot:ghp_" + "Zq8" * 12 + "@github.invalid/a.git"
        >>> _ = subprocess.run(["git", "-C", str(ws), "remote", "add", "o", url], check=True)
        >>> secret_configs(ws, [".git"])
        ['.git/config']
    """
    from ..redaction import has_secrets

    out: list[str] = []
    for gitdir in gitdirs:
        names = [f"{gitdir}/{name}" for name in _CONFIG_FILES]
        try:
            with os.scandir(root / gitdir / "worktrees") as it:
                linked = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            linked = []
        names += [f"{gitdir}/worktrees/{w}/{name}" for w in linked for name in _CONFIG_FILES]
        for rel in names:
            try:
                fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat_mod.S_ISREG(st.st_mode):
                    continue
                data = os.read(fd, _CONFIG_MAX_BYTES + 1)
            except OSError:
                data = b""
            finally:
                os.close(fd)
            if len(data) > _CONFIG_MAX_BYTES or has_secrets(data.decode("utf-8", "replace")):
                out.append(rel)
    return out


def find_gitdirs(root: Path) -> list[str]:
    """The root's ``.git`` (a directory, not the file of a worktree or a submodule) and
    the git directories below its ``modules/`` (submodules, nested ones too).

    Example:
        >>> import pathlib, subprocess, tempfile
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> _ = subprocess.run(["git", "init", "-q", str(ws)], check=True)
        >>> find_gitdirs(ws)
        ['.git']
    """
    top = root / ".git"
    if top.is_symlink() or not top.is_dir():
        return []
    out: list[str] = []

    def visit(rel: str, depth: int) -> None:
        try:
            with os.scandir(root / rel) as it:
                entries = [e for e in it if e.is_dir(follow_symlinks=False) or e.name == "HEAD"]
        except OSError:
            return
        names = [e.name for e in entries]
        if is_gitdir(names):
            out.append(rel)
            if "modules" in names:
                visit(f"{rel}/modules", depth + 1)
        elif depth < 32:  # a submodule's name may hold slashes: its folders lead to it
            for e in entries:
                if e.name != "HEAD":
                    visit(f"{rel}/{e.name}", depth + 1)

    visit(".git", 0)
    return out


def stores_to_hide(
    root: Path,
    gitdirs: Sequence[str],
    *,
    denied: Denied,
    deny: Sequence[str],
    denied_files: Callable[[], Iterator[Any]],
    cache_dir: Path | None,
) -> list[HiddenStore]:
    """The object stores of ``gitdirs`` (workspace-relative) that hold denied bytes.

    Args:
        root: the workspace root.
        gitdirs: its git directories (:func:`find_gitdirs`, and nested ones found by
            the plan's walk).
        denied: whether the deny list matches a path (in a repository's history).
        deny: the deny globs (part of the cache key).
        denied_files: the denied regular files now, as
            :class:`~ctxnb.access.identity.DeniedFile` (their bytes are looked for).
        cache_dir: where the answers are kept (None: not kept).

    Example:
        >>> import pathlib, subprocess, tempfile
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> git = ["git", "-c", "user.name=a", "-c", "user.email=a@a.invalid", "-C", str(ws)]
        >>> _ = (ws / ".env").write_text("TOKEN=1\\n")
        >>> for args in (["init", "-q"], ["add", ".env"], ["commit", "-qm", "x"],
        ...              ["rm", "-q", "--cached", ".env"], ["commit", "-qm", "y"]):
        ...     _ = subprocess.run([*git, *args], check=True)
        >>> [(s.objects, s.reason) for s in stores_to_hide(
        ...     ws, [".git"], denied=lambda p: p.startswith(".env"), deny=[".env*"],
        ...     denied_files=lambda: iter(()), cache_dir=None)]
        [('.git/objects', "the denied '.env' is in its history or index")]
    """
    if not gitdirs:
        return []
    blobs = _denied_blobs(denied_files)
    cache_path = cache_dir / "git-stores.json" if cache_dir is not None else None
    cache = _read_cache(cache_path)
    changed = False
    out: list[HiddenStore] = []
    for gitdir in gitdirs:
        key = _key(root / gitdir, deny, blobs)
        hit = cache.get(gitdir)
        if isinstance(hit, dict) and hit.get("key") == key and "reason" in hit:
            reason = hit["reason"]
        else:
            reason = _holds_denied(root / gitdir, denied, blobs)
            if not (reason or "").startswith(_NOT_RUN):  # git missing: ask again next time
                cache[gitdir] = {"key": key, "reason": reason}
                changed = True
        if isinstance(reason, str):
            out.append(HiddenStore(f"{gitdir}/objects", reason))
            out += _alternates(root, gitdir)
    if changed and cache_path is not None:
        _write_cache(cache_path, {g: cache[g] for g in gitdirs if g in cache})
    unique: dict[str, HiddenStore] = {}
    for store in out:
        unique.setdefault(store.objects, store)
    return list(unique.values())


# -- what a repository holds -----------------------------------------------------------
def _git_env() -> dict[str, str]:
    # The caller's GIT_DIR, GIT_OBJECT_DIRECTORY, GIT_CONFIG_* … would point git at
    # another repository or change what it reads; only the isolation tests rely on stays.
    keep = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in keep}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    return env


def _git(gitdir: Path, *args: str) -> list[str]:
    # No hook, fsmonitor or filter runs for these commands; fsmonitor is off all the same.
    return ["git", "--no-optional-locks", "-c", "core.fsmonitor=false",
            f"--git-dir={gitdir}", *args]  # fmt: skip


def _holds_denied(gitdir: Path, denied: Denied, blobs: list[tuple[str, bytes]]) -> str | None:
    """Why the store of ``gitdir`` must be hidden, or None."""
    found = _history_hit(gitdir, denied)
    if found is not None:
        return found
    return _blob_hit(gitdir, blobs)


def _history_hit(gitdir: Path, denied: Denied) -> str | None:
    import tempfile

    argv = _git(gitdir, "rev-list", "--objects", "--all", "--reflog", "--indexed-objects")
    with tempfile.TemporaryFile() as errors:  # a file: a flood of warnings cannot stall git
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=_git_env(),
            )
        except OSError as e:
            return f"{_NOT_RUN} to read its history ({e.strerror}), so it is hidden"
        hit = _scan_rev_list(proc, denied)
        errors.seek(0)
        err = errors.read(4096)
    if hit is not None:
        return hit
    if proc.returncode != 0:
        if proc.returncode < 0:
            return f"its history could not be read within {HISTORY_TIMEOUT:.0f} s, so it is hidden"
        first = err.decode("utf-8", "replace").strip().splitlines()[:1]
        why = f": {first[0][:200]}" if first else ""
        return f"git could not read its history{why}; so it is hidden"
    return None


def _scan_rev_list(proc: subprocess.Popen[bytes], denied: Denied) -> str | None:
    """Read ``rev-list --objects`` until a denied path; the process is ended either way."""
    import threading

    timer = threading.Timer(HISTORY_TIMEOUT, proc.kill)
    timer.start()
    hit: str | None = None
    # Each version of a file is listed under its path: a path is judged once.
    judged: set[bytes] = set()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            oid, sep, raw = line.rstrip(b"\n").partition(b" ")
            if not _OBJECT_ID.fullmatch(oid):
                # A path with a line break, or output git never writes: no guess.
                hit = "its history has a name ctxnb cannot read, so it is hidden"
                break
            if not raw or raw in judged:
                continue
            judged.add(raw)
            path = raw.decode("utf-8", "surrogateescape")
            if denied(path):
                hit = f"the denied {path!r} is in its history or index"
                break
        if hit is not None:
            proc.kill()
        proc.communicate()
    finally:
        timer.cancel()
    return hit


def _blob_hit(gitdir: Path, blobs: list[tuple[str, bytes]]) -> str | None:
    if not blobs:
        return None
    sha256 = _object_format(gitdir) == "sha256"
    ids = [(rel, _blob_id(data, sha256)) for rel, data in blobs]
    try:
        p = subprocess.run(
            _git(gitdir, "cat-file", "--batch-check"),
            input="".join(f"{oid}\n" for _, oid in ids).encode(),
            capture_output=True,
            timeout=HISTORY_TIMEOUT,
            env=_git_env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return "git could not be asked for the denied files' bytes, so it is hidden"
    if p.returncode != 0:
        return "git could not be asked for the denied files' bytes, so it is hidden"
    lines = p.stdout.decode("utf-8", "replace").splitlines()
    for (rel, oid), line in zip(ids, lines, strict=False):
        if line.startswith(oid) and not line.endswith(" missing"):
            return f"it holds the bytes of the denied {rel!r}"
    return None


def _blob_id(data: bytes, sha256: bool) -> str:
    h = hashlib.sha256() if sha256 else hashlib.sha1()  # noqa: S324 - git's object name
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def _object_format(gitdir: Path) -> str:
    try:
        text = (gitdir / "config").read_text("utf-8", "replace")
    except OSError:
        return "sha1"
    return "sha256" if _SHA256_FORMAT.search(text) else "sha1"


def _denied_blobs(files: Callable[[], Iterator[Any]]) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for f in files():
        if len(out) >= BLOB_MAX_FILES:
            break
        if f.stat.st_size > BLOB_MAX_BYTES:
            continue
        data = f.read(BLOB_MAX_BYTES)
        if data is not None:
            out.append((f.rel, data))
    return out


def _alternates(root: Path, gitdir: str) -> list[HiddenStore]:
    """The object stores inside the workspace that ``gitdir``'s store borrows from."""
    objects = root / gitdir / "objects"
    try:
        text = (objects / "info" / "alternates").read_text("utf-8", "replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        real = Path(os.path.realpath(objects / line))
        if real.is_dir() and real != root and root in real.parents:
            rel = real.relative_to(root).as_posix()
            out.append(HiddenStore(rel, f"{gitdir}/objects borrows objects from it"))
    return out


# -- the cache -------------------------------------------------------------------------
def _stat_sig(path: Path, rel: str, out: list[Any]) -> None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return
    out.append([rel, st.st_size, st.st_mtime_ns, st.st_ino])


def _tree_sig(base: Path, rel: str, out: list[Any]) -> None:
    try:
        with os.scandir(base / rel) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        sub = f"{rel}/{e.name}"
        if e.is_dir(follow_symlinks=False):
            _tree_sig(base, sub, out)
        else:
            _stat_sig(base / sub, sub, out)


def _key(gitdir: Path, deny: Sequence[str], blobs: list[tuple[str, bytes]]) -> str:
    """What the answer for ``gitdir`` depends on, hashed."""
    sig: list[Any] = [_CACHE_VERSION, list(deny)]
    try:
        with os.scandir(gitdir) as it:
            top = sorted(e.name for e in it if e.is_file(follow_symlinks=False))
    except OSError:
        top = []
    for name in top:  # HEAD, packed-refs, index, shallow, config …
        _stat_sig(gitdir / name, name, sig)
    for name in _STATE_DIRS:
        _tree_sig(gitdir, name, sig)
    # New objects (a loose one in objects/xx, a pack) change their directory's time.
    objects = gitdir / "objects"
    _stat_sig(objects, "objects", sig)
    try:
        with os.scandir(objects) as it:
            subdirs = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        subdirs = []
    for name in subdirs:
        _stat_sig(objects / name, f"objects/{name}", sig)
    _stat_sig(objects / "info" / "alternates", "objects/info/alternates", sig)
    for rel, data in blobs:
        sig.append([rel, hashlib.sha256(data).hexdigest()])
    return hashlib.sha256(json.dumps(sig, separators=(",", ":")).encode()).hexdigest()


def _read_cache(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("version") != _CACHE_VERSION:
        return {}
    stores = raw.get("stores")
    return dict(stores) if isinstance(stores, dict) else {}


def _write_cache(path: Path, stores: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": _CACHE_VERSION, "stores": stores}))
        os.replace(tmp, path)
    except OSError:
        pass  # only a cache: the next command asks git again
