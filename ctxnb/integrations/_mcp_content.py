"""What ctxnb's MCP server offers besides tools: resources and prompts.

The resources (``ctxnb://context``, ``ctxnb://metadata-pool``, ``ctxnb://history/{path}``,
``ctxnb://trace/tail``) and the ``intent-handshake`` prompt, in
:class:`McpContent`, which an :class:`~ctxnb.integrations.mcp_server.McpBackend` holds
(``backend.content``); every text that leaves is redacted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from ..redaction.redactor import redact_text
from ._mcp_sdk import MCPError, types

if TYPE_CHECKING:
    from .backend import WorkspaceBackend

__all__ = [
    "McpContent",
    "PROMPT_HANDSHAKE",
    "SERVER_NAME",
    "TRACE_TAIL",
    "URI_CONTEXT",
    "URI_HISTORY_PREFIX",
    "URI_HISTORY_TEMPLATE",
    "URI_METADATA",
    "URI_TRACE",
    "history_uri",
]

SERVER_NAME = "ctxnb"
TRACE_TAIL = 50

URI_CONTEXT = "ctxnb://context"
URI_METADATA = "ctxnb://metadata-pool"
URI_TRACE = "ctxnb://trace/tail"
URI_HISTORY_PREFIX = "ctxnb://history/"
URI_HISTORY_TEMPLATE = URI_HISTORY_PREFIX + "{path}"

PROMPT_HANDSHAKE = "intent-handshake"


class McpContent:
    """Resources and prompts over the session of a
    :class:`~ctxnb.integrations.backend.WorkspaceBackend` (an
    :class:`~ctxnb.integrations.mcp_server.McpBackend` holds one: ``backend.content``).

    Args:
        backend: the workspace, session and tools the server reaches; its lock
            serialises reads with the tool calls.
    """

    def __init__(self, backend: WorkspaceBackend) -> None:
        self.backend = backend

    # -- resources ------------------------------------------------------------------------
    def list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                name="context",
                uri=URI_CONTEXT,
                description="The session's assembled context (keep-all strategy), as the "
                "model sees it.",
                mime_type="text/plain",
            ),
            types.Resource(
                name="metadata-pool",
                uri=URI_METADATA,
                description="One row per object the model knows about: path, type, size, "
                "active, pinned.",
                mime_type="application/json",
            ),
            types.Resource(
                name="trace-tail",
                uri=URI_TRACE,
                description=f"The last {TRACE_TAIL} records of .orchestration/agent_trace.jsonl "
                "(empty when the workspace is not governed), each with the ledger check's "
                "verdict in metadata.integrity ('tampered': changed outside ctxnb).",
                mime_type="application/json",
            ),
        ]

    def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                name="file-history",
                uri_template=URI_HISTORY_TEMPLATE,
                description="The stored versions of one file (workspace-relative path), "
                "oldest first.",
                mime_type="application/json",
            )
        ]

    def read_resource(self, uri: str) -> str:
        """The text of one resource (redacted); blocking.

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown URI or a refused history read.
        """
        return redact_text(self._resource_text(uri))

    def _resource_text(self, uri: str) -> str:
        with self.backend.lock:
            if uri == URI_CONTEXT:
                return self.backend.session.assemble(record=False).to_text()
            if uri == URI_METADATA:
                frame = self.backend.session.metadata_frame()
                return _dumps(json.loads(frame.to_json(orient="records")))
            if uri == URI_TRACE:
                return _dumps(self.trace_tail())
            if uri.startswith(URI_HISTORY_PREFIX):
                path = unquote(uri[len(URI_HISTORY_PREFIX) :])
                out = self.backend.call("get_file_history", {"path": path})
                if not out.get("ok"):
                    error = {k: v for k, v in out.items() if k != "ok"}
                    raise MCPError(types.INVALID_PARAMS, str(error.get("message")), data=error)
                return _dumps(out["result"])
        raise MCPError(
            types.INVALID_PARAMS,
            f"unknown resource {uri!r}; use {URI_CONTEXT}, {URI_METADATA}, {URI_TRACE} or "
            f"{URI_HISTORY_TEMPLATE}",
            # SEP-2164: the URI that was not found, for a client to match its request by.
            data={"uri": uri},
        )

    def trace_tail(self, n: int = TRACE_TAIL) -> list[dict[str, Any]]:
        """The last ``n`` trace records; empty when the workspace is not governed.

        Read through the ledger verifier every reader uses: each record shown carries
        its verdict in ``metadata.integrity`` (``verified``, ``chained``, ``unchained``
        or ``tampered``), so a model is never shown a changed record as genuine.
        """
        path = self.backend.workspace.root / ".orchestration" / "agent_trace.jsonl"
        if not path.is_file() or n <= 0:
            return []
        from ..govern.ledgercheck import check_ledger

        check = check_ledger(path)
        if check.refused is not None:
            raise check.refused
        out = []
        for line, record in check.records[-n:]:
            shown = dict(record)
            meta = shown.get("metadata")
            shown["metadata"] = {**(meta if isinstance(meta, dict) else {})}
            shown["metadata"]["integrity"] = check.integrity[line]
            out.append(shown)
        return out

    # -- prompts ------------------------------------------------------------------------
    def list_prompts(self) -> list[types.Prompt]:
        return [
            types.Prompt(
                name=PROMPT_HANDSHAKE,
                description="Start governed work: select an intent before changing files.",
                arguments=[
                    types.PromptArgument(
                        name="intent_id",
                        description="The intent to work under (one of the active intents).",
                        required=False,
                    )
                ],
            )
        ]

    def handshake_text(self, intent_id: str | None = None) -> str:
        """The text of the ``intent-handshake`` prompt."""
        lines = []
        if intent_id:
            lines.append(
                "Before anything else, call the tool select_active_intent with "
                f'intent_id="{intent_id}".'
            )
        else:
            lines.append(
                "Before anything else, call the tool select_active_intent with the id of the "
                "intent your task belongs to."
            )
        lines += [
            "It returns an <intent_context> block: the intent's owned scope, constraints and "
            "acceptance criteria. Change only files inside that scope; a change outside it is "
            "refused with SCOPE_VIOLATION, and a change without a selected intent with "
            "NO_ACTIVE_INTENT.",
            "Read a file before you edit it and pass the sha256 from the read as "
            "expected_sha256, so that a stale edit is refused rather than applied.",
        ]
        path = self.backend.workspace.root / ".orchestration" / "active_intents.yaml"
        if path.is_file():
            from ..govern.intents import load_intents

            try:
                intents = load_intents(path).active()
            except Exception as e:  # a broken file must not hide the rest of the prompt
                lines.append(f"(active_intents.yaml could not be read: {e})")
            else:
                if intents:
                    lines.append("Active intents:")
                    for it in intents:
                        scope = ", ".join(it.owned_scope) or "(nothing)"
                        lines.append(f"- {it.id}: {it.name} (owns {scope})")
                else:
                    lines.append("There are no active intents; ask the user to add one.")
        else:
            lines.append("This workspace is not governed: no intent is needed to change files.")
        return "\n".join(lines)

    def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != PROMPT_HANDSHAKE:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {name!r}; use {PROMPT_HANDSHAKE!r}"
            )
        text = redact_text(self.handshake_text((arguments or {}).get("intent_id")))
        return types.GetPromptResult(
            description="Select an intent before changing files.",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def history_uri(path: str | Path) -> str:
    """The ``ctxnb://history/…`` URI of a workspace-relative path.

    Example:
        >>> history_uri("inventory/models.py")
        'ctxnb://history/inventory/models.py'
    """
    return URI_HISTORY_PREFIX + quote(str(path).replace(os.sep, "/"), safe="/")
