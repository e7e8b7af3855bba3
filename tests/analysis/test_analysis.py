"""ctxnb.analysis: flattening the trace ledger, Parquet, the audit log, plots."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import ctxnb.analysis as analysis_mod  # noqa: E402
from ctxnb import Workspace  # noqa: E402
from ctxnb.analysis import (  # noqa: E402
    TRACE_COLUMNS,
    audit,
    context_diff,
    contexts_frame,
    load_trace,
    plot_context_composition,
    plot_mutations_per_intent,
    plot_tokens_per_turn,
    scan,
    trace_to_parquet,
)
from ctxnb.govern.ledger import TraceLedger, build_trace_record  # noqa: E402


def _rec(rid: str, ts: str, files: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"version": "0.1.0", "id": rid, "timestamp": ts, "files": files, **extra}


RECORDS = [
    # A: the full shape build_trace_record makes, two ranges.
    _rec(
        "a",
        "2025-01-01T10:00:00.000Z",
        [
            {
                "path": "src/app.py",
                "conversations": [
                    {
                        "contributor": {"type": "ai", "model_id": "anthropic/claude-sonnet-4"},
                        "ranges": [
                            {"start_line": 1, "end_line": 3, "content_hash": "sha256:1"},
                            {"start_line": 10, "end_line": 10, "content_hash": "sha256:2"},
                        ],
                        "related": [
                            {"type": "intent", "url": "urn:ctxnb:intent:INT-1"},
                            {"type": "session", "url": "urn:ctxnb:session:s-1"},
                        ],
                    }
                ],
            }
        ],
        vcs={"type": "git", "revision": "abc"},
        tool={"name": "ctxnb", "version": "0.1.0"},
        metadata={
            "intent_id": "INT-1",
            "session_id": "s-1",
            "tool": "write_file",
            "mutation_class": "AST_REFACTOR",
            "other": [1, 2],
        },
    ),
    # B: no vcs, no metadata, a range with its own contributor, an offset timestamp,
    # a percent-encoded intent URN and an unknown extra key.
    _rec(
        "b",
        "2025-01-01T14:00:00+02:00",
        [
            {
                "path": "src/b.py",
                "conversations": [
                    {
                        "url": "https://example.invalid/c/1",
                        "contributor": {"type": "ai", "model_id": "openai/gpt-5"},
                        "ranges": [
                            {"start_line": 2, "end_line": 4, "contributor": {"type": "human"}},
                            {"start_line": 7, "end_line": 8},
                        ],
                        "related": [{"type": "intent", "url": "urn:ctxnb:intent:INT%2F2"}],
                    }
                ],
            }
        ],
        vendor={"x": 1},
    ),
    # C: a conversation without ranges, and a file without conversations.
    _rec(
        "c",
        "2025-01-02T00:00:00Z",
        [
            {"path": "docs/a.md", "conversations": [{"ranges": []}]},
            {"path": "docs/b.md", "conversations": []},
        ],
        metadata={"intent_id": "INT-3"},
    ),
    # D: no files at all.
    _rec("d", "2025-01-03T00:00:00Z", [], vcs={"type": "jj", "revision": "zz"}),
]


def _write(path: Path, records: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def test_every_field_shape(tmp_path: Path) -> None:
    df = load_trace(_write(tmp_path / "t.jsonl", RECORDS))
    assert list(df.columns) == list(TRACE_COLUMNS)
    assert df.attrs["skipped_lines"] == 0
    assert df["record_id"].tolist() == ["a", "a", "b", "b", "c", "c", "d"]
    assert str(df["timestamp"].dtype) == "datetime64[us, UTC]"
    assert df["timestamp"].iloc[2] == pd.Timestamp("2025-01-01T12:00:00Z")
    a = df[df.record_id == "a"]
    assert a["lines"].tolist() == [3, 1]
    assert a["vcs_type"].astype(str).tolist() == ["git", "git"]
    assert set(a["intent_id"]) == {"INT-1"} and set(a["session_id"]) == {"s-1"}
    assert set(a["tool"]) == {"write_file"} and set(a["mutation_class"]) == {"AST_REFACTOR"}
    b = df[df.record_id == "b"]
    # The range's own contributor replaces the conversation's, model included.
    assert b["contributor_type"].tolist() == ["human", "ai"]
    assert b["model_id"].tolist()[0] is None or pd.isna(b["model_id"].tolist()[0])
    assert b["model_id"].tolist()[1] == "openai/gpt-5"
    assert set(b["intent_id"]) == {"INT/2"}
    assert b["vcs_type"].isna().all() and b["tool"].isna().all()
    c = df[df.record_id == "c"]
    assert c["file"].tolist() == ["docs/a.md", "docs/b.md"]
    assert c["start_line"].isna().all() and c["lines"].isna().all()
    assert set(c["intent_id"]) == {"INT-3"}  # from metadata: no related URNs
    d = df[df.record_id == "d"]
    assert d["file"].isna().all() and d["revision"].tolist() == ["zz"]


def test_cut_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    full = json.dumps(RECORDS[0])
    p = _write(tmp_path / "t.jsonl", RECORDS, tail=full[: len(full) // 2])
    df = load_trace(p)
    assert df.attrs["skipped_lines"] == 1
    assert df["record_id"].tolist() == ["a", "a", "b", "b", "c", "c", "d"]


def test_last_line_without_newline_but_whole_is_kept(tmp_path: Path) -> None:
    p = _write(tmp_path / "t.jsonl", RECORDS[:1], tail=json.dumps(RECORDS[3]))
    df = load_trace(p)
    assert df.attrs["skipped_lines"] == 0
    assert df["record_id"].tolist() == ["a", "a", "d"]


def test_damaged_middle_line_takes_the_slow_path_with_the_same_result(tmp_path: Path) -> None:
    clean = load_trace(_write(tmp_path / "clean.jsonl", RECORDS))
    lines = [json.dumps(r) for r in RECORDS]
    lines.insert(2, '{"version": "0.1.0", "id": broken')
    lines.insert(3, "[1, 2, 3]")
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    bad = load_trace(tmp_path / "bad.jsonl")
    assert bad.attrs["skipped_lines"] == 2
    pd.testing.assert_frame_equal(bad.astype(object), clean.astype(object), check_dtype=False)


def test_wrongly_typed_field_does_not_fail_the_ledger(tmp_path: Path) -> None:
    odd = _rec(
        "e",
        "2025-01-04T00:00:00Z",
        [{"path": "x.py", "conversations": [{"ranges": [{"start_line": 1, "end_line": 2}]}]}],
        metadata={"intent_id": 42},
    )
    df = load_trace(_write(tmp_path / "t.jsonl", [RECORDS[0], odd]))
    assert df["record_id"].tolist() == ["a", "a", "e"]
    assert df["intent_id"].astype(object).tolist() == ["INT-1", "INT-1", "42"]


def test_ledger_and_workspace_sources_and_parquet_roundtrip(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    ledger = TraceLedger(root / ".orchestration" / "agent_trace.jsonl")
    for n in range(3):
        ledger.append(
            build_trace_record(
                file_path=f"f{n}.py",
                ranges=[(1, 1)],
                new_text="x\n",
                intent_id=f"I{n % 2}",
                session_id="s",
                model_id="m/x",
                repo_root=None,
                tool="write_file",
            )
        )
    from_ledger = load_trace(ledger)
    assert from_ledger["file"].astype(str).tolist() == ["f0.py", "f1.py", "f2.py"]
    pd.testing.assert_frame_equal(load_trace(root), from_ledger)
    pd.testing.assert_frame_equal(load_trace(Workspace.open(root)), from_ledger)
    assert trace_to_parquet(ledger, tmp_path / "t.parquet") == 0
    pd.testing.assert_frame_equal(load_trace(tmp_path / "t.parquet"), from_ledger)


def test_empty_and_missing_ledgers(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text("")
    assert len(load_trace(tmp_path / "e.jsonl")) == 0
    with pytest.raises(FileNotFoundError, match="agent_trace.jsonl"):
        load_trace(tmp_path / "nope.jsonl")


def test_audit_skips_a_cut_line(tmp_path: Path) -> None:
    d = tmp_path / ".ctxnb"
    d.mkdir()
    lines = [
        {
            "ts": "2025-01-01T00:00:00Z",
            "caller": "agent",
            "session_id": "s",
            "tool": "read_file",
            "args": {"path": "a.py"},
            "duration_ms": 1.5,
            "success": True,
            "error_code": None,
            "before_sha256": None,
            "after_sha256": None,
        },
        {
            "ts": "2025-01-01T00:00:01Z",
            "caller": "agent",
            "session_id": "s",
            "tool": "write_file",
            "args": {"path": "a.py"},
            "duration_ms": 3,
            "success": False,
            "error_code": "STALE_FILE",
            "before_sha256": "x",
            "after_sha256": None,
            "new": 1,
        },
    ]
    (d / "audit.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"ts": "2')
    df = audit(tmp_path)
    assert df.attrs["skipped_lines"] == 1
    assert df["tool"].tolist() == ["read_file", "write_file"]
    assert df["error_code"].tolist()[1] == "STALE_FILE"
    assert df["args"].tolist()[0] == {"path": "a.py"}
    assert str(df["ts"].dtype).startswith("datetime64") and "UTC" in str(df["ts"].dtype)
    assert "new" in df.columns


def test_scan_passthrough(sample_ws: Path) -> None:
    ws = Workspace.open(sample_ws)
    ws.index(progress=False)
    df = scan(ws, "file")
    assert any(p.endswith("/AGENTS.md") for p in df["source_path"])
    assert len(scan(ws.store, "file")) == len(df)


def _contexts(sample_ws: Path) -> list[Any]:
    ws = Workspace.open(sample_ws)
    s = ws.session("t", system_prompt="Be careful.", excerpts=False)
    a = s.add_path("AGENTS.md")
    s.add_turn("user", "hello")
    c1 = s.assemble()
    s.add_path("inventory/models.py")
    s.deactivate(a)
    s.add_turn("assistant", "ok")
    c2 = s.assemble()
    return [c1, c2]


def test_context_diff_frame_and_plots(sample_ws: Path) -> None:
    c1, c2 = _contexts(sample_ws)
    diff = context_diff(c1, c2)
    assert diff == {"entered": [c2.items[0].id], "left": [c1.items[0].id], "changed": []}
    df = contexts_frame([c1, c2])
    assert df["turn"].tolist() == [1, 2]
    assert (df[["system", "metadata", "active", "chat"]].sum(axis=1) == df["total"]).all()
    assert df["files"].tolist() == [c1.items[0].tokens, c2.items[0].tokens]
    ax = plot_tokens_per_turn([c1, c2], labels=["one", "two"])
    assert len(ax.patches) == 8
    assert [t.get_text() for t in ax.get_xticklabels()] == ["one", "two"]
    ax = plot_context_composition(df)
    assert len(ax.collections) == 5
    plt.close("all")


def test_plot_mutations_per_intent(tmp_path: Path) -> None:
    df = load_trace(_write(tmp_path / "t.jsonl", RECORDS))
    ax = plot_mutations_per_intent(df)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "(none)",
        "INT-1",
        "INT-3",
        "INT/2",
    ]
    # Records are counted once, however many ranges they have.
    widths = sorted(p.get_width() for p in ax.patches if p.get_width() > 0)
    assert sum(widths) == 4
    plt.close("all")


def test_doctests() -> None:
    result = doctest.testmod(analysis_mod._trace, optionflags=doctest.ELLIPSIS)
    plt.close("all")
    assert result.failed == 0 and result.attempted > 5
