"""The versioned object store: every version of every object, in plain Parquet.

The public names of :mod:`ctxnb.store.objectstore`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

__all__ = ["CompactReport", "ObjectStore", "TxRecord", "VerifyReport", "Version"]
_EXPORTS: dict[str, str] = {name: "objectstore" for name in __all__}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .objectstore import CompactReport, ObjectStore, TxRecord, VerifyReport, Version
