"""SWE-bench-format instances and predictions: read as the official dataset spells them,
written so the official harness reads them, and bad input refused whole with its cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxnb.errors import CtxnbError, TaskFormatError
from ctxnb.tasks import (
    Instance,
    Prediction,
    load_instances,
    load_predictions,
    write_instances,
    write_predictions,
)
from ctxnb.tasks.instances import REQUIRED_KEYS


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "instance_id": "owner__repo-1",
        "repo": "owner/repo",
        "base_commit": "a" * 40,
        "problem_statement": "Fix the parser.",
        "test_patch": "diff --git a/t.py b/t.py\n",
        "patch": "diff --git a/p.py b/p.py\n",
        "FAIL_TO_PASS": '["t.py::test_a", "t.py::test_b[x y]"]',  # as the datasets hold it
        "PASS_TO_PASS": ["t.py::test_c"],  # and as a plain list
        "hints_text": "",
        "version": "1.0",
        "environment_setup_commit": "b" * 40,
        "created_at": "2024-01-01T00:00:00Z",
    }
    row.update(over)
    return row


def test_jsonl_and_json_load_alike_and_a_round_trip_keeps_every_key(tmp_path: Path) -> None:
    rows = [_row(), _row(instance_id="owner__repo-2", FAIL_TO_PASS=["t.py::test_z"])]
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    listed = tmp_path / "b.json"
    listed.write_text(json.dumps(rows))
    by_id = tmp_path / "c.json"
    by_id.write_text(json.dumps({r["instance_id"]: r for r in rows}))
    a, b, c = load_instances(jsonl), load_instances(listed), load_instances(by_id)
    assert a == b == c
    assert a[0].fail_to_pass == ("t.py::test_a", "t.py::test_b[x y]")
    assert a[0].pass_to_pass == ("t.py::test_c",)
    assert a[1].fail_to_pass == ("t.py::test_z",)
    assert a[0].extra["version"] == "1.0"
    out = write_instances(a, tmp_path / "out.jsonl")
    back = [json.loads(line) for line in out.read_text().splitlines()]
    for orig, written in zip(rows, back, strict=True):
        assert set(written) == set(orig)
        for key, value in orig.items():
            if key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
                # Written as the published datasets hold them: a JSON string of a list.
                assert isinstance(written[key], str)
                assert json.loads(written[key]) == (
                    json.loads(value) if isinstance(value, str) else value
                )
            else:
                assert written[key] == value
    assert load_instances(out) == a


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_a_missing_key_is_named_with_the_instance(tmp_path: Path, key: str) -> None:
    row = _row()
    del row[key]
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_row(instance_id="ok-1")) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError) as err:
        load_instances(path)
    msg = str(err.value)
    assert f"missing {key}" in msg and f"{path}:2" in msg
    if key != "instance_id":
        assert "owner__repo-1" in msg
    assert isinstance(err.value, CtxnbError)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ('{"instance_id": "x"\n', "not valid JSON"),  # a damaged line
        ("[1, 2]\n", "not a JSON object"),
        (
            json.dumps(_row(FAIL_TO_PASS="t.py::test_a")) + "\n",
            "FAIL_TO_PASS is a string but not JSON",
        ),
        (json.dumps(_row(PASS_TO_PASS=[1])) + "\n", "PASS_TO_PASS must be a list of test ids"),
        (json.dumps(_row(base_commit=7)) + "\n", "base_commit must be a string"),
        (json.dumps(_row(base_commit="")) + "\n", "must not be empty"),
        ((json.dumps(_row()) + "\n") * 2, "appears twice"),
        ("", "no instances"),
    ],
)
def test_bad_input_is_refused_whole_with_its_cause(tmp_path: Path, text: str, cause: str) -> None:
    # One good instance first: a file with a bad one is refused whole, never cut short.
    path = tmp_path / "t.jsonl"
    path.write_text((json.dumps(_row(instance_id="good-1")) + "\n" if text else "") + text)
    with pytest.raises(TaskFormatError, match=cause):
        load_instances(path)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="cannot read the instances"):
        load_instances(tmp_path / "nope.jsonl")


def test_predictions_are_what_the_official_harness_reads(tmp_path: Path) -> None:
    patch = "diff --git a/p.py b/p.py\n--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    preds = [Prediction("a-1", "ctxnb/keep-all", patch), Prediction("a-2", "ctxnb/keep-all", "")]
    path = write_predictions(preds, tmp_path / "preds.jsonl")
    # swebench.harness.utils.get_predictions_from_file: one json.loads per line, each a
    # dict with instance_id; run_evaluation reads model_name_or_path and model_patch.
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    assert lines == [
        {"instance_id": "a-1", "model_name_or_path": "ctxnb/keep-all", "model_patch": patch},
        {"instance_id": "a-2", "model_name_or_path": "ctxnb/keep-all", "model_patch": ""},
    ]
    assert load_predictions(path) == preds


def test_a_failed_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = write_predictions([Prediction("a-1", "m", "x")], tmp_path / "preds.jsonl")
    before = path.read_bytes()

    def rows():  # the run dies while the new file is written
        yield Prediction("a-2", "m", "y")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_predictions(rows(), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["preds.jsonl"]  # no temporary left


def test_an_instance_repr_is_short() -> None:
    inst = Instance.from_dict(_row())
    assert repr(inst) == (f"<Instance owner__repo-1 base={'a' * 12} FAIL_TO_PASS=2 PASS_TO_PASS=1>")
