"""Domain names of a network allowlist: one normalization and one match for every reader.

``[sandbox] allowed_domains``, an intent's ``allowed_domains`` and the sandbox's network
proxy (:mod:`ctxnb.sandbox.netproxy`) all read names through here, so a name the
settings accept is the name the proxy compares. An entry is a host name (``pypi.org``)
or a suffix pattern (``*.pythonhosted.org``: every name *below* it, not the name
itself); an IP address literal may be listed exactly. Names compare lowercased, with
one trailing dot removed and non-ASCII labels in their IDNA form, so ``PyPI.org.`` is
``pypi.org`` and a look-alike in Unicode is compared by its ``xn--`` form.

Example:
    >>> allowed_pattern("files.pythonhosted.org", ["pypi.org", "*.pythonhosted.org"])
    '*.pythonhosted.org'
    >>> allowed_pattern("pythonhosted.org", ["*.pythonhosted.org"]) is None
    True
    >>> allowed_pattern("pypi.org.evil.test", ["pypi.org"]) is None
    True
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

__all__ = ["allowed_pattern", "check_pattern", "normalize_host"]

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def normalize_host(host: str) -> str | None:
    """``host`` as the allowlist compares it, or None when it is not a host name.

    An IPv6 literal may come in brackets (``[::1]``); it is returned without them.

    Example:
        >>> normalize_host("PyPI.Org."), normalize_host("[::1]"), normalize_host("a b")
        ('pypi.org', '::1', None)
    """
    if not host or len(host) > 255:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    name = name.lower()
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    return name


def check_pattern(pattern: str) -> str:
    """One allowlist entry, normalized; a ValueError says what is wrong with it.

    Example:
        >>> check_pattern("*.Example.COM")
        '*.example.com'
        >>> check_pattern("*")
        Traceback (most recent call last):
        ValueError: '*' is not a domain name or '*.' followed by one; list each domain ...
    """
    body = pattern[2:] if pattern.startswith("*.") else pattern
    name = normalize_host(body.strip())
    if name is None or "*" in body:
        raise ValueError(
            f"{pattern!r} is not a domain name or '*.' followed by one; list each domain "
            "(pypi.org) or a suffix (*.pythonhosted.org), without scheme, port or path"
        )
    if pattern.startswith("*.") and _is_ip(name):
        raise ValueError(f"{pattern!r}: an IP address cannot take a '*.' suffix; list it alone")
    return "*." + name if pattern.startswith("*.") else name


def allowed_pattern(host: str, patterns: Iterable[str]) -> str | None:
    """The first entry of ``patterns`` that allows ``host``, or None.

    ``*.example.com`` allows ``a.example.com`` and ``a.b.example.com``, never
    ``example.com`` nor ``badexample.com``; an exact entry allows that name only.
    """
    name = normalize_host(host)
    if name is None:
        return None
    for raw in patterns:
        try:
            pattern = check_pattern(raw)
        except ValueError:
            continue  # settings validate their entries; an odd one here allows nothing
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and not _is_ip(name):
                return raw
        elif name == pattern:
            return raw
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
