"""The import graph of ctxnb has no cycle, counting lazy imports inside functions too.

A cycle means two modules each need the other, so neither can be understood or tested
on its own. That imports only ever run downward, from wing to wing (docs/architecture.md),
is kept by tests/test_layers.py over the same graph. Imports under ``if TYPE_CHECKING:`` are left
out: they name a type for the checker and never run (the lower layers type their
workspace as :class:`ctxnb.access.Access` all the same, so none of them needs one).
"""

from __future__ import annotations

from _import_graph import import_graph


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
