"""The structural layer of :mod:`ctxnb.redaction.redactor`: values found by reading a text's format.

The pattern rules (``_secret_patterns``) find tokens by their shape and assignments by
their entropy. This layer reads what the text *is* and redacts the value of any key
whose name says secret, whatever the value looks like (``DB_PASSWORD='Maple orbit12'``
holds a password though its entropy is low):

- assignments and key/value pairs of dotenv, INI, TOML, properties, YAML (plain, quoted
  and flow values; ``|``/``>`` block scalars: every line of the block), JSON (strings
  with escapes), HCL, Dockerfile ``ENV``/``ARG``, shell ``export``/``VAR=… cmd``,
  PowerShell ``$env:``, PHP ``define``/``=>``, Python/JS/Go/Ruby/Java/C# assignments,
  setters (``setPassword("…")``), keyword arguments, XML attributes and elements, SQL
  ``PASSWORD '…'``; string concatenation (``"a" + "b"``, ``'a' . 'b'``, implicit
  ``("a" "b")``) and triple-quoted strings are followed;
- whole documents with a real parser when the text is one: JSON (``json``) and TOML
  (``tomllib``); every string under a secret key, in any nesting, is redacted wherever
  it occurs (JSON-escaped or not);
- URLs: the password of ``scheme://user:password@host`` (also with ``@ : / #`` in the
  password: the host is after the *last* ``@``), checked with ``urllib.parse``; a token
  used as the user name (``https://<token>@host``); secret query parameters; Oracle's
  ``user/password@`` JDBC form; ODBC/ADO ``PWD={…}`` connection strings;
- command lines: ``--password x``, ``--db-password=x``, ``-u user:pass``/``--user``,
  ``mysql -pSECRET``, ``sshpass -p``, ``docker login -p``, ``redis-cli -a``;
- Kubernetes ``Secret`` manifests: every value under ``data:``/``stringData:``, and a
  container ``env`` entry whose ``name`` says secret (its ``value``); Terraform
  ``variable "db_password" { default = "…" }``.

What stays (the stop-list, :func:`is_placeholder`): empty values, references and
templates (``${VAR}``, ``$VAR``, ``{{ … }}``, ``${{ secrets.X }}``, ``os.environ[…]``,
``process.env.X``, ``var.x``, ``vault:…``, ``!vault``), placeholders (``<your-token>``,
``changeme``, ``xxxx``, ``***``, ``TODO``, ``example``…), type names (``str``,
``SecretStr``), language keywords (``await``, ``new``, ``this`` …: the value is code),
numbers under six digits, version numbers (``^3.948.0``), booleans and null, the
published AWS example keys, and bare values that read as code (calls, subscripts, dotted
or snake/camel-case names; ``a || b``, ``c ? d : e``).

Parsing never makes redaction fail open: a document that does not parse is still read
line by line here, and the pattern layer runs on every text whatever this layer found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

from .._util.lazyre import lazy_compile
from ._patterns import AWS_EXAMPLES, NAME_IDENT, secret_name
from ._prose import not_literal, word_run

__all__ = ["STRUCTURAL_RULES", "is_placeholder", "structured_spans", "value_ok"]

#: The rule names this layer reports.
STRUCTURAL_RULES = ("secret-value", "url-credentials", "cli-credential", "k8s-secret")

Span = tuple[int, int, str]


_STOP = lazy_compile(
    r"""(?ix)^(?:
        <[^>]*>.* | .*\$\{[^}]*\}.* | .*\$\([^)]*\).* | .*\{\{.*\}\}.* | \{[A-Za-z_][\w.]*\}
      | \$[A-Za-z_]\w* | \$\{\{.* | %\([^)]*\)s | %s | [*.x•-]+ | \[REDACTED:[\w-]+\]
      | none | null | nil | true | false | yes | no | on | off | undefined | required
      | await | new | yield | typeof | function | async | lambda | not | this | self
      | super | require | import | return | static | const | let | var
      | password | passwd | secret | token | pass | str | bytes | string | int | bool
      | any | number | secretstr | optional\b.* | [0-9]{1,5}
      | (?:[~^]|[<>]=?)?[0-9]+(?:\.[0-9]+){1,3}
      | .*(?:os\.environ|os\.getenv|getenv\(|process\.env|env\(|environ\[|secretkeyref
            |vault:|!vault|ENC\[|awssm:|ssm:/|arn:aws:).*
      | (?:var|local|data|module|secrets|vars|env|inputs|steps|values)\.[\w.\[\]"']+
      | .*(?:your[_-]|changeme|change[_-]me|placeholder|example|dummy|sample|xxxx
            |redacted|insert[_-]|replace[_-]?me|todo|fixme|secret[_-]?here
            |token[_-]?here|key[_-]?here|<.*>).*
    )$""",
)


def is_placeholder(value: str) -> bool:
    """Whether a value under a secret key is a reference, a template or a placeholder.

    Example:
        >>> [is_placeholder(v) for v in ("${DB_PASS}", "changeme", "Maple-orbit12")]
        [True, True, False]
    """
    v = value.strip().strip("\"'`")
    return not v or v in AWS_EXAMPLES or bool(_STOP.match(v))


# A logical or conditional operator between operands, spaced as code spaces it.
_OPERATOR = lazy_compile(r"\S \|\| \S|\S && \S|\S \?\? \S|\S \? \S.* : \S")


def _code_like(value: str) -> bool:
    """An unquoted value that reads as code: a call, a subscript, a variable's name.

    Names with a digit (``Maple_falcon58``, ``Maple.tundra84``) read as literals: code
    rarely names a variable so, passwords often look so.
    """
    if set(value) & set("()[]{}") or value[0] in "$%@&!*":
        return True
    if _OPERATOR.search(value):
        return True  # env.TOKEN || undefined, isProxy ? env.KEY : null: an expression
    if any(c.isdigit() for c in value):
        return False
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value):
        return True  # a.b.c
    return value.isidentifier() and ("_" in value or bool(re.search(r"[a-z][A-Z]", value)))


def value_ok(value: str, *, bare: bool) -> bool:
    """Whether a value under a secret name is a literal secret (not a placeholder, a URL,
    a path or, unquoted, code)."""
    v = value.strip()
    if len(v) < 4 or len(set(v)) < 3 or is_placeholder(v):
        return False
    if "://" in v or (bare and v.startswith(("/", "./", "~/", "../"))):
        return False  # a URL (its credentials are read as a URL) or a path
    if bare and _code_like(v):
        return False
    # Prose, a name in code or a template (docs and source hold these under secret names).
    return not not_literal(v)


# ----------------------------------------------------------------------------- pairs
_DQ = r'"(?P<dq>(?:[^"\\\r\n]|\\.)*)"'
_SQ = r"'(?P<sq>(?:[^'\\\r\n]|\\.)*)'"
_BQ = r"`(?P<bq>[^`\r\n]*)`"
_TQ = r'"""(?P<tq>[\s\S]*?)"""|\'\'\'(?P<tq2>[\s\S]*?)\'\'\''
_BRACE = r"\{(?P<br>(?:[^}\r\n]|\}\})*)\}(?=\s*(?:;|$|\"))"
_BLOCK = r"(?P<block>[|>][-+]?\d*)[ \t]*(?:#.*)?$"
_OPEN = r"(?P<paren>\()[ \t]*(?=\r?\n)"
_BARE = r"(?P<bare>[^\s\"'`,;{}\[\]\\#][^\s\"'`,;{}\[\]\\&]*)"
_PAIR = lazy_compile(
    r"(?P<key>[\w.-]{1,80})(?![\w.-])[\"'`\]]?"
    # A type annotation before "=" (Python, TypeScript, Kotlin; Rust's &str and
    # &'static str), a Go type (var token string = "…"), VB's "As String".
    r"(?:\s*:\s*[&A-Za-z_][\w.\[\]|&'<> ]*?(?==))?"
    r"(?:[ \t]+(?:string|\[\]byte|(?i:as)[ \t]+\w+)[ \t]*(?==))?"
    # Make's ::= :::= ?= and PHP's .= ??= with a quoted value (a bare one is code:
    # token .= nextchar), then the usual operators.
    # R's <- and <<- before a quoted value.
    r"(?:[ \t]*(?P<op>=>|(?::{2,3}=|\?\?=|[?.]=|<<?-)(?=[ \t]*[\"'`])|:=|=(?!=)|:(?![:\\])"
    r"|,(?=\s*[\"'])|\((?=[\"'])"
    r"|[ \t](?=[ \t]*[\"']))"
    # A string prefix: Python's f"" r"" b"", Scala's s"", C#'s @"" and $"".
    r"[ \t]*(?:[rRbBuUfFsS]{1,2}(?=[\"'])|[@$](?=\"))?"
    r"(?:" + "|".join((_TQ, _DQ, _SQ, _BQ, _BLOCK, _OPEN, _BRACE, _BARE)) + "))",
    re.MULTILINE,
)
_CONCAT = lazy_compile(
    # + . || ~ and Lua's .., VB's &
    r"[ \t]*(?:\+|\.\.|\.|\|\||~|&)?[ \t]*(?:\\\r?\n[ \t]*)?(?:" + _DQ + "|" + _SQ + ")"
)
_PAREN_STR = lazy_compile(r"\s*(?:\+\s*)?(?:" + _DQ + "|" + _SQ + ")")
_CONDITION = lazy_compile(r"[ \t]*(?:if|elif|while|for|def|class|with|case|lambda|else|try)\b")


def _pairs(text: str, lowered: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    for start, end in lines:
        for ident in NAME_IDENT.finditer(lowered, start, end):
            m = _PAIR.match(text, ident.start())
            if m is None:
                continue
            op, key = m.group("op"), m.group("key")
            if op is None:
                continue
            if op == "(" and not key.rsplit(".", 1)[-1].lower().startswith("set"):
                continue  # only setters (setPassword("…")), not get_secret("name")
            if (op == "," or op.isspace()) and not _quoted_key_or_sql(text, ident.start(), op, key):
                continue
            if text[max(0, ident.start() - 3) : ident.start()] == "://":
                continue  # a URL's user name: the URL reader below takes it
            if op == ":" and _CONDITION.match(text, start):
                continue  # "if password == other:" is a statement, not a pair
            if op == ":" and key.startswith("-"):
                continue  # a flag named in prose ("-pSECRET: …"): flags take "=" or a space
            if not secret_name(key):
                continue
            if _in_code_span(text, start, ident.start(), m):
                continue
            if op == "=" and _expression(text, m, ident.start()):
                continue
            yield from _value_spans(text, m, start, ident.start())


def _in_code_span(text: str, line_start: int, key_at: int, m: re.Match[str]) -> bool:
    """Whether the key is inside a markdown code span and its value is not: `` `token:`
    stays `` names a symbol in prose; `` `TOKEN=x1` `` holds a pair. Spans as CommonMark
    reads them on the line: a run of n backticks opens one, the next run of exactly n
    closes it (inside ``` `` `token:` stays `` ``` the single backticks are text)."""
    if text.find("`", line_start, key_at) < 0:
        return False
    eol = text.find("\n", key_at)
    eol = len(text) if eol < 0 else eol
    # A span may open on an earlier line of its paragraph: read from the paragraph's start
    # (a blank line), within a bound, else from the line's.
    para = text.rfind("\n\n", max(0, line_start - 2000), line_start)
    pos = para + 2 if para >= 0 else 0 if line_start <= 2000 else line_start
    while (run := _BACKTICKS.search(text, pos, eol)) is not None and run.start() < key_at:
        n = len(run.group())
        close = next(
            (c.start() for c in _BACKTICKS.finditer(text, run.end(), eol) if len(c.group()) == n),
            -1,
        )
        if close < 0:
            return False  # an unclosed run is text, and so is the rest of the line
        if key_at < close:
            value = next((g for g in ("dq", "sq", "bq", "br", "bare") if m.group(g)), None)
            # The value must lie inside the span, and not be quoted by its backticks.
            return value is None or value == "bq" or m.end(value) > close
        pos = close + n  # the span closes before the key
    return False


_BACKTICKS = lazy_compile(r"`+")


def _expression(text: str, m: re.Match[str], key_at: int) -> bool:
    """Whether an unquoted value after ``=`` is code: a subscript or generic type
    (``secret = text[a:b]``, ``Token = Callable[…]``), or a call's keyword argument
    (``AccessToken(token=caller)``), where a literal secret would be quoted."""
    if m.group("bare") is None:
        return False
    b = m.end("bare")
    if text[b : b + 1] == "[":
        return True
    before = text[:key_at].rstrip(" \t")
    return before.endswith(("(", ",")) and m.group("bare").isidentifier()


def _quoted_key_or_sql(text: str, at: int, op: str, key: str) -> bool:
    if op == ",":
        # define('DB_PASSWORD', '…'), putenv("TOKEN", "…"): a quoted first argument of
        # a call (a name before the parenthesis; a tuple of strings is no pair).
        if not (at > 1 and text[at - 1] in "\"'"):
            return False
        before = text[: at - 1].rstrip()
        return before.endswith("(") and (before[-2:-1].isalnum() or before[-2:-1] == "_")
    # PASSWORD '…' (SQL), ENV X "…": an upper-case word before a quoted value.
    return (at == 0 or text[at - 1].isspace()) and key.isupper()


def _value_spans(text: str, m: re.Match[str], line_start: int, key_at: int) -> Iterator[Span]:
    name = "secret-value"
    for g in ("tq", "tq2"):
        if m.group(g) is not None:
            if value_ok(m.group(g), bare=False):
                yield from _lines_of(text, *m.span(g), name)
            return
    if m.group("block") is not None:
        yield from _block(text, m.end(), key_at - line_start, name)
        return
    if m.group("paren") is not None:
        pos = m.end()
        while (s := _PAREN_STR.match(text, pos)) is not None:
            g = "dq" if s.group("dq") is not None else "sq"
            if value_ok(s.group(g), bare=False) or len(s.group(g)) >= 4:
                yield (*s.span(g), name)
            pos = s.end()
        return
    if m.group("br") is not None and _mapping_or_template(m.group("br")):
        return
    if m.group("bq") is not None and m.group("bq") != m.group("bq").strip():
        return  # `a` then text then `b`: prose between two code spans, not a quoted value
    for g in ("dq", "sq", "bq", "br"):
        if m.group(g) is not None:
            parts = [m.span(g)]
            pos = m.end()
            # "a" + "b", 'a' . 'b', a line continuation: every part is the secret.
            while (c := _CONCAT.match(text, pos)) is not None and c.start() == pos:
                cg = "dq" if c.group("dq") is not None else "sq"
                if text[pos : c.start(cg)].strip(" \t\"'") == "" and pos != c.start(cg) - 1:
                    break  # two strings with nothing between: not a concatenation
                parts.append(c.span(cg))
                pos = c.end()
            whole = "".join(text[a:b] for a, b in parts)
            if _COMPUTED.match(text, pos) is not None:
                return  # "ghp_" + secrets.token_hex(18): the secret is computed
            if g in ("dq", "sq") and len(parts) == 1 and _repeated(text, m, g, line_start):
                return
            if value_ok(whole, bare=False):
                yield from ((a, b, name) for a, b in parts if b > a)
            return
    a, b = m.span("bare")
    if m.group("op") == ":" and text[a - 1] == ":":
        # YAML needs "key: value"; "token.ex:266" is a file and a line. A .properties
        # key (dotted) may take "key:value", unless the value is a line number.
        if "." not in m.group("key") or text[a].isdigit():
            return
    value = text[a:b]
    if m.group("op") == ":":
        eol = text.find("\n", b)
        tail = text[a : len(text) if eol < 0 else eol]
        if word_run(re.split(r"[\"'`]", tail, maxsplit=1)[0]):
            return  # "a bearer token: anyone who can …" is a sentence
        # YAML and headers: a plain scalar runs to the end of the line (or a comment),
        # unless it holds quotes or brackets (then it is code or a flow collection).
        eol = text.find("\n", b)
        eol = len(text) if eol < 0 else eol
        rest = text[a:eol]
        cut = re.search(r"\s+#|[,}\]]\s*$|[,}](?=\s*\w+\s*:)", rest)
        rest = rest[: cut.start()] if cut else rest
        rest = rest.rstrip().rstrip("\r")
        if not set(rest) & set("\"'`()[]{}"):
            b = a + len(rest)
            value = text[a:b]
    key = m.group("key").rsplit(".", 1)[-1].lower()
    if value.lower() in key:
        return  # auth=auth, password=password
    if value_ok(value, bare=True):
        yield (a, b, name)


# A concatenation that goes on with code: + name, + call(…), or a method called on its
# last string ('sk-ant-' + 'a'.repeat(90)).
_COMPUTED = lazy_compile(r"[ \t]*\+[ \t]*[A-Za-z_]|\.[A-Za-z_]\w*\(")


def _repeated(text: str, m: re.Match[str], g: str, line_start: int) -> bool:
    """Whether the quoted value occurs again, quoted, on its line: a label or a type
    shared by several keys (``{"turn": "int64", "tokens_before": "int64"}``) or a name
    repeated as its own argument, where a secret is written once."""
    q = text[m.start(g) - 1]
    quoted = q + m.group(g) + q
    eol = text.find("\n", line_start)
    return text.count(quoted, line_start, len(text) if eol < 0 else eol) >= 2


def _mapping_or_template(braced: str) -> bool:
    """A ``{…}`` value that is a mapping (``{"Authorization": f"Bearer {T}"}``) or a
    placeholder (``{token}``), not a braced literal (ODBC's ``PWD={p;w}``)."""
    return "{" in braced or bool(re.search(r"[\"']\s*:", braced)) or braced.isidentifier()


def _lines_of(text: str, a: int, b: int, name: str) -> Iterator[Span]:
    """One span per non-blank line of text[a:b] (the line breaks themselves stay)."""
    pos = a
    for line in text[a:b].split("\n"):
        stripped = line.strip()
        if stripped:
            off = pos + line.index(stripped)
            yield (off, off + len(stripped), name)
        pos += len(line) + 1


def _block(text: str, pos: int, indent: int, name: str) -> Iterator[Span]:
    """The lines of a YAML block scalar: those indented deeper than its key."""
    nl = text.find("\n", pos)
    if nl < 0:
        return
    i = nl + 1
    start = end = i
    while i < len(text):
        j = text.find("\n", i)
        j = len(text) if j < 0 else j
        line = text[i:j]
        if line.strip():
            if len(line) - len(line.lstrip(" \t")) <= indent:
                break
            end = j
        i = j + 1
    if end > start:
        yield from _lines_of(text, start, end, name)


# ------------------------------------------------------------------ whole documents
def _walk(value: object, under_secret: bool) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, under_secret or (isinstance(k, str) and secret_name(k)))
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, under_secret)
    elif isinstance(value, str) and under_secret and value_ok(value, bare=False):
        yield value


def _document(text: str) -> list[str]:
    """Secret values of a JSON or TOML document (empty when it is neither)."""
    head = text.lstrip()[:1]
    try:
        if head in ("{", "["):
            return list(_walk(json.loads(text), False))
        if head == "[" or "\n[" in text:
            import tomllib  # only for a TOML file: not on every import

            return list(_walk(tomllib.loads(text), False))
    except (ValueError, RecursionError):
        pass  # not this format: the line layer below still reads it
    return []


def _occurrences(text: str, values: list[str]) -> Iterator[Span]:
    for value in values:
        forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
        for form in forms:
            if "\n" in form:
                for line in form.split("\n"):
                    if len(line.strip()) >= 6:
                        yield from _find_all(text, line.strip())
            else:
                yield from _find_all(text, form)


def _find_all(text: str, form: str) -> Iterator[Span]:
    i = text.find(form)
    while i >= 0:
        yield (i, i + len(form), "secret-value")
        i = text.find(form, i + len(form))


# ------------------------------------------------------------------------------ URLs
_URL = lazy_compile(r"([A-Za-z][A-Za-z0-9+.-]{1,30})://([^\s\"'<>`]+)")
_HOST_AFTER = lazy_compile(r"[A-Za-z0-9.-]+(?::\d*)?(?:[/?#]|$)|\[[0-9a-fA-F:.]+\]")
_QUERY = lazy_compile(
    r"[?&;](?P<key>[\w.-]*(?:pass|pwd|token|secret|api[_-]?key|apikey|sig|signature|auth)"
    r"[\w.-]*)=(?P<secret>[^&#\s\"'<>;]+)",
    re.IGNORECASE,
)
_QUERY_WORDS = ("pass", "pwd", "token", "secret", "key", "sig", "auth")
_ORACLE = lazy_compile(r"(?i)jdbc:oracle:\w+:[\w$#]+/(?P<secret>[^@\s\"']+)@")


def _urls(text: str, lowered: str) -> Iterator[Span]:
    i = text.find("://")
    while i >= 0:
        # Found by the literal "://" (a regex with the scheme in front would try every
        # position of the text).
        j = i
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "+.-"):
            j -= 1
        m = _URL.match(text, j)
        if m is not None:
            yield from _url(m, lowered)
        i = text.find("://", i + 3)
    if "jdbc:oracle" in lowered:
        for m in _ORACLE.finditer(text):
            if not is_placeholder(m.group("secret")):
                yield (*m.span("secret"), "url-credentials")


def _url(m: re.Match[str], lowered: str) -> Iterator[Span]:
    rest, base = m.group(2), m.start(2)
    at = _userinfo_end(rest) if "@" in rest else None
    if at is not None:
        userinfo = rest[:at]
        user, colon, password = userinfo.partition(":")
        if _parses(m.group(1), userinfo, rest[at + 1 :]):
            if colon and len(password) >= 3 and not is_placeholder(password):
                s = base + len(user) + 1
                yield (s, s + len(password), "url-credentials")
            elif not colon and _token_like(user):
                yield (base, base + len(user), "url-credentials")
    if "=" in rest and any(w in rest.lower() for w in _QUERY_WORDS):
        for q in _QUERY.finditer(rest):
            if secret_name(q.group("key")) or q.group("key").lower() in ("sig", "signature"):
                if not is_placeholder(q.group("secret")) and len(q.group("secret")) >= 4:
                    yield (base + q.start("secret"), base + q.end("secret"), "url-credentials")


def _userinfo_end(rest: str) -> int | None:
    """Where the userinfo ends: the last ``@`` that a host follows (passwords may hold
    ``@ : / #``, which a URL should percent-encode and real files often do not)."""
    cut = len(rest)
    for stop in ("?", " "):
        k = rest.find(stop)
        cut = min(cut, k) if k >= 0 else cut
    at = rest.rfind("@", 0, cut)
    while at > 0:
        if _HOST_AFTER.match(rest, at + 1):
            return at
        at = rest.rfind("@", 0, at)
    return None


def _parses(scheme: str, userinfo: str, after: str) -> bool:
    try:
        parts = urlsplit(f"{scheme}://{quote(userinfo, safe=':')}@{after}")
        return parts.hostname is not None or after.startswith((":", "/"))
    except ValueError:
        return False


def _token_like(user: str) -> bool:
    return (
        len(user) >= 20
        and any(c.isdigit() for c in user)
        and any(c.isalpha() for c in user)
        and not is_placeholder(user)
    )


# ------------------------------------------------------------------ manifests, HCL, XML
_K8S_SECRET = lazy_compile(r"^kind:[ \t]*[\"']?Secret[\"']?[ \t]*$", re.MULTILINE)
_K8S_DATA = lazy_compile(r"^(?P<ind>[ \t]*)(?:data|stringData):[ \t]*$", re.MULTILINE)
_K8S_ENV = lazy_compile(
    r"name:[ \t]*[\"']?(?P<key>[\w.-]+)[\"']?[ \t]*\r?\n[ \t]*(?:-[ \t]*)?value:[ \t]*"
    r"(?:\"(?P<dq>[^\"\n]*)\"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s#][^\n#]*?))[ \t]*$",
    re.MULTILINE,
)
_TF_VAR = lazy_compile(r"variable\s+\"(?P<key>[\w-]+)\"\s*\{(?P<body>[^{}]*)\}")
_TF_DEFAULT = lazy_compile(r"default\s*=\s*\"(?P<v>(?:[^\"\\\n]|\\.)*)\"")
_DOCKER_ENV = lazy_compile(
    r"^[ \t]*ENV[ \t]+(?P<key>\w+)[ \t]+(?P<v>[^\s=\"'][^\n]*?)[ \t]*$", re.M
)
_XML_ELEM = lazy_compile(r"<(?P<key>[\w:.-]{1,80})>[ \t]*(?P<v>[^<\n]+?)[ \t]*</(?P=key)>")
# The value on a line of its own between the tags.
_XML_BLOCK = lazy_compile(
    r"<(?P<key>[\w:.-]{1,80})>[ \t]*\r?\n[ \t]*(?P<v>[^<\s][^<\r\n]*?)[ \t]*\r?\n[ \t]*</(?P=key)>"
)


def _manifests(text: str, lowered: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    # Each reader runs only when its literal is in the text (most texts hold none).
    # "kind: Secret", 'variable "db_password"' and "ENV API_TOKEN x" each hold a secret
    # word on their own line: looked for on those lines, not in the whole text.
    secret_kind = tf_var = docker_env = False
    for a, b in lines:
        secret_kind = secret_kind or lowered.find("kind:", a, b) >= 0
        tf_var = tf_var or text.find('variable "', a, b) >= 0
        docker_env = docker_env or text.find("ENV", a, b) >= 0
    if secret_kind and _K8S_SECRET.search(text):
        for m in _K8S_DATA.finditer(text):
            yield from (
                (a, b, "k8s-secret")
                for a, b, _ in _block(text, m.end(), len(m.group("ind")), "")
                for a, b in [_after_colon(text, a, b)]
                if b > a and not is_placeholder(text[a:b])
            )
    if "value:" in lowered:
        for m in _K8S_ENV.finditer(text):
            g = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
            if secret_name(m.group("key")) and value_ok(m.group(g), bare=False):
                yield (*m.span(g), "secret-value")
    if tf_var:
        for m in _TF_VAR.finditer(text):
            if secret_name(m.group("key")):
                d = _TF_DEFAULT.search(m.group("body"))
                if d and value_ok(d.group("v"), bare=False):
                    off = m.start("body")
                    yield (off + d.start("v"), off + d.end("v"), "secret-value")
    if docker_env:
        for m in _DOCKER_ENV.finditer(text):
            if secret_name(m.group("key")) and value_ok(m.group("v"), bare=True):
                yield (*m.span("v"), "secret-value")
    if "</" in text:
        for m in _XML_BLOCK.finditer(text):
            if secret_name(m.group("key")) and value_ok(m.group("v"), bare=False):
                yield (*m.span("v"), "secret-value")
        for start, end in lines:
            if text.find("</", start, end) < 0:
                continue
            for m in _XML_ELEM.finditer(text, start, end):
                if secret_name(m.group("key")) and value_ok(m.group("v"), bare=False):
                    yield (*m.span("v"), "secret-value")


_HEADER_CELL = lazy_compile(r"[A-Za-z_][\w.-]{0,40}")  # a column name: one word, no prose


def _tables(text: str, lines: list[tuple[int, int]]) -> Iterator[Span]:
    """Tab- or comma-separated tables: a header row naming a secret column (``user
    password``) marks that column's cells in the rows below, as long as they have the
    header's number of cells."""
    for start, end in lines:
        header = text[start:end].rstrip("\r")
        sep = "\t" if "\t" in header else "," if "," in header else None
        if sep is None:
            continue
        if header[:1].isspace():
            continue
        names = [c.strip().strip("\"'") for c in header.split(sep)]
        if len(names) < 2 or not all(_HEADER_CELL.fullmatch(n) for n in names):
            continue
        columns = [i for i, n in enumerate(names) if secret_name(n)]
        if not columns:
            continue
        pos = end + 1
        while pos < len(text):
            nl = text.find("\n", pos)
            row_end = len(text) if nl < 0 else nl
            row = text[pos:row_end].rstrip("\r")
            cells = row.split(sep)
            if len(cells) != len(names):
                break
            offsets, at = [], pos
            for c in cells:
                offsets.append(at)
                at += len(c) + 1
            for i in columns:
                cell = cells[i]
                v = cell.strip().strip("\"'")
                if value_ok(v, bare=True):
                    a = offsets[i] + cell.index(v)
                    yield (a, a + len(v), "secret-value")
            pos = row_end + 1


def _after_colon(text: str, a: int, b: int) -> tuple[int, int]:
    """The value of a ``key: value`` line (quotes kept outside the span)."""
    line = text[a:b]
    k = line.find(":")
    if k < 0:
        return a, a
    v = line[k + 1 :].strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1]
    if not v or v in ("|", ">", "|-", ">-"):
        return a, a
    s = a + line.index(v, k + 1)
    return s, s + len(v)


# -------------------------------------------------------------------------- the layer
def structured_spans(text: str, lowered: str, lines: list[tuple[int, int]]) -> list[Span]:
    """Every secret this layer finds in ``text``, as (start, end, rule) spans.

    ``lowered`` is the text ASCII-lowered and ``lines`` the spans of the lines holding a
    secret-name word (both computed once by the caller for every layer). Cheap literal
    tests decide which readers run: most source text needs none but the pairs reader.
    """
    spans: list[Span] = []
    if lines:
        spans += _pairs(text, lowered, lines)
        spans += _occurrences(text, _document(text))
        # Every manifest reader needs a secret word somewhere ("kind: Secret", a
        # variable's or an env entry's name).
        spans += _manifests(text, lowered, lines)
        if "\t" in text or "," in text:
            spans += _tables(text, lines)
    if "://" in text or "jdbc:" in lowered:
        spans += _urls(text, lowered)
    return spans
