"""Governed file tools: the tools an agent calls, behind a path policy.

Example:
    >>> from ctxnb.tools import tool_schemas
    >>> sorted(t["name"] for t in tool_schemas("anthropic"))[:3]
    ['apply_patch', 'get_diff', 'get_excerpt']
"""

from __future__ import annotations

from .filetools import FileTools, ToolCall
from .pathpolicy import DEFAULT_DENY, PathPolicy, SafePath
from .results import DiffResult, PatchResult, ReadResult, VersionInfo
from .schemas import TOOL_INFO, ToolInfo, tool_schemas

__all__ = [
    "DEFAULT_DENY",
    "DiffResult",
    "FileTools",
    "PatchResult",
    "PathPolicy",
    "ReadResult",
    "SafePath",
    "TOOL_INFO",
    "ToolCall",
    "ToolInfo",
    "VersionInfo",
    "tool_schemas",
]
