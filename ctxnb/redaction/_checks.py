"""The checks behind the secret patterns: token efficiency, placeholders, secret-looking names.

A rule of :mod:`ctxnb.redaction._patterns` matches a shape; its ``accept`` check, here,
decides whether what matched is a secret or a sample, a placeholder, a variable's name
or a piece of code. :mod:`ctxnb.redaction._formats` uses the name checks too.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

from .._util.lazyre import lazy_compile
from ._efficiency import looks_random

__all__ = [
    "AWS_EXAMPLES",
    "GENERIC_MIN_LENGTH",
    "PASSWORD_MIN_LENGTH",
    "TOKEN_MIN_ENTROPY",
    "lines_holding",
    "secret_name",
    "shannon_entropy",
]

#: Minimum length of a generic-secret value (a password may be shorter, see below).
GENERIC_MIN_LENGTH = 12
#: Minimum length of a value assigned to a password-like name.
PASSWORD_MIN_LENGTH = 8
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
    r"passw(?:or)?d|passphrase|pwd|(?:^|[_.-])pass$|secret|token(?!i[sz])|api[_.-]?key|apikey"
    r"|access[_.-]?key|auth[_.-]?key|private[_.-]?key|credentials?|^_?auth$"
    r"|(?:account|storage|signing|encryption|master|license|app)[_.-]?key$"
    # keytool's -storepass, ssmtp's AuthPass; kubeconfig's client-key-data
    r"|(?:store|key|auth|smtp|imap|pop|root|admin|db|ftp|mail|proxy|src|dest)pass$"
    r"|client[_.-]?key(?:[_.-]?data)?$",
)
_PASSWORD_NAME = lazy_compile(r"passw(?:or)?d|passphrase|pwd|(?:^|[_.-])pass$")
# A name ending so says the value is about the secret, not the secret itself.
_NOT_SECRET_NAME = lazy_compile(
    r"(?:path|url|uri|endpoint|host|field|label|name|names|length|len|file|filename|dir"
    r"|env|var|ttl|expiry|expires|expiration|type|prompt|regex|re|pattern|policy|min|max"
    r"|count|format|id|header|param|size|timeout|limit|prefix|suffix|style|class|mode"
    r"|enabled|required|valid|hint|help|text|message|msg|error|tokens|stdin|description|desc|title"
    r"|comment|placeholder|ref|version|algorithm|algo|strength|reset|manager|store|provider"
    r"|rotation|source|backend|kind|generator|hash|hashed|digest|question|counter)$"
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
    # Rare text, by the characters a BPE tokenizer packs into a token (not Shannon
    # entropy, which calls camelCase prose random and repeated random pairs not): last,
    # so that the tokenizer loads only for a value every cheaper check let through.
    return looks_random(value)


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


def _letters_token_ok(m: re.Match[str]) -> bool:
    """A token of letters only (Hugging Face's ``api_org_``): random by how a tokenizer
    packs it, so a camelCase name after the prefix (``ListMembersResponseForOrg…``),
    which entropy would call random, stays."""
    tail = m.group("tail")
    return _char_classes(tail) >= 2 and looks_random(tail)


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
