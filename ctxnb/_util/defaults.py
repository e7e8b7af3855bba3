"""Defaults of settings that light code reads without loading :mod:`ctxnb.config`.

:mod:`ctxnb.config` validates a workspace's settings with pydantic; the Claude Code hook
and the command classifier start on every tool call and must not pay for pydantic, yet
they apply the same defaults. So the defaults live here, below both, once.

Example:
    >>> DEFAULT_BREAKER_THRESHOLD, UNKNOWN_COMMAND_DEFAULT
    (3, 'DESTRUCTIVE')
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "DEFAULT_BREAKER_THRESHOLD",
    "DEFAULT_COMMAND_TIMEOUT",
    "HOOK_QUALITY_BUDGET",
    "UNKNOWN_COMMAND_DEFAULT",
]

DEFAULT_BREAKER_THRESHOLD: Final = 3
"""Consecutive failures of one tool after which it is refused (``[governance]
breaker_threshold``)."""

DEFAULT_COMMAND_TIMEOUT: Final = 120.0
"""Seconds before a governed command is stopped (``[governance] command_timeout``)."""

HOOK_QUALITY_BUDGET: Final = 50.0
"""Seconds the post-tool-use hook gives the quality commands together, each bounded by
``command_timeout`` too: below the 60 seconds older Claude Code versions give a hook
before they cancel it (and its feedback with it)."""

UNKNOWN_COMMAND_DEFAULT: Final[Literal["SAFE", "DESTRUCTIVE"]] = "DESTRUCTIVE"
"""How a command the risk classifier does not know is treated (``[governance]
unknown_command``)."""
