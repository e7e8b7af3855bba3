"""The import graph of ctxnb has no cycle, counting lazy imports inside functions too.

A cycle means two modules each need the other, so neither can be understood or tested
on its own. That imports only ever run downward, from wing to wing (docs/architecture.md),
is kept by tests/test_layers.py over the same graph. Imports under ``if TYPE_CHECKING:`` are left
out: they name a type for the checker and never run (the lower layers type their
workspace as :class:`ctxnb.access.Access` all the same, so none of them needs one).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import ctxnb

PACKAGE = Path(ctxnb.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def module_imports(name: str, path: Path, modules: Collection[str]) -> list[tuple[int, str]]:
    """(line, ctxnb module) for every import in a module's text that runs.

    Module-level and function-level imports both count; imports under ``if
    TYPE_CHECKING:`` do not.
    """
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for n in ast.walk(stmt)
    }
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        deps: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names]
            hits = [s for s in subs if s in modules]
            # `from . import x` imports the submodule x, not the package's other names.
            deps = hits if len(hits) == len(subs) else [*hits, target]
        elif isinstance(node, ast.Import):
            deps = [a.name for a in node.names]
        found.update((node.lineno, d) for d in deps if d in modules and d != name)
    return sorted(found)


def import_graph() -> dict[str, set[str]]:
    """Module -> the ctxnb modules it imports anywhere in its text."""
    modules = _modules()
    return {
        name: {target for _, target in module_imports(name, path, modules)}
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_lazy_imports_and_skips_typing_ones() -> None:
    graph = import_graph()
    assert "ctxnb.govern.engine" in graph["ctxnb.workspace"]  # an import inside a method
    assert "ctxnb.access.observe" in graph["ctxnb.session._resume"]  # at the top
    assert "ctxnb.access.door" not in graph["ctxnb.session.core"]  # only under TYPE_CHECKING


def test_no_import_cycle() -> None:
    graph = import_graph()
    # The package's own __init__ re-exports everything lazily; nothing may import it.
    importers = sorted(m for m, deps in graph.items() if "ctxnb" in deps)
    assert importers == [], f"modules importing the ctxnb package itself: {importers}"
    cycle = find_cycle({m: d for m, d in graph.items() if m != "ctxnb"})
    assert cycle is None, " -> ".join(cycle or [])
