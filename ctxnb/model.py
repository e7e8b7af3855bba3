"""Object models: the envelope and the five object types of DESIGN §2.

Documents travel through the store as plain dicts in the JSON shape of DESIGN §2
(key ``xt/id``, source keys ``type``, ``filesystemId``, ``path``). These pydantic
models validate that shape and load it back.

Example:
    >>> src = FilesystemSource(filesystem_id="fs1", path="/ws/a.py")
    >>> doc = FileObject.new(src, content="x = 1\\n", file_type="python", data=b"x = 1\\n")
    >>> doc.to_doc()["source"]
    {'type': 'filesystem', 'filesystemId': 'fs1', 'path': '/ws/a.py'}
    >>> FileObject.from_doc(doc.to_doc()) == doc
    True
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from .hashing import content_hash, identity_hash, source_hash
from .ids import new_id

__all__ = [
    "CONTENT_TYPES",
    "INFRA_TYPES",
    "OBJECT_TYPES",
    "ChatObject",
    "CtxObject",
    "FileObject",
    "FilesystemSource",
    "SessionObject",
    "SystemPromptObject",
    "ToolCallObject",
    "model_for_type",
    "new_id",
]

CONTENT_TYPES: frozenset[str] = frozenset({"file", "toolcall"})
INFRA_TYPES: frozenset[str] = frozenset({"system_prompt", "chat", "session"})
OBJECT_TYPES: frozenset[str] = CONTENT_TYPES | INFRA_TYPES


class FilesystemSource(BaseModel):
    """Where a sourced object lives: a canonical path on one filesystem."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    type: Literal["filesystem"] = "filesystem"
    filesystem_id: str = Field(alias="filesystemId")
    path: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "filesystemId": self.filesystem_id, "path": self.path}


class CtxObject(BaseModel):
    """The envelope every object has; subclasses add the mutable payload."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    TYPE: ClassVar[str] = ""
    PAYLOAD_FIELDS: ClassVar[tuple[str, ...]] = ()

    id: str = Field(alias="xt/id")
    type: str
    source: FilesystemSource | None = None
    identity_hash: str | None = None

    def payload(self) -> dict[str, Any]:
        """The mutable payload (everything but the envelope), JSON-shaped."""
        return {k: _jsonable(getattr(self, k)) for k in self.PAYLOAD_FIELDS}

    def to_doc(self) -> dict[str, Any]:
        """The document in the JSON shape of DESIGN §2."""
        doc: dict[str, Any] = {
            "xt/id": self.id,
            "type": self.type,
            "source": self.source.to_dict() if self.source else None,
            "identity_hash": self.identity_hash,
        }
        doc.update(self.payload())
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> CtxObject:
        """Load a document (as returned by the store) back into its model."""
        known = {"xt/id", "type", "source", "identity_hash", *cls.PAYLOAD_FIELDS}
        return cls.model_validate({k: v for k, v in doc.items() if k in known})


def _jsonable(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(by_alias=True)
    return v


class FileObject(CtxObject):
    """A file seen by the agent. ``content`` is null once deleted, or for binary files."""

    TYPE: ClassVar[str] = "file"
    PAYLOAD_FIELDS: ClassVar[tuple[str, ...]] = (
        "content",
        "file_type",
        "char_count",
        "source_hash",
        "content_hash",
    )
    type: Literal["file"] = "file"
    content: str | None = None
    file_type: str = "text"
    char_count: int = 0
    source_hash: str | None = None
    content_hash: str | None = None

    @classmethod
    def new(
        cls,
        source: FilesystemSource,
        *,
        content: str | None,
        file_type: str,
        data: bytes | None,
    ) -> FileObject:
        """A file object for ``source`` with its hashes computed."""
        src = source.to_dict()
        obj = cls(
            id=identity_hash("file", src),
            source=source,
            identity_hash=identity_hash("file", src),
            content=content,
            file_type=file_type,
            char_count=len(content) if content is not None else 0,
            source_hash=source_hash(data) if data is not None else None,
        )
        obj.content_hash = content_hash(obj.payload())
        return obj


class ToolCallObject(CtxObject):
    """One tool call the agent made and what it returned."""

    TYPE: ClassVar[str] = "toolcall"
    PAYLOAD_FIELDS: ClassVar[tuple[str, ...]] = (
        "content",
        "tool",
        "args",
        "args_display",
        "status",
        "chat_ref",
        "file_refs",
        "content_hash",
    )
    type: Literal["toolcall"] = "toolcall"
    content: str | None = None
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    args_display: str = ""
    status: Literal["ok", "fail"] = "ok"
    chat_ref: str | None = None
    file_refs: list[str] = Field(default_factory=list)
    content_hash: str | None = None


class SystemPromptObject(CtxObject):
    """The system prompt of a session (infrastructure: never in the sets)."""

    TYPE: ClassVar[str] = "system_prompt"
    PAYLOAD_FIELDS: ClassVar[tuple[str, ...]] = ("content", "content_hash")
    type: Literal["system_prompt"] = "system_prompt"
    content: str = ""
    content_hash: str | None = None


class ChatObject(CtxObject):
    """The conversation of a session (infrastructure: rendered as turns)."""

    TYPE: ClassVar[str] = "chat"
    PAYLOAD_FIELDS: ClassVar[tuple[str, ...]] = (
        "turns",
        "turn_count",
        "toolcall_refs",
        "session_ref",
        "content_hash",
    )
    type: Literal["chat"] = "chat"
    turns: list[dict[str, Any]] = Field(default_factory=list)
    turn_count: int = 0
    toolcall_refs: list[str] = Field(default_factory=list)
    session_ref: str | None = None
    content_hash: str | None = None


class SessionObject(CtxObject):
    """A saved session: its sets and references to its chat and system prompt."""

    TYPE: ClassVar[str] = "session"
    PAYLOAD_FIELDS: ClassVar[tuple[str, ...]] = (
        "session_id",
        "chat_ref",
        "system_prompt_ref",
        "session_index",
        "metadata_pool",
        "active_set",
        "pinned_set",
        "turn",
        "assembly",
        "content_hash",
    )
    type: Literal["session"] = "session"
    session_id: str
    chat_ref: str | None = None
    system_prompt_ref: str | None = None
    session_index: list[str] = Field(default_factory=list)
    metadata_pool: list[str] = Field(default_factory=list)
    active_set: list[str] = Field(default_factory=list)
    pinned_set: list[str] = Field(default_factory=list)
    turn: int = 0
    # What the last assembly put in front of the model (strategy, items and the
    # transaction they were read at), so that context_at(turn) can rebuild it exactly.
    assembly: dict[str, Any] | None = None
    content_hash: str | None = None


_MODELS: dict[str, type[CtxObject]] = {
    m.TYPE: m for m in (FileObject, ToolCallObject, SystemPromptObject, ChatObject, SessionObject)
}


def model_for_type(type_: str) -> type[CtxObject]:
    """The model class for an object type name.

    Raises:
        ValueError: for an unknown type, naming the known ones.
    """
    try:
        return _MODELS[type_]
    except KeyError:
        raise ValueError(
            f"unknown object type {type_!r}; known types: {', '.join(sorted(_MODELS))}"
        ) from None
