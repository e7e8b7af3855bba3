"""The token-triggered condenser and the masking + summary hybrid, on a real recorded run."""

from __future__ import annotations

import pickle

import pytest
from _paths import REPO

from ctxnb.replay import load
from ctxnb.replay.runner import replay
from ctxnb.strategies.builtin import Item, KeepAll, ObservationMasking, StrategyInput
from ctxnb.strategies.condensers import MaskingSummaryHybrid, TokenCondenser

DJANGO = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


def _items(n: int, tokens: int = 400) -> tuple[Item, ...]:
    return tuple(
        Item(f"t{k}", "toolcall", tokens=tokens, seq=k, tool="bash", content=f"out {k}\n" * 50)
        for k in range(n)
    )


def test_nothing_is_condensed_below_the_threshold_and_a_block_at_once_above() -> None:
    s = TokenCondenser(max_tokens=2000, keep_last=2, summary_tokens=50)
    assert not s.select(StrategyInput(_items(5), None, 5)).replace  # 2000 tokens: not over
    sel = s.select(StrategyInput(_items(6), None, 6))  # 2400: the oldest 4 at once
    assert list(sel.replace) == ["t0"] and sel.masked == ["t1", "t2", "t3"]
    # Later steps keep the same block (a stable prefix) until the context overflows again.
    for n in (7, 8):  # a 50-token summary and up to 4 outputs: 1650 tokens at most
        sel = s.select(StrategyInput(_items(n), None, n))
        assert list(sel.replace) == ["t0"] and sel.masked == ["t1", "t2", "t3"]
    sel = s.select(StrategyInput(_items(9), None, 9))  # 50 + 5 x 400: over again
    assert list(sel.replace) == ["t0", "t4"] and sel.masked == ["t1", "t2", "t3", "t5", "t6"]


def test_the_hybrid_masks_every_step_and_summarizes_every_n_outputs() -> None:
    s = MaskingSummaryHybrid(keep_last=2, summarize_after=5)
    sel = s.select(StrategyInput(_items(4), None, 4))
    assert sel.masked == ["t0", "t1"] and not sel.replace
    sel = s.select(StrategyInput(_items(5), None, 5))  # 5 outputs: summarize the old 3
    assert list(sel.replace) == ["t0"] and sel.masked == ["t1", "t2"]
    sel = s.select(StrategyInput(_items(7), None, 7))  # 4 fresh: masking only
    assert list(sel.replace) == ["t0"] and sel.masked == ["t1", "t2", "t3", "t4"]
    with pytest.raises(ValueError, match="summarize_after > keep_last"):
        MaskingSummaryHybrid(keep_last=5, summarize_after=5)
    with pytest.raises(ValueError, match="max_tokens >= 1"):
        TokenCondenser(max_tokens=0)


def test_a_copy_sent_to_a_worker_starts_without_the_run_s_blocks() -> None:
    s = TokenCondenser(max_tokens=100, keep_last=1)
    s.select(StrategyInput(_items(4), None, 4))
    clone = pickle.loads(pickle.dumps(s))
    assert clone._blocks.condensed({i.id: i for i in _items(4)}) == []


def test_on_a_real_run_they_cut_tokens_and_keep_the_prefix_cacheable() -> None:
    t = load(DJANGO)
    df = replay(
        t,
        [
            KeepAll(),
            ObservationMasking(3),
            TokenCondenser(max_tokens=3000, keep_last=3),
            MaskingSummaryHybrid(keep_last=3, summarize_after=10),
        ],
    )
    g = df.groupby("strategy")
    tokens = g["total_tokens"].sum()
    share = g["cache_read_tokens"].sum() / tokens
    assert tokens["token-condenser"] < tokens["keep-all"]
    assert tokens["masking-summary-hybrid"] < tokens["keep-all"]
    # Condensing at once keeps more of the prefix than masking one more output a step.
    assert share["token-condenser"] > share["observation-masking"]
    cond = df[df["strategy"] == "token-condenser"]
    # Items (content) stay under the trigger plus one step's growth after a condensation.
    assert cond["items_masked"].max() > 0 and cond["segment"].max() == 0
    keep = df[df["strategy"] == "keep-all"].set_index("step")["tokens_active"]
    shown = cond.set_index("step")["tokens_active"]
    condensed = shown[shown < keep]  # the steps from the first condensation on
    assert len(condensed) >= 10
    assert list(condensed.index) == list(range(condensed.index[0], len(keep)))
    growth = keep.diff().clip(lower=0)[condensed.index]
    assert (condensed <= 3000 + growth).all()
    assert keep[condensed.index].min() > 3000  # keep-all itself never came back under
