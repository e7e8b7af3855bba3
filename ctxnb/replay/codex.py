"""Converter for Codex CLI rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}`` (``RolloutLine`` in openai/codex,
``codex-rs/protocol/src/protocol.rs``), where ``type`` is ``session_meta``,
``turn_context``, ``response_item``, ``event_msg`` or ``compacted``. Decisions:

- **Prompt.** ``session_meta.base_instructions`` and the ``developer`` messages and
  context blocks (``<environment_context>``, ``<user_instructions>``, ``# AGENTS.md``)
  Codex sends before the first prompt form the system prompt; the first other user
  message is the task, a later one a ``user`` step.
- **Steps.** One step per tool call, in file order. Shell calls (``shell`` with an argv,
  ``shell_command``, ``exec_command``, ``local_shell_call``) are ``bash`` steps whose
  command is the argv as one shell line (``bash -lc SCRIPT`` is ``SCRIPT``), read for the
  files they touch as mini-swe-agent's are. ``apply_patch`` (a ``custom_tool_call``, a
  ``function_call``, or run through the shell tool as ``["apply_patch", PATCH]`` or as a
  script that is only ``apply_patch <<'EOF'`` … ``EOF``) is an ``edit`` step with one
  touch per file of the patch (``create``, ``edit``, ``delete``; a move is a delete and a
  write). Any other tool keeps its own name. Reasoning summaries and assistant text
  before a call are its thought; assistant text with no call after it is a ``reply``. A
  ``compacted`` line is a ``compact`` step whose observation is the summary the next
  context starts from.
- **Outputs.** A ``*_output`` item is the observation of the call with its ``call_id``;
  an output that names no call of the file is an unparsed step, so it is not lost.
- **Commands still running.** ``exec_command`` waits ``yield_time_ms`` and then answers
  ``Process running with session ID N`` with what the command printed so far; the model
  reads the rest with ``write_stdin`` calls naming ``session_id`` N until one answers
  ``Process exited with code …``. The command's file touches are read from its whole
  output, gathered over those answers, and belong to the ``write_stdin`` step whose
  answer ended it (where the model had seen all of it); before that the ``bash`` step
  claims no file content. A command the rollout never sees end, or one the model typed
  into (``chars``), claims none either.
- **Usage.** Each ``event_msg`` ``token_count`` reports the model call just made:
  ``last_token_usage`` gives ``prompt_tokens = input_tokens`` (OpenAI counts the cached
  part inside it), ``cached_tokens = cached_input_tokens`` and ``completion_tokens =
  output_tokens`` (reasoning included). It goes to the first step that call produced.
  Codex repeats a ``token_count`` unchanged (the same ``total_token_usage``) when a turn
  ends; the repeat is not a call and is not counted.
- **Rollbacks.** A ``thread_rolled_back`` event says Codex removed the last
  ``num_turns`` user turns from the model's context (the user backtracked). Their lines
  stay in the file and the replay keeps their steps, so from there the replay holds more
  than Codex sent: ``metadata["notes"]`` names each rollback and its line, and the
  fidelity report counts them, rather than the figures passing in silence.
- **Damage.** A record of the wrong shape, or a call whose ``arguments`` are not JSON, is
  an unparsed step whose note names the line; types this reader does not know are counted
  in ``metadata["unknown_items"]``, the known items it keeps no step for (a
  ``web_search_call``, a ``ghost_snapshot`` …) in ``metadata["items_not_kept"]``, and the
  ``event_msg`` types it does not read in ``metadata["events_not_read"]``. Which lines
  the file could not read at all is the caller's concern (:func:`ctxnb.replay.load`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from .._util.jsonl import SkippedLine, iter_jsonl
from ._apply_patch import parse_apply_patch
from ._shell import FileMemory, parse_command
from .model import Action, Step, Trajectory, TrajectoryFormatError, Usage, json_obj

__all__ = [
    "SOURCE_FORMAT",
    "check_codex_lines",
    "codex_fidelity",
    "from_codex",
    "is_codex_record",
]

SOURCE_FORMAT = "codex"
_LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
# Items Codex keeps that are neither a call, its output nor conversation, and why a load
# keeps no step for them (the fidelity report names them with these reasons).
_NOT_KEPT: dict[str, str] = {
    "web_search_call": "a search the provider ran; its results never reach the rollout",
    "ghost_snapshot": "Codex's own undo snapshot (a git commit), never shown to the model",
    "compaction": "a remote compaction's summary, encrypted; the rollout has no text of it",
    "other": "an item Codex itself could not type",
}
# Context Codex injects as user messages before the first prompt.
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_SHELL_TOOLS = frozenset({"shell", "container.exec", "shell_command", "exec_command"})
_PATCH_COMMANDS = frozenset({"apply_patch", "applypatch"})
# `apply_patch <<'EOF'` … `EOF`, as the model writes it inside a shell script.
_PATCH_HEREDOC = re.compile(
    r"\A\s*(?:cd\s+\S+\s*&&\s*)?(?:apply_patch|applypatch)\s*<<-?\s*['\"]?(\w+)['\"]?\s*\n"
    r"(?P<body>.*?)\n\1\s*\Z",
    re.DOTALL,
)
_SHELL_WRAPPERS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh"})


def is_codex_record(rec: Any) -> bool:
    """Whether a parsed JSON line is a Codex rollout line.

    Example:
        >>> is_codex_record({"timestamp": "t", "type": "session_meta", "payload": {}})
        True
        >>> is_codex_record({"type": "user", "uuid": "u"})
        False
    """
    return (
        isinstance(rec, dict)
        and isinstance(rec.get("type"), str)
        and rec["type"] in _LINE_TYPES
        and "payload" in rec
        and "uuid" not in rec
    )


def from_codex(
    records: list[tuple[int, dict[str, Any]]],
    *,
    source_path: str | None = None,
    skipped_lines: int = 0,
) -> Trajectory:
    """Convert the lines of a Codex rollout to the neutral format.

    Args:
        records: ``(line number, parsed line)`` pairs, in file order.
        source_path: where they came from, recorded in the trajectory.
        skipped_lines: lines the caller could not parse (kept in the metadata).

    Returns:
        The trajectory (see the module docstring).

    Example:
        >>> call = {"type": "function_call", "name": "shell", "call_id": "c1",
        ...         "arguments": '{"command": ["bash", "-lc", "cat a.py"]}'}
        >>> lines = [
        ...     {"type": "session_meta", "payload": {"id": "s1", "cwd": "/w"}},
        ...     {"type": "response_item", "payload": {"type": "message", "role": "user",
        ...      "content": [{"type": "input_text", "text": "Fix a.py"}]}},
        ...     {"type": "response_item", "payload": call},
        ...     {"type": "event_msg", "payload": {"type": "token_count", "info": {
        ...      "last_token_usage": {"input_tokens": 900, "cached_input_tokens": 800,
        ...                           "output_tokens": 20}}}},
        ...     {"type": "response_item", "payload": {"type": "function_call_output",
        ...      "call_id": "c1", "output": "x = 1\\n"}},
        ... ]
        >>> t = from_codex(list(enumerate(lines, 1)))
        >>> s = t.steps[0]
        >>> (t.task, s.action.args["command"], s.files[0].content, s.usage.cached_tokens)
        ('Fix a.py', 'cat a.py', 'x = 1\\n', 800)
    """
    conv = _Converter()
    for lineno, rec in records:
        try:
            conv.line(lineno, rec)
        except Exception as exc:  # one odd line must not lose the run
            conv.flush_reply()
            conv.add(
                Step(
                    index=0,
                    action=Action(tool="unknown", raw=json.dumps(rec, default=str)[:2000]),
                    parsed=False,
                    note=f"line {lineno}: converter error: {type(exc).__name__}: {exc}",
                )
            )
    conv.flush_reply()
    for session, (command, _, _) in conv.running.items():
        command.note = (
            f"still running as session {session} when the rollout ends; the files it "
            "touched are unknown"
        )
    meta = conv.meta
    git = json_obj(meta, "git")
    metadata: dict[str, Any] = {
        k: v
        for k, v in {
            "session_id": meta.get("id"),
            "cwd": meta.get("cwd"),
            "cli_version": meta.get("cli_version"),
            "originator": meta.get("originator"),
            "model_provider": meta.get("model_provider"),
            "git_branch": git.get("branch"),
            "model": conv.model,
            "records": len(records),
            "model_calls": conv.calls or None,
            "repeated_token_counts": conv.repeats or None,
            "unknown_items": dict(sorted(conv.unknown.items())) or None,
            "items_not_kept": dict(sorted(conv.passive.items())) or None,
            "events_not_read": dict(sorted(conv.events.items())) or None,
            "notes": conv.notes or None,
            "skipped_lines": skipped_lines or None,
        }.items()
        if v is not None
    }
    for i, step in enumerate(conv.steps):
        step.index = i
    system = "\n\n".join(conv.prompt) or None
    return Trajectory(
        id=str(meta.get("id") or "codex"),
        source_format=SOURCE_FORMAT,
        source_path=source_path,
        task=conv.task,
        system_prompt=system,
        steps=conv.steps,
        metadata=metadata,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif part.get("type") == "input_image":
                parts.append("[image]")
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False, sort_keys=True)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(last: dict[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=_count(last.get("input_tokens")),
        cached_tokens=_count(last.get("cached_input_tokens")),
        completion_tokens=_count(last.get("output_tokens")),
    )


def _shell_line(argv: list[str]) -> str:
    """The command an argv runs, as one shell line; ``bash -lc SCRIPT`` is ``SCRIPT``."""
    if len(argv) == 3 and argv[0] in _SHELL_WRAPPERS and argv[1] in ("-lc", "-c"):
        return argv[2]
    return shlex.join(argv)


def _patch_heredoc(script: str) -> str | None:
    """The patch of a script that is only ``apply_patch <<'EOF' … EOF``."""
    m = _PATCH_HEREDOC.match(script)
    return m.group("body") if m else None


_RUNNING = re.compile(r"^Process running with session ID (-?\d+)$", re.MULTILINE)


def _command_output(output: str) -> tuple[str, bool]:
    """The command's own output inside Codex's envelope, and whether it is whole.

    ``exec_command`` answers ``Chunk ID …\\nProcess exited with code N\\nOutput:\\n…``;
    older ``shell`` outputs are JSON ``{"output": …, "metadata": {"exit_code": …}}``.
    """
    body, whole, _, _ = _exec_envelope(output)
    return body, whole


def _exec_envelope(output: str) -> tuple[str, bool, int | None, bool]:
    """:func:`_command_output`, the session of a command still running (else None), and
    whether the output was in an envelope at all."""
    if output.startswith("{"):
        try:
            data = json.loads(output)
        except (json.JSONDecodeError, RecursionError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("output"), str):
            return data["output"], True, None, True
    head, sep, body = output.partition("Output:\n")
    if sep and ("exit code" in head.lower() or "Wall time" in head):
        # Codex cuts a long output in the middle and says so, before the envelope or
        # (0.125) at the start of the output; then it is not the file.
        whole = (
            "Total output lines" not in head
            and not body.startswith("Total output lines:")
            and "tokens truncated" not in body
        )
        running = _RUNNING.search(head)
        return body, whole, int(running.group(1)) if running else None, True
    return output, True, None, False


# --------------------------------------------------------------------------- converter


class _Converter:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.meta: dict[str, Any] = {}
        self.model: str | None = None
        self.cwd: str | None = None
        self.task: str | None = None
        self.prompt: list[str] = []
        self.memory = FileMemory()
        self.pending: list[str] = []
        self.by_call: dict[str, Step] = {}
        # Commands still running, by Codex's session ID: the command's step, its output
        # so far, and whether that output is whole.
        self.running: dict[int, tuple[Step, list[str], bool]] = {}
        self.call_start = 0  # first step of the model call under way
        self.last_total: Any = None
        self.calls = 0
        self.repeats = 0
        self.unknown: Counter[str] = Counter()
        self.passive: Counter[str] = Counter()
        self.events: Counter[str] = Counter()
        self.notes: list[str] = []

    def add(self, step: Step) -> None:
        step.index = len(self.steps)
        self.steps.append(step)

    def add_between_calls(self, step: Step) -> None:
        """A step no model call made (a prompt, a compaction): the next call's tokens skip it."""
        behind = self.call_start == len(self.steps)
        self.add(step)
        if behind:
            self.call_start = len(self.steps)

    def thought(self) -> str | None:
        text = "\n\n".join(t for t in self.pending if t.strip()) or None
        self.pending = []
        return text

    def flush_reply(self) -> None:
        if self.pending:
            text = self.thought()
            if text:
                reply = Action(tool="reply", args={"message": text}, raw=text)
                self.add(Step(index=0, action=reply))

    # -- lines

    def line(self, lineno: int, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        payload = rec.get("payload")
        if not isinstance(kind, str) or kind not in _LINE_TYPES:
            self.unknown[f"line:{kind}"] += 1
            return
        if not isinstance(payload, dict):
            raise ValueError(f"the payload of a {kind} line is {type(payload).__name__}")
        if kind == "session_meta":
            # SessionMetaLine: the session's fields flattened, beside its git info.
            meta: dict[str, Any] = payload
            self.meta = meta
            self.cwd = str(meta["cwd"]) if isinstance(meta.get("cwd"), str) else None
            base = meta.get("base_instructions") or meta.get("instructions")
            base_text = base.get("text") if isinstance(base, dict) else base
            if isinstance(base_text, str) and base_text:
                self.prompt.append(base_text)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str):
                self.model = self.model or payload["model"]
            if isinstance(payload.get("cwd"), str):
                self.cwd = payload["cwd"]
        elif kind == "compacted":
            self.flush_reply()
            message = _text(payload.get("message"))
            self.add_between_calls(
                Step(
                    index=0,
                    action=Action(tool="compact", args={"message": message}, raw=message),
                    observation=message or None,
                    compaction=True,
                )
            )
        elif kind == "event_msg":
            if payload.get("type") == "thread_rolled_back":
                turns = _count(payload.get("num_turns"))
                self.notes.append(
                    f"line {lineno}: Codex rolled back {turns if turns is not None else 'some'} "
                    "user turn(s) here; the replay keeps them, so from here its context holds "
                    "more than Codex sent"
                )
                return
            self.event(payload)
        else:
            self.item(lineno, payload)

    def event(self, payload: dict[str, Any]) -> None:
        if payload.get("type") != "token_count":
            # user_message, agent_message, agent_reasoning, exec_command_end … repeat what
            # the response items hold, for the terminal's display; counted by name so a
            # report shows what was not read.
            self.events[str(payload.get("type"))] += 1
            return
        info = payload.get("info")
        if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
            return  # a rate-limit update with no usage
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            self.repeats += 1
            return
        self.last_total = total
        self.calls += 1
        self.flush_reply()
        if self.call_start == len(self.steps):
            # The call left nothing in the file (an empty answer): a step still carries
            # its tokens, so that the run's sums stay true.
            self.add(Step(index=0, action=Action(tool="reply", args={"message": ""})))
        self.steps[self.call_start].usage = _usage(info["last_token_usage"])
        self.call_start = len(self.steps)

    def item(self, lineno: int, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"a response item whose type is {type(kind).__name__}")
        if kind == "message":
            self.message(item)
        elif kind == "reasoning":
            summary = item.get("summary")
            if isinstance(summary, list):
                self.pending.append(_text(summary))
        elif kind in _CALL_ITEMS:
            self.call(lineno, item)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.output(lineno, item)
        elif kind in _NOT_KEPT:
            self.passive[kind] += 1
        else:
            self.unknown[str(kind)] += 1

    def message(self, item: dict[str, Any]) -> None:
        role = item.get("role")
        text = _text(item.get("content"))
        if role == "assistant":
            self.pending.append(text)
            return
        if role in ("developer", "system"):
            if self.task is None:
                self.prompt.append(text)
            return
        if self.task is None:
            if text.lstrip().startswith(_CONTEXT_PREFIXES):
                self.prompt.append(text)
            else:
                self.task = text
            return
        if text.lstrip().startswith(_CONTEXT_PREFIXES):
            return  # Codex repeats its context after a compaction or a resume
        self.flush_reply()
        self.add_between_calls(
            Step(index=0, action=Action(tool="user", args={"text": text}, raw=text))
        )

    def call(self, lineno: int, item: dict[str, Any]) -> None:
        thought = self.thought()
        name = str(item.get("name") or item.get("type"))
        call_id = item.get("call_id") or item.get("id")
        raw_args: Any = item.get("arguments", item.get("input"))
        if item.get("type") == "local_shell_call":
            action = json_obj(item, "action")
            args: Any = {
                "command": action.get("command"),
                "workdir": action.get("working_directory"),
            }
            name = "shell"
            raw = json.dumps(action, ensure_ascii=False)
        elif item.get("type") == "custom_tool_call":
            args = {"input": raw_args}
            raw = str(raw_args)
        else:
            raw = raw_args if isinstance(raw_args, str) else json.dumps(raw_args)
            try:
                args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
            except (json.JSONDecodeError, RecursionError) as exc:
                args = None
                why = f"line {lineno}: the {name} call's arguments are not JSON ({exc})"
            else:
                why = f"line {lineno}: the {name} call's arguments are not a JSON object"
            if not isinstance(args, dict):
                step = Step(
                    index=0,
                    thought=thought,
                    action=Action(tool=name, raw=str(raw)[:2000]),
                    parsed=False,
                    note=why,
                )
                self.add(step)
                if isinstance(call_id, str):
                    self.by_call[call_id] = step
                return
        step = self.convert(lineno, name, args, raw, thought)
        self.add(step)
        if isinstance(call_id, str):
            self.by_call[call_id] = step

    def convert(
        self, lineno: int, name: str, args: dict[str, Any], raw: str, thought: str | None
    ) -> Step:
        command: str | None = None
        if name in ("shell", "container.exec"):
            argv = args.get("command")
            if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
                if len(argv) == 2 and argv[0] in _PATCH_COMMANDS:
                    # Codex's model calls apply_patch as a command too; Codex runs it
                    # itself, not in a shell.
                    name, args = "apply_patch", {"input": argv[1]}
                else:
                    command = _shell_line(argv)
            elif isinstance(argv, str):
                command = argv
        elif name in ("shell_command", "exec_command"):
            value = args.get("cmd", args.get("command"))
            command = value if isinstance(value, str) else None
        if command is not None and (heredoc := _patch_heredoc(command)) is not None:
            name, args = "apply_patch", {"input": heredoc}
        if name == "apply_patch":
            patch = args.get("input")
            if not isinstance(patch, str):
                return Step(
                    index=0,
                    thought=thought,
                    action=Action(tool="edit", args=args, raw=raw),
                    parsed=False,
                    note=f"line {lineno}: an apply_patch call without a patch text",
                )
            return Step(
                index=0,
                thought=thought,
                action=Action(tool="edit", args={"patch": patch}, raw=raw),
                note="no tool output in the rollout",
            )
        if name not in _SHELL_TOOLS:
            return Step(index=0, thought=thought, action=Action(tool=name, args=args, raw=raw))
        if command is None:
            return Step(
                index=0,
                thought=thought,
                action=Action(tool="bash", args=args, raw=raw),
                parsed=False,
                note=f"line {lineno}: a {name} call without a command",
            )
        workdir = args.get("workdir")
        bash_args: dict[str, Any] = {"command": command}
        if isinstance(workdir, str):
            bash_args["workdir"] = workdir
        return Step(
            index=0,
            thought=thought,
            action=Action(tool="bash", args=bash_args, raw=raw),
            note="no tool output in the rollout",
        )

    def output(self, lineno: int, item: dict[str, Any]) -> None:
        call_id = item.get("call_id")
        out = item.get("output")
        if isinstance(out, dict):  # a failure: {"content": …, "success": false}
            text = _text(out.get("content"))
        else:
            text = _text(out)
        step = self.by_call.get(call_id) if isinstance(call_id, str) else None
        if step is None:
            self.flush_reply()
            self.add(
                Step(
                    index=0,
                    action=Action(tool="unknown"),
                    observation=text,
                    parsed=False,
                    note=f"line {lineno}: output for a call the rollout does not hold ({call_id})",
                )
            )
            return
        step.observation = text
        if step.note == "no tool output in the rollout":
            step.note = None
        if not step.parsed:
            return
        if step.action.tool == "edit" and "patch" in step.action.args:
            self.patch(lineno, step)
        elif step.action.tool == "bash":
            body, whole, session, _ = _exec_envelope(text)
            if session is not None:
                # What it printed so far is not all of it: no file content yet.
                self.running[session] = (step, [body], whole)
                step.note = (
                    f"still running as session {session}; its output continues in "
                    "write_stdin answers"
                )
                return
            self.shell_files(step, step, body, whole)
        elif step.action.tool == "write_stdin":
            self.continued(step, text)

    def shell_files(self, command: Step, target: Step, body: str, whole: bool) -> None:
        """The touches of ``command``'s shell line given its output, put on ``target``."""
        workdir = command.action.args.get("workdir")
        cwd = workdir if isinstance(workdir, str) else self.cwd
        parse = parse_command(
            str(command.action.args["command"]),
            body,
            self.memory,
            output_complete=whole,
            cwd=_relative(cwd, self.cwd),
        )
        target.files = parse.files
        command.parsed = parse.ok
        notes = "; ".join(parse.notes) or None
        if target is command:
            command.note = notes
        else:
            command.note = f"ran as a session; its output ended at step {target.index}"
            target.note = notes

    def continued(self, step: Step, text: str) -> None:
        """A ``write_stdin`` answer: more output of a command still running, or its end."""
        session = _count(step.action.args.get("session_id"))
        if session is None or session not in self.running:
            return
        body, whole, still, framed = _exec_envelope(text)
        if not framed:
            # Not an envelope (``write_stdin failed: …``): nothing was read from the command.
            return
        command, chunks, whole_so_far = self.running[session]
        chunks.append(body)
        # Text the model typed into the command may be echoed into its output.
        typed = step.action.args.get("chars")
        whole_so_far = whole_so_far and whole and not typed
        if still is not None:
            self.running[session] = (command, chunks, whole_so_far)
            return
        del self.running[session]
        self.shell_files(command, step, "".join(chunks), whole_so_far)

    def patch(self, lineno: int, step: Step) -> None:
        body, _ = _command_output(step.observation or "")
        if "Success" not in body and "Done!" not in body and step.observation:
            # apply_patch refused it (a chunk did not match): nothing changed on disk.
            step.note = "apply_patch did not apply the patch"
            return
        try:
            step.files = parse_apply_patch(
                str(step.action.args["patch"]), self.memory, root=self.cwd
            )
        except ValueError as exc:
            step.parsed = False
            step.note = f"line {lineno}: {exc}"


def _relative(cwd: str | None, root: str | None) -> str | None:
    """A working directory relative to the session's, so paths stay as the agent saw them."""
    if cwd is None or root is None or cwd == root:
        return None
    if cwd.startswith(root.rstrip("/") + "/"):
        return cwd[len(root.rstrip("/")) + 1 :]
    return cwd


def check_codex_lines(where: str, skipped: list[SkippedLine], not_objects: list[int]) -> None:
    """Refuse a rollout with a damaged line (any but a cut last line), naming the first.

    Raises:
        TrajectoryFormatError: a line inside the file is not a whole JSON object.
    """
    # Fail closed on damage inside the file; only the cut last line of a live file passes.
    damaged = [s for s in skipped if not s.reason.startswith("cut line")]
    damaged += [SkippedLine(n, "not a JSON object", "") for n in not_objects]
    damaged.sort(key=lambda s: s.lineno)
    if damaged:
        first = damaged[0]
        raise TrajectoryFormatError(
            f"{where}: line {first.lineno} of the Codex rollout is damaged ({first.reason}: "
            f"{first.preview!r}); {len(damaged)} damaged line(s) in all. Codex writes whole "
            "JSON lines, so the file was edited or corrupted: restore it, or delete the "
            "damaged line if the run without it is what you want to replay.",
            path=where,
        )


# --------------------------------------------------------------------------- fidelity


def codex_fidelity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What a load keeps of a Codex rollout: each figure as the file has it and as kept.

    Returns:
        ``tool_calls`` (the file's call items against the loaded steps that are calls),
        ``outputs`` (output items against the calls' observations), ``model_calls``
        (distinct ``token_count`` reports against steps with usage), ``prompt_tokens``,
        ``cached_tokens`` and ``completion_tokens`` (the file's last
        ``total_token_usage`` against the sum over the loaded steps), each as a
        ``(file, kept)`` pair; ``unparsed`` steps and ``unknown_items``; ``not_kept``,
        the items of a known type a load keeps no step for, each as ``(count, reason)``;
        ``events_not_read``, the ``event_msg`` types other than ``token_count``, by count
        (they repeat the response items for the terminal); ``rollbacks``, the turns
        Codex removed from the context that the replay still holds (see ``notes``).

    Raises:
        TrajectoryFormatError: the file is not a Codex rollout, or a line inside it is
            damaged (named, as :func:`ctxnb.replay.load` names it).

    Example:
        >>> import json, tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "rollout.jsonl"
        >>> _ = p.write_text(json.dumps({"timestamp": "t", "type": "event_msg",
        ...     "payload": {"type": "token_count", "info": {
        ...         "total_token_usage": {"input_tokens": 7, "output_tokens": 1},
        ...         "last_token_usage": {"input_tokens": 7, "output_tokens": 1}}}}) + "\\n")
        >>> codex_fidelity(p)["prompt_tokens"]
        (7, 7)
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryFormatError(f"{where}: cannot be read ({exc}).", path=where) from None
    skipped: list[SkippedLine] = []
    numbered = list(iter_jsonl(text, skipped=skipped, objects=False))
    records = [(n, r) for n, r in numbered if isinstance(r, dict)]
    if not any(is_codex_record(r) for _, r in records):
        raise TrajectoryFormatError(
            f"{where}: not a Codex rollout (no line with type session_meta, response_item …).",
            path=where,
        )
    # The figures of a damaged file would leave its damage out: refused as load() does.
    check_codex_lines(where, skipped, [n for n, r in numbered if not isinstance(r, dict)])
    t = from_codex(records, source_path=where, skipped_lines=len(skipped))
    items = [r["payload"] for _, r in records if r.get("type") == "response_item"]
    items = [i for i in items if isinstance(i, dict)]
    calls = sum(1 for i in items if i.get("type") in _CALL_ITEMS)
    outputs = sum(
        1 for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")
    )
    total: dict[str, Any] = {}
    reports = 0
    previous: Any = None
    for _, r in records:
        p = r.get("payload")
        if r.get("type") == "event_msg" and isinstance(p, dict) and p.get("type") == "token_count":
            info = p.get("info")
            if isinstance(info, dict) and isinstance(info.get("last_token_usage"), dict):
                now = info.get("total_token_usage")
                if now is None or now != previous:
                    reports += 1
                previous = now
                if isinstance(now, dict):
                    total = now
    usages = [s.usage for s in t.steps if s.usage is not None]

    def kept(field: str) -> int:
        return sum(v for u in usages if (v := getattr(u, field)) is not None)

    as_calls = [s for s in t.steps if s.action.tool not in ("reply", "user", "compact", "unknown")]
    return {
        "tool_calls": (calls, len(as_calls)),
        "outputs": (outputs, sum(1 for s in as_calls if s.observation is not None)),
        "model_calls": (reports, len(usages)),
        "prompt_tokens": (total.get("input_tokens", 0), kept("prompt_tokens")),
        "cached_tokens": (total.get("cached_input_tokens", 0), kept("cached_tokens")),
        "completion_tokens": (total.get("output_tokens", 0), kept("completion_tokens")),
        "unparsed": t.unparsed_count,
        "unknown_items": t.metadata.get("unknown_items", {}),
        "not_kept": {k: (n, _NOT_KEPT[k]) for k, n in t.metadata.get("items_not_kept", {}).items()},
        "events_not_read": t.metadata.get("events_not_read", {}),
        "rollbacks": len(t.metadata.get("notes", [])),
    }
