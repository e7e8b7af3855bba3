"""The public surface stays explicit, sorted and importable."""

import importlib
import subprocess
import sys

import ctxnb


def test_all_is_sorted_and_unique():
    assert ctxnb.__all__ == sorted(ctxnb.__all__)
    assert len(set(ctxnb.__all__)) == len(ctxnb.__all__)


def test_every_public_name_resolves():
    for name in ctxnb.__all__:
        assert getattr(ctxnb, name) is not None, name
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
