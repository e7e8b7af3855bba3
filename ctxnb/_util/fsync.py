"""Fsyncs that run while the caller goes on working, and a few threads for writes that
run side by side.

Private. A governed write fsyncs its new file's data while it prepares the trace record,
and its directory while it commits the store version; the store fsyncs a segment while
it fsyncs the segment's directory. Every caller waits before it reports the work as
done, so durability claims do not change: only the waiting overlaps with other work.

:func:`fsync_later` uses glibc's POSIX AIO where it has it: its own thread runs the
fsync without Python's GIL, so it goes on while this thread computes. A Python thread
could not: it needs the GIL to start the fsync, and gets it only when the caller blocks
(a 5 ms switch interval is longer than the work it would overlap).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_POOL: ThreadPoolExecutor | None = None
_WRITERS: ThreadPoolExecutor | None = None
WRITERS = 8
"""Writes run side by side at most (each fsyncs its own file)."""


def background(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the fsync thread."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxnb-fsync")
    return _POOL.submit(fn, *args)


def fsync_release_later(fd: int) -> Callable[[], None]:
    """Fsync and close ``fd`` on the fsync thread, as soon as the fsync is done: a
    ``flock`` held on it is released then, whether or not anyone waits yet.

    Returns:
        A function that returns once the fsync is done and raises its error if it failed.
    """
    return background(_fsync_close, fd).result


def fsync_close_later(fd: int) -> Callable[[], None]:
    """Fsync ``fd`` in the background (see :func:`fsync_later`); the wait closes it.

    Not for a descriptor that holds a lock others wait for (it is held until the
    wait): see :func:`fsync_release_later`.

    Returns:
        A function that returns once the fsync is done and ``fd`` closed, and raises
        the fsync's error if it failed. Call it exactly once.
    """
    wait = _aio_fsync(fd)
    if wait is None:
        return background(_fsync_close, fd).result

    def done() -> None:
        try:
            wait()
        finally:
            os.close(fd)  # also releases a flock held on it

    return done


def wait_all(waits: list[Callable[[], None]]) -> None:
    """Call every wait in order and empty the list; all run (each may close a
    descriptor), and the first error is raised after the last."""
    pending = list(waits)
    waits.clear()
    error: BaseException | None = None
    for wait in pending:
        try:
            wait()
        except BaseException as exc:  # noqa: BLE001 - raised below, after the rest
            error = error or exc
    if error is not None:
        raise error


def once(wait: Callable[[], None]) -> Callable[[], None]:
    """``wait`` made safe to call again: the second call returns, or raises the same
    error, without waiting again (a step that depends on it may ask first)."""
    outcome: list[BaseException | None] = []

    def waited() -> None:
        if not outcome:
            try:
                wait()
            except BaseException as exc:
                outcome.append(exc)
                raise
            outcome.append(None)
        elif outcome[0] is not None:
            raise outcome[0]

    return waited


def fsync_later(fd: int) -> Callable[[], None]:
    """Start ``fsync(fd)``; the caller keeps ``fd`` open until it has waited.

    Returns:
        A function that returns once the fsync is done and raises its error if it
        failed. Call it exactly once.
    """
    wait = _aio_fsync(fd)
    return wait if wait is not None else background(os.fsync, fd).result


def _fsync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)  # also releases a flock held on it


def _forget_pool() -> None:
    # A forked child has none of its parent's threads; it starts its own pool. glibc's
    # AIO state may be mid-request in the parent: the child fsyncs on threads.
    global _POOL, _AIO
    _POOL = None
    _AIO = False


class _AioCb(ctypes.Structure):
    # glibc's struct aiocb on 64-bit Linux (x86-64 and aarch64 alike): 168 bytes.
    _fields_ = [  # noqa: RUF012 - the ctypes layout
        ("aio_fildes", ctypes.c_int),
        ("aio_lio_opcode", ctypes.c_int),
        ("aio_reqprio", ctypes.c_int),
        ("aio_buf", ctypes.c_void_p),
        ("aio_nbytes", ctypes.c_size_t),
        ("sigev_value", ctypes.c_void_p),
        ("sigev_signo", ctypes.c_int),
        ("sigev_notify", ctypes.c_int),
        ("_sigev_rest", ctypes.c_byte * 48),
        ("_next_prio", ctypes.c_void_p),
        ("_abs_prio", ctypes.c_int),
        ("_policy", ctypes.c_int),
        ("_error_code", ctypes.c_int),
        ("_return_value", ctypes.c_ssize_t),
        ("aio_offset", ctypes.c_int64),
        ("_reserved", ctypes.c_byte * 32),
    ]


_SIGEV_NONE = 1
_AIO: Any = None  # None: not looked up yet; False: unavailable; else the C library
_IN_FLIGHT: dict[int, _AioCb] = {}  # glibc writes a request's result into its aiocb


def _aio_lib() -> Any:
    global _AIO
    if _AIO is None:
        _AIO = False
        glibc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
        if sys.platform == "linux" and glibc and sys.maxsize > 2**32:
            for name in ("libc.so.6", "librt.so.1"):  # glibc < 2.34 keeps AIO in librt
                try:
                    lib = ctypes.CDLL(name, use_errno=True)
                    fns = lib.aio_fsync, lib.aio_error, lib.aio_return, lib.aio_suspend
                except (OSError, AttributeError):
                    continue
                ptr = ctypes.POINTER(_AioCb)
                fns[0].argtypes = [ctypes.c_int, ptr]
                fns[1].argtypes = [ptr]
                fns[2].argtypes = [ptr]
                fns[2].restype = ctypes.c_ssize_t
                fns[3].argtypes = [ctypes.POINTER(ptr), ctypes.c_int, ctypes.c_void_p]
                _AIO = lib
                break
    return _AIO


def _aio_fsync(fd: int) -> Callable[[], None] | None:
    """Queue ``fsync(fd)`` on glibc's AIO thread; None where that is not available."""
    lib = _aio_lib()
    if not lib:
        return None
    cb = _AioCb(aio_fildes=fd, sigev_notify=_SIGEV_NONE)
    if lib.aio_fsync(os.O_SYNC, ctypes.byref(cb)) != 0:
        # Refused (EAGAIN, EINVAL; some glibc versions refuse a read-only descriptor with
        # EBADF): the caller falls back to a thread.
        return None
    _IN_FLIGHT[id(cb)] = cb

    def wait() -> None:
        ref = ctypes.byref(cb)
        pending = (ctypes.POINTER(_AioCb) * 1)(ctypes.pointer(cb))
        while (err := lib.aio_error(ref)) == errno.EINPROGRESS:
            lib.aio_suspend(pending, 1, None)  # ctypes lets the GIL go while it waits
        lib.aio_return(ref)  # frees glibc's record of the request
        del _IN_FLIGHT[id(cb)]
        if err:
            raise OSError(err, os.strerror(err))

    return wait


os.register_at_fork(after_in_child=_forget_pool)


def side_by_side(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``[fn(x) for x in items]``, run on up to :data:`WRITERS` threads kept for the
    process (starting threads for every batch would cost more than the overlap saves);
    the first error is raised once all are done."""
    global _WRITERS
    if _WRITERS is None:
        _WRITERS = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="ctxnb-write")
    return list(_WRITERS.map(fn, items))
