"""Credential files whose grammar no key names: ``.pgpass``, ``.npmrc``, ``.properties``.

Most client credential files are key/value formats the format layer reads already
(``.my.cnf``/``pg_service.conf``/``.s3cfg`` are INI, ``.npmrc``/``.pypirc`` are
``key=value``, docker's ``config.json`` and composer's ``auth.json`` are JSON, ``.netrc``
is ``password x``, kubeconfig is YAML with ``token``/``password``/``client-key-data``).
Two are not:

- PostgreSQL's ``.pgpass``: ``hostname:port:database:username:password`` a line, with
  ``*`` wildcards and ``\\:`` escapes; the fifth field is the password.
- npm's ``.npmrc``: ``_auth`` (base64 of ``user:password``), ``_password`` (base64 of the
  password) and ``_authToken``, alone or scoped to a registry (``//host/path/:_auth=``).
  The first two are read by what npm puts there: a value that decodes, as strict base64,
  to printable text (``_auth``: holding the ``:`` between user and password) is the
  password, whatever its letters look like (``NWNiOFdpWDRHOHNP`` has no digit and reads
  as a camelCase name to the generic checks); one that does not decode is left to them.
- Java ``.properties``: a value continued over lines ending in ``\\`` (each continuation
  line is part of the secret), and ``key value`` with white space as the separator
  (``mail.smtp.password s3cr3t``), read for dotted keys only: prose is not a property.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterator

from .._util.lazyre import lazy_compile
from ._checks import secret_name
from ._formats import is_placeholder, value_ok

__all__ = ["credential_file_spans"]

Span = tuple[int, int, str]

# The database and user fields hold no quote or bracket: a grep hit on a JSON line
# (log.jsonl:1:{"type":"…","id":"…"}) has a port-like line number too.
_PGPASS = lazy_compile(
    r"^[ \t]*(?:[^:\s#][^:\s]*|\*):(?:\d{1,5}|\*):(?:[^:\s\"'{}\[\]]+):(?:[^:\s\"'{}\[\]]+):"
    r"(?P<pw>(?:[^\s\\]|\\.)+)[ \t]*\r?$",
    re.MULTILINE,
)
_PORT = lazy_compile(r":(?:\d{1,5}|\*):")
_CONTINUED = lazy_compile(
    r"^[ \t]*(?P<key>[\w.-]{1,80})[ \t]*[=:]?[ \t]*(?P<first>[^\n]*?)\\\r?\n", re.MULTILINE
)
_NEXT_LINE = lazy_compile(r"[ \t]*(?P<part>[^\n]*?)(?P<more>\\?)\r?(?:\n|\Z)")
_SPACE_SEPARATED = lazy_compile(
    r"^[ \t]*(?P<key>[\w-]+(?:\.[\w-]+)+)[ \t]+(?P<v>[^\s=:][^\s]*)[ \t]*\r?$", re.MULTILINE
)

# A whole .npmrc line: an optional registry scope ("//host/path/:"), the key, the value
# (quoted or not) to the end of the line.
_NPMRC = lazy_compile(
    r"[ \t]*(?://[^\s=]*?:)?(?P<key>_auth|_authToken|_password)[ \t]*=[ \t]*"
    r"(?P<q>[\"']?)(?P<v>[^\s\"']+)(?P=q)[ \t]*\r?$"
)


def _decodes_to_text(value: str) -> str | None:
    """``value`` decoded as strict base64 when that gives printable text, else None."""
    if len(value) % 4:
        return None
    try:
        raw = binascii.a2b_base64(value, strict_mode=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return raw if raw and raw.isprintable() else None


def _npmrc_secret(key: str, value: str) -> bool:
    if is_placeholder(value):
        return False  # ${NPM_TOKEN}: npm expands it from the environment
    if key == "_authToken":
        # A token is what npm reads there, whatever its shape (a UUID, a vendor token).
        return len(value) >= 8
    text = _decodes_to_text(value)
    if text is None:
        return False
    return ":" in text[1:] if key == "_auth" else len(text) >= 4


def _npmrc_spans(text: str, lowered: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    for start, end in lines:
        if lowered.find("_auth", start, end) < 0 and lowered.find("_pass", start, end) < 0:
            continue
        m = _NPMRC.match(text, start, end)
        if m is not None and _npmrc_secret(m.group("key"), m.group("v")):
            yield (*m.span("v"), "secret-value")


def credential_file_spans(text: str, lowered: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    """The passwords of ``.pgpass`` and ``.npmrc`` lines and of continued or
    space-separated properties.

    ``lines`` are the spans of the lines holding a secret-name word (a property's key).
    """
    yield from _npmrc_spans(text, lowered, lines)
    if text.count(":") >= 4:
        # Found by its port field (":5432:" or ":*:"): a literal ":" the regex engine
        # skips to, then the whole line is read (a MULTILINE "^" scan tries every place).
        done = -1
        for hit in _PORT.finditer(text):
            start = text.rfind("\n", 0, hit.start()) + 1
            if start <= done:
                continue
            end = text.find("\n", hit.end())
            done = end = len(text) if end < 0 else end
            m = _PGPASS.match(text, start, end)
            if m is not None:
                pw = m.group("pw")
                if len(pw) >= 4 and not pw.isdigit() and not is_placeholder(pw):
                    yield (*m.span("pw"), "pgpass")
    for start, end in lines:
        if text[end - 1 : end] == "\r":
            end -= 1
        sp = _SPACE_SEPARATED.match(text, start, end)
        if sp is not None and secret_name(sp.group("key")) and value_ok(sp.group("v"), bare=True):
            yield (*sp.span("v"), "secret-value")
        # A continued value's first line holds its key (a secret word): looked for on
        # those lines, not by scanning the whole text for "\\\n".
        if text[end - 1 : end] != "\\":
            continue
        for m in _CONTINUED.finditer(text, start, min(end + 2, len(text))):
            if not secret_name(m.group("key")):
                continue
            parts = [m.span("first")] if m.group("first").strip() else []
            pos = m.end()
            while (n := _NEXT_LINE.match(text, pos)) is not None and pos < len(text):
                if n.group("part").strip():
                    parts.append(n.span("part"))
                pos = n.end()
                if not n.group("more"):
                    break
            whole = "".join(text[a:b] for a, b in parts)
            if value_ok(whole, bare=False):
                yield from ((a, b, "secret-value") for a, b in parts if b > a)
