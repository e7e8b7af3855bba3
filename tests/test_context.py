"""ctxnb.context: assembly lives here, sessions delegate, and nothing imports upward."""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

import ctxnb.context as context_pkg
from ctxnb import Workspace
from ctxnb.context import context_at
from ctxnb.strategies import ObservationMasking

CONTEXT_DIR = Path(context_pkg.__file__).parent


@pytest.mark.parametrize("name", ["", "._assembly", "._framing", "._model"])
def test_doctests(name: str) -> None:
    mod = importlib.import_module("ctxnb.context" + name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_context_never_imports_the_session_or_higher_layers() -> None:
    upward = {"session", "workspace", "tools", "govern", "widgets", "integrations", "replay"}
    for path in CONTEXT_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                modules = [node.module or ""]  # ``from ..x import`` leaves the package
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [(node.module or "").removeprefix("ctxnb.")]
            elif isinstance(node, ast.Import):
                modules = [a.name.removeprefix("ctxnb.") for a in node.names]
            for m in modules:
                assert m.split(".")[0] not in upward, f"{path.name} imports {m}"


def test_session_delegates_and_context_at_rebuilds(sample_ws: Path) -> None:
    ws = Workspace.open(sample_ws)
    s = ws.session("delegate", system_prompt="Be brief.")
    fid = s.add_path("inventory/models.py")
    s.add_turn("user", "Look at the models.")
    s.record_toolcall("run", {"cmd": "ls"}, "models.py\n")
    s.record_toolcall("run", {"cmd": "pwd"}, "/w\n")
    first = s.assemble(ObservationMasking(keep_last=1))
    (sample_ws / "inventory" / "models.py").write_text("changed = True\n")
    s.add_turn("assistant", "Done.")
    s.add_path("inventory/models.py")
    second = s.assemble()
    assert first.hash != second.hash
    for turn, ctx in ((1, first), (2, second)):
        again = context_at(
            ws.store,
            "delegate",
            turn,
            assembler=s._assembler,
            reverse_resolve=ws.resolver.reverse_resolve,
        )
        assert again.hash == ctx.hash == s.context_at(turn).hash
        assert again.to_text() == ctx.to_text()
    assert "changed = True" not in first.to_text()
    assert fid in {it.id for it in second.items}
