"""Converter for Claude Code session transcripts (``~/.claude/projects/*/<session>.jsonl``).

Each line is a record with ``type`` (``user``, ``assistant``, ``system``, ``progress``,
``file-history-snapshot``, ...), ``uuid`` and ``parentUuid``. Decisions:

- **Main line.** The conversation is a tree; the run is the path from the last
  message record back to the root through ``parentUuid``, crossing each compaction
  boundary through its ``logicalParentUuid``. Parallel tool calls hang off that path
  (one API message is split into one record per content block, and each tool result is
  a child of its own tool call), so records off the path are kept when they are a tool
  call of an assistant message on the path (same ``message.id``) or the result of a
  kept tool call. Abandoned branches (a rewound prompt) are dropped. Records are then
  taken in file order. When a boundary's ``logicalParentUuid`` names a record the file
  does not hold, the path continues from the last main-line message record before the
  boundary, and ``metadata["notes"]`` says so.
- **Sidechains and subagents.** Records with ``isSidechain: true`` and subagent
  ``progress`` records are not steps of this run: the ``Task`` call that started the
  subagent is one step whose observation is the subagent's answer. Their number is in
  ``metadata["sidechain_records"]`` and ``metadata["subagent_progress_records"]``.
- **Steps.** One step per ``tool_use``; assistant text before it is the thought; an
  assistant message with text and no tool call is a ``reply`` step; a user prompt after
  the first (which is the task) is a ``user`` step; a ``compact_boundary`` is a
  ``compact`` step with ``compaction=True`` whose observation is the summary the next
  context starts from. Thinking blocks are not kept.
- **Usage.** ``prompt_tokens = input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`` (all of it was in the context window),
  ``completion_tokens = output_tokens``, from the last record of each API message;
  it is set on the first step of that message only, so sums over steps stay true.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from ._shell import FileMemory, parse_command
from .model import Action, FileTouch, Step, Trajectory, Usage, json_obj

__all__ = ["from_claude_code"]

SOURCE_FORMAT = "claude-code"
_TOOL_NAMES = {
    "Read": "read",
    "Edit": "edit",
    "MultiEdit": "edit",
    "Write": "write",
    "Bash": "bash",
    "Grep": "search",
    "Glob": "glob",
}


def from_claude_code(
    records: list[dict[str, Any]], *, source_path: str | None = None, skipped_lines: int = 0
) -> Trajectory:
    """Convert the records of a Claude Code transcript to the neutral format.

    Args:
        records: the parsed JSON lines, in file order.
        source_path: where they came from, recorded in the trajectory.
        skipped_lines: lines the caller could not parse (kept in the metadata).

    Returns:
        The trajectory of the main line (see the module docstring).

    Example:
        >>> recs = [
        ...     {"type": "user", "uuid": "u1", "parentUuid": None,
        ...      "message": {"role": "user", "content": "Read a.py"}},
        ...     {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
        ...      "message": {"id": "m1", "role": "assistant", "content": [
        ...          {"type": "tool_use", "id": "t1", "name": "Read",
        ...           "input": {"file_path": "/w/a.py"}}],
        ...          "usage": {"input_tokens": 5, "cache_read_input_tokens": 100,
        ...                    "output_tokens": 7}}},
        ...     {"type": "user", "uuid": "u2", "parentUuid": "a1",
        ...      "message": {"role": "user", "content": [{"type": "tool_result",
        ...          "tool_use_id": "t1", "content": "     1→x = 1"}]},
        ...      "toolUseResult": {"type": "text", "file": {"filePath": "/w/a.py",
        ...          "content": "x = 1", "startLine": 1, "numLines": 1, "totalLines": 1}}},
        ... ]
        >>> t = from_claude_code(recs)
        >>> t.task, t.steps[0].action.tool, t.steps[0].files[0].content
        ('Read a.py', 'read', 'x = 1')
        >>> t.steps[0].usage.prompt_tokens
        105
    """
    notes: list[str] = []
    main = _main_line(records, notes)
    conv = _Converter()
    for rec in main:
        try:
            conv.record(rec)
        except Exception as exc:  # one odd record must not lose the run
            conv.steps.append(
                Step(
                    index=len(conv.steps),
                    action=Action(tool="unknown", raw=json.dumps(rec)[:2000]),
                    parsed=False,
                    note=f"converter error on record {rec.get('uuid')}: "
                    f"{type(exc).__name__}: {exc}",
                )
            )
    conv.flush_reply()
    conv.finish_usage()
    session = next((r.get("sessionId") for r in records if r.get("sessionId")), None)
    first = next((r for r in records if r.get("cwd")), {})
    metadata: dict[str, Any] = {
        k: v
        for k, v in {
            "session_id": session,
            "cwd": first.get("cwd"),
            "git_branch": first.get("gitBranch"),
            "version": first.get("version"),
            "model": conv.model,
            "records": len(records),
            "main_line_records": len(main),
            "sidechain_records": sum(1 for r in records if r.get("isSidechain")),
            "subagent_progress_records": sum(
                1
                for r in records
                if r.get("type") == "progress"
                and isinstance(r.get("data"), dict)
                and r["data"].get("type") == "agent_progress"
            ),
            "skipped_lines": skipped_lines or None,
            "notes": notes or None,
        }.items()
        if v is not None
    }
    for i, step in enumerate(conv.steps):
        step.index = i
    return Trajectory(
        id=str(session or "claude-code"),
        source_format=SOURCE_FORMAT,
        source_path=source_path,
        task=conv.task,
        system_prompt=None,
        steps=conv.steps,
        metadata=metadata,
    )


def _content(rec: dict[str, Any]) -> Any:
    msg = rec.get("message")
    return msg.get("content") if isinstance(msg, dict) else None


def _blocks(rec: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    c = _content(rec)
    if not isinstance(c, list):
        return []
    return [b for b in c if isinstance(b, dict) and b.get("type") == kind]


def _link(value: Any) -> str | None:
    """An id that links records: a string, else nothing (a list or an object there is
    damage, and would not even be hashable)."""
    return value if isinstance(value, str) and value else None


def _main_line(
    records: list[dict[str, Any]], notes: list[str] | None = None
) -> list[dict[str, Any]]:
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}
    msgs = [
        r
        for r in records
        if r.get("type") in ("user", "assistant", "system")
        and isinstance(r.get("uuid"), str)
        and not r.get("isSidechain")
    ]
    if not msgs:
        return []
    position = {id(r): i for i, r in enumerate(records)}
    # Where each main message sits in the file, ascending: the message before a
    # boundary is found by bisection, not by a scan per boundary (quadratic on a
    # transcript of many compactions).
    msg_at = [position[id(m)] for m in msgs]
    on_path: set[str] = set()
    u: str | None = msgs[-1]["uuid"]
    while u and u not in on_path and u in by_uuid:
        on_path.add(u)
        r = by_uuid[u]
        u = _link(r.get("parentUuid")) or _link(r.get("logicalParentUuid"))
        if u and u not in by_uuid and r.get("subtype") == "compact_boundary":
            # The boundary names a record the file does not hold (the transcript was
            # trimmed or rotated): carry on from the last main-line message before it.
            k = bisect.bisect_left(msg_at, position[id(r)])
            before = msgs[k - 1] if k else None
            if notes is not None:
                notes.append(
                    f"compact_boundary {r['uuid']} names logicalParentUuid {u}, which is "
                    "not in the transcript; the main line continues from the last message "
                    f"record before the boundary ({before['uuid'] if before else 'none'})"
                )
            u = before["uuid"] if before else None
    message_ids = {
        r["message"]["id"]
        for r in records
        if _link(r.get("uuid")) in on_path
        and r.get("type") == "assistant"
        and isinstance(r.get("message"), dict)
        and _link(r["message"].get("id"))
    }
    kept_tools: set[str] = set()
    out = []
    for r in records:
        if r.get("isSidechain") or r.get("type") not in ("user", "assistant", "system"):
            continue
        keep = _link(r.get("uuid")) in on_path
        if not keep and r.get("type") == "assistant":
            msg = r.get("message")
            keep = isinstance(msg, dict) and _link(msg.get("id")) in message_ids
        if not keep and r.get("type") == "user":
            results = _blocks(r, "tool_result")
            keep = bool(results) and all(_link(b.get("tool_use_id")) in kept_tools for b in results)
        if keep:
            ids = (b.get("id") for b in _blocks(r, "tool_use"))
            kept_tools.update(i for i in ids if isinstance(i, str))
            out.append(r)
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                parts.append(str(b.get("text", "")))
            elif b.get("type") == "image":
                parts.append("[image]")
        return "\n".join(parts)
    return "" if content is None else str(content)


class _Converter:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.task: str | None = None
        self.model: str | None = None
        self.memory = FileMemory()
        self.pending_text: list[str] = []
        self.pending_usage: Usage | None = None
        self.usage_by_message: dict[str, Usage] = {}
        self.used_messages: set[str] = set()
        self.by_tool_id: dict[str, Step] = {}
        self.usage_for: list[tuple[Step, str]] = []
        self.pending_message: str | None = None

    # -- records

    def record(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "assistant":
            self.assistant(rec)
        elif kind == "user":
            self.user(rec)
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            self.flush_reply()
            meta = json_obj(rec, "compactMetadata")
            self.steps.append(
                Step(
                    index=len(self.steps),
                    action=Action(
                        tool="compact", args=dict(meta), raw=str(rec.get("content") or "")
                    ),
                    compaction=True,
                    note=None,
                )
            )

    def assistant(self, rec: dict[str, Any]) -> None:
        msg = json_obj(rec, "message")
        self.model = self.model or msg.get("model")
        mid = _link(msg.get("id"))
        usage = msg.get("usage")
        if isinstance(usage, dict) and mid:
            # The last record of a message carries its final output count.
            self.usage_by_message[mid] = _usage(usage)
        for block in msg.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                self.pending_text.append(str(block["text"]).strip())
                self.pending_message = mid
            elif block.get("type") == "tool_use":
                self.tool_use(block, mid)

    def tool_use(self, block: dict[str, Any], mid: str | None) -> None:
        name = str(block.get("name") or "unknown")
        args = json_obj(block, "input")
        step = Step(
            index=len(self.steps),
            thought="\n\n".join(self.pending_text) or None,
            action=Action(
                tool=_TOOL_NAMES.get(name, name),
                args=args,
                raw=json.dumps({"name": name, "input": args}, ensure_ascii=False),
            ),
            note="no tool result in the transcript",
        )
        self.pending_text = []
        self.claim_usage(step, mid)
        self.steps.append(step)
        if block.get("id"):
            self.by_tool_id[str(block["id"])] = step

    def user(self, rec: dict[str, Any]) -> None:
        content = _content(rec)
        results = _blocks(rec, "tool_result")
        if results:
            for block in results:
                self.tool_result(block, rec.get("toolUseResult"))
            return
        if rec.get("isMeta"):
            return
        text = _text_of(content).strip()
        if rec.get("isCompactSummary"):
            last = self.steps[-1] if self.steps else None
            if last is not None and last.compaction and last.observation is None:
                last.observation = text
            else:
                self.steps.append(
                    Step(
                        index=len(self.steps),
                        action=Action(tool="compact"),
                        observation=text,
                        compaction=True,
                    )
                )
            return
        if not text:
            return
        self.flush_reply()
        if self.task is None:
            self.task = text
            return
        self.steps.append(
            Step(
                index=len(self.steps),
                action=Action(tool="user", args={"text": text}, raw=text),
                observation=text,
            )
        )

    def tool_result(self, block: dict[str, Any], tur: Any) -> None:
        step = self.by_tool_id.get(str(block.get("tool_use_id")))
        if step is None:
            self.steps.append(
                Step(
                    index=len(self.steps),
                    action=Action(tool="unknown"),
                    observation=_text_of(block.get("content")),
                    parsed=False,
                    note=f"tool result for an unknown tool call {block.get('tool_use_id')}",
                )
            )
            return
        step.observation = _text_of(block.get("content"))
        step.note = None
        if block.get("is_error"):
            step.note = "the tool call failed or was rejected"
            return
        try:
            step.files = self.touches(step, tur if isinstance(tur, dict) else {})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            step.parsed = False
            step.note = (
                f"could not interpret the {step.action.tool} call: {type(exc).__name__}: {exc}"
            )

    # -- file touches per tool

    def touches(self, step: Step, tur: dict[str, Any]) -> list[FileTouch]:
        tool = step.action.tool
        args = step.action.args
        name = json.loads(step.action.raw)["name"]
        if tool == "read":
            path = str(args["file_path"])
            f = tur.get("file") if isinstance(tur.get("file"), dict) else None
            if f is not None:
                content = f.get("content")
                start = int(f.get("startLine") or args.get("offset") or 1)
                num = f.get("numLines")
                end = start + int(num) - 1 if isinstance(num, int) and num > 0 else None
                total = f.get("totalLines")
                if isinstance(content, str) and start == 1 and num == total:
                    self.memory.set(path, content)
                return [
                    FileTouch(path=path, op="read", start_line=start, end_line=end, content=content)
                ]
            return [FileTouch(path=path, op="read", start_line=args.get("offset"))]
        if tool == "write":
            path = str(args["file_path"])
            content = str(args["content"])
            self.memory.set(path, content)
            op = "create" if tur.get("type") == "create" else "write"
            return [FileTouch(path=path, op=op, content=content)]
        if tool == "edit":
            path = str(args["file_path"])
            edits = args["edits"] if name == "MultiEdit" else [args]
            base = tur.get("originalFile")
            if not isinstance(base, str):
                base = self.memory.get(path)
            out = []
            for e in edits:
                old, new = str(e["old_string"]), str(e["new_string"])
                after = None
                if base is not None and old in base:
                    after = (
                        base.replace(old, new)
                        if e.get("replace_all")
                        else base.replace(old, new, 1)
                    )
                base = after
                out.append(
                    FileTouch(path=path, op="edit", content=after, old_text=old, new_text=new)
                )
            if base is None:
                self.memory.forget(path)
            else:
                self.memory.set(path, base)
            return out
        if tool == "bash":
            parse = parse_command(str(args["command"]), step.observation, self.memory)
            if parse.notes:
                step.note = "; ".join(parse.notes)
            if not parse.ok:
                step.parsed = False
            return parse.files
        return []

    def claim_usage(self, step: Step, mid: str | None) -> None:
        # Usage is known only once the message's last record is read: resolve at the end.
        if mid and mid not in self.used_messages:
            self.used_messages.add(mid)
            self.usage_for.append((step, mid))

    def flush_reply(self) -> None:
        if self.pending_text:
            text = "\n\n".join(self.pending_text)
            step = Step(index=len(self.steps), thought=text, action=Action(tool="reply", raw=text))
            self.claim_usage(step, self.pending_message)
            self.steps.append(step)
            self.pending_text = []

    def finish_usage(self) -> None:
        for step, mid in self.usage_for:
            step.usage = self.usage_by_message.get(mid)


def _usage(u: dict[str, Any]) -> Usage:
    parts = [
        u.get(k) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    ]
    ints = [p for p in parts if isinstance(p, int)]
    write = parts[2] if isinstance(parts[2], int) else None
    split = u.get("cache_creation")
    hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
    hour = hour if isinstance(hour, int) else None
    return Usage(
        prompt_tokens=sum(ints) if ints else None,
        completion_tokens=u.get("output_tokens")
        if isinstance(u.get("output_tokens"), int)
        else None,
        cached_tokens=parts[1] if isinstance(parts[1], int) else None,
        # Claude Code writes its cache for an hour (billed at 2x input, not 1.25x).
        cache_write_tokens=None if write is None else write - (hour or 0),
        cache_write_1h_tokens=hour,
    )
