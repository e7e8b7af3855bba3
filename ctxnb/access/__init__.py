"""The access layer: the one door through which workspace bytes reach ctxnb.

* :mod:`ctxnb.access.pathrules`: which names may be touched (one :data:`DEFAULT_DENY`,
  governance's files in :data:`GOVERNANCE`).
* :mod:`ctxnb.access.fdio`: the race-free descriptor-walk I/O (:class:`PathPolicy`).
* :mod:`ctxnb.access.identity`: denied by identity, the other names (hard links) of a
  denied file.
* :mod:`ctxnb.access.observe`: "changed? write a version" (:func:`observe`), the only
  way file bytes enter the store.
* :mod:`ctxnb.access.protected`: what runs on the host, derived from the workspace's
  files (:class:`ProtectedSet`): no agent writes it.

Names load on first use, so the Claude Code hook can import the path rules alone.

Example:
    >>> from ctxnb.access import DEFAULT_DENY
    >>> ".git" in DEFAULT_DENY
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

if TYPE_CHECKING:
    from .fdio import FileEntry, PathPolicy
    from .observe import Observation, observe_bytes
    from .pathrules import DEFAULT_DENY, GOVERNANCE, PathRules, SafePath
    from .protected import ProtectedSet

_EXPORTS = {
    "DEFAULT_DENY": "pathrules",
    "FileEntry": "fdio",
    "GOVERNANCE": "pathrules",
    "Observation": "observe",
    "PathPolicy": "fdio",
    "PathRules": "pathrules",
    "ProtectedSet": "protected",
    "SafePath": "pathrules",
    "observe_bytes": "observe",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
