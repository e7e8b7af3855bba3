"""Which tools an MCP client is shown, and ``search_tools`` to find the others.

Sending every tool schema up front costs context on every model call, and most of them
cannot be used at that moment anyway. With ``[adapters.mcp] tool_listing = "intent"``
(the default) ``tools/list`` shows:

* ``search_tools``, ctxnb's own read-only tools, the session tools and
  ``select_active_intent``, always;
* the mutating tools (``write_file``, ``apply_patch``, ``run_command`` …) only where they
  can succeed: in a workspace that is not governed, once the client selected an
  intent (the server then sends ``notifications/tools/list_changed``), or to a client
  of MCP 2026-07-28, which names the intent in each call (``intent_id``);
* never the outside servers' tools (``server__tool``, from ``[mcp.servers]``): there may be
  hundreds. ``search_tools("what you want to do")`` ranks every tool, listed or not, on
  the shared hybrid index (BM25 fused with embeddings when installed, see
  :class:`~ctxnb.retrieval.tool_discovery.ToolIndex`), and any tool it returns can be
  called by name.

``tool_listing = "all"`` lists every tool, as before.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb.workspace import Workspace
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("x = 1\\n")
    >>> with Workspace.open(root) as ws:
    ...     tools = ws.tools(ws.session("doc"))
    ...     discovery = ToolDiscovery(tools, embedder=None)
    ...     [t["name"] for t in discovery.search("apply a unified diff patch", k=2)["tools"]]
    ['apply_patch', 'propose_merge']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..retrieval.embedding import DEFAULT, default_embedder
from ..retrieval.tool_discovery import ToolIndex
from ..tools.schemas import ToolInfo

if TYPE_CHECKING:
    from ..tools.filetools import FileTools

__all__ = ["SEARCH_TOOLS", "ToolDiscovery", "ToolListing"]

ToolListing = Literal["intent", "all"]
SEARCH_TOOLS = "search_tools"
# Listed whatever the intent: without them a client could not start governed work.
_ALWAYS = frozenset({SEARCH_TOOLS, "select_active_intent"})


class SearchToolsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, description="What you want to do, in a few words.")
    k: int = Field(default=5, ge=1, le=20, description="How many tools to return.")


class ToolDiscovery:
    """``search_tools`` over every tool of a :class:`FileTools`, and the listing policy.

    Args:
        tools: the session's tools (ctxnb's own, governance, session and outside tools).
        embedder: for the dense side of the index; the process-wide shared embedder by
            default, ``None`` for BM25 alone.
    """

    def __init__(self, tools: FileTools, *, embedder: Any = DEFAULT) -> None:
        self.tools = tools
        # DEFAULT is resolved at the first search: loading MiniLM takes seconds, and a
        # server starting, or a CLI call listing or calling tools, never needs it.
        self._embedder: Any = embedder
        self._index: ToolIndex | None = None
        self._names: tuple[str, ...] = ()
        tools.register_tool(
            ToolInfo(
                name=SEARCH_TOOLS,
                description="Find tools by what you want to do: returns the best matching "
                "tools with their input schemas, including tools not in the tool list. "
                "Call a returned tool by its name.",
                args=SearchToolsArgs,
            ),
            self.search,
        )

    def _schemas(self) -> list[dict[str, Any]]:
        return [s for s in self.tools.tool_schemas("mcp") if s["name"] != SEARCH_TOOLS]

    def search(self, query: str, k: int = 5) -> dict[str, Any]:
        """The ``k`` tools that fit ``query`` best: name, description and input schema."""
        schemas = self._schemas()
        names = tuple(s["name"] for s in schemas)
        if self._index is None or names != self._names:  # outside servers may come and go
            if self._embedder is DEFAULT:
                self._embedder = default_embedder()
            self._index = ToolIndex(schemas, embedder=self._embedder)
            self._names = names
        hits = self._index.search(query, k=k)
        return {
            "tools": [
                {
                    "name": h.name,
                    "description": h.schema.get("description", ""),
                    "inputSchema": h.schema.get("inputSchema", {}),
                }
                for h in hits
            ]
        }

    def visible(
        self,
        names: Iterable[str],
        *,
        listing: ToolListing,
        governed: bool,
        intent: str | None,
        per_call_intent: bool = False,
    ) -> set[str]:
        """The tool names ``tools/list`` shows under ``listing`` (see the module doc).

        ``per_call_intent``: each call names its intent (MCP 2026-07-28, where no
        selection outlives a request), so the mutating tools can succeed."""
        names = list(names)
        if listing == "all":
            return set(names)
        may_change = not governed or intent is not None or per_call_intent
        shown = set()
        for name in names:
            info = self.tools.tool_info(name)
            if name in _ALWAYS or info is None:
                shown.add(name)
            elif info.external:
                continue  # found with search_tools, called by name
            elif not info.mutating or may_change:
                shown.add(name)
        return shown
