"""Converter for mini-swe-agent trajectories (``trajectory_format: mini-swe-agent-1``).

The file is one JSON object: ``messages[]`` (system, the task as the first user message,
then alternating assistant responses and user observations), ``info`` and
``instance_id``. Each assistant message is one step: its text before the fenced
```` ```bash ```` block is the thought, the block is the command, and the next user
message is the observation, with the ``<returncode>``/``<output>`` wrappers removed.

A response without exactly one bash block was rejected by mini-swe-agent (it answers
with a format error); such a step is kept, as unparsed, so that the run's length and
token counts stay true.
"""

from __future__ import annotations

import re
from typing import Any

from ._shell import FileMemory, parse_command
from .model import Action, Step, Trajectory, TrajectoryFormatError, Usage, json_obj

__all__ = ["from_mini_swe_agent"]

SOURCE_FORMAT = "mini-swe-agent-1"
_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def from_mini_swe_agent(data: dict[str, Any], *, source_path: str | None = None) -> Trajectory:
    """Convert a parsed mini-swe-agent trajectory to the neutral format.

    Args:
        data: the JSON object of a ``*.traj.json`` file.
        source_path: where it came from, recorded in the trajectory.

    Returns:
        The trajectory; steps the converter could not interpret have ``parsed=False``.

    Example:
        >>> t = from_mini_swe_agent({"trajectory_format": "mini-swe-agent-1", "messages": [
        ...     {"role": "system", "content": "You are..."},
        ...     {"role": "user", "content": "<pr_description>\\nFix x\\n</pr_description>"},
        ...     {"role": "assistant", "content": "THOUGHT: look\\n\\n```bash\\ncat a.py\\n```"},
        ...     {"role": "user",
        ...      "content": "<returncode>0</returncode>\\n<output>\\nx = 1\\n</output>"},
        ... ]})
        >>> f = t.steps[0].files[0]
        >>> (f.path, f.op, f.content)
        ('a.py', 'read', 'x = 1\\n')
    """
    messages = data.get("messages") or []
    if not isinstance(messages, list):
        raise TrajectoryFormatError(
            f"{source_path or 'mini-swe-agent trajectory'}: 'messages' must be a list of "
            f"messages, not {type(messages).__name__}; the file is damaged.",
            path=source_path,
        )
    info = json_obj(data, "info")
    system_prompt = None
    task = None
    steps: list[Step] = []
    memory = FileMemory()
    i = 0
    if messages and _role(messages[0]) == "system":
        system_prompt = _text(messages[0])
        i = 1
    if i < len(messages) and _role(messages[i]) == "user":
        task = _task_text(_text(messages[i]))
        i += 1
    while i < len(messages):
        msg = messages[i]
        if _role(msg) != "assistant":
            # An observation with no response before it: keep it visible, unparsed.
            steps.append(
                Step(
                    index=len(steps),
                    action=Action(tool="unknown"),
                    observation=_text(msg),
                    parsed=False,
                    note=f"a {_role(msg)!r} message with no assistant message before it",
                )
            )
            i += 1
            continue
        obs_msg = messages[i + 1] if i + 1 < len(messages) else None
        if obs_msg is not None and _role(obs_msg) == "assistant":
            obs_msg = None
        i += 2 if obs_msg is not None else 1
        try:
            step = _step(len(steps), msg, obs_msg, memory)
        except Exception as exc:  # one odd step must not lose the run
            step = Step(
                index=len(steps),
                action=Action(tool="unknown", raw=_text(msg)),
                observation=_text(obs_msg) if obs_msg else None,
                parsed=False,
                note=f"converter error: {type(exc).__name__}: {exc}",
            )
        steps.append(step)
    config = json_obj(info, "config")
    model = json_obj(config, "model")
    stats = json_obj(info, "model_stats")
    metadata = {
        k: v
        for k, v in {
            "instance_id": data.get("instance_id"),
            "exit_status": info.get("exit_status"),
            "model": model.get("model_name"),
            "mini_version": info.get("mini_version"),
            "api_calls": stats.get("api_calls"),
            "instance_cost": stats.get("instance_cost"),
        }.items()
        if v is not None
    }
    return Trajectory(
        id=str(data.get("instance_id") or "mini-swe-agent"),
        source_format=SOURCE_FORMAT,
        source_path=source_path,
        task=task,
        system_prompt=system_prompt,
        steps=steps,
        metadata=metadata,
    )


def _role(msg: Any) -> str:
    return str(msg.get("role")) if isinstance(msg, dict) else "?"


def _text(msg: Any) -> str:
    if not isinstance(msg, dict):
        return ""
    content = msg.get("content")
    if isinstance(content, list):  # multimodal content: keep the text parts
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return "" if content is None else str(content)


def _task_text(first_user: str) -> str:
    m = re.search(
        r"Consider the following PR description:\s*\n(.*?)</pr_description>",
        first_user,
        re.DOTALL,
    ) or re.search(r"<pr_description>\s*\n?(.*?)</pr_description>", first_user, re.DOTALL)
    return m.group(1).strip() if m else first_user


def _observation(text: str) -> tuple[str, bool]:
    """The command output without mini-swe-agent's wrappers, and whether it is complete."""
    body = re.sub(r"^\s*<returncode>-?\d+</returncode>\s*\n?", "", text)
    if "<output_head>" in body:
        head = re.search(r"<output_head>\n?(.*?)</output_head>", body, re.DOTALL)
        elided = re.search(r"<elided_chars>\s*(.*?)\s*</elided_chars>", body, re.DOTALL)
        tail = re.search(r"<output_tail>\n?(.*?)</output_tail>", body, re.DOTALL)
        parts = [head.group(1) if head else ""]
        parts.append(f"\n[... {elided.group(1) if elided else 'some characters'} elided ...]\n")
        parts.append(tail.group(1) if tail else "")
        return "".join(parts), False
    m = re.fullmatch(r"\s*<output>\n?(.*)</output>\s*", body, re.DOTALL)
    if m:
        return m.group(1), True
    return text, True


def _usage(msg: dict[str, Any]) -> Usage | None:
    extra = msg.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cost = usage.get("cost")  # OpenRouter's bill for the call
    return Usage(
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cached_tokens=cached if isinstance(cached, int) else None,
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
    )


def _step(index: int, msg: dict[str, Any], obs_msg: Any, memory: FileMemory) -> Step:
    text = _text(msg)
    observation = None
    complete = True
    if obs_msg is not None:
        observation, complete = _observation(_text(obs_msg))
    blocks = _BASH_BLOCK.findall(text)
    usage = _usage(msg)
    if len(blocks) != 1:
        return Step(
            index=index,
            thought=_thought(text),
            action=Action(tool="unknown", raw=text),
            observation=observation,
            usage=usage,
            parsed=False,
            note=f"response has {len(blocks)} bash blocks, not one; the agent rejected it",
        )
    command = blocks[0].strip()
    thought = _thought(text[: text.find("```bash")])
    if _SUBMIT in command.split("\n", 1)[0]:
        return Step(
            index=index,
            thought=thought,
            action=Action(tool="submit", args={"command": command}, raw=command),
            observation=observation,
            usage=usage,
        )
    parse = parse_command(command, observation, memory, output_complete=complete)
    return Step(
        index=index,
        thought=thought,
        action=Action(tool="bash", args={"command": command}, raw=command),
        observation=observation,
        files=parse.files,
        usage=usage,
        parsed=parse.ok,
        note="; ".join(parse.notes) or None,
    )


def _thought(text: str) -> str | None:
    t = re.sub(r"^\s*THOUGHT:\s*", "", text).strip()
    return t or None
