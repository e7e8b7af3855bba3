"""Tests that need an optional tool skip on a developer machine without it, never in CI.

CI (``CI=true``) installs everything these tests need, so there a missing tool is a
failure, not a skip: a skip must never hide work that does not run.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def needs(available: bool, what: str) -> pytest.MarkDecorator:
    """Mark: skip without ``what`` locally; in CI run anyway, so a missing install fails."""
    return pytest.mark.skipif(
        not available and not IN_CI, reason=f"{what} is not available here (CI installs it)"
    )


def require(available: bool, what: str) -> None:
    """Inside a test or at module level: skip locally, fail in CI, when ``what`` is missing."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is missing, and CI must provide it", pytrace=False)
    pytest.skip(f"{what} is not available here (CI installs it)")
