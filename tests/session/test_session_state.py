"""A session *has* its state (ctxnb/session/state.py): what it saves is what a resume holds.

The resume is handed a :class:`SessionState`, never the session, so a field the state
holds but the resume forgets would come back empty without any error: these tests drive
sessions through random histories, save and reopen them, and compare every saved field
of the two states, then the prompt each assembles.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from _data import age_files
from _paths import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxnb import Workspace
from ctxnb.context import MetaEntry
from ctxnb.session import Session, SessionState
from ctxnb.session._cold import cold_path
from ctxnb.strategies.builtin import KeepAll

FILES = ("README.md", "inventory/models.py", "inventory/store.py", "web/app.js", "db/schema.sql")

_OPS = st.one_of(
    st.tuples(
        st.sampled_from(["add", "activate", "deactivate", "pin", "unpin", "copy"]),
        st.integers(0, len(FILES) - 1),
    ),
    st.tuples(
        st.sampled_from(["call", "hidden call", "turn", "assemble", "edit", "prompt"]),
        st.integers(0, 9),
    ),
)


def _saved(state: SessionState) -> dict[str, Any]:
    """The fields of a state that a saved session document carries."""
    return {
        "index": list(state.index),
        "pool": list(state.pool),
        # Active items in reading order, and where each entered among the turns.
        "active": sorted(state.active, key=lambda o: state.seq.get(o, 0)),
        "entered": {o: state.entered.get(o, 0) for o in state.active},
        "pinned": list(state.pinned),
        "turns": list(state.turns),
        "toolcall_refs": list(state.toolcall_refs),
        "chat_id": state.chat_id,
        "system_prompt": (state.system_prompt_id, state.system_prompt),
        "restores": list(state.restores),
        "meta_log": list(state.meta_log),
        "orphaned": set(state.orphaned),
        "meta": {o: state.meta[o] for o in state.index},
    }


def _apply(s: Session, root: Path, op: tuple[str, int]) -> None:
    name, n = op
    oid = s.find(FILES[n % len(FILES)])
    if name == "add":
        s.add_path(FILES[n])
    elif name in ("activate", "deactivate", "pin", "unpin", "copy") and oid is not None:
        if name == "copy":
            s.set_active_copy(oid, f"# an unsaved buffer {n}\n")
        else:
            getattr(s, name)(oid)
    elif name in ("call", "hidden call"):
        s.record_toolcall("run", {"cmd": f"step {n}"}, f"ok {n}\n", hidden=name != "call")
    elif name == "turn":
        s.add_turn("user" if n % 2 else "assistant", f"turn {n}")
    elif name == "assemble":
        s.assemble(KeepAll())
    elif name == "edit":
        # Written, then read through the access layer: a new version the session holds.
        (root / FILES[n % len(FILES)]).write_text(f"# edited {n}\n")
        s.add_path(FILES[n % len(FILES)], activate=False)
    elif name == "prompt":
        s.set_system_prompt(f"prompt {n}")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_OPS, max_size=14))
def test_a_resumed_session_holds_every_field_it_saved(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "w"
        shutil.copytree(REPO / "data" / "sample_workspace", root)
        ws = Workspace.open(root)
        s = ws.session("held", rules=False, system_prompt="first")
        for op in ops:
            _apply(s, root, op)
        s.save()
        again = Workspace.open(root).session("held", rules=False)
        saved, resumed = _saved(s.state), _saved(again.state)
        for key in saved:
            assert resumed[key] == saved[key], key
        assert again.last_resume is not None
        assert (again.last_resume.updated, again.last_resume.deleted) == ([], [])
        # An active copy is the client's, not the store's: it is not saved (the client
        # registers it again), so only without one is the prompt the same.
        if not any(name == "copy" for name, _ in ops):
            one = s.assemble(KeepAll(), record=False)
            assert again.assemble(KeepAll(), record=False).to_text() == one.to_text()
        # Out of the racy window, a full resume leaves the file a new process resumes
        # from without the store (ctxnb/session/_cold.py): it must hold the same state.
        age_files(root)
        Workspace.open(root).session("held", rules=False)  # hashes what aging changed
        cold_path(root, "held").unlink(missing_ok=True)  # the next one runs in full
        ws = Workspace.open(root)
        full = ws.session("held", rules=False)
        assert ws.store_is_open
        ws = Workspace.open(root)
        cold = ws.session("held", rules=False)
        assert not ws.store_is_open, "the cold resume was not taken"
        assert cold.last_resume == full.last_resume
        assert _saved(cold.state) == _saved(full.state)
        for name in ("seq", "last_used", "tick", "last_context"):
            assert getattr(cold.state, name) == getattr(full.state, name), name
        assert {o: cold._doc(o) for o in cold.session_index} == {
            o: full._doc(o) for o in full.session_index
        }
        one = full.assemble(KeepAll(), record=False)
        assert cold.assemble(KeepAll(), record=False).to_text() == one.to_text()


def test_a_resumed_session_continues_the_same_prompt(sample_ws: Path) -> None:
    ws = Workspace.open(sample_ws)
    s = ws.session("cont", rules=False)
    a, b = s.add_path("README.md"), s.add_path("inventory/models.py")
    s.record_toolcall("run", {"cmd": "ls"}, "README.md\n", file_refs=[a])
    s.add_turn("user", "go")
    s.pin(b)
    s.assemble(KeepAll())
    s.save()
    again = ws.session("cont", rules=False)
    assert again.state is not s.state
    one = s.assemble(KeepAll(), record=False)
    two = again.assemble(KeepAll(), record=False)
    assert two.to_text() == one.to_text() and two.hash == one.hash


def test_the_state_marks_every_change_the_prompt_may_show() -> None:
    marked: list[str] = []
    state = SessionState(mark=marked.append)
    state.set_meta("a", MetaEntry("a", "file"))
    assert marked == ["a"] and "a" not in state.orphaned
    state.set_orphaned("a", True)
    assert state.orphaned == {"a"} and state.meta["a"].orphaned and marked == ["a", "a"]
    state.set_orphaned("a", True)  # no change: nothing to redraw
    assert marked == ["a", "a"]
    state.set_orphaned("a", False)
    assert state.orphaned == set() and marked == ["a", "a", "a"]


def test_a_changed_version_of_an_active_item_moves_after_everything_read() -> None:
    state = SessionState(mark=lambda oid: None)
    for oid in ("a", "b"):
        state.add_to_index(oid)
        state.active[oid] = None
        state.install(oid, {"xt/id": oid, "content_hash": f"{oid}1"})
        state.move_to_end(oid)
    state.turns.append({"role": "user", "content": "next"})
    before = dict(state.seq)
    state.install("a", {"xt/id": "a", "content_hash": "a1"})  # the same version
    assert state.seq == before
    state.install("a", {"xt/id": "a", "content_hash": "a2"})  # a new version
    assert state.seq["a"] > state.seq["b"] and state.entered["a"] == 1
    # An item shown from a client's active copy keeps its place: its text did not change.
    state.overlays["b"] = "buffer"
    state.install("b", {"xt/id": "b", "content_hash": "b2"})
    assert state.seq["b"] < state.seq["a"] and state.entered["b"] == 0
    # Membership is a set beside the append-only lists, and the lists never repeat.
    assert [state.add_to_index("a"), state.add_to_pool("a"), state.add_to_pool("a")] == [
        False,
        True,
        False,
    ]
    assert state.index == ["a", "b"] and state.pool == ["a"] and state.in_index("b")
