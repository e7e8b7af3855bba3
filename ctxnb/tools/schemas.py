"""Argument models and JSON tool definitions of the file tools.

Every tool has a pydantic argument model; :func:`tool_schemas` turns them into the
tool definitions that OpenAI, Anthropic and MCP clients expect.

Example:
    >>> names = [t["name"] for t in tool_schemas("anthropic")]
    >>> "read_file" in names and "apply_patch" in names
    True
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .patching import LineEdit

__all__ = ["TOOL_ARGS", "TOOL_INFO", "ToolInfo", "tool_schemas"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListFilesArgs(_Args):
    globs: list[str] | None = Field(
        default=None, description="gitignore-style patterns; all allowed files when omitted"
    )


class ReadFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")


class ReadLinesArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    start: int = Field(ge=1, description="First line (1-based).")
    end: int = Field(ge=1, description="Last line, inclusive.")


class GetExcerptArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    max_lines: int = Field(default=80, ge=1, le=5000, description="Lines from the top.")


class WriteFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    content: str = Field(description="The text to write.")
    mode: Literal["truncate", "append", "create"] = Field(
        default="truncate",
        description="truncate: replace; append: add at the end; create: new file only",
    )
    expected_sha256: str | None = Field(
        default=None, description="sha256 of the file as you last read it (optimistic lock)"
    )


class ApplyPatchArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    unified_diff: str = Field(description="A unified diff (hunks with @@ headers) for this file.")
    expected_sha256: str | None = Field(
        default=None, description="sha256 of the file as you last read it (optimistic lock)"
    )


class WritePatchArgs(_Args):
    doc_path: str = Field(description="The file's docPath (its workspace-relative path).")
    original_sha256: str = Field(description="sha256 of the copy the edits were computed from.")
    edits: list[LineEdit] = Field(min_length=1, description="Line-range edits, non-overlapping.")


class GetDiffArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    version1: str | None = Field(default=None, description="A version id (older side).")
    version2: str | None = Field(default=None, description="A version id (newer side).")


class GetFileHistoryArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")


class SummarizeFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    max_tokens: int | None = Field(default=None, ge=20, description="Budget of the outline.")


class SearchArgs(_Args):
    pattern: str = Field(description="A regular expression (or a fixed string with regex=false).")
    globs: list[str] | None = Field(default=None, description="Only files matching these globs.")
    regex: bool = Field(default=True, description="Treat the pattern as a regular expression.")
    limit: int = Field(
        default=200, ge=1, le=10_000, description="At most this many hits in one answer."
    )
    cursor: str | None = Field(
        default=None, description="The cursor of a truncated answer: its next page."
    )


class GlobArgs(_Args):
    pattern: str = Field(description="A glob such as 'src/**/*.py'.")


class RestoreFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    version: str | None = Field(
        default=None,
        description="a version_id from get_file_history; default: the version before the "
        "last change",
    )


class ProposeMergeArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root.")
    content: str | None = Field(
        default=None, description="The edited text that was refused as stale."
    )
    base_sha256: str | None = Field(
        default=None,
        description="sha256 of the copy the edit was computed from (default: your last read)",
    )
    unified_diff: str | None = Field(
        default=None, description="Instead of content: the patch that was refused as stale."
    )


class ApplyMergeArgs(_Args):
    proposal_id: str = Field(description="The proposal_id propose_merge returned.")


class ToolInfo(BaseModel):
    """What a tool is, for schemas and for the hook engine."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    args: type[BaseModel]
    mutating: bool = False
    idempotent: bool = True
    destructive: bool = False
    #: served by another MCP server through the registry; the engine then judges risk by
    #: ``destructive`` (a file tool is never destructive there: its versions undo it).
    external: bool = False


TOOL_INFO: dict[str, ToolInfo] = {
    t.name: t
    for t in [
        ToolInfo(
            name="list_files",
            description="List the workspace files the agent may read.",
            args=ListFilesArgs,
        ),
        ToolInfo(
            name="read_file",
            description="Read a file. Returns its text (large files: an excerpt and an outline), "
            "the sha256 of its exact bytes (pass it back when you edit) and its version id.",
            args=ReadFileArgs,
        ),
        ToolInfo(
            name="read_lines",
            description="Read lines start..end (1-based, inclusive) of a file.",
            args=ReadLinesArgs,
        ),
        ToolInfo(
            name="get_excerpt",
            description="The first max_lines lines of a file and its size.",
            args=GetExcerptArgs,
        ),
        ToolInfo(
            name="write_file",
            description="Write a file atomically (truncate, append or create). Pass the sha256 "
            "from your last read as expected_sha256; a stale hash is refused.",
            args=WriteFileArgs,
            mutating=True,
            idempotent=False,
        ),
        ToolInfo(
            name="apply_patch",
            description="Apply a unified diff to a file. Context that no longer matches is a "
            "conflict: nothing is written and the failed hunks are returned. A diff from "
            "/dev/null creates the file, one to /dev/null deletes it, a rename diff moves it; "
            "one file per call.",
            args=ApplyPatchArgs,
            mutating=True,
            idempotent=False,
        ),
        ToolInfo(
            name="write_patch",
            description="Replace line ranges of a file (docPath rules): each edit gives "
            "start_line, end_line, the expected original lines and the new lines.",
            args=WritePatchArgs,
            mutating=True,
            idempotent=False,
        ),
        ToolInfo(
            name="restore_file",
            description="Put a file back as it was in a stored version (default: before its "
            "last change, whether a tool or a command made it). Deleted files come back.",
            args=RestoreFileArgs,
            mutating=True,
            idempotent=False,
        ),
        ToolInfo(
            name="propose_merge",
            description="After a STALE_FILE refusal: merge your edit with the change made "
            "to the file since you read it (three-way, as git merge-file). Returns the "
            "merged text and a proposal_id, or the conflicts it could not resolve. Writes "
            "nothing.",
            args=ProposeMergeArgs,
        ),
        ToolInfo(
            name="apply_merge",
            description="Write a ready merge proposal (by its proposal_id) once a human "
            "approves it; refused if the file changed again since the proposal.",
            args=ApplyMergeArgs,
            mutating=True,
            idempotent=False,
        ),
        ToolInfo(
            name="get_diff",
            description="Diff two stored versions of a file, or the file on disk against "
            "its latest stored version.",
            args=GetDiffArgs,
        ),
        ToolInfo(
            name="get_file_history",
            description="The stored versions of a file, oldest first.",
            args=GetFileHistoryArgs,
        ),
        ToolInfo(
            name="summarize_file",
            description="An outline of a file (classes, functions, headings) within a "
            "token budget.",
            args=SummarizeFileArgs,
        ),
        ToolInfo(
            name="search",
            description="Search file contents like grep; returns path, line number and line.",
            args=SearchArgs,
        ),
        ToolInfo(name="glob", description="Files whose path matches a glob.", args=GlobArgs),
    ]
}

TOOL_ARGS: dict[str, type[BaseModel]] = {name: t.args for name, t in TOOL_INFO.items()}


def _params(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def tool_schemas(
    format: Literal["openai", "anthropic", "mcp"] = "openai",
    *,
    tools: dict[str, ToolInfo] | None = None,
) -> list[dict[str, Any]]:
    """The JSON tool definitions in the shape one client family expects.

    Args:
        format: ``openai`` (function tools), ``anthropic`` (``input_schema``) or ``mcp``
            (``inputSchema`` with ``annotations``).
        tools: the tools to describe (all file tools by default).
    """
    out = []
    for info in (tools or TOOL_INFO).values():
        params = _params(info.args)
        if format == "openai":
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": info.name,
                        "description": info.description,
                        "parameters": params,
                    },
                }
            )
        elif format == "anthropic":
            out.append({"name": info.name, "description": info.description, "input_schema": params})
        elif format == "mcp":
            out.append(
                {
                    "name": info.name,
                    "description": info.description,
                    "inputSchema": params,
                    "annotations": {
                        "readOnlyHint": not info.mutating,
                        "destructiveHint": info.destructive,
                        "idempotentHint": info.idempotent,
                    },
                }
            )
        else:
            raise ValueError(f"unknown schema format {format!r}; use openai, anthropic or mcp")
    return out
