"""Recall: what a masking strategy elided comes back exactly, redacted, and only from the
session that saw it (a real workspace, store and session)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.errors import ConfigError, NotFoundError
from ctxnb.strategies import BlockMasking, ObservationMasking, WithRecall, parse_strategy
from ctxnb.strategies.recall import recall_handle
from ctxnb.tools.recall import parse_recall, recall


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    w = Workspace.open(tmp_path)
    yield w
    w.close()


def test_the_placeholders_name_handles_that_recall_the_output_byte_for_byte(
    ws: Workspace,
) -> None:
    s = ws.session("a")
    # Text a careless round trip would change: tabs, trailing blanks, CRs, no final newline.
    odd = "x\t= 1  \r\n  ünïcode ✓\n\n  trailing   "
    first = s.record_toolcall("run_command", {"cmd": "cat odd.txt"}, odd)
    s.record_toolcall("run_command", {"cmd": "ls"}, "odd.txt\n")
    ctx = s.assemble(WithRecall(ObservationMasking(1)))
    text = "".join(m.get("content") or "" for m in ctx.to_messages("openai"))
    assert "ünïcode" not in text  # elided from the prompt ...
    (handle,) = re.findall(r"`recall ([0-9a-f]{8})` shows it again", text)
    assert handle == recall_handle(first)
    assert recall(s, ref=handle) == odd  # ... and back exactly, by handle or by id
    assert recall(s, ref=first) == odd
    # The placeholder is the same at every step: the prompt's prefix stays cacheable.
    s.record_toolcall("run_command", {"cmd": "pwd"}, "/w\n")
    again = "".join(
        m.get("content") or ""
        for m in s.assemble(WithRecall(ObservationMasking(1))).to_messages("openai")
    )
    assert again.startswith(text[: text.index(handle) + 8])


def test_recall_redacts_what_it_returns_a_file_s_secret_included(
    ws: Workspace, tmp_path: Path
) -> None:
    key = "ghp_" + secrets.token_hex(18)  # generated, never a real token
    (tmp_path / "settings.py").write_text(f"TOKEN = '{key}'\nDEBUG = True\n")
    s = ws.session("a")
    fid = s.add_path(tmp_path / "settings.py")
    call = s.record_toolcall("run_command", {"cmd": "env"}, f"GITHUB_TOKEN={key}\nHOME=/w\n")
    for ref in (fid, recall_handle(fid), recall_handle(call)):
        out = recall(s, ref=ref)
        assert key not in out
    assert "DEBUG = True" in recall(s, ref=recall_handle(fid))
    hits = recall(s, query="token")
    assert key not in hits and "GITHUB_TOKEN=" in hits and "TOKEN = " in hits


def test_recall_reaches_only_this_session_s_own_outputs(ws: Workspace) -> None:
    mine, other = ws.session("mine"), ws.session("other")
    theirs = other.record_toolcall("run_command", {"cmd": "cat plan.txt"}, "the other plan\n")
    other.save()
    mine.record_toolcall("run_command", {"cmd": "ls"}, "a.py\n")
    # Stored, and one id away, but not this session's: neither by handle nor by id.
    assert ws.store.get(theirs) is not None
    for ref in (theirs, recall_handle(theirs)):
        with pytest.raises(NotFoundError, match="no output of this session"):
            recall(mine, ref=ref)
    assert recall(mine, query="other plan").startswith("no output of this session")
    # A call the harness made (hidden from the model) is not the model's to recall.
    hidden = mine.record_toolcall(
        "select_active_intent", {"intent_id": "I-1"}, "<intent_context>", hidden=True
    )
    assert hidden not in mine.metadata_pool
    with pytest.raises(NotFoundError):
        recall(mine, ref=recall_handle(hidden))
    assert recall(mine, query="intent_context").startswith("no output")


def test_a_search_lists_matching_lines_under_the_handle_that_fetches_the_rest(
    ws: Workspace,
) -> None:
    s = ws.session("a")
    big = "".join(f"line {n}\n" for n in range(500)) + "def add(a, b):\n    return a - b\n"
    oid = s.record_toolcall("run_command", {"cmd": "cat calc.py"}, big)
    out = recall(s, query="RETURN a")
    assert (
        out
        == f"recall {recall_handle(oid)} (run_command(cmd=cat calc.py)):\n  502:     return a - b\n"
    )
    # Far shorter than a re-read of the whole output.
    assert len(out) < len(big) / 20
    # A recall's own answer is not searched again (it would find itself).
    s.record_toolcall("recall", {"query": "return a"}, out)
    assert recall(s, query="return a") == out
    for bad in ({}, {"ref": "x", "query": "y"}, {"query": "   "}):
        with pytest.raises(ConfigError):
            recall(s, **bad)


@pytest.mark.parametrize(
    "command",
    [
        "recall abc; rm -rf src",  # a second command must run governed, not as a recall
        "recall $(cat /etc/passwd)",
        "recall `id`",
        "recall abc | sh",
        "recall abc > out.txt",
        "recall",
        "recall --search",
        "recall a b",
        "echo recall abc",
        "recall 'abc",  # not even shell
    ],
)
def test_only_a_plain_recall_is_answered_by_ctxnb(command: str) -> None:
    assert parse_recall(command) is None


def test_plain_recalls_parse_and_strategies_pair_with_recall_by_name() -> None:
    assert parse_recall("recall 3fa2c91b") == {"ref": "3fa2c91b"}
    assert parse_recall("recall -s def  add") == {"query": "def add"}
    s = parse_strategy("block-masking-recall:2,3")
    assert s.name == "block-masking-recall" and repr(s) == f"WithRecall({BlockMasking(2, 3)!r})"
    assert getattr(s, "recall", False) is True
    assert not getattr(parse_strategy("block-masking:2,3"), "recall", False)
