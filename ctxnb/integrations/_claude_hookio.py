"""One Claude Code hook call: its payload read, its answer written.

What every event handler of :mod:`ctxnb.integrations.claude_code` shares: the
:class:`HookResult` a hook process prints, the payload's context (workspace, settings,
path policy and intents, loaded on demand), the answers Claude Code understands, capped
at its output limit, and the launcher ctxnb's own processes start with. Imported on
every hook call, so it holds nothing heavy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..access.pathrules import map_mount_prefix
from ..errors import CtxnbError, PolicyError
from ..govern.breaker import BreakerState
from ..govern.core import IntentLike
from ..govern.state import (
    find_workspace,
    load_intents_cached,
    load_settings,
    read_session_intent,
    state_dir,
)

if TYPE_CHECKING:
    from ..access.fdio import PathPolicy
    from ..access.protected import ProtectedSet


MAX_OUTPUT_CHARS = 10_000
"""Claude Code caps strings in a hook's output at this many characters."""


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


PROJECT_DIR_ENV = "CLAUDE_PROJECT_DIR"
"""Claude Code names the project it was started in to every hook in this variable."""


def hook_workspace(cwd: str, env: Mapping[str, str]) -> tuple[Path, bool, str | None]:
    """The workspace of a hook call: ``(root, governed, escaped)``.

    The root comes from ``$CLAUDE_PROJECT_DIR`` (the nearest directory holding
    ``.orchestration/`` at or above it) when Claude Code sets it, else from the
    payload's ``cwd``. A ``cwd`` outside that root (a folder added with ``--add-dir``,
    a shell that changed directory) is governed by the nearest governed root above it;
    when it has none and the project is governed, ``escaped`` says why the call is
    refused: the call would otherwise go ungoverned without anyone choosing so.

    Example:
        >>> import pathlib, tempfile
        >>> proj, other = (pathlib.Path(tempfile.mkdtemp()) for _ in range(2))
        >>> (proj / ".orchestration").mkdir()
        >>> hook_workspace(str(proj), {"CLAUDE_PROJECT_DIR": str(proj)})[:2] == (proj, True)
        True
        >>> hook_workspace(str(other), {"CLAUDE_PROJECT_DIR": str(proj)})[2] is not None
        True
    """
    root, governed = find_workspace(cwd)
    project = env.get(PROJECT_DIR_ENV)
    if governed or not project or not os.path.isabs(project) or not os.path.isdir(project):
        # A governed cwd is governed by its own nearest root, inside the project or not.
        return root, governed, None
    proot, pgoverned = find_workspace(project)
    if _within(cwd, proot):
        return proot, pgoverned, None
    if not pgoverned:
        return root, False, None  # nothing governed either way: only the path policy
    return (
        proot,
        True,
        f"ctxnb governs the project {proot}, and this call runs in {cwd}, which lies "
        "outside it and in no governed workspace: ctxnb cannot apply its policies there, "
        "so the call is refused.",
    )


def _within(path: str, root: Path) -> bool:
    # As given and with links resolved: the project may be named through a symlink.
    for p, r in (
        (os.path.abspath(path), os.path.abspath(root)),
        (os.path.realpath(path), os.path.realpath(root)),
    ):
        if p == r or p.startswith(r.rstrip("/") + "/"):
            return True
    return False


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
        self.root, self.governed, self.escaped = hook_workspace(cwd, env)
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
            from ..access.ownenv import environment_globs

            s = self.settings
            self._policy = _pathpolicy_module().PathPolicy(
                [self.root],
                allow=s["allow"],
                deny=s["deny"],
                # The hook's own environment, when it lies in the workspace, is governance.
                protect=[*s["protect"], *environment_globs(self.root)],
                # Derived on the first write judged (a Read never pays), from the cache.
                protected=self._protected_set,
                max_path_bytes=s["max_path_bytes"],
            )
        return self._policy

    def _protected_set(self) -> ProtectedSet:
        from ..access.protected import protected_set

        return protected_set(
            self.root,
            env=self.env,
            cwd=self.cwd,
            state_dir=self.state_dir if self.governed else None,
        )

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

    def audit(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        success: bool = True,
        error_code: str | None = None,
        **extra: Any,
    ) -> None:
        """Append this call's audit line (``caller`` claude-code, this session and its
        intent) to the workspace's audit log, as the file tools write one per call."""
        from ..tools.audit import AuditLog, audit_record

        AuditLog(self.root / ".ctxnb" / "audit.jsonl").append(
            audit_record(
                caller="claude-code",
                session_id=self.session_id,
                tool=tool,
                args=dict(args),
                duration_ms=0.0,
                success=success,
                error_code=error_code,
                intent_id=self.session_intent(),
                **extra,
            )
        )


def _breaker(ctx: _Context) -> BreakerState:
    # The engine's own file: one breaker for every way an agent reaches the workspace.
    return BreakerState(ctx.root / ".ctxnb" / "breaker.json")


# -- answers ----------------------------------------------------------------------------------
def _cap(text: str) -> str:
    """What a hook tells Claude Code or its user, redacted (a refusal names a file, and a
    name can hold a secret) and capped. Only text goes through here, never the
    ``updatedInput`` a hook hands back to run."""
    from ..redaction.redactor import (
        redact_text,  # loaded only to answer: an allowed call says nothing
    )

    text = redact_text(text)
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
