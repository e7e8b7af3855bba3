"""The store keeps every record's anchor, rotation or not (ctxnb/govern/ledgercheck.py).

An attacker who can write ``.orchestration/`` but not ``.ctxnb/`` edits, reorders or
deletes ledger lines and recomputes every following ``prev_hash`` and the head file, so
that the chain holds. Each record a governed write committed in the store keeps its copy
there (in the log, then in the archive of attachments a compaction's rotation writes),
and every such commit, and every rotation, pins the ledger as it was then (its length
and last line's hash). These tests make each forgery after the log was rotated away, or
in a way that leaves every record equal to its copy, and read the ledger back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _tracewal_setup import governed, ledger_path, tools_of

from ctxnb import ObjectStore
from ctxnb.analysis import load_trace
from ctxnb.errors import CorruptStoreError
from ctxnb.govern import chain
from ctxnb.govern.ledger import TraceLedger, build_event_record, dump_record
from ctxnb.govern.ledgercheck import check_ledger
from ctxnb.store._attach import attached_lines


def _store(root: Path) -> Path:
    return root / ".ctxnb" / "store"


def _lines(root: Path) -> list[bytes]:
    return ledger_path(root).read_bytes().splitlines()


def _recompute(root: Path, lines: list[bytes], start: int) -> None:
    """Relink every line from ``start`` (0-based) on and rewrite the head, as ctxnb
    would have: the chain and the head hold afterwards."""
    for n in range(max(start, 0), len(lines)):
        rec = json.loads(lines[n])
        rec["metadata"][chain.PREV_KEY] = chain.line_hash(lines[n - 1]) if n else chain.GENESIS
        lines[n] = dump_record(rec)
    ledger_path(root).write_bytes(b"".join(line + b"\n" for line in lines))
    chain.write_head(ledger_path(root), ledger_path(root).stat().st_size, lines[-1])


def _edited(line: bytes) -> bytes:
    rec = json.loads(line)
    rec["metadata"]["intent_id"] = "INT-666"
    return dump_record(rec)


def _writes(root: Path, names: list[str], sid: str = "agent-1") -> None:
    ws, tools = tools_of(root, sid)
    for n, name in enumerate(names):
        assert tools.write_file(f"inventory/{name}.py", f"{name} = {n}\n").success
    ws.close()


def _compact(root: Path) -> None:
    """A compaction that rotates the log: the records' lines leave it."""
    with ObjectStore(_store(root)) as store:
        store.compact()
    assert attached_lines(_store(root)) == []


@pytest.fixture
def gov(git_repo: Path) -> Path:
    """An event record (no copy in the store), four governed writes, a rotation."""
    root = governed(git_repo)
    TraceLedger(ledger_path(root)).append(
        build_event_record(metadata={"intent_id": "INT-001"}, repo_root=root)
    )
    _writes(root, ["a", "b", "c", "d"])
    _compact(root)
    return root


def test_an_untouched_ledger_stays_verified_after_rotations(gov: Path) -> None:
    _writes(gov, ["e"], "agent-2")
    _compact(gov)  # a second rotation carries the first one's archive
    check = check_ledger(ledger_path(gov))
    assert check.ok, check.summary()
    assert [check.integrity[n] for n, _ in check.records] == ["chained"] + ["verified"] * 5
    archives = list((_store(gov) / "snapshots").glob("att-*.jsonl"))
    assert len(archives) == 1  # the first rotation's archive was replaced, not kept
    with ObjectStore(_store(gov)) as store:
        assert any(f.endswith(archives[0].name) for f in store.verify().files)


@pytest.mark.parametrize("line", [2, 5], ids=["oldest-write", "newest-write"])
def test_an_edit_with_the_chain_recomputed_is_tampered_after_rotation(gov: Path, line: int) -> None:
    lines = _lines(gov)
    lines[line - 1] = _edited(lines[line - 1])
    _recompute(gov, lines, line)
    check = check_ledger(ledger_path(gov))
    assert not check.ok
    assert check.integrity[line] == "tampered", check.summary()
    assert "differs from its copy" in check.reasons[line]
    df = load_trace(gov)
    assert df.loc[df["record_id"] == json.loads(lines[line - 1])["id"], "integrity"].item() == (
        "tampered"
    )


def test_an_edit_rotated_through_two_archives_is_tampered(gov: Path) -> None:
    _writes(gov, ["e"], "agent-2")
    _compact(gov)
    lines = _lines(gov)
    lines[2] = _edited(lines[2])  # record of inventory/b.py, rotated by the first compaction
    _recompute(gov, lines, 3)
    assert check_ledger(ledger_path(gov)).tampered == [3]


def test_an_edited_record_with_no_copy_is_tampered_once_a_rotation_pinned_it(gov: Path) -> None:
    lines = _lines(gov)
    assert "metadata" in json.loads(lines[0]) and json.loads(lines[0])["id"]
    lines[0] = _edited(lines[0])  # the event: the store never had a copy of it
    _recompute(gov, lines, 1)
    check = check_ledger(ledger_path(gov))
    assert check.tampered == [1], check.summary()
    assert "chain recomputed" in check.reasons[1]


@pytest.mark.parametrize("rotated", [False, True], ids=["in-the-log", "rotated"])
def test_a_reorder_with_the_chain_recomputed_is_tampered(git_repo: Path, rotated: bool) -> None:
    root = governed(git_repo)
    _writes(root, ["a", "b", "c", "d"])
    if rotated:
        _compact(root)
    lines = _lines(root)
    lines[1], lines[2] = lines[2], lines[1]
    _recompute(root, lines, 1)
    check = check_ledger(ledger_path(root))
    # Every record still equals its copy: only the order the store pinned tells.
    assert not any("differs from its copy" in why for _, why in check.problems)
    assert not check.ok
    assert 2 in check.tampered, check.summary()
    assert "chain recomputed" in check.reasons[2]


def test_a_record_deleted_after_rotation_is_reported(gov: Path) -> None:
    lines = _lines(gov)
    gone = json.loads(lines[2])["id"]
    del lines[2]
    _recompute(gov, lines, 2)
    check = check_ledger(ledger_path(gov))
    assert [a.record["id"] for a in check.missing] == [gone]
    assert not check.ok and check.tampered == [3], check.summary()


def test_lines_cut_from_the_end_with_the_head_rewritten_are_reported(gov: Path) -> None:
    lines = _lines(gov)[:3]
    _recompute(gov, lines, 3)  # only the head: the chain of the kept lines is intact
    check = check_ledger(ledger_path(gov))
    assert not check.ok
    assert any("lines were removed" in why for _, why in check.problems), check.summary()


@pytest.mark.parametrize("damage", ["flip", "delete"])
def test_a_damaged_archive_of_attachments_is_refused_naming_it(gov: Path, damage: str) -> None:
    (archive,) = (_store(gov) / "snapshots").glob("att-*.jsonl")
    if damage == "flip":
        data = bytearray(archive.read_bytes())
        at = data.index(b"INT-001")
        data[at + 4] ^= 0x01  # INT-001 -> INT-000 in a record's copy: same size
        archive.write_bytes(bytes(data))
        with pytest.raises(CorruptStoreError, match=archive.name):
            ObjectStore(_store(gov)).verify()
    else:
        archive.unlink()
        with pytest.raises(CorruptStoreError, match=archive.name):
            ObjectStore(_store(gov))
    # The verifier does not read the ledger as checked without its anchors.
    with pytest.raises(CorruptStoreError, match=archive.name):
        check_ledger(ledger_path(gov))
