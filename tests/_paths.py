"""Where the tests and the repository are, for test modules at any depth of tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
