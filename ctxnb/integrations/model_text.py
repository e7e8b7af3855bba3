"""What a model reads of a tool result: text written for it, not escaped JSON.

An MCP tool result has two parts: ``content`` (what the client shows the model) and
``structuredContent`` (the full JSON, for programs). Putting the JSON string in the text
escapes every newline and quote of a file and adds its keys: a 1,033-character file came
to 1,511 characters. :func:`tool_text` writes the text a model should read instead:

* a read: one header line (path, line range, total, sha256, notes), then the
  file's text as it is;
* a write or patch: what happened, the new sha256, and the diff;
* a list of paths: one per line; search hits: ``path:line: text``;
* a refusal: ``REFUSED CODE: message`` and the required action;
* anything else: compact ``key: value`` lines (JSON only for nested values).

Example:
    >>> print(tool_text("read_file", {"path": "a.py", "content": "x = 1\\n", "sha256": "ab" * 32,
    ...       "start_line": 1, "end_line": 1, "total_lines": 1, "version_id": None}))
    a.py · lines 1-1 of 1 · sha256 abababababababababababababababababababababababababababababababab
    x = 1
    <BLANKLINE>
    >>> print(error_text({"error_code": "NO_ACTIVE_INTENT", "message": "cite an intent",
    ...                   "required_action": "call select_active_intent"}))
    REFUSED NO_ACTIVE_INTENT: cite an intent
    Required action: call select_active_intent
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["error_text", "tool_text"]


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _read_text(r: Mapping[str, Any]) -> str:
    head = [str(r.get("path", ""))]
    start, end, total = r.get("start_line"), r.get("end_line"), r.get("total_lines")
    if start is not None and end:
        head.append(f"lines {start}-{end}" + (f" of {total}" if total else ""))
    if r.get("binary"):
        head.append("binary")
    if r.get("sha256"):
        head.append(f"sha256 {r['sha256']}")
    # The version id stays in structuredContent: the sha256 is what an edit cites.
    if r.get("source") not in (None, "disk"):
        head.append(f"source {r['source']}")
    if r.get("truncated"):
        head.append("truncated")
    if r.get("redactions"):
        head.append(f"{r['redactions']} secret(s) redacted")
    lines = [" · ".join(head)]
    if r.get("note"):
        lines.append(f"note: {r['note']}")
    content = r.get("content")
    return "\n".join(lines) + "\n" + (content if isinstance(content, str) else "")


def _patch_text(r: Mapping[str, Any]) -> str:
    status = "ok" if r.get("success") else "NOT APPLIED"
    lines = [f"{status}: {r.get('path', '')}: {r.get('message', '')}".rstrip()]
    if r.get("sha256"):
        lines.append(
            f"sha256 {r['sha256']}"
            + (f" · version {r['version_id']}" if r.get("version_id") else "")
        )
    for hunk in r.get("failed_hunks") or []:
        lines.append(f"failed hunk: {_compact(hunk)}")
    for fb in r.get("feedback") or []:
        lines.append(f"feedback: {_compact(fb)}")
    if r.get("diff"):
        lines.append(str(r["diff"]).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _item_line(item: Any) -> str:
    if isinstance(item, Mapping):
        if {"path", "line_number", "line"} <= item.keys():
            return f"{item['path']}:{item['line_number']}: {item['line']}"
        return " · ".join(f"{k}={_compact(v)}" for k, v in item.items())
    return _compact(item)


def _generic(result: Mapping[str, Any]) -> str:
    lines = []
    for k, v in result.items():
        if isinstance(v, str) and "\n" in v:
            lines.append(f"{k}:\n{v.rstrip()}")
        else:
            lines.append(f"{k}: {_compact(v)}")
    return "\n".join(lines) + "\n"


def tool_text(tool: str, result: Any) -> str:
    """The text a model should read of ``tool``'s successful ``result``."""
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping):
        if "content" in result and "sha256" in result and "path" in result:
            return _read_text(result)
        if "success" in result and "message" in result:
            return _patch_text(result)
        return _generic(result)
    if isinstance(result, list | tuple):
        if not result:
            return "(none)\n"
        return "\n".join(_item_line(i) for i in result) + "\n"
    return _compact(result)


def error_text(error: Mapping[str, Any]) -> str:
    """A refusal as a model should read it: the code and message, then what to do."""
    lines = [f"REFUSED {error.get('error_code', 'ERROR')}: {error.get('message', '')}"]
    if error.get("required_action"):
        lines.append(f"Required action: {error['required_action']}")
    if error.get("recoverable") is False:
        lines.append("Not recoverable by retrying.")
    return "\n".join(lines)
