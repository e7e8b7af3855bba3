"""The real repositories of tests/data/tasks/ and data/tasks/ (git bundles), cloned for a
test (parse's ships in the package, for tutorial 07)."""

import subprocess
import sys
from pathlib import Path

from _git import git
from _paths import REPO, TESTS

from ctxnb.llm.prices import PriceTable
from ctxnb.tasks import Instance

TASK_DATA = TESTS / "data" / "tasks"
# The bundles the package ships (setup.py copies data/ into the wheel).
SHIPPED_TASKS = REPO / "data" / "tasks"
PYTHON = sys.executable
# The tests' command: plugins of this (large) environment are not loaded, so a round
# starts in a second, and parse's own `addopts` (which asks for pytest-cov) is set aside.
FAST_CMD = (
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest -rA --tb=no --show-capture=no "
    "-p no:cacheprovider -o addopts= {tests}"
)


def clone(name: str, dest: Path) -> Path:
    """A checkout of ``<name>.bundle`` (in data/tasks/ or tests/data/tasks/) at ``dest``
    (its ``main``)."""
    bundle = next(
        (
            d / f"{name}.bundle"
            for d in (SHIPPED_TASKS, TASK_DATA)
            if (d / f"{name}.bundle").is_file()
        ),
        TASK_DATA / f"{name}.bundle",
    )
    subprocess.run(
        ["git", "clone", "--quiet", str(bundle), str(dest)],
        check=True,
        capture_output=True,
    )
    return dest


F2P = ("tests/test_parse.py::test_numbers",)
P2P = ("tests/test_parse.py::test_no_match", "tests/test_parse.py::test_hexadecimal")


def parse_instance(repo: Path, **over: object) -> Instance:
    """parse's own fix "Allow grouping char (,_) in decimal format string (#221)" as an
    instance spelled as the official dataset spells one (``over`` replaces keys)."""
    commit = git(repo, "log", "--format=%H", "-1", "--grep=Allow grouping char")
    parent = git(repo, "rev-parse", f"{commit}^")

    def diff(*paths: str) -> str:
        return git(repo, "diff", parent, commit, "--", *paths) + "\n"

    row: dict[str, object] = {
        "instance_id": "r1chardj0n3s__parse-221",
        "repo": "r1chardj0n3s/parse",
        "base_commit": parent,
        "problem_statement": git(repo, "log", "-1", "--format=%B", commit),
        "test_patch": diff("tests"),
        "patch": diff("parse.py"),
        "FAIL_TO_PASS": list(F2P),
        "PASS_TO_PASS": list(P2P),
        "test_cmd": FAST_CMD,
    }
    row.update(over)
    return Instance.from_dict(row)


def scripted_prices() -> PriceTable:
    """The scripted model billed as a real one, so that its dollars can be checked."""
    return PriceTable.default().with_prices(
        {"ctxnb-scripted": PriceTable.default().get("gpt-5-mini")}
    )
