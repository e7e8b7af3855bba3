"""Command lines read by their argument grammars: which word of which client is a password.

A password passed on a command line sits where the client's own grammar puts it, not
after a name that says "password": ``mysql -pSECRET`` (glued to ``-p``; a bare ``-p``
prompts), ``ldapsearch -w SECRET``, ``sqlcmd -P SECRET``, ``smbclient -U user%SECRET``,
``openssl … -passout pass:SECRET``, ``sqlplus scott/SECRET@db``. This module knows those
grammars, family by family, from the clients' manuals (one table, :data:`CLIENTS`), and
reads every line that names one of the clients word by word, as a shell splits it
(quotes, ``VAR=… cmd`` prefixes, ``sudo``/``docker exec … mysql``, pipes and ``&&``).
It also reads the flags whose *name* says secret in any program (``--db-password=X``,
``-storepass X``, ``-Password X``), ``-u user:password`` of curl and its kin, and
PowerShell's ``ConvertTo-SecureString "…" -AsPlainText``.

What stays: a flag without a value (``mysql -p``, ``psql -W``, ``ldapsearch -W``), a value
that is a reference (``$PASS``, ``"${PASS}"``, ``%PASS%``, ``env:PASS``, ``file:…``,
``-y /run/secrets/x``), and placeholders (see :func:`ctxnb.redaction._formats.is_placeholder`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .._util.lazyre import lazy_compile
from ._checks import lines_holding, secret_name
from ._formats import is_placeholder, value_ok

__all__ = ["CLIENTS", "command_spans"]

Span = tuple[int, int, str]

# How a client takes its password:
#   "next"     the following word, or glued to a short flag (-wSECRET)
#   "glued"    only glued to the flag (mysql -pSECRET: "-p SECRET" prompts, then names a db)
#   "user"     user:password or user%password (the part after the first ":" or "%")
#   "slash"    user/password[@db], the first word that is not a flag
#   "pos2"     the second positional word (rabbitmqctl add_user NAME PASSWORD)
_MYSQL = {"-p": "glued"}
_LDAP = {"-w": "next"}
_MONGO = {"-p": "next"}
_MSSQL = {"-P": "next"}
_SMB = {"-U": "user", "--user": "user"}
_ZIP = {"-P": "next"}

#: Each client's password flags (long ``--…password…`` flags are read for every program).
CLIENTS: dict[str, dict[str, str]] = {
    **dict.fromkeys(
        (
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysqlimport",
            "mysqlshow",
            "mysqlcheck",
            "mysqlpump",
            "mysqlslap",
            "mysqlbinlog",
            "mysqlsh",
            "mariadb",
            "mariadb-dump",
            "mariadb-admin",
            "mariadb-import",
            "mariadb-check",
            "mariadb-show",
            "mycli",
        ),
        _MYSQL,
    ),
    **dict.fromkeys(
        (
            "ldapsearch",
            "ldapadd",
            "ldapmodify",
            "ldapdelete",
            "ldapwhoami",
            "ldapcompare",
            "ldapmodrdn",
            "ldapexop",
        ),
        _LDAP,
    ),
    "ldappasswd": {"-w": "next", "-a": "next", "-s": "next"},
    **dict.fromkeys(
        (
            "mongo",
            "mongosh",
            "mongodump",
            "mongorestore",
            "mongoexport",
            "mongoimport",
            "mongostat",
            "mongotop",
            "mongofiles",
        ),
        _MONGO,
    ),
    **dict.fromkeys(("sqlcmd", "bcp", "osql"), _MSSQL),
    **dict.fromkeys(("redis-cli", "keydb-cli", "valkey-cli"), {"-a": "next"}),
    **dict.fromkeys(
        ("smbclient", "rpcclient", "smbget", "smbcacls", "smbmap", "winexe", "nxc"), _SMB
    ),
    "sshpass": {"-p": "next"},
    "rabbitmqadmin": {"-p": "next"},
    "rabbitmqctl": {"add_user": "pos2", "change_password": "pos2"},
    "influx": {"-t": "next"},
    # -p is a port for "docker run": only "… login -p SECRET" is a password.
    **dict.fromkeys(
        ("docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oc", "cf", "az"),
        {"@": "login", "-p": "next"},
    ),
    "curl": {"-u": "user", "--user": "user", "-U": "user", "--proxy-user": "user"},
    **dict.fromkeys(("zip", "unzip", "zipcloak"), _ZIP),
    **dict.fromkeys(("7z", "7za", "7zz", "rar", "unrar"), {"-p": "glued"}),
    "ipmitool": {"-P": "next"},
    **dict.fromkeys(
        ("snmpwalk", "snmpget", "snmpset", "snmpbulkwalk"), {"-A": "next", "-X": "next"}
    ),
    **dict.fromkeys(("plink", "pscp", "psftp"), {"-pw": "next"}),
    **dict.fromkeys(("xfreerdp", "wlfreerdp"), {"/p:": "glued"}),
    "rdesktop": {"-p": "next"},
    "openssl": {"-passin": "next", "-passout": "next", "-pass": "next", "-k": "next"},
    **dict.fromkeys(("sqlplus", "expdp", "impdp"), {"": "slash"}),
}
# A client's password follows one of these flags (or is positional, see _POSITIONAL):
# lines are found by them, a literal-led pattern the regex engine scans at C speed, and
# only those lines are split into words and looked up in CLIENTS.
# (" -" leads the pattern as a literal: a class such as "[ \t]" stops at every space.)
_FLAG_HIT = lazy_compile(r" -(?:[pwuatkAXPU]|-user|-proxy-user|-basic-auth|-auth)")
_FLAG_HIT_RARE = lazy_compile(r"\t-(?:[pwuatkAXPU]|-user|-proxy-user|-basic-auth|-auth)| /p:")
_CLIENT_NAMES = frozenset(CLIENTS)
# The clients whose password is positional: a line is read only when it names one (a
# sub-command such as add_user is read on rabbitmqctl's line anyway).
_POSITIONAL = ("rabbitmqctl", "sqlplus", "expdp", "impdp")
# user:password after -u/--user/--basic-auth of any program (httpie -a is "--auth").
_USER_PASS = lazy_compile(
    r"(?:^|[\s\"'])(?:-u|--user|--basic-auth|-a|--auth)[ \t=]*[\"']?[^\s:\"'$%]+:"
    r"(?P<pw>[^\s\"']+)",
    re.MULTILINE,
)
# A shell word: unquoted characters, escapes, and quoted runs, glued together.
_WORD = lazy_compile(r"""(?:[^\s"'\\|;&<>()]|\\.|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')+|[|;&<>()]+""")
# Flags whose name says secret, in any program: --db-password=X, -storepass X, -Password X.
_NAMED_FLAG = lazy_compile(r"-{1,2}(?P<name>[A-Za-z][\w.-]{2,60})(?:(?P<sep>[=:])(?P<v>.*))?$")
_SECURE_STRING = lazy_compile(
    r"(?i)ConvertTo-SecureString\s+(?:-String\s+)?(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)')"
)
_STOP_REF = lazy_compile(r"(?i)^(?:\$.*|%\w+%|env:.*|file:.*|fd:.*|stdin|-.*|\*+|<.*>)$")


def _unquote(text: str, a: int, b: int) -> tuple[int, int]:
    """The span of a word's value inside its quotes (``'x'`` or ``"x"`` → ``x``)."""
    while b - a > 1 and text[b - 1] == "`" and text[a] != "`":
        b -= 1  # a markdown code span closes after the word (`--token "x"`)
    if b - a >= 2 and text[a] == text[b - 1] and text[a] in "\"'":
        return a + 1, b - 1
    return a, b


def _value(text: str, a: int, b: int) -> tuple[int, int] | None:
    """The value span of a word, or None when it is no literal password."""
    a, b = _unquote(text, a, b)
    v = text[a:b]
    if len(v) < 3 or _STOP_REF.match(v) or is_placeholder(v):
        return None
    if v.startswith("pass:"):
        return (a + 5, b) if len(v) > 8 else None  # openssl's pass:SECRET
    return a, b


def _user_password(text: str, a: int, b: int) -> tuple[int, int] | None:
    """The password of ``user:password`` or ``user%password`` (curl, smbclient)."""
    a, b = _unquote(text, a, b)
    v = text[a:b]
    cut = min((i for i in (v.find(":"), v.find("%")) if i > 0), default=-1)
    if cut < 0 or v[cut] == "%" and v.endswith("%"):
        return None  # no password, or %VAR% (Windows)
    return _value(text, a + cut + 1, b)


def _words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    return [m.span() for m in _WORD.finditer(text, start, end)]


def _program(word: str) -> str | None:
    name = word.strip("\"'").rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower()
    name = name.removesuffix(".exe")
    return name if name in CLIENTS else None


def _client_args(
    text: str, words: list[tuple[int, int]], i: int, flags: dict[str, str]
) -> Iterator[tuple[int, int]]:
    """The password spans in the arguments of a client whose name is word ``i``."""
    needs = flags.get("@")  # a sub-command the flags belong to ("login")
    first_positional = True
    j = i + 1
    while j < len(words):
        a, b = words[j]
        w = text[a:b]
        j += 1
        if w[0] in "|;&<>()":
            return  # the next command
        if needs is not None:
            needs = None if w == flags["@"] else needs
            continue
        kind = flags.get(w)
        if kind in ("next", "user"):
            if j < len(words) and text[words[j][0]] not in "|;&<>()-":
                na, nb = words[j]
                got = _value(text, na, nb) if kind == "next" else _user_password(text, na, nb)
                if got:
                    yield got
                j += 1
            continue
        if kind == "pos2":  # add_user NAME PASSWORD
            if j + 1 < len(words):
                got = _value(text, *words[j + 1])
                if got:
                    yield got
            return
        if w.startswith(("-", "/")):
            for flag, k in flags.items():
                if len(flag) < 2 or not w.startswith(flag) or len(w) == len(flag):
                    continue
                if k == "user":
                    got = _user_password(text, a + len(flag) + (w[len(flag)] == "="), b)
                elif k in ("glued", "next"):
                    got = _value(text, a + len(flag) + (w[len(flag)] == "="), b)
                else:
                    continue
                if got:
                    yield got
                break
            continue
        if first_positional and flags.get("") == "slash":
            # sqlplus scott/SECRET@db: the first word that is not a flag
            first_positional = False
            slash, at = w.find("/"), w.rfind("@")
            if slash > 0 and "://" not in w:
                got = _value(text, a + slash + 1, a + at if at > slash else b)
                if got:
                    yield got


def _named_flags(text: str, words: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    for k, (a, b) in enumerate(words):
        if text[a] != "-":
            continue
        m = _NAMED_FLAG.match(text, a, b)
        if m is None or not secret_name(m.group("name")):
            continue
        if m.group("name").lower().startswith("no-"):
            continue  # --no-token: a negation takes no value
        if m.group("sep") is not None:
            got = _value(text, m.start("v"), b)
        elif k + 1 < len(words) and text[words[k + 1][0]] not in "-|;&<>()":
            got = _value(text, *words[k + 1])
        else:
            continue
        # Any program's flag: its value must read as a literal, not a word or code.
        if got and value_ok(text[got[0] : got[1]], bare=text[got[0] - 1] not in "\"'"):
            yield got


def command_spans(text: str, lowered: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    """The passwords on the command lines of ``text`` (see the module docstring).

    ``lines`` are the spans of the lines holding a secret-name word (where a named flag
    can be).
    """
    if "convertto-securestring" in lowered:
        for m in _SECURE_STRING.finditer(text):
            g = "dq" if m.group("dq") is not None else "sq"
            got = _value(text, *m.span(g))
            if got:
                yield (*got, "cli-credential")
    if not any(w in lowered for w in _GATE):
        return
    seen: set[tuple[int, int]] = set()
    done: set[int] = set()
    hits = [text.rfind("\n", 0, m.start()) + 1 for m in _FLAG_HIT.finditer(text)]
    # "\t" first: a one-character search (memchr) rules out most texts, where a scan for
    # "\t-" costs as much as a regex.
    if ("\t" in text and "\t-" in text) or " /p:" in text:
        hits += [text.rfind("\n", 0, m.start()) + 1 for m in _FLAG_HIT_RARE.finditer(text)]
    hits += [start for start, _ in lines_holding(text, lowered, _POSITIONAL)]
    for start in hits:
        if start in done:
            continue
        done.add(start)
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        for m in _USER_PASS.finditer(text, start, end):
            got = _value(text, *m.span("pw"))
            if got:
                seen.add(got)
        # Most lines with a "-p"/"-u"/"-a" flag name no client (a docstring, an option
        # table): a set of the line's words tells before it is split as a shell would.
        if _CLIENT_NAMES.isdisjoint(
            w.rsplit("/", 1)[-1].strip("\"'").lower().removesuffix(".exe")
            for w in text[start:end].split()
        ):
            continue
        words = _words(text, start, end)
        for i, (a, b) in enumerate(words):
            name = _program(text[a:b])
            if name is not None:
                seen.update(_client_args(text, words, i, CLIENTS[name]))
    for start, end in lines:
        if lowered.find(" -", start, end) >= 0 or lowered.find("\t-", start, end) >= 0:
            seen.update(_named_flags(text, _words(text, start, end)))
    for a, b in sorted(seen):
        if b - a >= 3:
            yield (a, b, "cli-credential")


# A client's password needs a flag or one of its positional forms.
_GATE = (" -", "\t-", "/p:", *_POSITIONAL)
