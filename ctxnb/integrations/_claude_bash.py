"""Claude Code's Bash under governance: the command rewritten to run in the sandbox.

In a governed workspace the pre-tool-use hook answers a Bash call with ``allow`` and an
``updatedInput`` that runs the command in ctxnb's sandbox, writable only in the session
intent's scope; the one command that commits a held change (``ctxnb sandbox commit ID``)
is ``ask``, with its diff shown to the user. Loaded only for Bash calls.

The rewrite is only as good as Claude Code's honouring it: builds and modes that drop
``updatedInput`` run the original command, unconfined, with ctxnb's ``allow``. So the
rewritten command carries the call's ``tool_use_id`` (``--receipt``), and ``ctxnb
sandbox exec`` leaves a receipt for it in the state directory
(:func:`~ctxnb.govern.state.write_receipt`) before it runs anything. The post-tool-use
hook takes it (:func:`check_receipt`); a Bash call without one is an *unconfined run*:
recorded (audit line, Agent Trace record, the ctxnb session), the circuit breaker of
``run_command`` opened, and Claude Code told to stop. ``dangerouslyDisableSandbox``
never reaches Claude Code from a rewritten call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from .._util.defaults import DEFAULT_BREAKER_THRESHOLD
from ..errors import ConfigError, PolicyError
from ..govern.core import IntentLike, get_intent
from ..govern.state import (
    intents_file,
)
from ._claude_hookio import (
    MAX_OUTPUT_CHARS,
    HookResult,
    PayloadError,
    _answer,
    _breaker,
    _cap,
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
    if _blank(command):
        return HookResult()
    tool_use_id = _tool_use_id(ctx)
    held = _held_request(command)
    if held is not None:
        return _check_held(ctx, tool_input, tool_use_id, *held)
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
    wrapper += _receipt_args(ctx, tool_use_id)
    wrapped = shlex.join([*wrapper, "--", "bash", "-c", command])
    updated = {**_confined(tool_input), "command": wrapped}
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
    ctx: _Context, tool_input: Mapping[str, Any], tool_use_id: str, action: str, hold_id: str
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
    argv += _receipt_args(ctx, tool_use_id)
    if action == "discard":
        updated = {**_confined(tool_input), "command": shlex.join([*argv, "--", hold_id])}
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
    from ..govern.approval import held_question

    # The question every door asks (ctxnb.govern.approval), its command on one line and
    # nothing of the agent's bytes able to redraw the prompt; past its bound (the
    # builder's, which is Claude Code's) nobody is asked.
    try:
        reason = _shown(held_question(hold))
    except PolicyError as e:
        if e.error_code != "DIFF_TOO_LONG":
            raise
        reason = ""
    if not reason or len(hold.diff) > PROMPT_DIFF_CHARS or len(reason) > MAX_OUTPUT_CHARS:
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
        **_confined(tool_input),
        "command": shlex.join([*argv, "--", hold_id]),
        # Claude Code shows the description in its prompt: ctxnb's words, not the agent's.
        "description": f"ctxnb: commit the held changes {hold_id} (their diff is shown)",
    }
    return _pre_answer("ask", reason, updated)


# -- the receipt of a confined run ------------------------------------------------------------
def _blank(command: str) -> bool:
    # bash's blanks only: str.strip() takes \x1c, NBSP... which bash runs as a command.
    return not command.strip(" \t\n")


def _tool_use_id(ctx: _Context) -> str:
    tool_use_id = ctx.payload.get("tool_use_id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        # Without it no receipt can name this call, and a run Claude Code did not
        # rewrite could not be told from one it did: refused rather than unverified.
        raise PolicyError(
            "RECEIPT_UNAVAILABLE",
            "the hook payload has no tool_use_id, so ctxnb could not confirm afterwards "
            "that this command ran in its sandbox",
            recoverable=False,
            required_action="Ask the user to update Claude Code (its hooks receive "
            "tool_use_id) and to run `ctxnb hook install` again.",
        )
    return tool_use_id


def _receipt_args(ctx: _Context, tool_use_id: str) -> list[str]:
    # The hook's own state directory, by name: the command's shell (with the user's
    # profile) may see another $XDG_STATE_HOME than Claude Code gives its hooks.
    from ..govern.tracecontext import prompt_id

    args = ["--receipt", tool_use_id, "--state-dir", str(ctx.state_dir)]
    # The prompt the command serves, for its records (the Bash process has no payload).
    pid = prompt_id(ctx.payload.get("prompt_id"))
    return [*args, "--prompt-id", pid] if pid is not None else args


def _confined(tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """The input without ``dangerouslyDisableSandbox``: a rewritten call never asks
    Claude Code to run it outside Claude Code's own sandbox either."""
    return {k: v for k, v in tool_input.items() if k != "dangerouslyDisableSandbox"}


UNCONFINED_RUN = "UNCONFINED_RUN"
"""The error code of a Bash call that ran without ctxnb's sandbox (audit, trace)."""


def check_receipt(ctx: _Context, tool_input: Mapping[str, Any]) -> HookResult:
    """After a Bash call: its receipt, or the record of an unconfined run and a stop.

    The receipt is taken (each is used once). Without one the command ran as Claude
    Code was asked, not as ctxnb rewrote it: on the host, with the user's rights. That
    is recorded in the audit log, the Agent Trace ledger and the ctxnb session; the
    circuit breaker of ``run_command`` is opened, so every later Bash call is refused
    until a human resets it; and Claude Code is told to stop (``continue: false``, with
    ``decision: block`` and the reason for the model).
    """
    from ..govern.state import take_receipt

    command = tool_input.get("command")
    if isinstance(command, str) and _blank(command):
        return HookResult()  # nothing ran; the pre hook left it alone
    tool_use_id = ctx.payload.get("tool_use_id")
    if isinstance(tool_use_id, str) and tool_use_id:
        if take_receipt(ctx.state_dir, ctx.session_id, tool_use_id) is not None:
            return HookResult()
    return _unconfined_run(ctx, tool_input, tool_use_id if isinstance(tool_use_id, str) else None)


def _unconfined_run(
    ctx: _Context, tool_input: Mapping[str, Any], tool_use_id: str | None
) -> HookResult:
    import shlex

    from ..redaction.redactor import redact_text

    command = tool_input.get("command")
    shown = redact_text(command if isinstance(command, str) else repr(command))
    notes: list[str] = []
    intent_id = ctx.session_intent()
    args = {"command": shown, "tool_use_id": tool_use_id}
    # Each record on its own: one that cannot be written must not stop the others, nor
    # the answer that stops Claude Code.
    try:
        from ..tools.audit import AuditLog, audit_record

        AuditLog(ctx.root / ".ctxnb" / "audit.jsonl").append(
            audit_record(
                caller="claude-code",
                session_id=ctx.session_id,
                tool="Bash",
                args=args,
                duration_ms=0.0,
                success=False,
                error_code=UNCONFINED_RUN,
                intent_id=intent_id,
            )
        )
    except (OSError, ValueError) as e:
        notes.append(f"the audit line could not be written ({e})")
    try:
        from ..govern.ledger import TraceLedger, build_event_record

        TraceLedger(ctx.root / ".orchestration" / "agent_trace.jsonl").append(
            build_event_record(
                metadata={
                    "intent_id": intent_id or "unknown",
                    "session_id": ctx.session_id,
                    "tool": "Bash",
                    "caller": "claude-code",
                    "event": "unconfined-run",
                    "error_code": UNCONFINED_RUN,
                    "tool_use_id": tool_use_id,
                    "args": args,
                },
                repo_root=ctx.root,
            )
        )
    except (OSError, ValueError) as e:
        notes.append(f"the trace record could not be written ({e})")
    threshold = int(ctx.settings.get("breaker_threshold", DEFAULT_BREAKER_THRESHOLD))
    try:
        _breaker(ctx).trip("run_command", threshold)
    except OSError as e:
        notes.append(f"the circuit breaker could not be opened ({e})")
    try:
        _record_in_session(ctx, shown, tool_use_id)
    except Exception as e:  # the store may be busy or broken; the stop must still go out
        notes.append(f"the ctxnb session could not record it ({type(e).__name__}: {e})")
    again = f" ({'; '.join(notes)})" if notes else ""
    reason = (
        "ctxnb: this Bash command ran OUTSIDE ctxnb's sandbox: Claude Code did not run "
        "the confined command ctxnb gave it (no receipt for tool_use_id "
        f"{shlex.quote(tool_use_id or '<none>')}). It ran on the host with the user's "
        "rights, and nothing it changed was checked. ctxnb recorded it as an unconfined "
        f"run{again} and opened the circuit breaker for Bash. Stop: tell the user; a human "
        "must look at what the command did, then reset the breaker with `ctxnb hook "
        "reset-breaker`."
    )
    stop = (
        "ctxnb stopped this session: a Bash command ran outside ctxnb's sandbox (Claude "
        "Code dropped ctxnb's rewrite of it). Check what it did; `ctxnb hook reset-breaker` "
        "re-enables Bash. See docs/integrations.md, 'When a command ran unconfined'."
    )
    return _answer(
        {
            "continue": False,
            "stopReason": _cap(stop),
            "decision": "block",
            "reason": _cap(reason),
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": _cap(reason),
            },
        }
    )


def _record_in_session(ctx: _Context, shown: str, tool_use_id: str | None) -> None:
    """The unconfined run as a failed tool call of the ctxnb session of this Claude Code
    session (what ``sandbox exec`` records its runs in), opened as every door opens one:
    a :class:`~ctxnb.integrations.backend.WorkspaceBackend`."""
    from .backend import WorkspaceBackend  # the store: paid only when this happens

    states = ctx.state_dir

    def prepare(ws: Any) -> None:
        ws.protected_cache = states  # what runs on the host, from the hook's cache

    with WorkspaceBackend.open(
        ctx.root,
        session_id=f"claude-code-{ctx.session_id}" if ctx.session_id else None,
        caller="claude-code",
        prepare=prepare,
    ) as backend:
        # Closing the backend saves the session.
        backend.session.record_toolcall(
            "Bash",
            {"command": shown, "tool_use_id": tool_use_id},
            f"{UNCONFINED_RUN}: the command ran outside ctxnb's sandbox (no receipt)",
            status="fail",
            activate=False,
        )
