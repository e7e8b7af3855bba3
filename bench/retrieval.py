"""Top-1 accuracy of retrieval by meaning: BM25 alone vs BM25 fused with the embedder.

The labelled set is ``bench/_retrieval_data.py`` (55 queries over 27 tools, 10 skills and
12 rules links, written for this benchmark). Tools are ranked by ``ToolIndex``; skills and
links by the shared ``HybridIndex`` over the texts the rules index keeps for them (a
skill's name and description, a link's text and target). For each family the script
prints top-1 accuracy with BM25 alone (the baseline, and the fallback without the
``embeddings`` extra) and fused, and the embedder's cost per query.

Run with::

    python bench/retrieval.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))
sys.path.insert(0, str(_HERE))

from _retrieval_data import (  # noqa: E402
    LINK_QUERIES,
    LINKS,
    SKILL_QUERIES,
    SKILLS,
    TOOL_QUERIES,
    TOOLS,
)

from ctxnb.retrieval.embedding import HybridIndex, resolve_embedder  # noqa: E402
from ctxnb.retrieval.tool_discovery import ToolIndex, _embedding_text, normalize_tool  # noqa: E402


def _top1(rank, queries) -> tuple[int, list[str]]:  # type: ignore[no-untyped-def]
    right, misses = 0, []
    for q, want in queries:
        got = rank(q)
        if got == want:
            right += 1
        else:
            misses.append(f"{q!r} -> {got} (want {want})")
    return right, misses


def main() -> None:
    embedder = resolve_embedder("auto")
    if embedder is None:
        print("the embeddings extra is not installed: only BM25 can be measured")

    def tools(e):  # type: ignore[no-untyped-def]
        idx = ToolIndex(TOOLS, embedder=e)
        return lambda q: next((h.name for h in idx.search(q, k=1)), None)

    def dense(texts):  # type: ignore[no-untyped-def]
        idx = HybridIndex(texts, embedder=embedder)

        def rank(q: str) -> str:
            sims = idx.similarities(q)
            return max(sims, key=lambda d: (sims[d], d))

        return rank

    dense_texts = {
        "tools": {t["name"]: _embedding_text(normalize_tool(t)) for t in TOOLS},
        "skills": {n: f"{n.replace('-', ' ')} {d}" for n, d in SKILLS.items()},
        "links": {t: f"{text} {t}" for t, text in LINKS.items()},
    }

    def skills(e):  # type: ignore[no-untyped-def]
        idx = HybridIndex({n: f"{n.replace('-', ' ')} {d}" for n, d in SKILLS.items()}, embedder=e)
        return lambda q: next((h.id for h in idx.search(q, k=1)), None)

    def links(e):  # type: ignore[no-untyped-def]
        idx = HybridIndex({t: f"{text} {t}" for t, text in LINKS.items()}, embedder=e)
        return lambda q: next((h.id for h in idx.search(q, k=1)), None)

    families = {
        "tools": (tools, TOOL_QUERIES),
        "skills": (skills, SKILL_QUERIES),
        "links": (links, LINK_QUERIES),
    }
    total = {"bm25": 0, "fused": 0, "dense": 0, "n": 0}
    print(f"top-1 accuracy ({sum(len(q) for _, q in families.values())} labelled queries)")
    for name, (make, queries) in families.items():
        bm25, bm25_miss = _top1(make(None), queries)
        line = f"  {name:<7} BM25 alone {bm25:>2}/{len(queries)}"
        total["bm25"] += bm25
        total["n"] += len(queries)
        if embedder is not None:
            fused, fused_miss = _top1(make(embedder), queries)
            alone, _ = _top1(dense(dense_texts[name]), queries)
            total["fused"] += fused
            total["dense"] += alone
            line += f"   fused with {embedder.name} {fused:>2}/{len(queries)}"
            line += f"   embeddings alone {alone:>2}/{len(queries)}"
            for m in fused_miss:
                line += f"\n      fused miss: {m}"
        print(line)
    n = total["n"]
    print(f"  all     BM25 alone {total['bm25'] / n:.0%}", end="")
    if embedder is not None:
        print(f"   fused {total['fused'] / n:.0%}   embeddings alone {total['dense'] / n:.0%}")
        queries = [q for _, qs in families.values() for q, _ in qs]
        embedder.embed(queries[:4])  # warm up
        times = []
        for q in queries:
            t0 = time.perf_counter()
            embedder.embed([q])
            times.append((time.perf_counter() - t0) * 1000)
        print(
            f"embedder cost per query: median {statistics.median(times):.1f} ms, "
            f"p90 {statistics.quantiles(times, n=10)[-1]:.1f} ms ({embedder.name}, CPU)"
        )
    else:
        print()


if __name__ == "__main__":
    main()
