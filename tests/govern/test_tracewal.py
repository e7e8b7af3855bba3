"""A governed write's trace record, committed in its store transaction's log line.

Attacks the guarantees of ctxnb/govern/tracewal.py: three things durable per write,
not four; a ledger line lost after the call returned (page cache, kill -9 between the
two writes) is restored exactly once with a valid chain; a hostile record in the log
injects nothing; a rotation never drops an unrestored record; two processes writing at
once keep the ledger whole.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _tracewal_setup import fail_log_fsync, governed, ledger_path, logged_version, tools_of

from ctxnb import Workspace
from ctxnb._util import fsync as _fsync
from ctxnb.errors import StoreError
from ctxnb.govern import tracewal
from ctxnb.govern.ledger import TraceLedger, build_trace_record
from ctxnb.govern.ledgercheck import verify_ledger
from ctxnb.govern.tracewal import attachment, restore
from ctxnb.store._attach import attached_lines


@pytest.fixture
def gov(git_repo: Path) -> Path:
    return governed(git_repo)


_tools, _ledger_path = tools_of, ledger_path


def _records(root: Path) -> list[dict]:
    return list(TraceLedger(_ledger_path(root)).records())


def _ids(root: Path) -> list[str]:
    return [r["id"] for r in _records(root)]


def _logged(root: Path) -> list[tuple[int, dict]]:
    """(tx, attachment) of every attachment in the store's log."""
    return [(ln.tx, a) for ln in attached_lines(root / ".ctxnb" / "store") for a in ln.attached]


def _ctxnb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", *args], capture_output=True, text=True, timeout=120
    )


def test_a_governed_write_fsyncs_its_data_its_rename_and_one_log_line_not_the_ledger(
    gov: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 0\n").success
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    real_aio = _fsync._aio_fsync

    def aio_fsync(fd: int) -> object:
        # An fsync queued on glibc's AIO thread (see ctxnb._util.fsync) is an fsync too.
        path = os.readlink(f"/proc/self/fd/{fd}")
        wait = real_aio(fd)
        if wait is not None:  # else os.fsync runs it, on a thread
            synced.append(path)
        return wait

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(_fsync, "_aio_fsync", aio_fsync)
    result = tools.write_file("inventory/a.py", "a = 1\nb = 2\n")
    monkeypatch.undo()
    assert result.success
    store_log = str((gov / ".ctxnb" / "store" / "txlog").resolve())
    assert store_log in synced
    assert str(_ledger_path(gov).resolve()) not in synced
    # The data (its temporary file), the rename (the directory) and the log line.
    assert len(synced) == 3, synced
    # The log line carries the record the ledger shows, bound to the version written.
    tx, att = _logged(gov)[-1]
    last = _records(gov)[-1]
    assert att["record"]["id"] == last["id"]
    assert f"{att['oid']}@{tx}" == result.version_id == last["metadata"]["version_id"]
    assert last["files"][0]["path"] == "inventory/a.py"
    assert verify_ledger(_ledger_path(gov)).ok
    ws.close()


def test_a_ledger_line_lost_with_the_page_cache_is_restored_once_by_trace_verify(
    gov: Path,
) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 1\n").success
    size_before = _ledger_path(gov).stat().st_size
    assert tools.write_file("inventory/a.py", "a = 2\n").success
    ws.close()
    lost = _ids(gov)[-1]
    # A power loss took the second line (the head file, written after it, survived).
    os.truncate(_ledger_path(gov), size_before)
    assert lost not in _ids(gov)
    assert not verify_ledger(_ledger_path(gov)).ok

    first = _ctxnb("trace", "verify", str(gov))
    assert first.returncode == 0, first.stderr
    assert "restored 1 record(s)" in first.stdout
    assert _ids(gov).count(lost) == 1
    again = _ctxnb("trace", "verify", str(gov))
    assert again.returncode == 0 and "restored" not in again.stdout
    assert _ids(gov).count(lost) == 1
    assert verify_ledger(_ledger_path(gov)).ok
    restored = _records(gov)[-1]
    assert restored["metadata"]["version_id"].endswith(f"@{_logged(gov)[-1][0]}")


def test_the_ledger_line_waits_for_the_log_line_and_a_failed_one_is_restored(
    gov: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 1\n").success
    order: list[str] = []
    alphabet = string.ascii_letters + string.digits
    token = "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))  # generated
    real_aio = _fsync._aio_fsync

    def aio_fsync(fd: int) -> object:
        wait = real_aio(fd)
        if wait is None:
            return None

        def traced() -> None:
            wait()
            order.append(os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1])

        return traced

    def failing_append(*args: object, **kwargs: object) -> None:
        order.append("ledger")
        # The cause may quote anything (a path, a line): the log shows it redacted.
        raise OSError(28, f"No space left on device (token={token})")

    monkeypatch.setattr(_fsync, "_aio_fsync", aio_fsync)
    monkeypatch.setattr(tracewal, "append_logged", failing_append)
    with caplog.at_level("WARNING", logger="ctxnb.govern"):
        result = tools.write_file("inventory/a.py", "a = 2\n")
    monkeypatch.undo()
    # The write stands (it and its record are durable in the log) and says so.
    assert result.success, result.message
    assert (gov / "inventory" / "a.py").read_text() == "a = 2\n"
    # The ledger line was attempted only once the log line's fsync was done.
    assert "txlog" in order and order.index("txlog") < order.index("ledger"), order
    assert "ctxnb trace verify" in caplog.text
    assert "No space left" in caplog.text and token not in caplog.text
    lost = _logged(gov)[-1][1]["record"]["id"]
    assert lost not in _ids(gov)
    ws.close()
    assert restore(gov / ".ctxnb" / "store", TraceLedger(_ledger_path(gov))) == [lost]
    assert _ids(gov).count(lost) == 1
    assert verify_ledger(_ledger_path(gov)).ok


def test_no_ledger_line_names_a_version_whose_log_fsync_failed(
    gov: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 1\n").success
    before = _ids(gov)
    fail_log_fsync(monkeypatch)
    with pytest.raises(StoreError, match="durable"):
        tools.write_file("inventory/a.py", "a = 2\n")
    monkeypatch.undo()
    # The failure is the caller's to see, and the ledger says nothing of that version.
    assert _ids(gov) == before
    assert verify_ledger(_ledger_path(gov)).ok
    # Nor did the file change: the rename waits for the log's fsync; and the store's
    # latest version is the file's again (the unknown one is followed by it).
    assert (gov / "inventory" / "a.py").read_text() == "a = 1\n"
    assert ws.store.get(ws.object_id("inventory/a.py"))["content"] == "a = 1\n"
    ws.close()


_KILLED_WRITER = """
import os, signal, sys
from ctxnb import Workspace
from ctxnb.govern.ledger import TraceLedger

ws = Workspace.open(sys.argv[1])
tools = ws.tools(ws.session("agent-9"), caller="test-agent")
tools.engine.select_active_intent("INT-001")

def killed(self, fd, prepared):
    os.kill(os.getpid(), signal.SIGKILL)  # after the store commit, before the ledger line

TraceLedger.write_locked = killed
tools.write_file("inventory/killed.py", "k = 1\\n")
"""


def test_sigkill_between_the_store_commit_and_the_ledger_line_is_restored_by_the_next_writer(
    gov: Path,
) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 1\n").success
    ws.close()
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(gov)], capture_output=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr
    tx, att = _logged(gov)[-1]
    lost = att["record"]["id"]
    assert att["record"]["files"][0]["path"] == "inventory/killed.py"
    assert lost not in _ids(gov)
    # The next writer (a new engine, here in this process) restores it first.
    ws, tools = _tools(gov, "agent-2")
    assert tools.write_file("inventory/b.py", "b = 1\n").success
    ws.close()
    ids = _ids(gov)
    assert ids.count(lost) == 1
    assert ids[-2] == lost  # restored before the new record, chained
    by_id = {r["id"]: r for r in _records(gov)}
    assert by_id[lost]["metadata"]["version_id"] == f"{att['oid']}@{tx}"
    assert verify_ledger(_ledger_path(gov)).ok
    assert restore(gov / ".ctxnb" / "store", TraceLedger(_ledger_path(gov))) == []


def _record(path: str = "inventory/a.py", **meta: object) -> dict:
    return build_trace_record(
        file_path=path,
        ranges=[(1, 1)],
        new_text="x = 1\n",
        intent_id="INT-001",
        session_id="s",
        model_id=None,
        repo_root=None,
        tool="write_file",
        extra_metadata=meta,
    )


def test_a_hostile_record_in_the_store_log_injects_nothing_the_recorder_would_not_write(
    gov: Path,
) -> None:
    ws = Workspace.open(gov)
    oid = ws.object_id("inventory/a.py")
    doc = {"xt/id": oid, "type": "file", "content": "x = 1\n"}
    alphabet = string.ascii_uppercase + string.digits
    key = "AKIA" + "".join(secrets.choice(alphabet) for _ in range(16))  # generated
    secret = _record(note=f"key {key}")
    forged_link = _record()
    forged_link["metadata"]["prev_hash"] = "sha256:" + "0" * 64
    forged_link["metadata"]["version_id"] = "someone-else@999"
    other_object = _record()
    invalid = _record()
    del invalid["files"]
    not_uuid = _record()
    not_uuid["id"] = "../../etc/passwd"
    attached = [
        attachment(secret, oid, 0),
        attachment(forged_link, oid, 0),
        attachment(other_object, "f" * 64, 0),  # names a version this tx did not write
        attachment(invalid, oid, 0),
        attachment(not_uuid, oid, 0),
        json.dumps({"kind": "something-else", "oid": oid, "at": 0, "record": _record()}).encode(),
        json.dumps({"kind": "agent-trace", "oid": oid, "at": -5, "record": _record()}).encode(),
    ]
    tx = ws.store.put([doc], attached=attached).tx_id
    ws.close()
    done = restore(gov / ".ctxnb" / "store", TraceLedger(_ledger_path(gov)))
    assert done == [secret["id"], forged_link["id"]]
    text = _ledger_path(gov).read_text()
    assert key not in text and "[REDACTED:" in text
    by_id = {r["id"]: r for r in _records(gov)}
    assert by_id[forged_link["id"]]["metadata"]["version_id"] == f"{oid}@{tx}"
    assert verify_ledger(_ledger_path(gov)).ok  # the forged link was replaced
    for rec in (other_object, invalid, not_uuid):
        assert rec["id"] not in by_id


def test_a_log_line_whose_checksum_fails_is_not_read_for_attachments(tmp_path: Path) -> None:
    from ctxnb.store import _log as tlog

    good = tlog.txdocs_line(1, 1, [b'{"xt/id":"a","type":"t"}'], [b'{"kind":"x"}'])
    bad = tlog.txdocs_line(2, 2, [b'{"xt/id":"b","type":"t"}'], [b'{"kind":"y"}'])
    bad = bad.replace(b'"kind":"y"', b'"kind":"z"')  # changed after it was sealed
    cut = tlog.txdocs_line(3, 3, [b'{"xt/id":"c","type":"t"}'], [b'{"kind":"w"}'])[:-5]
    (tmp_path / "txlog").write_bytes(good + bad + cut)
    lines = attached_lines(tmp_path)
    assert [(ln.tx, ln.attached, set(ln.doc_ids)) for ln in lines] == [(1, [{"kind": "x"}], {"a"})]


def test_compaction_restores_what_the_ledger_lost_before_it_rotates_the_log(gov: Path) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 1\n").success
    size_before = _ledger_path(gov).stat().st_size
    assert tools.write_file("inventory/a.py", "a = 2\n").success
    lost = _ids(gov)[-1]
    os.truncate(_ledger_path(gov), size_before)
    ws.store.compact()
    ws.close()
    store_log = (gov / ".ctxnb" / "store" / "txlog").read_bytes()
    assert store_log.startswith(b'{"op":"base"')  # rotated: the attachments are gone
    assert _logged(gov) == []
    assert _ids(gov).count(lost) == 1
    assert verify_ledger(_ledger_path(gov)).ok


_STORE_ONLY_COMPACTION = """
import sys
from ctxnb.store.objectstore import ObjectStore

store = ObjectStore(sys.argv[1])
store.compact()
store.close()
assert "ctxnb.govern.tracewal" not in sys.modules, "the store imported the ledger"
"""


def test_a_process_that_cannot_settle_the_attachments_keeps_the_log_whole(gov: Path) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/a.py", "a = 1\n").success
    ws.close()
    size_before = _ledger_path(gov).stat().st_size
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/b.py", "b = 2\n").success
    ws.close()
    lost = _ids(gov)[-1]
    os.truncate(_ledger_path(gov), size_before)
    store_dir = gov / ".ctxnb" / "store"
    proc = subprocess.run(
        [sys.executable, "-c", _STORE_ONLY_COMPACTION, str(store_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # Compacted (a snapshot) but not rotated: the lost record is still in the log.
    assert not (store_dir / "txlog").read_bytes().startswith(b'{"op":"base"')
    assert lost in [a["record"]["id"] for _, a in _logged(gov)]
    assert lost not in _ids(gov)
    first = _ctxnb("trace", "verify", str(gov))
    assert first.returncode == 0, first.stderr
    assert _ids(gov).count(lost) == 1


_WRITER = """
import sys
from ctxnb import Workspace

ws = Workspace.open(sys.argv[1])
tools = ws.tools(ws.session("agent-" + sys.argv[2]), caller="test-agent")
tools.engine.select_active_intent("INT-001")
for i in range(int(sys.argv[3])):
    assert tools.write_file(f"inventory/w{sys.argv[2]}.py", f"v = {i}\\n").success
ws.close()
"""


def test_two_processes_writing_at_once_keep_the_ledger_whole(gov: Path) -> None:
    n = 12
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(gov), tag, str(n)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("1", "2")
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    ids = _ids(gov)
    assert len(ids) == len(set(ids)) == 2 * n
    logged = [a["record"]["id"] for _, a in _logged(gov)]
    assert sorted(logged) == sorted(ids)
    assert verify_ledger(_ledger_path(gov)).ok
    assert restore(gov / ".ctxnb" / "store", TraceLedger(_ledger_path(gov))) == []


def test_a_record_a_recoverer_restored_first_is_not_appended_again(gov: Path) -> None:

    ws, rec, pending, obs = logged_version(gov, "inventory/a.py", "a = 1\n")
    assert obs.doc is not None
    # Another process's recoverer runs between the commit and this writer's line.
    assert restore(ws.store.path, rec.ledger) == [pending.recorded.trace_id]
    done = rec.finish_logged(pending, obs.tx_id)
    ws.close()
    assert _ids(gov) == [done.trace_id]
    assert done.version_id == obs.version_id
    assert verify_ledger(_ledger_path(gov)).ok


def test_a_write_that_stores_no_new_version_is_traced_as_before(gov: Path) -> None:
    ws, tools = _tools(gov)
    text = (gov / "inventory" / "models.py").read_text()
    tools.read_file("inventory/models.py")
    before = len(_logged(gov))
    assert tools.write_file("inventory/models.py", text).success  # the same bytes
    ws.close()
    assert len(_logged(gov)) == before  # no transaction, nothing attached
    last = _records(gov)[-1]
    assert last["files"][0]["path"] == "inventory/models.py"
    assert verify_ledger(_ledger_path(gov)).ok


def test_the_log_format_stays_readable_with_attachments(gov: Path) -> None:
    ws, tools = _tools(gov)
    for i in range(3):
        assert tools.write_file("inventory/a.py", textwrap.dedent(f"a = {i}\n")).success
    oid = ws.object_id("inventory/a.py")
    ws.close()
    # A fresh open parses every line (attachments are not documents).
    again = Workspace.open(gov)
    assert [v.doc["content"] for v in again.store.history(oid)][-1] == "a = 2\n"
    assert len(again.store.history(oid)) == 3
    again.close()


def test_a_write_too_large_to_go_inline_logs_its_record_in_the_segments_line(gov: Path) -> None:
    ws, tools = _tools(gov)
    assert tools.write_file("inventory/small.py", "s = 1\n").success
    size_before = _ledger_path(gov).stat().st_size
    big = "".join(f"value_{n} = {n}\n" for n in range(4000))  # > 32 KiB: a Parquet segment
    result = tools.write_file("inventory/big.py", big)
    ws.close()
    assert result.success
    tx, att = _logged(gov)[-1]
    lines = (gov / ".ctxnb" / "store" / "txlog").read_bytes().splitlines()
    assert [ln[:11] for ln in lines if b',"tx":%d,' % tx in ln] == [b'{"op":"tx",']
    assert f"{att['oid']}@{tx}" == result.version_id
    lost = att["record"]["id"]
    os.truncate(_ledger_path(gov), size_before)
    assert restore(gov / ".ctxnb" / "store", TraceLedger(_ledger_path(gov))) == [lost]
    assert _records(gov)[-1]["metadata"]["version_id"] == result.version_id
    assert verify_ledger(_ledger_path(gov)).ok


def test_a_segment_line_naming_no_documents_restores_nothing(gov: Path) -> None:
    ws = Workspace.open(gov)
    oid = ws.object_id("inventory/a.py")
    rec = _record()
    big = {"xt/id": "other", "type": "file", "content": "x" * 40_000}  # not inline
    ws.store.put([big], attached=[attachment(rec, oid, 0)])
    ws.close()
    assert restore(gov / ".ctxnb" / "store", TraceLedger(_ledger_path(gov))) == []
