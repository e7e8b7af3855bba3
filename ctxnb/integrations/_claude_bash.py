"""Claude Code's Bash under governance: the command rewritten to run in the sandbox.

In a governed workspace the pre-tool-use hook answers a Bash call with ``allow`` and an
``updatedInput`` that runs the command in ctxnb's sandbox, writable only in the session
intent's scope; the one command that commits a held change (``ctxnb sandbox commit ID``)
is ``ask``, with its diff shown to the user. Loaded only for Bash calls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, PolicyError
from ..govern.core import IntentLike, get_intent
from ..govern.state import (
    intents_file,
)
from ._claude_hookio import (
    MAX_OUTPUT_CHARS,
    HookResult,
    PayloadError,
    _Context,
    _pre_answer,
    launcher,
)


def _check_bash(ctx: _Context, tool_input: Mapping[str, Any]) -> HookResult:
    """Run the command in ctxnb's sandbox: ``allow`` with ``updatedInput`` (``ask`` when
    the classifier calls it destructive under an intent), writable only in the scope of
    the session's intent, nothing without one (see :mod:`ctxnb.sandbox`)."""
    command = tool_input.get("command")
    if not isinstance(command, str):
        raise PayloadError("a Bash call needs tool_input.command (a string)")
    if not command.strip(" \t\n"):  # bash's blanks only: str.strip() takes \x1c, NBSP...
        return HookResult()
    held = _held_request(command)
    if held is not None:
        return _check_held(ctx, tool_input, *held)
    from ..shell.risk import classify_command

    intent: IntentLike | None = None
    intent_id = ctx.session_intent()
    if intent_id is not None:
        try:
            intent = get_intent(ctx.intents(), intent_id, where=intents_file(ctx.root))
        except (PolicyError, ConfigError):
            intent = None
    s = ctx.settings
    backend = s.get("sandbox", {}).get("backend", "bwrap")
    from ..sandbox.plan import find_bwrap

    if backend != "bwrap" or find_bwrap(ctx.env.get("PATH")) is None:
        from ..sandbox.runner import INSTALL_HINT

        raise PolicyError(
            "SANDBOX_UNAVAILABLE",
            "ctxnb runs Bash commands only on an overlay in a bubblewrap sandbox, and "
            + (
                f"the settings ask for backend {backend!r}; remove it"
                if backend != "bwrap"
                else f"no bwrap that mounts overlays is installed: {INSTALL_HINT}"
            )
            + ".",
            required_action="Ask the user to fix the sandbox set-up.",
        )
    scope = None
    if intent is not None:
        selected = intent

        def scope(p: str) -> bool:
            # The command runs in cwd; scope globs are relative to the workspace root.
            full = os.path.normpath(os.path.join(ctx.cwd, os.path.expanduser(p)))
            return selected.in_scope(os.path.relpath(full, ctx.root))

    risk = classify_command(
        command,
        scope_check=scope,
        unknown_default=s["unknown_command"],
        safe_commands=s["safe_commands"],
    )
    import shlex

    wrapper = [*launcher(), "sandbox", "exec", "--workspace", str(ctx.root)]
    if ctx.session_id is not None:
        wrapper += ["--session", ctx.session_id]
    if intent is not None:
        wrapper += ["--intent", intent.id]
    wrapped = shlex.join([*wrapper, "--", "bash", "-c", command])
    updated = {**tool_input, "command": wrapped}
    where = (
        f"writable: the scope of {intent.id} ({', '.join(intent.owned_scope) or 'no files'})"
        if intent is not None
        else "read-only: no intent is selected for this session"
    )
    # The text decides nothing: what the command does is read from its overlay, and
    # destructive changes wait there for the user (`ctxnb sandbox commit ID`).
    warning = ""
    if intent is not None and risk.level != "SAFE":
        warning = (
            f" Its text looks destructive ({'; '.join(risk.reasons) or 'destructive'}): "
            "destructive changes are held for the user's approval with their diff."
        )
    return _pre_answer("allow", f"ctxnb: runs in ctxnb's sandbox, {where}.{warning}", updated)


_ASKING_MODES = ("default", "acceptEdits", "plan")
"""Claude Code's permission modes in which a hook's ``ask`` is shown to the user. In
others (``auto``, ``dontAsk``, ``bypassPermissions`` in some versions) it may be answered
with no prompt, and a held commit would be traced as a yes nobody gave."""

_HELD_COMMAND_CHARS = 300
"""The held command's text is shown on one line, cut here: it is the agent's text, and
only the diff is what gets committed."""

# Terminal controls, bidirectional overrides, invisible and line-separator characters in
# the agent's text (the command, the files' bytes in the diff) could redraw, reorder or
# hide part of the prompt: shown escaped.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2069\ufeff\U000e0000-\U000e007f]"
)


def _shown(text: str) -> str:
    def escape(m: re.Match[str]) -> str:
        o = ord(m.group())
        return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"

    return _CONTROL.sub(escape, text)


def _held_request(command: str) -> tuple[str, str] | None:
    """``(action, id)`` when ``command`` is exactly ``ctxnb sandbox commit|discard ID``."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 4 and words[:2] == ["ctxnb", "sandbox"] and words[2] in ("commit", "discard"):
        return words[2], words[3]
    return None


def _check_held(
    ctx: _Context, tool_input: Mapping[str, Any], action: str, hold_id: str
) -> HookResult:
    """``ctxnb sandbox commit ID`` runs on the host only after Claude Code's user said
    yes to the diff shown here, and commits only that diff (its SHA-256 is in the
    command run); ``discard`` needs nobody. Both only for the session's own hold."""
    import shlex

    from ..errors import NotFoundError
    from ..sandbox.held import PROMPT_DIFF_CHARS, diff_sha256, load_hold

    try:
        hold = load_hold(ctx.root, hold_id)
    except NotFoundError as e:
        raise PolicyError("NOT_FOUND", str(e)) from None
    if hold.session_id != ctx.session_id:
        raise PolicyError(
            "NOT_FOUND",
            f"the held changes {hold_id} belong to another session",
            required_action="Run the command again in this session.",
        )
    argv = [*launcher(), "sandbox", action, "--workspace", str(ctx.root)]
    if ctx.session_id is not None:
        argv += ["--session", ctx.session_id]
    if action == "discard":
        updated = {**tool_input, "command": shlex.join([*argv, "--", hold_id])}
        return _pre_answer("allow", f"ctxnb: drops the held changes {hold_id}.", updated)
    mode = ctx.payload.get("permission_mode")
    if mode not in _ASKING_MODES:
        raise PolicyError(
            "APPROVAL_UNAVAILABLE",
            f"Claude Code runs in permission mode {mode!r}, where its prompt may be "
            f"answered with no one asked: the held changes {hold_id} are committed only "
            "after a question the user sees",
            required_action="Ask the user to switch Claude Code to its default permission "
            f"mode (Shift+Tab) and run `ctxnb sandbox commit {hold_id}` again, or discard it.",
        )
    if diff_sha256(hold.diff) != hold.diff_sha256:
        raise PolicyError(
            "NOT_FOUND",
            f"the record of the held changes {hold_id} is not the one ctxnb wrote",
            required_action=f"Run `ctxnb sandbox discard {hold_id}` and the command again.",
        )
    command = " ".join(hold.command.split())
    if len(command) > _HELD_COMMAND_CHARS:
        command = command[: _HELD_COMMAND_CHARS - 1] + "…"
    reason = (
        f"ctxnb: commit the destructive changes of `{_shown(command)}` under "
        f"{hold.intent_id}? ({_shown('; '.join(hold.reasons))})\n{_shown(hold.diff)}"
    )
    if len(hold.diff) > PROMPT_DIFF_CHARS or len(reason) > MAX_OUTPUT_CHARS:
        raise PolicyError(
            "DIFF_TOO_LONG",
            f"the diff of the held changes {hold_id} ({len(hold.diff)} characters) is "
            f"longer than Claude Code's permission prompt shows ({PROMPT_DIFF_CHARS}): the "
            "user would approve changes they were not shown, so they are not asked",
            required_action=f"Run `ctxnb sandbox discard {hold_id}`, then make the change in "
            "smaller commands (fewer files each), or ask the user to make it.",
        )
    argv += ["--expect", diff_sha256(hold.diff)]
    updated = {
        **tool_input,
        "command": shlex.join([*argv, "--", hold_id]),
        # Claude Code shows the description in its prompt: ctxnb's words, not the agent's.
        "description": f"ctxnb: commit the held changes {hold_id} (their diff is shown)",
    }
    return _pre_answer("ask", reason, updated)
