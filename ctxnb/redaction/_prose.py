"""What a value under a secret name *is* when it is no secret: prose, a code name, a template.

The structural readers redact the value of any key whose name says secret, whatever the
value looks like (a human password has low entropy). In documentation and source code
the same ``name: value`` and ``name = value`` shapes hold other things, and those are
told apart here by what the value is, never by listing the strings:

- a run of words (``bearer token: give each client its own``, ``token_counter: the
  counter to check``, ``"the token"``): two or more words of letters only, no digit. A
  password a person chose carries a digit or a symbol in every family ctxnb measures; a
  passphrase of bare words is the price of reading prose as prose;
- one dictionary word (``"unused"``, ``--no-token serve``, ``api_key=start``): letters only
  and a single cl100k token, which a BPE vocabulary holds only for common words;
- a name in code: a dotted module path (``ctxnb.llm.tokens``), a ``snake_case`` or
  ``camelCase`` identifier without digits (``tokens_rel``, ``awsAuthRefresh``), a
  qualified name (``t.py::test_a``), a JSON pointer (``#/$defs/AuthCapabilities``);
- a template or structure: a value holding an interpolation (``f"Bearer {TOKEN}"``,
  ``"{:.3f}"``), a bracketed marker (``[set]``), a JSON array or object literal.

Example:
    >>> [not_literal(v) for v in ("give each client its own", "ctxnb.llm.tokens")]
    [True, True]
    >>> [not_literal(v) for v in ("Maple orbit12", "kQ7vXz2mP9wLr4Tn", "Cobalt!meadow123")]
    [False, False, False]
"""

from __future__ import annotations

from .._util.lazyre import lazy_compile
from ._efficiency import count_tokens, looks_random

__all__ = ["not_literal", "word_run"]

# A word of prose or code: letters (an identifier's "_" and a compound's inner "-" or
# "'" too), with the punctuation that may close it in a sentence.
_WORD = lazy_compile(r"[(`\"'“]?[A-Za-z][A-Za-z_'’-]*[`\"'”)]?[.,;:!?)…]*|[|&/—–…-]|\.\.\.")
_IDENT = lazy_compile(
    # a.b.c, snake_case, camelCase, UPPER_SNAKE, two lower-case words joined by "-", no
    # digit ('api-key', 'API_KEY' and 'proxy-handled' name a key or a mode; a longer
    # hyphenated phrase, 'not-for-the-agent', is written as a passphrase is)
    r"(?:[A-Za-z_][A-Za-z_]*\.)+[A-Za-z_][A-Za-z_]*"
    r"|[a-z]+(?:_[A-Za-z]+)+_?|_[A-Za-z_]+|[a-z]+(?:[A-Z][a-z]*)+"
    r"|[a-z]+-[a-z]+|[A-Z]+(?:_[A-Z]+)+"
)
# A relative path among the words (node scripts/check.js: a command, not a passphrase).
_PATH = lazy_compile(r"\.{0,2}[A-Za-z_][\w.-]*(?:/[\w.-]+)+")
# path::name (pytest node ids, Rust and C++ paths), a JSON pointer.
_QUALIFIED = lazy_compile(r"[\w./-]+::[\w\[\]().,:-]+|#/[\w$/.-]*")
# {name}, {name.attr}, {0}, {!r}, {:.3f}: str.format, f-strings, C#'s $"…", Scala's s"…".
_INTERPOLATION = lazy_compile(r"\{[A-Za-z_0-9]?[\w.]*(?:\[[^\]{}]*\])?(?:![rsa])?(?::[^{}]*)?\}")
_MARKER = lazy_compile(r"\[[A-Za-z][\w -]*\]")


def word_run(value: str) -> bool:
    """Whether ``value`` is two or more words of letters with no digit: prose, or code
    read as prose (``None if model else counter``).

    Example:
        >>> word_run("give each client its own"), word_run("Maple orbit12")
        (True, False)
        >>> word_run("conv.repeats or None"), word_run("conv.repeats")
        (True, False)
    """
    words = value.split()
    if len(words) < 2 or any(c.isdigit() for c in value):
        return False
    letters = 0
    for w in words:
        # A dotted name in an expression (``conv.repeats or None``) is a word of code.
        if (
            _WORD.fullmatch(w) is None
            and _IDENT.fullmatch(w.rstrip(".,;:!?)")) is None
            and _PATH.fullmatch(w) is None
        ):
            return False
        letters += any(c.isalpha() for c in w)
    return letters >= 2


def _dictionary_word(value: str) -> bool:
    # One cl100k token of ASCII letters: the vocabulary holds such a string only when it
    # is a common word. No tokenizer: not known to be a word (fail closed).
    if not (value.isascii() and value.isalpha()) or len(value) > 12:
        return False
    n = count_tokens(value)
    return n == 1


def not_literal(value: str) -> bool:
    """Whether a value under a secret name is prose, a name in code or a template rather
    than a literal secret (see the module docstring)."""
    v = value.strip()
    if not v:
        return True
    if word_run(v):
        return True
    if "{" in v and _INTERPOLATION.search(v) is not None:
        return True
    if any(c.isspace() for c in v):
        return False
    if _IDENT.fullmatch(v) is not None and not any(c.isdigit() for c in v):
        # The shape of a name, and text a tokenizer knows (a random run of letters glued
        # by "_", api_org_IKXgcWHltt…, has the shape but not the words).
        return not looks_random(v)
    if _QUALIFIED.fullmatch(v) is not None or _MARKER.fullmatch(v) is not None:
        return True
    if v[0] + v[-1] in ("[]", "{}") and len(v) > 2 and v[1] in "\"'{[":
        return True  # a JSON array or object literal: its own keys are read as JSON
    return _dictionary_word(v)
