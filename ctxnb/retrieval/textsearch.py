"""Small lexical search: an Okapi BM25 index and reciprocal rank fusion.

Rules discovery, skills and tool discovery rank short texts (link titles, skill
descriptions, tool schemas) against a task. This module does that in pure Python with
an identifier-aware tokenizer, fast enough for a few thousand documents (about a
millisecond per query at 5,000 short documents).

Tokenizing (:func:`tokenize`):

* splits on anything that is not a letter or digit, then splits identifiers on
  camelCase, snake_case and kebab-case boundaries (``getHTTPResponse`` → ``get``,
  ``http``, ``response``) and lowercases;
* also keeps a compound identifier whole (``read_file``, ``getfile``, unstemmed) so a
  query that names it exactly scores higher;
* drops English stopwords;
* optionally applies a light stemmer (:func:`light_stem`): ``ies``→``y``, plural
  ``s``/``es``, ``ing``, ``ed``, a doubled final consonant, a final ``e``. It only
  conflates inflections of the same word (``files``/``file``, ``created``/``creating``/
  ``create``); it is no Porter stemmer.

Example:
    >>> index = BM25Index({"a": "read a file from disk", "b": "send a Slack message"})
    >>> index.search("reading files")[0][0]
    'a'
    >>> reciprocal_rank_fusion([["x", "y"], ["y", "z"]])[0][0]
    'y'
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = [
    "DEFAULT_STOPWORDS",
    "BM25Index",
    "light_stem",
    "reciprocal_rank_fusion",
    "tokenize",
]

#: English function words that carry no topic; tool and rule texts are English.
DEFAULT_STOPWORDS: frozenset[str] = frozenset(
    """a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just me
    more most my no nor not now of off on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who
    whom why will with would you your yours""".split()
)

# An identifier-like chunk: letter/digit runs (any script) joined by "_", "-" or ".".
_CHUNK = re.compile(r"[^\W_]+(?:[_\-.]+[^\W_]+)*")
_SEPARATOR = re.compile(r"[_\-.]+")
# camelCase pieces: acronyms before a capitalised word, capitalised words, digits.
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_VOWELS = frozenset("aeiouy")


def light_stem(word: str) -> str:
    """Strip common English inflections from a lowercase word.

    Example:
        >>> [light_stem(w) for w in ["files", "queries", "branches", "running", "created"]]
        ['fil', 'query', 'branch', 'run', 'creat']
        >>> light_stem("create") == light_stem("creating") == light_stem("creates")
        True
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    # plural first, then verb endings, so "strings" and "string" meet at the same stem
    if word.endswith("ing") and len(word) >= 6:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) >= 5:
        word = _undouble(word[:-2])
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _undouble(stem: str) -> str:
    # running -> runn -> run; but keep "ll", "ss", "zz" (calling -> call).
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS | {"l", "s", "z"}:
        return stem[:-1]
    return stem


def tokenize(
    text: str,
    *,
    stem: bool = True,
    stopwords: frozenset[str] | set[str] | None = None,
    compounds: bool = True,
) -> list[str]:
    """Split text into lowercase search terms (see the module docstring).

    Args:
        text: any text; code identifiers are split into their words.
        stem: apply :func:`light_stem` to each term.
        stopwords: words to drop; ``None`` means :data:`DEFAULT_STOPWORDS`, an empty set
            keeps everything.
        compounds: also emit each multi-part identifier whole, lowercased and not
            stemmed (``read_file``, ``gethttpresponse``), so exact names match best.

    Example:
        >>> tokenize("getHTTPResponse for the read_file tool")
        ['gethttpresponse', 'get', 'http', 'respons', 'read_file', 'read', 'fil', 'tool']
    """
    stops = DEFAULT_STOPWORDS if stopwords is None else stopwords
    out: list[str] = []
    for chunk_match in _CHUNK.finditer(text):
        chunk = chunk_match.group()
        parts: list[str] = []
        for word in _SEPARATOR.split(chunk):
            # camelCase splitting is ASCII-only: other scripts have no such convention.
            parts.extend(_CAMEL.findall(word) or [word] if word.isascii() else [word])
        if compounds and len(parts) > 1:
            out.append(chunk.lower())
        for part in parts:
            term = part.lower()
            if term in stops:
                continue
            out.append(light_stem(term) if stem else term)
    return out


class BM25Index:
    """An Okapi BM25 index over string ids and texts.

    Scores use the non-negative idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` and the
    usual ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))`` saturation; a term
    repeated in the query counts once per repetition. Adding an id that is already
    present replaces its text.

    Args:
        docs: initial documents, a mapping ``id -> text`` or ``(id, text)`` pairs.
        k1: term-frequency saturation (higher: repeated terms keep adding score).
        b: length normalisation, 0 (none) to 1 (full).
        stem: apply the light stemmer (see :func:`tokenize`).
        stopwords: words to ignore; ``None`` means :data:`DEFAULT_STOPWORDS`.
        tokenizer: replaces :func:`tokenize` entirely when given.

    Example:
        >>> index = BM25Index([("git_commit", "Record changes to the repository")])
        >>> index.add("git_push", "Update remote refs along with associated objects")
        >>> [doc_id for doc_id, _ in index.search("commit my changes", k=1)]
        ['git_commit']
    """

    def __init__(
        self,
        docs: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        stem: bool = True,
        stopwords: frozenset[str] | set[str] | None = None,
        tokenizer: Callable[[str], list[str]] | None = None,
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1 = k1
        self.b = b
        if tokenizer is None:
            stops = DEFAULT_STOPWORDS if stopwords is None else frozenset(stopwords)

            def tokenizer(text: str) -> list[str]:
                return tokenize(text, stem=stem, stopwords=stops)

        self.tokenizer: Callable[[str], list[str]] = tokenizer
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._terms: dict[str, Counter[str]] = {}
        self._total_length = 0
        self._norm: dict[str, float] | None = None
        if docs is not None:
            items = docs.items() if isinstance(docs, Mapping) else docs
            for doc_id, text in items:
                self.add(doc_id, text)

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._lengths

    def __repr__(self) -> str:
        return f"BM25Index({len(self)} docs, {len(self._postings)} terms)"

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id``, replacing any earlier text for that id."""
        if doc_id in self._lengths:
            self.remove(doc_id)
        terms = Counter(self.tokenizer(text))
        self._terms[doc_id] = terms
        length = sum(terms.values())
        self._lengths[doc_id] = length
        self._total_length += length
        for term, tf in terms.items():
            self._postings.setdefault(term, {})[doc_id] = tf
        self._norm = None

    def remove(self, doc_id: str) -> None:
        """Drop ``doc_id`` from the index; unknown ids raise ``KeyError``."""
        terms = self._terms.pop(doc_id)
        self._total_length -= self._lengths.pop(doc_id)
        for term in terms:
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
        self._norm = None

    def _length_norms(self) -> dict[str, float]:
        # Cached between searches; any add/remove changes the average length.
        if self._norm is None:
            avg = self._total_length / len(self._lengths) if self._lengths else 0.0
            k1, b = self.k1, self.b
            self._norm = {
                doc_id: k1 * (1 - b + b * (length / avg if avg else 0.0))
                for doc_id, length in self._lengths.items()
            }
        return self._norm

    def scores(self, query: str) -> dict[str, float]:
        """BM25 score of every document that shares at least one term with ``query``."""
        norms = self._length_norms()
        n_docs = len(self._lengths)
        k1_plus_1 = self.k1 + 1
        scores: dict[str, float] = {}
        # Sorted so that floating-point sums add up in the same order on every run.
        for term, q_tf in sorted(Counter(self.tokenizer(query)).items()):
            posting = self._postings.get(term)
            if not posting:
                continue
            df = len(posting)
            weight = q_tf * math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
            for doc_id, tf in posting.items():
                scores[doc_id] = scores.get(doc_id, 0.0) + weight * tf * k1_plus_1 / (
                    tf + norms[doc_id]
                )
        return scores

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first; equal scores by id.

        Documents sharing no term with the query are not returned, so the list can be
        shorter than ``k``.
        """
        if k <= 0:
            return []
        scores = self.scores(query)
        return heapq.nsmallest(k, scores.items(), key=lambda item: (-item[1], item[0]))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str | tuple[str, float]]],
    k: int = 60,
    *,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse several rankings by reciprocal rank: ``score(id) = Σ w / (k + rank)``.

    Ranks start at 1. Only order matters, so rankings from incomparable scorers (BM25,
    cosine similarity) combine safely. An id repeated within one ranking counts at its
    best rank. Ties are broken by id.

    Args:
        rankings: each a best-first list of ids (or of ``(id, score)`` pairs).
        k: damping constant; 60 is the value from Cormack et al. (2009).
        weights: one weight per ranking, default 1 each.

    Example:
        >>> reciprocal_rank_fusion([["a", "b"], [("b", 0.9), ("a", 0.1)], ["b"]], k=0)
        [('b', 2.5), ('a', 1.5)]
    """
    if k < 0:
        raise ValueError(f"reciprocal_rank_fusion needs k >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(f"got {len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            doc_id = item if isinstance(item, str) else item[0]
            if doc_id in seen:
                continue
            seen.add(doc_id)
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
