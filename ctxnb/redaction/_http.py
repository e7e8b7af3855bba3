"""Credentials in HTTP headers as logs and code show them: cookies above all.

``Authorization``/``Proxy-Authorization`` and ``X-…-Token``/``Api-Key`` headers are read by
the pattern and format layers (a header is a ``name: value`` pair). A cookie is not: its
credential sits under a name of the site's choosing (``sessionid``, ``connect.sid``,
``_gitlab_session``, ``remember_user_token``), several to a header. This module reads
``Cookie:`` and ``Set-Cookie:`` headers (also as ``> Cookie:`` in ``curl -v`` output, in
JSON and in a ``-b``/``--cookie`` argument) pair by pair; a pair is redacted when its name
says session, auth, token, secret, key, sid or remember, or when its value is a long
random string (a session id under an unknown name). The attributes of ``Set-Cookie``
(``Path``, ``Domain``, ``Expires``, ``Max-Age``, ``SameSite``) stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .._util.lazyre import lazy_compile
from ._checks import lines_holding, secret_name
from ._efficiency import looks_random
from ._formats import is_placeholder

__all__ = ["cookie_spans"]

Span = tuple[int, int, str]

_HEADER = lazy_compile(
    r"(?i)(?:(?<![\w-])(?:set-)?cookie[\"']?\s*[:=]\s*|(?:^|\s)(?:-b|--cookie)\s+)[\"']?"
    r"(?P<v>[^\r\n\"']+)",
    re.MULTILINE,
)
_PAIR = lazy_compile(r"\s*(?P<name>[^=;,\s]{1,80})=(?P<value>[^;\s,\"']*)")
_SESSION_NAME = lazy_compile(
    r"(?i)sess|sid$|^sid|auth|token|secret|key|remember|jwt|csrf|xsrf|login|identity"
)
_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "priority"}
)


def cookie_spans(text: str, lowered: str) -> Iterator[Span]:
    """The credential values of the cookies in ``text``."""
    if "cookie" not in lowered and " -b " not in lowered:
        return
    for m in (
        m
        for start, end in lines_holding(text, lowered, ("cookie", " -b "))
        for m in _HEADER.finditer(text, start, end)
    ):
        set_cookie = "set-" in lowered[m.start() : m.start("v")]
        pos, end = m.start("v"), m.end("v")
        first = True
        while pos < end:
            p = _PAIR.match(text, pos, end)
            if p is None:
                nxt = text.find(";", pos, end)
                if nxt < 0:
                    break
                pos = nxt + 1
                continue
            name, value = p.group("name"), p.group("value")
            pos = p.end() + 1
            if set_cookie and not first:
                break  # the rest are attributes
            first = False
            if name.lower() in _ATTRIBUTES or len(value) < 8 or is_placeholder(value):
                continue
            if _SESSION_NAME.search(name) or secret_name(name) or looks_random(value):
                yield (*p.span("value"), "cookie")
