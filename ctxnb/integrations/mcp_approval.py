"""Approval over MCP: ask the client's user through elicitation, or refuse.

A destructive act (e.g. ``run_command("rm -rf build")``) asks the human through MCP
elicitation when the client supports it, and is refused with
``DESTRUCTIVE_NEEDS_APPROVAL`` otherwise.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import PolicyError
from ..govern.approval import ApprovalRequest, Approver, Decision
from ._mcp_sdk import MCPError, anyio, types

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["DenyDestructiveApprover", "ElicitationApprover"]


def _needs_approval(req: ApprovalRequest, why: str) -> PolicyError:
    return PolicyError(
        "DESTRUCTIVE_NEEDS_APPROVAL",
        f"{req.summary()} is destructive and needs a human's approval; {why}",
        recoverable=False,
        required_action=(
            "Ask the user to run it themselves, or connect with an MCP client that "
            "supports elicitation so that the user can approve it."
        ),
        details={"tool": req.tool, "request_id": req.id},
    )


class DenyDestructiveApprover:
    """Refuses every destructive act with ``DESTRUCTIVE_NEEDS_APPROVAL``.

    Used when no human can be asked (the MCP client does not support elicitation).

    Example:
        >>> ap = DenyDestructiveApprover()
        >>> try:
        ...     ap.request(ApprovalRequest.new("run_command", {"cmd": "rm -rf /"}, "deletes"))
        ... except PolicyError as e:
        ...     print(e.error_code)
        DESTRUCTIVE_NEEDS_APPROVAL
    """

    def request(self, req: ApprovalRequest) -> Decision:
        raise _needs_approval(req, "no approver is available on this connection")


class ElicitationApprover:
    """Asks the MCP client's user through elicitation whether a destructive act may run.

    Tool calls run in worker threads (see :class:`McpBackend`), so :meth:`request`
    may block: it hands the question to the server's event loop with
    :func:`anyio.from_thread.run` and waits for the answer there, while the loop keeps
    serving other messages (among them the elicitation's response). The request
    context of the call being served is bound to the worker thread with
    :meth:`bound`; without one, or when the client did not declare the elicitation
    capability, the act is refused with ``DESTRUCTIVE_NEEDS_APPROVAL``.

    Args:
        timeout: seconds to wait for the user; no answer in time is a refusal.
        fallback: the approver used when elicitation is not possible.
    """

    def __init__(self, *, timeout: float = 300.0, fallback: Approver | None = None) -> None:
        self.timeout = timeout
        self.fallback: Approver = fallback or DenyDestructiveApprover()
        self._local = threading.local()

    @contextlib.contextmanager
    def bound(self, ctx: ServerRequestContext[Any] | None) -> Iterator[None]:
        """Bind the request being served to this thread for the duration of a call."""
        previous = getattr(self._local, "ctx", None)
        self._local.ctx = ctx
        try:
            yield
        finally:
            self._local.ctx = previous

    @staticmethod
    def supported(ctx: ServerRequestContext[Any] | None) -> bool:
        """Whether the client behind ``ctx`` can be asked (declared elicitation)."""
        if ctx is None or not ctx.session.can_send_request:
            return False  # e.g. a stateless HTTP request: no channel back to the client
        caps = ctx.session.client_capabilities
        return bool(caps is not None and caps.elicitation is not None)

    def request(self, req: ApprovalRequest) -> Decision:
        ctx = getattr(self._local, "ctx", None)
        if not self.supported(ctx):
            return self.fallback.request(req)
        assert ctx is not None
        try:
            result = anyio.from_thread.run(self._ask, ctx, req)
        except RuntimeError:  # not called from one of the server's worker threads
            return self.fallback.request(req)
        except MCPError as e:
            return Decision(
                False, by="mcp-client", note=f"elicitation failed: {e}", request_id=req.id
            )
        if result is None:
            return Decision(
                False, by="timeout", note=f"no answer within {self.timeout:g}s", request_id=req.id
            )
        approved = result.action == "accept" and bool((result.content or {}).get("approve"))
        note = (
            result.action if result.action != "accept" else ("approved" if approved else "denied")
        )
        return Decision(approved, by="mcp-client-user", note=note, request_id=req.id)

    async def _ask(
        self, ctx: ServerRequestContext[Any], req: ApprovalRequest
    ) -> types.ElicitResult | None:
        schema = {
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": "Approve",
                    "description": "Run this destructive act?",
                    "default": False,
                }
            },
            "required": ["approve"],
        }
        message = f"ctxnb: approve a destructive act?\n{req.summary()}"
        if req.intent_id:
            message += f"\n(intent {req.intent_id})"
        with anyio.move_on_after(self.timeout):
            return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        return None
