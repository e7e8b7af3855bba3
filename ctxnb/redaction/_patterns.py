"""The secret patterns that :mod:`ctxnb.redaction.redactor` applies (the table is in its docstring).

Each rule is a regex whose named groups mark the secret, an optional ``accept`` check
(entropy, placeholders, names that say the value is not the secret) and how the engine
may skip it cheaply: keywords that must occur in the text, or a literal prefix the regex
engine skips to.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .._util.lazyre import lazy_compile
from .._util.record import FrozenRecord

# The checks moved to their own module; the public ones are still importable from here.
from ._checks import (
    AWS_EXAMPLES,
    _auth_ok,
    _char_classes,
    _generic_ok,
    _key_body_ok,
    _letters_token_ok,
    _mixed_token_ok,
    _pair_ok,
    _private_key_ok,
    _slack_ok,
    _token_ok,
    _url_ok,
    lines_holding,
    secret_name,
    shannon_entropy,
)

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


def _b(prefix: str) -> str:
    """A token pattern; that it starts at a word boundary is checked in code (the rule's
    ``word_start``): a leading lookbehind would stop the regex engine from skipping ahead
    to the token's literal prefix, and cost ten times the scan."""
    return prefix


_T = r"(?![A-Za-z0-9_-])"  # a token's end: no token character follows
# Words a secret-like name holds; the assignment rules look only where one occurs.
NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential")
# It starts only where an identifier starts: tried from inside a long run of word
# characters (minified code, base64), the leading [\w.-]* would rescan the rest of the
# run from each of its characters, quadratic in the run's length. The matches are the
# same, since a match always runs from the start of its identifier.
NAME_IDENT = lazy_compile(r"(?<![\w.-])[\w.-]*(?:" + "|".join(NAME_WORDS) + r")[\w.-]*")
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
        # An organization's API token: letters only, which the generic checks may read
        # as words; the prefix says where to look, the tokenizer whether it is random.
        "huggingface-token",
        lazy_compile(_b(r"(?P<secret>api_org_(?P<tail>[A-Za-z]{34}))") + r"(?![A-Za-z0-9_])"),
        accept=_letters_token_ok,
        word_start=True,
    ),
    Rule(
        # Organization tokens (base64 of a JSON claim, then "_" and a 43-character key;
        # the claim's "/" and "+" make a URL-like value the generic checks pass over)
        # and user tokens.
        "sentry-token",
        lazy_compile(
            _b(r"(?P<secret>sntry(?:s_(?P<tail>eyJ[A-Za-z0-9+/]{20,}={0,2}_[A-Za-z0-9+/]{43})")
            + r"|u_(?P<hex>[a-f0-9]{64})))(?![A-Za-z0-9+/_-])"
        ),
        accept=lambda m: _token_ok("tail" if m.group("tail") else "hex")(m),
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
    *("api_org_", "sntryu_"),
    # The structural layer's (command lines, JDBC URLs without "://").
    *(" -p", " -u", " -a ", "jdbc:"),
    # Client argument grammars, SQL, cookies, escaped URLs (#43).
    *(" -w", "-pw", "/p:", "pass:", "sqlplus", "expdp", "impdp", "add_user", "identified"),
    *("cookie", "securestring", "%3a%2f%2f", "%40", ":\\/\\/", "\\u00"),
)
#: The shortest text the key-body rule can match (three 64-character lines).
KEY_BODY_MIN = 3 * 65
