"""SWE-bench's grading, kept in ctxnb, gives the official package's own answers."""

from __future__ import annotations

import json

import pytest
from _tasks import TASK_DATA

from ctxnb.tasks import grade, parse_pytest_log

REFERENCE = json.loads((TASK_DATA / "swebench_reference.json").read_text())


@pytest.mark.parametrize("name", sorted(REFERENCE["logs"]))
def test_the_log_parser_reads_each_log_as_swebench_does(name: str) -> None:
    assert parse_pytest_log(REFERENCE["logs"][name]) == REFERENCE["parsed"][name]


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda c: f"{c['log']}-{c['status']}")
def test_grading_gives_swebenchs_report_and_status(case: dict) -> None:
    statuses = parse_pytest_log(REFERENCE["logs"][case["log"]])
    report = grade(statuses, case["FAIL_TO_PASS"], case["PASS_TO_PASS"])
    assert report.tests_status() == case["tests_status"]
    assert report.status == case["status"]
    assert report.resolved == (case["status"] == "RESOLVED_FULL")


def test_the_reference_covers_every_status() -> None:
    # A skeptic's check that the vectors are worth comparing against.
    assert REFERENCE["swebench_version"] == "5.0.2"
    seen = {c["status"] for c in REFERENCE["cases"]}
    assert seen == {"RESOLVED_FULL", "RESOLVED_PARTIAL", "RESOLVED_NO"}
    statuses = {s for parsed in REFERENCE["parsed"].values() for s in parsed.values()}
    assert statuses == {"PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"}
