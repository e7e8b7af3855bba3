import pytest

from ctxnb import Workspace
from ctxnb.strategies.builtin import (
    FileViewLimits,
    KeepAll,
    MetadataOnly,
    ObservationMasking,
    RecencyWindow,
    Selection,
    TokenBudgetLRU,
)


@pytest.fixture
def session(sample_ws):
    ws = Workspace.open(sample_ws)
    s = ws.session("strat", system_prompt="You are a careful engineer.", excerpts=False)
    ids = []
    for p in sorted(sample_ws.rglob("*")):
        if p.is_file() and ".ctxnb" not in p.parts and p.suffix in (".py", ".md", ".sql", ".js"):
            ids.append(s.add_path(p.relative_to(sample_ws)))
    for i in range(6):
        s.record_toolcall("run_command", {"cmd": f"echo {i}"}, f"output {i}\n" * 40)
    s.pin(ids[0])
    s.add_turn("user", "Refactor the report.")
    return s


STRATEGIES = [
    KeepAll(),
    RecencyWindow(3),
    TokenBudgetLRU(),
    TokenBudgetLRU(300),
    ObservationMasking(keep_last=2),
    MetadataOnly(),
    FileViewLimits(max_files_open=2, per_file_char_limit=200),
]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
@pytest.mark.parametrize("budget", [None, 2500, 1200])
def test_every_strategy_keeps_pins_and_respects_budget(session, strategy, budget):
    ctx = session.assemble(strategy=strategy, budget=budget, record=False)
    active = [it.id for it in ctx.items]
    for pinned in session.pinned_set:
        assert pinned in active
    pinned_tokens = sum(it.tokens for it in ctx.items if it.pinned)
    fixed = sum(t for name, t in ctx.tokens_by_section().items() if name != "active")
    if budget is not None and fixed + pinned_tokens <= budget:
        assert ctx.total_tokens <= budget, ctx.tokens_by_section()
        assert not ctx.over_budget
    assert set(active) | set(ctx.evicted) == set(session.active_set)


def test_recency_window_keeps_most_recent(session):
    ctx = session.assemble(strategy=RecencyWindow(2), record=False)
    unpinned = [it for it in ctx.items if not it.pinned]
    assert len(unpinned) == 2
    assert all(it.type == "toolcall" for it in unpinned)  # the last things used


def test_observation_masking_masks_old_outputs_only(session):
    ctx = session.assemble(strategy=ObservationMasking(keep_last=2), record=False)
    calls = [it for it in ctx.items if it.type == "toolcall"]
    assert [it.masked for it in calls] == [True] * 4 + [False] * 2
    assert all("elided" in it.text for it in calls if it.masked)
    assert all(not it.masked for it in ctx.items if it.type == "file")
    full = session.assemble(strategy=KeepAll(), record=False)
    assert ctx.total_tokens < full.total_tokens


def test_metadata_only_shows_pins_only(session):
    ctx = session.assemble(strategy=MetadataOnly(), record=False)
    assert [it.id for it in ctx.items] == session.pinned_set
    assert len(ctx.section("metadata").text.splitlines()) == len(session.metadata_pool) + 1


def test_file_view_limits(session):
    ctx = session.assemble(strategy=FileViewLimits(2, 100), record=False)
    files = [it for it in ctx.items if it.type == "file"]
    assert len(files) <= 2
    assert any(it.truncated for it in files)
    assert all("truncated" in it.text for it in files if it.truncated)


def test_custom_strategy_in_a_few_lines(session):
    class OnlyFiles:
        name = "only-files"

        def select(self, inp):
            return Selection.keep(inp, [i.id for i in inp.items if i.type == "file"])

    ctx = session.assemble(strategy=OnlyFiles(), record=False)
    assert {it.type for it in ctx.items} == {"file"}
    assert ctx.strategy["name"] == "only-files"


def test_bad_parameters():
    with pytest.raises(ValueError):
        RecencyWindow(-1)
    with pytest.raises(ValueError):
        FileViewLimits(1, 0)
