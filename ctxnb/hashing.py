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
from collections.abc import Callable, Mapping
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


def stable_stringify(value: Any) -> str:
    """Canonical JSON: keys sorted at every depth, no whitespace, UTF-8 (not escaped).

    The same value gives the same string in every process and on every machine.

    Raises:
        TypeError: for values JSON cannot represent (sets, bytes, NaN is refused too).
    """
    return _STABLE(value)


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
    if any(type(k) is not str for k in value):
        return sha256_hex(stable_stringify(value))  # json's key coercion: keep its rules
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
