"""Background fsyncs (ctxnb._util.fsync): glibc's AIO thread where there is one, a thread else.

Each case compares with a plain ``os.fsync`` of the same descriptor: the same success,
the same error.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest

from ctxnb._util import fsync as _fsync

GLIBC_LINUX = (
    sys.platform == "linux"
    and hasattr(os, "confstr")
    and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    and sys.maxsize > 2**32
)


def _fsync_error(fd: int) -> int | None:
    try:
        os.fsync(fd)
    except OSError as exc:
        return exc.errno
    return None


def test_glibc_linux_fsyncs_on_the_aio_thread() -> None:
    if not GLIBC_LINUX:
        pytest.skip("glibc's POSIX AIO is used on 64-bit glibc Linux only")
    assert _fsync._aio_lib(), "glibc's aio_fsync was not found"


def test_fsync_later_syncs_and_forgets_the_request(tmp_path: Path) -> None:
    fds = []
    for i in range(40):
        fd = os.open(tmp_path / f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x" * (i + 1))
        fds.append(fd)
    waits = [_fsync.fsync_later(fd) for fd in fds]  # all in flight at once
    for wait in waits:
        wait()
    assert _fsync._IN_FLIGHT == {}
    for fd in fds:
        os.close(fd)
    assert sorted(p.stat().st_size for p in tmp_path.iterdir()) == list(range(1, 41))


def test_fsync_close_later_closes_the_descriptor(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory, as after a rename
    _fsync.fsync_close_later(fd)()
    with pytest.raises(OSError) as caught:
        os.fstat(fd)
    assert caught.value.errno == errno.EBADF


def test_an_fsync_error_is_raised_by_the_wait_as_os_fsync_raises_it() -> None:
    r, w = os.pipe()  # fsync of a pipe fails (EINVAL) on Linux
    try:
        expected = _fsync_error(w)
        assert expected is not None
        wait = _fsync.fsync_later(w)
        with pytest.raises(OSError) as caught:
            wait()
        assert caught.value.errno == expected
        assert _fsync._IN_FLIGHT == {}
    finally:
        os.close(r)
        os.close(w)


def test_a_bad_descriptor_is_refused_like_os_fsync() -> None:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    expected = _fsync_error(fd)
    assert expected == errno.EBADF
    with pytest.raises(OSError) as caught:
        _fsync.fsync_later(fd)()
    assert caught.value.errno == expected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_fsyncs_on_threads(tmp_path: Path) -> None:
    _fsync._aio_lib()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            fd = os.open(tmp_path / "child", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"child")
            _fsync.fsync_close_later(fd)()
            os.write(w, b"ok" if _fsync._aio_lib() is False else b"aio")
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 8) == b"ok"
    os.close(r)
    assert (tmp_path / "child").read_bytes() == b"child"


def test_wait_all_runs_every_wait_and_raises_the_first_error(tmp_path: Path) -> None:
    fds = [os.open(tmp_path, os.O_RDONLY) for _ in range(3)]
    r, w = os.pipe()
    expected = _fsync_error(w)
    waits = [_fsync.fsync_close_later(fds[0]), _fsync.fsync_later(w)]
    waits += [_fsync.fsync_close_later(fd) for fd in fds[1:]]
    with pytest.raises(OSError) as caught:
        _fsync.wait_all(waits)
    assert caught.value.errno == expected
    assert waits == []
    for fd in fds:  # every directory descriptor was closed, after the failure too
        with pytest.raises(OSError):
            os.fstat(fd)
    assert _fsync._IN_FLIGHT == {}
    os.close(r)
    os.close(w)
