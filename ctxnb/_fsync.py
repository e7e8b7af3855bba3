"""One background thread for fsyncs that may run while the caller goes on working, and a
few threads for writes that run side by side.

Private. The store fsyncs a segment while it fsyncs the segment's directory; a governed
write fsyncs its trace line while it records the call. Every caller waits for its
future before it reports the work as done, so durability claims do not change: only
the waiting overlaps with other work.
"""

from __future__ import annotations

import os
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


def fsync_close_later(fd: int) -> Callable[[], None]:
    """Fsync and close ``fd`` on the fsync thread.

    Returns:
        A function that returns once the fsync is done and raises its error if it failed.
    """
    return background(_fsync_close, fd).result


def _fsync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)  # also releases a flock held on it


def _forget_pool() -> None:
    # A forked child has none of its parent's threads; it starts its own pool.
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


def side_by_side(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``[fn(x) for x in items]``, run on up to :data:`WRITERS` threads kept for the
    process (starting threads for every batch would cost more than the overlap saves);
    the first error is raised once all are done."""
    global _WRITERS
    if _WRITERS is None:
        _WRITERS = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="ctxnb-write")
    return list(_WRITERS.map(fn, items))
