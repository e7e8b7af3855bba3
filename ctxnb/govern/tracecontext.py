"""The trace a change was made in: W3C trace context and the prompt that asked for it.

An agent that is itself traced hands its trace on: Claude Code exports ``TRACEPARENT``
(and ``TRACESTATE``) to the commands its Bash tool runs, as OpenTelemetry's environment
carriers specify, and names the user's prompt in every hook payload (``prompt_id``).
ctxnb keeps both in the Agent Trace record of each change made there
(``metadata.trace_context``, ``metadata.prompt_id``), so a record can be joined to the
agent's own spans and to the prompt that led to it.

Both arrive from the agent's side, so both are checked, never trusted as text: a
``traceparent`` must be version ``00`` with non-zero ids (W3C Trace Context §3.2), a
``tracestate`` at most 32 ``key=value`` members of the allowed characters, a prompt id
a short printable token. Anything else is dropped, not repaired.

Example:
    >>> trace_context({"TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
    {'traceparent': '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'}
    >>> trace_context({"TRACEPARENT": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"})
    {}
    >>> prompt_id("8f2c1e7a-1b2c-4d5e-9f00-aabbccddeeff"), prompt_id("x\\u001b[2J")
    ('8f2c1e7a-1b2c-4d5e-9f00-aabbccddeeff', None)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["carried_metadata", "prompt_id", "trace_context"]

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
# W3C Trace Context §3.3: list-members `key=value`, keys of lowercase letters, digits and
# _-*/ (with an optional tenant@system), values of printable ASCII but `,` and `=`.
_MEMBER = re.compile(
    r"[a-z0-9][a-z0-9_\-*/]{0,240}(@[a-z][a-z0-9_\-*/]{0,13})?=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_PROMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")


def trace_context(env: Mapping[str, str]) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) from an environment, when well-formed."""
    parent = env.get("TRACEPARENT") or ""
    m = _TRACEPARENT.fullmatch(parent)
    if m is None or set(m.group(1)) == {"0"} or set(m.group(2)) == {"0"}:
        return {}
    out = {"traceparent": parent}
    state = (env.get("TRACESTATE") or "").strip()
    members = [s.strip() for s in state.split(",") if s.strip()] if state else []
    if members and len(members) <= 32 and all(_MEMBER.fullmatch(s) for s in members):
        out["tracestate"] = ",".join(members)
    return out


def prompt_id(value: Any) -> str | None:
    """A hook payload's ``prompt_id`` when it is a short printable token, else None."""
    return value if isinstance(value, str) and _PROMPT_ID.fullmatch(value) else None


def carried_metadata(env: Mapping[str, str], prompt: Any = None) -> dict[str, Any]:
    """The record ``metadata`` keys for a change made under ``env`` for ``prompt``."""
    out: dict[str, Any] = {}
    context = trace_context(env)
    if context:
        out["trace_context"] = context
    pid = prompt_id(prompt)
    if pid is not None:
        out["prompt_id"] = pid
    return out
