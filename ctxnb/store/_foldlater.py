"""A fold handed off by a writer that exits before its inline transactions are due.

Private to the store. The snapshot rule (``docs/store-format.md``) promises that every
inline transaction is in Parquet within the fold interval (``CTXNB_FOLD_AFTER``, 30 s).
An :class:`~ctxnb.store.objectstore.ObjectStore` keeps that promise with a timer, but a
process that commits inline and exits at once (the Claude Code post hook, one process
per edit) has no timer that outlives it. Such a writer calls :func:`hand_off` after its
commit: unless a waiter is already there, it starts one, a detached process (its own
session, no inherited descriptors, so the hook's caller does not wait for it) that
sleeps until the oldest inline transaction is due, folds everything that waits, and
exits once nothing does.

One waiter per store: it holds ``flock`` on the store's ``ctxnb-store.json`` (always
there, and no new file that an older ctxnb would refuse to find in the store). A writer
that finds the lock held commits before it looks, and the waiter looks at the log again
after it lets the lock go: either the writer saw the lock free and starts a waiter, or
the waiter sees the writer's transaction and stays.

The waiter runs ``main(STORE_DIR)`` (or ``python -I -m ctxnb.store._foldlater STORE_DIR``).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time

from . import _log as tlog
from ._append import _waiting

__all__ = ["hand_off", "main", "oldest_unfolded_us"]

MARKER = "ctxnb-store.json"


def oldest_unfolded_us(store_dir: str) -> int | None:
    """When the oldest inline transaction not yet folded was committed (µs since 1970),
    from the log's tail; None when none waits (or there is no log)."""
    try:
        fd = os.open(os.path.join(store_dir, tlog.TXLOG), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        return _waiting(fd, size)[2] if size else None
    finally:
        os.close(fd)


def _lock(store_dir: str) -> int | None:
    """The waiter's lock, taken without waiting (None: another process holds it)."""
    try:
        fd = os.open(os.path.join(store_dir, MARKER), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def hand_off(store_dir: str | os.PathLike[str]) -> bool:
    """After an inline commit: start a waiter unless one is there. Returns whether one
    was started."""
    where = os.fspath(store_dir)
    fd = _lock(where)
    if fd is None:
        return False  # a waiter holds it, and will see this commit (see the module)
    os.close(fd)  # the waiter takes it itself; two that race: the second one leaves
    # The child forks the waiter and exits at once, so this process reaps it now (an
    # in-process caller, a notebook or a server, keeps no zombie and no Popen behind).
    subprocess.run(
        [sys.executable, "-I", "-c", _SPAWN, where],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,
        check=False,
        timeout=60,
    )
    return True


_SPAWN = (
    "import os, sys\n"
    "if os.fork():\n"
    "    os._exit(0)\n"
    "from ctxnb.store._foldlater import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _fold(store_dir: str) -> None:
    from .objectstore import ObjectStore  # pyarrow: in the waiter only

    # Opening folds what is overdue; closing folds whatever else waits.
    ObjectStore(store_dir, create=False, fold_after=None).close()


def run(store_dir: str, fold_after: float) -> None:
    """Wait for and fold the store's inline transactions until none waits."""
    fd = _lock(store_dir)
    if fd is None:
        return
    try:
        while True:
            oldest = oldest_unfolded_us(store_dir)
            if oldest is None:
                # Let go, then look once more: a writer that found the lock held
                # committed before it looked (see the module).
                os.close(fd)
                fd = None
                if oldest_unfolded_us(store_dir) is None:
                    return
                fd = _lock(store_dir)
                if fd is None:
                    return  # another waiter took over
                continue
            wait = oldest / 1e6 + fold_after - time.time()
            if wait > 0:
                time.sleep(min(wait, fold_after) + 0.01)
                continue
            try:
                _fold(store_dir)
            except Exception:  # noqa: BLE001 - a damaged store: the next opener reports it
                return
            if oldest_unfolded_us(store_dir) == oldest:
                return  # nothing moved (the store refused to fold): no busy loop
    finally:
        if fd is not None:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m ctxnb.store._foldlater STORE_DIR\n")
        return 2
    fold_after = tlog.fold_after_seconds()
    if fold_after is None:
        return 0
    run(args[0], fold_after)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
