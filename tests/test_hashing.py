import json
from pathlib import Path

import pytest
from _data import data_dirs
from hypothesis import given
from hypothesis import strategies as st

from ctxnb.hashing import (
    content_hash,
    identity_hash,
    sha256_hex,
    source_hash,
    stable_stringify,
)

# The vendored vectors always; ../shared/data's as extra cases when it is beside the checkout.
by_data_dir = pytest.mark.parametrize("data_dir", data_dirs(), ids=lambda p: p.parent.name)


def _vectors(data_dir: Path) -> dict:
    return json.loads((data_dir / "hash_vectors.json").read_text(encoding="utf-8"))


@by_data_dir
def test_stable_stringify_vectors(data_dir: Path) -> None:
    vectors = _vectors(data_dir)["stable_stringify"]
    assert vectors
    for v in vectors:
        assert stable_stringify(v["value"]) == v["expected"]
        # byte for byte: the UTF-8 encoding is what gets hashed
        assert stable_stringify(v["value"]).encode() == v["expected"].encode()


@by_data_dir
def test_identity_hash_vectors(data_dir: Path) -> None:
    vectors = _vectors(data_dir)["identity_hash"]
    assert vectors
    for v in vectors:
        assert identity_hash(v["type"], v["source"]) == v["expected"]


@by_data_dir
def test_source_hash_vectors(data_dir: Path) -> None:
    vectors = _vectors(data_dir)["source_hash"]
    assert vectors
    for v in vectors:
        assert source_hash(bytes.fromhex(v["bytes_hex"])) == v["expected"]


@by_data_dir
def test_content_hash_vectors(data_dir: Path) -> None:
    vectors = _vectors(data_dir)["content_hash"]
    assert vectors
    for v in vectors:
        payload = dict(v["payload"])
        before = dict(payload)
        assert content_hash(payload) == v["expected"]
        assert payload == before, "content_hash must work on a copy"


def test_content_hash_ignores_hash_fields_and_covers_new_fields():
    base = {"content": "x", "file_type": "text", "char_count": 1}
    h = content_hash(base)
    assert content_hash({**base, "source_hash": "a", "content_hash": "b"}) == h
    assert content_hash({**base, "new_field": 1}) != h


def test_source_hash_refuses_text():
    with pytest.raises(TypeError, match="raw bytes"):
        source_hash("text")  # type: ignore[arg-type]


def test_identity_differs_by_filesystem():
    a = {"type": "filesystem", "filesystemId": "a", "path": "/p"}
    b = {"type": "filesystem", "filesystemId": "b", "path": "/p"}
    assert identity_hash("file", a) != identity_hash("file", b)
    assert identity_hash("file", a) == identity_hash("file", dict(a))


def _identity_by_definition(kind: object, source: object) -> str:
    text = json.dumps(
        {"type": kind, "source": source},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return sha256_hex(text)


def test_identity_hash_follows_its_source_and_json_not_python_equality() -> None:
    src = {"type": "filesystem", "filesystemId": "fs", "path": "/p/a.py"}
    first = identity_hash("file", src)
    assert identity_hash("file", src) == first == _identity_by_definition("file", src)
    # The same source changed in place afterwards is another identity, not the old one.
    src["path"] = "/p/b.py"
    assert identity_hash("file", src) == _identity_by_definition("file", src) != first
    # Values equal in Python but not in JSON never share an entry.
    for a, b in ((1, True), (0, False), (1.0, 1)):
        one, other = {"n": a}, {"n": b}
        identity_hash("file", one)
        assert identity_hash("file", other) == _identity_by_definition("file", other)
        assert identity_hash("file", one) == _identity_by_definition("file", one)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)


@given(st.text(max_size=6), st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_identity_hash_is_its_definition_asked_twice(kind, source):
    assert identity_hash(kind, source) == _identity_by_definition(kind, source)
    assert identity_hash(kind, source) == _identity_by_definition(kind, source)


@given(json_values)
def test_stable_stringify_is_json_dumps_with_its_options(value):
    assert stable_stringify(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@given(json_values)
def test_stable_stringify_round_trips(value):
    assert json.loads(stable_stringify(value)) == value


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=8))
def test_stable_stringify_key_order_independent(d):
    reordered = dict(reversed(list(d.items())))
    assert stable_stringify(d) == stable_stringify(reordered)
    assert content_hash(d) == content_hash(reordered)


@given(json_values)
def test_stable_stringify_has_no_insignificant_whitespace(value):
    s = stable_stringify(value)
    assert s == json.dumps(json.loads(s), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# Long strings are hashed by a byte-level path (hashing._LONG); it must give the digest
# of the definition, sha256(stable_stringify(payload)), for every text.
_tricky = st.text(
    alphabet=st.sampled_from([*map(chr, range(0x20)), '"', "\\", "/", "\x7f", "é", "\u2028", "😀"])
    | st.characters(exclude_categories=["Cs"]),  # lone surrogates: the test below
)


@given(_tricky, _tricky, st.integers(min_value=0, max_value=3), json_values)
def test_content_hash_of_long_text_matches_the_definition(head, tail, n, other):
    text = head + "x" * 4096 * n + tail + "\\" * 5000
    payload = {"content": text, "file_type": "python", "char_count": len(text), "z": other}
    reference = sha256_hex(stable_stringify(payload))
    assert content_hash({**payload, "source_hash": "s", "content_hash": "c"}) == reference


def test_content_hash_of_long_text_with_a_lone_surrogate_fails_as_json_does():
    payload = {"content": "\ud800" + "x" * 5000, "file_type": "text"}
    with pytest.raises(UnicodeEncodeError):
        sha256_hex(stable_stringify(payload))
    with pytest.raises(UnicodeEncodeError):
        content_hash(payload)


@pytest.mark.parametrize("size", [0, 1, 55, 56, 64, 65_535, 65_536, 65_537, 3_000_001])
def test_the_builtin_and_openssl_sha256_give_the_same_digest_at_every_size(size: int) -> None:
    import hashlib

    from ctxnb import hashing

    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    want = hashlib.sha256(data).hexdigest()
    assert hashing.sha256_hex(data) == hashing.source_hash(data) == want
    constructors = [hashing.sha256_for(0), hashing.sha256_for(10**9)]
    if hashing._builtin_sha256 is not None:  # what a process without hashlib uses
        constructors.append(hashing._builtin_sha256)
    for constructor in constructors:
        h = constructor()
        for at in range(0, size, 7_919):  # fed in pieces, as content_hash feeds it
            h.update(data[at : at + 7_919])
        assert h.hexdigest() == want
    text = data.decode("latin-1")
    doc = {"xt/id": "f", "type": "file", "content": text, "char_count": size}
    assert hashing.content_hash(doc) == hashing.sha256_hex(hashing.stable_stringify(doc))


def test_small_inputs_use_openssl_once_a_process_has_loaded_it() -> None:
    """The built-in SHA-256 only spares a process (a hook) OpenSSL's import; once
    anything loaded hashlib, OpenSSL hashes everything, being faster per byte."""
    import subprocess
    import sys

    code = (
        "import sys; from ctxnb import hashing; "
        "first = hashing.sha256_for(10); "
        "print('hashlib' in sys.modules, first is hashing._builtin_sha256); "
        "import hashlib; "
        "print(hashing.sha256_for(10) is hashlib.sha256, "
        "hashing.sha256_for(10)(b'x').hexdigest() == first(b'x').hexdigest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True", "True", "True"], out


def test_sha256_hex_of_bytes_and_of_what_can_change_is_the_digest_of_the_bytes_now() -> None:
    import hashlib

    data = b"x = 1\n" * 100
    assert sha256_hex(data) == sha256_hex(data) == hashlib.sha256(data).hexdigest()
    equal = bytes(bytearray(data))
    assert equal is not data and sha256_hex(equal) == sha256_hex(data)
    # What can change is hashed as it is now.
    buf = bytearray(data)
    assert sha256_hex(buf) == hashlib.sha256(data).hexdigest()
    buf[0] = 0
    assert sha256_hex(buf) == hashlib.sha256(bytes(buf)).hexdigest()
    view = memoryview(buf)
    before = sha256_hex(view)
    buf[1] = 0
    assert sha256_hex(view) == hashlib.sha256(bytes(buf)).hexdigest() != before
    other = b"y" * 10
    assert sha256_hex(other) == hashlib.sha256(other).hexdigest()
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
    big = b"z" * ((1 << 20) + 1)
    assert sha256_hex(big) == hashlib.sha256(big).hexdigest()
