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
``huggingface-token``        ``hf_`` + 30-40 letters and digits
``npm-token``                ``npm_`` + 36
``pypi-token``               ``pypi-AgEIcHlwaS5vcmc…``
``digitalocean-token``       ``dop_v1_``/``doo_v1_``/``dor_v1_`` + 64 hex
``shopify-token``            ``shpat_``/``shpss_``/``shpca_``/``shppa_`` + 32 hex
``telegram-bot-token``       ``<bot id>:AA…`` (35 chars)
``google-api-key``           ``AIza`` + 35 chars
``azure-key``                the value of ``AccountKey=``, ``SharedAccessKey=`` in a
                             connection string
``http-authorization``       the credentials after ``Authorization: Basic|Bearer|Token``
``jwt``                      three base64url parts, the first two starting ``eyJ``
``url-credentials``          the password in ``scheme://user:password@host``
``generic-secret``           a value assigned (``=``, ``:``, ``=>``, a call's keyword
                             argument, an XML element or ``key=… value=…`` pair, a
                             ``--flag=``, a ``.netrc`` ``password`` word) to a name
                             containing password, secret, token, api key, access key,
                             credential, auth…, when the value looks random: at least 8
                             characters for a password and 12 for the rest, two character
                             classes, enough entropy, no spaces, and is not a
                             placeholder, a path, a URL or an expression
===========================  ==========================================================

What is deliberately not redacted: empty values (``password = ""``), expressions
(``password = os.environ["X"]``, ``token = get_token()``, ``self.secret``),
placeholders (``<your-token-here>``, ``${TOKEN}``, ``{{ token }}``, ``changeme``,
``xxxxxxxx…``), names that say the value is not the secret (``password_reset_path``,
``TOKEN_URL``, ``token_type``, ``secret_key_name``), and high-entropy strings that are
not assigned to a secret-like name (git SHAs, UUIDs, hashes, base64 data, public
certificates). Vendor-format tokens are redacted wherever they appear, including
AWS's documented sample key ``AKIAIOSFODNN7EXAMPLE``: it has the exact shape of a live
key, and telling published samples from live keys is not something a pattern can do
reliably; hiding a sample costs the model nothing.

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
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RULES",
    "Finding",
    "RedactionResult",
    "has_secrets",
    "redact",
    "redact_data",
    "redact_text",
    "shannon_entropy",
]

#: The marker's prefix; a write whose new text adds one is refused (REDACTED_CONTENT).
MARK = "[REDACTED:"
#: Minimum length of a generic-secret value (a password may be shorter, see below).
GENERIC_MIN_LENGTH = 12
#: Minimum length of a value assigned to a password-like name.
PASSWORD_MIN_LENGTH = 8
#: Minimum Shannon entropy (bits per character) of a generic-secret value of 16+ chars.
GENERIC_MIN_ENTROPY = 3.0
#: Minimum entropy of the random part of a vendor token; rules out ``ghp_xxxx…`` samples.
TOKEN_MIN_ENTROPY = 2.5


@dataclass(frozen=True)
class Finding:
    """One redacted secret.

    Attributes:
        rule: the rule that matched, e.g. ``"github-token"``.
        line: 1-based line of the secret's first character in the original text.
        start: offset of the secret in the original text.
        end: offset just past the secret in the original text.
    """

    rule: str
    line: int
    start: int
    end: int


@dataclass(frozen=True)
class RedactionResult:
    """The redacted text and what was removed from it.

    Attributes:
        text: the text with each secret replaced by ``[REDACTED:<rule>]``.
        findings: the secrets found, in text order (positions refer to the original).
    """

    text: str
    findings: tuple[Finding, ...]

    @property
    def count(self) -> int:
        """How many secrets were redacted."""
        return len(self.findings)


def shannon_entropy(value: str) -> float:
    """Shannon entropy of a string, in bits per character.

    Example:
        >>> shannon_entropy("aaaa"), shannon_entropy("abcd")
        (0.0, 2.0)
    """
    if not value:
        return 0.0
    n = len(value)
    return 0.0 - sum(c / n * math.log2(c / n) for c in Counter(value).values())


@dataclass(frozen=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    # The rule runs only when one of these (lowercase) occurs in the lowered text: most
    # texts hold none, and ``in`` is far faster than a regex scan.
    keywords: tuple[str, ...] = ()
    # The named groups that may hold the secret (the first that matched is used); the
    # rest of the match is kept as context.
    groups: tuple[str, ...] = ("secret",)
    accept: Callable[[re.Match[str]], bool] | None = None
    strip_whitespace: bool = False
    # Match only within the lines that hold a keyword (the assignment rules, whose
    # keywords are common words in code).
    line_scoped: bool = False
    # Match only at the start of each identifier that holds a keyword (``pattern.match``
    # there), instead of searching every line that holds one.
    anchored: bool = False
    # For a line-scoped rule: only lines holding this (lowercase) text can match.
    line_must: str = ""
    # Scan "\n" + text (so a pattern anchored on a line break also matches at the start).
    after_newline: bool = False
    # The match must not follow a letter, digit or "_" (see _b).
    word_start: bool = False


_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        <[^>]*> | \$\{[^}]*\} | \$\([^)]*\) | \{\{[^}]*\}\} | \{[A-Za-z_][\w.]*\}
      | \$[A-Za-z_]\w* | %\([^)]*\)s | %s | \*+ | x{4,} | \.{3,} | \[REDACTED:[\w-]+\]
      | none | null | nil | true | false | undefined | password | secret | token
      | .*(?:your[_-]?|example|placeholder|changeme|change[_-]me|dummy|sample|xxxx
            |redacted|insert[_-]|replace[_-]?me|todo|fixme|secret[_-]?here
            |token[_-]?here|key[_-]?here).*
    )$""",
)
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_CODE_CHARS = set("()[]{}")

_SECRET_NAME = re.compile(
    r"passw(?:or)?d|passphrase|pwd|(?:^|[_.-])pass$|secret|token|api[_.-]?key|apikey"
    r"|access[_.-]?key|auth[_.-]?key|private[_.-]?key|credentials?|^_?auth$"
    r"|(?:account|storage|signing|encryption|master|license|app)[_.-]?key$",
)
_PASSWORD_NAME = re.compile(r"passw(?:or)?d|passphrase|pwd|(?:^|[_.-])pass$|^_?auth$")
# A name ending so says the value is about the secret, not the secret itself.
_NOT_SECRET_NAME = re.compile(
    r"(?:path|url|uri|endpoint|host|field|label|name|names|length|len|file|filename|dir"
    r"|env|var|ttl|expiry|expires|expiration|type|prompt|regex|re|pattern|policy|min|max"
    r"|count|format|id|header|param|size|timeout|limit|prefix|suffix|style|class|mode"
    r"|enabled|required|valid|hint|help|text|message|msg|error)$"
)


def _char_classes(value: str) -> int:
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() and c not in "_-./:" for c in value),
        )
    )


def _looks_random(value: str, *, password: bool) -> bool:
    """Whether a value assigned to a secret-like name looks like a secret, not prose/code."""
    if len(value) < (PASSWORD_MIN_LENGTH if password else GENERIC_MIN_LENGTH):
        return False
    if any(c.isspace() for c in value) or value.isdigit():
        return False
    if _PLACEHOLDER.match(value) or _DOTTED_NAME.match(value):
        return False
    if "://" in value or value.startswith(("/", "./", "~/", "../")):
        return False  # a URL or a path (URL credentials have their own rule)
    if _char_classes(value) < 2:
        return False
    # Short values cannot reach a high entropy: ask for most characters to differ.
    floor = min(GENERIC_MIN_ENTROPY, math.log2(len(value)) - 0.6)
    return shannon_entropy(value) >= floor


def _name_ok(key: str) -> tuple[bool, bool]:
    """(is a secret name, is a password name) for an assignment's name."""
    name = key.strip("\"'`-").lower()
    if not _SECRET_NAME.search(name) or _NOT_SECRET_NAME.search(name):
        return False, False
    return True, bool(_PASSWORD_NAME.search(name))


def _generic_ok(m: re.Match[str]) -> bool:
    ok, password = _name_ok(m.group("key"))
    if not ok:
        return False
    quoted = m.group("quote") is not None
    value = m.group("secret" if quoted else "bare")
    if not quoted and (_CODE_CHARS & set(value) or _is_code_name(value)):
        # Unquoted values that look like code (calls, subscripts, variable names).
        return False
    return _looks_random(value, password=password)


def _is_code_name(value: str) -> bool:
    """An unquoted identifier that reads as a variable name rather than a random token."""
    if not value.isidentifier():
        return False
    if re.fullmatch(r"[0-9a-f]{16,}", value):
        return False  # hex digest-like: a token, not a name
    digits = sum(c.isdigit() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return "_" in value or digits < 2 or not mixed


def _pair_ok(m: re.Match[str]) -> bool:
    ok, password = _name_ok(m.group("key"))
    return ok and _looks_random(m.group("secret"), password=password)


def _token_ok(tail_group: str) -> Callable[[re.Match[str]], bool]:
    def accept(m: re.Match[str]) -> bool:
        tail = m.group(tail_group)
        # Only the entropy floor here: vendor formats are specific enough that a
        # word like "example" inside one does not make it a placeholder.
        return shannon_entropy(tail) >= TOKEN_MIN_ENTROPY

    return accept


def _mixed_token_ok(m: re.Match[str]) -> bool:
    tail = m.group("tail")
    return _char_classes(tail) >= 2 and shannon_entropy(tail) >= 3.5


def _slack_ok(m: re.Match[str]) -> bool:
    # Real Slack tokens carry numeric team/user ids; "xoxb-your-token-here" does not.
    return any(c.isdigit() for c in m.group("secret")) and _token_ok("secret")(m)


def _private_key_ok(m: re.Match[str]) -> bool:
    body = m.group("secret")
    return len(re.findall(r"[A-Za-z0-9+/=]", body)) >= 32


_PUBLIC_ARMOUR = re.compile(r"-{4,5} ?BEGIN ([A-Z0-9 ]+?) ?-{4,5}")


def _key_body_ok(m: re.Match[str]) -> bool:
    lines = m.group("secret").split()
    if len({len(line) for line in lines[:-1]}) != 1:
        return False  # a PEM body has one width; wrapped prose or tables do not
    # Under a header that is not a private key (a certificate, a public key, DH
    # parameters), it is public data.
    before = m.string[max(0, m.start() - 300) : m.start()]
    headers = _PUBLIC_ARMOUR.findall(before)
    return not headers or "PRIVATE" in headers[-1]


def _url_ok(m: re.Match[str]) -> bool:
    value = m.group("secret")
    return len(value) >= 3 and not _PLACEHOLDER.match(value)


def _auth_ok(m: re.Match[str]) -> bool:
    value = m.group("secret")
    return len(value) >= 8 and not _PLACEHOLDER.match(value) and _char_classes(value) >= 2


def _b(prefix: str) -> str:
    """A token pattern; that it starts at a word boundary is checked in code (the rule's
    ``word_start``): a leading lookbehind would stop the regex engine from skipping ahead
    to the token's literal prefix, and cost ten times the scan."""
    return prefix


_T = r"(?![A-Za-z0-9_-])"  # a token's end: no token character follows
# Words a secret-like name holds; the assignment rules look only where one occurs.
_NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential")
_NAME_IDENT = re.compile(r"[\w.-]*(?:" + "|".join(_NAME_WORDS) + r")[\w.-]*")
_ASSIGN_VALUE = r"(?:(?P<quote>[\"'`])(?P<secret>[^\"'`\r\n]*)(?P=quote)|(?P<bare>[^\s\"'`,;]+))"
_STRIPE = r"(?P<secret>{}(?P<tail>[A-Za-z0-9]{{10,99}}))(?![A-Za-z0-9])"
_ARMOUR = r"-{{4,5}} ?{0}[ A-Z0-9_-]{{0,100}}PRIVATE KEY(?: BLOCK)? ?-{{4,5}}"

# Order matters: earlier rules win where matches overlap, so the specific vendor
# formats come before the generic assignment rules.
RULES: tuple[_Rule, ...] = (
    _Rule(
        "private-key",
        re.compile(
            _ARMOUR.format("BEGIN") + r"(?P<secret>[\s\S]*?)(?:" + _ARMOUR.format("END") + r"|\Z)"
        ),
        keywords=("PRIVATE KEY",),
        accept=_private_key_ok,
        strip_whitespace=True,
    ),
    _Rule(
        "private-key-body",
        # Anchored on the line break before the body: a literal first character lets
        # the regex engine skip ahead instead of trying every position.
        re.compile(
            r"\n(?P<secret>(?:(?:[A-Za-z0-9+/]{64}|[A-Za-z0-9+/]{70})\r?\n){3,}"
            r"(?:[A-Za-z0-9+/]{1,70}={0,2}(?=\r?\n|\Z))?)"
        ),
        accept=_key_body_ok,
        strip_whitespace=True,
        after_newline=True,
    ),
    _Rule(
        "aws-access-key-id",
        re.compile(
            _b(r"(?P<secret>(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)(?P<tail>[A-Z0-9]{16}))")
            + r"(?![A-Za-z0-9])"
        ),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "aws-secret-access-key",
        re.compile(
            r"(?i:aws[\w.-]{0,20}?secret[\w.-]{0,20})[\"']?\s*(?:=>|:=|=|:)\s*[\"'`]?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        keywords=("aws",),
        accept=_token_ok("secret"),
    ),
    _Rule(
        "github-token",
        re.compile(
            _b(
                r"(?P<secret>(?:gh[pousr]_(?P<tail>[A-Za-z0-9]{36})"
                r"|github_pat_(?P<tail2>[A-Za-z0-9_]{82})))"
            )
            + r"(?![A-Za-z0-9_])"
        ),
        accept=lambda m: _token_ok("tail" if m.group("tail") else "tail2")(m),
        word_start=True,
    ),
    _Rule(
        "gitlab-token",
        re.compile(_b(r"(?P<secret>glpat-(?P<tail>[A-Za-z0-9_-]{20,}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "anthropic-key",
        re.compile(
            _b(r"(?P<secret>sk-ant-(?:api|admin|oat|sid)\d\d-(?P<tail>[A-Za-z0-9_-]{20,}))") + _T
        ),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "openai-key",
        re.compile(
            _b(
                r"(?P<secret>sk-(?:(?:proj|svcacct|admin)-(?P<tail>[A-Za-z0-9_-]{20,})"
                r"|(?P<tail2>[A-Za-z0-9]{32,})))"
            )
            + _T
        ),
        accept=lambda m: (
            _token_ok("tail" if m.group("tail") else "tail2")(m)
            and _char_classes(m.group("tail") or m.group("tail2")) >= 2
        ),
        word_start=True,
    ),
    _Rule(
        "slack-token",
        re.compile(
            _b(
                r"(?P<secret>(?:xox[baprse]-[0-9A-Za-z][0-9A-Za-z-]{8,}[0-9A-Za-z]"
                r"|xapp-\d-[0-9A-Za-z][0-9A-Za-z-]{8,}[0-9A-Za-z]))"
            )
            + r"(?![0-9A-Za-z])"
        ),
        accept=_slack_ok,
        word_start=True,
    ),
    _Rule(
        "slack-webhook",
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/+-]{20,})"
        ),
        accept=_token_ok("secret"),
    ),
    _Rule(
        "stripe-key",
        # One rule per literal prefix: a pattern starting "[sr]k_|whsec_" is scanned
        # character by character; a literal prefix is skipped to directly.
        re.compile(_STRIPE.format("sk_(?:test|live|prod)_")),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "stripe-key",
        re.compile(_STRIPE.format("rk_(?:test|live|prod)_")),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "stripe-key",
        re.compile(_STRIPE.format("whsec_")),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "sendgrid-key",
        re.compile(_b(r"(?P<secret>SG\.(?P<tail>[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "huggingface-token",
        re.compile(_b(r"(?P<secret>hf_(?P<tail>[A-Za-z0-9]{30,40}))") + r"(?![A-Za-z0-9_])"),
        accept=_mixed_token_ok,
        word_start=True,
    ),
    _Rule(
        "npm-token",
        re.compile(_b(r"(?P<secret>npm_(?P<tail>[A-Za-z0-9]{36}))") + r"(?![A-Za-z0-9_])"),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "pypi-token",
        re.compile(_b(r"(?P<secret>pypi-AgEIcHlwaS5vcmc(?P<tail>[A-Za-z0-9_-]{40,}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "digitalocean-token",
        re.compile(_b(r"(?P<secret>do[opr]_v1_(?P<tail>[a-f0-9]{64}))") + r"(?![A-Za-z0-9])"),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "shopify-token",
        re.compile(_b(r"(?P<secret>shp(?:at|ss|ca|pa)_(?P<tail>[a-fA-F0-9]{32}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "telegram-bot-token",
        re.compile(r"(?<![0-9])(?P<secret>[0-9]{8,10}:AA(?P<tail>[A-Za-z0-9_-]{33}))" + _T),
        keywords=(":AA",),
        accept=_token_ok("tail"),
    ),
    _Rule(
        "google-api-key",
        re.compile(_b(r"(?P<secret>AIza(?P<tail>[0-9A-Za-z_-]{35}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    _Rule(
        "azure-key",
        re.compile(
            r"(?:AccountKey|SharedAccessKey|SharedAccessSignature)="
            r"(?P<secret>[A-Za-z0-9+/%&=:.-]{20,}?)(?=;|\"|'|\s|$)"
        ),
        keywords=("AccountKey=", "SharedAccess"),
        accept=_token_ok("secret"),
    ),
    _Rule(
        "jwt",
        re.compile(
            _b(
                r"(?P<secret>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}"
                r"\.(?:[A-Za-z0-9_-]{10,}={0,2})?)"
            )
            + r"(?![A-Za-z0-9_-])"
        ),
        word_start=True,
    ),
    _Rule(
        "http-authorization",
        re.compile(
            r"(?i:(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?"
            r"(?i:basic|bearer|token|digest|apikey)\s+(?P<secret>[A-Za-z0-9._~+/=-]+)"
        ),
        keywords=("authorization",),
        accept=_auth_ok,
    ),
    _Rule(
        "url-credentials",
        re.compile(r"://[^/\s:@'\"]*:(?P<secret>[^/\s:@'\"]+)@"),
        accept=_url_ok,
    ),
    _Rule(
        "generic-secret",
        re.compile(
            # The whole name is matched and checked in _generic_ok: matching the
            # secret word inside the pattern backtracks badly on long identifiers.
            r"(?P<key>[\w.-]{1,80})(?![\w.-])[\"']?"
            r"(?:\s*:\s*[A-Za-z_][\w.\[\]| ]*?)?"  # an optional type annotation
            r"\s*(?:=>|:=|=(?!=)|:)[ \t]*" + _ASSIGN_VALUE,
        ),
        keywords=_NAME_WORDS,
        groups=("secret", "bare"),
        accept=_generic_ok,
        anchored=True,
    ),
    _Rule(
        # <password>…</password>
        "generic-secret",
        re.compile(r"<(?P<key>[\w:.-]{1,80})>(?P<secret>[^<\s]+)</[\w:.-]{1,80}>"),
        keywords=_NAME_WORDS,
        accept=_pair_ok,
        line_scoped=True,
        line_must="</",
    ),
    _Rule(
        # <add key="DbPassword" value="…"/>
        "generic-secret",
        re.compile(
            r"(?i:key|name)\s*=\s*[\"'](?P<key>[^\"']{1,80})[\"']\s+(?i:value)\s*=\s*"
            r"[\"'](?P<secret>[^\"'\s]+)[\"']"
        ),
        keywords=_NAME_WORDS,
        accept=_pair_ok,
        line_scoped=True,
        line_must="value",
    ),
    _Rule(
        # .netrc's "password …", "--password …"
        "generic-secret",
        re.compile(r"(?:^|\s)(?P<key>-{0,2}pass(?:word|wd)?)[ \t]+(?P<secret>[^\s\"'`]+)[ \t]*$"),
        keywords=("pass",),
        accept=_pair_ok,
        line_scoped=True,
        line_must="pass",
    ),
)


class _Scan:
    """One text being scanned, with what several rules share computed once, on demand."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lowered: str | None = None
        self._lines: list[tuple[int, int]] | None = None
        self._has: dict[str, bool] = {}

    @property
    def lowered(self) -> str:
        # Offsets in the lowered text must be offsets in the text: str.lower() may change
        # the length of non-ASCII text ("İ" becomes two characters), so only ASCII is
        # lowered.
        if self._lowered is None:
            t = self.text
            self._lowered = t.lower() if t.isascii() else t.translate(_ASCII_LOWER)
        return self._lowered

    def has(self, keyword: str) -> bool:
        hit = self._has.get(keyword)
        if hit is None:
            hit = self._has[keyword] = keyword in (self.lowered if keyword.islower() else self.text)
        return hit

    def lines(self) -> list[tuple[int, int]]:
        """The (start, end) spans of the lines holding a name word, in order."""
        if self._lines is None:
            text, lowered, spans = self.text, self.lowered, set()
            for kw in _NAME_WORDS:
                i = lowered.find(kw)
                while i >= 0:
                    start = text.rfind("\n", 0, i) + 1
                    end = text.find("\n", i)
                    end = len(text) if end < 0 else end
                    spans.add((start, end))
                    i = lowered.find(kw, end)
            self._lines = sorted(spans)
        return self._lines


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_WORD = frozenset(string.ascii_letters + string.digits + "_")


def _matches(rule: _Rule, scan: _Scan) -> Iterator[re.Match[str]]:
    text = scan.text
    if rule.anchored:
        # Each identifier holding a name word is tried as an assignment's name, so a
        # rejected assignment never swallows the next one on its line (in
        # ``c = Client(api_key="…")``, ``c = Client(api_key=`` is not a match to skip).
        lowered = scan.lowered
        for start, end in scan.lines():
            for ident in _NAME_IDENT.finditer(lowered, start, end):
                m = rule.pattern.match(text, ident.start(), end)
                if m is not None:
                    yield m
        return
    if rule.line_scoped:
        lowered, must = scan.lowered, rule.line_must
        for start, end in scan.lines():
            if lowered.find(must, start, end) >= 0:
                # $ must see the line's end: search the line, not up to ``end``.
                yield from rule.pattern.finditer(text[:end] if end < len(text) else text, start)
        return
    if rule.after_newline:
        yield from rule.pattern.finditer("\n" + text)
        return
    for m in rule.pattern.finditer(text):
        if rule.word_start and m.start() and text[m.start() - 1] in _WORD:
            continue
        yield m


def _candidates(rule: _Rule, scan: _Scan) -> list[tuple[int, int]]:
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
    scan = _Scan(text)
    taken: list[tuple[int, int, str]] = []
    for rule in RULES:
        if rule.keywords and not any(scan.has(k) for k in rule.keywords):
            continue
        for start, end in _candidates(rule, scan):
            if any(start < t_end and t_start < end for t_start, t_end, _ in taken):
                continue
            taken.append((start, end, rule.name))
    taken.sort()
    return taken


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
    if len(text) > _CACHE_MIN:
        return _redact_cached(text)
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


# The same file is often redacted again and again (read_lines of one file, a context
# rebuilt each turn); large texts are remembered by value.
_CACHE_MIN = 4096
_redact_cached = functools.lru_cache(maxsize=32)(_redact)


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


def has_secrets(text: str) -> bool:
    """Whether ``redact`` would remove anything from ``text``.

    Example:
        >>> has_secrets("nothing to see"), has_secrets("key=AIza" + "Xy9_k2Lm" * 4 + "Q1w")
        (False, True)
    """
    return bool(redact(text).findings)
