"""Governed file tools: the tools an agent calls, behind a path policy.

Names are loaded from their modules on first use, so ``ctxnb.access`` alone
(what the Claude Code hook needs) does not pull in pydantic or pandas.

Example:
    >>> from ctxnb.tools import tool_schemas
    >>> sorted(t["name"] for t in tool_schemas("anthropic"))[:3]
    ['apply_merge', 'apply_patch', 'get_diff']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

if TYPE_CHECKING:
    from ..access.fdio import PathPolicy
    from ..access.pathrules import DEFAULT_DENY, SafePath
    from .backend import Backend, ToolsBackend
    from .call import ToolCall, ToolRunner
    from .filetools import FileTools
    from .merging import MergeProposal, MergeReviewer
    from .results import DiffResult, PatchResult, ReadResult, VersionInfo
    from .schemas import TOOL_INFO, ToolInfo, tool_schemas

_EXPORTS = {
    "Backend": "backend",
    "DEFAULT_DENY": "ctxnb.access.pathrules",
    "DiffResult": "results",
    "FileTools": "filetools",
    "MergeProposal": "merging",
    "MergeReviewer": "merging",
    "PatchResult": "results",
    "PathPolicy": "ctxnb.access.fdio",
    "ReadResult": "results",
    "SafePath": "ctxnb.access.pathrules",
    "TOOL_INFO": "schemas",
    "ToolCall": "call",
    "ToolInfo": "schemas",
    "ToolRunner": "call",
    "ToolsBackend": "backend",
    "VersionInfo": "results",
    "tool_schemas": "schemas",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
