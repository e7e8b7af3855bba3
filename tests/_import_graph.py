"""ctxnb's import graph read from its text, for the cycle and layer tests."""

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


def module_files() -> dict[str, Path]:
    """Every ctxnb module's file, by dotted name."""
    return _modules()


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
