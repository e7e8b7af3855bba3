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
        "import sys, ctxnb, ctxnb.cli; "
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
