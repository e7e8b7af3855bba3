"""The real repositories of tests/data/tasks/ (git bundles), cloned for a test."""

import subprocess
import sys
from pathlib import Path

from _paths import TESTS

TASK_DATA = TESTS / "data" / "tasks"
PYTHON = sys.executable
# The tests' command: plugins of this (large) environment are not loaded, so a round
# starts in a second, and parse's own `addopts` (which asks for pytest-cov) is set aside.
FAST_CMD = (
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest -rA --tb=no --show-capture=no "
    "-p no:cacheprovider -o addopts= {tests}"
)


def clone(name: str, dest: Path) -> Path:
    """A checkout of ``tests/data/tasks/<name>.bundle`` at ``dest`` (its ``main``)."""
    subprocess.run(
        ["git", "clone", "--quiet", str(TASK_DATA / f"{name}.bundle"), str(dest)],
        check=True,
        capture_output=True,
    )
    return dest
