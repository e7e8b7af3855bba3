"""Tool discovery: pick the few tools a task needs out of many.

An agent connected to several MCP servers can have hundreds of tools; sending every
schema costs context and confuses the model. :class:`ToolIndex` ranks tool definitions
against a task with BM25 over the tool's name, description and argument names and
descriptions (see :mod:`ctxnb.retrieval.textsearch`), optionally fused by reciprocal rank with
sentence embeddings, and returns the top schemas in the shape the model API wants.

Tool definitions are accepted in the three common shapes and may be mixed:

* OpenAI chat: ``{"type": "function", "function": {"name", "description", "parameters"}}``
  (the flat Responses-API form ``{"type": "function", "name", ...}`` too);
* Anthropic: ``{"name", "description", "input_schema"}``;
* MCP: ``{"name", "description", "inputSchema"}``.

Embeddings are optional (``pip install 'ctxnb[embeddings]'``): the embedder and the
fused index are the ones every module shares (:mod:`ctxnb.retrieval.embedding`); nothing is
downloaded. ``Embedder``, ``MiniLMEmbedder`` and ``resolve_embedder`` are re-exported
here from that module.

Example:
    >>> tools = [
    ...     {"name": "read_file", "description": "Read a file", "inputSchema": {}},
    ...     {"name": "send_message", "description": "Post to Slack", "input_schema": {}},
    ... ]
    >>> index = ToolIndex(tools)
    >>> index.search("post an update to slack", k=1)[0].name
    'send_message'
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError
from .embedding import Embedder, HybridIndex, MiniLMEmbedder, resolve_embedder
from .textsearch import reciprocal_rank_fusion

__all__ = [
    "Embedder",
    "MiniLMEmbedder",
    "ToolHit",
    "ToolIndex",
    "ToolSpec",
    "normalize_tool",
    "resolve_embedder",
]

SchemaFormat = Literal["openai", "anthropic", "mcp", "original"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool definition reduced to what every shape has in common.

    Attributes:
        name: the tool's name.
        description: its description ("" when absent).
        parameters: the JSON Schema of its input (``{"type": "object"}`` when absent).
        original: the definition as given.
        shape: ``"openai"``, ``"anthropic"`` or ``"mcp"``.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    original: Mapping[str, Any] = field(repr=False)
    shape: str

    def to_format(self, format: SchemaFormat) -> dict[str, Any]:
        """The definition in ``format``'s shape (a deep copy; ``"original"`` as given)."""
        params = copy.deepcopy(self.parameters)
        if format == "openai":
            return {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": params,
                },
            }
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": params}
        if format == "mcp":
            return {"name": self.name, "description": self.description, "inputSchema": params}
        if format == "original":
            return copy.deepcopy(dict(self.original))
        raise ConfigError(
            f"Unknown tool schema format {format!r}; use 'openai', 'anthropic', 'mcp' "
            "or 'original'."
        )


def normalize_tool(tool: Mapping[str, Any]) -> ToolSpec:
    """Read a tool definition in OpenAI, Anthropic or MCP shape.

    Raises:
        ConfigError: the definition has no name or is not one of the known shapes.

    Example:
        >>> spec = normalize_tool({"type": "function", "function": {"name": "ls"}})
        >>> spec.name, spec.shape, spec.parameters
        ('ls', 'openai', {'type': 'object'})
    """
    if not isinstance(tool, Mapping):
        raise ConfigError(f"A tool definition must be a dict, not {type(tool).__name__}")
    body: Mapping[str, Any] = tool
    if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
        body, shape, key = tool["function"], "openai", "parameters"
    elif "inputSchema" in tool:
        shape, key = "mcp", "inputSchema"
    elif "input_schema" in tool:
        shape, key = "anthropic", "input_schema"
    elif tool.get("type") == "function" or "parameters" in tool:
        shape, key = "openai", "parameters"
    else:
        # A bare {name, description} is valid in MCP and Anthropic alike.
        shape, key = "mcp", "inputSchema"
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"Tool definition has no 'name' (keys: {sorted(body)}); expected OpenAI "
            "{'type': 'function', 'function': {'name': ...}}, Anthropic {'name', "
            "'input_schema'} or MCP {'name', 'inputSchema'}."
        )
    params = body.get(key)
    return ToolSpec(
        name=name,
        description=str(body.get("description") or ""),
        parameters=dict(params) if isinstance(params, Mapping) else {"type": "object"},
        original=tool,
        shape=shape,
    )


def _schema_text(schema: Any, depth: int = 0) -> list[str]:
    """Argument names, titles, descriptions and string enum values, recursively."""
    if not isinstance(schema, Mapping) or depth > 6:
        return []
    out: list[str] = []
    for key in ("title", "description"):
        if isinstance(schema.get(key), str):
            out.append(schema[key])
    enum = schema.get("enum")
    if isinstance(enum, list):
        out.extend(v for v in enum if isinstance(v, str))
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for prop, sub in props.items():
            out.append(str(prop))
            out.extend(_schema_text(sub, depth + 1))
    for key in ("items", "additionalProperties"):
        out.extend(_schema_text(schema.get(key), depth + 1))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or []:
            out.extend(_schema_text(sub, depth + 1))
    return out


def _index_text(spec: ToolSpec) -> str:
    # The name is the densest signal (often verb_object); repeating it weights it above
    # any one word of a long description.
    return "\n".join([spec.name, spec.name, spec.description, *_schema_text(spec.parameters)])


def _embedding_text(spec: ToolSpec) -> str:
    args = ", ".join((spec.parameters.get("properties") or {}).keys())
    return f"{spec.name.replace('_', ' ')}: {spec.description}" + (
        f" (arguments: {args})" if args else ""
    )


# --- the index ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolHit:
    """One ranked tool.

    Attributes:
        name: the tool's name.
        score: BM25 score, or the fused reciprocal-rank score when embeddings are used;
            comparable only within one result list.
        schema: the tool definition as it was given.
    """

    name: str
    score: float
    schema: Mapping[str, Any] = field(repr=False)


class ToolIndex:
    """Ranks tool definitions against a task description.

    Args:
        tools: definitions in OpenAI, Anthropic or MCP shape (mixed is fine). Names must
            be unique: prefix tools from different servers (``github__create_issue``).
        embedder: ``None`` for BM25 alone, ``"auto"`` to fuse with MiniLM embeddings when
            the ``embeddings`` extra is installed, ``"minilm"`` to require them, or any
            :class:`Embedder`.
        rrf_k: the reciprocal rank fusion constant.
        k1: BM25 term saturation. b: BM25 length normalisation.

    Raises:
        ConfigError: a malformed definition or a duplicate name.
        MissingDependencyError: embeddings were required but the extra is missing.

    Example:
        >>> index = ToolIndex([
        ...     {"type": "function", "function": {"name": "git_commit",
        ...      "description": "Record staged changes", "parameters": {}}},
        ...     {"name": "create_event", "description": "Add a calendar event",
        ...      "input_schema": {"properties": {"start": {"description": "start time"}}}},
        ... ])
        >>> [hit.name for hit in index.search("schedule a meeting on my calendar")]
        ['create_event']
        >>> index.top_k_schemas("commit the fix", k=1, format="anthropic")[0]["name"]
        'git_commit'
    """

    def __init__(
        self,
        tools: Iterable[Mapping[str, Any]],
        *,
        embedder: Embedder | str | bool | None = None,
        rrf_k: int = 60,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for tool in tools:
            spec = normalize_tool(tool)
            if spec.name in self._specs:
                raise ConfigError(
                    f"Two tools are named {spec.name!r}; tool names must be unique. Prefix "
                    "each server's tools with its name (e.g. 'github__create_issue')."
                )
            self._specs[spec.name] = spec
        self.rrf_k = rrf_k
        self.embedder = resolve_embedder(embedder)
        self._index = HybridIndex(
            ((n, _index_text(s)) for n, s in self._specs.items()),
            embedder=None,
            rrf_k=rrf_k,
            k1=k1,
            b=b,
        )
        # The dense side embeds a shorter text (name and description) than BM25 indexes.
        self._dense = (
            HybridIndex(
                ((n, _embedding_text(s)) for n, s in self._specs.items()), embedder=self.embedder
            )
            if self.embedder is not None
            else None
        )
        if self._dense is not None:
            self._dense.prepare()  # tools are embedded once, up front, not on the first query

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        mode = f"BM25+{self.embedder.name}" if self.embedder is not None else "BM25"
        return f"ToolIndex({len(self)} tools, {mode})"

    @property
    def names(self) -> list[str]:
        """Tool names in the order given."""
        return list(self._specs)

    def spec(self, name: str) -> ToolSpec:
        """The normalised definition of tool ``name``."""
        return self._specs[name]

    def search(self, task: str, k: int = 5) -> list[ToolHit]:
        """The ``k`` tools most relevant to ``task``, best first (ties by name).

        With BM25 alone, tools sharing no word with the task are not returned; with an
        embedder every tool is ranked.
        """
        if k <= 0 or not self._specs:
            return []
        if self._dense is None:
            ranked = [(h.id, h.score) for h in self._index.search(task, k=k)]
        else:
            # BM25's full ranking, not its top k, so that fusion sees every lexical match.
            lexical = [h.id for h in self._index.search(task, k=len(self._specs))]
            sims = self._dense.similarities(task)
            semantic = sorted(sims, key=lambda n: (-sims[n], n))
            ranked = reciprocal_rank_fusion([lexical, semantic], k=self.rrf_k)[:k]
        return [ToolHit(name, score, self._specs[name].original) for name, score in ranked]

    def top_k_schemas(
        self, task: str, k: int = 5, *, format: SchemaFormat = "openai"
    ) -> list[dict[str, Any]]:
        """The top ``k`` tool definitions for ``task``, converted to ``format``.

        ``format`` is ``"openai"`` (chat completions ``tools=``), ``"anthropic"``
        (messages ``tools=``), ``"mcp"`` (``tools/list`` entries) or ``"original"``.
        """
        if format not in ("openai", "anthropic", "mcp", "original"):
            raise ConfigError(
                f"Unknown tool schema format {format!r}; use 'openai', 'anthropic', 'mcp' "
                "or 'original'."
            )
        return [self._specs[hit.name].to_format(format) for hit in self.search(task, k=k)]
