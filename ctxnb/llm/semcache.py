"""A semantic cache: reuse a model's answer for a query close in meaning to an earlier one.

A query is embedded with the shared embedder (:mod:`ctxnb.retrieval.embedding`); when an entry of
the same namespace and model lies within ``threshold`` cosine similarity and has not
expired, its response is returned instead of calling the model again. Entries persist
through the object store as ``cache_entry`` documents (one version per put, a version
with ``response: null`` when an entry is evicted or expires), so a cache survives a
restart and its history is a table like every other. Without the ``embeddings`` extra the
cache compares queries with :class:`~ctxnb.retrieval.embedding.LexicalEmbedder` (word overlap):
it still hits on rephrasings that share their words, not on synonyms.

Example:
    >>> from ctxnb.retrieval.embedding import LexicalEmbedder
    >>> cache = SemanticCache(embedder=LexicalEmbedder(), threshold=0.8)
    >>> cache.put("Summarize inventory/models.py", "Dataclasses for items and stock.")
    >>> cache.get("summarize the inventory/models.py file").response
    'Dataclasses for items and stock.'
    >>> cache.get("delete the build folder") is None
    True
    >>> cache.stats()["hits"], cache.stats()["misses"]
    (1, 1)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..hashing import sha256_hex, stable_stringify
from ..redaction.redactor import redact_data, redact_text
from ..retrieval.embedding import DEFAULT, Embedder, LexicalEmbedder, cosine, embedder_for

if TYPE_CHECKING:
    from ..store.objectstore import ObjectStore

__all__ = ["CACHE_ENTRY_TYPE", "CacheHit", "SemanticCache"]

CACHE_ENTRY_TYPE = "cache_entry"


@dataclass(frozen=True)
class CacheHit:
    """A reused response.

    Attributes:
        response: the cached response.
        query: the query asked now. matched_query: the earlier query it matched.
        similarity: their cosine similarity (≥ the cache's threshold).
        age: seconds since the entry was stored.
        entry_id: the store id of the entry.
    """

    response: Any
    query: str
    matched_query: str
    similarity: float
    age: float
    entry_id: str


@dataclass
class _Entry:
    id: str
    query: str
    model: str
    response: Any
    created_at: float
    expires_at: float | None
    vector: Sequence[float]
    last_used: float
    hits: int = 0


class SemanticCache:
    """Model responses keyed by the meaning of their query.

    Args:
        embedder: ``DEFAULT`` (the shared embedder, falling back to
            :class:`~ctxnb.retrieval.embedding.LexicalEmbedder` without the ``embeddings`` extra),
            or anything :func:`~ctxnb.retrieval.embedding.resolve_embedder` accepts except ``None``.
        threshold: the least cosine similarity that counts as the same query (0 to 1).
        ttl: seconds an entry lives, or ``None`` for no expiry.
        max_entries: the most live entries; the least recently used goes first.
        store: an :class:`~ctxnb.store.objectstore.ObjectStore` to persist entries in (and to load
            live ones from), or ``None`` for a cache in memory only.
        namespace: entries of other namespaces in the same store are not seen.
        clock: seconds since the epoch (a seam for tests).
        on_persist: called with each document written to the store (the seed's
            ``onPersist`` hook), or with each document when there is no store.

    Raises:
        ConfigError: a threshold outside [0, 1], a non-positive ttl or max_entries.
    """

    def __init__(
        self,
        *,
        embedder: Any = DEFAULT,
        threshold: float = 0.9,
        ttl: float | None = 24 * 3600.0,
        max_entries: int = 1000,
        store: ObjectStore | None = None,
        namespace: str = "default",
        clock: Callable[[], float] = time.time,
        on_persist: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"SemanticCache threshold must be within [0, 1], not {threshold}")
        if ttl is not None and ttl <= 0:
            raise ConfigError(f"SemanticCache ttl must be positive seconds or None, not {ttl}")
        if max_entries <= 0:
            raise ConfigError(f"SemanticCache max_entries must be positive, not {max_entries}")
        if embedder is None:
            raise ConfigError(
                "SemanticCache needs an embedder to compare queries; pass 'lexical' for a "
                "dependency-free one, or leave the default"
            )
        resolved: Embedder | None = embedder_for(embedder)
        self.embedder: Embedder = resolved if resolved is not None else LexicalEmbedder()
        self.threshold = threshold
        self.ttl = ttl
        self.max_entries = max_entries
        self.namespace = namespace
        self._store = store
        self._clock = clock
        self._on_persist = on_persist
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._counts = {"hits": 0, "misses": 0, "expired": 0, "evicted": 0}
        if store is not None:
            self._load(store)

    def __repr__(self) -> str:
        return (
            f"SemanticCache({len(self._entries)} entries, {self.embedder.name}, "
            f"threshold={self.threshold}, namespace={self.namespace!r})"
        )

    def __len__(self) -> int:
        return len(self._entries)

    # -- persistence ------------------------------------------------------------------------

    def _entry_id(self, query: str, model: str) -> str:
        key = stable_stringify({"namespace": self.namespace, "model": model, "query": query})
        return "semcache:" + sha256_hex(key.encode("utf-8"))

    def _load(self, store: ObjectStore) -> None:
        ids = store.ids(type=CACHE_ENTRY_TYPE)
        docs = store.get_many(ids).values()
        now = self._clock()
        live = [
            d
            for d in docs
            if d.get("namespace") == self.namespace
            and d.get("response") is not None
            and (d.get("expires_at") is None or d["expires_at"] > now)
        ]
        if not live:
            return
        vectors = self.embedder.embed([d["query"] for d in live])
        for d, vec in zip(live, vectors, strict=True):
            self._entries[d["xt/id"]] = _Entry(
                id=d["xt/id"],
                query=d["query"],
                model=d.get("model") or "",
                response=d["response"],
                created_at=float(d["created_at"]),
                expires_at=d.get("expires_at"),
                vector=vec,
                last_used=float(d["created_at"]),
            )

    def _persist(self, docs: list[dict[str, Any]]) -> None:
        if not docs:
            return
        if self._store is not None:
            self._store.put(docs)
        if self._on_persist is not None:
            for d in docs:
                self._on_persist(d)

    def _doc(self, e: _Entry, *, response: Any, reason: str | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "xt/id": e.id,
            "type": CACHE_ENTRY_TYPE,
            "namespace": self.namespace,
            "model": e.model,
            "query": e.query,
            "response": response,
            "created_at": e.created_at,
            "expires_at": e.expires_at,
        }
        if reason is not None:
            doc["ended"] = reason
        return doc

    # -- the cache --------------------------------------------------------------------------

    def _expire(self, now: float) -> list[dict[str, Any]]:
        gone = [
            e for e in self._entries.values() if e.expires_at is not None and e.expires_at <= now
        ]
        for e in gone:
            del self._entries[e.id]
        self._counts["expired"] += len(gone)
        return [self._doc(e, response=None, reason="expired") for e in gone]

    def get(self, query: str, *, model: str | None = None) -> CacheHit | None:
        """The cached response of the closest earlier query, or ``None`` (a miss).

        Only entries of the same ``model`` (``None`` matches entries stored without one)
        within the threshold and not expired count.
        """
        (qvec,) = self.embedder.embed([query])
        with self._lock:
            now = self._clock()
            ended = self._expire(now)
            best: tuple[float, _Entry] | None = None
            for e in self._entries.values():
                if e.model != (model or ""):
                    continue
                sim = cosine(qvec, e.vector)
                if sim >= self.threshold and (best is None or sim > best[0]):
                    best = (sim, e)
            if best is None:
                self._counts["misses"] += 1
                hit = None
            else:
                sim, e = best
                e.hits += 1
                e.last_used = now
                self._counts["hits"] += 1
                hit = CacheHit(e.response, query, e.query, sim, now - e.created_at, e.id)
        self._persist(ended)
        return hit

    def put(self, query: str, response: Any, *, model: str | None = None) -> None:
        """Store ``response`` for ``query`` (replacing an entry of the very same query).

        ``response`` must be JSON-shaped (it is stored as a document field). The query
        and the response are redacted (:mod:`ctxnb.redaction.redactor`) before they are embedded,
        kept or stored: a cached answer is an exit like any other.
        """
        if response is None:
            raise ConfigError("SemanticCache.put needs a response; None marks an ended entry")
        query, response = redact_text(query), redact_data(response)
        (vec,) = self.embedder.embed([query])
        with self._lock:
            now = self._clock()
            docs = self._expire(now)
            m = model or ""
            e = _Entry(
                id=self._entry_id(query, m),
                query=query,
                model=m,
                response=response,
                created_at=now,
                expires_at=None if self.ttl is None else now + self.ttl,
                vector=vec,
                last_used=now,
            )
            self._entries[e.id] = e
            while len(self._entries) > self.max_entries:
                oldest = min(self._entries.values(), key=lambda x: (x.last_used, x.id))
                del self._entries[oldest.id]
                self._counts["evicted"] += 1
                docs.append(self._doc(oldest, response=None, reason="evicted"))
            docs.append(self._doc(e, response=response))
        self._persist(docs)

    def get_or_call(
        self, query: str, call: Callable[[], Any], *, model: str | None = None
    ) -> tuple[Any, bool]:
        """The cached response, or ``call()``'s (then stored); and whether it was a hit.

        Example:
            >>> cache = SemanticCache(embedder="lexical")
            >>> cache.get_or_call("two plus two", lambda: 4)
            (4, False)
            >>> cache.get_or_call("Two plus two?", lambda: 5)
            (4, True)
        """
        hit = self.get(query, model=model)
        if hit is not None:
            return hit.response, True
        response = call()
        self.put(query, response, model=model)
        return response, False

    def stats(self) -> dict[str, int]:
        """Counts since this cache was created: hits, misses, expired, evicted, entries."""
        with self._lock:
            return {**self._counts, "entries": len(self._entries)}

    def to_frame(self) -> Any:
        """The live entries as a pandas DataFrame (one row each, most recent first)."""
        import pandas as pd

        with self._lock:
            rows = [
                {
                    "id": e.id,
                    "query": e.query,
                    "model": e.model or None,
                    "hits": e.hits,
                    "created_at": pd.Timestamp(e.created_at, unit="s", tz="UTC"),
                    "expires_at": None
                    if e.expires_at is None
                    else pd.Timestamp(e.expires_at, unit="s", tz="UTC"),
                }
                for e in sorted(self._entries.values(), key=lambda x: -x.created_at)
            ]
        columns = ["id", "query", "model", "hits", "created_at", "expires_at"]
        return pd.DataFrame(rows, columns=columns)
