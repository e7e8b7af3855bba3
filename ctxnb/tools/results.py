"""Result models of the file tools (JSON-serializable with ``model_dump``)."""

from __future__ import annotations

import html
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DiffResult", "PatchResult", "ReadResult", "SearchHits", "VersionInfo"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadResult(_Result):
    """What a read returns to the model.

    Attributes:
        path: the workspace-relative path.
        content: the text shown (redacted, and shaped to the profile's limits).
        sha256: SHA-256 of the exact bytes of the authoritative copy; pass it back as
            ``expected_sha256`` when you edit.
        version_id: the stored version the read saw (``<object id>@<tx>``).
        truncated: True when ``content`` is an excerpt of a larger file.
        note: how to read more, or why the content is shaped.
    """

    path: str
    doc_path: str
    content: str | None
    sha256: str
    version_id: str | None = None
    source: str = "disk"
    start_line: int = 1
    end_line: int = 0
    total_lines: int = 0
    total_chars: int = 0
    truncated: bool = False
    redactions: int = 0
    binary: bool = False
    note: str = ""


class PatchResult(_Result):
    """The outcome of a write."""

    success: bool
    message: str
    path: str = ""
    conflict: bool = False
    diff: str = ""
    version_id: str | None = None
    sha256: str | None = None
    failed_hunks: list[dict[str, Any]] = Field(default_factory=list)
    feedback: list[dict[str, Any]] = Field(default_factory=list)

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.success else "#c62828"
        diff = html.escape(self.diff[:4000])
        return (
            f'<div><b style="color:{color}">{"ok" if self.success else "refused"}</b> '
            f"{html.escape(self.path)}: {html.escape(self.message)}"
            f"<pre>{diff}</pre></div>"
        )


class DiffResult(_Result):
    path: str
    from_version: str | None
    to_version: str | None
    diff: str
    added: int = 0
    removed: int = 0


class VersionInfo(_Result):
    version_id: str
    tx_id: int
    tx_time: str
    action: str
    source_hash: str | None
    char_count: int


class SearchHits(list[dict[str, Any]]):
    """One page of search hits: a list of ``{path, line_number, line}``, plus whether
    more hits exist and the cursor that continues after this page.

    Attributes:
        truncated: True when the search found more hits than the page holds.
        cursor: pass it back as ``cursor=`` to get the next page (None: no more).
    """

    def __init__(
        self, hits: list[dict[str, Any]], *, truncated: bool = False, cursor: str | None = None
    ) -> None:
        super().__init__(hits)
        self.truncated = truncated
        self.cursor = cursor
