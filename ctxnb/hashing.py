"""Canonical JSON and the three hashes of DESIGN §2.

All hashes are SHA-256 as lowercase hex.

Example:
    >>> stable_stringify({"b": 1, "a": [3, {"z": None, "y": True}]})
    '{"a":[3,{"y":true,"z":null}],"b":1}'
    >>> source_hash(b"")
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["content_hash", "identity_hash", "sha256_hex", "source_hash", "stable_stringify"]

# Fields that hold hashes of the payload itself; they are never part of what they hash.
_HASH_FIELDS = ("source_hash", "content_hash")


def stable_stringify(value: Any) -> str:
    """Canonical JSON: keys sorted at every depth, no whitespace, UTF-8 (not escaped).

    The same value gives the same string in every process and on every machine.

    Raises:
        TypeError: for values JSON cannot represent (sets, bytes, NaN is refused too).
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(data: bytes | str) -> str:
    """SHA-256 of bytes (or of a string's UTF-8 bytes), lowercase hex."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


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
    return hashlib.sha256(data).hexdigest()


def content_hash(payload: Mapping[str, Any]) -> str:
    """Hash of a mutable payload without its ``source_hash`` and ``content_hash``.

    Works on a copy; new payload fields are covered automatically.
    """
    rest = {k: v for k, v in payload.items() if k not in _HASH_FIELDS}
    return sha256_hex(stable_stringify(rest))
