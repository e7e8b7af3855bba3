"""Nothing in ctxnb imports upward: the wings of docs/architecture.md, kept by a test.

Every module of the package belongs to one wing (the table below, which
docs/architecture.md draws), and the wings are ordered top to bottom. A module may
import from its own wing and from any wing below it, never from a wing above: the
lower wings are understood and tested without the upper ones, and a change in an upper
wing cannot break a lower one. Imports are read with :mod:`ast` from each module's
text, at module level and inside functions alike (a lazy import still runs), and so
are the modules behind a package's lazy exports (``lazy_exports``); imports under
``if TYPE_CHECKING:`` name a type for the checker and never run, so they do not count.
``tests/test_imports.py`` builds the graph; this test orders it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from _import_graph import _modules, import_graph, module_imports

REPO = Path(__file__).resolve().parent.parent

# Top to bottom. A wing lists the packages (folders) and single modules it holds; a
# package holds its submodules. The longest matching name decides (``ctxnb`` alone is the
# package's own ``__init__``).
WINGS: dict[str, tuple[str, ...]] = {
    # Callers: the command line, the integrations, live runs, replays, notebook views,
    # frames and plots. They use the wings below and nothing below uses them.
    "front": (
        "ctxnb",
        "ctxnb.__main__",
        "ctxnb.cli",
        "ctxnb.demo",
        "ctxnb.samples",
        "ctxnb.data",  # the sample workspaces samples.py copies: package data, not code
        "ctxnb.telemetry",
        "ctxnb.analysis",
        "ctxnb.integrations",
        "ctxnb.live",
        "ctxnb.replay",
        "ctxnb.tasks",
        "ctxnb.widgets",
    ),
    # One directory tree wired up: its settings, store, resolver, session, tools, engine.
    "workspace": ("ctxnb.workspace",),
    # What the agent may do, and why each change was made.
    "govern": ("ctxnb.govern",),
    # Confined commands and the commit of what they did.
    "sandbox": ("ctxnb.sandbox",),
    # The file tools an agent calls.
    "tools": ("ctxnb.tools",),
    # What an agent has seen and has active; the instruction files and skills in play.
    "session": ("ctxnb.session", "ctxnb.instructions"),
    # What the model sees and what it costs: assembly, strategies, tokens, prices, calls.
    "context": ("ctxnb.context", "ctxnb.strategies", "ctxnb.llm"),
    # Lexical and semantic search, markdown links, ranking tools for a task.
    "retrieval": ("ctxnb.retrieval",),
    # The workspace's settings, read by every wing above the access layer.
    "settings": ("ctxnb.config",),
    # The one door: agent paths, path rules, race-free I/O, ignores, indexing.
    "access": ("ctxnb.access", "ctxnb.resolver", "ctxnb.indexer"),
    # Every version of every object, in Parquet.
    "store": ("ctxnb.store", "ctxnb.model", "ctxnb.ids"),
    # Helpers that know no wing: errors, hashes, the one redaction, the shell lexer and
    # command risk, small private helpers.
    "base": (
        "ctxnb.errors",
        "ctxnb.hashing",
        "ctxnb.redaction",
        "ctxnb.shell",
        "ctxnb._html",
        "ctxnb._util",
        "ctxnb._version",
    ),
}
ORDER = list(WINGS)

# Upward imports that remain, each with its reason; the list only shrinks (a test below
# fails on an entry whose import is gone). There are none.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def _holds(entry: str, module: str) -> bool:
    """``ctxnb.store`` holds ``ctxnb.store._log``; ``ctxnb`` holds only its ``__init__``."""
    if entry == "ctxnb":  # the package's own __init__, not everything in it
        return module == "ctxnb"
    return module == entry or module.startswith(entry + ".")


def wing_of(module: str) -> str:
    """The wing a module belongs to (KeyError when no wing holds it)."""
    best = ""
    wing = None
    for name, prefixes in WINGS.items():
        for prefix in prefixes:
            if _holds(prefix, module) and len(prefix) > len(best):
                best, wing = prefix, name
    if wing is None:
        raise KeyError(f"{module} is in no wing: add it to WINGS and to docs/architecture.md")
    return wing


def lazy_targets(name: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) for each name a package exports lazily (``lazy_exports``): it runs
    an import on first use, so it counts as one."""
    tree = ast.parse(path.read_text())
    maps = {
        node.args[1].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "lazy_exports"
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Name)
    }
    found: list[tuple[int, str]] = []
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if not (isinstance(target, ast.Name) and target.id in maps and isinstance(value, ast.Dict)):
            continue
        for v in value.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                module = v.value if v.value.startswith("ctxnb") else f"{name}.{v.value}"
                found.append((v.lineno, module))
    return found


def upward_imports(modules: dict[str, Path] | None = None) -> list[str]:
    """Every import that reaches a higher wing and is not allowed, as a readable line."""
    modules = _modules() if modules is None else modules
    found: list[str] = []
    for name, path in sorted(modules.items()):
        here = wing_of(name)
        for line, target in [*module_imports(name, path, modules), *lazy_targets(name, path)]:
            there = wing_of(target)
            if ORDER.index(there) < ORDER.index(here) and (name, target) not in ALLOWED_UPWARD:
                shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
                found.append(
                    f"{shown}:{line}: {name} ({here} wing) imports "
                    f"{target}, which sits in the {there} wing above it"
                )
    return found


def test_every_module_is_in_a_wing() -> None:
    for name in _modules():
        assert wing_of(name) in ORDER


def test_the_map_places_modules_as_the_architecture_says() -> None:
    assert ORDER[2:10] == [
        "govern",
        "sandbox",
        "tools",
        "session",
        "context",
        "retrieval",
        "settings",
        "access",
    ]
    assert wing_of("ctxnb.tools.filetools") == "tools"
    assert wing_of("ctxnb.tools") == "tools"
    assert wing_of("ctxnb.store._log") == "store"
    assert wing_of("ctxnb.redaction._patterns") == "base"
    assert wing_of("ctxnb.cli.govern") == "front"  # a wing's commands are a front end
    assert wing_of("ctxnb") == "front" and wing_of("ctxnb.config") == "settings"
    with pytest.raises(KeyError, match="ctxnb.nowhere is in no wing"):
        wing_of("ctxnb.nowhere")


def test_the_checker_finds_upward_imports_anywhere_but_under_type_checking(
    tmp_path: Path,
) -> None:
    """A small package with one import of each kind: the two that run are caught."""
    files = {
        "ctxnb.store": (
            "from typing import TYPE_CHECKING\n"
            "from .errors import CtxnbError\n"  # downward: fine
            "if TYPE_CHECKING:\n"
            "    from .session import Session\n"  # never runs: fine
            "def f():\n"
            "    from .govern import engine\n"  # runs when f is called: upward
            "    return engine\n"
        ),
        "ctxnb.access.door": "import ctxnb.context\n",  # module level: upward
        "ctxnb.errors": "",
        "ctxnb.session.core": "",
        "ctxnb.context": "",
        "ctxnb.govern": "",
        "ctxnb.govern.engine": "from ..store import f\n",  # downward: fine
        "ctxnb.access": (
            "from .._lazy import lazy_exports\n"
            '_EXPORTS = {"PathPolicy": "fdio", "Session": "ctxnb.session.core"}\n'  # lazy: upward
            "__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), [])\n"
        ),
        "ctxnb.access.fdio": "",
        "ctxnb._util.lazy": "",
    }
    modules = {name: tmp_path / f"{name.replace('.', '_')}.py" for name in files}
    for name, text in files.items():
        modules[name].write_text(text)
    assert upward_imports(modules) == [
        "ctxnb_access.py:2: ctxnb.access (access wing) imports ctxnb.session.core, "
        "which sits in the session wing above it",
        "ctxnb_access_door.py:1: ctxnb.access.door (access wing) imports ctxnb.context, "
        "which sits in the context wing above it",
        "ctxnb_store.py:6: ctxnb.store (store wing) imports ctxnb.govern.engine, "
        "which sits in the govern wing above it",
    ]


def test_nothing_imports_upward() -> None:
    found = upward_imports()
    assert not found, "imports that run upward:\n" + "\n".join(found)


def test_the_allow_list_holds_only_imports_that_exist() -> None:
    """An entry the code no longer needs is removed, so the list only shrinks."""
    graph = import_graph()
    stale = [pair for pair in ALLOWED_UPWARD if pair[1] not in graph.get(pair[0], set())]
    assert not stale, f"remove from ALLOWED_UPWARD, the import is gone: {stale}"
    for pair, reason in ALLOWED_UPWARD.items():
        assert ORDER.index(wing_of(pair[1])) < ORDER.index(wing_of(pair[0])), pair
        assert reason.strip(), pair


def _documented_wings() -> dict[str, set[str]]:
    """docs/architecture.md's table: wing -> the module names its "holds" cell lists."""
    rows: dict[str, set[str]] = {}
    for line in (REPO / "docs" / "architecture.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.fullmatch(r"\*\*\w+\*\*", cells[0]):
            continue
        names = set()
        for path in re.findall(r"`([^`]+)`", cells[1]):
            name = path.rstrip("/").removesuffix(".py").replace("/", ".")
            names.add(name.removesuffix(".__init__"))
        rows[cells[0].strip("*")] = names
    return rows


def test_the_architecture_page_draws_this_map() -> None:
    documented = _documented_wings()
    assert list(documented) == ORDER, "docs/architecture.md lists the wings in this order"
    for wing, entries in WINGS.items():
        assert documented[wing] == set(entries), wing
