"""Object and version ids as people type them: full, ``<id>@<tx>``, or a unique prefix.

A file's object id is a 64-character hash; like git, ctxnb prints a short prefix and
accepts any prefix that names one object. A version id is ``<id>@<tx>`` (see
:attr:`ctxnb.store.objectstore.Version.version_id`); its id part may be a prefix too.

Example:
    >>> import tempfile
    >>> from ctxnb.store import ObjectStore
    >>> store = ObjectStore(tempfile.mkdtemp())
    >>> _ = store.put([{"xt/id": "ab12", "type": "n"}, {"xt/id": "ab34", "type": "n"}])
    >>> resolve_version(store, "ab1@1")
    ('ab12', 1)
    >>> short_id(store, "ab12", min_len=1)
    'ab1'
    >>> try:
    ...     resolve_id(store, "ab")
    ... except NotFoundError as e:
    ...     print(e)
    id prefix 'ab' is ambiguous: it matches 2 objects: ab12 (n), ab34 (n); type more characters
"""

from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING

from .errors import NotFoundError

if TYPE_CHECKING:
    from .store.objectstore import ObjectStore

__all__ = ["new_id", "parse_version_id", "resolve_id", "resolve_version", "short_id"]

SHORT = 12  # characters of a printed id: unique in any store a person will meet
_SHOW_CANDIDATES = 8


def new_id() -> str:
    """A fresh id for an unsourced object (toolcall, chat, session, system prompt): a
    random UUID (version 4) as ``str(uuid.uuid4())`` writes it, made here so that every
    new session does not import :mod:`uuid` (and its platform probes) for one call."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_version_id(text: str) -> tuple[str, int | None]:
    """``"<id>@<tx>"`` → ``(id, tx)``; a bare id → ``(id, None)``.

    Raises:
        NotFoundError: when the part after ``@`` is not a transaction number.
    """
    oid, at, tx_text = text.rpartition("@")
    if not at:
        return text, None
    if not tx_text.isdigit() or not oid:
        raise NotFoundError(
            f"bad version id {text!r}: expected <id>@<tx> with a transaction number, "
            "as `ctxnb history` prints"
        )
    return oid, int(tx_text)


def _matches(ids: list[str], prefix: str) -> list[str]:
    i = bisect.bisect_left(ids, prefix)
    out = []
    while i < len(ids) and ids[i].startswith(prefix):
        out.append(ids[i])
        i += 1
    return out


def resolve_id(store: ObjectStore, text: str, *, type: str | None = None) -> str:
    """The one stored object id equal to ``text`` or starting with it.

    Args:
        store: the object store.
        text: a full id or a prefix of one.
        type: only objects whose latest version has this type (e.g. ``session``).

    Raises:
        NotFoundError: no object matches, or several do (the message lists them).
    """
    what = f"{type} " if type else "object "
    if not text:
        raise NotFoundError(f"an empty id names no {what.strip()}; pass an id")
    doc = store.get(text)
    if doc is not None and (type is None or doc.get("type") == type):
        return text
    candidates = store.ids(type)
    found = _matches(candidates, text)
    if len(found) == 1:
        return found[0]
    if not found:
        if type is not None:
            known = ", ".join(candidates[:_SHOW_CANDIDATES]) or "none yet"
            more = "…" if len(candidates) > _SHOW_CANDIDATES else ""
            raise NotFoundError(
                f"no {what}with id {text!r} (nor an id starting with it) in this store; "
                f"stored {type}s: {known}{more}"
            )
        raise NotFoundError(
            f"no object with id {text!r} (nor an id starting with it) in this store; "
            "`ctxnb history FILE` prints the ids of a file's versions"
        )
    shown = ", ".join(
        f"{oid[: max(SHORT, len(text) + 4)]} ({(store.get(oid) or {}).get('type', '?')})"
        for oid in found[:_SHOW_CANDIDATES]
    )
    more = f" and {len(found) - _SHOW_CANDIDATES} more" if len(found) > _SHOW_CANDIDATES else ""
    raise NotFoundError(
        f"id prefix {text!r} is ambiguous: it matches {len(found)} objects: {shown}{more}; "
        "type more characters"
    )


def resolve_version(store: ObjectStore, text: str) -> tuple[str, int | None]:
    """``ID``, ``ID@TX`` (ID may be a unique prefix) → the full id and the tx (or None)."""
    oid, tx = parse_version_id(text)
    return resolve_id(store, oid), tx


def short_id(store: ObjectStore, oid: str, *, min_len: int = SHORT) -> str:
    """The shortest prefix of ``oid`` (at least ``min_len`` long) that names only it."""
    ids = store.ids()
    n = min_len
    while n < len(oid) and len(_matches(ids, oid[:n])) > 1:
        n += 1
    return oid[:n]
