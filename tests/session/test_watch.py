import time

import pytest
from watchfiles import Change

from ctxnb import Workspace
from ctxnb.session.watch import Watcher


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def session(sample_ws):
    return Workspace.open(sample_ws).session("w")


def test_scripted_edit_and_delete(session, sample_ws):
    a = session.add_path("inventory/models.py")
    b = session.add_path("README.md")
    (sample_ws / "inventory" / "models.py").write_text("# new\n")
    (sample_ws / "README.md").unlink()
    seen = []
    session.on_change(lambda oid, action: seen.append((oid, action)))
    events = [
        {(Change.modified, str(sample_ws / "inventory" / "models.py"))},
        {(Change.deleted, str(sample_ws / "README.md"))},
        {(Change.modified, str(sample_ws / "untracked.txt"))},
    ]
    with Watcher(session, backend=lambda dirs, stop: iter(events)) as w:
        w.join(10)
    assert session.get(a)["content"] == "# new\n"
    assert session.metadata(b).deleted
    assert seen == [(a, "updated"), (b, "deleted")]
    assert [v.doc["content"] is None for v in session.store.history(b)] == [False, True]


def test_scripted_error_keeps_watching(session, sample_ws):
    a = session.add_path("web/app.js")
    (sample_ws / "web" / "app.js").write_text("// v2\n")
    errors = []
    calls = {"n": 0}
    real_refresh = session.refresh

    def flaky(oid):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real_refresh(oid)

    session.refresh = flaky
    events = [{(Change.modified, str(sample_ws / "web" / "app.js"))}] * 1
    (sample_ws / "web" / "app.js").write_text("// v3\n")
    w = Watcher(
        session,
        backend=lambda d, s: iter(
            events + [{(Change.modified, str(sample_ws / "web" / "app.js"))}]
        ),
        on_error=errors.append,
    )
    (sample_ws / "web" / "app.js").write_text("// v3\n")
    w.start()
    w.join(10)
    assert len(errors) == 1 and "boom" in str(errors[0])
    _ = a


def test_real_watcher_sees_edit_and_delete(session, sample_ws):
    a = session.add_path("inventory/report.py")
    b = session.add_path("db/schema.sql")
    w = session.watch()
    try:
        assert wait_for(lambda: w.running and w._dirs)
        time.sleep(0.2)  # let the OS watch settle
        (sample_ws / "inventory" / "report.py").write_text("# changed on disk\n")
        assert wait_for(lambda: session.get(a)["content"] == "# changed on disk\n")
        (sample_ws / "db" / "schema.sql").unlink()
        assert wait_for(lambda: session.metadata(b).deleted)
    finally:
        session.close()
    assert not w.running


def test_container_internal_paths_are_not_watched(sample_ws):
    from ctxnb.resolver import MountMapping, default_filesystem_id

    ws = Workspace.open(
        sample_ws,
        mounts=[
            MountMapping(
                "/workspace/inventory", str(sample_ws / "inventory"), default_filesystem_id()
            )
        ],
    )
    s = ws.session("cw")
    s.add_path("inventory/models.py")
    s.add_path("README.md")  # not under the mount: container-internal from the agent's view
    paths = s.watchable_paths()
    assert paths == [str(sample_ws / "inventory" / "models.py")]


def test_scripted_new_directory_is_followed_and_caught_up(session, sample_ws):
    # The session gains a file in a directory made after the watcher started; what was
    # written there before the watcher got to it is stored when it does.
    session.add_path("README.md")
    calls = []

    def backend(dirs, stop):
        calls.append(list(dirs))
        if len(calls) == 1:
            (sample_ws / "later").mkdir()
            (sample_ws / "later" / "n.py").write_text("x = 1\n")
            calls.append(session.add_path("later/n.py"))
            (sample_ws / "later" / "n.py").write_text("x = 2\n")  # before it is watched
            return iter([set()])  # a timeout batch: no change seen
        return iter([])

    with Watcher(session, backend=backend) as w:
        w.join(10)
    oid = calls[1]
    assert str(sample_ws / "later") in calls[2]
    assert session.get(oid)["content"] == "x = 2\n"


def test_real_watcher_follows_directories_created_after_start(session, sample_ws):
    session.add_path("README.md")
    with session.watch(debounce_ms=20, step_ms=5) as w:
        (sample_ws / "newdir").mkdir()
        (sample_ws / "newdir" / "n.py").write_text("x = 1\n")
        oid = session.add_path("newdir/n.py")
        assert wait_for(lambda: str(sample_ws / "newdir") in w._dirs)
        (sample_ws / "newdir" / "n.py").write_text("x = 2\n")
        assert wait_for(lambda: session.get(oid)["content"] == "x = 2\n")
        # A directory removed and made again is followed too.
        (sample_ws / "newdir" / "n.py").unlink()
        (sample_ws / "newdir").rmdir()
        assert wait_for(lambda: session.metadata(oid).deleted)
        (sample_ws / "newdir").mkdir()
        (sample_ws / "newdir" / "n.py").write_text("x = 3\n")
        assert wait_for(lambda: session.get(oid)["content"] == "x = 3\n")
    assert not w.errors


def test_real_watcher_follows_a_directory_made_again_at_once(session, sample_ws):
    # Removed and made again before the watcher looks: the same name, another directory,
    # which the old watch never sees. Its identity (device, inode) tells them apart.
    with session.watch(debounce_ms=20, step_ms=5) as w:
        (sample_ws / "again").mkdir()
        (sample_ws / "again" / "n.py").write_text("x = 1\n")
        oid = session.add_path("again/n.py")
        assert wait_for(lambda: str(sample_ws / "again") in w._dirs)
        (sample_ws / "again" / "n.py").unlink()
        (sample_ws / "again").rmdir()
        (sample_ws / "again").mkdir()
        (sample_ws / "again" / "n.py").write_text("x = 2\n")
        assert wait_for(lambda: session.get(oid)["content"] == "x = 2\n")
        (sample_ws / "again" / "n.py").write_text("x = 3\n")
        assert wait_for(lambda: session.get(oid)["content"] == "x = 3\n")
