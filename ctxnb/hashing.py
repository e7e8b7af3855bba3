"""Canonical JSON and the three hashes of DESIGN §2.

All hashes are SHA-256 as lowercase hex.

Example:
    >>> stable_stringify({"b": 1, "a": [3, {"z": None, "y": True}]})
    '{"a":[3,{"y":true,"z":null}],"b":1}'
    >>> source_hash(b"")
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

try:  # the interpreter's own SHA-256 (3.12 and later: _sha2), which loads no OpenSSL
    from _sha256 import sha256 as _builtin_sha256
except ImportError:  # pragma: no cover - depends on the Python version
    try:
        from _sha2 import sha256 as _builtin_sha256
    except ImportError:
        _builtin_sha256 = None

__all__ = [
    "content_hash",
    "identity_hash",
    "js_number",
    "sha256_for",
    "sha256_hex",
    "source_hash",
    "stable_stringify",
]

# Fields that hold hashes of the payload itself; they are never part of what they hash.
_HASH_FIELDS = ("source_hash", "content_hash")


# ``json.dumps`` with these options builds an encoder per call; one encoder, made once,
# writes the same text (an encoder keeps no state between calls).
_STABLE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_STRING = json.JSONEncoder(ensure_ascii=False).encode


def stable_stringify(value: Any) -> str:
    """Canonical JSON: keys sorted at every depth, no whitespace, UTF-8 (not escaped),
    numbers written as JavaScript writes them.

    The same value gives the same string in every process, on every machine, and as the
    JavaScript ``stableStringify`` of the design gives it (RFC 8785's rules): a float
    with an integral value has no ``.0`` (``1.0`` is ``1``), exponents follow
    ``Number.prototype.toString`` (``1e-7``, ``0.000001``, ``1e+21``), keys are ordered
    by their UTF-16 code units. Python integers are written exactly.

    Example:
        >>> stable_stringify({"b": 1.0, "a": [1e-7, 0.000001, 1e21, 2.5]})
        '{"a":[1e-7,0.000001,1e+21,2.5],"b":1}'

    Raises:
        TypeError: for values JSON cannot represent (sets, bytes).
        ValueError: for NaN and infinities.
    """
    # Values without a float or an astral-plane key (nearly all: ids, paths, text) are
    # written by json's C encoder, whose output is already the canonical form.
    if _plain(value):
        return _STABLE(value)
    return "".join(_canonical(value))


_LEAVES = frozenset((str, int, bool, type(None)))


def _plain(value: Any) -> bool:
    """True when ``value`` holds no float and no key that sorts differently by UTF-16
    code units than by code points (one with a character above U+FFFF)."""
    t = type(value)
    if t is dict:
        for k, v in value.items():
            if type(k) is not str or (not k.isascii() and max(k) > "\uffff"):
                return False
            if type(v) not in _LEAVES and not _plain(v):
                return False
        return True
    if t is list or t is tuple:
        return all(type(v) in _LEAVES or _plain(v) for v in value)
    return not isinstance(value, float)


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _canonical(value: Any) -> Iterator[str]:
    """The canonical JSON of ``value``, in pieces (the path for floats and astral keys)."""
    if isinstance(value, str):
        yield _STRING(value)
    elif value is None or value is True or value is False:
        yield _STABLE(value)
    elif isinstance(value, float):
        yield js_number(value)
    elif isinstance(value, int):
        yield int.__repr__(value)
    elif isinstance(value, dict):
        keys = {_key(k): v for k, v in value.items()}
        yield "{"
        for i, k in enumerate(sorted(keys, key=_utf16_order)):
            if i:
                yield ","
            yield _STRING(k)
            yield ":"
            yield from _canonical(keys[k])
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        for i, v in enumerate(value):
            if i:
                yield ","
            yield from _canonical(v)
        yield "]"
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key(k: Any) -> str:
    """A dict key as JSON writes it (json's coercion of numbers, booleans and None)."""
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return js_number(k)
    if k is True or k is False or k is None:
        return _STABLE(k)  # type: ignore[no-any-return]
    if isinstance(k, int):
        return int.__repr__(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def js_number(x: float) -> str:
    """A float as JavaScript's ``Number.prototype.toString`` writes it (ECMA-262
    Number::toString, the form RFC 8785 prescribes).

    The digits are the shortest that read back as ``x`` (Python's ``repr`` finds the
    same ones); only where the decimal point goes and how the exponent is written differ.

    Example:
        >>> [js_number(v) for v in (1.0, -0.0, 1e-7, 1e-6, 123e18, 1e21, 5e-324)]
        ['1', '0', '1e-7', '0.000001', '123000000000000000000', '1e+21', '5e-324']

    Raises:
        ValueError: for NaN and infinities, which JSON cannot write.
    """
    if x != x or x in (_INF, -_INF):
        raise ValueError(f"Out of range float values are not JSON compliant: {x!r}")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = float.__repr__(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    # The value is 0.<digits> × 10**n: n is where the decimal point sits.
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    shown = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{shown}e{'+' if e > 0 else '-'}{abs(e)}"


_INF = float("inf")


# Below this many bytes a digest is computed by the interpreter's built-in SHA-256:
# importing hashlib loads OpenSSL (about 2 ms), which Claude Code's hook process would
# pay after every edit to hash a few ids and one file. Above it OpenSSL's SHA-256, which
# is several times faster per byte (indexing hashes whole trees), is worth its import;
# once it is loaded, in a process that imported hashlib for any reason, it hashes all.
_SMALL = 1 << 16
_openssl_sha256: Callable[..., Any] | None = None


def sha256_for(size: int) -> Callable[..., Any]:
    """The SHA-256 constructor for about ``size`` bytes (the same digest either way).

    Example:
        >>> small, large = sha256_for(10)(b"abc"), sha256_for(10**7)(b"abc")
        >>> small.hexdigest() == large.hexdigest() == sha256_hex(b"abc")
        True
    """
    global _openssl_sha256
    if _openssl_sha256 is not None:
        return _openssl_sha256
    if size < _SMALL and _builtin_sha256 is not None and "hashlib" not in sys.modules:
        return _builtin_sha256  # type: ignore[no-any-return]
    # OpenSSL is loaded now (by this call, or already by someone else): from here on
    # it hashes everything, small inputs too, since its import is paid for.
    import hashlib

    _openssl_sha256 = hashlib.sha256
    return _openssl_sha256


def sha256_hex(data: bytes | str) -> str:
    """SHA-256 of bytes (or of a string's UTF-8 bytes), lowercase hex."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return sha256_for(len(data))(data).hexdigest()  # type: ignore[no-any-return]


def identity_hash(type: str, source: Mapping[str, Any] | None) -> str:
    """Identity of a sourced object: ``sha256(stable_stringify({"type", "source"}))``.

    The same file seen through two mounts has one identity; the same path on two
    filesystems has two.

    Example:
        >>> src = {"type": "filesystem", "filesystemId": "abc", "path": "/p/a.py"}
        >>> identity_hash("file", src) == identity_hash("file", dict(reversed(src.items())))
        True
    """
    return sha256_hex(stable_stringify({"type": type, "source": source}))


def source_hash(data: bytes) -> str:
    """Hash of the raw bytes as read from disk (not of decoded text)."""
    if isinstance(data, str):
        raise TypeError("source_hash takes the raw bytes read from disk, not decoded text")
    return sha256_hex(data)


def content_hash(payload: Mapping[str, Any]) -> str:
    """Hash of a mutable payload without its ``source_hash`` and ``content_hash``.

    Works on a copy; new payload fields are covered automatically.
    """
    rest = {k: v for k, v in payload.items() if k not in _HASH_FIELDS}
    return _sha256_of_json(rest)


# A string at least this long is hashed through its UTF-8 bytes (below) rather than
# through ``json.dumps``, which is several times slower on a whole file's text.
_LONG = 4096
# The bytes ``json.dumps(..., ensure_ascii=False)`` escapes: C0 controls, quote, backslash.
# Every other byte of a UTF-8 string stands for itself in the JSON.
_ESCAPES: dict[int, bytes] = {
    **{c: b"\\u%04x" % c for c in range(0x20)},
    0x08: b"\\b",
    0x09: b"\\t",
    0x0A: b"\\n",
    0x0C: b"\\f",
    0x0D: b"\\r",
    0x22: b'\\"',
}
_PLAIN = bytes(c for c in range(256) if c not in _ESCAPES and c != 0x5C)
_COMMON = (0x0A, 0x22, 0x09, 0x0D)  # in most source files; the other controls are rare
_COMMON_BYTES = bytes((*_COMMON, 0x5C))


def _json_escaped(text: str) -> bytes:
    """``stable_stringify(text).encode()`` without its quotes, by byte replacement."""
    raw = text.encode("utf-8")
    special = raw.translate(None, _PLAIN)  # only the bytes that need an escape
    if not special:
        return raw
    # Backslashes first: the escapes written after them start with one.
    if b"\\" in special:
        raw = raw.replace(b"\\", b"\\\\")
    for c in _COMMON:
        if c in special:
            raw = raw.replace(bytes((c,)), _ESCAPES[c])
    rare = special.translate(None, _COMMON_BYTES)
    for c in set(rare):
        raw = raw.replace(bytes((c,)), _ESCAPES[c])
    return raw


def _sha256_of_json(value: Any) -> str:
    """``sha256_hex(stable_stringify(value))``, without the JSON text of long strings.

    A dict's canonical JSON is ``{`` + ``"key":value`` pairs in key order, joined by
    ``,`` + ``}``; the pairs are fed to the hash one by one, and a long string value
    (a file's content) is escaped as bytes. The digest is the same, byte for byte.
    """
    if type(value) is not dict or not any(
        type(v) is str and len(v) >= _LONG for v in value.values()
    ):
        return sha256_hex(stable_stringify(value))
    if not _plain(value):
        return sha256_hex(stable_stringify(value))  # floats, astral or coerced keys
    h = sha256_for(sum(len(v) for v in value.values() if type(v) is str))()
    sep = b"{"
    for k in sorted(value):
        v = value[k]
        key = sep + stable_stringify(k).encode("utf-8") + b":"
        if type(v) is str and len(v) >= _LONG:
            try:
                body = _json_escaped(v)
            except UnicodeEncodeError:  # a lone surrogate: fail as the JSON path does
                return sha256_hex(stable_stringify(value))
            h.update(key + b'"')
            h.update(body)
            h.update(b'"')
        else:
            h.update(key + stable_stringify(v).encode("utf-8"))
        sep = b","
    h.update(b"}")
    return h.hexdigest()
