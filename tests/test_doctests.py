"""Every docstring example of every ctxnb module runs, so the docs cannot go stale.

One test per module (the module docstring and every function's and class's examples).
A module whose optional dependency is missing skips here, fails in CI (``tests/_needs.py``).
"""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
from pathlib import Path

import pytest
from _needs import require

import ctxnb

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(ctxnb.__path__, prefix="ctxnb.")
    if m.name != "ctxnb.__main__"
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Examples name repository data by relative path and may list PATH (the sandbox).
    monkeypatch.chdir(Path(ctxnb.__file__).resolve().parent.parent)
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"]))
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:  # an optional extra (mcp, tiktoken, litellm …)
        if e.name is None or e.name.split(".")[0] == "ctxnb":
            raise
        require(False, f"the optional module {e.name!r} that {name} needs")
        return
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_examples_are_many() -> None:
    # Public entry points carry examples (STYLE.md); a sweep that found few would be broken.
    attempted = 0
    for name in (
        "ctxnb.access.pathrules",
        "ctxnb.access.fdio",
        "ctxnb.access.door",
        "ctxnb.govern.core",
    ):
        attempted += doctest.testmod(
            importlib.import_module(name), optionflags=doctest.ELLIPSIS
        ).attempted
    assert attempted > 20
