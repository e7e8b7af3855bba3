"""Lazy public names for ctxnb's packages (PEP 562).

Importing a package stays cheap: each name is imported from its module on first use and
then kept in the package's namespace, so later look-ups do not come back here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any


def lazy_exports(
    package: str,
    table: Mapping[str, str],
    namespace: MutableMapping[str, Any],
    public: Sequence[str],
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose names load on first use.

    Args:
        package: the package's ``__name__``.
        table: public name -> module: a submodule name (``"store"``) or an absolute one
            (``"ctxnb.store.objectstore"``).
        namespace: the package's ``globals()``, where loaded names are kept.
        public: the package's ``__all__``, which ``dir()`` lists.
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        target = module if module.startswith("ctxnb.") else f"{package}.{module}"
        value = getattr(importlib.import_module(target), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__
