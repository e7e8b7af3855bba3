"""Claude Code hooks: ctxnb's governance for Claude Code's own tools.

Claude Code runs a command on each hook event and passes the event as JSON on stdin.
``ctxnb hook pre-tool-use``, ``ctxnb hook post-tool-use``,
``ctxnb hook user-prompt-submit``, ``ctxnb hook post-compact`` and
``ctxnb hook session-end`` answer those events
with the same policies the :class:`~ctxnb.govern.engine.HookEngine` applies to ctxnb's
file tools:

======================================  ==============================================
Claude Code tool                        ctxnb policies (first refusal wins)
======================================  ==============================================
Read                                    path policy on ``file_path``
Glob, Grep                              path policy on ``path``; refused when ripgrep,
                                        given the call's own pattern, glob and type,
                                        lists a file the sandbox hides
                                        (:mod:`~ctxnb.integrations._claude_search`)
Write, Edit, MultiEdit, NotebookEdit    path policy → intent presence → intent
                                        validity → scope; the root ``pyproject.toml``
                                        decided on the bytes the edit leaves
Bash (governed workspace)               rewritten to run in ctxnb's sandbox (``allow``
                                        with ``updatedInput``): writable only in the
                                        session intent's scope, nothing without one;
                                        destructive changes are held; the user is
                                        asked with their diff at ``ctxnb sandbox
                                        commit ID``; after it, its receipt is checked
``mcp__*`` and any other tool           path policy on every path in its input
                                        (:mod:`~ctxnb.integrations._claude_paths`)
======================================  ==============================================

Every path goes through the same resolver and path policy as the file tools'
``dispatch``: mount prefixes mapped, relative paths taken from ``cwd``, ``.`` and empty
components dropped, case, width and Unicode-normalisation variants of denied and
governance names refused. The workspace is the nearest directory holding
``.orchestration/`` at or above ``$CLAUDE_PROJECT_DIR`` (Claude Code sets it for
hooks) or, without it, the payload's ``cwd``; a ``cwd`` outside the project is governed
by its own nearest governed root, or refused when it has none and the project is
governed. Without a governed root only the path policy applies. Absolute paths in
payloads are made workspace-relative; a path outside the workspace is denied.

ctxnb only ever narrows what Claude Code may do: a call that passes every policy gets
*no decision* (exit 0, no output), so Claude Code's own permission rules still apply.
Bash in a governed workspace is the exception: its command is replaced by
``/abs/python -I -m ctxnb sandbox exec --workspace ROOT --session ID [--intent ID]
--receipt TOOL_USE_ID --state-dir DIR -- bash -c '<original>'`` and allowed, because the
sandbox, not a prompt, bounds what it can do; ``sandbox exec`` stores and traces what
the command changed, and leaves a receipt for the call before it runs anything. The
post-tool-use hook takes that receipt: a Bash call without one ran outside the sandbox
(Claude Code dropped the rewrite), and is recorded as an *unconfined run*, the
breaker of ``run_command`` opened, and Claude Code told to stop
(:mod:`~ctxnb.integrations._claude_bash`).
A refusal is ``permissionDecision: "deny"``. A command's destructive changes (a deletion,
a truncation, most of a file removed: what it *did*, read from its overlay, whatever its
text) are held, not committed (:mod:`ctxnb.sandbox.held`), and the agent is told to run
``ctxnb sandbox commit ID``; that exact command is ``"ask"``, with the diff in the reason
Claude Code shows its user, and runs on the host only after their yes.
The reason's first line is the policy's message (for a missing intent,
exactly :data:`~ctxnb.govern.core.NO_INTENT_MESSAGE`), the next line what to do. The
path, intent and scope checks are :mod:`ctxnb.govern.core`'s, the same the
:class:`~ctxnb.govern.engine.HookEngine` applies; governance's own files
(``.orchestration/``, ``.ctxnb/``, ``ctxnb.toml`` …) are refused whatever the intent.
Hooks fail closed: any error in ``pre-tool-use`` blocks the call (exit code 2, the
reason on stderr).

A Claude Code session selects its intent by naming it in a prompt ("Refactor the
parser under INT-001"; ``user-prompt-submit`` records it) or with
``ctxnb hook select-intent INT-001 --session <session_id>``. The selection lives in
the user's state directory (:func:`state_dir`), outside the workspace, where the
agent's file tools cannot write. After each Write, Edit or MultiEdit, ``post-tool-use``
appends an Agent Trace record to ``.orchestration/agent_trace.jsonl``, stores the new
version of the file (through :mod:`ctxnb.access`) and writes an audit line; then it runs
the ``[governance] quality_commands`` in the intent's sandbox and hands their failures
back to Claude Code (:mod:`~ctxnb.integrations._claude_quality`). Every refusal of
``pre-tool-use`` (but the breaker's own) and every failed check counts toward the
engine's circuit breaker (:data:`ENGINE_TOOLS`, :data:`NOT_COUNTED`). After Claude
Code compacts its conversation, ``post-compact`` records what it dropped as a compaction
of the session's context, restorable from the store
(:mod:`~ctxnb.integrations._claude_compact`). When the session ends (``/clear``, logout,
exit), ``session-end`` releases its lease on its intent's scope, which would otherwise
keep another session off those files for ``[governance] lease_minutes``. A ``[budget]``
holds these tools as it holds ctxnb's own: writes and Bash are refused when the session
has none left, a read is charged what it will return and refused when that would cross a
limit (:mod:`~ctxnb.integrations._claude_budget`).

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
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._util.defaults import DEFAULT_BREAKER_THRESHOLD
from ..errors import ConfigError, CtxnbError, PolicyError
from ..govern.core import IntentLike, check_mutation, get_intent
from ..govern.state import (
    claim_scope,
    find_workspace,
    intent_context_of,
    intents_file,
    refresh_lease,
    select_intent,
    state_dir,
    write_session_intent,
)
from ._claude_hookio import (
    MAX_OUTPUT_CHARS,
    HookResult,
    PayloadError,
    _answer,
    _breaker,
    _cap,
    _Context,
    _context_answer,
    _error,
    _path_arg,
    _pre_answer,
    _refusal,
)
from ._claude_hookio import launcher as launcher  # claude_code_install's, as before

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

EVENTS = ("pre-tool-use", "post-tool-use", "user-prompt-submit", "post-compact", "session-end")
"""The Claude Code events ``ctxnb hook`` answers."""


READ_TOOLS = frozenset({"Read", "Glob", "Grep"})
SEARCH_TOOLS = frozenset({"Glob", "Grep"})
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
TRACED_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})
ENGINE_TOOLS = {
    "Read": "read_file",
    "Glob": "search",
    "Grep": "search",
    "Write": "write_file",
    "NotebookEdit": "write_file",
    "Edit": "write_patch",
    "MultiEdit": "write_patch",
    "Bash": "run_command",
}
"""The engine's tool each Claude Code tool counts as for the circuit breaker: one breaker
for every way an agent reaches the workspace, so Write stops when write_file's is open."""

NOT_COUNTED = frozenset({"CIRCUIT_OPEN", "SANDBOX_UNAVAILABLE"})
"""Refusals of the pre-tool-use hook that are not the agent's failures: the breaker's own
(counting them would only push the count up while it is open) and a sandbox missing from
the machine (the user's set-up). Every other refusal counts toward the breaker of the
engine's tool. That is more than the engine counts: its agent can fix a missing or
invalid intent itself (``select_active_intent``), while Claude Code's cannot (a human
names the intent), so repeating a write without one is a loop to stop."""

_ORCHESTRATION = ".orchestration"
_MAX_TRACE_READ = 20 * 1024 * 1024


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
    except RecursionError:  # the parser recurses per level; no payload nests like this
        return _error(event, "stdin is JSON nested too deeply to read; not a hook payload")
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
        "post-compact": _post_compact,
        "session-end": _session_end,
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
                repl = agent.replace("\\", "\\\\")  # literal in re.sub's template
                text = re.sub(re.escape(host) + r"(?=[/'\"\s:,)]|$)", repl, text)
        return text

    return HookResult(result.exit_code, shown(result.stdout), shown(result.stderr))


# -- PreToolUse ----------------------------------------------------------------------------
def _pre_tool_use(ctx: _Context) -> HookResult:
    tool = ctx.str_field("tool_name")
    tool_input = ctx.tool_input()
    try:
        if ctx.escaped is not None:
            raise PolicyError(
                "OUTSIDE_WORKSPACE",
                ctx.escaped,
                recoverable=False,
                required_action="Work inside the project, or ask the user to govern that "
                "folder too (`ctxnb init-governance DIR`).",
            )
        if ctx.governed and tool in ENGINE_TOOLS:
            _check_breaker(ctx, ENGINE_TOOLS[tool])
        # [budget] in a governed workspace (only it keeps the audit log budgets count).
        budgeted = ctx.governed and tool in ENGINE_TOOLS and bool(ctx.settings.get("budget"))
        if budgeted and tool in WRITE_TOOLS | {"Bash"}:
            from ._claude_budget import check_write  # only a [budget] pays for it

            # Before the other policies, as the runner does: a write past the budget
            # asks no human and runs in no sandbox.
            check_write(ctx, tool)
        if tool == "Read":
            path = _path_arg(tool_input, "file_path")
            if path is None:
                raise PayloadError("a Read call needs tool_input.file_path")
            ctx.policy.check(ctx.abs_path(path))
            if budgeted:
                from ._claude_budget import charge_read

                charge_read(ctx, tool, tool_input)
            _count_passed(ctx, tool)
            return _ask_if_sensitive(ctx, tool, tool_input, "read")
        elif tool in SEARCH_TOOLS:
            from ._claude_search import check_search  # only searches pay for ripgrep

            reach = check_search(ctx, tool, tool_input)
            if budgeted:
                from ._claude_budget import charge_read

                charge_read(ctx, tool, tool_input, reach)
            _count_passed(ctx, tool)
            return HookResult()
        elif tool in WRITE_TOOLS:
            _pre_write(ctx, tool, tool_input)
            return _ask_if_sensitive(ctx, tool, tool_input, "write")
        elif tool == "Bash":
            if ctx.governed:
                from ._claude_bash import _check_bash  # only Bash pays for the sandbox rewrite

                return _check_bash(ctx, tool_input)
        else:
            # MCP servers' tools and tools ctxnb does not know: their paths, found by
            # name and by shape, go through the same path policy.
            from ._claude_paths import check_tool_paths

            check_tool_paths(ctx, tool, tool_input)
    except PolicyError as e:
        _audit_refusal(ctx, tool, tool_input, e.error_code)
        _count_refusal(ctx, tool, e.error_code)
        return _pre_answer("deny", _refusal(e))
    except ConfigError as e:
        # Fail closed: a policy that cannot be loaded cannot let the call through.
        return _pre_answer(
            "deny",
            f"ctxnb cannot check this call: {e}\nAsk a human to fix the ctxnb settings or "
            "the intents file.",
        )
    return HookResult()


def _count_refusal(ctx: _Context, tool: str, code: str) -> None:
    """A refusal is a failure of the engine's tool for the breaker (governed workspaces
    only, where the breaker is kept), so that an agent that keeps trying what is refused
    is stopped, in every later hook process and in the engine alike."""
    engine_tool = ENGINE_TOOLS.get(tool)
    if not ctx.governed or engine_tool is None or code in NOT_COUNTED:
        return
    try:
        _breaker(ctx).record(engine_tool, failed=True)
    except OSError:
        pass  # the refusal stands whether or not it could be counted


def _count_passed(ctx: _Context, tool: str) -> None:
    """A read or a search that passed ends its tool's run of refusals, as a successful
    call does in the engine (there is no post-tool-use record for them to do it). Writes
    and Bash are counted by their outcome, in post-tool-use."""
    if ctx.governed:
        try:
            _breaker(ctx).record(ENGINE_TOOLS[tool], failed=False)
        except OSError:
            pass  # nothing to reset is the common case, and it needs no write


def _check_breaker(ctx: _Context, tool: str) -> None:
    breaker = _breaker(ctx)
    n = breaker.get(tool)
    threshold = int(ctx.settings.get("breaker_threshold", DEFAULT_BREAKER_THRESHOLD))
    if n >= threshold:
        why = (
            f"{tool} was stopped: a command ran outside ctxnb's sandbox"
            if tool in breaker.tripped()
            else f"{tool} failed {n} times in a row"
        )
        raise PolicyError(
            "CIRCUIT_OPEN",
            f"{why}; the circuit breaker is open",
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


def _pre_write(ctx: _Context, tool: str, tool_input: Mapping[str, Any]) -> None:
    path = _path_arg(tool_input, "file_path", "notebook_path")
    if path is None:
        raise PayloadError(f"a {tool} call needs tool_input.file_path")
    governed = ctx.governed
    safe, _ = check_mutation(
        ctx.policy,
        ctx.abs_path(path),
        intents=ctx.intents() if governed else None,
        intent_id=ctx.session_intent(),
        where=intents_file(ctx.root),
        how_to_select="Ask the user which intent this work is under (they name it in a "
        "prompt, e.g. 'under INT-001'), or run `ctxnb hook select-intent ID --session "
        f"{ctx.session_id or '<session_id>'}`.",
    )
    intent_id = ctx.session_intent()
    if governed and intent_id is not None and ctx.session_id is not None:
        # A write keeps the session's lease on its scope live (write partitioning).
        refresh_lease(ctx.root, ctx.state_dir, ctx.session_id, ctx.intents()[intent_id])
    _refuse_other_name(ctx, safe)
    _refuse_tool_ctxnb(ctx, tool, tool_input, safe)


def _refuse_other_name(ctx: _Context, safe: Any) -> None:
    """A write to another name (a hard link) of a governance or protected file is refused
    as a write to that file (see :func:`~ctxnb.integrations._claude_paths.refuse_other_name`).
    One look for the common case: only a file with more than one link can be another
    name, and only then is the module that walks for it loaded."""
    import stat as stat_mod

    try:
        st = os.stat(safe.abs, follow_symlinks=False)
    except OSError:
        return  # a new file is no other name of anything
    if st.st_nlink < 2 or not stat_mod.S_ISREG(st.st_mode):
        return
    from ._claude_paths import refuse_other_name

    refuse_other_name(ctx, safe, st)


def holds_settings(rel: str) -> bool:
    """Whether the workspace-relative ``rel`` is (or a filesystem that folds case or
    Unicode would open it as) the root ``pyproject.toml``, where ``[tool.ctxnb]`` lives.

    Example:
        >>> [holds_settings(p) for p in ("pyproject.toml", "PyProject.TOML", "a/pyproject.toml")]
        [True, True, False]
    """
    if "/" in rel:
        return False
    import unicodedata

    folded = unicodedata.normalize("NFKC", rel).casefold()
    return (folded.rstrip(" .") or folded) == "pyproject.toml"


def _same_file(a: Any, b: Any) -> bool:
    """Whether two names are one file (a hard link under another name), neither
    followed if it is a symbolic link."""
    try:
        sa, sb = os.stat(a, follow_symlinks=False), os.stat(b, follow_symlinks=False)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _refuse_tool_ctxnb(ctx: _Context, tool: str, tool_input: Mapping[str, Any], safe: Any) -> None:
    """``[tool.ctxnb]`` in the root ``pyproject.toml`` is ctxnb's settings: Claude Code's
    edits may not add, alter or remove it, as ctxnb's own write tools may not.

    The file is known by the path the policy resolved (``/ws/./pyproject.toml`` and
    ``PYPROJECT.toml`` are the same file to it) and by what it is (a hard link to it
    under another name), and the edit by the bytes it leaves, as
    Claude Code would apply it (:func:`~ctxnb.integrations.claude_code_edits.edit_outcomes`):
    an edit whose result ctxnb cannot reproduce is refused."""
    if not holds_settings(safe.rel) and not _same_file(safe.abs, ctx.root / "pyproject.toml"):
        return
    from ..config import tool_ctxnb_changed
    from ..errors import NotFoundError
    from .claude_code_edits import EditNotReproducible, edit_outcomes

    try:
        old = ctx.policy.read_bytes(safe)
    except NotFoundError:
        old = None
    try:
        outcomes = edit_outcomes(tool, tool_input, old)
    except EditNotReproducible as e:
        raise PolicyError(
            "PATH_DENIED",
            f"{safe.rel} may hold [tool.ctxnb], ctxnb's settings, so a change to it is "
            f"decided on the bytes it leaves; ctxnb cannot tell them: {e}",
            recoverable=True,
            required_action="Give old_string exactly as it is in the file (its quotes, its "
            "line breaks, once), or write the whole file with Write.",
            details={"rule": "settings-bytes", "path": safe.rel},
        ) from None
    if any(tool_ctxnb_changed(old, new) for new in outcomes):
        raise PolicyError(
            "PATH_DENIED",
            f"{safe.rel}: the change adds, alters or removes [tool.ctxnb], ctxnb's "
            "settings, which no agent tool changes",
            recoverable=False,
            required_action="Leave [tool.ctxnb] as it is; a human edits ctxnb's settings.",
            details={"rule": "settings-bytes", "path": safe.rel},
        )


# -- PostToolUse ------------------------------------------------------------------------------
def _post_tool_use(ctx: _Context) -> HookResult:
    tool = ctx.str_field("tool_name")
    if tool == "Bash" and ctx.governed:
        # Did the command run as ctxnb rewrote it, in the sandbox? Its receipt says.
        from ._claude_bash import check_receipt

        return check_receipt(ctx, ctx.tool_input())
    if tool not in TRACED_TOOLS:
        return HookResult()
    if not ctx.governed:
        return _unrecorded_notice(ctx, tool)
    tool_input = ctx.tool_input()
    response = ctx.payload.get("tool_response")
    response = response if isinstance(response, Mapping) else {}
    breaker_tool = ENGINE_TOOLS.get(tool, tool)
    if response.get("success") is False:
        _breaker(ctx).record(breaker_tool, failed=True)
        return HookResult()
    path = _path_arg(tool_input, "file_path") or _path_arg(response, "filePath")
    if path is None:
        raise PayloadError(f"a {tool} call needs tool_input.file_path")
    try:
        sp = ctx.policy.check(ctx.abs_path(path))
        data = ctx.policy.read_bytes(sp, max_bytes=_MAX_TRACE_READ)
    except CtxnbError:
        _breaker(ctx).record(breaker_tool, failed=False)
        return HookResult()  # outside the workspace, denied or gone: nothing to trace
    from .claude_code_edits import (
        audit_change,
        changed_ranges,
        clamp,
        original_text,
        store_versions,
        stored_text,
    )

    new_text = data.decode("utf-8", errors="replace")
    old_text = original_text(tool, tool_input, response, new_text)
    if old_text is None and not isinstance(response.get("structuredPatch"), list):
        # A Write that says neither what it replaced nor its patch: what it replaced is
        # the store's newest version, when the store has one (else a new file's lines).
        old_text = stored_text(ctx.root, sp.rel)
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
    from ..govern.tracecontext import carried_metadata

    recorder = Recorder(
        ctx.root,
        model_id=ctx.env.get("CTXNB_MODEL_ID") or ctx.settings["model_id"],
        # The prompt that led to the edit, and Claude Code's trace when it exports one.
        carried=carried_metadata(ctx.env, ctx.payload.get("prompt_id")),
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
        _breaker(ctx).record(breaker_tool, failed=False)
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
    feedback: list[dict[str, Any]] = []
    if ctx.settings.get("quality_commands"):
        # The quality loop of ctxnb's own write tools, in the same sandbox; a failing
        # check is a failed write for the circuit breaker, as it is for the engine.
        from ._claude_quality import quality_answer, quality_feedback

        feedback = quality_feedback(ctx, tool, sp.rel, intent_id)
    _breaker(ctx).record(breaker_tool, failed=bool(feedback))
    if feedback:
        reason, detail = quality_answer(sp.rel, feedback)
        context = "\n".join([*notes, detail])
        return _answer(
            {
                "decision": "block",
                "reason": _cap(reason),
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": _cap(context),
                },
            }
        )
    if notes:
        return _context_answer("PostToolUse", "\n".join(notes))
    return HookResult()


def _audit_refusal(ctx: _Context, tool: str, tool_input: Mapping[str, Any], code: str) -> None:
    """The audit line of a call the pre hook refused (only governed workspaces keep one)."""
    if not ctx.governed:
        return
    try:
        ctx.audit(tool, tool_input, success=False, error_code=code)
    except OSError:
        pass  # the refusal stands whether or not it could be logged


def _unrecorded_notice(ctx: _Context, tool: str) -> HookResult:
    """An edit in a project with no ``.orchestration/`` is not recorded; say so, once per
    session, to the user (``systemMessage``) and to the model, rather than stay silent."""
    marker = ctx.state_dir / "unrecorded-noticed" / _safe_name(ctx.session_id or "no-session")
    if marker.exists():
        return HookResult()
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # without the marker the notice repeats; the edit is unrecorded either way
    text = (
        f"ctxnb: {ctx.root} is not governed (no .orchestration/), so this {tool} and the "
        "edits after it are not recorded: no stored version, no Agent Trace record. Run "
        "`ctxnb init` there to record them."
    )
    return _answer(
        {
            "systemMessage": _cap(text),
            "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": _cap(text)},
        }
    )


def _safe_name(session_id: str) -> str:
    # A session id names a file in the state directory: nothing in it may climb out.
    return re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:128] or "_"


# -- PostCompact ------------------------------------------------------------------------------
def _post_compact(ctx: _Context) -> HookResult:
    from ._claude_compact import post_compact  # only a compaction opens the store for it

    return post_compact(ctx)


# -- SessionEnd -------------------------------------------------------------------------------
def _session_end(ctx: _Context) -> HookResult:
    """Release the ended session's lease on its intent's scope, and only that one.

    Claude Code's hook processes end after each call, so nothing else tells ctxnb the
    session is over: without this its lease keeps the scope for ``lease_minutes``. The
    intent it selected is kept: a resumed session (same ``session_id``) takes the lease
    again on its next write, refused if another session took the scope meanwhile.
    """
    if ctx.session_id is None:
        raise PayloadError(
            "a SessionEnd payload needs 'session_id' (a non-empty string): the session "
            "whose lease to release"
        )
    if not ctx.governed:
        return HookResult()  # no intents, no leases: nothing to release or record
    from ..govern.partition import release_session_lease

    reason = ctx.payload.get("reason")
    lease = release_session_lease(ctx.root, ctx.session_id)
    ctx.audit(
        "SessionEnd",
        {
            "reason": reason if isinstance(reason, str) else None,
            "released": None if lease is None else lease.intent_id,
            "scope": [] if lease is None else list(lease.scope),
        },
    )
    return HookResult()


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
        try:
            claim_scope(ctx.root, ctx.state_dir, ctx.session_id, intent)
        except PolicyError as err:
            kept = f"the active intent stays {current}" if current else "no intent is selected"
            return _context_answer(
                "UserPromptSubmit",
                f"ctxnb: {intent.id} was not selected ({kept}): {err.message}. "
                f"{err.required_action}",
            )
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


def _transcript_url(path: Any) -> str | None:
    """The ``file://`` URI of Claude Code's transcript (``transcript_path``), if absolute."""
    if isinstance(path, str) and os.path.isabs(path):
        return Path(path).as_uri()
    return None
