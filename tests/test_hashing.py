import json
import math
import random
import shutil
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from _data import data_dirs
from _needs import require
from hypothesis import given
from hypothesis import strategies as st

from ctxnb.hashing import (
    content_hash,
    identity_hash,
    js_number,
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


def _es_number(x: float) -> str:
    """ECMAScript's Number::toString, by way of decimal's digits and exponent (a second
    route to the rule, beside ctxnb's; node is the reference both are checked against)."""
    if x == 0:
        return "0"
    sign, digits_t, exp = Decimal(repr(x)).normalize().as_tuple()
    digits = "".join(map(str, digits_t))
    k, n = len(digits), len(digits) + int(exp)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        mant = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{mant}e{n - 1:+d}"
    return ("-" if sign else "") + body


def _canonical_by_definition(value: object) -> str:
    """RFC 8785's text: keys by UTF-16 code units, numbers as ECMAScript writes them."""
    if isinstance(value, float):
        return _es_number(value)
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass"))
        inner = ",".join(
            f"{_canonical_by_definition(k)}:{_canonical_by_definition(v)}" for k, v in items
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canonical_by_definition(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _identity_by_definition(kind: object, source: object) -> str:
    return sha256_hex(_canonical_by_definition({"type": kind, "source": source}))


def _as_doubles(value: object) -> object:
    """Numbers as the doubles JSON readers take them to be (ECMAScript's one number type)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {k: _as_doubles(v) for k, v in value.items()}
    return [_as_doubles(v) for v in value]


def test_identity_hash_follows_its_source_and_json_not_python_equality() -> None:
    src = {"type": "filesystem", "filesystemId": "fs", "path": "/p/a.py"}
    first = identity_hash("file", src)
    assert identity_hash("file", src) == first == _identity_by_definition("file", src)
    # The same source changed in place afterwards is another identity, not the old one.
    src["path"] = "/p/b.py"
    assert identity_hash("file", src) == _identity_by_definition("file", src) != first
    # Values equal in Python but not in JSON never share an entry; 1.0 and 1 are one
    # JSON number (RFC 8785 writes both as 1).
    assert identity_hash("file", {"n": 1.0}) == identity_hash("file", {"n": 1})
    for a, b in ((1, True), (0, False)):
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


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


@given(json_values)
def test_stable_stringify_is_json_dumps_with_its_options_but_for_numbers(value):
    # Without floats (and astral-plane keys) the canonical form is json.dumps' text; with
    # them it differs only in how numbers are written: parsed back, the values are equal.
    text = stable_stringify(value)
    assert _as_doubles(json.loads(text)) == _as_doubles(value)
    assert text == _canonical_by_definition(value)
    if not any(isinstance(v, float) for v in _leaves(value)):
        assert text == json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )


@given(json_values)
def test_stable_stringify_round_trips(value):
    assert _as_doubles(json.loads(stable_stringify(value))) == _as_doubles(value)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=8))
def test_stable_stringify_key_order_independent(d):
    reordered = dict(reversed(list(d.items())))
    assert stable_stringify(d) == stable_stringify(reordered)
    assert content_hash(d) == content_hash(reordered)


@given(json_values)
def test_stable_stringify_has_no_insignificant_whitespace(value):
    # Written again from what it parses to, the text is the same: nothing in it but the
    # canonical form (no spaces, no other key order, no other number spelling).
    s = stable_stringify(value)
    assert s == stable_stringify(json.loads(s))
    assert s == _canonical_by_definition(value)  # built with "," and ":" alone


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


# RFC 8785 (JSON Canonicalization Scheme), Appendix B: IEEE 754 doubles and the text
# ECMAScript writes for each; every value is also checked against node below.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(hex_bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(hex_bits))[0])


@pytest.mark.parametrize(("bits", "expected"), RFC8785_NUMBERS)
def test_numbers_are_written_as_rfc_8785_writes_them(bits: str, expected: str) -> None:
    assert js_number(_double(bits)) == expected
    assert stable_stringify([_double(bits)]) == f"[{expected}]"


def test_the_rfc_8785_example_object_is_canonical() -> None:
    # RFC 8785 section 3.2.2: the input (as JSON text), and the canonical text it gives.
    value = json.loads(
        r"""{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
        "literals": [null, true, false]}"""
    )
    expected = (
        r"""{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"""
        r""""string":"€$\u000f\nA'B\"\\\\\"/"}"""
    )
    assert stable_stringify(value) == expected


def test_a_float_valued_field_hashes_as_the_javascript_implementation_hashes_it() -> None:
    # The seed's stableStringify gives {"a":1} for {"a": 1.0}: the same content hash as
    # the integer, where json.dumps would give another.
    assert stable_stringify({"a": 1.0}) == '{"a":1}'
    assert content_hash({"a": 1.0}) == content_hash({"a": 1})
    long_text = "x" * 5000  # the byte-level path of content_hash
    assert content_hash({"t": long_text, "w": 2.0}) == sha256_hex('{"t":"' + long_text + '","w":2}')


def test_keys_are_ordered_by_utf16_code_units() -> None:
    # U+FF61 sorts before U+1F600 by code point, after it by UTF-16 code unit (a surrogate
    # pair starts with 0xD83D): JavaScript's order, which RFC 8785 prescribes.
    d = {"\U0001f600": 1, "\uff61": 2, "a": 3}
    assert stable_stringify(d) == '{"a":3,"\U0001f600":1,"\uff61":2}'
    assert content_hash(d) == sha256_hex(stable_stringify(d))


def test_nan_and_infinity_are_refused() -> None:
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            stable_stringify({"x": bad})


def test_numbers_and_key_order_match_node(tmp_path: Path) -> None:
    # The reference: JavaScript itself. Random doubles over the whole range (every
    # exponent, subnormals, integers past 2**53) and keys from every plane.
    node = shutil.which("node")
    require(node is not None, "node (JavaScript's own number serialisation)")
    rng = random.Random(8785)
    doubles = [_double(b) for b, _ in RFC8785_NUMBERS]
    while len(doubles) < 4000:
        x = struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0]
        if math.isfinite(x):
            doubles.append(x)
    doubles += [float(rng.randrange(-(10**22), 10**22)) for _ in range(500)]
    doubles += [rng.random() * 10.0 ** rng.randrange(-12, 25) for _ in range(500)]
    alphabet = ["a", "Z", "é", "\uff61", "\ue000", "\U0001f600", "\U00010000", "0"]
    keys = sorted({"".join(rng.choices(alphabet, k=rng.randrange(1, 4))) for _ in range(200)})
    (tmp_path / "in.json").write_text(
        json.dumps({"hex": [struct.pack(">d", x).hex() for x in doubles], "keys": keys})
    )
    script = (
        "const d=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));"
        "const nums=d.hex.map(h=>JSON.stringify(Buffer.from(h,'hex').readDoubleBE(0)));"
        "process.stdout.write(JSON.stringify({nums, keys:[...d.keys].sort()}));"
    )
    out = subprocess.run(
        [node, "-e", script, str(tmp_path / "in.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    ref = json.loads(out.stdout)
    assert [js_number(x) for x in doubles] == ref["nums"]
    assert stable_stringify(dict.fromkeys(keys, 0)) == (
        "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:0" for k in ref["keys"]) + "}"
    )
