"""Converter for SWE-agent trajectories (``*.traj``).

The file is one JSON object with ``trajectory[]`` (each entry ``action``,
``observation``, ``thought``, ``response``, ``state{open_file, working_dir}``),
``history[]`` (the chat as the model saw it) and ``info``. When ``trajectory`` is absent
(some function-calling runs keep only the history), steps are rebuilt from the
history's assistant ``action`` messages and the observations after them.

SWE-agent's file viewer commands become reads of the window the observation shows:
the ``[File: path (N lines total)]`` header names the file and the ``123:text`` lines
give the range and content. ``edit a:b`` … ``end_of_edit`` is an edit of lines a..b;
``edit 'search' 'replace'`` and ``insert`` (the replace-style tools) are edits with the
old and new text; an edit the linter refused (``Your proposed edit has introduced new
syntax error(s)``) touches no file. Other commands go through the shell recogniser.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from typing import Any

from ._shell import FileMemory, parse_command
from .model import Action, FileTouch, Step, Trajectory, json_obj

__all__ = ["from_swe_agent"]

SOURCE_FORMAT = "swe-agent"
_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\)\]\s*$", re.MULTILINE)
_NUMBERED = re.compile(r"^(\d+):(.*)$")
_REFUSED = ("Your proposed edit has introduced new syntax error", "No replacement was performed")
_SCROLL = {"goto", "scroll_down", "scroll_up", "set_cursors"}


def from_swe_agent(data: dict[str, Any], *, source_path: str | None = None) -> Trajectory:
    """Convert a parsed SWE-agent ``.traj`` object to the neutral format.

    Args:
        data: the JSON object of a ``.traj`` file.
        source_path: where it came from; its file name becomes the trajectory id.

    Returns:
        The trajectory; steps the converter could not interpret have ``parsed=False``.

    Example:
        >>> t = from_swe_agent({"trajectory": [{
        ...     "action": "open src/a.py", "thought": "look", "state": {},
        ...     "observation": "[File: /repo/src/a.py (2 lines total)]\\n1:x = 1\\n2:y = 2\\n"}]})
        >>> f = t.steps[0].files[0]
        >>> (t.steps[0].action.tool, f.path, f.start_line, f.end_line, f.content)
        ('open', '/repo/src/a.py', 1, 2, 'x = 1\\ny = 2\\n')
    """
    raw_history = data.get("history")
    history = (
        [h for h in raw_history if isinstance(h, dict)] if isinstance(raw_history, list) else []
    )
    entries = data.get("trajectory")
    if not isinstance(entries, list) or not entries:
        entries = _from_history(history)
    system_prompt = next(
        (_text(h.get("content")) for h in history if h.get("role") == "system"), None
    )
    first_user = next((_text(h.get("content")) for h in history if h.get("role") == "user"), None)
    conv = _Converter()
    steps: list[Step] = []
    for entry in entries:
        if not isinstance(entry, dict):
            steps.append(
                Step(
                    index=len(steps),
                    action=Action(tool="unknown", raw=str(entry)[:2000]),
                    parsed=False,
                    note=f"a trajectory entry must be an object, not {type(entry).__name__}",
                )
            )
            continue
        try:
            step = conv.step(len(steps), entry)
        except Exception as exc:  # one odd step must not lose the run
            step = Step(
                index=len(steps),
                action=Action(tool="unknown", raw=str(entry.get("action", ""))[:2000]),
                observation=_text(entry.get("observation")) or None,
                parsed=False,
                note=f"converter error: {type(exc).__name__}: {exc}",
            )
        steps.append(step)
    info = json_obj(data, "info")
    stats = json_obj(info, "model_stats")
    name = posixpath.basename(source_path) if source_path else "swe-agent"
    metadata = {
        k: v
        for k, v in {
            "exit_status": info.get("exit_status"),
            "environment": data.get("environment"),
            "api_calls": stats.get("api_calls"),
            "tokens_sent": stats.get("tokens_sent"),
            "tokens_received": stats.get("tokens_received"),
            "instance_cost": stats.get("instance_cost"),
        }.items()
        if v is not None
    }
    return Trajectory(
        id=name.removesuffix(".traj"),
        source_format=SOURCE_FORMAT,
        source_path=source_path,
        task=_task(first_user) if first_user else None,
        system_prompt=system_prompt,
        steps=steps,
        metadata=metadata,
    )


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return "" if content is None else str(content).replace("\r\n", "\n")


def _task(first_user: str) -> str:
    m = re.search(r"ISSUE:\n(.*?)\n+INSTRUCTIONS:", first_user, re.DOTALL)
    return m.group(1).strip() if m else first_user


def _from_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for k, h in enumerate(history):
        if h.get("role") != "assistant" or "action" not in h:
            continue
        nxt = history[k + 1] if k + 1 < len(history) else None
        obs = _text(nxt.get("content")) if nxt and nxt.get("role") in ("tool", "user") else None
        entries.append({"action": h.get("action"), "thought": h.get("thought"), "observation": obs})
    return entries


def _window(observation: str, working_dir: str | None) -> FileTouch | None:
    """The file window an observation shows, as a read."""
    headers = list(_HEADER.finditer(observation))
    if not headers:
        return None
    header = headers[-1]
    path = header.group(1)
    if working_dir and not path.startswith("/"):
        path = posixpath.normpath(posixpath.join(working_dir, path))
    numbers: list[int] = []
    lines: list[str] = []
    for line in observation[header.end() :].split("\n"):
        m = _NUMBERED.match(line)
        if m:
            numbers.append(int(m.group(1)))
            lines.append(m.group(2))
        elif numbers and not line.startswith("<<<<<") and not line.startswith("("):
            break  # the window ended: trailing messages follow
    if not numbers:
        return FileTouch(path=path, op="read")
    return FileTouch(
        path=path,
        op="read",
        start_line=numbers[0],
        end_line=numbers[-1],
        content="".join(t + "\n" for t in lines),
    )


class _Converter:
    def __init__(self) -> None:
        self.memory = FileMemory()
        self.open_file: str | None = None
        self.cursors: tuple[int, int] | None = None

    def step(self, index: int, entry: dict[str, Any]) -> Step:
        raw = str(entry.get("action") or "")
        action_text = raw.strip()
        observation = _text(entry.get("observation"))
        state = entry.get("state")
        if isinstance(state, str):  # some versions store the state as a JSON string
            try:
                state = json.loads(state)
            except ValueError:
                state = {}
        state = state if isinstance(state, dict) else {}
        working_dir = (
            state.get("working_dir") if isinstance(state.get("working_dir"), str) else None
        )
        open_file = state.get("open_file")
        if isinstance(open_file, str) and open_file not in ("n/a", ""):
            self.open_file = open_file
        thought = _text(entry.get("thought")).strip() or None
        first_line, _, body = action_text.partition("\n")
        try:
            words = shlex.split(first_line)
        except ValueError:
            words = first_line.split()
        cmd = words[0] if words else ""
        files: list[FileTouch] = []
        note: str | None = None
        parsed = True
        refused = any(r in observation for r in _REFUSED)
        window = _window(observation, working_dir)
        tool: str
        args: dict[str, Any]
        path: str | None

        if cmd == "open" and len(words) >= 2:
            tool, args = (
                "open",
                {"path": words[1], **({"line": words[2]} if len(words) > 2 else {})},
            )
            files = [window] if window else []
        elif cmd in _SCROLL:
            tool, args = "scroll", {"command": cmd, "args": words[1:]}
            if cmd == "set_cursors" and len(words) == 3:
                self.cursors = (int(words[1]), int(words[2]))
            files = [window] if window else []
        elif cmd == "create" and len(words) >= 2:
            tool, args = "create", {"path": words[1]}
            path = window.path if window else words[1]
            files = [FileTouch(path=path, op="create", content="")]
        elif cmd == "edit":
            tool, args, files, note = self.edit(words, body, window, refused)
        elif cmd == "insert":
            tool = "edit"
            text = words[1] if len(words) > 1 else body
            line = int(words[2]) if len(words) > 2 and words[2].isdigit() else None
            args = {"text": text, "line": line}
            path = window.path if window else self.open_file
            if refused or path is None:
                note = "the insert was refused" if refused else "no open file for insert"
            else:
                files = [FileTouch(path=path, op="edit", start_line=line, new_text=text)]
        elif cmd in ("search_file", "search_dir", "find_file"):
            tool = "glob" if cmd == "find_file" else "search"
            args = {"command": cmd, "args": words[1:]}
            if cmd == "search_file":
                target = words[2] if len(words) > 2 else self.open_file
                if target:
                    files = [FileTouch(path=target, op="read", content=observation or None)]
        elif cmd == "submit":
            tool, args = "submit", {}
        else:
            tool, args = "bash", {"command": action_text}
            parse = parse_command(action_text, observation, self.memory, cwd=None)
            files, parsed = parse.files, parse.ok
            note = "; ".join(parse.notes) or None
        if window is not None and tool in ("open", "scroll", "create", "edit"):
            self.open_file = window.path
        return Step(
            index=index,
            thought=thought,
            action=Action(tool=tool, args=args, raw=raw),
            observation=observation if entry.get("observation") is not None else None,
            files=files,
            parsed=parsed,
            note=note,
        )

    def edit(
        self, words: list[str], body: str, window: FileTouch | None, refused: bool
    ) -> tuple[str, dict[str, Any], list[FileTouch], str | None]:
        path = window.path if window else self.open_file
        text = body.rsplit("end_of_edit", 1)[0] if "end_of_edit" in body else body
        m = re.fullmatch(r"(\d+):(\d+)", words[1]) if len(words) > 1 else None
        start: int | None
        end: int | None
        if m:
            start, end = int(m.group(1)), int(m.group(2))
            args: dict[str, Any] = {"start_line": start, "end_line": end, "text": text}
            touch = FileTouch(
                path=path or "", op="edit", start_line=start, end_line=end, new_text=text
            )
        elif len(words) >= 3:  # edit 'search' 'replace' [replace-all]
            args = {"search": words[1], "replace": words[2]}
            touch = FileTouch(path=path or "", op="edit", old_text=words[1], new_text=words[2])
        else:  # cursor mode: the range is the last set_cursors
            start, end = self.cursors if self.cursors else (None, None)
            args = {"text": text, "start_line": start, "end_line": end}
            touch = FileTouch(
                path=path or "", op="edit", start_line=start, end_line=end, new_text=text
            )
        if refused:
            return "edit", args, [], "the edit was refused (syntax check failed); file unchanged"
        if not path:
            return "edit", args, [], "no open file to edit"
        return "edit", args, [touch], None
