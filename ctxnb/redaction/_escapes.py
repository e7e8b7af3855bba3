"""Secrets inside escaped text: JSON strings (notebooks, logs, transcripts) and percent-encoding.

A notebook stores each line of a cell as a JSON string, so ``api_key="x"`` is written
``api_key=\\"x\\"``; a JSON log escapes a URL's slashes (``https:\\/\\/u:x@host``); a
redirect carries a URL percent-encoded (``next=https%3A%2F%2Fu%3Ax%40host``). The
readers of the other layers see the escaped text, in which a quote, a slash or an ``@``
is no longer itself. This layer decodes each such string, runs the whole redaction on
the decoded text (the caller's ``find``), and maps every secret found back to the
escaped text by escaping it the same way. Decoding nests: a JSON string inside a JSON
string is read at each level.

Only strings that hold an escape are decoded (``\\``, or ``%3A%2F%2F``/``%40`` for
percent-encoding), so ordinary text pays one substring test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from .._util.lazyre import lazy_compile
from ._checks import lines_holding

__all__ = ["escaped_spans"]

Span = tuple[int, int, str]
Finder = Callable[[str], list[Span]]

_JSON_STRING = lazy_compile(r'"((?:[^"\\\r\n]|\\.)*)"')
_PERCENT = lazy_compile(r"[A-Za-z0-9._~+!*'()/:=&?-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~+!*'()/:=&?%-]*")


_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _json_decode(raw: str) -> tuple[str, list[int]] | None:
    """The JSON string body ``raw`` decoded, and for each decoded character (and its end)
    the offset in ``raw`` it came from: a secret found in the decoded text maps back to
    exactly the escaped characters that spell it. None when ``raw`` is no JSON string."""
    out: list[str] = []
    at: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c != "\\":
            out.append(c)
            at.append(i)
            i += 1
            continue
        e = raw[i + 1 : i + 2]
        if e in _SIMPLE:
            out.append(_SIMPLE[e])
            at.append(i)
            i += 2
        elif e == "u" and i + 6 <= n:
            try:
                code = int(raw[i + 2 : i + 6], 16)
            except ValueError:
                return None
            # A surrogate pair (\ud83d\ude00) stays two code units here, as json keeps
            # an unpaired one: offsets matter, not the character.
            out.append(chr(code))
            at.append(i)
            i += 6
        else:
            return None
    at.append(n)
    return "".join(out), at


def _percent_forms(secret: str) -> set[str]:
    return {quote(secret, safe=""), quote(secret), quote_plus(secret), secret}


def _place(raw: str, base: int, forms: set[str], rule: str) -> Iterator[Span]:
    for form in forms:
        if len(form) < 6:
            continue
        i = raw.find(form)
        while i >= 0:
            yield (base + i, base + i + len(form), rule)
            i = raw.find(form, i + len(form))


def escaped_spans(
    text: str, lowered: str, lines: list[tuple[int, int]], find: Finder
) -> Iterator[Span]:
    """The secrets of ``text`` found only after decoding its escaped strings.

    ``lines`` are the spans of the lines holding a secret-name word.
    """
    # A value ends at a backslash for the raw readers, so "\n" and "\t" already cut it
    # right; what hides a secret from them is a quote escaped after a secret name
    # (api_key=\"…\"), an escaped URL (https:\/\/u:p@h) or a \uXXXX escape. Only the
    # lines holding one are decoded: the rest of the text is not scanned at all.
    todo: dict[int, int] = {}
    # One character each tells whether any escape can be there at all: a single
    # character is found by memchr, several times faster than the escapes' own strings,
    # and most text holds no backslash (prose, configuration) or no percent sign.
    if "\\" in text:
        if '\\"' in text:
            todo.update((a, b) for a, b in lines if text.find('\\"', a, b) >= 0)
        if ":\\/\\/" in text or "\\u" in text:
            todo.update(lines_holding(text, text, (":\\/\\/", "\\u")))
    for start, end in sorted(todo.items()):
        for m in _JSON_STRING.finditer(text, start, end):
            raw = m.group(1)
            if "\\" not in raw:
                continue
            decoded = _json_decode(raw)
            if decoded is None:
                continue
            plain, at = decoded
            base = m.start(1)
            for a, b, rule in find(plain):
                yield (base + at[a], base + at[b], rule)
    if "%" in text and ("%3a%2f%2f" in lowered or "%40" in lowered):
        for m in _PERCENT.finditer(text):
            raw = m.group()
            unescaped = unquote_plus(raw) if "+" in raw else unquote(raw)
            if unescaped == raw:
                continue
            for a, b, rule in find(unescaped):
                yield from _place(raw, m.start(), _percent_forms(unescaped[a:b]), rule)
