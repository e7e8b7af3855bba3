"""Tests for ctxnb.retrieval.textsearch: tokenizer, stemmer, BM25 and reciprocal rank fusion."""

from __future__ import annotations

import math
import random
import time

import pytest

from ctxnb.retrieval.textsearch import (
    DEFAULT_STOPWORDS,
    BM25Index,
    light_stem,
    reciprocal_rank_fusion,
    tokenize,
)


def test_tokenize_splits_identifiers() -> None:
    terms = tokenize("getHTTPResponse read_file mcp-server", stem=False)
    assert terms == [
        "gethttpresponse", "get", "http", "response",
        "read_file", "read", "file",
        "mcp-server", "mcp", "server",
    ]  # fmt: skip
    assert tokenize("XMLHttpRequest", stem=False, compounds=False) == ["xml", "http", "request"]


def test_tokenize_stopwords_and_unicode() -> None:
    assert tokenize("the file of a user") == ["fil", "user"]
    assert tokenize("the file", stopwords=set(), stem=False) == ["the", "file"]
    assert "the" in DEFAULT_STOPWORDS
    assert tokenize("Grüße café", stem=False) == ["grüße", "café"]
    assert tokenize("") == []


@pytest.mark.parametrize(
    ("words", "same"),
    [
        (["file", "files"], True),
        (["create", "created", "creating", "creates"], True),
        (["query", "queries"], True),
        (["branch", "branches"], True),
        (["run", "running"], True),
        (["call", "calling", "called"], True),
        (["status", "stat"], False),
        (["commit", "comment"], False),
    ],
)
def test_light_stem_conflates_inflections_only(words: list[str], same: bool) -> None:
    assert (len({light_stem(w) for w in words}) == 1) is same


def test_light_stem_leaves_short_and_nonalpha_words() -> None:
    assert light_stem("is") == "is"
    assert light_stem("bus") == "bus"
    assert light_stem("v1.2s") == "v1.2s"


DOCS = {
    "read": "Read the complete contents of a file from the file system.",
    "write": "Create a new file or completely overwrite an existing file with new content.",
    "commit": "Record changes to the repository with a commit message.",
    "slack": "Post a message to a Slack channel.",
    "sql": "Run a read-only SQL query against the database.",
}


def test_bm25_ranks_relevant_first() -> None:
    index = BM25Index(DOCS)
    assert index.search("read a file")[0][0] == "read"
    assert index.search("commit my changes")[0][0] == "commit"
    top = index.search("send slack message", k=1)
    assert top == [("slack", index.scores("send slack message")["slack"])]
    assert index.search("sql queries")[0][0] == "sql"
    assert index.search("nothing matches zebra") == []
    assert index.search("file", k=0) == []


def test_bm25_scores_match_formula() -> None:
    index = BM25Index(
        {"a": "apple apple banana", "b": "banana cherry", "c": "cherry"}, k1=1.5, b=0.75
    )
    n, avg = 3, (3 + 2 + 1) / 3
    idf = math.log(1 + (n - 1 + 0.5) / (1 + 0.5))
    expected = idf * 2 * 2.5 / (2 + 1.5 * (1 - 0.75 + 0.75 * 3 / avg))
    assert index.scores("apple")["a"] == pytest.approx(expected)
    # b=0 turns length normalisation off: same tf, same score whatever the length
    flat = BM25Index({"short": "apple", "long": "apple pear plum fig kiwi"}, b=0.0)
    s = flat.scores("apple")
    assert s["short"] == pytest.approx(s["long"])
    with pytest.raises(ValueError):
        BM25Index(b=2)


def test_bm25_ties_by_id_and_deterministic() -> None:
    index = BM25Index([("z", "same text"), ("a", "same text"), ("m", "same text")])
    assert [d for d, _ in index.search("text")] == ["a", "m", "z"]
    again = BM25Index([("m", "same text"), ("a", "same text"), ("z", "same text")])
    assert index.search("same text") == again.search("same text")


def test_bm25_add_replace_remove() -> None:
    index = BM25Index()
    assert len(index) == 0 and index.search("x") == []
    index.add("a", "alpha beta")
    index.add("b", "beta gamma")
    assert "a" in index and len(index) == 2
    index.add("a", "delta")  # replaces
    assert len(index) == 2
    assert [d for d, _ in index.search("alpha")] == []
    assert [d for d, _ in index.search("delta")] == ["a"]
    index.remove("b")
    assert index.search("gamma") == [] and "b" not in index
    with pytest.raises(KeyError):
        index.remove("b")


def test_bm25_custom_tokenizer() -> None:
    index = BM25Index({"x": "A-B", "y": "a b"}, tokenizer=lambda t: t.split())
    assert [d for d, _ in index.search("A-B")] == ["x"]


def test_bm25_fast_enough_for_5000_docs() -> None:
    rng = random.Random(7)
    vocab = [f"term{i}" for i in range(3000)]
    index = BM25Index((f"doc{i}", " ".join(rng.choices(vocab, k=30))) for i in range(5000))
    queries = [" ".join(rng.choices(vocab, k=5)) for _ in range(50)]
    start = time.perf_counter()
    for q in queries:
        assert index.search(q, k=10)
    per_query = (time.perf_counter() - start) / len(queries)
    # generous bound (typically ~1 ms): catches an accidental full scan per term
    assert per_query < 0.05


def test_rrf() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c"]])
    assert [d for d, _ in fused] == ["b", "c", "a"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    # ties broken by id; duplicates count once at their best rank
    tied = reciprocal_rank_fusion([["y", "x"], ["x", "y", "x"]])
    assert [d for d, _ in tied] == ["x", "y"]
    assert tied[0][1] == tied[1][1] == pytest.approx(1 / 61 + 1 / 62)
    weighted = reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0, 2.0])
    assert weighted[0][0] == "b"
    assert reciprocal_rank_fusion([]) == []
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=-1)
