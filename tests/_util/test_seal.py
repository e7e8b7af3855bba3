"""The seal of ctxnb's kept files (``ctxnb/_util/seal.py``), attacked where it stands.

The callers' tests (kept judgments, the cold resume, the kept rules walk) attack what a
forged file would change; these attack the seal's own guarantees: a write cannot be
steered through a link, a name cannot climb out of ``.ctxnb``, and a file sealed under
one secret does not verify under a new one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import pytest

from ctxnb._util import seal


def test_a_sealed_body_reads_back_and_its_mac_is_hmac_sha256(tmp_path: Path) -> None:
    state = tmp_path / ".ctxnb"
    seal.write(state, "sessions/x.json", b"body")
    assert seal.read(state, "sessions/x.json") == b"body"
    key = state / seal.KEY_FILE
    st = key.stat()
    ident = f"{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}\n".encode()
    want = hmac.new(key.read_bytes(), ident + b"body", hashlib.sha256).hexdigest()
    assert (state / "sessions" / "x.json").read_bytes() == want.encode() + b"\nbody"
    assert (key.stat().st_mode & 0o777, (state / "sessions").stat().st_mode & 0o777) == (
        0o600,
        0o700,
    )


def test_a_write_is_not_steered_through_a_linked_directory(tmp_path: Path) -> None:
    # Someone who can make links in .ctxnb cannot have ctxnb write its file elsewhere.
    state, outside = tmp_path / ".ctxnb", tmp_path / "outside"
    state.mkdir()
    outside.mkdir()
    (state / "sessions").symlink_to(outside)
    with pytest.raises(OSError):
        seal.write(state, "sessions/x.json", b"body")
    assert list(outside.iterdir()) == []


def test_a_linked_state_directory_is_neither_read_nor_written(tmp_path: Path) -> None:
    real, state = tmp_path / "real", tmp_path / ".ctxnb"
    seal.write(real, "x.json", b"body")
    state.symlink_to(real)
    assert seal.read(state, "x.json") is None
    with pytest.raises(OSError):
        seal.write(state, "x.json", b"other")
    assert seal.read(real, "x.json") == b"body"


@pytest.mark.parametrize("name", ["../x.json", "sessions/../../x.json", "a//b", "a/", "."])
def test_a_name_that_is_not_plainly_below_the_state_directory_is_refused(
    tmp_path: Path, name: str
) -> None:
    state = tmp_path / "ws" / ".ctxnb"
    with pytest.raises(ValueError):
        seal.write(state, name, b"body")
    assert seal.read(state, name) is None
    assert not (tmp_path / "ws" / "x.json").exists() and not (tmp_path / "x.json").exists()


def test_a_new_secret_does_not_verify_what_the_old_one_sealed(tmp_path: Path) -> None:
    # A key file that is not private is replaced by a new secret on the next write;
    # what the old one sealed is then no longer believed.
    state = tmp_path / ".ctxnb"
    seal.write(state, "a.json", b"a")
    os.chmod(state / seal.KEY_FILE, 0o644)
    assert seal.read(state, "a.json") is None
    seal.write(state, "b.json", b"b")
    assert (state / seal.KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert seal.read(state, "b.json") == b"b" and seal.read(state, "a.json") is None


def test_the_code_key_follows_a_module_s_bytes(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("x = 1\n")
    first = seal.code_key([str(mod)])
    assert first == [hashlib.sha256(b"x = 1\n").hexdigest()]
    mod.write_text("x = 22\n")
    assert seal.code_key([str(mod)]) != first
    assert seal.code_key([str(tmp_path / "gone.py")]) == [""]
