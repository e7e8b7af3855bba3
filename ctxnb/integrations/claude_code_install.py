"""Installing ctxnb's Claude Code hooks into a project's ``.claude/settings.json``.

``ctxnb hook install`` runs :func:`install_settings`. It sits apart from
:mod:`ctxnb.integrations.claude_code` because the hooks themselves run on every Claude
Code tool call and never need it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .claude_code import launcher

__all__ = ["POST_TOOL_USE_MATCHER", "PRE_TOOL_USE_MATCHER", "install_settings"]

PRE_TOOL_USE_MATCHER = "Read|Glob|Grep|Write|Edit|MultiEdit|NotebookEdit|Bash|mcp__.*"
"""The tools the pre-tool-use hook sees: Claude Code's file tools, Bash, and every MCP
server's tools (``mcp__server__tool``), whose path arguments go through the same path
policy. Claude Code reads a matcher with ``|`` as an unanchored regular expression, so
a tool whose name contains one of these (``NotebookRead``, ``TodoWrite``) is sent too
and judged by the paths in its input."""

POST_TOOL_USE_MATCHER = "Write|Edit|MultiEdit|Bash"
"""Edits are recorded after they ran; Bash calls are checked for their receipt (a Bash
call with none ran outside ctxnb's sandbox)."""

_INSTALL_EVENTS: tuple[tuple[str, str | None, str], ...] = (
    ("PreToolUse", PRE_TOOL_USE_MATCHER, "pre-tool-use"),
    ("PostToolUse", POST_TOOL_USE_MATCHER, "post-tool-use"),
    ("UserPromptSubmit", None, "user-prompt-submit"),
    # Both triggers (manual /compact and auto): no matcher.
    ("PostCompact", None, "post-compact"),
    # Every reason (/clear, logout, exit, other): the session is over either way.
    ("SessionEnd", None, "session-end"),
)


def install_settings(
    project: str | os.PathLike[str], *, command: str | None = None
) -> tuple[Path, bool]:
    """Add ctxnb's hooks to ``<project>/.claude/settings.json``.

    Other settings and other hooks are kept. Earlier ctxnb hook entries (any command
    ending in ``hook pre-tool-use`` and so on) are replaced, so running this again
    changes nothing.

    Args:
        project: the project directory Claude Code runs in.
        command: how the hooks run ctxnb; by default this interpreter, isolated
            (:func:`launcher`: ``/abs/path/python -I -m ctxnb``).

    Returns:
        The settings file and whether it changed.

    Raises:
        ConfigError: the existing file is not a JSON object or its ``hooks`` are malformed.

    Example:
        >>> import json, pathlib, tempfile
        >>> proj = pathlib.Path(tempfile.mkdtemp())
        >>> install_settings(proj)[1], install_settings(proj)[1]
        (True, False)
        >>> sorted(json.loads((proj / ".claude" / "settings.json").read_text())["hooks"])
        ['PostCompact', 'PostToolUse', 'PreToolUse', 'SessionEnd', 'UserPromptSubmit']
    """
    if command is None:
        import shlex

        command = shlex.join(launcher())
    path = Path(project) / ".claude" / "settings.json"
    try:
        before = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = None
    settings: Any = {}
    if before is not None and before.strip():
        try:
            settings = json.loads(before)
        except ValueError as e:
            raise ConfigError(
                f"{path} is not valid JSON ({e}); fix it, then run `ctxnb hook install` again"
            ) from None
    if not isinstance(settings, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(settings).__name__}")
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' must be an object mapping event names to lists")
    for event, matcher, sub in _INSTALL_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ConfigError(f"{path}: hooks.{event} must be a list")
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                rest = [h for h in group["hooks"] if not _is_ctxnb_hook(h, sub)]
                if not rest:
                    continue
                group = {**group, "hooks": rest}
            kept.append(group)
        ours: dict[str, Any] = {"hooks": [{"type": "command", "command": f"{command} hook {sub}"}]}
        if matcher is not None:
            ours = {"matcher": matcher, **ours}
        hooks[event] = [*kept, ours]
    after = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    if after == before:
        return path, False
    _write_text_atomic(path, after)
    return path, True


def _is_ctxnb_hook(hook: Any, sub: str) -> bool:
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    words = hook["command"].split()
    return words[-2:] == ["hook", sub] and any("ctxnb" in w for w in words[:-2])


def _write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
