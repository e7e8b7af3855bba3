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

__all__ = ["DEFAULT_BREAKER_THRESHOLD", "UNKNOWN_COMMAND_DEFAULT"]

DEFAULT_BREAKER_THRESHOLD: Final = 3
"""Consecutive failures of one tool after which it is refused (``[governance]
breaker_threshold``)."""

UNKNOWN_COMMAND_DEFAULT: Final[Literal["SAFE", "DESTRUCTIVE"]] = "DESTRUCTIVE"
"""How a command the risk classifier does not know is treated (``[governance]
unknown_command``)."""
