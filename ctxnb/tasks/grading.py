"""Grading a run of named tests the way SWE-bench grades it.

The official ``swebench`` package (5.0.2) does not import its grading without Docker's
and Modal's clients, so these are its rules, kept to the letter
(``swebench/harness/log_parsers/python.py: parse_log_pytest`` and
``swebench/harness/grading.py``; MIT licence) and checked against the package's own
answers (``tests/data/tasks/swebench_reference.json``, made with the real functions):

- a pytest log read with ``-rA``: each line that starts with a status (``PASSED``,
  ``FAILED``, ``SKIPPED``, ``ERROR``, ``XFAIL``) names a test; pytest's
  ``SKIPPED [N] file:line`` summaries are not tests;
- a FAIL_TO_PASS test succeeds when it passed (or xfailed); a PASS_TO_PASS test when it
  passed, xfailed or was skipped; a test the log does not name failed;
- an expected id cut off inside its parameters (``test_x[a`` for ``test_x[a(b)]``, a
  defect of some published ids) matches the ids it begins, when they agree;
- resolved (``RESOLVED_FULL``) when every FAIL_TO_PASS and every PASS_TO_PASS test
  succeeds; ``RESOLVED_PARTIAL`` when some FAIL_TO_PASS tests do and all PASS_TO_PASS do;
  else ``RESOLVED_NO``.

Example:
    >>> log = "PASSED t.py::test_a\\nFAILED t.py::test_b - assert 1 == 2\\n"
    >>> parse_pytest_log(log)
    {'t.py::test_a': 'PASSED', 't.py::test_b': 'FAILED'}
    >>> grade(parse_pytest_log(log), ["t.py::test_a"], ["t.py::test_b"]).status
    'RESOLVED_NO'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["STATUSES", "Report", "grade", "parse_pytest_log"]

#: The statuses a pytest ``-rA`` summary line starts with.
STATUSES: tuple[str, ...] = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
_PASSING = ("PASSED", "XFAIL")
_SKIP_SUMMARY = re.compile(r"^\[\d+\]$")


def parse_pytest_log(log: str) -> dict[str, str]:
    """Test id -> status, from the summary lines of a ``pytest -rA`` log."""
    out: dict[str, str] = {}
    for line in log.split("\n"):
        if not line.startswith(STATUSES):
            continue
        if line.startswith("FAILED"):
            line = line.replace(" - ", " ")
        words = line.split()
        if len(words) <= 1:
            continue
        if words[0] == "SKIPPED" and _SKIP_SUMMARY.match(words[1]):
            continue
        out[words[1]] = words[0]
    return out


def _key(case: str, statuses: Mapping[str, str]) -> str | None:
    if case in statuses:
        return case
    if case.count("[") > case.count("]"):
        matches = [k for k in statuses if k.startswith(case)]
        if matches and len({statuses[k] in _PASSING for k in matches}) == 1:
            return matches[0]
    return None


def _passed(case: str, statuses: Mapping[str, str]) -> bool:
    key = _key(case, statuses)
    return key is not None and statuses[key] in _PASSING


def _kept(case: str, statuses: Mapping[str, str]) -> bool:
    key = _key(case, statuses)
    return _passed(case, statuses) or (key is not None and statuses[key] == "SKIPPED")


@dataclass(frozen=True)
class Report:
    """How the named tests fared.

    Attributes:
        fail_to_pass_success: FAIL_TO_PASS tests that now pass.
        fail_to_pass_failure: FAIL_TO_PASS tests that do not.
        pass_to_pass_success: PASS_TO_PASS tests still passing.
        pass_to_pass_failure: PASS_TO_PASS tests that broke.
    """

    fail_to_pass_success: tuple[str, ...]
    fail_to_pass_failure: tuple[str, ...]
    pass_to_pass_success: tuple[str, ...]
    pass_to_pass_failure: tuple[str, ...]

    @property
    def status(self) -> str:
        """``RESOLVED_FULL``, ``RESOLVED_PARTIAL`` or ``RESOLVED_NO``, as SWE-bench says."""
        f2p = _share(self.fail_to_pass_success, self.fail_to_pass_failure)
        p2p = _share(self.pass_to_pass_success, self.pass_to_pass_failure)
        if f2p == 1 and p2p == 1:
            return "RESOLVED_FULL"
        if 0 < f2p < 1 and p2p == 1:
            return "RESOLVED_PARTIAL"
        return "RESOLVED_NO"

    @property
    def resolved(self) -> bool:
        return self.status == "RESOLVED_FULL"

    def tests_status(self) -> dict[str, dict[str, list[str]]]:
        """The report's ``tests_status`` as the official harness writes it."""
        return {
            "FAIL_TO_PASS": {
                "success": list(self.fail_to_pass_success),
                "failure": list(self.fail_to_pass_failure),
            },
            "PASS_TO_PASS": {
                "success": list(self.pass_to_pass_success),
                "failure": list(self.pass_to_pass_failure),
            },
        }


def _share(success: Sequence[str], failure: Sequence[str]) -> float:
    total = len(success) + len(failure)
    return 1.0 if total == 0 else len(success) / total


def grade(
    statuses: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> Report:
    """Grade a run's statuses (from :func:`parse_pytest_log`) against the expected ids."""
    f2p_ok = tuple(t for t in fail_to_pass if _passed(t, statuses))
    p2p_ok = tuple(t for t in pass_to_pass if _kept(t, statuses))
    return Report(
        fail_to_pass_success=f2p_ok,
        fail_to_pass_failure=tuple(t for t in fail_to_pass if t not in f2p_ok),
        pass_to_pass_success=p2p_ok,
        pass_to_pass_failure=tuple(t for t in pass_to_pass if t not in p2p_ok),
    )
