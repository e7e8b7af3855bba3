"""SQL that sets a password: the literal after ``IDENTIFIED BY``, ``PASSWORD`` and ``SET PASSWORD``.

Every dialect names the password with a keyword, not a key: MySQL/MariaDB/Oracle
``IDENTIFIED BY 'x'`` (Oracle also unquoted, ``IDENTIFIED BY x``), PostgreSQL
``[ENCRYPTED] PASSWORD 'x'``, SQL Server and Snowflake ``PASSWORD = 'x'``, MySQL
``SET PASSWORD [FOR u] = 'x'`` or ``= PASSWORD('x')``, Cassandra ``WITH PASSWORD = 'x'``,
Neo4j ``SET PASSWORD 'x'``, SQL Server ``OLD_PASSWORD = 'x'``. Quotes are SQL's (``''`` is
a quote inside), and a concatenation (``'a' || 'b'``) is one password.

What stays: ``IDENTIFIED WITH plugin``, ``IDENTIFIED BY PASSWORD '*hash'`` is redacted
too (a password hash is a credential), bind parameters and psql variables (``:'pw'``,
``:pw``, ``?``, ``$1``), ``PASSWORD NULL``, and columns named password in queries
(``SELECT password_hash``): a keyword must be followed by a literal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .._util.lazyre import lazy_compile
from ._checks import lines_holding
from ._formats import is_placeholder

__all__ = ["sql_spans"]

Span = tuple[int, int, str]

_LIT = r"'(?P<sq>(?:[^'\n]|'')*)'|\"(?P<dq>(?:[^\"\n]|\"\")*)\""
_SQL = lazy_compile(
    r"(?i)(?<![\w.$:])(?P<kw>identified\s+by(?:\s+password)?|(?:encrypted\s+|old_)?password"
    r"|set\s+password(?:\s+for\s+\S+)?)(?!\w)"
    r"(?:\s*=)?\s*(?:password\s*\(\s*)?"
    r"(?:" + _LIT + r"|(?P<bare>[A-Za-z0-9_#$!@%^*+-]{3,})(?=\s*;|\s*$|\s+[A-Za-z]))",
    re.MULTILINE,
)
# The statement an unquoted IDENTIFIED BY belongs to ("identified by name" is prose).
_STATEMENT = lazy_compile(r"(?i)\b(?:(?:create|alter)\s+(?:user|role)|connect\s+to)\s+\S+\s*$")
_CONCAT = lazy_compile(r"\s*\|\|\s*(?:" + _LIT + ")")


def sql_spans(text: str, lowered: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    """The password literals of SQL statements in ``text``.

    ``lines`` are the spans of the lines holding a secret-name word: every line with
    "password" is one of them (it holds "pass"); "identified" is looked for apart.
    """
    todo = [(a, b) for a, b in lines if lowered.find("password", a, b) >= 0]
    if "identified" in lowered:
        todo = sorted({*todo, *lines_holding(text, lowered, ("identified",))})
    for m in (m for start, end in todo for m in _SQL.finditer(text, start, end)):
        g = next((g for g in ("sq", "dq", "bare") if m.group(g) is not None), None)
        if g is None:
            continue
        a, b = m.span("kw")
        if a and text[a - 1] in "\"'" and text[b : b + 1] == text[a - 1]:
            continue  # "password" in quotes is a string of a program, not SQL's keyword
        if g == "bare" and not (
            m.group("kw").lower().startswith("identified")
            and _STATEMENT.search(text, max(0, m.start() - 120), m.start())
        ):
            continue  # unquoted, only Oracle's [CREATE|ALTER] USER u IDENTIFIED BY x
        parts = [m.span(g)]
        pos = m.end()
        while (c := _CONCAT.match(text, pos)) is not None:
            parts.append(c.span("sq" if c.group("sq") is not None else "dq"))
            pos = c.end()
        whole = "".join(text[a:b] for a, b in parts)
        if len(whole) < 3 or is_placeholder(whole) or whole.upper() in ("NULL", "PASSWORD"):
            continue
        for a, b in parts:
            if b > a:
                yield (a, b, "sql-password")
