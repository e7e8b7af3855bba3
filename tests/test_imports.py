"""The import graph of ctxnb has no cycle, counting lazy imports inside functions too.

A cycle means two modules each need the other, so neither can be understood or tested
on its own. That imports only ever run downward, from wing to wing (docs/architecture.md),
is kept by tests/test_layers.py over the same graph. Imports under ``if TYPE_CHECKING:`` are left
out: they name a type for the checker and never run (the lower layers type their
workspace as :class:`ctxnb.access.Access` all the same, so none of them needs one).
"""

from __future__ import annotations

import ast

from _import_graph import import_graph, module_files


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


# Classes cut across modules by inheritance (issue 41 turned each into composition): none
# is left, and a new entry would be a class split to meet a line count.
SPLIT_CLASSES: set[tuple[str, str, str]] = set()


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Names a module imports from ctxnb modules, typing-only imports included."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").startswith("ctxnb")
        ):
            for alias in node.names:
                out[alias.asname or alias.name] = node.module or ""
    return out


def test_no_class_extends_a_private_class_of_another_module() -> None:
    # httpx's Client has a transport: a part of a class lives in another module as an
    # object the class holds, not as a private base class it inherits.
    found = set()
    for name, path in module_files().items():
        tree = ast.parse(path.read_text())
        imported = _imported_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if isinstance(base, ast.Name) and base.id.startswith("_"):
                        if base.id in imported:
                            found.add((name, node.name, base.id))
    assert found - SPLIT_CLASSES == set(), "classes split across modules by inheritance"
    assert SPLIT_CLASSES - found == set(), "made whole: take them off SPLIT_CLASSES"


def test_file_tool_helpers_are_given_file_sources_not_file_tools() -> None:
    # Even a typing-only import of filetools would let a helper reach into FileTools'
    # privates again; they are given FileSources.
    for helper in ("lookups", "writing", "restore", "_filesources"):
        tree = ast.parse(module_files()[f"ctxnb.tools.{helper}"].read_text())
        imports = set(_imported_names(tree).values())
        assert not any(m.endswith("filetools") for m in imports), f"{helper} imports filetools"
        assert "FileTools" not in {
            ast.unparse(a.annotation)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef)
            for a in f.args.args
            if a.annotation is not None
        }


def test_session_helpers_are_given_its_state_not_the_session() -> None:
    # A session has its state (session/state.py); the resume fills one and the watcher
    # uses the session's public methods. Even a typing-only import of session/core.py
    # would let a helper reach into Session's privates again.
    for helper in ("_resume", "state", "watch", "_columns", "_cold"):
        tree = ast.parse(module_files()[f"ctxnb.session.{helper}"].read_text())
        imports = set(_imported_names(tree).values())
        assert not {"core", "session.core", "ctxnb.session.core"} & imports, helper
        annotations = {
            ast.unparse(a.annotation)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef)
            for a in f.args.args
            if a.annotation is not None
        }
        assert "Session" not in annotations, helper


def test_the_descriptor_walk_judges_names_through_the_rules_public_methods() -> None:
    # A path policy has a walk (access/_fdwalk.py) and hands it its rules; the walk asks
    # them through their public methods, never their private attributes.
    tree = ast.parse(module_files()["ctxnb.access._fdwalk"].read_text())
    reaches = sorted(
        {
            ast.unparse(n)
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and n.attr.startswith("_")
            and not n.attr.startswith("__")
            and "rules" in ast.unparse(n.value)
        }
    )
    assert reaches == []


def test_commands_are_run_by_the_sandbox_wing_not_by_the_engine() -> None:
    # The run_command tool, the sandbox of an intent and the commit of a command's changes
    # live in ctxnb.sandbox; the engine reaches them through the one object it holds.
    graph = import_graph()
    from_sandbox = {m for m in graph["ctxnb.govern.engine"] if m.startswith("ctxnb.sandbox")}
    assert from_sandbox == {"ctxnb.sandbox.commands"}
    assert "ctxnb.sandbox.commit" in graph["ctxnb.sandbox.commands"]
