"""The secret patterns that :mod:`ctxnb.redaction` applies (the table is in its docstring).

Each rule is a regex whose named groups mark the secret, an optional ``accept`` check
(entropy, placeholders, names that say the value is not the secret) and how the engine
may skip it cheaply: keywords that must occur in the text, or a literal prefix the regex
engine skips to.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

from ._lazyre import lazy_compile
from ._record import FrozenRecord

__all__ = [
    "AWS_EXAMPLES",
    "NAME_IDENT",
    "NAME_WORDS",
    "KEY_BODY_MIN",
    "RULES",
    "TRIGGER_WORDS",
    "Rule",
    "lines_holding",
    "secret_name",
    "shannon_entropy",
]

#: Minimum length of a generic-secret value (a password may be shorter, see below).
GENERIC_MIN_LENGTH = 12
#: Minimum length of a value assigned to a password-like name.
PASSWORD_MIN_LENGTH = 8
#: Minimum Shannon entropy (bits per character) of a generic-secret value of 16+ chars.
GENERIC_MIN_ENTROPY = 3.0
#: Minimum entropy of the random part of a vendor token; rules out ``ghp_xxxx…`` samples.
TOKEN_MIN_ENTROPY = 2.5


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


class Rule(FrozenRecord):
    __slots__ = (
        "name",
        "pattern",
        "keywords",
        "groups",
        "accept",
        "strip_whitespace",
        "line_scoped",
        "anchored",
        "line_must",
        "after_newline",
        "word_start",
    )
    name: str
    pattern: re.Pattern[str]
    # The rule runs only when one of these (lowercase) occurs in the lowered text: most
    # texts hold none, and ``in`` is far faster than a regex scan.
    keywords: tuple[str, ...]
    # The named groups that may hold the secret (the first that matched is used); the
    # rest of the match is kept as context.
    groups: tuple[str, ...]
    accept: Callable[[re.Match[str]], bool] | None
    strip_whitespace: bool
    # Match only within the lines that hold a keyword (the assignment rules, whose
    # keywords are common words in code).
    line_scoped: bool
    # Match only at the start of each identifier that holds a keyword (``pattern.match``
    # there), instead of searching every line that holds one.
    anchored: bool
    # For a line-scoped rule: only lines holding this (lowercase) text can match.
    line_must: str
    # Scan "\n" + text (so a pattern anchored on a line break also matches at the start).
    after_newline: bool
    # The match must not follow a letter, digit or "_" (see _b).
    word_start: bool

    def __init__(
        self,
        name: str,
        pattern: re.Pattern[str],
        keywords: tuple[str, ...] = (),
        groups: tuple[str, ...] = ("secret",),
        accept: Callable[[re.Match[str]], bool] | None = None,
        strip_whitespace: bool = False,
        line_scoped: bool = False,
        anchored: bool = False,
        line_must: str = "",
        after_newline: bool = False,
        word_start: bool = False,
    ) -> None:
        self._fill(
            name,
            pattern,
            keywords,
            groups,
            accept,
            strip_whitespace,
            line_scoped,
            anchored,
            line_must,
            after_newline,
            word_start,
        )


#: AWS's published documentation keys: samples, never live credentials.
AWS_EXAMPLES = frozenset(
    {
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAI44QH8DHBEXAMPLE",
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    }
)

_PLACEHOLDER = lazy_compile(
    r"""(?ix)^(?:
        <[^>]*> | \$\{[^}]*\} | \$\([^)]*\) | \{\{[^}]*\}\} | \{[A-Za-z_][\w.]*\}
      | \$[A-Za-z_]\w* | %\([^)]*\)s | %s | \*+ | x{4,} | \.{3,} | \[REDACTED:[\w-]+\]
      | none | null | nil | true | false | undefined | password | secret | token | pass
      | <.* | vault:.*
      | .*(?:your[_-]?|example|placeholder|changeme|change[_-]me|dummy|sample|xxxx
            |redacted|insert[_-]|replace[_-]?me|todo|fixme|secret[_-]?here
            |token[_-]?here|key[_-]?here).*
    )$""",
)
_DOTTED_NAME = lazy_compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_CODE_CHARS = set("()[]{}")

_SECRET_NAME = lazy_compile(
    r"passw(?:or)?d|passphrase|pwd|(?:^|[_.-])pass$|secret|token|api[_.-]?key|apikey"
    r"|access[_.-]?key|auth[_.-]?key|private[_.-]?key|credentials?|^_?auth$"
    r"|(?:account|storage|signing|encryption|master|license|app)[_.-]?key$",
)
_PASSWORD_NAME = lazy_compile(r"passw(?:or)?d|passphrase|pwd|(?:^|[_.-])pass$")
# A name ending so says the value is about the secret, not the secret itself.
_NOT_SECRET_NAME = lazy_compile(
    r"(?:path|url|uri|endpoint|host|field|label|name|names|length|len|file|filename|dir"
    r"|env|var|ttl|expiry|expires|expiration|type|prompt|regex|re|pattern|policy|min|max"
    r"|count|format|id|header|param|size|timeout|limit|prefix|suffix|style|class|mode"
    r"|enabled|required|valid|hint|help|text|message|msg|error|tokens|stdin|description|desc|title"
    r"|comment|placeholder|ref|version|algorithm|algo|strength|reset|manager|store|provider"
    r"|rotation|source|backend|kind|generator|hash|hashed|digest|question)$"
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
    classes = _char_classes(value)
    if classes < 2:
        return False
    if (
        password
        and classes < 3
        and len(value) < 16
        and not (len(value) >= 10 and any(c.isdigit() for c in value))
    ):
        # A short password of letters and one symbol is a word ("anonymous@",
        # "geheim$parole" in docs), not a generated one; hunter2hunter2 still counts.
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


def lines_holding(text: str, lowered: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """The (start, end) spans of the lines of ``text`` whose ``lowered`` form holds one of
    ``words``, in order (each line once): rules then search those lines only, in place.

    Example:
        >>> lines_holding("a\\nPass=1\\nb", "a\\npass=1\\nb", ("pass",))
        [(2, 8)]
    """
    spans = set()
    for w in words:
        i = lowered.find(w)
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            spans.add((start, end))
            i = lowered.find(w, end)
    return sorted(spans)


def secret_name(key: str) -> bool:
    """Whether an assignment's name says its value is a secret (``DB_PASSWORD``,
    ``client_secret``, ``_authToken``), not something about one (``password_path``).

    Example:
        >>> secret_name("spring.datasource.password"), secret_name("TOKEN_URL")
        (True, False)
    """
    return _name_ok(key)[0]


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


_PUBLIC_ARMOUR = lazy_compile(r"-{4,5} ?BEGIN ([A-Z0-9 ]+?) ?-{4,5}")


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
NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential")
NAME_IDENT = lazy_compile(r"[\w.-]*(?:" + "|".join(NAME_WORDS) + r")[\w.-]*")
# A bare value ends at a backslash too: in JSON-escaped text (logs, transcripts) "\n"
# is two characters, and the next line must not join the value.
_ASSIGN_VALUE = r"(?:(?P<quote>[\"'`])(?P<secret>[^\"'`\r\n]*)(?P=quote)|(?P<bare>[^\s\"'`,;\\]+))"
_STRIPE = r"(?P<secret>{}(?P<tail>[A-Za-z0-9]{{10,99}}))(?![A-Za-z0-9])"
_ARMOUR = r"-{{4,5}} ?{0}[ A-Z0-9_-]{{0,100}}PRIVATE KEY(?: BLOCK)? ?-{{4,5}}"

# Order matters: earlier rules win where matches overlap, so the specific vendor
# formats come before the generic assignment rules.
RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        lazy_compile(
            _ARMOUR.format("BEGIN") + r"(?P<secret>[\s\S]*?)(?:" + _ARMOUR.format("END") + r"|\Z)"
        ),
        keywords=("PRIVATE KEY",),
        accept=_private_key_ok,
        strip_whitespace=True,
    ),
    Rule(
        "private-key-body",
        # Anchored on the line break before the body: a literal first character lets
        # the regex engine skip ahead instead of trying every position.
        lazy_compile(
            r"\n(?P<secret>(?:(?:[A-Za-z0-9+/]{64}|[A-Za-z0-9+/]{70})\r?\n){3,}"
            r"(?:[A-Za-z0-9+/]{1,70}={0,2}(?=\r?\n|\Z))?)"
        ),
        accept=_key_body_ok,
        strip_whitespace=True,
        after_newline=True,
    ),
    Rule(
        "aws-access-key-id",
        lazy_compile(
            _b(r"(?P<secret>(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)(?P<tail>[A-Z0-9]{16}))")
            + r"(?![A-Za-z0-9])"
        ),
        accept=lambda m: m.group("secret") not in AWS_EXAMPLES and _token_ok("tail")(m),
        word_start=True,
    ),
    Rule(
        "aws-secret-access-key",
        lazy_compile(
            r"(?i:aws[\w.-]{0,20}?secret[\w.-]{0,20})[\"']?\s*(?:=>|:=|=|:)\s*[\"'`]?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        keywords=("aws",),
        accept=lambda m: m.group("secret") not in AWS_EXAMPLES and _token_ok("secret")(m),
    ),
    Rule(
        "github-token",
        lazy_compile(
            _b(
                r"(?P<secret>(?:gh[pousr]_(?P<tail>[A-Za-z0-9]{36})"
                r"|github_pat_(?P<tail2>[A-Za-z0-9_]{82})))"
            )
            + r"(?![A-Za-z0-9_])"
        ),
        accept=lambda m: _token_ok("tail" if m.group("tail") else "tail2")(m),
        word_start=True,
    ),
    Rule(
        "gitlab-token",
        lazy_compile(_b(r"(?P<secret>glpat-(?P<tail>[A-Za-z0-9_-]{20,}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "anthropic-key",
        lazy_compile(
            _b(r"(?P<secret>sk-ant-(?:api|admin|oat|sid)\d\d-(?P<tail>[A-Za-z0-9_-]{20,}))") + _T
        ),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "openai-key",
        lazy_compile(
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
    Rule(
        "slack-token",
        lazy_compile(
            _b(
                r"(?P<secret>(?:xox[baprse]-[0-9A-Za-z][0-9A-Za-z-]{8,}[0-9A-Za-z]"
                r"|xapp-\d-[0-9A-Za-z][0-9A-Za-z-]{8,}[0-9A-Za-z]))"
            )
            + r"(?![0-9A-Za-z])"
        ),
        accept=_slack_ok,
        word_start=True,
    ),
    Rule(
        "slack-webhook",
        lazy_compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/+-]{20,})"
        ),
        accept=_token_ok("secret"),
    ),
    Rule(
        "stripe-key",
        # One rule per literal prefix: a pattern starting "[sr]k_|whsec_" is scanned
        # character by character; a literal prefix is skipped to directly.
        lazy_compile(_STRIPE.format("sk_(?:test|live|prod)_")),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "stripe-key",
        lazy_compile(_STRIPE.format("rk_(?:test|live|prod)_")),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "stripe-key",
        lazy_compile(_STRIPE.format("whsec_")),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "sendgrid-key",
        lazy_compile(_b(r"(?P<secret>SG\.(?P<tail>[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "huggingface-token",
        lazy_compile(_b(r"(?P<secret>hf_(?P<tail>[A-Za-z0-9]{30,40}))") + r"(?![A-Za-z0-9_])"),
        accept=_mixed_token_ok,
        word_start=True,
    ),
    Rule(
        "npm-token",
        lazy_compile(_b(r"(?P<secret>npm_(?P<tail>[A-Za-z0-9]{36}))") + r"(?![A-Za-z0-9_])"),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "pypi-token",
        lazy_compile(_b(r"(?P<secret>pypi-AgEIcHlwaS5vcmc(?P<tail>[A-Za-z0-9_-]{40,}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "digitalocean-token",
        lazy_compile(_b(r"(?P<secret>do[opr]_v1_(?P<tail>[a-f0-9]{64}))") + r"(?![A-Za-z0-9])"),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "shopify-token",
        lazy_compile(_b(r"(?P<secret>shp(?:at|ss|ca|pa)_(?P<tail>[a-fA-F0-9]{32}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "telegram-bot-token",
        lazy_compile(r"(?<![0-9])(?P<secret>[0-9]{8,10}:AA(?P<tail>[A-Za-z0-9_-]{33}))" + _T),
        keywords=(":AA",),
        accept=_token_ok("tail"),
    ),
    Rule(
        "google-api-key",
        lazy_compile(_b(r"(?P<secret>AIza(?P<tail>[0-9A-Za-z_-]{35}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "google-oauth-secret",
        lazy_compile(_b(r"(?P<secret>GOCSPX-(?P<tail>[A-Za-z0-9_-]{28}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "vault-token",
        lazy_compile(_b(r"(?P<secret>hv[sbr]\.(?P<tail>[A-Za-z0-9_-]{24,}))") + _T),
        accept=_mixed_token_ok,
        word_start=True,
    ),
    Rule(
        "linear-api-key",
        lazy_compile(_b(r"(?P<secret>lin_api_(?P<tail>[A-Za-z0-9]{40}))") + r"(?![A-Za-z0-9])"),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "grafana-token",
        lazy_compile(_b(r"(?P<secret>gl(?:sa|c)_(?P<tail>[A-Za-z0-9_=+/-]{32,}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "postman-key",
        lazy_compile(_b(r"(?P<secret>PMAK-(?P<tail>[a-f0-9]{24}-[a-f0-9]{34}))") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "databricks-token",
        lazy_compile(_b(r"(?P<secret>dapi(?P<tail>[a-f0-9]{32})(?:-\d)?)") + _T),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "age-secret-key",
        lazy_compile(r"(?P<secret>AGE-SECRET-KEY-1(?P<tail>[0-9A-Z]{58}))"),
        accept=_token_ok("tail"),
    ),
    Rule(
        "mailgun-key",
        lazy_compile(_b(r"(?P<secret>key-(?P<tail>[0-9a-f]{32}))") + r"(?![A-Za-z0-9])"),
        accept=_token_ok("tail"),
        word_start=True,
    ),
    Rule(
        "azure-key",
        lazy_compile(
            r"(?:AccountKey|SharedAccessKey|SharedAccessSignature)="
            r"(?P<secret>[A-Za-z0-9+/%&=:.-]{20,}?)(?=;|\"|'|\s|$)"
        ),
        keywords=("AccountKey=", "SharedAccess"),
        accept=_token_ok("secret"),
    ),
    Rule(
        "jwt",
        lazy_compile(
            _b(
                r"(?P<secret>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}"
                r"\.(?:[A-Za-z0-9_-]{10,}={0,2})?)"
            )
            + r"(?![A-Za-z0-9_-])"
        ),
        word_start=True,
    ),
    Rule(
        "http-authorization",
        lazy_compile(
            r"(?i:(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?"
            r"(?i:basic|bearer|token|digest|apikey)\s+(?P<secret>[A-Za-z0-9._~+/=-]+)"
        ),
        keywords=("authorization",),
        accept=_auth_ok,
    ),
    Rule(
        "url-credentials",
        lazy_compile(r"://[^/\s:@'\"]*:(?P<secret>[^/\s:@'\"]+)@"),
        accept=_url_ok,
    ),
    Rule(
        "generic-secret",
        lazy_compile(
            # The whole name is matched and checked in _generic_ok: matching the
            # secret word inside the pattern backtracks badly on long identifiers.
            r"(?P<key>[\w.-]{1,80})(?![\w.-])[\"']?"
            r"(?:\s*:\s*[A-Za-z_][\w.\[\]| ]*?(?=\s*=))?"  # an optional type annotation
            r"\s*(?:=>|:=|=(?!=)|:)[ \t]*" + _ASSIGN_VALUE,
        ),
        keywords=NAME_WORDS,
        groups=("secret", "bare"),
        accept=_generic_ok,
        anchored=True,
    ),
    Rule(
        # <password>…</password>
        "generic-secret",
        lazy_compile(r"<(?P<key>[\w:.-]{1,80})>(?P<secret>[^<\s]+)</[\w:.-]{1,80}>"),
        keywords=NAME_WORDS,
        accept=_pair_ok,
        line_scoped=True,
        line_must="</",
    ),
    Rule(
        # <add key="DbPassword" value="…"/>
        "generic-secret",
        lazy_compile(
            r"(?i:key|name)\s*=\s*[\"'](?P<key>[^\"']{1,80})[\"']\s+(?i:value)\s*=\s*"
            r"[\"'](?P<secret>[^\"'\s]+)[\"']"
        ),
        keywords=NAME_WORDS,
        accept=_pair_ok,
        line_scoped=True,
        line_must="value",
    ),
    Rule(
        # .netrc's "password …", "--password …"
        "generic-secret",
        lazy_compile(
            r"(?:^|\s)(?P<key>-{0,2}passw(?:or)?d)[ \t]+(?P<secret>[^\s\"'`(),;]+)[ \t]*$",
            re.MULTILINE,  # ^ at the start of each line searched
        ),
        keywords=("pass",),
        accept=_pair_ok,
        line_scoped=True,
        line_must="pass",
    ),
)

# Short text in which none of these occurs (lowered) can match no rule but the key-body
# rule (which needs three 64-character lines): a few substring tests decide a search hit
# or an argument at once, where the rules one by one would cost a regex call each.
TRIGGER_WORDS = (
    *NAME_WORDS,
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "sk_", "rk_"),
    *("whsec_", "xox", "xapp-", "hooks.slack.com", "sg.", "hf_", "npm_", "pypi-", "_v1_"),
    *("shp", ":aa", "aiza", "akia", "asia", "abia", "acca", "a3t", "aws", "accountkey="),
    *("sharedaccess", "eyj", "authorization", "://", "private key", "gocspx-", "hvs."),
    *("hvb.", "hvr.", "lin_api_", "glsa_", "glc_", "pmak-", "dapi", "age-secret-key-1"),
    # The structural layer's (command lines, JDBC URLs without "://").
    *(" -p", " -u", " -a ", "jdbc:"),
)
#: The shortest text the key-body rule can match (three 64-character lines).
KEY_BODY_MIN = 3 * 65
