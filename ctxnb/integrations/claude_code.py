"""Claude Code hooks: ctxnb's governance for Claude Code's own tools.

Claude Code runs a command on each hook event and passes the event as JSON on stdin.
``ctxnb hook pre-tool-use``, ``ctxnb hook post-tool-use`` and
``ctxnb hook user-prompt-submit`` answer those events with the same policies the
:class:`~ctxnb.govern.engine.HookEngine` applies to ctxnb's file tools:

======================================  ==============================================
Claude Code tool                        ctxnb policies (first refusal wins)
======================================  ==============================================
Read, Glob, Grep                        path policy on ``file_path`` / ``path``
Write, Edit, MultiEdit, NotebookEdit    path policy → intent presence → intent
                                        validity → scope
Bash (governed workspace)               rewritten to run in ctxnb's sandbox (``allow``
                                        with ``updatedInput``): writable only in the
                                        session intent's scope, nothing without one;
                                        destructive changes are held; the user is
                                        asked with their diff at ``ctxnb sandbox
                                        commit ID``
anything else                           no decision
======================================  ==============================================

The workspace is the nearest directory at or above the payload's ``cwd`` that holds
``.orchestration/``. Without one, only the path policy applies (rooted at ``cwd``).
Absolute paths in payloads are made workspace-relative; a path outside the workspace
is denied.

ctxnb only ever narrows what Claude Code may do: a call that passes every policy gets
*no decision* (exit 0, no output), so Claude Code's own permission rules still apply.
Bash in a governed workspace is the exception: its command is replaced by
``/abs/python -I -m ctxnb sandbox exec --workspace ROOT --session ID [--intent ID] -- bash -c
'<original>'`` and allowed, because the sandbox, not a prompt, bounds what it can do;
``sandbox exec`` stores and traces what the command changed (the post-tool-use hook has
nothing left to do for Bash).
A refusal is ``permissionDecision: "deny"``. A command's destructive changes (a deletion,
a truncation, most of a file removed: what it *did*, read from its overlay, whatever its
text) are held, not committed (:mod:`ctxnb.sandbox.held`), and the agent is told to run
``ctxnb sandbox commit ID``; that exact command is ``"ask"``, with the diff in the reason
Claude Code shows its user, and runs on the host only after their yes.
The reason's first line is the policy's message (for a missing intent,
exactly :data:`~ctxnb.govern.core.NO_INTENT_MESSAGE`), the next line what to do. The
path, intent and scope checks are :mod:`ctxnb.govern.core`'s, the same the
:class:`~ctxnb.govern.engine.HookEngine` applies; governance's own files
(``.orchestration/``, ``.ctxnb/``, ``ctxnb.toml``) are refused whatever the intent.
Paths under a mount prefix of ``[[mounts]]`` (``/workspace/...``) are mapped to the
host directory first. Hooks fail closed: any error in ``pre-tool-use`` blocks the call
(exit code 2, the reason on stderr).

A Claude Code session selects its intent by naming it in a prompt ("Refactor the
parser under INT-001"; ``user-prompt-submit`` records it) or with
``ctxnb hook select-intent INT-001 --session <session_id>``. The selection lives in
the user's state directory (:func:`state_dir`), outside the workspace, where the
agent's file tools cannot write. After each Write, Edit or MultiEdit, ``post-tool-use``
appends an Agent Trace record to ``.orchestration/agent_trace.jsonl``, stores the new
version of the file (through :mod:`ctxnb.access`) and writes an audit line.

Hooks run on every tool call, so this module imports nothing heavy: no pandas, no
pyarrow, no pydantic, no jsonschema. The validated forms of ``active_intents.yaml`` and
of the ctxnb settings are cached as JSON in the state directory's ``cache/``, keyed by the
source file's modification time and size; only a changed file is validated again with
the full loaders.

Example:
    >>> import json, pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> payload = {"session_id": "s1", "cwd": str(root), "hook_event_name": "PreToolUse",
    ...            "tool_name": "Read", "tool_input": {"file_path": str(root / ".env")}}
    >>> result = run_hook("pre-tool-use", json.dumps(payload))
    >>> result.exit_code, json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"]
    (0, 'deny')
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .._defaults import DEFAULT_BREAKER_THRESHOLD
from ..access.pathrules import map_mount_prefix
from ..errors import ConfigError, CtxnbError, PolicyError
from ..govern.breaker import BreakerState
from ..govern.core import IntentLike, check_mutation, get_intent
from ..govern.state import (
    find_workspace,
    intent_context_of,
    intents_file,
    load_intents_cached,
    load_settings,
    read_session_intent,
    select_intent,
    state_dir,
    write_session_intent,
)

if TYPE_CHECKING:
    from ..access.fdio import PathPolicy

__all__ = [
    "EVENTS",
    "MAX_OUTPUT_CHARS",
    "HookResult",
    "find_workspace",
    "handle_event",
    "run_event",
    "run_hook",
    "select_intent",
    "state_dir",
]

EVENTS = ("pre-tool-use", "post-tool-use", "user-prompt-submit")
"""The Claude Code events ``ctxnb hook`` answers."""

MAX_OUTPUT_CHARS = 10_000
"""Claude Code caps strings in a hook's output at this many characters."""


READ_TOOLS = frozenset({"Read", "Glob", "Grep"})
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
TRACED_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})
ENGINE_TOOLS = {
    "Write": "write_file",
    "NotebookEdit": "write_file",
    "Edit": "write_patch",
    "MultiEdit": "write_patch",
    "Bash": "run_command",
}
"""The engine's tool each Claude Code tool counts as for the circuit breaker: one breaker
for every way an agent reaches the workspace, so Write stops when write_file's is open."""

_ORCHESTRATION = ".orchestration"
_MAX_TRACE_READ = 20 * 1024 * 1024
_PATTERN_RULES = ("traversal", "outside-roots", "home-tilde")


class HookResult:
    """What a hook process prints and how it exits.

    Attributes:
        exit_code: 0 answered (see ``stdout``), 1 an error after the fact (``stderr``
            says which), 2 a block (``stderr`` is the reason; every ``pre-tool-use``
            error blocks).
        stdout: the JSON answer, or empty for "no decision".
        stderr: a one-line message for the human.
    """

    # A plain class: creating dataclasses costs milliseconds at import, on every call.
    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, exit_code: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        return f"HookResult({self.exit_code}, {self.stdout!r}, {self.stderr!r})"

    @property
    def answer(self) -> dict[str, Any]:
        """``stdout`` parsed, or ``{}`` when there is no answer."""
        return json.loads(self.stdout) if self.stdout.strip() else {}

    @property
    def decision(self) -> str | None:
        """The PreToolUse ``permissionDecision``, if any."""
        return self.answer.get("hookSpecificOutput", {}).get("permissionDecision")


# -- entry points ------------------------------------------------------------------------------
def run_hook(event: str, stdin_text: str, *, env: Mapping[str, str] | None = None) -> HookResult:
    """Answer one Claude Code hook event given its stdin text.

    Hooks fail closed: when ``pre-tool-use`` cannot decide (malformed input, an
    unreadable settings file, any internal error) the call is blocked (exit code 2,
    the reason on stderr, which Claude Code shows to the model). For the other events
    an error is exit code 1 with a message on stderr; the tool has already run.

    Args:
        event: one of :data:`EVENTS`.
        stdin_text: the JSON payload Claude Code wrote to the hook's stdin.
        env: environment variables (``CTXNB_MODEL_ID``, ``CTXNB_STATE_DIR``);
            ``os.environ`` by default.

    Example:
        >>> result = run_hook("pre-tool-use", "not json")
        >>> result.exit_code, result.stderr.split(" (")[0]
        (2, 'ctxnb hook pre-tool-use: blocked: stdin is not JSON')
    """
    try:
        payload = json.loads(stdin_text)
    except ValueError as e:
        msg = getattr(e, "msg", str(e))
        line, col = getattr(e, "lineno", None), getattr(e, "colno", None)
        where = f" at line {line}, column {col}" if line is not None else ""
        return _error(
            event,
            f"stdin is not JSON ({msg}{where}); Claude Code passes the hook payload as a "
            "JSON object on stdin",
        )
    if not isinstance(payload, dict):
        return _error(event, f"stdin must be a JSON object, not {type(payload).__name__}")
    try:
        return handle_event(event, payload, env=env)
    except PayloadError as e:
        return _error(event, str(e))
    except Exception as e:  # fail closed: never let a call through unchecked
        return _error(event, f"internal error: {type(e).__name__}: {e}")


def run_event(event: str) -> int:
    """``ctxnb hook EVENT``: read the payload on stdin, answer on stdout, return the exit code.

    Fails closed: an error before a tool runs blocks it (exit 2), never lets it pass.
    """
    import sys

    try:
        text = sys.stdin.buffer.read().decode("utf-8")
        result = run_hook(event, text)
    except Exception as e:  # a hook must never answer with a traceback
        # Fail closed: an error before a tool runs blocks it (exit 2), never lets it pass.
        verdict = "blocked" if event == "pre-tool-use" else "error"
        sys.stderr.write(f"ctxnb hook {event}: {verdict}: {type(e).__name__}: {e}\n")
        return 2 if event == "pre-tool-use" else 1
    if result.stdout:
        sys.stdout.write(result.stdout)
    if result.stderr:
        sys.stderr.write(result.stderr)
    return result.exit_code


def handle_event(
    event: str, payload: Mapping[str, Any], *, env: Mapping[str, str] | None = None
) -> HookResult:
    """Answer one Claude Code hook event given its parsed payload.

    Args:
        event: ``pre-tool-use``, ``post-tool-use`` or ``user-prompt-submit``.
        payload: the event's JSON object.
        env: environment variables; ``os.environ`` by default.

    Raises:
        PayloadError: a required field is missing or has the wrong type.

    Example:
        >>> import pathlib, tempfile
        >>> root = str(pathlib.Path(tempfile.mkdtemp()))
        >>> handle_event("pre-tool-use", {"cwd": root, "tool_name": "Bash",
        ...                               "tool_input": {"command": "ls"}}).stdout
        ''
    """
    handlers: dict[str, Callable[[_Context], HookResult]] = {
        "pre-tool-use": _pre_tool_use,
        "post-tool-use": _post_tool_use,
        "user-prompt-submit": _user_prompt_submit,
    }
    handler = handlers.get(event)
    if handler is None:
        raise PayloadError(f"unknown event {event!r}; one of: {', '.join(EVENTS)}")
    ctx = _Context(payload, os.environ if env is None else env)
    return _in_agent_paths(handler(ctx), ctx)


def _in_agent_paths(result: HookResult, ctx: _Context) -> HookResult:
    """The answer in the form the call used: when its paths came under an agent prefix of
    ``[[mounts]]``, host paths under a mount are named by their agent paths (the agent
    sees ``/workspace/.env``, never the host's layout)."""
    mounts = (ctx._settings or {}).get("mounts") or ()
    if not mounts or not (result.stdout or result.stderr):
        return result
    agents = [a.rstrip("/") for a, _ in mounts]
    tool_input = ctx.payload.get("tool_input")
    given = (
        [v for v in tool_input.values() if isinstance(v, str)]
        if isinstance(tool_input, Mapping)
        else []
    )
    if not any(v == a or v.startswith(a + "/") for v in given for a in agents if a):
        return result  # host paths in, host paths out
    # Longest host prefix first, on whole components.
    pairs = sorted(((c.rstrip("/"), a.rstrip("/")) for a, c in mounts), key=lambda x: -len(x[0]))

    def shown(text: str) -> str:
        for host, agent in pairs:
            if host:
                text = re.sub(re.escape(host) + r"(?=[/'\"\s:,)]|$)", lambda _m, a=agent: a, text)
        return text

    return HookResult(result.exit_code, shown(result.stdout), shown(result.stderr))


class PayloadError(CtxnbError, ValueError):
    """A hook payload lacks a field ctxnb needs, or a field has the wrong type."""


def _error(event: str, message: str) -> HookResult:
    if event == "pre-tool-use":
        # Exit 2 blocks the tool call; 1 would let it run unchecked.
        return HookResult(2, "", f"ctxnb hook {event}: blocked: {_cap(message)}\n")
    return HookResult(1, "", f"ctxnb hook {event}: error: {_cap(message)}\n")


def _pathpolicy_module() -> ModuleType:
    """``ctxnb.access.fdio`` (the ``ctxnb.access`` package imports lazily, so this
    loads neither pydantic nor pandas)."""
    import importlib

    return importlib.import_module("ctxnb.access.fdio")


class _Context:
    """One hook call: the payload, its workspace, and what is loaded on demand."""

    def __init__(self, payload: Mapping[str, Any], env: Mapping[str, str]) -> None:
        self.payload = payload
        self.env = env
        cwd = payload.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise PayloadError(f"'cwd' must be an absolute path, got {cwd!r}")
        if not os.path.isdir(cwd):
            raise PayloadError(f"'cwd' {cwd!r} is not an existing directory")
        self.cwd = cwd
        self.root, self.governed = find_workspace(cwd)
        self._state_dir: Path | None = None
        sid = payload.get("session_id")
        self.session_id: str | None = sid if isinstance(sid, str) and sid else None
        self._settings: dict[str, Any] | None = None
        self._policy: PathPolicy | None = None
        self._intents: dict[str, IntentLike] | None = None

    @property
    def state_dir(self) -> Path:
        if self._state_dir is None:
            self._state_dir = state_dir(self.root, self.env)
        return self._state_dir

    def str_field(self, key: str) -> str:
        value = self.payload.get(key)
        if not isinstance(value, str) or not value:
            raise PayloadError(f"the payload needs a non-empty string {key!r}, got {value!r}")
        return value

    def tool_input(self) -> Mapping[str, Any]:
        value = self.payload.get("tool_input")
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise PayloadError(f"'tool_input' must be an object, got {type(value).__name__}")
        return value

    @property
    def settings(self) -> dict[str, Any]:
        if self._settings is None:
            self._settings = load_settings(self.root, self.state_dir if self.governed else None)
        return self._settings

    @property
    def policy(self) -> PathPolicy:
        if self._policy is None:
            s = self.settings
            self._policy = _pathpolicy_module().PathPolicy(
                [self.root],
                allow=s["allow"],
                deny=s["deny"],
                protect=s["protect"],
                max_path_bytes=s["max_path_bytes"],
            )
        return self._policy

    def intents(self) -> dict[str, IntentLike]:
        if self._intents is None:
            self._intents = load_intents_cached(self.root, self.state_dir)
        return self._intents

    def abs_path(self, path: str) -> str:
        """Paths in payloads are absolute (mount prefixes mapped to the host directory);
        a relative one is relative to ``cwd``."""
        if os.path.isabs(path):
            return map_mount_prefix(path, self.settings["mounts"])
        return os.path.join(self.cwd, path)

    def session_intent(self) -> str | None:
        if self.session_id is None:
            return None
        return read_session_intent(self.state_dir, self.session_id)


# -- answers ----------------------------------------------------------------------------------
def _cap(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return text[: MAX_OUTPUT_CHARS - 1] + "…"


def _answer(data: dict[str, Any]) -> HookResult:
    return HookResult(0, json.dumps(data, ensure_ascii=False) + "\n", "")


def _pre_answer(
    decision: str, reason: str, updated_input: Mapping[str, Any] | None = None
) -> HookResult:
    out: dict[str, Any] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": _cap(reason),
    }
    if updated_input is not None:
        out["updatedInput"] = dict(updated_input)
    return _answer({"hookSpecificOutput": out})


def _context_answer(event_name: str, text: str) -> HookResult:
    return _answer(
        {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": _cap(text)}}
    )


def _refusal(e: PolicyError) -> str:
    # First line: the policy's own message (deterministic); second: what to do.
    return f"{e.message}\n{e.required_action}" if e.required_action else e.message


# -- PreToolUse ----------------------------------------------------------------------------
def _pre_tool_use(ctx: _Context) -> HookResult:
    tool = ctx.str_field("tool_name")
    tool_input = ctx.tool_input()
    try:
        if ctx.governed and (tool in WRITE_TOOLS or tool == "Bash"):
            _check_breaker(ctx, ENGINE_TOOLS.get(tool, tool))
        if tool in READ_TOOLS:
            _check_read(ctx, tool, tool_input)
            return _ask_if_sensitive(ctx, tool, tool_input, "read")
        elif tool in WRITE_TOOLS:
            _pre_write(ctx, tool, tool_input)
            return _ask_if_sensitive(ctx, tool, tool_input, "write")
        elif tool == "Bash" and ctx.governed:
            return _check_bash(ctx, tool_input)
    except PolicyError as e:
        _audit_refusal(ctx, tool, tool_input, e.error_code)
        return _pre_answer("deny", _refusal(e))
    except ConfigError as e:
        # Fail closed: a policy that cannot be loaded cannot let the call through.
        return _pre_answer(
            "deny",
            f"ctxnb cannot check this call: {e}\nAsk a human to fix the ctxnb settings or "
            "the intents file.",
        )
    return HookResult()


def _breaker(ctx: _Context) -> BreakerState:
    # The engine's own file: one breaker for every way an agent reaches the workspace.
    return BreakerState(ctx.root / ".ctxnb" / "breaker.json")


def _check_breaker(ctx: _Context, tool: str) -> None:
    n = _breaker(ctx).get(tool)
    threshold = int(ctx.settings.get("breaker_threshold", DEFAULT_BREAKER_THRESHOLD))
    if n >= threshold:
        raise PolicyError(
            "CIRCUIT_OPEN",
            f"{tool} failed {n} times in a row; the circuit breaker is open",
            recoverable=False,
            required_action="A human must look at the failures and reset the breaker "
            "(`ctxnb hook reset-breaker`, or engine.reset_breaker() in Python).",
        )


def _ask_if_sensitive(
    ctx: _Context, tool: str, tool_input: Mapping[str, Any], mode: str
) -> HookResult:
    """Claude Code asks its user (``ask``) before a file marked sensitive is read or written."""
    globs = ctx.settings.get("sensitive") or []
    path = _path_arg(tool_input, "file_path", "notebook_path")
    if not globs or not ctx.governed or path is None:
        return HookResult()
    try:
        rel = ctx.policy.check(ctx.abs_path(path)).rel
    except CtxnbError:
        return HookResult()
    from ..govern.core import in_scope

    if not in_scope(tuple(globs), rel):
        return HookResult()
    return _pre_answer(
        "ask", f"ctxnb: {rel} is marked sensitive; {tool} would {mode} it. Allow it?"
    )


def _path_arg(tool_input: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = tool_input.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise PayloadError(f"tool_input.{key} must be a string, got {type(value).__name__}")
        if value:
            return value
    return None


def _check_read(ctx: _Context, tool: str, tool_input: Mapping[str, Any]) -> None:
    if tool == "Read":
        path = _path_arg(tool_input, "file_path")
        if path is None:
            raise PayloadError("a Read call needs tool_input.file_path")
        ctx.policy.check(ctx.abs_path(path))
        return
    # Glob and Grep search a directory (the workspace root when no path is given).
    path = _path_arg(tool_input, "path")
    base = ctx.abs_path(path) if path else ctx.cwd
    sp = ctx.policy.check(base)
    # A search pattern that itself names a denied file (``.env*``, ``../x``) is refused;
    # other rules (a backslash in a regex…) do not apply to patterns.
    pattern = _path_arg(tool_input, "glob" if tool == "Grep" else "pattern")
    if pattern:
        candidate = pattern if os.path.isabs(pattern) else posixpath.join(str(sp.abs), pattern)
        try:
            ctx.policy.check(candidate)
        except PolicyError as e:
            rule = str(e.details.get("rule", ""))
            if rule.startswith("deny:") or rule in _PATTERN_RULES:
                raise


def _pre_write(ctx: _Context, tool: str, tool_input: Mapping[str, Any]) -> None:
    path = _path_arg(tool_input, "file_path", "notebook_path")
    if path is None:
        raise PayloadError(f"a {tool} call needs tool_input.file_path")
    governed = ctx.governed
    check_mutation(
        ctx.policy,
        ctx.abs_path(path),
        intents=ctx.intents() if governed else None,
        intent_id=ctx.session_intent(),
        where=intents_file(ctx.root),
        how_to_select="Ask the user which intent this work is under (they name it in a "
        "prompt, e.g. 'under INT-001'), or run `ctxnb hook select-intent ID --session "
        f"{ctx.session_id or '<session_id>'}`.",
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
    from ..command_risk import classify_command

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


# -- PostToolUse ------------------------------------------------------------------------------
def _post_tool_use(ctx: _Context) -> HookResult:
    tool = ctx.str_field("tool_name")
    if tool not in TRACED_TOOLS or not ctx.governed:
        return HookResult()
    tool_input = ctx.tool_input()
    response = ctx.payload.get("tool_response")
    response = response if isinstance(response, Mapping) else {}
    _breaker(ctx).record(ENGINE_TOOLS.get(tool, tool), failed=response.get("success") is False)
    if response.get("success") is False:
        return HookResult()
    path = _path_arg(tool_input, "file_path") or _path_arg(response, "filePath")
    if path is None:
        raise PayloadError(f"a {tool} call needs tool_input.file_path")
    try:
        sp = ctx.policy.check(ctx.abs_path(path))
        data = ctx.policy.read_bytes(sp, max_bytes=_MAX_TRACE_READ)
    except CtxnbError:
        return HookResult()  # outside the workspace, denied or gone: nothing to trace
    from .claude_code_edits import (
        audit_change,
        changed_ranges,
        clamp,
        original_text,
        store_versions,
    )

    new_text = data.decode("utf-8", errors="replace")
    old_text = original_text(tool, tool_input, response, new_text)
    ranges = clamp(changed_ranges(tool, tool_input, response, new_text, old_text), new_text)

    intent: IntentLike | None = None
    intent_id = ctx.session_intent()
    notes: list[str] = []
    try:
        intents = ctx.intents()
        if intent_id is not None:
            intent = get_intent(intents, intent_id, where=intents_file(ctx.root))
    except (PolicyError, ConfigError) as e:
        notes.append(f"ctxnb: the intent of this change could not be checked: {e}")
    in_scope = intent is None or intent.in_scope(sp.rel)

    from ..govern.record import FileChange, Origin, Recorder

    # Claude Code ran the edit already: the scope decision is recorded, not enforced.
    scope = "no-intent" if intent is None else "in-scope" if in_scope else "out-of-scope"
    meta: dict[str, Any] = {"scope": scope}
    for key in ("tool_use_id", "transcript_path"):
        if isinstance(ctx.payload.get(key), str):
            meta[key] = ctx.payload[key]
    recorder = Recorder(
        ctx.root, model_id=ctx.env.get("CTXNB_MODEL_ID") or ctx.settings["model_id"]
    )
    origin = Origin(
        tool,
        caller="claude-code",
        session_id=ctx.session_id,
        # An edit outside the intent's scope is recorded under the intent (the trace
        # says what happened) but not listed as the intent's work in the intent map.
        intent=intent if in_scope else None,
        intent_id=intent_id,
        metadata=meta,
        conversation_url=_transcript_url(ctx.payload.get("transcript_path")),
    )
    change = FileChange(sp.rel, old=old_text, new=new_text, data=data, ranges=ranges)
    try:
        recorder.record(
            [change], origin, store=lambda changes: store_versions(ctx.root, ctx.settings, changes)
        )
    except (CtxnbError, ValueError, OSError) as e:
        return _error("post-tool-use", f"could not record the change: {e}")
    try:
        audit_change(ctx.root, ctx.session_id, tool, tool_input, sp.rel, old_text, data, intent_id)
    except OSError as e:
        return _error("post-tool-use", f"could not write the audit line: {e}")

    if not in_scope:
        assert intent is not None
        return _answer(
            {
                "decision": "block",
                "reason": _cap(
                    f"{sp.rel} was changed but is outside the scope of intent {intent.id} "
                    f"({', '.join(intent.owned_scope) or 'no files'}). Revert the change, or "
                    "ask the user to widen the scope in .orchestration/active_intents.yaml."
                ),
            }
        )
    if intent_id is None:
        notes.append(
            f"ctxnb: {sp.rel} was changed with no active intent; the trace records it under "
            "'unknown'. Ask the user which intent this work belongs to."
        )
    if notes:
        return _context_answer("PostToolUse", "\n".join(notes))
    return HookResult()


def _audit_refusal(ctx: _Context, tool: str, tool_input: Mapping[str, Any], code: str) -> None:
    """The audit line of a call the pre hook refused (only governed workspaces keep one)."""
    if not ctx.governed:
        return
    from ..tools.audit import AuditLog, audit_record

    try:
        AuditLog(ctx.root / ".ctxnb" / "audit.jsonl").append(
            audit_record(
                caller="claude-code",
                session_id=ctx.session_id,
                tool=tool,
                args=dict(tool_input),
                duration_ms=0.0,
                success=False,
                error_code=code,
                intent_id=ctx.session_intent(),
            )
        )
    except OSError:
        pass  # the refusal stands whether or not it could be logged


# -- UserPromptSubmit ---------------------------------------------------------------------------
def _user_prompt_submit(ctx: _Context) -> HookResult:
    if not ctx.governed:
        return HookResult()
    prompt = ctx.payload.get("prompt")
    if not isinstance(prompt, str):
        raise PayloadError("a UserPromptSubmit payload needs 'prompt' (a string)")
    intents = ctx.intents()
    mentioned = _mentioned_ids(prompt, intents)
    if not mentioned:
        return HookResult()
    active = [i for i in mentioned if intents[i].is_active]
    current = ctx.session_intent()
    if len(active) == 1:
        intent = intents[active[0]]
        if ctx.session_id is None:
            raise PayloadError("a UserPromptSubmit payload needs 'session_id'")
        write_session_intent(ctx.state_dir, ctx.session_id, intent.id, source="prompt")
        head = f"ctxnb: {intent.id} is now the active intent of this session."
        return _context_answer(
            "UserPromptSubmit", head + "\n" + intent_context_of(ctx.root, intent)
        )
    if active:
        kept = f"the active intent stays {current}" if current else "no intent is selected"
        return _context_answer(
            "UserPromptSubmit",
            f"ctxnb: the prompt names several active intents ({', '.join(active)}); {kept}. "
            "Ask the user which one this work is under.",
        )
    inactive = ", ".join(f"{i} ({intents[i].status})" for i in mentioned)
    return _context_answer(
        "UserPromptSubmit",
        f"ctxnb: the prompt names intents that are not active: {inactive}; "
        "mutating tools stay refused under them.",
    )


def _mentioned_ids(prompt: str, intents: Mapping[str, IntentLike]) -> list[str]:
    """Known intent ids named in the prompt as whole words, in order of first mention."""
    found: list[tuple[int, str]] = []
    for iid in intents:
        m = re.search(rf"(?<![\w-]){re.escape(iid)}(?![\w-])", prompt)
        if m:
            found.append((m.start(), iid))
    return [iid for _, iid in sorted(found)]


# -- the launcher -------------------------------------------------------------------------
def launcher() -> list[str]:
    """How ctxnb's own processes start ctxnb: this interpreter by its absolute path, isolated.

    ``-I``: neither the current directory (the workspace, where the agent writes a
    ``ctxnb.py``) nor ``PYTHONPATH`` is on ``sys.path``, and no user site; so nothing
    from the workspace is imported by a hook or by the Bash rewrite.

    Example:
        >>> launcher()[1:]
        ['-I', '-m', 'ctxnb']
    """
    import sys

    return [os.path.abspath(sys.executable), "-I", "-m", "ctxnb"]


def _transcript_url(path: Any) -> str | None:
    """The ``file://`` URI of Claude Code's transcript (``transcript_path``), if absolute."""
    if isinstance(path, str) and os.path.isabs(path):
        return Path(path).as_uri()
    return None
