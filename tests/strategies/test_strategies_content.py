"""Strategies that read content and replace it; Selection validation; cache-aware masking."""

from __future__ import annotations

import pickle

import pytest
from _paths import REPO

from ctxnb import SelectionError, Workspace
from ctxnb.replay import load
from ctxnb.replay.runner import replay
from ctxnb.strategies.builtin import (
    BlockMasking,
    Item,
    KeepAll,
    ObservationMasking,
    Selection,
    StrategyInput,
    Summarize,
)
from ctxnb.strategies.summaries import OutlineSummarizer

DJANGO = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


@pytest.fixture
def session(sample_ws):
    ws = Workspace.open(sample_ws)
    s = ws.session("content", rules=False, system_prompt="You are careful.")
    s.add_path("README.md")
    for i in range(6):
        s.record_toolcall(
            "run_command", {"cmd": f"seq {i}"}, "".join(f"row {k}\n" for k in range(200))
        )
    s.add_turn("user", "Look at the rows.")
    return s


class Fixed:
    """A strategy returning a fixed selection (built from the candidates it is given)."""

    name = "fixed"

    def __init__(self, build):
        self.build = build

    def select(self, inp):
        return self.build(inp)


def _calls(inp):
    return [i.id for i in inp.items if i.type == "toolcall"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda inp: Selection(active=[i.id for i in inp.items], truncate={_calls(inp)[0]: -1}),
            "number of characters >= 0",
        ),
        (
            lambda inp: Selection(
                active=[i.id for i in inp.items], truncate={_calls(inp)[0]: True}
            ),
            "number of characters >= 0",
        ),
        (
            lambda inp: Selection(active=_calls(inp)[1:], masked=_calls(inp)[:1]),
            "outside the kept set",
        ),
        (
            lambda inp: Selection(active=_calls(inp)[1:], truncate={_calls(inp)[0]: 10}),
            "outside the kept set",
        ),
        (
            lambda inp: Selection(active=_calls(inp)[1:], replace={_calls(inp)[0]: "x"}),
            "outside the kept set",
        ),
        (lambda inp: Selection(active=_calls(inp), evicted=_calls(inp)[:1]), "both kept"),
        (lambda inp: Selection(active=["no-such-id"]), "not candidates"),
        (
            lambda inp: Selection(
                active=_calls(inp), masked=_calls(inp)[:1], replace={_calls(inp)[0]: "s"}
            ),
            "both masked",
        ),
        (
            lambda inp: Selection(active=_calls(inp), replace={_calls(inp)[0]: 42}),
            "a replacement is text",
        ),
    ],
)
def test_an_inconsistent_selection_is_an_error(session, build, message):
    before = session.active_set
    with pytest.raises(SelectionError, match=message) as exc:
        session.assemble(strategy=Fixed(build), record=False)
    assert exc.value.strategy == "fixed"
    assert session.active_set == before  # nothing lost


def test_strategies_see_content_read_only(session):
    seen = {}

    def build(inp):
        seen.update({i.id: i.content for i in inp.items})
        return Selection(active=[i.id for i in inp.items])

    session.assemble(strategy=Fixed(build), record=False)
    readme = session.find("README.md")
    assert seen[readme] == session.get(readme)["content"]
    assert all(v.startswith("row 0\n") for k, v in seen.items() if k != readme)
    item = Item("a", "file", content="x" * 10_000)
    assert "xxxx" not in repr(item)  # cheap reprs: content is not shown
    with pytest.raises(AttributeError):
        item.content = "y"  # type: ignore[misc]


def test_replacements_are_shown_and_rebuilt_by_context_at(session):
    calls = [i for i in session.active_set if session.metadata(i).type == "toolcall"]

    def build(inp):
        return Selection(active=[i.id for i in inp.items], replace={calls[0]: "SUMMARY: 200 rows"})

    ctx = session.assemble(strategy=Fixed(build))
    item = next(it for it in ctx.items if it.id == calls[0])
    assert "SUMMARY: 200 rows" in item.text and "row 150" not in item.text
    assert item.tokens < next(it for it in ctx.items if it.id == calls[1]).tokens
    # The stored object is unchanged; the past context shows the replacement again.
    assert session.get(calls[0])["content"].startswith("row 0")
    assert session.context_at(ctx.turn).hash == ctx.hash
    # The budget is measured on what is shown: a replaced item fits where the whole does not.
    fixed = ctx.total_tokens - sum(it.tokens for it in ctx.items)
    tight = fixed + item.tokens + 5
    only = lambda inp: Selection(active=[calls[0]], replace={calls[0]: "SUMMARY: 200 rows"})  # noqa: E731
    assert [
        it.id for it in session.assemble(strategy=Fixed(only), budget=tight, record=False).items
    ] == [calls[0]]


def test_summarize_replaces_old_outputs_with_the_default_extractive_summary(session):
    ctx = session.assemble(strategy=Summarize(keep_last=2, max_tokens=60), record=False)
    calls = [it for it in ctx.items if it.type == "toolcall"]
    assert len(calls) == 6
    short, whole = calls[:4], calls[4:]
    assert all("lines omitted" in it.text for it in short)
    assert all("row 150" in it.text for it in whole)
    expected = OutlineSummarizer()("run_command", "".join(f"row {k}\n" for k in range(200)), 60)
    assert expected in short[0].text
    keep = session.assemble(strategy=KeepAll(), record=False)
    assert ctx.total_tokens < keep.total_tokens / 2


class CountingSummarizer:
    def __init__(self):
        self.calls = 0
        self.taken = 0

    def __call__(self, label, text, max_tokens):
        self.calls += 1
        return f"{label}: {len(text.splitlines())} lines"

    def take_usage(self):
        new, self.taken = self.calls - self.taken, self.calls
        return (new * 100, new * 0.001)


def test_each_item_is_summarized_once_and_the_cost_is_reported():
    t = load(DJANGO)
    summ = CountingSummarizer()
    df = replay(t, [KeepAll(), Summarize(keep_last=3, summarizer=summ, max_tokens=50)])
    s = df[df["strategy"] == "summarize"]
    k = df[df["strategy"] == "keep-all"]
    big_outputs = summ.calls
    assert 0 < big_outputs < len(t.steps)  # not once per step: summaries are kept
    assert s["total_tokens"].sum() < k["total_tokens"].sum()
    assert (k["strategy_tokens"] == 0).all()
    # Each row carries what the strategy spent at that step; the run's total is the sum.
    assert s["strategy_tokens"].sum() == big_outputs * 100
    assert s["strategy_cost_usd"].sum() == pytest.approx(big_outputs * 0.001)
    assert (s["strategy_tokens"] > 0).sum() < len(s)
    # A pickled copy (a worker process) starts with no cached summaries.
    clone = pickle.loads(pickle.dumps(Summarize(summarizer=OutlineSummarizer())))
    assert clone._cache == {}


def test_block_masking_masks_in_blocks():
    items = tuple(Item(f"t{n}", "toolcall", seq=n) for n in range(40))
    counts = [
        len(BlockMasking(keep_last=5, block=10).select(StrategyInput(items[:n], None, n)).masked)
        for n in range(40)
    ]
    assert counts[:15] == [0] * 15 and counts[15:25] == [10] * 10 and counts[25:35] == [20] * 10
    sliding = [
        len(ObservationMasking(5).select(StrategyInput(items[:n], None, n)).masked)
        for n in range(40)
    ]
    # Never more masked than sliding masking; equal to it at each block boundary.
    assert all(b <= s for b, s in zip(counts, sliding, strict=True))
    assert counts[15] == sliding[15] and counts[25] == sliding[25]
    assert BlockMasking(5, 1).select(StrategyInput(items, None, 40)).masked == (
        ObservationMasking(5).select(StrategyInput(items, None, 40)).masked
    )
    with pytest.raises(ValueError, match="block >= 1"):
        BlockMasking(5, 0)


class CutOutputs:
    name = "cut-outputs"

    def select(self, inp):
        calls = {i.id: 100 for i in inp.items if i.type == "toolcall"}
        return Selection(active=[i.id for i in inp.items], truncate=calls)


def test_truncated_items_are_not_in_full_for_the_loss_counts():
    from ctxnb.replay import Action, FileTouch, Step, Trajectory

    big = "".join(f"line {n}\n" for n in range(2000))

    def step(i, op, content):
        return Step(
            index=i,
            action=Action(tool="read" if op == "read" else "edit"),
            observation=content if op == "read" else "",
            files=[FileTouch(path="a.py", op=op, content=content)],
        )

    t = Trajectory(
        id="trunc",
        source_format="ctxnb",
        task="t",
        steps=[
            step(0, "read", big),
            step(1, "read", big),
            step(2, "edit", big + "x\n"),
            step(3, "read", big + "x\n"),
        ],
    )
    df = replay(t, [KeepAll(), CutOutputs()], files="pool").set_index(["strategy", "step"])
    # Keep-all shows step 0's output whole: no need to read again; after the edit, stale.
    assert df.loc[("keep-all", 1), "re_reads"] == 0
    assert df.loc[("keep-all", 3), "stale_reads"] >= 1
    # Cut to 100 characters it is neither enough to skip reading again nor a stale read.
    assert df.loc[("cut-outputs", 1), "items_truncated"] == 1
    assert df.loc[("cut-outputs", 1), "re_reads"] == 1
    assert df.loc[("cut-outputs", 3), "stale_reads"] == 0


def test_under_prompt_caching_block_masking_beats_sliding_masking():
    df = replay(load(DJANGO), [KeepAll(), ObservationMasking(5), BlockMasking(5, 10)])
    later = df[df["step"] > 0]
    g = later.groupby("strategy")
    reuse = g["cache_read_tokens"].sum() / g["total_tokens"].sum()
    assert reuse["block-masking"] > reuse["observation-masking"] + 0.2
    assert reuse["keep-all"] >= reuse["block-masking"]
    cost = df.groupby("strategy")[["cost_usd", "cost_usd_uncached"]].sum()
    # Without caching, sliding masking is the cheapest of the three; with caching it is
    # the dearest, dearer even than sending everything (the finding tutorial 06 shows).
    assert cost["cost_usd_uncached"].idxmin() == "observation-masking"
    assert cost["cost_usd"].idxmax() == "observation-masking"
    assert cost.loc["block-masking", "cost_usd"] < cost.loc["observation-masking", "cost_usd"]
