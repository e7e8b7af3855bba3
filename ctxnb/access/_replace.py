"""The last step of a governed write: replace a file only if nobody else changed it.

Private to :mod:`ctxnb.access.fdio`. Right before the rename, the file being replaced
is checked again (same inode, size and mtime as when the write began, and the content
the edit was computed from). Where the kernel offers ``renameat2(RENAME_EXCHANGE)``
the new file is then *swapped* in, and the file it displaced is checked once more: a
save by another program that landed between the check and the swap is swapped back,
so it is never lost, and reported like the others. Without the swap (other systems,
filesystems without it) a plain rename follows the check.

A save *in place* (another program opens the file, truncates or appends, writes) goes
to the inode, not the name, so the check also has to know who may be writing to the
inode. On Linux the file is read through a descriptor that holds a read *lease*
(``fcntl(F_SETLEASE, F_RDLCK)``) from before the check until after the swap:

* the lease is refused while any process has the file open for writing (a descriptor
  opened before the check, a writable shared mapping): the write is then stale;
* while it is held, another process's ``open`` for writing (or ``truncate``) is held
  back by the kernel and *breaks* the lease, which ``F_GETLEASE`` shows. A break seen
  after the swap means that writer resolved the old file: it is swapped back before the
  lease is released, so the writer's bytes land in the file under its name.

The lease's signal is set to ``SIGURG``, whose default action is to ignore it (the
default, ``SIGIO``, would end the process). Where a lease cannot be had (not the
file's owner without ``CAP_LEASE``, a filesystem without leases, other systems) the
displaced file's content is read again after the swap instead, which catches a write
that landed before that read but not one made later through an older descriptor.

What remains (see docs/store-format.md, "Outside edits"): a writer whose ``open``
resolved the name before the swap and reaches the kernel's lease check only after the
last ``F_GETLEASE`` (the two are a few microseconds apart); and, without the swap, a
writer that opens the file between the lease check and the rename.

A change is a :class:`ctxnb.errors.StaleFileError` (``STALE_FILE``) carrying the other
program's bytes in ``outside``, so that the caller stores them as a version.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import stat
import sys
from collections.abc import Callable

from ..errors import StaleFileError
from ..hashing import sha256_hex
from .pathrules import _deny

_RENAME_EXCHANGE = 2


def _renameat2() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_EXCHANGE = _renameat2()

try:
    import fcntl

    _SETLEASE: int | None = fcntl.F_SETLEASE
    _GETLEASE = fcntl.F_GETLEASE
    _SETSIG = getattr(fcntl, "F_SETSIG", 10)  # 10 on every Linux architecture
    _RDLCK, _UNLCK = fcntl.F_RDLCK, fcntl.F_UNLCK
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    _SETLEASE = None


class _Writing(Exception):
    """Another process has the file open for writing."""


def _lease(fd: int) -> bool:
    """Take a read lease on ``fd``'s file; False where the system gives none.

    Raises:
        _Writing: another process has the file open for writing.
    """
    if _SETLEASE is None:
        return False
    try:
        # A broken lease signals its holder; SIGURG is ignored unless handled.
        fcntl.fcntl(fd, _SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, _SETLEASE, _RDLCK)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EBUSY):
            raise _Writing from None
        return False  # EACCES (not the owner), EINVAL (no leases here), ...
    return True


def _broken(fd: int) -> bool:
    """Whether another process has opened the leased file for writing since."""
    return bool(fcntl.fcntl(fd, _GETLEASE) != _RDLCK)


def _release(fd: int) -> None:
    if _SETLEASE is None:  # pragma: no cover - never leased
        return
    try:
        fcntl.fcntl(fd, _SETLEASE, _UNLCK)
    except OSError:  # closing the descriptor releases it too
        pass


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _read(name: str, parent: int, rel: str) -> tuple[bytes, os.stat_result] | None:
    """The bytes and ``fstat`` of the regular file ``name``, or None when nothing is
    there. A FIFO or device swapped in is refused, not read: its bytes are no file's
    content, and the caller stores what it reads here as a version."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _deny(rel, "special-file", "another program put a non-regular file there")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _stale(rel: str, expected: str | None, outside: bytes | None, why: str) -> StaleFileError:
    actual = sha256_hex(outside) if outside is not None else None
    err = StaleFileError(
        f"{rel} was changed by another program while this write was in progress ({why}); "
        "nothing was written, and the other program's version was kept",
        expected=expected,
        actual=actual,
    )
    err.outside = outside
    return err


def _exchange(parent: int, a: str, b: str) -> bool:
    """Swap two names atomically; False when the system cannot."""
    if _EXCHANGE is None:
        return False
    rc = _EXCHANGE(parent, os.fsencode(a), parent, os.fsencode(b), _RENAME_EXCHANGE)  # type: ignore[operator]
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def check_unchanged(parent: int, name: str, *, rel: str, expected_sha256: str) -> None:
    """Raise :class:`StaleFileError` unless ``name`` (in ``parent``) holds the content
    ``expected_sha256``: the last check before a governed deletion."""
    now = _read(name, parent, rel)
    if now is None:
        raise _stale(rel, expected_sha256, None, "it was deleted")
    if sha256_hex(now[0]) != expected_sha256:
        raise _stale(rel, expected_sha256, now[0], "its content changed")


def replace_checked(
    parent: int,
    tmp: str,
    name: str,
    *,
    rel: str,
    began: os.stat_result | None,
    expected_sha256: str | None,
    before: Callable[[], object] | None = None,
) -> None:
    """Rename ``tmp`` over ``name`` (in directory ``parent``) if ``name`` is unchanged.

    ``began``: the file's ``lstat`` when the write began. ``expected_sha256``: the
    content the edit was based on (None: it was based on no file, and none may exist).
    ``before``: called after the check and before the rename (the commit that must be
    durable first); if it raises, nothing is renamed. On a conflict ``tmp`` is removed
    by the caller and the error says what was found.
    """
    if expected_sha256 is None:  # the edit was computed for a new file
        now = _read(name, parent, rel)
        if now is not None or began is not None:
            raise _stale(rel, None, now[0] if now else None, "it was created")
        if before is not None:
            before()
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except FileNotFoundError:
        raise _stale(rel, expected_sha256, None, "it was deleted") from None
    leased = False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _deny(rel, "special-file", "another program put a non-regular file there")
        try:
            leased = _lease(fd)
        except _Writing:
            raise _stale(
                rel, expected_sha256, _read_fd(fd), "another program has it open for writing"
            ) from None
        data = _read_fd(fd)
        if began is None:
            raise _stale(rel, expected_sha256, None, "it was deleted")
        if _identity(st) != _identity(began) or sha256_hex(data) != expected_sha256:
            raise _stale(rel, expected_sha256, data, "its content or identity changed")
        if before is not None:
            before()  # the store version and trace record, durable before the swap
        if not _exchange(parent, tmp, name):
            if leased and _broken(fd):
                raise _stale(rel, expected_sha256, data, "another program opened it to write")
            os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            return
        # ``tmp`` now names what was displaced: the checked file, unless a save by
        # rename landed between the check and the swap.
        displaced = os.stat(tmp, dir_fd=parent, follow_symlinks=False)
        why = ""
        if _identity(displaced)[:2] != _identity(st)[:2]:
            why = "it was saved meanwhile"
        elif leased and _broken(fd):
            # A writer's open of the old file waits for the lease: swapped back first,
            # its bytes land in the file under its name.
            why = "another program opened it to write"
        elif _identity(displaced) != _identity(st) or (
            # Held and not broken, the lease rules out any writer since the check: no
            # descriptor was open for writing then, and none was opened since.
            not leased and sha256_hex(_read_fd(fd)) != expected_sha256
        ):
            why = "it was written to in place meanwhile"
        if not why:
            # Unlinked here, though it costs about 0.1 ms on ext4: handed to the fsync
            # thread (with a descriptor of its own), a governed write measured 30-60 us
            # slower on two cores, waited for or not: the GIL handoffs cost more than
            # the overlap saves, and the journal does the same work either way.
            os.unlink(tmp, dir_fd=parent)
            return
        try:
            outside = _read(tmp, parent, rel)
        finally:
            _exchange(parent, tmp, name)  # put the other program's version back
        raise _stale(rel, expected_sha256, outside[0] if outside else None, why)
    finally:
        if leased:
            _release(fd)
        os.close(fd)


def _read_fd(fd: int) -> bytes:
    """All of ``fd``'s file, from its start (``pread``: the offset is not used)."""
    chunks, pos = [], 0
    while chunk := os.pread(fd, 1 << 20, pos):
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)
