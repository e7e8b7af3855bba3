"""The last check of a governed write against writers in place (ctxnb/access/_replace.py).

An outside program writes the file in place between ctxnb's check and its swap, with the
same size and the file's old mtime put back, so that nothing of the file's identity
shows the write: only its bytes (or the lease, where there is one) can. The write must
be refused as stale and the other program's bytes must stay under the name.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxnb.access import _replace
from ctxnb.access.fdio import PathPolicy
from ctxnb.errors import StaleFileError

OLD = b"old content, 32 bytes long.....\n"
THEIRS = b"their edit, also 32 bytes long.\n"


_WRITER = f"""
import os, sys
st = os.stat(sys.argv[1])
fd = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(fd, {THEIRS!r}, 0)
os.close(fd)
os.utime(sys.argv[1], ns=(st.st_atime_ns, st.st_mtime_ns))  # no trace in the identity
"""


@pytest.mark.parametrize("lease", [True, False], ids=["lease", "no-lease"])
def test_a_same_size_write_in_place_between_check_and_swap_is_kept(
    lease: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.txt"
    target.write_bytes(OLD)
    if not lease:  # as for a file the user does not own, or a filesystem without leases
        monkeypatch.setattr(_replace, "_SETLEASE", None)
    real_exchange = _replace._exchange
    written = []

    def exchange_after_a_write(parent: int, a: str, b: str) -> bool:
        if not written:  # once: the swap back must not write again
            # Another process: with a lease held, its open waits for ctxnb (in this
            # process it would wait for itself until the kernel's lease-break-time).
            writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)])
            written.append(writer)
            if lease:
                time.sleep(0.3)  # its open is under way, held back by the lease
            else:
                assert writer.wait(timeout=30) == 0  # it wrote before the swap
        return real_exchange(parent, a, b)

    monkeypatch.setattr(_replace, "_exchange", exchange_after_a_write)
    policy = PathPolicy([tmp_path])
    with pytest.raises(StaleFileError) as err:
        policy.write_bytes_atomic(
            "f.txt",
            b"agent\n",
            check_replaced=True,
            expected_sha256=hashlib.sha256(OLD).hexdigest(),
        )
    assert written and err.value.error_code == "STALE_FILE"
    assert written[0].wait(timeout=30) == 0
    assert target.read_bytes() == THEIRS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]  # no temporary left
