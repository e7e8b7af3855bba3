"""Secret redaction for text that is about to be shown to a model.

``redact(text)`` finds credentials with a fixed rule set, modelled on the rule sets of
gitleaks and detect-secrets, and replaces each secret with a marker such as
``[REDACTED:github-token]``. Only the secret itself is replaced: in
``password = "s3cr3t…"`` the key, the ``=`` and both quotes stay, so the model still
sees what the line does. Line breaks inside a secret (a private key block) are kept
after the marker, so line numbers in the redacted text match the original.

Rules (the ``rule`` name of each finding):

===========================  ==========================================================
``private-key``              the body of ``-----BEGIN … PRIVATE KEY-----`` blocks (to
                             ``-----END …`` or, for a cut-off excerpt, end of text)
``aws-access-key-id``        ``AKIA``/``ASIA``/``ABIA``/``ACCA``/``A3T…`` + 16 chars
``aws-secret-access-key``    40-char value assigned to a name with ``aws`` and ``secret``
``github-token``             ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 36, ``github_pat_…``
``slack-token``              ``xoxb-``/``xoxa-``/``xoxp-``/``xoxr-``/``xoxs-`` tokens
``slack-webhook``            the path of ``https://hooks.slack.com/services/…``
``stripe-key``               secret and restricted keys ``sk_live_…``, ``rk_test_…``
                             (publishable ``pk_`` keys are public and kept)
``google-api-key``           ``AIza`` + 35 chars
``jwt``                      three base64url parts, the first two starting ``eyJ``
``url-credentials``          the password in ``scheme://user:password@host``
``generic-secret``           a value assigned to a name containing password, secret,
                             token, api key, access key, credential…, when the value has
                             at least 12 characters, Shannon entropy of at least 3.0
                             bits per character, two character classes, no spaces, and
                             is not a placeholder or an expression
===========================  ==========================================================

What is deliberately not redacted: empty values (``password = ""``), expressions
(``password = os.environ["X"]``, ``token = get_token()``, ``self.secret``),
placeholders (``<your-token-here>``, ``${TOKEN}``, ``{{ token }}``, ``changeme``,
``xxxxxxxx…``), and high-entropy strings that are not assigned to a secret-like name
(git SHAs, UUIDs, hashes, base64 data). Vendor-format tokens are redacted wherever they
appear, including AWS's documented sample key ``AKIAIOSFODNN7EXAMPLE``: it has the
exact shape of a live key, and telling published samples from live keys is not
something a pattern can do reliably; hiding a sample costs the model nothing.

Redaction never touches files; writing nothing back is the caller's job. Text shown
to a model after redaction differs from the file, so an edit computed from it carries
the hash of a copy that does not exist on disk: the writer's base-hash check refuses it
(``STALE_FILE``) and the model must work from line numbers and unredacted context.

Example:
    >>> result = redact('token = "ghp_' + "k3Vq9ZrT1xWm7Lp2Nc8Yb4Hd6Fs0Gj5Qe2Ua" + '"')
    >>> result.text
    'token = "[REDACTED:github-token]"'
    >>> result.count, result.findings[0].rule
    (1, 'github-token')
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "Finding",
    "RedactionResult",
    "RULES",
    "has_secrets",
    "redact",
    "shannon_entropy",
]

#: Minimum length of a generic-secret value.
GENERIC_MIN_LENGTH = 12
#: Minimum Shannon entropy (bits per character) of a generic-secret value.
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
    # The named groups that may hold the secret (the first that matched is used); the
    # rest of the match is kept as context.
    groups: tuple[str, ...] = ("secret",)
    accept: Callable[[re.Match[str]], bool] | None = None
    strip_whitespace: bool = False


_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        <[^>]*> | \$\{[^}]*\} | \$\([^)]*\) | \{\{[^}]*\}\} | \{[A-Za-z_][\w.]*\}
      | \$[A-Za-z_]\w* | %\([^)]*\)s | %s | \*+ | x{4,} | \.{3,} | \[REDACTED:[\w-]+\]
      | .*(?:your[_-]?|example|placeholder|changeme|change[_-]me|dummy|sample|xxxx
            |redacted|insert[_-]|replace[_-]?me|todo|fixme|secret[_-]?here
            |token[_-]?here|key[_-]?here).*
    )$""",
)
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_CODE_CHARS = set("()[]{}")


def _char_classes(value: str) -> int:
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() and c not in "_-." for c in value),
        )
    )


def _generic_ok(m: re.Match[str]) -> bool:
    if not _SECRET_NAME.search(m.group("key")):
        return False
    quoted = m.group("quote") is not None
    value = m.group("secret" if quoted else "bare")
    if len(value) < GENERIC_MIN_LENGTH or any(c.isspace() for c in value):
        return False
    if _PLACEHOLDER.match(value) or _DOTTED_NAME.match(value):
        return False
    if not quoted and (_CODE_CHARS & set(value) or value.isidentifier()):
        # Unquoted values that look like code (calls, subscripts, variable names).
        return False
    return _char_classes(value) >= 2 and shannon_entropy(value) >= GENERIC_MIN_ENTROPY


def _token_ok(tail_group: str) -> Callable[[re.Match[str]], bool]:
    def accept(m: re.Match[str]) -> bool:
        tail = m.group(tail_group)
        # Only the entropy floor here: vendor formats are specific enough that a
        # word like "example" inside one does not make it a placeholder.
        return shannon_entropy(tail) >= TOKEN_MIN_ENTROPY

    return accept


def _slack_ok(m: re.Match[str]) -> bool:
    # Real Slack tokens carry numeric team/user ids; "xoxb-your-token-here" does not.
    return any(c.isdigit() for c in m.group("secret")) and _token_ok("secret")(m)


def _private_key_ok(m: re.Match[str]) -> bool:
    body = m.group("secret")
    return len(re.findall(r"[A-Za-z0-9+/=]", body)) >= 32


def _url_ok(m: re.Match[str]) -> bool:
    value = m.group("secret")
    return len(value) >= 3 and not _PLACEHOLDER.match(value)


_SECRET_NAME = re.compile(
    r"passw(?:or)?d|pwd|secret|token|api[_.-]?key|apikey|access[_.-]?key|auth[_.-]?key"
    r"|private[_.-]?key|credentials?",
    re.IGNORECASE,
)


# Order matters: earlier rules win where matches overlap, so the specific vendor
# formats come before the generic assignment rule.
RULES: tuple[_Rule, ...] = (
    _Rule(
        "private-key",
        re.compile(
            r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
            r"(?P<secret>[\s\S]*?)"
            r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
        accept=_private_key_ok,
        strip_whitespace=True,
    ),
    _Rule(
        "aws-access-key-id",
        re.compile(r"\b(?P<secret>(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)(?P<tail>[A-Z0-9]{16}))\b"),
        accept=_token_ok("tail"),
    ),
    _Rule(
        "aws-secret-access-key",
        re.compile(
            r"(?i:aws[\w.-]{0,20}?secret[\w.-]{0,20})[\"']?\s*(?:=>|:=|=|:)\s*[\"'`]?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        accept=_token_ok("secret"),
    ),
    _Rule(
        "github-token",
        re.compile(
            r"\b(?P<secret>(?:gh[pousr]_(?P<tail>[A-Za-z0-9]{36})"
            r"|github_pat_(?P<tail2>[A-Za-z0-9_]{82})))\b"
        ),
        accept=lambda m: _token_ok("tail" if m.group("tail") else "tail2")(m),
    ),
    _Rule(
        "slack-token",
        re.compile(r"\b(?P<secret>xox[baprs]-[0-9A-Za-z][0-9A-Za-z-]{8,}[0-9A-Za-z])\b"),
        accept=_slack_ok,
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
        re.compile(r"\b(?P<secret>(?:sk|rk)_(?:test|live|prod)_(?P<tail>[A-Za-z0-9]{10,99}))\b"),
        accept=_token_ok("tail"),
    ),
    _Rule(
        "google-api-key",
        re.compile(r"\b(?P<secret>AIza(?P<tail>[0-9A-Za-z_-]{35}))(?![0-9A-Za-z_-])"),
        accept=_token_ok("tail"),
    ),
    _Rule(
        "jwt",
        re.compile(
            r"\b(?P<secret>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}"
            r"\.(?:[A-Za-z0-9_-]{10,}={0,2})?)(?![A-Za-z0-9_-])"
        ),
    ),
    _Rule(
        "url-credentials",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]+:(?P<secret>[^/\s:@'\"]+)@"),
        accept=_url_ok,
    ),
    _Rule(
        "generic-secret",
        re.compile(
            # The whole name is matched and checked in _generic_ok: matching the
            # secret word inside the pattern backtracks badly on long identifiers.
            r"(?<![\w.-])(?P<key>[\w.-]{1,80})(?![\w.-])[\"']?"
            r"(?:\s*:\s*[A-Za-z_][\w.\[\]| ]*?)?"  # an optional type annotation
            r"\s*(?:=>|:=|=(?!=)|:)[ \t]*"
            r"(?:(?P<quote>[\"'`])(?P<secret>[^\"'`\r\n]*)(?P=quote)"
            r"|(?P<bare>[^\s\"'`,;]+))",
        ),
        groups=("secret", "bare"),
        accept=_generic_ok,
    ),
)


def _candidates(text: str, rule: _Rule) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for m in rule.pattern.finditer(text):
        if rule.accept is not None and not rule.accept(m):
            continue
        group = next(g for g in rule.groups if m.group(g) is not None)
        start, end = m.span(group)
        if rule.strip_whitespace:
            value = text[start:end]
            start += len(value) - len(value.lstrip())
            end -= len(value) - len(value.rstrip())
        if end > start:
            spans.append((start, end))
    return spans


def _find(text: str) -> list[tuple[int, int, str]]:
    taken: list[tuple[int, int, str]] = []
    for rule in RULES:
        for start, end in _candidates(text, rule):
            if any(start < t_end and t_start < end for t_start, t_end, _ in taken):
                continue
            taken.append((start, end, rule.name))
    taken.sort()
    return taken


def redact(text: str) -> RedactionResult:
    """Replace every secret in ``text`` with ``[REDACTED:<rule>]``.

    The text around a secret is kept (key names, quotes, URL prefixes), and line
    breaks inside a multi-line secret are kept after its marker so that line numbers
    do not move. Running ``redact`` on its own output finds nothing more.

    This only transforms a string; it never writes to a file. Show the redacted text to
    the model, but do not let an edit computed from it through: its base hash is that
    of the redacted copy, which does not match the file, so the writer's hash check
    refuses it.

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
        out.append(f"[REDACTED:{rule}]{breaks}")
        findings.append(Finding(rule, text.count("\n", 0, start) + 1, start, end))
        cursor = end
    out.append(text[cursor:])
    return RedactionResult("".join(out), tuple(findings))


def has_secrets(text: str) -> bool:
    """Whether ``redact`` would remove anything from ``text``.

    Example:
        >>> has_secrets("nothing to see"), has_secrets("key=AIza" + "Xy9_k2Lm" * 4 + "Q1w")
        (False, True)
    """
    return bool(_find(text))
