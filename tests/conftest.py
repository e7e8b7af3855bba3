"""Shared fixtures: a clean environment per test, the sample workspace, vendored test data."""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _data import TEST_DATA
from _git import git

REPO = Path(__file__).resolve().parent.parent

# Tests that make real git commits need an identity on a fresh CI machine.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "ctxnb tests",
    "GIT_AUTHOR_EMAIL": "tests@ctxnb.invalid",
    "GIT_COMMITTER_NAME": "ctxnb tests",
    "GIT_COMMITTER_EMAIL": "tests@ctxnb.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def clean_environ(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Restore the environment and working directory after every test.

    Each test gets its own user state directory (where the Claude Code hooks keep
    session state) and an empty git configuration, so no test reads another's or the
    developer's.
    """
    cwd = os.getcwd()
    saved = dict(os.environ)
    for k, v in _GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CTXNB_STATE_DIR", str(tmp_path_factory.mktemp("user-state")))
    # The developer's git configuration (core.excludesFile, ~/.config/git/ignore) is
    # the host's: ignores read from it must not change what a test's walk sees.
    config = tmp_path_factory.mktemp("user-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config / "gitconfig"))
    loop_before = _current_event_loop()
    yield
    _close_event_loop_left_behind(loop_before)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(saved)
    _collect_dropped_workspaces()


def _current_event_loop() -> object:
    import asyncio

    policy = asyncio.get_event_loop_policy()
    return getattr(getattr(policy, "_local", None), "_loop", None)


def _close_event_loop_left_behind(before: object) -> None:
    """Close an event loop a test left set as this thread's current one.

    litellm sets up an event loop in the calling thread for its logging and never closes
    it. Left set, it is dropped only when a later test's ``asyncio.run``/``anyio.run``
    replaces it, and its unclosed sockets are then reported against that test (CI saw
    one such report fail an unrelated test). Closed here, at the end of the test that
    left it."""
    import asyncio

    loop = _current_event_loop()
    if loop is None or loop is before or not isinstance(loop, asyncio.AbstractEventLoop):
        return
    if not loop.is_running():
        loop.close()
        asyncio.get_event_loop_policy().set_event_loop(before)  # type: ignore[arg-type]


_FD_DIR = "/proc/self/fd"
_COLLECT_EVERY_TEST = os.environ.get("CTXNB_TEST_COLLECT") == "1"


def _collect_dropped_workspaces() -> None:
    """Many tests drop a workspace without closing it; it is cyclic garbage that keeps
    its store's and audit log's descriptors until a full collection, which a long
    session rarely runs. Collect when descriptors pile up, so that one test session
    stays far from the descriptor limit (a test lowers it on purpose).

    ``CTXNB_TEST_COLLECT=1`` collects after every test instead: an unclosed socket or
    event loop is then reported against the test that left it, not against whichever
    test a later collection happens to run in."""
    if _COLLECT_EVERY_TEST or (os.path.isdir(_FD_DIR) and len(os.listdir(_FD_DIR)) > 128):
        gc.collect()


@pytest.fixture
def test_data() -> Path:
    """The vendored fixtures in ``tests/data``."""
    return TEST_DATA


@pytest.fixture
def sample_ws(tmp_path: Path) -> Path:
    """A fresh copy of the sample workspace."""
    dest = tmp_path / "tinyinv"
    shutil.copytree(REPO / "data" / "sample_workspace", dest)
    return dest


@pytest.fixture
def git_repo(sample_ws: Path) -> Path:
    """The sample workspace as a real git repository with one commit."""
    git(sample_ws, "init", "-q", "-b", "main")
    git(sample_ws, "add", "-A")
    git(sample_ws, "commit", "-q", "-m", "initial")
    return sample_ws


@pytest.fixture
def live_deps() -> Iterator[None]:
    """Live runs need mini-swe-agent and litellm (the event loop litellm leaves set is
    closed after every test: see ``_close_event_loop_left_behind``)."""
    from _needs import has_module, require

    require(has_module("minisweagent") and has_module("litellm"), "mini-swe-agent and litellm")
    yield
