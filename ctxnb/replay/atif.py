"""Harbor's Agent Trajectory Interchange Format (ATIF): read it, and write it back.

ATIF (laude-institute/harbor, ``docs/rfcs/0001-trajectory-format.md``) is one JSON
object: ``schema_version`` (``"ATIF-v1.4"`` …), ``session_id``, ``agent`` (``name``,
``version``, ``model_name``), ``steps[]`` and ``final_metrics``. A step has a ``source``
(``system``, ``user`` or ``agent``), a ``message``, and for an agent turn
``reasoning_content``, ``tool_calls[]`` (``tool_call_id``, ``function_name``,
``arguments``), an ``observation`` whose ``results[]`` name the call they answer by
``source_call_id``, and ``metrics`` (``prompt_tokens`` including ``cached_tokens``,
``completion_tokens``, ``cost_usd``).

Reading (:func:`from_atif`): the leading system step is the system prompt and the first
user step the task. An agent step becomes one neutral step per tool call, because a
neutral step holds one action; the step's thought and token counts go with its first
call, so no token is counted twice. A result without ``source_call_id`` (Harbor's
terminus-2 writes one result for a whole batch of keystrokes) is the observation of the
step's last call. An agent step without tool calls is a ``reply``; a later user or
system step is a ``user`` step. Shell calls (``bash``, terminus-2's ``bash_command``,
OpenHands' ``execute_bash`` …) are read for the files they touch, as mini-swe-agent's are.

Writing (:func:`to_atif`, :func:`write_atif`): one ATIF step per neutral step, with the
neutral step itself in the step's ``extra["ctxnb"]`` (ATIF's field for custom data), so
``load(write_atif(t, path))`` gives ``t`` back whole (its ``source_path`` names the new
file). The reader trusts that copy only while it agrees with the step's ATIF fields: a
file edited by another tool after ctxnb wrote it is read from what the ATIF fields say.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._shell import FileMemory, parse_command
from .model import (
    FORMAT_NAME,
    FORMAT_VERSION,
    Action,
    Step,
    Trajectory,
    TrajectoryFormatError,
    Usage,
    json_obj,
)

__all__ = [
    "ATIF_VERSION",
    "SOURCE_FORMAT",
    "atif_fidelity",
    "from_atif",
    "is_atif",
    "to_atif",
    "write_atif",
]

SOURCE_FORMAT = "atif"
#: The version ctxnb writes: it uses no field newer than v1.4 of the specification.
ATIF_VERSION = "ATIF-v1.4"
_VERSION = re.compile(r"ATIF-v(\d+)(?:\.(\d+))?")
# The major version ctxnb reads; a later one may change what a field means.
_MAJOR = 1
# Shell tools of the agents Harbor runs, and the argument that holds the command.
_SHELL_TOOLS = {
    "bash": "command",
    "bash_command": "keystrokes",  # Harbor's terminus-2 (tmux keystrokes)
    "execute_bash": "command",  # OpenHands
    "run_command": "command",
    "run_shell_command": "command",  # Gemini CLI
    "shell": "command",  # Codex
    "Bash": "command",  # Claude Code
}
_SUBMIT_TOOLS = frozenset({"submit", "finish", "mark_task_complete", "done"})
_ROLE = "ctxnb_role"
# A system step that says the context was summarized or compacted.
_COMPACTION = re.compile(r"\b(context (summari[sz]ation|compaction)|compact(ed|ion)?\b)", re.I)


def is_atif(data: Any) -> bool:
    """Whether a parsed JSON document is an ATIF trajectory (any version).

    Example:
        >>> is_atif({"schema_version": "ATIF-v1.5", "steps": []}), is_atif({"steps": []})
        (True, False)
    """
    return (
        isinstance(data, dict)
        and isinstance(data.get("schema_version"), str)
        and data["schema_version"].startswith("ATIF-")
        and isinstance(data.get("steps"), list)
    )


def from_atif(data: dict[str, Any], *, source_path: str | None = None) -> Trajectory:
    """Convert a parsed ATIF trajectory to the neutral format.

    Args:
        data: the JSON object of an ATIF file.
        source_path: where it came from, recorded in the trajectory.

    Raises:
        TrajectoryFormatError: the version is not ATIF v1, or ``steps`` is not a list of
            step objects.

    Example:
        >>> t = from_atif({"schema_version": "ATIF-v1.5", "session_id": "s",
        ...     "agent": {"name": "terminus-2", "version": "2.0.0"}, "steps": [
        ...     {"step_id": 1, "source": "user", "message": "Make hello.txt"},
        ...     {"step_id": 2, "source": "agent", "message": "",
        ...      "tool_calls": [{"tool_call_id": "c1", "function_name": "bash_command",
        ...                      "arguments": {"keystrokes": "cat hello.txt\\n"}}],
        ...      "observation": {"results": [{"source_call_id": "c1", "content": "hi\\n"}]},
        ...      "metrics": {"prompt_tokens": 10, "completion_tokens": 3}}]})
        >>> s = t.steps[0]
        >>> (t.task, s.action.tool, s.files[0].path, s.usage.prompt_tokens)
        ('Make hello.txt', 'bash', 'hello.txt', 10)
    """
    where = source_path or "ATIF trajectory"
    _check_version(data.get("schema_version"), where)
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not all(isinstance(s, dict) for s in raw_steps):
        raise TrajectoryFormatError(
            f"{where}: ATIF 'steps' must be a list of step objects; the file is damaged.",
            path=source_path,
        )
    root_extra = json_obj(data, "extra")
    own = json_obj(root_extra, "ctxnb")
    agent = json_obj(data, "agent")
    system_prompt: str | None = None
    task: str | None = None
    steps: list[Step] = []
    memory = FileMemory()
    handoff = False
    for pos, raw in enumerate(raw_steps):
        source = raw.get("source")
        role = json_obj(raw, "extra").get(_ROLE)
        message = _text(raw.get("message"))
        prologue = not steps and not raw.get("observation")
        if source == "system" and prologue and system_prompt is None and task is None:
            system_prompt = message
            continue
        if source == "user" and prologue and task is None and role != "user":
            task = message
            continue
        if handoff and source == "user" and role != "user" and not raw.get("observation"):
            # The prompt the agent starts again from after its context was summarized.
            steps[-1].observation = message
            handoff = False
            continue
        handoff = False
        try:
            converted = _convert(raw, len(steps), memory)
            steps.extend(converted)
            last = converted[-1] if converted else None
            handoff = last is not None and last.compaction and last.observation is None
        except Exception as exc:  # one odd step must not lose the run
            steps.append(
                Step(
                    index=len(steps),
                    action=Action(tool="unknown", raw=json.dumps(raw, default=str)[:2000]),
                    parsed=False,
                    note=f"ATIF step {pos + 1}: converter error: {type(exc).__name__}: {exc}",
                )
            )
    if own.get("format") == FORMAT_NAME and isinstance(own.get("metadata"), dict):
        # Written by ctxnb: the run's own name, format and metadata come back whole.
        metadata: dict[str, Any] = dict(own["metadata"])
        source_format = str(own.get("source_format") or SOURCE_FORMAT)
    else:
        final = json_obj(data, "final_metrics")
        metadata = {
            k: v
            for k, v in {
                "atif_version": data.get("schema_version"),
                "agent": agent.get("name"),
                "agent_version": agent.get("version"),
                "model": agent.get("model_name"),
                "total_cost_usd": final.get("total_cost_usd"),
                "notes": data.get("notes"),
            }.items()
            if v is not None
        }
        source_format = SOURCE_FORMAT
    return Trajectory(
        id=str(data.get("session_id") or "atif"),
        source_format=source_format,
        source_path=source_path,
        task=task,
        system_prompt=system_prompt,
        steps=steps,
        metadata=metadata,
    )


def _check_version(version: Any, where: str) -> None:
    m = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if m is None:
        raise TrajectoryFormatError(
            f'{where}: schema_version {version!r} is not an ATIF version ("ATIF-v1.4" …).',
            path=where,
        )
    if int(m.group(1)) != _MAJOR:
        # Fail closed: a new major version may mean other things by the same fields.
        raise TrajectoryFormatError(
            f"{where}: {version} is not supported; ctxnb reads ATIF v{_MAJOR}.x. Upgrade "
            "ctxnb, or convert the file to ATIF v1.",
            path=where,
        )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # multimodal content parts: keep the text
        parts = [p.get("text") for p in value if isinstance(p, dict)]
        if all(isinstance(p, str) for p in parts) and parts:
            return "\n".join(str(p) for p in parts)
    # Some writers put an object where the specification has a string; keep it readable.
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _usage(raw: dict[str, Any]) -> Usage | None:
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict):
        return None
    extra = json_obj(metrics, "extra")

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    cost = metrics.get("cost_usd")
    usage = Usage(
        prompt_tokens=count(metrics.get("prompt_tokens")),
        completion_tokens=count(metrics.get("completion_tokens")),
        cached_tokens=count(metrics.get("cached_tokens")),
        # ATIF's guidance puts Anthropic's cache writes in metrics.extra.
        cache_write_tokens=count(extra.get("cache_creation_input_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) and cost is not True else None,
    )
    return usage if usage != Usage() else None


def _convert(raw: dict[str, Any], index: int, memory: FileMemory) -> list[Step]:
    own = _own_step(raw, index)
    if own is not None:
        return [own]
    return _native(raw, index, memory)


def _own_step(raw: dict[str, Any], index: int) -> Step | None:
    """The neutral step ctxnb wrote beside this ATIF step, if it still matches it."""
    kept = json_obj(raw, "extra").get("ctxnb")
    if not isinstance(kept, dict):
        return None
    try:
        step = Step.model_validate({**kept, "index": index})
    except ValidationError:
        return None
    # Trusted only while the ATIF fields say the same: another tool may have edited them.
    rendered = _atif_step(step, int(raw.get("step_id") or 0))
    fields = ("source", "message", "reasoning_content", "tool_calls", "observation", "metrics")
    if any(rendered.get(k) != raw.get(k) for k in fields):
        return None
    return step


def _native(raw: dict[str, Any], index: int, memory: FileMemory) -> list[Step]:
    source = raw.get("source")
    message = _text(raw.get("message"))
    reasoning = _text(raw.get("reasoning_content")) or None
    usage = _usage(raw)
    results = json_obj(raw, "observation").get("results")
    results = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    calls = raw.get("tool_calls")
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    by_call: dict[str, list[str]] = {}
    loose: list[str] = []
    call_ids = {str(c.get("tool_call_id")) for c in calls}
    for r in results:
        content = _text(r.get("content")) if "content" in r else ""
        if r.get("subagent_trajectory_ref") and not content:
            content = _text(r.get("subagent_trajectory_ref"))
        sid = r.get("source_call_id")
        if sid is not None and str(sid) in call_ids:
            by_call.setdefault(str(sid), []).append(content)
        else:
            loose.append(content)
    if source == "system" and _COMPACTION.search(message):
        # Harbor's terminus-2 summarizes its context and hands over to a fresh one; the
        # summarizing calls are subagent trajectories in files of their own.
        refs = [
            str(ref.get("session_id"))
            for r in results
            for ref in (r.get("subagent_trajectory_ref") or [])
            if isinstance(ref, dict)
        ]
        texts = [_text(r.get("content")) for r in results if r.get("content") is not None]
        args: dict[str, Any] = {"message": message}
        if refs:
            args["subagents"] = refs
        return [
            Step(
                index=index,
                action=Action(tool="compact", args=args, raw=message),
                observation="\n".join(texts) if texts else None,
                usage=usage,
                compaction=True,
            )
        ]
    if source != "agent":
        # A user message mid-run, or a system event (delegation, context management).
        return [
            Step(
                index=index,
                action=Action(tool="user", args={"message": message, "source": str(source)}),
                observation="\n".join(loose) if loose else None,
                usage=usage,
            )
        ]
    if not calls:
        return [
            Step(
                index=index,
                thought=reasoning,
                action=Action(tool="reply", args={"message": message}, raw=message),
                observation="\n".join(loose) if loose else None,
                usage=usage,
            )
        ]
    thought = "\n\n".join(t for t in (reasoning, message.strip() or None) if t) or None
    out: list[Step] = []
    ids = [str(c.get("tool_call_id")) for c in calls]
    for n, call in enumerate(calls):
        pending = by_call.get(ids[n], [])
        # Calls that share an id (a writer's slip) take its results one each, in order,
        # so that no output is shown twice; the last of them takes what is left.
        take = 1 if ids[n] in ids[n + 1 :] else len(pending)
        outputs, pending[:take] = pending[:take], []
        if n == len(calls) - 1:
            outputs = outputs + loose
        observation = "\n".join(outputs) if outputs else None
        out.append(
            _call_step(
                index + n,
                call,
                observation,
                memory,
                thought=thought if n == 0 else None,
                usage=usage if n == 0 else None,
            )
        )
    return out


def _call_step(
    index: int,
    call: dict[str, Any],
    observation: str | None,
    memory: FileMemory,
    *,
    thought: str | None,
    usage: Usage | None,
) -> Step:
    name = str(call.get("function_name") or "unknown")
    args = call.get("arguments")
    args = args if isinstance(args, dict) else {"value": args}
    raw = json.dumps(args, ensure_ascii=False, sort_keys=True)
    key = _SHELL_TOOLS.get(name)
    if key is not None and isinstance(args.get(key), str):
        command = args[key]
        # terminus-2 sends keystrokes: the trailing newline is the Enter key.
        command = command[:-1] if command.endswith("\n") else command
        parse = parse_command(command, observation, memory, output_complete=False)
        return Step(
            index=index,
            thought=thought,
            action=Action(tool="bash", args={"command": command}, raw=args[key]),
            observation=observation,
            files=parse.files,
            usage=usage,
            parsed=parse.ok,
            note="; ".join(parse.notes) or None,
        )
    tool = "submit" if name in _SUBMIT_TOOLS else name
    return Step(
        index=index,
        thought=thought,
        action=Action(tool=tool, args=args, raw=raw),
        observation=observation,
        usage=usage,
    )


# --------------------------------------------------------------------------- writing


def _metrics(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    metrics: dict[str, Any] = {
        k: v
        for k, v in {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "cost_usd": usage.cost_usd,
        }.items()
        if v is not None
    }
    extra = {
        k: v
        for k, v in {
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_creation_1h_input_tokens": usage.cache_write_1h_tokens,
        }.items()
        if v is not None
    }
    if extra:
        metrics["extra"] = extra
    return metrics


def _atif_step(step: Step, step_id: int) -> dict[str, Any]:
    """The ATIF fields of one neutral step (without its ``extra``)."""
    tool = step.action.tool
    out: dict[str, Any] = {"step_id": step_id}
    if step.compaction:
        out["source"] = "system"
        out["message"] = str(step.action.args.get("message") or "Context compaction.")
    elif tool == "user":
        src = step.action.args.get("source")
        out["source"] = src if src in ("user", "system") else "user"
        out["message"] = str(step.action.args.get("message", ""))
    elif tool == "reply":
        out["source"] = "agent"
        out["message"] = str(step.action.args.get("message", step.action.raw))
        if step.thought is not None:
            out["reasoning_content"] = step.thought
    else:
        out["source"] = "agent"
        out["message"] = step.thought or ""
        call_id = f"call_{step_id}"
        out["tool_calls"] = [
            {"tool_call_id": call_id, "function_name": tool, "arguments": step.action.args}
        ]
        if step.observation is not None:
            out["observation"] = {
                "results": [{"source_call_id": call_id, "content": step.observation}]
            }
    if (step.compaction or tool in ("user", "reply")) and step.observation is not None:
        out["observation"] = {"results": [{"content": step.observation}]}
    metrics = _metrics(step.usage)
    if metrics is not None:
        out["metrics"] = metrics
    return out


def to_atif(trajectory: Trajectory) -> dict[str, Any]:
    """The trajectory as an ATIF document (a JSON-ready dict).

    Example:
        >>> t = Trajectory(id="run-1", source_format="mini-swe-agent-1", task="Fix it",
        ...     steps=[Step(index=0, action=Action(tool="bash", args={"command": "ls"}),
        ...                 usage=Usage(prompt_tokens=12, completion_tokens=4))])
        >>> doc = to_atif(t)
        >>> doc["schema_version"], [s["source"] for s in doc["steps"]]
        ('ATIF-v1.4', ['user', 'agent'])
        >>> doc["final_metrics"]["total_prompt_tokens"]
        12
    """
    steps: list[dict[str, Any]] = []
    if trajectory.system_prompt is not None:
        steps.append(
            {
                "step_id": 1,
                "source": "system",
                "message": trajectory.system_prompt,
                "extra": {_ROLE: "system_prompt"},
            }
        )
    if trajectory.task is not None:
        steps.append(
            {
                "step_id": len(steps) + 1,
                "source": "user",
                "message": trajectory.task,
                "extra": {_ROLE: "task"},
            }
        )
    for step in trajectory.steps:
        atif = _atif_step(step, len(steps) + 1)
        # "user" marks a mid-run user step, so the reader never takes it for the task.
        atif["extra"] = {"ctxnb": step.model_dump(mode="json", exclude={"index"})}
        if step.action.tool == "user":
            atif["extra"][_ROLE] = "user"
        steps.append(atif)
    usages = [s.usage for s in trajectory.steps if s.usage is not None]

    def total(field: str) -> int | float | None:
        values = [getattr(u, field) for u in usages if getattr(u, field) is not None]
        return sum(values) if values else None

    final = {
        k: v
        for k, v in {
            "total_prompt_tokens": total("prompt_tokens"),
            "total_completion_tokens": total("completion_tokens"),
            "total_cached_tokens": total("cached_tokens"),
            "total_cost_usd": total("cost_usd"),
            "total_steps": len(steps),
        }.items()
        if v is not None
    }
    meta = trajectory.metadata
    agent: dict[str, Any] = {
        "name": str(meta.get("agent") or trajectory.source_format),
        "version": str(meta.get("agent_version") or meta.get("mini_version") or "unknown"),
    }
    if isinstance(meta.get("model"), str):
        agent["model_name"] = meta["model"]
    return {
        "schema_version": ATIF_VERSION,
        "session_id": trajectory.id,
        "agent": agent,
        "steps": steps,
        "final_metrics": final,
        "extra": {
            "ctxnb": {
                "format": FORMAT_NAME,
                "version": FORMAT_VERSION,
                "source_format": trajectory.source_format,
                "metadata": trajectory.metadata,
            }
        },
    }


def write_atif(trajectory: Trajectory, path: str | os.PathLike[str]) -> Path:
    """Write the trajectory as an ATIF JSON file; :func:`ctxnb.replay.load` reads it back.

    Returns:
        The path written.

    Example:
        >>> import tempfile, pathlib
        >>> from ctxnb.replay import load
        >>> t = Trajectory(id="t", source_format="ctxnb", task="Say hi",
        ...     steps=[Step(index=0, action=Action(tool="reply", args={"message": "hi"}))])
        >>> p = write_atif(t, pathlib.Path(tempfile.mkdtemp()) / "t.trajectory.json")
        >>> load(p).model_copy(update={"source_path": None}) == t
        True
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    # Written aside and renamed so that a crash never leaves a half file behind.
    tmp.write_text(
        json.dumps(to_atif(trajectory), ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- fidelity


def atif_fidelity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What a load keeps of an ATIF file: each figure as the file has it and as kept.

    Returns:
        ``steps`` and ``tool_calls`` (the file's ATIF steps and tool calls, against the
        neutral steps and the steps that are tool calls; the system prompt and the task
        are not steps once loaded, and a step with several calls is several steps),
        ``prompt_tokens``, ``completion_tokens``, ``cached_tokens`` and ``cost_usd``
        (summed over the file's step metrics, against the loaded steps' usage), each as
        a ``(file, kept)`` pair; ``final_prompt_tokens``, the file's own
        ``final_metrics`` total (it also counts calls kept in other files, such as
        terminus-2's summarization subagents); and ``unparsed`` steps.

    Raises:
        TrajectoryFormatError: the file is not ATIF v1.

    Example:
        >>> import json, tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
        >>> _ = p.write_text(json.dumps({"schema_version": "ATIF-v1.4", "steps": [
        ...     {"step_id": 1, "source": "agent", "message": "hi",
        ...      "metrics": {"prompt_tokens": 7}}]}))
        >>> atif_fidelity(p)["prompt_tokens"]
        (7, 7)
    """
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrajectoryFormatError(
            f"{where}: cannot be read as JSON ({exc}).", path=where
        ) from None
    if not is_atif(data):
        raise TrajectoryFormatError(
            f'{where}: not an ATIF trajectory (no schema_version "ATIF-v…" with steps).',
            path=where,
        )
    t = from_atif(data, source_path=where)
    raw = [s for s in data["steps"] if isinstance(s, dict)]
    metrics = [m for m in (s.get("metrics") for s in raw) if isinstance(m, dict)]
    usages = [s.usage for s in t.steps if s.usage is not None]

    def in_file(key: str) -> int | float:
        return sum(v for m in metrics if isinstance(v := m.get(key), int | float) and v is not True)

    def kept(field: str) -> int | float:
        return sum(v for u in usages if (v := getattr(u, field)) is not None)

    calls = sum(len(c) for s in raw if isinstance(c := s.get("tool_calls"), list))
    as_calls = sum(1 for s in t.steps if s.action.tool not in ("reply", "user", "compact"))
    return {
        "steps": (len(raw), len(t.steps)),
        "tool_calls": (calls, as_calls),
        "prompt_tokens": (in_file("prompt_tokens"), kept("prompt_tokens")),
        "completion_tokens": (in_file("completion_tokens"), kept("completion_tokens")),
        "cached_tokens": (in_file("cached_tokens"), kept("cached_tokens")),
        "cost_usd": (round(in_file("cost_usd"), 9), round(kept("cost_usd"), 9)),
        "final_prompt_tokens": json_obj(data, "final_metrics").get("total_prompt_tokens"),
        "unparsed": t.unparsed_count,
    }
