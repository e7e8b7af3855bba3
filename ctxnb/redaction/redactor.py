"""Secret redaction: the one pass that text takes before it leaves ctxnb.

Every exit toward a model or a log calls this module: tool results, the assembled
context, the MCP server's results and resources, the audit log, trace records,
widgets and command output. ``redact(text)`` finds credentials with a fixed rule set
(vendor formats after gitleaks, assignments to secret-like names after detect-secrets'
keyword plugin, plus rules for the places those two miss) and replaces each secret with
a marker such as ``[REDACTED:github-token]``. Only the secret itself is replaced: in
``password = "s3cr3t…"`` the key, the ``=`` and both quotes stay, so the model still
sees what the line does. Line breaks inside a secret (a private key block) are kept
after the marker, so line numbers in the redacted text match the original, and a slice
of the redacted text by lines is the redacted slice: redact a whole file, then cut it.
``redact_data`` applies the same pass to every string inside JSON-like data.

Rules (the ``rule`` name of each finding):

===========================  ==========================================================
``private-key``              the body of ``-----BEGIN … PRIVATE KEY-----`` blocks (RSA,
                             DSA, EC, OpenSSH, PKCS#8, encrypted, PGP, SSH2 ``----``
                             armour), to the END line or, cut off, to the end of text
``private-key-body``         a key body without its header (a slice of a key file):
                             three or more lines of exactly 64 or 70 base64 characters
                             not under a public ``-----BEGIN …-----`` header
``aws-access-key-id``        ``AKIA``/``ASIA``/``ABIA``/``ACCA``/``A3T…`` + 16 chars
``aws-secret-access-key``    40-char value assigned to a name with ``aws`` and ``secret``
``github-token``             ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 36, ``github_pat_…``
``gitlab-token``             ``glpat-`` + 20
``openai-key``               ``sk-proj-…``, ``sk-svcacct-…``, ``sk-admin-…``, legacy ``sk-…``
``anthropic-key``            ``sk-ant-api03-…`` (and the admin/OAuth variants)
``slack-token``              ``xoxb-``/``xoxa-``/``xoxp-``/``xoxr-``/``xoxs-``/``xoxe-``, ``xapp-``
``slack-webhook``            the path of ``https://hooks.slack.com/services/…``
``stripe-key``               ``sk_live_…``, ``rk_test_…``, ``whsec_…`` (publishable ``pk_``
                             keys are public and kept)
``sendgrid-key``             ``SG.`` + 22 + ``.`` + 43
``huggingface-token``        ``hf_`` + 30-40 letters and digits, ``api_org_`` + 34 letters
``sentry-token``             ``sntrys_eyJ…_…`` organization and ``sntryu_`` + 64 hex user tokens
``npm-token``                ``npm_`` + 36
``pypi-token``               ``pypi-AgEIcHlwaS5vcmc…``
``digitalocean-token``       ``dop_v1_``/``doo_v1_``/``dor_v1_`` + 64 hex
``shopify-token``            ``shpat_``/``shpss_``/``shpca_``/``shppa_`` + 32 hex
``telegram-bot-token``       ``<bot id>:AA…`` (35 chars)
``google-api-key``           ``AIza`` + 35 chars
``google-oauth-secret``      ``GOCSPX-`` + 28
``vault-token``              HashiCorp Vault ``hvs.``/``hvb.``/``hvr.`` tokens
``linear-api-key``           ``lin_api_`` + 40
``grafana-token``            ``glsa_``/``glc_`` service-account and cloud tokens
``postman-key``              ``PMAK-`` + 24 + ``-`` + 34 hex
``databricks-token``         ``dapi`` + 32 hex
``age-secret-key``           ``AGE-SECRET-KEY-1`` + 58
``mailgun-key``              ``key-`` + 32 hex
``azure-key``                the value of ``AccountKey=``, ``SharedAccessKey=`` in a
                             connection string
``http-authorization``       the credentials after ``Authorization: Basic|Bearer|Token``
``jwt``                      three base64url parts, the first two starting ``eyJ``
``url-credentials``          the password in ``scheme://user:password@host``
``generic-secret``           a value assigned (``=``, ``:``, ``=>``, a call's keyword
                             argument, an XML element or ``key=… value=…`` pair, a
                             ``--flag=``, a ``.netrc`` ``password`` word) to a name
                             containing password, secret, token, api key, access key,
                             credential, auth…, when the value is rare text: at least 8
                             characters for a password and 12 for the rest, two character
                             classes, no spaces, fewer than 2.8 characters per cl100k
                             token (:mod:`ctxnb.redaction._efficiency`), and is not a
                             placeholder, a path, a URL or an expression
``secret-value``             (structural layer, :mod:`ctxnb.redaction._formats`) the value
                             of any key whose name says secret, whatever its entropy,
                             read by the text's format: dotenv, INI, TOML, properties,
                             YAML (block scalars too), JSON (escapes), HCL, Dockerfile,
                             shell, PHP/Python/JS/… assignments and concatenations
``url-credentials``          (also structural) URL userinfo read with ``urllib.parse``
                             (``@ : / #`` in a password), secret query parameters,
                             ``jdbc:oracle:…:user/password@``, a token as the user name
``cli-credential``           (:mod:`ctxnb.redaction._commands`) a password where its
                             client's argument grammar puts it: ``mysql -pX``,
                             ``ldapsearch -w X``, ``sqlcmd -P X``, ``smbclient -U u%X``,
                             ``openssl -passout pass:X``, ``sqlplus u/X@db``,
                             ``rabbitmqctl add_user u X``, ``docker login -p X`` …; any
                             program's secret-named flag (``--db-password=X``,
                             ``-storepass X``); ``-u user:X``; ``ConvertTo-SecureString``
``sql-password``             (:mod:`ctxnb.redaction._sql`) ``IDENTIFIED BY 'x'``,
                             ``[ENCRYPTED] PASSWORD 'x'``, ``PASSWORD = 'x'``,
                             ``SET PASSWORD … = 'x'`` in every dialect
``cookie``                   (:mod:`ctxnb.redaction._http`) session and auth cookies of
                             ``Cookie:``/``Set-Cookie:`` headers, ``curl -b``, JSON
``pgpass``                   (:mod:`ctxnb.redaction._credfiles`) the password field of a
                             ``.pgpass`` line; ``.properties`` continuations and
                             ``key value`` lines are ``secret-value``
``k8s-secret``               every value under ``data:``/``stringData:`` of a ``Secret``
===========================  ==========================================================

Escaped text is decoded and redacted whole (:mod:`ctxnb.redaction._escapes`): a secret
inside a JSON string (a notebook cell, a JSON log line, a transcript), with ``\\"`` and
``\\/`` escapes, or inside a percent-encoded URL, is found in the decoded text and
replaced where its escaped form stands. A vendor token glued to a name by ``_``
(``key_ghp_…``) is still a token.

Two layers, structure first: the structural layer reads what the text is and redacts
values under secret-named keys (its stop-list of placeholders and references is in
:mod:`ctxnb.redaction._formats`); the pattern rules above find tokens by shape and
assignments by entropy. Both run on every text; where both match, the pattern's rule
names the marker. A text that does not parse as its format is still read line by line.

What is deliberately not redacted: empty values (``password = ""``), expressions
(``password = os.environ["X"]``, ``token = get_token()``, ``self.secret``,
``secret = text[a:b]``, ``Client(token=caller)``, ``"ghp_" + secrets.token_hex(18)``),
placeholders (``<your-token-here>``, ``${TOKEN}``, ``{{ token }}``, ``changeme``,
``xxxxxxxx…``, ``f"Bearer {TOKEN}"``, ``[set]``), prose and code names under a secret
name (:mod:`ctxnb.redaction._prose`: ``bearer token: give each client its own``, a
markdown code span naming a symbol, ``--no-token``, ``ctxnb.llm.tokens``,
``tokens_rel``, one dictionary word, a label several keys share), names that say the
value is not the secret (``password_reset_path``, ``TOKEN_URL``, ``token_type``,
``secret_key_name``, ``token_counter``, ``tokenizer``), and high-entropy strings that are
not assigned to a secret-like name (git SHAs, UUIDs, hashes, base64 data, public
certificates), and AWS's published documentation keys (``AKIAIOSFODNN7EXAMPLE`` and
its secret), which are samples. Vendor-format tokens are redacted wherever they appear.

Redaction never touches files. Text shown to a model after redaction differs from the
file, so an edit computed from it carries the hash of a copy that does not exist on
disk: the writer's base-hash check refuses it (``STALE_FILE``), and new content holding
a ``[REDACTED:`` marker is refused (``REDACTED_CONTENT``).

Example:
    >>> result = redact('token = "ghp_' + "k3Vq9ZrT1xWm7Lp2Nc8Yb4Hd6Fs0Gj5Qe2Ua" + '"')
    >>> result.text
    'token = "[REDACTED:github-token]"'
    >>> result.count, result.findings[0].rule
    (1, 'github-token')
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

from .._util.lazyre import lazy_compile
from .._util.record import FrozenRecord
from ._commands import command_spans
from ._credfiles import credential_file_spans
from ._escapes import escaped_spans
from ._formats import structured_spans
from ._http import cookie_spans
from ._patterns import (
    KEY_BODY_MIN,
    NAME_IDENT,
    NAME_WORDS,
    RULES,
    TRIGGER_WORDS,
    Rule,
    lines_holding,
    shannon_entropy,
)
from ._sql import sql_spans

__all__ = [
    "RULES",
    "Finding",
    "RedactionResult",
    "has_secrets",
    "line_redactor",
    "redact",
    "redact_data",
    "redact_text",
    "shannon_entropy",
]

#: The marker's prefix; a write whose new text adds one is refused (REDACTED_CONTENT).
MARK = "[REDACTED:"


class Finding(FrozenRecord):
    """One redacted secret.

    Attributes:
        rule: the rule that matched, e.g. ``"github-token"``.
        line: 1-based line of the secret's first character in the original text.
        start: offset of the secret in the original text.
        end: offset just past the secret in the original text.
    """

    __slots__ = ("rule", "line", "start", "end")
    rule: str
    line: int
    start: int
    end: int

    def __init__(self, rule: str, line: int, start: int, end: int) -> None:
        self._fill(rule, line, start, end)


class RedactionResult(FrozenRecord):
    """The redacted text and what was removed from it.

    Attributes:
        text: the text with each secret replaced by ``[REDACTED:<rule>]``.
        findings: the secrets found, in text order (positions refer to the original).
    """

    __slots__ = ("text", "findings")
    text: str
    findings: tuple[Finding, ...]

    def __init__(self, text: str, findings: tuple[Finding, ...]) -> None:
        self._fill(text, findings)

    @property
    def count(self) -> int:
        """How many secrets were redacted."""
        return len(self.findings)


class _Scan:
    """One text being scanned, with what several rules share computed once, on demand."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lowered: str | None = None
        self._lines: list[tuple[int, int]] | None = None

    @property
    def lowered(self) -> str:
        # Offsets in the lowered text must be offsets in the text: str.lower() may change
        # the length of non-ASCII text ("İ" becomes two characters), so only ASCII is
        # lowered.
        if self._lowered is None:
            t = self.text
            self._lowered = t.lower() if t.isascii() else ascii_lower(t)
        return self._lowered

    def lines(self) -> list[tuple[int, int]]:
        """The (start, end) spans of the lines holding a name word, in order."""
        if self._lines is None:
            self._lines = lines_holding(self.text, self.lowered, NAME_WORDS)
        return self._lines


# Below this length the trigger words are tested first (see TRIGGER_WORDS).
_SHORT = 2048


def ascii_lower(text: str) -> str:
    """``text`` with its ASCII letters lowered and every other character kept, so that
    offsets stay offsets (``str.lower`` turns "İ" into two characters).

    UTF-8 encodes every non-ASCII character in bytes >= 0x80, which ``bytes.lower``
    leaves alone: several times faster than ``str.translate`` on long texts.

    Example:
        >>> ascii_lower("Straße İSTANBUL")
        'straße İstanbul'
    """
    return text.encode("utf-8", "surrogatepass").lower().decode("utf-8", "surrogatepass")


# Spelled out rather than taken from the string module, which a hook process would import
# (and compile a Template pattern) for these 63 characters.
_WORD_NOT_UNDERSCORE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _matches(rule: Rule, scan: _Scan) -> Iterator[re.Match[str]]:
    text = scan.text
    if rule.anchored:
        # Each identifier holding a name word is tried as an assignment's name, so a
        # rejected assignment never swallows the next one on its line (in
        # ``c = Client(api_key="…")``, ``c = Client(api_key=`` is not a match to skip).
        lowered = scan.lowered
        for start, end in scan.lines():
            for ident in NAME_IDENT.finditer(lowered, start, end):
                m = rule.pattern.match(text, ident.start(), end)
                if m is not None:
                    yield m
        return
    if rule.line_scoped:
        lowered, must = scan.lowered, rule.line_must
        for start, end in scan.lines():
            if lowered.find(must, start, end) >= 0:
                # ``endpos`` ends the text there for the pattern, so ``$`` matches at the
                # line's end without copying the text.
                yield from rule.pattern.finditer(text, start, end)
        return
    if rule.after_newline:
        yield from rule.pattern.finditer("\n" + text)
        return
    for m in rule.pattern.finditer(text):
        # A token glued to a name by "_" (key_ghp_…, deploy_glpat-…) is still a token: "_"
        # joins words, it does not make the token part of one.
        if rule.word_start and m.start() and text[m.start() - 1] in _WORD_NOT_UNDERSCORE:
            continue
        yield m


def _candidates(rule: Rule, scan: _Scan) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    text = scan.text
    shift = 1 if rule.after_newline else 0
    for m in _matches(rule, scan):
        if rule.accept is not None and not rule.accept(m):
            continue
        group = next(g for g in rule.groups if m.group(g) is not None)
        start, end = m.span(group)
        start, end = start - shift, end - shift
        if rule.strip_whitespace:
            value = text[start:end]
            start += len(value) - len(value.lstrip())
            end -= len(value) - len(value.rstrip())
        if end > start:
            spans.append((start, end))
    return spans


def _find(text: str) -> list[tuple[int, int, str]]:
    if len(text) < _SHORT and (len(text) < KEY_BODY_MIN or "\n" not in text):
        lowered = text.lower()
        # The same answer two ways: one regex search is faster on a short text (an id, a
        # path, a timestamp: most strings redacted), the words' `in` tests on a long one.
        # A .pgpass line (host:port:db:user:password) holds no word at all: four colons.
        if text.count(":") >= 4 and _PGPASS_PORT.search(text) is not None:
            pass
        elif len(text) < 100:
            if _TRIGGER.search(lowered) is None:
                return []
        elif not any(w in lowered for w in TRIGGER_WORDS):
            return []
    scan = _Scan(text)
    taken: list[tuple[int, int, str]] = []
    seen: dict[str, bool] = {}  # keyword -> in the text (rules share keywords)
    lowered = scan.lowered
    for rule, plain, keywords in _RULES_PLAIN:
        # Whether each keyword is in the text (a lowercase one in the lowered text),
        # remembered per scan, tested inline: this loop runs for every rule of every
        # text that leaves ctxnb.
        for k, low in keywords:
            hit = seen.get(k)
            if hit is None:
                hit = seen[k] = k in (lowered if low else text)
            if hit:
                break
        else:
            if keywords:
                continue
        if plain and rule.pattern.search(text) is None:
            # No match anywhere is what finditer would find too: one C call instead of
            # the candidates' generators (most rules find nothing in most texts).
            continue
        for start, end in _candidates(rule, scan):
            if any(start < t_end and t_start < end for t_start, t_end, _ in taken):
                continue
            taken.append((start, end, rule.name))
    # The structural layer (values read by format, command lines by their clients'
    # grammars, SQL, cookies, credential files, escaped strings decoded): what the
    # patterns already took keeps its rule's name, the rest of a span is added around it.
    for start, end, name in structural_spans(scan):
        # A pattern's partial view of the same value (a URL password cut at its "@")
        # gives way to the whole value: one marker, not two side by side.
        taken = [
            t
            for t in taken
            if not (start <= t[0] and t[1] <= end and t[2] in _MERGEABLE)
            or (t[0], t[1]) == (start, end)
        ]
        for a, b in _uncovered(start, end, taken):
            if b - a >= 3 and any(c.isalnum() for c in text[a:b]):
                taken.append((a, b, name))
    taken.sort()
    return taken


def structural_spans(scan: _Scan) -> list[tuple[int, int, str]]:
    """The spans of every reader that knows a format or a grammar (not a token's shape)."""
    text, lowered, lines = scan.text, scan.lowered, scan.lines()
    return [
        *structured_spans(text, lowered, lines),
        *command_spans(text, lowered, lines),
        *sql_spans(text, lowered, lines),
        *cookie_spans(text, lowered),
        *credential_file_spans(text, lowered, lines),
        *escaped_spans(text, lowered, lines, _find),
    ]


# A .pgpass line's port field (":5432:" or ":*:").
_PGPASS_PORT = lazy_compile(r":(?:\d{1,5}|\*):")
_MERGEABLE = frozenset({"generic-secret", "url-credentials"})
_TRIGGER = re.compile("|".join(re.escape(w) for w in TRIGGER_WORDS))
# Each rule, whether _matches runs it as a plain finditer over the whole text, and its
# keywords with whether each is looked for in the lowered text (see _Scan.has).
_RULES_PLAIN = [
    (
        r,
        not (r.anchored or r.line_scoped or r.after_newline),
        tuple((k, k.islower()) for k in r.keywords),
    )
    for r in RULES
]


def _uncovered(start: int, end: int, taken: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """The parts of [start, end) that no taken span covers (blank parts dropped)."""
    pieces = [(start, end)]
    for t_start, t_end, _ in taken:
        if t_end <= start or t_start >= end:
            continue
        pieces = [
            part
            for a, b in pieces
            for part in ((a, min(b, t_start)), (max(a, t_end), b))
            if part[1] > part[0]
        ]
    return pieces


def redact(text: str) -> RedactionResult:
    """Replace every secret in ``text`` with ``[REDACTED:<rule>]``.

    The text around a secret is kept (key names, quotes, URL prefixes), and line
    breaks inside a multi-line secret are kept after its marker so that line numbers
    do not move. Running ``redact`` on its own output finds nothing more. Redact a
    whole file before cutting lines out of it: a key body cut from its header is only
    caught by its shape.

    This only transforms a string; it never writes to a file.

    Args:
        text: the text to show.

    Returns:
        The redacted text and the findings (positions refer to ``text``).

    Example:
        >>> r = redact('AWS_ACCESS_KEY_ID=AKIAZ7Q2MXK4TR6W3PLN\\npassword = ""\\n')
        >>> print(r.text, end="")
        AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key-id]
        password = ""
        >>> r.findings[0].line
        1
    """
    n = len(text)
    if n <= _SMALL:
        return _redact_small(text)
    if n <= _LARGE:
        return _redact_large(text)
    return _redact(text)


def _redact(text: str) -> RedactionResult:
    spans = _find(text)
    if not spans:
        return RedactionResult(text, ())
    out: list[str] = []
    findings: list[Finding] = []
    cursor = 0
    for start, end, rule in spans:
        out.append(text[cursor:start])
        secret = text[start:end]
        # Keep the secret's line breaks so that later line numbers stay valid.
        breaks = "".join(re.findall(r"\r\n|\n|\r", secret))
        out.append(f"{MARK}{rule}]{breaks}")
        findings.append(Finding(rule, text.count("\n", 0, start) + 1, start, end))
        cursor = end
    out.append(text[cursor:])
    return RedactionResult("".join(out), tuple(findings))


# The same text is redacted again and again (the chat turns and files of a context
# rebuilt each turn, under every strategy of a replay; read_lines of one file; a table's
# cells): results (immutable) are remembered by value, many small ones and a few large
# ones (at most about 64 + 256 MB of text).
_SMALL = 4096
_LARGE = 8 * 1024 * 1024
_redact_small = functools.lru_cache(maxsize=16384)(_redact)
_redact_large = functools.lru_cache(maxsize=32)(_redact)


def redact_text(text: str) -> str:
    """``redact(text).text``: the redacted string alone.

    Example:
        >>> redact_text("DATABASE_URL=postgres://app:Pq7xZ2rLk9@db/app")
        'DATABASE_URL=postgres://app:[REDACTED:url-credentials]@db/app'
    """
    return redact(text).text


def redact_data(value: Any) -> Any:
    """Redact every string inside JSON-like data (dicts, lists, tuples), keys included.

    Returns a new structure; numbers, booleans and None come back as they are. A list of
    single-line strings is redacted as the lines of one text.

    Example:
        >>> token = "ghp_" + "k3Vq9ZrT1xWm7Lp2Nc8Yb4Hd6Fs0Gj5Qe2Ua"
        >>> redact_data({"args": {"content": f"token={token}", "n": 3}})
        {'args': {'content': 'token=[REDACTED:github-token]', 'n': 3}}
    """
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > 1 and all(isinstance(v, str) and "\n" not in v for v in value):
            # A list of lines (a conflict's expected and found lines) is redacted as the
            # text it forms: a key body is only recognisable from several lines together.
            out = redact("\n".join(value)).text.split("\n")
            if len(out) == len(value):
                return out
        return [redact_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_data(v) for v in value)
    return value


def line_redactor(text: str) -> Callable[[Any], Any]:
    """A function that redacts data quoting lines of ``text`` as ``text`` redacted whole.

    A line of a key body is only recognisable next to its header or its neighbours; a
    patch conflict, a search hit or a message that quotes one or two such lines of a
    file passes through the function made from that file. Strings equal to a redacted
    line (or holding one, or its first 60 characters as a message cuts it) get the
    redacted line; everything else goes through :func:`redact_data`.

    Example:
        >>> body = ["QUJD" * 16] * 4
        >>> scrub = line_redactor("\\n".join(["-----BEGIN EC PRIVATE " + "KEY-----", *body]))
        >>> scrub({"found": [body[1], "x = 1"]})
        {'found': ['[REDACTED:private-key]', 'x = 1']}
    """
    raw, red = text.split("\n"), redact(text).text.split("\n")
    # A multi-line secret keeps its marker on its first line; the others become empty.
    secret = {
        a.rstrip("\r"): b.rstrip("\r") or f"{MARK}private-key]"
        for a, b in zip(raw, red, strict=False)
        if a != b and len(a.strip()) >= 8
    }

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            hit = secret.get(value.rstrip("\r\n"))
            if hit is not None:
                return hit
            for a, b in secret.items():
                if a[:60] in value:
                    value = value.replace(a, b).replace(a[:60], b)
            return redact_text(value)
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return redact_data(type(value)(scrub(v) for v in value))
        return value

    return scrub if secret else redact_data


def has_secrets(text: str) -> bool:
    """Whether ``redact`` would remove anything from ``text``.

    Example:
        >>> has_secrets("nothing to see"), has_secrets("key=AIza" + "Xy9_k2Lm" * 4 + "Q1w")
        (False, True)
    """
    return bool(redact(text).findings)
