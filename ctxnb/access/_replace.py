"""The last step of a governed write: replace a file only if nobody else changed it.

Private to :mod:`ctxnb.access.fdio`. Right before the rename, the file being replaced
is checked again (same inode, size and mtime as when the write began, and the content
the edit was computed from). Where the kernel offers ``renameat2(RENAME_EXCHANGE)``
the new file is then *swapped* in, and the file it displaced is checked once more: a
save by another program that landed between the check and the swap is swapped back,
so it is never lost, and reported like the others. Without the swap (other systems,
filesystems without it) a plain rename follows the check.

A change is a :class:`ctxnb.errors.StaleFileError` (``STALE_FILE``) carrying the other
program's bytes in ``outside``, so that the caller stores them as a version.
"""

from __future__ import annotations

import ctypes
import errno
import os
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
    now = _read(name, parent, rel)
    if expected_sha256 is None:  # the edit was computed for a new file
        if now is not None or began is not None:
            raise _stale(rel, None, now[0] if now else None, "it was created")
        if before is not None:
            before()
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        return
    if began is None or now is None:
        raise _stale(rel, expected_sha256, None, "it was deleted")
    data, st = now
    if _identity(st) != _identity(began) or (
        expected_sha256 is not None and sha256_hex(data) != expected_sha256
    ):
        raise _stale(rel, expected_sha256, data, "its content or identity changed")
    if before is not None:
        before()
    if not _exchange(parent, tmp, name):
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        return
    # ``tmp`` now names what was displaced: the checked file, unless a save landed
    # between the check and the swap.
    displaced = os.stat(tmp, dir_fd=parent, follow_symlinks=False)
    if _identity(displaced) == _identity(st):
        # Unlinked here, though it costs about 0.1 ms on ext4: handed to the fsync
        # thread (with a descriptor of its own), a governed write measured 30-60 us
        # slower on two cores, waited for or not: the GIL handoffs cost more than the
        # overlap saves, and the journal does the same work either way.
        os.unlink(tmp, dir_fd=parent)
        return
    try:
        outside = _read(tmp, parent, rel)
    finally:
        _exchange(parent, tmp, name)  # put the other program's version back
    raise _stale(rel, expected_sha256, outside[0] if outside else None, "it was saved meanwhile")
