"""Pinned items are shown in full whatever a strategy returns: evicted, masked, truncated
or replaced (issue #28, point 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.strategies.builtin import ObservationMasking, Selection, StrategyInput

PINNED = "pinned rule: money in integer cents\n" * 20
OTHER = "ordinary file body\n" * 20


class Hide:
    """A strategy that hides every candidate one way (pinned or not)."""

    name = "hide"

    def __init__(self, how: str) -> None:
        self.how = how

    def select(self, inp: StrategyInput) -> Selection:
        ids = [i.id for i in inp.items]
        if self.how == "evict":
            return Selection(active=[], evicted=ids)
        if self.how == "mask":
            return Selection(active=ids, masked=ids)
        if self.how == "truncate":
            return Selection(active=ids, truncate=dict.fromkeys(ids, 5))
        return Selection(active=ids, replace=dict.fromkeys(ids, "SUMMARY"))


@pytest.fixture
def session(tmp_path: Path):
    (tmp_path / "rules.md").write_text(PINNED)
    (tmp_path / "other.md").write_text(OTHER)
    ws = Workspace.open(tmp_path)
    s = ws.session("pins", rules=False)
    s.pin(s.add_path("rules.md"))
    s.add_path("other.md")
    s.record_toolcall("pinned_call", {}, "pinned call output\n" * 10)
    s.pin(s.session_index[-1])
    return s


@pytest.mark.parametrize("how", ["evict", "mask", "truncate", "replace"])
def test_a_strategy_cannot_hide_a_pinned_item(session, how: str) -> None:
    ctx = session.assemble(strategy=Hide(how))
    text = ctx.to_text()
    assert PINNED in text and "pinned call output\n" * 10 in text
    assert OTHER not in text  # the unpinned file is hidden as the strategy asked
    # and the past context is rebuilt the same way
    assert session.context_at(ctx.turn).to_text() == text


def test_observation_masking_leaves_a_pinned_tool_output_whole(session) -> None:
    for n in range(5):
        session.record_toolcall("run", {"n": n}, f"later output {n}\n")
    text = session.assemble(strategy=ObservationMasking(keep_last=1)).to_text()
    assert "pinned call output\n" * 10 in text
    assert "later output 0" not in text  # an unpinned old output is still masked


def test_validate_accepts_a_selection_that_names_pins() -> None:
    # A strategy need not know about pins: validate does not refuse it.
    from ctxnb.strategies.builtin import Item

    items = (Item("a", "file", pinned=True), Item("b", "file"))
    Selection(active=["a", "b"], masked=["a"], replace={"b": "x"}).validate(items)
    assert "pinned item in full" in " ".join(Selection.validate.__doc__.split())
