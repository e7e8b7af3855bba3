"""One JSON-lines reader: the same damaged file reads the same way through every reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxnb._util.jsonl import SkippedLine, iter_jsonl
from ctxnb.analysis import audit
from ctxnb.govern.ledger import TraceLedger
from ctxnb.replay import Trajectory
from ctxnb.replay.model import TrajectoryFormatError
from ctxnb.tools.audit import AuditLog

# A U+2028 inside a string is valid JSON (json.dumps(ensure_ascii=False) writes it raw);
# str.splitlines() would cut the record in two there.
ODD = json.dumps({"tool": "read_file", "note": "a\u2028b\u0085c"}, ensure_ascii=False)
DAMAGED = (
    ODD.encode()
    + b"\n"
    + b"\r\n"  # a blank line
    + b'{"tool": "write_file"}\r\n'  # a CRLF ending is whitespace to JSON
    + b'{"tool": "\xff\xfe"}\n'  # not UTF-8
    + b"[1, 2]\n"  # JSON, but not an object
    + b'{"tool": "search"}\n'
    + b'{"tool": "rea'  # cut by a crash
)


def test_reader_keeps_records_with_line_separators_and_reports_each_bad_line() -> None:
    skipped: list[SkippedLine] = []
    got = list(iter_jsonl(DAMAGED, skipped=skipped))
    assert [n for n, _ in got] == [1, 3, 6]
    assert got[0][1]["note"] == "a\u2028b\u0085c"
    assert [(s.lineno, s.reason) for s in skipped] == [
        (4, "not valid JSON"),
        (5, "not a JSON object"),
        (7, "cut line (no newline at end of file)"),
    ]
    # The same text as str, as a binary file's lines, and as a list of lines.
    text = DAMAGED.replace(b"\xff\xfe", b"ok").decode()
    assert [(n, r["tool"]) for n, r in iter_jsonl(text)] == [
        (1, "read_file"),
        (3, "write_file"),
        (4, "ok"),
        (6, "search"),
    ]
    assert list(iter_jsonl(DAMAGED.splitlines(keepends=True))) == got


def test_a_complete_last_line_without_its_newline_is_read() -> None:
    skipped: list[SkippedLine] = []
    assert list(iter_jsonl(b'{"a": 1}\n{"b": 2}', skipped=skipped)) == [
        (1, {"a": 1}),
        (2, {"b": 2}),
    ]
    assert skipped == []


def test_every_reader_of_a_damaged_file_agrees(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(DAMAGED)
    ledger = TraceLedger(path, validate=False)
    ledger_tools = [r["tool"] for r in ledger.records()]
    log = AuditLog(path)
    audit_tools = [r["tool"] for r in log.records()]
    frame = audit(path)
    assert (
        ledger_tools
        == audit_tools
        == list(frame["tool"])
        == [
            "read_file",
            "write_file",
            "search",
        ]
    )
    assert len(ledger.skipped_lines) == log.skipped_lines == frame.attrs["skipped_lines"] == 3


def test_a_trajectory_with_a_damaged_line_names_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    Trajectory(id="t", source_format="ctxnb").to_jsonl(path)
    good = path.read_bytes()
    path.write_bytes(good + b'{"index": 0, "act')
    with pytest.raises(TrajectoryFormatError, match=r"line 2 cannot be read \(cut line"):
        Trajectory.from_jsonl(path)
    path.write_bytes(good.replace(b"{", b"{\xff", 1))
    with pytest.raises(TrajectoryFormatError, match=r"line 1 cannot be read \(not valid JSON"):
        Trajectory.from_jsonl(path)


def test_a_line_nested_too_deeply_to_parse_is_skipped_not_raised() -> None:
    """Python's JSON parser recurses per level; a line of brackets is one bad line."""
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    skipped: list[SkippedLine] = []
    got = list(iter_jsonl(b'{"tool": "read_file"}\n' + deep + b'{"tool": "search"}\n',
                          skipped=skipped))  # fmt: skip
    assert [r["tool"] for _, r in got] == ["read_file", "search"]
    assert [(s.lineno, s.reason) for s in skipped] == [(2, "nested too deeply")]
    assert len(skipped[0].preview) <= 81
