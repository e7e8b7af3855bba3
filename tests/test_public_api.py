"""The public surface stays explicit, sorted and importable."""

import importlib
import subprocess
import sys

import pytest

import ctxnb


def test_all_is_sorted_and_unique():
    assert ctxnb.__all__ == sorted(ctxnb.__all__)
    assert len(set(ctxnb.__all__)) == len(ctxnb.__all__)


# The packages a user imports names from: ctxnb and each wing's face.
PUBLIC_PACKAGES = (
    "ctxnb",
    "ctxnb.access",
    "ctxnb.cli",
    "ctxnb.context",
    "ctxnb.govern",
    "ctxnb.instructions",
    "ctxnb.live",
    "ctxnb.llm",
    "ctxnb.redaction",
    "ctxnb.replay",
    "ctxnb.sandbox",
    "ctxnb.session",
    "ctxnb.store",
    "ctxnb.strategies",
    "ctxnb.tasks",
    "ctxnb.tools",
)

# Module paths users and docs import from; each keeps working whatever moves inside.
STABLE_PATHS = (
    "ctxnb.store",
    "ctxnb.session",
    "ctxnb.redaction",
    "ctxnb.strategies",
    "ctxnb.llm",
    "ctxnb.resolver",
    "ctxnb.hashing",
    "ctxnb.errors",
    "ctxnb.model",
    "ctxnb.indexer",
    "ctxnb.config",
    "ctxnb.workspace",
    "ctxnb.replay",
    "ctxnb.live",
    "ctxnb.govern.approval",
    "ctxnb.sandbox.plan",
    "ctxnb.integrations.mcp_server",
)


def _top_level_definitions() -> dict[str, list[str]]:
    """Name -> the ctxnb modules whose top level defines it (class, def or assignment)."""
    import ast
    from pathlib import Path

    root = Path(ctxnb.__file__).parent
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text()).body:
            names: list[str] = []
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                out.setdefault(name, []).append(module)
    return out


def _defined_in_ctxnb(value: object, name: str, definitions: dict[str, list[str]]) -> bool:
    """Whether ``value`` is the object a ctxnb module defines under ``name``."""
    import types

    if isinstance(value, types.ModuleType):  # a submodule shadowing a public name
        return False
    return any(
        getattr(importlib.import_module(module), name, None) is value
        for module in definitions.get(name, ())
    )


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_public_name_is_an_object_ctxnb_defines(package: str) -> None:
    """Each name of a package's ``__all__`` resolves, and to what a ctxnb module defines
    under that name: not a submodule of the same name, not something of another library."""
    import pkgutil

    definitions = _top_level_definitions()
    pkg = importlib.import_module(package)
    if package != "ctxnb":
        # Import every submodule first: importing ``ctxnb.replay.runner`` binds the name
        # ``runner`` in the package, and a submodule named like a public name would
        # replace that name with itself, depending on what was imported before.
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{package}.{info.name}")
    wrong = [
        name for name in pkg.__all__ if not _defined_in_ctxnb(getattr(pkg, name), name, definitions)
    ]
    assert wrong == [], f"{package}: names that resolve to no object ctxnb defines: {wrong}"


def test_the_public_name_check_fails_on_a_submodule_or_a_foreign_object() -> None:
    import json

    import ctxnb.store._log as log_module

    definitions = _top_level_definitions()
    assert _defined_in_ctxnb(ctxnb.Workspace, "Workspace", definitions)
    assert not _defined_in_ctxnb(log_module, "_log", definitions)  # a module, not a name
    assert not _defined_in_ctxnb(json.dumps, "dumps", definitions)  # another library's
    assert not _defined_in_ctxnb(ctxnb.Session, "Workspace", definitions)  # the wrong object


@pytest.mark.parametrize("path", STABLE_PATHS)
def test_documented_module_paths_import(path: str) -> None:
    module = importlib.import_module(path)
    assert module.__name__ == path
    assert set(dir(ctxnb)) == set(ctxnb.__all__)


def test_lazy_names_come_from_their_modules():
    for name, module in ctxnb._LAZY.items():
        assert getattr(importlib.import_module(module), name) is getattr(ctxnb, name)


def test_every_error_derives_from_the_root():
    from ctxnb import errors

    for name in errors.__all__:
        obj = getattr(errors, name)
        assert issubclass(obj, ctxnb.CtxnbError), name
        assert name in ctxnb.__all__


def test_unknown_attribute_is_an_attribute_error():
    try:
        ctxnb.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_import_ctxnb_is_light():
    code = (
        "import sys, ctxnb, ctxnb.cli.app; "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_subpackage_surfaces():
    import ctxnb.govern
    import ctxnb.replay
    import ctxnb.tools

    for pkg in (ctxnb.tools, ctxnb.replay, ctxnb.govern):
        assert list(pkg.__all__) == sorted(pkg.__all__), pkg.__name__
        for name in pkg.__all__:
            assert getattr(pkg, name) is not None, f"{pkg.__name__}.{name}"


# -- the types the API returns are importable from ctxnb ----------------------------------------
def _classes_defined_in_ctxnb() -> dict[str, str]:
    """Public class name -> module, for every class defined at the top of a ctxnb module."""
    import ast
    from pathlib import Path

    root = Path(ctxnb.__file__).parent
    out: dict[str, str] = {}
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                out.setdefault(node.name, str(path.relative_to(root)))
    return out


SURFACE = (
    "Workspace",
    "Session",
    "FileTools",
    "Context",
    "ObjectStore",
    "HookEngine",
    "RulesTracker",
    "RulesIndex",
    "TraceLedger",
    "Watcher",
)


def _returned_names(cls: type) -> dict[str, set[str]]:
    """Method -> the identifiers in its return annotation (annotations are strings here)."""
    import inspect
    import re

    out: dict[str, set[str]] = {}
    for name, fn in inspect.getmembers(cls):
        if name.startswith("_") and name not in ("__enter__",):
            continue
        target = fn.fget if isinstance(fn, property) else fn
        ann = getattr(target, "__annotations__", {}).get("return")
        if isinstance(ann, str):
            out[name] = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", ann))
        elif isinstance(ann, type):
            out[name] = {ann.__name__}
    return out


def test_every_type_the_api_returns_is_exported():
    """From ctxnb, or from the subpackage the returning class belongs to (ctxnb.instructions …)."""
    classes = _classes_defined_in_ctxnb()
    missing = []
    for owner in SURFACE:
        cls = getattr(ctxnb, owner)
        package = importlib.import_module(cls.__module__.rsplit(".", 1)[0])
        surface = {*ctxnb.__all__, *getattr(package, "__all__", ())}
        for method, names in _returned_names(cls).items():
            for name in sorted(names & set(classes)):
                if name not in surface:
                    missing.append(f"{owner}.{method} -> {name} ({classes[name]})")
    assert missing == [], "returned but not exported from ctxnb:\n" + "\n".join(missing)


def test_the_export_check_sees_returned_types():
    names = _returned_names(ctxnb.FileTools)
    assert "DiffResult" in names["get_diff"]
    assert "VersionInfo" in names["get_file_history"]
    assert "Context" in _returned_names(ctxnb.Session)["assemble"]


def test_nothing_public_hides_outside_all():
    # Names bound in the package namespace (besides submodules and dunders) are in __all__.
    import types

    stray = sorted(
        name
        for name, value in vars(ctxnb).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in ctxnb.__all__
        and name not in ("annotations", "TYPE_CHECKING", "lazy_exports")
    )
    assert stray == []
