"""Context operations you can audit: session.context_changes and session.restore_item.

Every figure is checked against an independent count: the token counter run on the
item's block as the keep-all context renders it (before) and as the audited context
shows it (after). Restores are checked against the bytes written to disk and the
store's own version history; persistence by reopening the workspace from disk.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from _paths import REPO

from ctxnb import Workspace
from ctxnb.context import ContextChange, changes_frame
from ctxnb.context._changes import CHANGE_COLUMNS
from ctxnb.errors import CtxnbError, NotFoundError
from ctxnb.replay import Action, Step, Trajectory, compaction_changes
from ctxnb.session.core import Session
from ctxnb.strategies.builtin import (
    FileViewLimits,
    KeepAll,
    ObservationMasking,
    RecencyWindow,
    Selection,
    Summarize,
)
from ctxnb.strategies.condensers import TokenCondenser


def _output(n: int) -> str:
    # Distinct outputs, large enough for Summarize to replace them.
    return "".join(f"result {n}.{k}: value_{n}_{k}\n" for k in range(120))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "w"
    root.mkdir()
    (root / "big.py").write_text("".join(f"def f{k}():\n    return {k}\n" for k in range(300)))
    (root / "small.py").write_text("X = 1\n")
    return Workspace.open(root)


def _session(ws: Workspace, sid: str) -> tuple[Session, list[str], list[str]]:
    s = ws.session(sid, rules=False)
    files = [s.add_path("big.py"), s.add_path("small.py")]
    calls = [s.record_toolcall("run_command", {"cmd": f"job {n}"}, _output(n)) for n in range(4)]
    s.add_turn("user", "What do the jobs print?")
    return s, files, calls


def _counted(s: Session, ctx) -> dict[str, int]:
    """Tokens of each item's block, counted afresh by the session's token counter."""
    return {it.id: s.token_counter.count(it.text) for it in ctx.items}


def _check_tokens(s: Session, ctx, changes: list[ContextChange]) -> None:
    full = _counted(s, s.assemble(KeepAll(), record=False))
    shown = _counted(s, ctx)
    assert {c.id for c in changes} == set(full)  # every candidate, once
    # The rows account for the whole active section, token for token.
    assert sum(c.tokens_after for c in changes) == ctx.section("active").tokens
    for c in changes:
        assert c.tokens_before == full[c.id], c
        assert c.tokens_after == shown.get(c.id, 0), c
        if c.op == "evicted":
            assert c.id in ctx.evicted and c.id not in shown
        else:
            assert c.id in shown


def test_a_masked_session_lists_each_op_with_counted_tokens(ws: Workspace) -> None:
    s, files, calls = _session(ws, "masked")
    ctx = s.assemble(ObservationMasking(keep_last=1))
    changes = s.context_changes(1)
    ops = {c.id: c.op for c in changes}
    assert [ops[c] for c in calls] == ["masked", "masked", "masked", "kept"]
    assert [ops[f] for f in files] == ["kept", "kept"]
    assert {c.by for c in changes} == {"observation-masking"}
    _check_tokens(s, ctx, changes)
    masked = [c for c in changes if c.op == "masked"]
    assert all(c.tokens_after < c.tokens_before for c in masked)
    by_item = {it.id: it for it in ctx.items}
    assert all(by_item[c.id].masked for c in masked)
    # The live context carries the same records the store gives back.
    assert ctx.changes == tuple(changes)
    recorded = ws.store.history("masked")[-1].doc["assembly"]
    assert {(c.turn, c.tx_id) for c in changes} == {(1, recorded["tx_id"])}
    assert all(ws.store.as_of(c.id, c.tx_id) is not None for c in changes)


@pytest.mark.parametrize(
    ("strategy", "budget", "expect"),
    [
        (Summarize(keep_last=1, max_tokens=40), None, {"summarized": 3, "kept": 3}),
        (KeepAll(), 2500, {"evicted": None}),  # the budget pass evicts, not the strategy
        (RecencyWindow(2), None, {"evicted": 4, "kept": 2}),
        (FileViewLimits(5, 200), None, {"truncated": 1, "kept": 5}),
        (TokenCondenser(max_tokens=2000, keep_last=1), None, {"compacted": 3, "kept": 3}),
    ],
    ids=["summarized", "budget-evicted", "strategy-evicted", "truncated", "condensed"],
)
def test_a_compacted_session_lists_each_op(ws: Workspace, strategy, budget, expect) -> None:
    s, files, calls = _session(ws, "compacted")
    ctx = s.assemble(strategy, budget)
    changes = s.context_changes(1)
    _check_tokens(s, ctx, changes)
    counts = pd.Series([c.op for c in changes]).value_counts().to_dict()
    for op, n in expect.items():
        assert counts.get(op, 0) == n if n is not None else counts.get(op, 0) > 0, counts
    shown = {it.id: it for it in ctx.items}
    for c in changes:
        if c.op == "evicted":
            assert c.by == ("budget" if budget is not None else strategy.name)
        else:
            assert c.by == strategy.name
        if c.op == "summarized":
            # Shown as the strategy's replacement: neither masked nor cut, and smaller.
            it = shown[c.id]
            middle = f"result {calls.index(c.id)}.60:"  # the outline keeps first and last lines
            assert not it.masked and not it.truncated and middle not in it.text
            assert c.tokens_after < c.tokens_before
        if c.op == "truncated":
            assert shown[c.id].truncated and c.id == files[0]
        if c.op == "compacted":
            # One block: the oldest call shows the block's summary, the others a placeholder.
            head = shown[calls[0]]
            assert c.id in calls[:3] and shown[c.id].masked == (c.id != calls[0])
            assert "3 earlier tool outputs" in head.text and c.tokens_after < c.tokens_before


def test_pinned_items_are_kept_whatever_the_strategy_says(ws: Workspace) -> None:
    s, _, calls = _session(ws, "pinned")
    s.pin(calls[0])

    class MaskEverything:
        name = "mask-everything"

        def select(self, inp):
            return Selection([i.id for i in inp.items], masked=[i.id for i in inp.items])

    ctx = s.assemble(MaskEverything())
    changes = {c.id: c for c in s.context_changes(1)}
    assert changes[calls[0]].op == "kept"  # the assembler showed it in full
    assert changes[calls[0]].tokens_after == changes[calls[0]].tokens_before
    assert changes[calls[1]].op == "masked"
    _check_tokens(s, ctx, list(changes.values()))


def test_restore_brings_back_exactly_the_stored_bytes(ws: Workspace) -> None:
    s, files, calls = _session(ws, "restore")
    original = (ws.root / "big.py").read_bytes()
    s.assemble(RecencyWindow(1), budget=None)
    evicted = {c.id: c for c in s.context_changes(1) if c.op == "evicted"}
    assert files[0] in evicted and calls[0] in evicted
    # The file changes afterwards: the store now holds a newer version.
    (ws.root / "big.py").write_text("changed = True\n")
    s.add_turn("assistant", "Let me look again.")
    s.add_path("big.py")
    assert s.get(files[0])["content"] == "changed = True\n"

    doc = s.restore_item(files[0], turn=1)
    assert hashlib.sha256(original).hexdigest() == doc["source_hash"]
    assert doc["content"].encode() == original
    assert doc == ws.store.as_of(files[0], evicted[files[0]].tx_id)

    call = s.restore_item(evicted[calls[0]])  # a change names its own turn
    assert call["content"] == _output(0)
    assert calls[0] in s.pinned_set and files[0] in s.pinned_set
    restored = [c for c in s.context_changes(2) if c.op == "restored"]
    assert [c.id for c in restored] == [files[0], calls[0]]
    for c in restored:
        assert c.by == "restore_item" and c.turn == 2
        assert (c.tokens_before, c.tokens_after) == (0, evicted[c.id].tokens_before)
    # Back in full: the same strategy can no longer drop them.
    ctx = s.assemble(RecencyWindow(1))
    shown = {it.id: it for it in ctx.items}
    assert "result 0.60:" in shown[calls[0]].text and not shown[calls[0]].masked
    assert files[0] in shown


def test_restore_of_a_masked_item_without_pinning(ws: Workspace) -> None:
    s, _, calls = _session(ws, "nopin")
    s.assemble(ObservationMasking(keep_last=1))
    masked = next(c for c in s.context_changes(1) if c.op == "masked")
    doc = s.restore_item(masked.id, pin=False)  # the last recorded turn by default
    assert doc["content"] == _output(calls.index(masked.id))
    assert masked.id not in s.pinned_set and masked.id in s.active_set
    restored = s.context_changes(1)[-1]
    assert restored.op == "restored" and restored.tokens_before == masked.tokens_after


def test_changes_survive_save_and_load_in_another_process(ws: Workspace) -> None:
    s, _, calls = _session(ws, "persist")
    s.assemble(ObservationMasking(keep_last=2))
    s.add_turn("assistant", "ok")
    s.assemble(Summarize(keep_last=1, max_tokens=40), budget=3000)
    s.restore_item(calls[0], turn=1)
    here = {t: s.context_changes(t) for t in (1, 2)}
    ws.store.close()

    again = Workspace.open(ws.root).session("persist", rules=False)
    for t, found in here.items():
        assert again.context_changes(t) == found
        pd.testing.assert_frame_equal(again.context_changes(t, as_frame=True), changes_frame(found))
    assert calls[0] in again.pinned_set  # the restore's pin was saved with the session
    # A loaded session restores from turns an earlier process recorded.
    assert again.restore_item(calls[1], turn=1)["content"] == _output(1)
    assert [c.id for c in again.context_changes(2) if c.op == "restored"] == [calls[0], calls[1]]
    here[2] = again.context_changes(2)
    # And from a fresh interpreter, with nothing shared but the files on disk.
    code = (
        "import json, sys; from dataclasses import asdict; from ctxnb import Workspace\n"
        "s = Workspace.open(sys.argv[1]).session('persist', rules=False)\n"
        "print(json.dumps({t: [asdict(c) for c in s.context_changes(t)] for t in (1, 2)}))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, str(ws.root)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    loaded = json.loads(out)
    for t, found in here.items():
        got = [ContextChange(**{**d, "evidence": tuple(d["evidence"])}) for d in loaded[str(t)]]
        assert got == found


def test_frame_has_one_row_per_change(ws: Workspace) -> None:
    s, _, _ = _session(ws, "frame")
    s.assemble(ObservationMasking(keep_last=1))
    records = s.context_changes(1)
    df = s.context_changes(1, as_frame=True)
    assert list(df.columns) == list(CHANGE_COLUMNS)
    assert df[["id", "op", "tokens_before", "tokens_after"]].values.tolist() == [
        [c.id, c.op, c.tokens_before, c.tokens_after] for c in records
    ]
    assert (df["tokens_before"] - df["tokens_after"]).sum() == sum(c.tokens_saved for c in records)


def test_bad_input_gets_one_clear_error_and_loses_nothing(ws: Workspace) -> None:
    s, files, calls = _session(ws, "bad")
    with pytest.raises(NotFoundError, match="no recorded context"):
        s.restore_item(calls[0])
    s.assemble(ObservationMasking(keep_last=1))
    with pytest.raises(CtxnbError, match=r"turn 7 .*recorded turns: \[1\]"):
        s.context_changes(7)
    with pytest.raises(NotFoundError, match="recorded turns"):
        s.restore_item(calls[0], turn=0)
    for wrong in (True, "1", 1.0):  # True == 1 and 1.0 == 1: still not a turn
        with pytest.raises(NotFoundError, match="is not a turn"):
            s.context_changes(wrong)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError, match="not in the context at turn 1"):
        s.restore_item("no-such-item", turn=1)
    with pytest.raises(NotFoundError, match="shown in full"):
        s.restore_item(calls[-1], turn=1)
    # Nothing changed: no pin, no restore recorded, the stored session as before.
    assert s.pinned_set == [] and [c.op for c in s.context_changes(1)].count("restored") == 0
    assert "restores" not in ws.store.get("bad")
    assert len(s.context_changes(1)) == len(files) + len(calls)


# -- a replayed Claude Code compaction --------------------------------------------------------
def _step(i: int, out: str) -> Step:
    return Step(index=i, action=Action(tool="bash", args={"command": f"cmd{i}"}), observation=out)


def test_survival_rule_on_a_run_whose_answer_is_known() -> None:
    shared = "project-root/shared_name"  # in four results: says nothing about any one
    outs = [
        f"{shared}\nparse_header raised KeyError at line 12",  # named in the summary
        f"{shared}\nretry_limit = 5",  # only the shared part is in the summary
        f"{shared}\n",  # nothing of its own
        f"{shared}\nfound in 3 files: common_helper",
    ]
    summary = "We fixed parse_header in project-root/shared_name; retry logic untouched."
    run = Trajectory(
        id="known",
        source_format="ctxnb",
        task="fix",
        steps=[
            *(_step(i, o) for i, o in enumerate(outs)),
            Step(index=4, action=Action(tool="compact"), compaction=True, observation=summary),
            _step(5, "after"),
        ],
    )
    changes = compaction_changes(run)
    assert [c.op for c in changes] == ["compacted"] * 4
    assert [c.survived for c in changes] == [True, False, None, False]
    assert changes[0].evidence == ("parse_header",)
    assert all(c.turn == 4 and c.tokens_after == 0 and c.by == "compaction" for c in changes)


def test_a_term_shared_by_more_than_three_results_is_not_distinctive() -> None:
    from ctxnb.replay.compaction import MAX_SHARED, survival

    for n in (MAX_SHARED, MAX_SHARED + 1):
        results = {f"t{k}": "calls build_index()" for k in range(n)}
        verdict = survival(results, "build_index was slow")
        assert {v[0] for v in verdict.values()} == ({True} if n == MAX_SHARED else {None})


def test_the_vendored_claude_code_compaction(test_data: Path) -> None:
    """The real transcript: every tool result before the boundary is listed, its tokens
    are those of the keep-all replay context at that step, every piece of evidence is
    in both the result and the summary, and ReplayView shows the verdicts."""
    from ctxnb.replay import load
    from ctxnb.replay.runner import replay_contexts
    from ctxnb.widgets import ReplayView

    path = test_data / "claude_code" / "compaction_trimmed.jsonl"
    run = load(path)
    at = next(s for s in run.steps if s.compaction)
    changes = compaction_changes(run)
    before = [s for s in run.steps[: at.index] if s.action.tool not in ("reply", "user")]
    assert len(changes) == len(before) > 0
    assert {c.op for c in changes} == {"compacted"} and {c.turn for c in changes} == {at.index}
    assert changes[0].by == f"compaction ({at.action.args['trigger']})"
    keep_all = next(
        ctx for step, _, ctx, _ in replay_contexts(run, [KeepAll()]) if step.index == at.index
    )
    assert {c.id: c.tokens_before for c in changes} == {
        it.id: it.tokens for it in keep_all.items if it.type == "toolcall"
    }
    outputs = [s.observation or "" for s in before]
    for c, out in zip(changes, outputs, strict=True):
        assert all(t in at.observation and t in out for t in c.evidence), c
        assert c.survived is (bool(c.evidence) if c.survived is not None else None)
    assert {True, False} <= {c.survived for c in changes}

    view = ReplayView.from_trajectory(path, [KeepAll(), ObservationMasking(2)])
    assert view.compactions[at.index] == tuple(changes)
    view.show(at.index)
    html = view.detail.value
    kept = sum(1 for c in changes if c.survived)
    assert f"{len(changes)} tool results left the context; {kept} survived" in html
    assert html.count(">compacted<") == len(changes)
    masked = view.changes_at("observation-masking", at.index)
    assert masked and {c.op for c in masked} == {"masked"}
    assert html.count("<summary>context changes</summary>") == 2


def test_session_view_shows_a_turns_changes(ws: Workspace) -> None:
    from ctxnb.widgets import SessionView

    s, _, _ = _session(ws, "view")
    s.assemble(ObservationMasking(keep_last=1))
    view = SessionView(s)
    view.changes_turn.value = 1
    view.changes_button.click()
    html = view.context_changes_html.value
    assert "Context changes at turn 1" in html and html.count(">masked<") == 3
    view.show_context_changes(5)  # a turn never recorded: said, not raised
    assert "no context was recorded at turn 5" in view.context_changes_html.value


def test_a_turn_recorded_without_changes_says_so(ws: Workspace) -> None:
    s, _, _ = _session(ws, "old")
    s.assemble(KeepAll())
    record = dict(ws.store.history("old")[-1].doc["assembly"])
    del record["changes"]  # as a ctxnb from before context changes recorded it
    s.add_turn("assistant", "ok")
    record["turn"] = s.turn
    s.save(assembly=record)
    with pytest.raises(NotFoundError, match="kept no context changes; assemble again"):
        s.context_changes(s.turn)
    assert len(s.context_at(s.turn).changes) == 0  # the context itself still rebuilds
    assert len(s.context_changes(1)) == 6


def test_a_live_replay_view_keeps_each_steps_changes(ws: Workspace) -> None:
    from ctxnb.widgets import ReplayView

    s, _, calls = _session(ws, "live")
    view = ReplayView.live(["keep-all", "masking"])
    for _ in range(2):
        view.add_step(
            {
                "keep-all": s.assemble(KeepAll(), record=False),
                "masking": s.assemble(ObservationMasking(keep_last=1), record=False),
            }
        )
    assert view.changes_at("keep-all", 1) == ()
    assert [c.id for c in view.changes_at("masking", 1)] == calls[:3]
    # One row per masked item in the changes table (the item list has badges of its own).
    assert view.detail.value.count('<td style="white-space:nowrap">masked</td>') == 3


def test_a_condensed_item_must_name_a_replaced_head() -> None:
    from ctxnb.errors import SelectionError
    from ctxnb.strategies.builtin import Item

    items = (Item("a", "toolcall"), Item("b", "toolcall"))
    Selection(
        ["a", "b"], masked=["b"], replace={"a": "s"}, condensed={"a": "a", "b": "a"}
    ).validate(items)
    with pytest.raises(SelectionError, match=r"condensed\['b'\] = 'b', which has no replacement"):
        Selection(["a", "b"], masked=["b"], condensed={"b": "b"}).validate(items)
    with pytest.raises(SelectionError, match="condensed names ids that are not candidates"):
        Selection(["a"], replace={"a": "s"}, condensed={"z": "a"}).validate(items)


def test_the_changes_table_escapes_and_redacts_what_it_shows(ws: Workspace) -> None:
    from ctxnb.widgets import SessionView

    s = ws.session("hostile", rules=False)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # generated, not a real token
    s.record_toolcall("run_command", {"cmd": "<script>alert(1)</script>"}, "x\n" * 200)
    s.record_toolcall("run_command", {"cmd": "ls"}, "a\n")

    class Named:
        name = f"<b>mask</b> {token}"

        def select(self, inp):
            return Selection([i.id for i in inp.items], masked=[inp.items[0].id])

    s.assemble(Named())
    view = SessionView(s)
    view.show_context_changes(0)
    html = view.context_changes_html.value
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>mask</b>" not in html and token not in html and "REDACTED" in html
