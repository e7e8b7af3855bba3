"""A file of ctxnb's own state that only this workspace's ctxnb wrote: the seal.

Caches that ctxnb keeps in a workspace's ``.ctxnb/`` for the next process (the index's
kept judgments, a session's cold-resume file, the kept rules walk) decide what a new
process believes without looking again, so a forged or copied one must not be used. A
sealed file is used only when all of these hold; otherwise :func:`read` answers None and
the caller does the work again:

* it, ``.ctxnb`` and every directory between are reached without following a link, and
  it is a regular file owned by the effective user and writable by no one else;
* its first line is an HMAC-SHA256, under a 32-byte secret kept in
  ``.ctxnb/judgments.key`` (mode 0600, owned by the user, readable by no one else), of
  the key file's identity (device, inode, change time in ns) and of the rest of the
  file. The key file's identity is new whenever it is made, so a key and a file copied
  or unpacked from elsewhere (a tarball carrying ``.ctxnb/``) never verify. The MAC does
  not name the file: what a file is for is in its body, which each caller keys (a
  session's id, a walk's digest, a rules key), so a sealed file put in another's place
  is refused by its key.

A file is written atomically (a new temporary file, fsynced, renamed over it, the
directory fsynced). No agent tool reads or writes ``.ctxnb/`` (the path policy denies it
to every door and sandboxed commands cannot see it), so an agent can neither forge a
sealed file nor learn the secret; a process running as the user outside ctxnb can, as it
can edit the settings.

What a sealed file holds is the caller's; :func:`code_key` gives callers a key from the
bytes of the modules whose code decides it, so that an upgraded or edited ctxnb does not
believe what an older one wrote (two installs of one release agree).

The MAC is computed by the interpreter's own SHA-256 (:func:`hmac_sha256`): the ``hmac``
and ``hashlib`` modules load OpenSSL, which these callers otherwise have no use for.

Example:
    >>> import pathlib, tempfile
    >>> state = pathlib.Path(tempfile.mkdtemp()) / ".ctxnb"
    >>> write(state, "sessions/note.json", b'{"a":1}')
    >>> read(state, "sessions/note.json")
    b'{"a":1}'
    >>> p = state / "sessions" / "note.json"
    >>> _ = p.write_bytes(p.read_bytes().replace(b'"a":1', b'"a":2'))
    >>> read(state, "sessions/note.json") is None
    True
"""

from __future__ import annotations

import os
import stat as stat_mod
from _operator import _compare_digest  # hmac.compare_digest without loading OpenSSL
from collections.abc import Iterable
from types import ModuleType

from ..hashing import sha256_for, sha256_hex

__all__ = ["KEY_FILE", "MAX_FILE", "code_key", "hmac_sha256", "read", "write"]

#: The workspace's secret, in its ``.ctxnb`` (named for its first user, the kept
#: judgments; one secret seals every file).
KEY_FILE = "judgments.key"
MAX_FILE = 64 << 20  # a larger file is not ours unless its caller says so
_KEY_BYTES = 32
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
# What this process has hashed of its own modules: by file, its stat then and digest.
_CODE: dict[str, tuple[tuple[int, int, int, int], str]] = {}


def hmac_sha256(key: bytes, msg: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) of ``msg`` under ``key`` (at most 64 bytes), hex.

    The same digest as ``hmac.new(key, msg, "sha256")``, by the interpreter's own
    SHA-256: the ``hmac`` and ``hashlib`` modules load OpenSSL (about 2 ms), which an
    unchanged re-index or a cold resume has no other use for; up to a megabyte the
    built-in hash costs less than that load.
    """
    sha = sha256_for(0 if len(msg) < 1 << 20 else len(msg))
    k = key.ljust(64, b"\0")
    inner = sha(bytes(b ^ 0x36 for b in k) + msg).digest()
    return str(sha(bytes(b ^ 0x5C for b in k) + inner).hexdigest())


def code_key(modules: Iterable[ModuleType | str]) -> list[str]:
    """The SHA-256 of each module's file (a module, or its file's path: a module the
    caller need not import; ``""`` for one that cannot be read): a key that changes when
    the code deciding a kept file's content is edited or upgraded."""
    out = []
    for mod in modules:
        path = mod if isinstance(mod, str) else mod.__file__ or ""
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                ident = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                done = _CODE.get(path)
                if done is not None and done[0] == ident:
                    digest = done[1]  # not read again while its stat is the same
                else:
                    digest = sha256_hex(f.read())
                    _CODE[path] = (ident, digest)
        except OSError:
            digest = ""
        out.append(digest)
    return out


def read(state_dir: str | os.PathLike[str], name: str, *, limit: int = MAX_FILE) -> bytes | None:
    """The body sealed at ``name`` (a ``/``-separated path below ``state_dir``, the
    workspace's ``.ctxnb``), or None: missing, reached through a link, not a private
    file of this user, larger than ``limit``, or its MAC does not verify under this
    workspace's secret (see the module's docstring)."""
    try:
        dfd = os.open(state_dir, _DIR_FLAGS)
    except OSError:
        return None
    try:
        secret, key_st = _read_owned(KEY_FILE, dfd, private=True, limit=_KEY_BYTES)
        parent, leaf = _descend(dfd, name, make=False)
        try:
            raw, _ = _read_owned(leaf, parent, private=False, limit=limit)
        finally:
            if parent != dfd:
                os.close(parent)
    except (OSError, ValueError):
        return None
    finally:
        os.close(dfd)
    mac, nl, body = raw.partition(b"\n")
    if len(secret) != _KEY_BYTES or not nl:
        return None
    if not _compare_digest(mac, _mac(secret, key_st, body).encode()):
        return None
    return body


def write(state_dir: str | os.PathLike[str], name: str, body: bytes) -> None:
    """Seal ``body`` at ``name`` below ``state_dir`` (made if missing, as are the
    directories between, mode 0700), making the workspace's secret the first time.
    Raises :class:`OSError` when it cannot (a link on the way is not followed), and
    :class:`ValueError` for a name that is not plainly below ``state_dir``; a reader
    sees the whole old file or the whole new one."""
    os.makedirs(state_dir, exist_ok=True)
    dfd = os.open(state_dir, _DIR_FLAGS)
    try:
        secret, key_st = _secret(dfd)
        parent, leaf = _descend(dfd, name, make=True)
        try:
            data = _mac(secret, key_st, body).encode() + b"\n" + body
            _replace(leaf, parent, data, 0o600)
            os.fsync(parent)
        finally:
            if parent != dfd:
                os.close(parent)
    finally:
        os.close(dfd)


# -- the parts ------------------------------------------------------------------------
def _mac(secret: bytes, key_st: os.stat_result, body: bytes) -> str:
    ident = f"{key_st.st_dev}:{key_st.st_ino}:{key_st.st_ctime_ns}\n".encode()
    return hmac_sha256(secret, ident + body)


def _descend(dir_fd: int, name: str, *, make: bool) -> tuple[int, str]:
    """The directory holding ``name`` below ``dir_fd``, opened without following a
    link (the caller closes it unless it is ``dir_fd``), and the last part of the name."""
    *dirs, leaf = name.split("/")
    if not leaf or any(p in ("", ".", "..") for p in dirs) or leaf in (".", ".."):
        raise ValueError(f"{name!r} is not a plain path below the state directory")
    fd = dir_fd
    try:
        for part in dirs:
            if make:
                try:
                    os.mkdir(part, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
            sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != dir_fd:
                os.close(fd)
            fd = sub
    except BaseException:
        if fd != dir_fd:
            os.close(fd)
        raise
    return fd, leaf


def _read_owned(
    name: str, dir_fd: int, *, private: bool, limit: int
) -> tuple[bytes, os.stat_result]:
    """A regular file of ours, not followed through a link: owned by this user and not
    writable by others (``private``: not readable by them either), at most ``limit``
    bytes."""
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        bad = 0o077 if private else 0o022
        if (
            not stat_mod.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_mode & bad
            or st.st_size > limit
        ):
            raise ValueError(f"{name} is not a private file of this user")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _write_new(name: str, dir_fd: int, data: bytes, mode: int) -> None:
    fd = os.open(name, _NEW_FLAGS, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(name: str, dir_fd: int, data: bytes, mode: int) -> None:
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        _write_new(tmp, dir_fd, data, mode)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _secret(dir_fd: int) -> tuple[bytes, os.stat_result]:
    """The workspace's secret, made (or made again, when the one there is not a private
    file of this user) the first time a file is sealed."""
    try:
        secret, st = _read_owned(KEY_FILE, dir_fd, private=True, limit=_KEY_BYTES)
        if len(secret) == _KEY_BYTES:
            return secret, st
    except (OSError, ValueError):
        pass
    _replace(KEY_FILE, dir_fd, os.urandom(_KEY_BYTES), 0o600)
    return _read_owned(KEY_FILE, dir_fd, private=True, limit=_KEY_BYTES)
