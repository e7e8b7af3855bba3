"""Every reader of the trace ledger checks it (ctxnb/govern/ledgercheck.py).

A governed workspace whose records are anchored in the store's log is forged four ways
(a hand edit, an edit whose following hashes and head are recomputed, a deleted line, two
lines swapped), and each forgery is read through every reader: the verifier itself,
``ctxnb trace verify``, ``ws.why`` and ``ctxnb why``, ``load_trace`` (marked and raising),
the trace widget and the OpenTelemetry spans. None may show a forged record as genuine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _tracewal_setup import governed, ledger_path, tools_of

from ctxnb import Workspace
from ctxnb.analysis import load_trace
from ctxnb.errors import TamperedTraceError
from ctxnb.govern import chain
from ctxnb.govern.ledger import TraceLedger, dump_record
from ctxnb.govern.ledgercheck import check_ledger
from ctxnb.telemetry import INTEGRITY_ATTRIBUTE, workspace_spans

FILES = ["inventory/a.py", "inventory/b.py", "inventory/c.py", "inventory/d.py"]
TARGET = 1  # the 0-based ledger line forged: the record of inventory/b.py


@pytest.fixture
def gov(git_repo: Path) -> Path:
    """Four governed writes, each record committed in the store's log with its version."""
    root = governed(git_repo)
    ws, tools = tools_of(root)
    for n, rel in enumerate(FILES):
        assert tools.write_file(rel, f"value_{n} = {n}\nother_{n} = {n * 2}\n").success
    ws.close()
    return root


def _lines(root: Path) -> list[bytes]:
    return ledger_path(root).read_bytes().splitlines()


def _write(root: Path, lines: list[bytes]) -> None:
    ledger_path(root).write_bytes(b"".join(line + b"\n" for line in lines))


def _edited(line: bytes) -> bytes:
    """The record claims another intent and a human's approval it never had."""
    rec = json.loads(line)
    rec["metadata"]["intent_id"] = "INT-666"
    rec["metadata"]["approval"] = {"approved": True, "by": "mallory", "at": rec["timestamp"]}
    for f in rec["files"]:
        for conv in f["conversations"]:
            for rel in conv.get("related", []):
                if rel["type"] == "intent":
                    rel["url"] = "urn:ctxnb:intent:INT-666"
    return dump_record(rec)


def _recompute(root: Path, lines: list[bytes], start: int) -> None:
    """Relink every line from ``start`` on and rewrite the head, as ctxnb would have."""
    for n in range(max(start, 0), len(lines)):
        rec = json.loads(lines[n])
        rec["metadata"][chain.PREV_KEY] = chain.line_hash(lines[n - 1]) if n else chain.GENESIS
        lines[n] = dump_record(rec)
    _write(root, lines)
    chain.write_head(ledger_path(root), ledger_path(root).stat().st_size, lines[-1])


def _forge(root: Path, how: str) -> str:
    """Forge the ledger; returns the id of the record forged (or deleted)."""
    lines = _lines(root)
    rid = json.loads(lines[TARGET])["id"]
    if how == "edit":
        lines[TARGET] = _edited(lines[TARGET])
        _write(root, lines)
    elif how == "edit+recompute":
        lines[TARGET] = _edited(lines[TARGET])
        _recompute(root, lines, TARGET + 1)
    elif how == "delete":
        del lines[TARGET]
        _write(root, lines)
    elif how == "delete+recompute":
        del lines[TARGET]
        _recompute(root, lines, TARGET)
    elif how == "reorder":
        lines[TARGET], lines[TARGET + 1] = lines[TARGET + 1], lines[TARGET]
        _write(root, lines)
    else:
        raise AssertionError(how)
    return rid


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from ctxnb.cli.app import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_an_untouched_ledger_is_verified_by_every_reader(
    gov: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check = check_ledger(ledger_path(gov))
    assert check.ok, check.summary()
    assert [check.integrity[n] for n, _ in check.records] == ["verified"] * len(FILES)
    df = load_trace(gov, on_tampered="raise")
    assert set(df["integrity"].astype(str)) == {"verified"}
    assert df.attrs["ledger_problems"] == [] and df.attrs["missing_records"] == []
    with Workspace.open(gov) as ws:
        answer = ws.why(FILES[TARGET])
    assert not answer.tampered
    assert answer.record_for(1).integrity == "verified"  # type: ignore[union-attr]
    code, text = _cli(["why", "-w", str(gov), FILES[TARGET]], capsys)
    assert code == 0 and "TAMPERED" not in text and "verified" in text, text
    assert _cli(["trace", "verify", str(gov)], capsys)[0] == 0
    from ctxnb.integrations.mcp_server import URI_TRACE, McpBackend

    with McpBackend(gov) as backend:
        shown = json.loads(backend.content.read_resource(URI_TRACE))
    assert [r["metadata"]["integrity"] for r in shown] == ["verified"] * len(FILES)


@pytest.mark.parametrize("how", ["edit", "edit+recompute", "reorder"])
def test_a_changed_record_is_tampered_in_every_reader(
    how: str, gov: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rid = _forge(gov, how)
    forged_line = 1 + [json.loads(x)["id"] for x in _lines(gov)].index(rid)

    check = check_ledger(ledger_path(gov))
    assert not check.ok
    assert check.integrity[forged_line] == "tampered", check.summary()
    if how == "edit+recompute":
        # The chain and the head hold: only the store's copy tells.
        assert check.tampered == [forged_line], check.summary()
        assert "differs from its copy committed in store transaction" in check.reasons[forged_line]

    code, text = _cli(["trace", "verify", str(gov)], capsys)
    assert code == 1 and f"agent_trace.jsonl:{forged_line}: " in text, text

    with Workspace.open(gov) as ws:
        answer = ws.why(FILES[TARGET])
    rec = answer.record_for(1)
    assert rec is not None and rec.record_id == rid
    assert rec.tampered and answer.tampered
    assert "TAMPERED" in str(answer) and answer.to_dict()["tampered"] is True
    code, text = _cli(["why", "-w", str(gov), f"{FILES[TARGET]}:1"], capsys)
    assert code == 1 and "TAMPERED" in text, text
    if how != "reorder":
        assert "INT-666" in text  # shown as what it is: a claim of a changed line

    df = load_trace(gov)
    rows = df[df["record_id"] == rid]
    assert len(rows) and set(rows["integrity"].astype(str)) == {"tampered"}
    assert df.attrs["ledger_problems"]
    with pytest.raises(TamperedTraceError, match="changed outside ctxnb") as err:
        load_trace(gov, on_tampered="raise")
    assert forged_line in err.value.lines

    spans = workspace_spans(gov)
    verdicts = {
        json.loads(attrs["ctxnb.agent_trace.record"])["id"]: attrs[INTEGRITY_ATTRIBUTE]
        for span in spans
        for _, _, attrs in span.events
    }
    assert verdicts[rid] == "tampered"

    from ctxnb.widgets.trace_view import TraceView

    html = TraceView(gov)._repr_html_()
    assert "changed outside ctxnb" in html and "tampered" in html

    from ctxnb.integrations.mcp_server import URI_TRACE, McpBackend

    with McpBackend(gov) as backend:
        shown = json.loads(backend.content.read_resource(URI_TRACE))
    assert {r["id"]: r["metadata"]["integrity"] for r in shown}[rid] == "tampered"


@pytest.mark.parametrize("how", ["delete", "delete+recompute"])
def test_a_deleted_record_is_reported_and_restored(
    how: str, gov: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rid = _forge(gov, how)
    check = check_ledger(ledger_path(gov))
    assert [a.record["id"] for a in check.missing] == [rid]
    assert "are not in the ledger" in check.summary()
    if how == "delete":
        assert not check.ok and check.tampered == [TARGET, TARGET + 1]  # both sides of the gap

    with Workspace.open(gov) as ws:
        answer = ws.why(FILES[TARGET])
    assert answer.missing_records == [rid]
    assert "in the store's log but not in the ledger" in str(answer)
    df = load_trace(gov)
    assert df.attrs["missing_records"] == [rid]
    assert rid not in set(df["record_id"])

    code, text = _cli(["trace", "verify", str(gov)], capsys)
    assert "restored 1 record(s)" in text and "deleted" in text, text
    # The deletion does not hold: the record is back, whole, from the store's log.
    assert [r["id"] for r in TraceLedger(ledger_path(gov)).records()].count(rid) == 1
    after = check_ledger(ledger_path(gov))
    assert after.missing == []
    # The record is back, at the end; the ledger's order is not what the store pinned
    # (the next record's checkpoint named the deleted line), so the rewrite stays
    # visible, recomputed chain or not.
    assert code == 1 and not after.ok, after.summary()
    assert "verified" == after.integrity[len(FILES)]
    if how == "delete+recompute":
        # The line now where the deleted one was (0-based TARGET): its record moved up.
        assert TARGET + 1 in after.tampered
        assert "chain recomputed" in after.reasons[TARGET + 1]


def test_a_copied_record_is_tampered(gov: Path) -> None:
    lines = _lines(gov)
    lines.append(lines[TARGET])
    _recompute(gov, lines, len(lines) - 1)
    check = check_ledger(ledger_path(gov))
    assert check.tampered == [len(lines)], check.summary()
    assert "a copy was inserted" in check.reasons[len(lines)]


def test_load_trace_refuses_an_unknown_mode(gov: Path) -> None:
    with pytest.raises(ValueError, match="on_tampered"):
        load_trace(gov, on_tampered="ignore")  # type: ignore[arg-type]


def test_a_parquet_copy_keeps_the_verdicts(gov: Path, tmp_path: Path) -> None:
    from ctxnb.analysis import trace_to_parquet

    _forge(gov, "edit+recompute")
    trace_to_parquet(gov, tmp_path / "t.parquet")
    df = load_trace(tmp_path / "t.parquet")
    assert "tampered" in set(df["integrity"].astype(str))
    with pytest.raises(TamperedTraceError):
        load_trace(tmp_path / "t.parquet", on_tampered="raise")
