"""ctxnb's own ``.orchestration/``: an example of the format that governs this repository.

Its intents name one wing each; its ledger holds the records of changes made to the
repository through ctxnb's governed tools. These tests keep both honest as the code moves:
a scope that no longer matches a file, a record the Agent Trace schema rejects, a record
naming an intent or a file that is gone, or a broken chain fails here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
from _data import REPO, TEST_DATA

from ctxnb.govern.intents import load_intents

ORCH = REPO / ".orchestration"


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def _records() -> list[dict]:
    lines = (ORCH / "agent_trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_intent_owns_files_that_exist() -> None:
    intents = load_intents(ORCH / "active_intents.yaml").active_intents
    assert len(intents) >= 8
    tracked = _tracked()
    for intent in intents:
        for glob in intent.owned_scope:
            # Each glob on its own, so a dead one is named even when its siblings match.
            single = intent.model_copy(update={"owned_scope": [glob]})
            assert any(single.in_scope(p) for p in tracked), f"{intent.id}: {glob} matches nothing"
    # The governance files themselves are in no intent: only a human edits them.
    assert not any(i.in_scope(".orchestration/active_intents.yaml") for i in intents)


def test_every_record_is_valid_agent_trace_naming_an_intent_and_a_tracked_file() -> None:
    schema = json.loads((TEST_DATA / "agent-trace-0.1.0.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    ids = {i.id for i in load_intents(ORCH / "active_intents.yaml").active_intents}
    tracked = set(_tracked())
    records = _records()
    assert records, "the ledger records at least the change that documents it"
    for record in records:
        errors = [e.message for e in validator.iter_errors(record)]
        assert errors == [], (record["id"], errors)
        assert record["metadata"]["intent_id"] in ids, record["id"]
        for f in record["files"]:
            assert f["path"] in tracked, (record["id"], f["path"])


def test_the_chain_verifies_in_a_copy_with_no_store(tmp_path: Path) -> None:
    """What a fresh clone has: the ledger without the store beside it."""
    shutil.copytree(ORCH, tmp_path / ".orchestration")
    out = subprocess.run(
        [sys.executable, "-m", "ctxnb", "trace", "verify", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "chain intact" in out.stdout


def test_an_edited_record_is_caught_in_a_copy_with_no_store(tmp_path: Path) -> None:
    """The head file travels with the ledger: a clone catches an edit without the store."""
    shutil.copytree(ORCH, tmp_path / ".orchestration")
    ledger = tmp_path / ".orchestration" / "agent_trace.jsonl"
    first, *rest = ledger.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(first)
    record["metadata"]["intent_id"] = "INT-STORE"
    ledger.write_text(json.dumps(record) + "\n" + "".join(rest), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "ctxnb", "trace", "verify", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0, out.stdout
    assert "chain intact" not in out.stdout
