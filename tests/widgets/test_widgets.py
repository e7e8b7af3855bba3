"""ctxnb.widgets: each view's state after user actions, and its static HTML."""

from __future__ import annotations

import doctest
import importlib
import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _paths import REPO

from ctxnb import Workspace
from ctxnb.analysis import load_trace
from ctxnb.govern.approval import ApprovalRequest, QueueApprover
from ctxnb.govern.ledger import TraceLedger, build_trace_record
from ctxnb.strategies.builtin import KeepAll, RecencyWindow
from ctxnb.widgets import (
    ApprovalPanel,
    ContextView,
    HistoryView,
    SessionView,
    TraceView,
    ledger_html,
    run_in_background,
)


@pytest.fixture
def ws(sample_ws: Path) -> Workspace:
    return Workspace.open(sample_ws)


# -- SessionView -----------------------------------------------------------------------------
def test_session_view_buttons_change_the_session(ws: Workspace) -> None:
    s = ws.session("v", system_prompt="sp", rules=False)
    a = s.add_path("AGENTS.md", activate=False)
    b = s.add_path("inventory/models.py", activate=False)
    view = SessionView(s)
    assert [v for _, v in view.select.options] == [a, b]
    view.select.value = (a, b)
    view.activate_button.click()
    assert s.active_set == [a, b]
    assert all(label.startswith("●") for label, _ in view.select.options)
    view.select.value = (a,)
    view.deactivate_button.click()
    assert s.active_set == [b]
    view.select.value = (a,)
    view.pin_button.click()
    assert s.pinned_set == [a] and a in s.active_set
    assert "pinned" in dict((v, k) for k, v in view.select.options)[a]
    view.unpin_button.click()
    assert s.pinned_set == []
    assert "1 active" not in view.summary.value and "2 active" in view.summary.value


def test_session_view_without_selection_and_on_error(ws: Workspace) -> None:
    s = ws.session("v", rules=False)
    s.add_path("AGENTS.md", activate=False)
    view = SessionView(s)
    assert view.activate() == []
    assert "select" in view.status.value
    assert view.activate(["not-an-id"]) == []
    assert "not-an-id" in view.status.value
    assert s.active_set == []


def test_session_view_updates_live_from_a_background_thread(ws: Workspace) -> None:
    s = ws.session("v", rules=False)
    a = s.add_path("AGENTS.md")
    view = SessionView(s)
    (ws.root / "AGENTS.md").write_text("# changed\n")
    s.add_path("AGENTS.md")  # re-index, as the watcher does before it notifies

    t = threading.Thread(target=s.notify, args=(a, "updated"))
    t.start()
    t.join(5)
    assert [action for _, action, _ in view.changes] == ["updated"]
    assert view.changes[0][2].endswith("AGENTS.md")
    assert "What changed" in view.changes_html.value and "updated" in view.changes_html.value
    label = view.select.options[0][0]
    assert "(10 chars)" in label  # "# changed\n" is the new content


def test_session_view_repr_html(ws: Workspace) -> None:
    s = ws.session("v", rules=False)
    s.add_path("AGENTS.md")
    html = SessionView(s)._repr_html_()
    assert "AGENTS.md" in html and "<table" in html


# -- ContextView -----------------------------------------------------------------------------
def test_context_view_sections_items_and_text(ws: Workspace) -> None:
    s = ws.session("c", system_prompt="You are careful.", rules=False)
    a = s.add_path("AGENTS.md")
    s.add_turn("user", "hi")
    ctx = s.assemble(budget=100_000)
    view = ContextView(ctx)
    assert [n for n, _ in view.sections] == ["system", "metadata", "active", "chat"]
    assert sum(t for _, t in view.sections) == ctx.total_tokens
    assert "budget 100,000" in view.bar.value
    keys = [v for _, v in view.picker.options]
    assert keys == [
        "section:system",
        "section:metadata",
        "section:active",
        f"item:{a}",
        "section:chat",
    ]
    assert "You are careful." in view.text.value
    view.picker.value = f"item:{a}"
    assert "AGENTS.md" in view.text.value and "&lt;file " in view.text.value
    assert str(ctx.items[0].tokens) in view.table.value
    assert "AGENTS.md" in view._repr_html_()


def _until(check: Any, what: str, timeout: float = 20.0) -> None:
    """Poll for a result a background thread produces, with a generous deadline."""
    import time

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def test_context_view_follows_the_live_session(ws: Workspace) -> None:
    """A following view shows what the session would send now: every change the
    session makes (add, activate, deactivate, pin, a chat turn) redraws it by itself,
    and it always equals a fresh assembly under the same strategy and budget."""
    s = ws.session("follow", system_prompt="You are careful.", rules=False)
    strategy = RecencyWindow(5)
    view = ContextView.follow(s, strategy, budget=50_000)

    def now() -> Any:
        return s.assemble(strategy, 50_000, record=False)

    assert view.context.hash == now().hash and not view.context.items
    turns_before = s.turn
    a = s.add_path("AGENTS.md")
    _until(lambda: [it.id for it in view.context.items] == [a], "the added file shows")
    assert "AGENTS.md" in view.table.value and f"item:{a}" in [k for _, k in view.picker.options]
    view.picker.value = f"item:{a}"
    b = s.add_path("inventory/models.py")
    _until(lambda: len(view.context.items) == 2, "the second file shows")
    assert view.picker.value == f"item:{a}"  # what the reader picked stays picked
    assert "AGENTS.md" in view.text.value
    s.deactivate(a)
    _until(lambda: [it.id for it in view.context.items] == [b], "the deactivated file left")
    assert view.picker.value == "section:system"  # the picked item left: the first one
    s.add_turn("user", "what does models.py hold?")
    _until(lambda: "what does models.py hold?" in view.context.section("chat").text, "the turn")
    assert s.turn == turns_before + 1
    s.pin(a)
    _until(lambda: {it.id for it in view.context.items} == {a, b}, "the pinned file")
    _until(lambda: view.context.hash == now().hash, "the view equals a fresh assembly")
    assert view.header.value.count("2 items") == 1
    # Following stores nothing: no context was recorded at any turn.
    from ctxnb.errors import NotFoundError

    with pytest.raises(NotFoundError):
        s.context_at(s.turn)


def test_context_view_follows_a_file_changed_on_disk(ws: Workspace) -> None:
    """The session's watcher records a change from its own thread: the view shows the
    new content (a real file change, the watcher fed the event a backend would send)."""
    from watchfiles import Change

    from ctxnb.session.watch import Watcher

    s = ws.session("disk", rules=False)
    a = s.add_path("AGENTS.md")
    view = ContextView.follow(s)
    view.show(f"item:{a}")
    assert "# changed on disk" not in view.text.value
    path = ws.root / "AGENTS.md"
    path.write_text("# changed on disk\n")
    events = [{(Change.modified, str(path))}]
    with Watcher(s, backend=lambda dirs, stop: iter(events)) as w:
        w.join(10)
    assert w.events == 1
    _until(lambda: "# changed on disk" in view.text.value, "the new content shows")
    assert view.context.items[0].text.count("# changed on disk") == 1


def test_a_view_of_one_context_stays_that_context(ws: Workspace) -> None:
    s = ws.session("still", rules=False)
    s.add_path("AGENTS.md")
    ctx = s.assemble(record=False)
    view = ContextView(ctx)
    s.add_path("inventory/models.py")
    view.refresh()
    assert view.context is ctx and len(view.context.items) == 1


def test_compare_two_turns_lists_exactly_what_entered_left_and_changed(ws: Workspace) -> None:
    s = ws.session("d", rules=False)
    a = s.add_path("AGENTS.md")
    b = s.add_path("inventory/models.py")
    c = s.add_path("README.md", activate=False)
    s.add_turn("user", "one")
    ctx1 = s.assemble()
    (ws.root / "inventory" / "models.py").write_text("# rewritten\n")
    s.add_path("inventory/models.py")  # re-index: a new version of b
    s.deactivate(a)
    s.activate(c)
    s.add_turn("user", "two")
    ctx2 = s.assemble()
    view = ContextView.compare(ctx1, ctx2, labels=("turn 1", "turn 2"))
    assert view.diff == {"entered": [c], "left": [a], "changed": [b]}
    keys = [v for _, v in view.picker.options]
    assert keys[:3] == [f"item:{b}", f"item:{c}", f"item:{a}"]
    assert "section:chat" in keys and "section:metadata" in keys
    # The first choice is shown: b's diff has the new content.
    assert "+# rewritten" in view.diff_html.value
    assert "turn 1" in view.summary.value and "1 entered" in view.summary.value
    chat_diff = view.text_diff("section:chat")
    assert "\n-one" not in chat_diff and "\n+two" in chat_diff


def test_compare_two_strategies_at_the_same_turn(ws: Workspace) -> None:
    s = ws.session("e", rules=False)
    ids = [s.add_path(p) for p in ("AGENTS.md", "README.md", "inventory/models.py")]
    keep = s.assemble(KeepAll(), record=False)
    recent = s.assemble(RecencyWindow(1), record=False)
    view = ContextView.compare(keep, recent)
    assert view.diff == {"entered": [], "left": ids[:2], "changed": []}
    same = ContextView.compare(keep, keep)
    assert same.diff == {"entered": [], "left": [], "changed": []}
    assert "same items" in same.diff_html.value
    assert "2 left" in view._repr_html_()


# -- TraceView ---------------------------------------------------------------------------------
def _trace_frame(tmp_path: Path, n: int = 130) -> pd.DataFrame:
    ledger = TraceLedger(tmp_path / "agent_trace.jsonl", validate=False)
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(n):
        ledger.append(
            build_trace_record(
                file_path=f"src/m{i % 7}.py",
                ranges=[(1, 2), (4, 4)] if i % 3 == 0 else [(1, 1)],
                new_text="a\nb\nc\nd\n",
                intent_id=f"INT-{i % 4}",
                session_id=f"s{i % 2}",
                contributor_type="human" if i % 5 == 0 else "ai",
                model_id=None if i % 5 == 0 else "anthropic/claude-sonnet-4",
                repo_root=None,
                tool="write_file",
                mutation_class="AST_REFACTOR" if i % 2 else "INTENT_EVOLUTION",
                clock=lambda i=i: t0 + timedelta(hours=i),
            )
        )
    return load_trace(ledger)


def test_trace_view_filters_match_pandas(tmp_path: Path) -> None:
    df = _trace_frame(tmp_path)
    view = TraceView(df)
    assert len(view.filtered) == len(df)
    assert view.page.max == -(-len(df) // 50)
    view.filter(intent="INT-2", file="m3", contributor="ai")
    expected = df[
        (df.intent_id == "INT-2")
        & df.file.astype(str).str.contains("m3", regex=False)
        & (df.contributor_type == "ai")
    ]
    assert sorted(view.filtered.index) == sorted(expected.index)
    assert len(expected) > 0
    view.filter(intent="", file="", contributor="", since="2025-01-02", until="2025-01-03T12:00")
    lo, hi = pd.Timestamp("2025-01-02", tz="UTC"), pd.Timestamp("2025-01-03T12:00", tz="UTC")
    expected = df[(df.timestamp >= lo) & (df.timestamp <= hi)]
    assert (
        sorted(view.filtered.index) == sorted(expected.index) and expected.record_id.nunique() == 37
    )
    # One widget per page, not per row: the table is one HTML payload.
    assert view.table.value.count("<tr data-row=") == min(50, len(expected))


def test_trace_view_sort_pages_and_detail(tmp_path: Path) -> None:
    df = _trace_frame(tmp_path)
    view = TraceView(df)
    ts = view.filtered["timestamp"]
    assert ts.is_monotonic_decreasing
    view.filter(sort_by="file", descending=False)
    files = view.filtered["file"].astype(str).tolist()
    assert files == sorted(files)
    view.next_button.click()
    assert view.page.value == 2  # pages are numbered from 1 where a reader sees them
    assert view.page_frame.index.tolist() == view.filtered.index[50:100].tolist()
    assert "rows 51–100" in view.status.value
    view.select_row(3)
    row = view.filtered.iloc[53]
    assert view.selected is not None and view.selected.name == row.name
    assert str(row["record_id"]) in view.detail.value
    view.prev_button.click()
    view.prev_button.click()  # stays on the first page
    assert view.page.value == 1 and view.detail.value == ""


def test_trace_view_bad_date_and_sources(tmp_path: Path) -> None:
    df = _trace_frame(tmp_path, n=5)
    view = TraceView(TraceLedger(tmp_path / "agent_trace.jsonl"))
    assert len(view.filtered) == len(df)
    view.since.value = "not a date"
    assert "color:#b00" in view.status.value
    assert len(view.filtered) == len(df)  # the last good filter stays
    assert "TraceView" in view._repr_html_() and view._repr_html_().count("<tr data-row") == len(df)


# -- HistoryView ----------------------------------------------------------------------------
def test_history_view_diff_between_any_two(ws: Workspace) -> None:
    p = ws.root / "notes.txt"
    for text in ("one\n", "one\ntwo\n", "zero\none\ntwo\n"):
        p.write_text(text)
        ws.index(progress=False)
    view = HistoryView(ws, "notes.txt", context=0)
    assert len(view.versions) == 3
    assert (view.from_version.value, view.to_version.value) == (1, 2)
    assert [ln for ln in view.diff_text.splitlines() if ln[:1] in "+-"][2:] == ["+zero"]
    view.from_version.value = 0
    changed = [ln for ln in view.diff_text.splitlines() if ln[:1] in "+-"][2:]
    assert changed == ["+zero", "+two"]
    assert "+two" in view.output.value
    p.unlink()
    ws.index(progress=False)
    deleted = HistoryView(ws, "notes.txt")
    assert "deleted" in deleted.to_version.options[-1][0]
    assert "-zero" in deleted.diff_text
    assert "notes.txt" in deleted._repr_html_()


def test_history_view_unknown_file(ws: Workspace) -> None:
    from ctxnb.errors import NotFoundError

    with pytest.raises(NotFoundError, match="ws.index"):
        HistoryView(ws, "nope.txt")


# -- ApprovalPanel --------------------------------------------------------------------------------
def test_approval_panel_decision_reaches_the_waiting_call() -> None:
    q = QueueApprover(timeout=30)
    panel = ApprovalPanel(q, by="ana")
    assert panel.approve_button.disabled
    req = ApprovalRequest.new(
        "run_command", {"cmd": "rm -rf build"}, "deletes files", intent_id="INT-1"
    )
    fut = run_in_background(q.request, req)
    assert panel.wait_for_pending(timeout=10)
    assert panel.requests.value == req.id and not panel.approve_button.disabled
    assert "rm -rf build" in panel.detail.value and "INT-1" in panel.detail.value
    assert not fut.done()  # blocked until a human decides
    panel.note.value = "looked fine"
    panel.approve_button.click()
    d = fut.result(timeout=10)
    assert (d.approved, d.by, d.note) == (True, "ana", "looked fine")
    assert panel.status.value == "approved by ana"
    assert panel.requests.options == () and panel.approve_button.disabled
    assert "approved" in panel.history_html.value


def test_approval_panel_reject_and_engine_like_source() -> None:
    class Engine:
        approver = QueueApprover(timeout=30)

    panel = ApprovalPanel(Engine(), by="bo")
    f1 = run_in_background(Engine.approver.request, ApprovalRequest.new("a", {}, "r1"))
    f2 = run_in_background(Engine.approver.request, ApprovalRequest.new("b", {}, "r2"))
    assert panel.wait_for_pending(2, timeout=10)
    second = panel.requests.options[1][1]
    panel.requests.value = second
    panel.reject_button.click()
    rejected = f1 if f1.done() else f2
    assert rejected.result(timeout=5).approved is False
    assert panel.status.value == "rejected by bo"
    assert len(panel.requests.options) == 1
    assert "Approvals" in panel._repr_html_() and "rejected" in panel._repr_html_()
    assert panel.approve(second) is None and "no longer pending" in panel.status.value
    # The request in view left: the other one is decided once it is picked (and seen).
    assert panel.requests.value is None and panel.approve() is None
    panel.requests.value = panel.requests.options[0][1]
    panel.approve()
    assert (f1 if rejected is f2 else f2).result(timeout=5).approved is True


def test_a_click_aimed_at_a_request_that_timed_out_does_not_approve_the_next() -> None:
    # The human reads a deletion and clicks Approve as its countdown runs out: the click
    # reaches the kernel after that request was refused and another one arrived.
    q = QueueApprover(timeout=0.3)
    panel = ApprovalPanel(q, by="ana")
    seen = ApprovalRequest.new("delete_file", {"path": "notes.md"}, "deletes notes.md")
    assert run_in_background(q.request, seen).result(timeout=10).by == "timeout"
    q.timeout = 30
    unseen = ApprovalRequest.new("delete_file", {"path": "src/app.py"}, "deletes src/app.py")
    fut = run_in_background(q.request, unseen)
    assert panel.wait_for_pending(timeout=10)
    panel.approve_button.click()
    assert not fut.done() and "select a request" in panel.status.value
    assert panel.requests.value is None and panel.approve_button.disabled
    assert "src/app.py" not in panel.detail.value
    panel.requests.value = unseen.id  # the human picks it and sees what it deletes
    assert "src/app.py" in panel.detail.value and not panel.approve_button.disabled
    panel.reject_button.click()
    assert fut.result(timeout=10).approved is False


def test_the_list_shows_a_file_name_s_control_and_bidi_characters_as_escapes() -> None:
    # A deleted file's name is the agent's: in the list's one line, as in the question, a
    # right-to-left override must not reverse what follows it.
    from ctxnb.sandbox.destructive import destructive_reason

    name = "notes \u202etxt.exe\u2066\x1b[2K.md"
    reason = destructive_reason(name, b"x\n", None)
    assert reason is not None and "\u202e" in reason
    q = QueueApprover(timeout=30)
    panel = ApprovalPanel(q, by="ana")
    req = ApprovalRequest.new("run_command", {"cmd": "rm notes*"}, reason)
    fut = run_in_background(q.request, req)
    assert panel.wait_for_pending(timeout=10)
    ((label, _),) = panel.requests.options
    assert not any(c in label for c in ("\u202e", "\u2066", "\x1b"))
    assert "\\u202e" in label and "\\u2066" in label and "\\u001b" in label
    panel.reject_button.click()
    assert fut.result(timeout=10).approved is False


def test_a_double_click_decides_one_request_not_the_next() -> None:
    q = QueueApprover(timeout=30)
    panel = ApprovalPanel(q, by="ana")
    first = ApprovalRequest.new("run_command", {"cmd": "rm a.txt"}, "deletes a.txt")
    second = ApprovalRequest.new("run_command", {"cmd": "rm -rf src"}, "deletes src/")
    f1 = run_in_background(q.request, first)
    assert panel.wait_for_pending(timeout=10) and panel.requests.value == first.id
    f2 = run_in_background(q.request, second)
    assert panel.wait_for_pending(2, timeout=10)
    panel.approve_button.click()
    panel.approve_button.click()  # the second click of a double click
    assert f1.result(timeout=10).approved is True
    assert not f2.done() and q.pending() == [second]
    q.decide(second.id, False, by="test")


def test_approval_panel_needs_a_queue_approver() -> None:
    with pytest.raises(TypeError, match="QueueApprover"):
        ApprovalPanel(object())


def test_run_in_background_carries_exceptions() -> None:
    def boom() -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        run_in_background(boom).result(timeout=5)


# -- static HTML ---------------------------------------------------------------------------------
def test_ledger_html_reads_only_the_tail(tmp_path: Path) -> None:
    ledger = TraceLedger(tmp_path / "agent_trace.jsonl", validate=False)
    rec = build_trace_record(
        file_path="a.py",
        ranges=[(1, 1)],
        new_text="x\n",
        intent_id="INT-9",
        session_id=None,
        model_id=None,
        repo_root=None,
    )
    line = json.dumps(rec) + "\n"
    ledger.path.write_text(line * 5000 + '{"cut')
    html = ledger_html(ledger, n=20)
    assert html.count("<tr data-row") == 20 and "INT-9" in html
    assert len(html) < 20_000
    assert "no records" in ledger_html(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    "module",
    [
        "",
        ".static",
        ".session_view",
        ".context_view",
        ".trace_view",
        ".history_view",
        ".approval",
        ".replay_view",
        ".experiment_view",
    ],
)
def test_doctests(module: str) -> None:
    mod: Any = importlib.import_module(f"ctxnb.widgets{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_session_view_shows_why_rules_were_loaded(tmp_path):
    from ctxnb import Workspace, copy_sample_workspace
    from ctxnb.instructions import RulesTracker
    from ctxnb.widgets import SessionView

    ws = Workspace.open(copy_sample_workspace(tmp_path))
    session = ws.session("rules-view", rules=False)
    view = SessionView(session)
    assert view.rules_html.value == ""  # no tracker: nothing to show
    tracker = RulesTracker(session)
    tracker.on_tool_call("read_file", {"path": "inventory/models.py"})
    view.refresh()
    html = view.rules_html.value
    assert "inventory/AGENTS.md" in html and "touched inventory/models.py" in html
    assert "always" in html


# -- style ------------------------------------------------------------------------------------
def test_code_and_diffs_are_monospace_with_a_reading_line_height(ws: Workspace) -> None:
    from ctxnb.widgets.static import MONO, diff_html, pre, token_bar

    assert "monospace" in MONO and "line-height:1.45" in MONO
    assert MONO in pre("x = 1") and MONO in diff_html("--- a\n+++ b\n-x\n+y\n")
    # Two captioned bars never run into each other: each caption is its own block.
    two = token_bar([("chat", 26)], label="keep-all") + token_bar([("chat", 9)], label="masking")
    assert "chat 26</span></div></div><div" in two


def test_context_diff_names_paths_not_object_ids(ws: Workspace) -> None:
    s = ws.session("paths", rules=False)
    a = s.add_path("inventory/models.py")
    s.add_path("AGENTS.md")
    before = s.assemble(KeepAll(), record=False)
    s.deactivate(a)
    after = s.assemble(KeepAll(), record=False)
    view = ContextView.compare(before, after, labels=("before", "after"))
    assert view.diff["left"] == [a]
    [left] = view.paths["left"]
    assert left.endswith("inventory/models.py") and a not in repr(view)
    assert view.text_diff(f"item:{a}").splitlines()[0].endswith("inventory/models.py")


# -- ReplayView --------------------------------------------------------------------------------
RUN = REPO / "data" / "trajectories" / "django__django-13670.traj.json"


@pytest.fixture(scope="module")
def replay_view() -> Any:
    from ctxnb.strategies.builtin import ObservationMasking
    from ctxnb.widgets import ReplayView

    return ReplayView.from_trajectory(RUN, [KeepAll(), ObservationMasking(3), RecencyWindow(4)])


def test_replay_view_item_states_match_the_replay_frame(replay_view: Any) -> None:
    from ctxnb.replay.runner import replay
    from ctxnb.strategies.builtin import ObservationMasking

    frame = replay(RUN, [KeepAll(), ObservationMasking(3), RecencyWindow(4)])
    assert replay_view.steps == sorted(frame["step"].unique().tolist())
    for r in frame.itertuples():
        states = [i.state for i in replay_view.items_at(r.strategy, r.step)]
        assert states.count("masked") == r.items_masked, (r.strategy, r.step)
        assert states.count("truncated") == r.items_truncated
        assert states.count("evicted") == r.items_evicted
        assert len(states) - states.count("evicted") == r.items_active + r.items_masked
    # Evicted items are named by their path or tool call, never by an object id.
    evicted = [
        i.label
        for (label, _), items in replay_view.items.items()
        for i in items
        if i.state == "evicted"
    ]
    assert evicted and not any(e.startswith("object ") for e in evicted)


def test_replay_view_one_payload_per_step(replay_view: Any) -> None:
    replay_view.left.value, replay_view.right.value = "keep-all", "observation-masking"
    payloads: list[str] = []
    replay_view.detail.observe(lambda ch: payloads.append(ch["new"]), names="value")
    chart = replay_view.chart.value
    replay_view.show(15)
    assert len(payloads) == 1 and replay_view.chart.value == chart  # only the step payload
    html = payloads[0]
    assert "<b>step 15</b>" in html and html.count("masked</span>") > 3
    assert "cache-readable" in html and "so far" in html  # the replay measured both
    replay_view.next_button.click()
    assert len(payloads) == 2 and payloads[1] != html and replay_view.step == 16
    with pytest.raises(KeyError, match="step 999"):
        replay_view.show(999)


def test_replay_view_bars_cover_every_step(replay_view: Any) -> None:
    import re

    replay_view.left.value, replay_view.right.value = "keep-all", "recency-window"
    chart = replay_view.chart.value
    n = len(replay_view.steps)
    assert chart.count("<svg") == 4  # sections and cache bars for each of the two
    assert f'viewBox="0 0 {n} ' in chart
    # one bar per step in the chat section (every context holds the task)
    chat = re.findall(r'<path fill="#b85450" d="([^"]*)"', chart)
    assert [d.count("M") for d in chat] == [n, n]
    static = replay_view._repr_html_()
    assert "<svg" in static and "step " in static


def test_replay_view_from_a_frame_without_cache_columns() -> None:
    from ctxnb.replay.runner import replay
    from ctxnb.widgets import ReplayView

    frame = replay(RUN, [KeepAll(), RecencyWindow(4)])
    old = frame.drop(columns=["cache_read_tokens", "new_tokens", "cost_usd"])
    view = ReplayView(old, step=10)
    assert view.step == 10 and not view.has_cache
    assert view.chart.value.count("<svg") == 2 and "cache-readable" not in view.chart.value
    assert "from_trajectory" in view.detail.value  # says how to get the item lists
    with pytest.raises(KeyError, match="not in the frame"):
        ReplayView(frame, strategies=["keep-all", "nope"])
    with pytest.raises(ValueError, match="empty"):
        ReplayView(frame.iloc[:0])


def test_replay_view_follows_a_live_session(ws: Workspace) -> None:
    from ctxnb.strategies.builtin import ObservationMasking
    from ctxnb.widgets import ReplayView

    s = ws.session("live", rules=False)
    view = ReplayView.live(["keep-all", "masking"])
    strategies = {"keep-all": KeepAll(), "masking": ObservationMasking(1)}
    for n in range(4):
        s.record_toolcall("run_tests", {"n": n}, "line\n" * 50)
        view.add_step({k: s.assemble(v, record=False) for k, v in strategies.items()}, tool="t")
    assert view.steps == [0, 1, 2, 3] and view.step == 3
    states = [i.state for i in view.items_at("masking", 3)]
    assert states.count("masked") == 3 and states.count("in full") == 1
    assert view.series["keep-all"].cache_read[3] > 0  # the prompt grew at its end
    assert "masked</span>" in view.detail.value


# -- ExperimentView ----------------------------------------------------------------------------
def test_experiment_view_table_and_plots() -> None:
    import base64
    import io
    from concurrent.futures import ThreadPoolExecutor

    from matplotlib.image import imread

    from ctxnb.replay.analysis import summarize
    from ctxnb.replay.experiment import run_experiment
    from ctxnb.strategies.builtin import MetadataOnly
    from ctxnb.widgets import ExperimentView

    runs = sorted(RUN.parent.glob("*.traj.json"))[:2]
    with ThreadPoolExecutor(1) as pool:
        df = run_experiment(runs, [KeepAll(), MetadataOnly()], executor=pool, progress=False)
    view = ExperimentView(df)
    table = view.table.value
    assert table.count("<tr><th style") == 2 and "keep-all (baseline)" in table
    assert "<b>1.00×</b>" not in table  # metadata-only is the cheaper one: it is bold
    # Over both runs every figure shows its bootstrap interval, and the table says how.
    s = view.summary
    lo, hi, v = (
        s.loc["metadata-only", c] for c in ("tokens_rel_lo", "tokens_rel_hi", "tokens_rel")
    )
    assert f"{v:.2f}× [{lo:.2f}×–{hi:.2f}×]" in table
    total = s.loc["keep-all", ["total_tokens", "total_tokens_lo", "total_tokens_hi"]]
    assert "{:,.0f} [{:,.0f}–{:,.0f}]".format(*total) in table
    assert "95% interval: percentile bootstrap over runs" in table and "seed 0" in table
    for png in (view.tokens_plot.value, view.loss_plot.value):
        pixels = imread(io.BytesIO(png), format="png")
        assert pixels.std() > 0.01  # drawn, not blank
    first = (view.tokens_plot.value, view.loss_plot.value, view.table.value)
    everything = view.summary
    assert everything.equals(summarize(df))
    # The run picker chooses what the whole view shows: table, both plots, the summary.
    run = view.run.options[1]
    view.run.value = run
    assert view.tokens_plot.value != first[0]
    assert view.loss_plot.value != first[1]
    assert view.table.value != first[2] and f"run {run}" in view.table.value
    one = summarize(df[df["trajectory"] == run])
    assert view.summary.equals(one) and not one.equals(everything)
    assert f"{int(one.loc['keep-all', 'total_tokens']):,}" in view.table.value
    # One run has nothing to resample: values alone, no interval, no note.
    assert "[" not in view.table.value.split("<table")[1] and "interval" not in view.table.value
    view.run.value = view.run.options[0]
    assert view.summary.equals(everything) and view.table.value == first[2]
    html = view._repr_html_()
    assert html.count("data:image/png;base64,") == 2
    assert base64.b64decode(html.split("base64,")[1].split('"')[0])[:4] == b"\x89PNG"


def test_trace_view_shows_no_nan_one_line_times_and_one_page_number(tmp_path: Path) -> None:
    """A record without a file (a command that changed nothing) has missing values in
    several columns: no view of it says ``nan``; times are to the second in UTC and do
    not wrap; the page box and the status line number pages the same way."""
    df = _trace_frame(tmp_path, n=3)
    bare = df.iloc[[0]].copy()
    for col in ("file", "start_line", "end_line", "contributor_type", "model_id"):
        bare[col] = None
    bare["record_id"] = "run-command-record"
    bare["tool"] = "run_command"
    bare["timestamp"] = pd.Timestamp("2026-11-23 18:19:11.442", tz="UTC")
    kinds = {
        c: "category" if isinstance(t, pd.CategoricalDtype) else t for c, t in df.dtypes.items()
    }
    frame = pd.concat([df, bare], ignore_index=True).astype(kinds)
    assert isinstance(frame["file"].dtype, pd.CategoricalDtype)  # as load_trace gives it
    assert frame["file"].isna().sum() == 1 and frame["start_line"].isna().sum() == 1

    view = TraceView(frame)
    position = next(
        n for n, r in enumerate(view.page_frame.itertuples()) if r.record_id == "run-command-record"
    )
    view.select_row(position)
    labels = [label for label, _ in view.row.options]
    shown = [view.table.value, view.detail.value, view._repr_html_(), *labels]
    for text in shown:
        assert "nan" not in text.lower().replace("nanos", ""), text
        assert "NaT" not in text and "None" not in text and "<NA>" not in text, text
    label = labels[position]
    assert label == f"#{position} 2026-11-23 18:19:11 INT-0 run_command", label
    cell = '<td style="white-space:nowrap">2026-11-23 18:19:11</td>'
    assert cell in view.table.value and cell in view._repr_html_()
    assert ".442" not in view.table.value and "+00:00" not in view.table.value
    assert any(x.endswith(" L1-2") for x in labels) and not any(".0" in x for x in labels)
    # One page: the box says 1 and the status "of 1 page"; nothing says page 0.
    assert (view.page.value, view.page.min, view.page.max) == (1, 1, 1)
    assert "of 1 page ·" in view.status.value and "page 0" not in view.status.value.lower()
    view.next_button.click()
    assert view.page.value == 1


def test_approval_panel_shows_the_diff_coloured_the_risk_and_a_countdown() -> None:
    from datetime import timedelta

    q = QueueApprover(timeout=30)
    diff = "--- a/build/x.js\n+++ /dev/null\n@@ -1 +0,0 @@\n-</pre><script>alert(1)</script>\n"
    req = ApprovalRequest.new(
        "run_command", {"cmd": "rm -rf build", "diff": diff}, "deletes build/x.js"
    )
    now = [req.created_at + timedelta(seconds=5)]
    panel = ApprovalPanel(q, by="ana", clock=lambda: now[0])
    fut = run_in_background(q.request, req)
    assert panel.wait_for_pending(timeout=10)
    # The list names the act without the diff (no escaped "\n" of a repr).
    ((label, _),) = panel.requests.options
    assert "diff=" not in label and "\\n" not in label and "rm -rf build" in label
    detail = panel.detail.value
    # A unified diff, line by line, the removed line on red; the agent's markup escaped.
    assert '<pre class="ctxnb-diff"' in detail
    assert '<span style="background:#ffebe9">-&lt;/pre&gt;&lt;script&gt;' in detail
    assert "<script>" not in detail and "&quot;diff&quot;" not in detail
    assert 'data-risk="DESTRUCTIVE" style="background:#cf222e' in detail
    # The countdown: 25 s of 30 left, grey; red in the last ten seconds.
    assert 'data-seconds="25"' in panel.countdown.value and "#57606a" in panel.countdown.value
    now[0] = req.created_at + timedelta(seconds=24)
    panel.refresh()
    assert 'data-seconds="6"' in panel.countdown.value and "#cf222e" in panel.countdown.value
    panel.reject_button.click()
    assert fut.result(timeout=10).approved is False
    assert panel.countdown.value == "" and panel.detail.value == ""


def test_approval_panel_risk_colours_and_no_countdown_without_a_timeout() -> None:
    q = QueueApprover(timeout=None)
    panel = ApprovalPanel(q, by="ana")
    fut = run_in_background(
        q.request, ApprovalRequest.new("write_file", {"path": "a"}, "asks", risk="REVIEW")
    )
    assert panel.wait_for_pending(timeout=10)
    assert 'data-risk="REVIEW" style="background:#9a6700' in panel.detail.value
    assert panel.countdown.value == ""  # it waits for a human, however long
    panel.approve()
    assert fut.result(timeout=10).approved is True


def test_trace_view_shows_the_human_decision_and_names_records_without_a_file(
    tmp_path: Path,
) -> None:
    """A human's answer to an approval question is a record with no file (the engine's
    event record): the view shows who approved or rejected in its own column, on that
    record and in its detail, and the "by file" summary counts it under "(no file)"
    instead of a blank row."""
    import re

    from ctxnb.govern.ledger import build_event_record

    _trace_frame(tmp_path, n=4)  # four edits, each with a file
    ledger = TraceLedger(tmp_path / "agent_trace.jsonl", validate=False)
    q = QueueApprover(timeout=30)
    for approve, cmd in ((True, "rm -rf build"), (False, "rm -rf src")):
        req = ApprovalRequest.new("run_command", {"cmd": cmd}, "deletes files", intent_id="INT-1")
        fut = run_in_background(q.request, req)
        panel = ApprovalPanel(q, by="ana")
        assert panel.wait_for_pending(timeout=10)
        (panel.approve_button if approve else panel.reject_button).click()
        decision = fut.result(timeout=10)
        meta = {"intent_id": "INT-1", "tool": "run_command", "approval": decision.to_dict()}
        ledger.append(build_event_record(metadata=meta, repo_root=None))
    df = load_trace(ledger)
    assert df["approval"].astype(object).tolist()[-2:] == ["approved by ana", "rejected by ana"]
    assert df["approval"].isna().sum() == len(df) - 2  # nobody was asked about the edits

    view = TraceView(df)
    assert "approval" in view.columns
    assert ">approved by ana</td>" in view.table.value
    assert ">rejected by ana</td>" in view.table.value
    view.filter(sort_by="timestamp", descending=True)
    view.select_row(0)  # the latest: the rejection
    assert "rejected by ana" in view.detail.value

    summary = view.summary.value
    by_file = summary.split("<b>by file</b>", 1)[1]
    names = re.findall(r'<tr data-row="\d+"><td[^>]*>([^<]*)</td>', by_file)
    assert "(no file)" in names and all(n.strip() for n in names), names
    row = re.search(r"<td[^>]*>\(no file\)</td><td[^>]*>(\d+)</td>", by_file)
    assert row is not None and row.group(1) == "2", by_file


def test_replay_view_names_the_step_once_and_unparsed_calls_by_their_step(
    replay_view: Any,
) -> None:
    """The caption says the run's step number and the range it is in, not a second
    count from 1 beside it ("step 14 (15 of 22)"); the slider shows no number of its own.
    Step 10 of the vendored run is unparsed (two bash blocks): its call is "unknown()" in
    the context, and the view names it by its step and the converter's reason."""
    import re

    from ctxnb.replay import load

    replay_view.left.value, replay_view.right.value = "keep-all", "observation-masking"
    replay_view.show(14)
    caption = re.search(r"<b>step 14</b>[^·<]*<small>[^<]*</small>", replay_view.detail.value)
    n = len(replay_view.steps)
    assert caption is not None and f"(steps 0–{n - 1})" in caption.group(0), caption
    assert "15 of" not in replay_view.detail.value and not replay_view.slider.readout

    [unparsed] = [s for s in load(RUN).steps if not s.parsed]
    labels = {i.label for items in replay_view.items.values() for i in items}
    labels |= {c.label for changes in replay_view.changes.values() for c in changes}
    assert not any(label.startswith("unknown(") for label in labels), labels
    named = f"step {unparsed.index}, not parsed: {unparsed.note}"
    later = {i.label: i.state for i in replay_view.items_at("observation-masking", 15)}
    assert later.get(named) == "masked", sorted(later)
    assert named in replay_view.detail.value.replace("&#x27;", "'")
    masked = {c.label for c in replay_view.changes_at("observation-masking", 15)}
    assert named in masked


def test_replay_view_charts_have_axes(replay_view: Any) -> None:
    """Every chart has a y axis (its top in tokens, 0 at the bottom) and the bars share
    an x axis of step numbers, first and last included; the step marker keeps the axis'
    gutter so that it stays above its bar."""
    import re

    replay_view.left.value, replay_view.right.value = "keep-all", "recency-window"
    chart = replay_view.chart.value
    top = max(max(replay_view.series[s].total) for s in ("keep-all", "recency-window"))
    y = re.findall(r'class="ctxnb-y-axis"[^>]*><span>([^<]+)</span><span>0</span>', chart)
    assert len(y) == chart.count("<svg") == 4, y
    want = f"{top / 1000:.1f}".removesuffix(".0") + "k" if top >= 1000 else str(top)
    assert set(y) == {want}, (y, top)
    x = chart.split('class="ctxnb-x-axis"', 1)[1]
    ticks = [int(t) for t in re.findall(r"translateX\(-50%\)\">(\d+)</span>", x)]
    steps = replay_view.steps
    assert ticks[0] == steps[0] and ticks[-1] == steps[-1] and ticks == sorted(ticks), ticks
    assert ">step</div>" in x
    assert "margin:0 0 4px 4.5em" in replay_view.detail.value


def _side_by_side_rows(html: str) -> list[tuple[str, str, str, str]]:
    """The four cells of each paired row: old number, old text, new number, new text."""
    import html as html_mod
    import re

    out = []
    for row in re.findall(r"<tr>(.*?)</tr>", html):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        if len(cells) == 4:
            out.append(tuple(html_mod.unescape(c) for c in cells))
    return out  # type: ignore[return-value]


def test_approval_panel_shows_a_long_diff_side_by_side() -> None:
    """A toggle draws the diff side by side: every old line left at its own number,
    every new line right at its own, a changed line beside its replacement; a removed
    line that looks like a file header ("--- ...") stays a line of the hunk; back to
    unified, the coloured one-column diff returns. A request without a diff hides the
    toggle."""
    import difflib

    old = [f"value_{i} = {i}" for i in range(1, 301)]
    new = list(old)
    new[99] = "value_100 = 'changed'"  # line 100, replaced
    new[199:201] = []  # lines 200 and 201 removed
    new.insert(250, "<script>alert(1)</script>")  # an added line that is markup
    old[149] = "-- x"  # removed below: its diff line reads "--- x"
    new[149] = "kept"
    diff = "\n".join(difflib.unified_diff(old, new, "a/f.py", "b/f.py", lineterm="")) + "\n"
    assert "\n--- x\n" in diff

    q = QueueApprover(timeout=30)
    panel = ApprovalPanel(q, by="ana")
    req = ApprovalRequest.new(
        "run_command", {"cmd": "python rewrite.py", "diff": diff}, "rewrites f.py"
    )
    fut = run_in_background(q.request, req)
    assert panel.wait_for_pending(timeout=10)
    assert panel.diff_layout.layout.display is None  # shown: there is a diff
    assert 'class="ctxnb-diff"' in panel.detail.value and "ctxnb-diff-sbs" not in panel.detail.value

    panel.diff_layout.value = "side-by-side"
    shown = panel.detail.value
    assert "ctxnb-diff-sbs" in shown and 'class="ctxnb-diff"' not in shown
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    rows = _side_by_side_rows(shown)
    left = [(int(a), b) for a, b, _, _ in rows if a]
    right = [(int(c), d) for _, _, c, d in rows if c]
    assert left and all(old[n - 1] == text for n, text in left), left
    assert right and all(new[n - 1] == text for n, text in right), right
    assert [n for n, _ in left] == sorted({n for n, _ in left})  # each once, in order
    assert ("100", "value_100 = 100", "100", "value_100 = 'changed'") in rows
    assert ("150", "-- x", "150", "kept") in rows
    assert ("200", "value_200 = 200", "", "") in rows  # removed: blank on the right
    assert any(d == "<script>alert(1)</script>" and a == "" for a, _, _, d in rows)
    # Every -/+ line of the unified diff is in the side-by-side view, nothing more.
    minus = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and ln != "--- a/f.py"]
    plus = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and ln != "+++ b/f.py"]
    assert [b for a, b, c, d in rows if a and b != d] == minus
    assert [d for a, b, c, d in rows if c and b != d] == plus

    panel.diff_layout.value = "unified"
    assert 'class="ctxnb-diff"' in panel.detail.value
    panel.approve_button.click()
    assert fut.result(timeout=10).approved

    other = run_in_background(q.request, ApprovalRequest.new("delete_file", {"path": "x"}, "x"))
    assert panel.wait_for_pending(timeout=10)
    panel.requests.value = panel.requests.options[0][1]  # picked: the one decided is gone
    assert panel.diff_layout.layout.display == "none"  # nothing to lay out
    panel.reject_button.click()
    assert not other.result(timeout=10).approved
