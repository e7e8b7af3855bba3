"""Write tests/data/tasks/swebench_reference.json: the official swebench package's own
answers (its pytest log parser and grading functions) for a set of logs and expected ids.

ctxnb keeps SWE-bench's grading rules in ctxnb/tasks/grading.py because the package does
not import them without Docker's and Modal's clients (``swebench.harness`` imports both at
its top). This script imports the real functions with those clients replaced by empty
stand-ins (they are never called by the functions used here), so run it in a throwaway
environment:

    python -m venv /tmp/swb && /tmp/swb/bin/pip install --no-deps swebench==5.0.2
    /tmp/swb/bin/python scripts/make_swebench_reference.py tests/data/tasks/swebench_reference.json
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
from unittest import mock

_STANDINS = (
    "docker",
    "modal",
    "datasets",
    "tqdm",
    "unidiff",
    "requests",
    "dotenv",
    "ghapi",
    "git",
    "bs4",
    "rich",
    "typer",
    "tenacity",
    "yaml",
    "chardet",
)


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name.split(".")[0] in _STANDINS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        m = mock.MagicMock()
        m.__path__, m.__name__, m.__spec__ = [], spec.name, spec
        return m

    def exec_module(self, module):  # noqa: ANN001, ANN201
        pass


LOGS = {
    "plain": "PASSED t.py::test_a\nPASSED t.py::test_b\nFAILED t.py::test_c - assert 1 == 2\n",
    "skips": (
        "SKIPPED [1] t.py:12: no network\nSKIPPED t.py::test_s\nXFAIL t.py::test_x - reason\n"
        "ERROR t.py::test_e - ImportError\nPASSED t.py::test_a\n"
    ),
    "params": (
        "PASSED t.py::test_p[a(b)]\nPASSED t.py::test_p[a(c)]\nPASSED t.py::test_q[1]\n"
        "FAILED t.py::test_q[2] - x\nPASSED t.py::test_r[x y]\n"
    ),
    "noise": (
        "============ short test summary info ============\n  PASSED t.py::indented\n"
        "PASSED\nFAILED t.py::test_f - E   - where\nPASSED t.py::test_a\n"
        "=== 2 passed, 1 failed in 0.1s ===\n"
    ),
    "empty": "collected 0 items\n",
    "twice": "FAILED t.py::test_a\nPASSED t.py::test_a\n",
}
CASES = [
    ("plain", ["t.py::test_a"], ["t.py::test_b"]),
    ("plain", ["t.py::test_a", "t.py::test_c"], ["t.py::test_b"]),
    ("plain", ["t.py::test_c"], []),
    ("plain", ["t.py::test_a"], ["t.py::test_c"]),
    ("plain", [], []),
    ("plain", ["t.py::missing"], ["t.py::test_a"]),
    ("skips", ["t.py::test_s"], []),
    ("skips", ["t.py::test_x"], ["t.py::test_s"]),
    ("skips", ["t.py::test_a"], ["t.py::test_e"]),
    ("skips", ["[1]"], []),
    ("params", ["t.py::test_p[a"], []),
    ("params", ["t.py::test_q["], []),
    ("params", ["t.py::test_r[x"], []),
    ("params", ["t.py::test_q[1]"], ["t.py::test_p[a(b)]"]),
    ("noise", ["t.py::test_f", "t.py::indented"], ["t.py::test_a"]),
    ("empty", ["t.py::test_a"], []),
    ("twice", ["t.py::test_a"], []),
]


def main(out: str) -> None:
    sys.meta_path.insert(0, _StandIns())
    import swebench
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status
    from swebench.harness.log_parsers.python import parse_log_pytest

    parsed = {name: parse_log_pytest(log, None) for name, log in LOGS.items()}
    cases = []
    for log, f2p, p2p in CASES:
        report = get_eval_tests_report(parsed[log], {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
        cases.append(
            {
                "log": log,
                "FAIL_TO_PASS": f2p,
                "PASS_TO_PASS": p2p,
                "tests_status": {k: report[k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")},
                "status": get_resolution_status(report),
            }
        )
    data = {
        "about": "answers of the official swebench package's parse_log_pytest, "
        "get_eval_tests_report and get_resolution_status; made by "
        "scripts/make_swebench_reference.py",
        "swebench_version": swebench.__version__,
        "logs": LOGS,
        "parsed": parsed,
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
