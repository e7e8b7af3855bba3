"""Where governance keeps the state of sessions run by other programs, outside the workspace.

A Claude Code session (or ``ctxnb sandbox exec``) is a new process on every tool call:
its selected intent, and the validated forms of the workspace's settings and intents,
live in the user's state directory (:func:`state_dir`), where the agent's file tools
cannot write, and are read here:

- :func:`find_workspace`: the governed workspace a directory belongs to;
- :func:`load_settings`, :func:`load_intents_cached`: the settings and intents a hook
  needs, validated by the full loaders only when their file changed (the validated
  form is cached as JSON, keyed by the file's modification time and size);
- :func:`read_session_intent`, :func:`write_session_intent`, :func:`select_intent`:
  a session's intent;
- :func:`write_receipt`, :func:`take_receipt`: the receipt ``ctxnb sandbox exec``
  leaves for each Claude Code Bash call it ran confined, which the post-tool-use hook
  checks (a Bash call without one ran outside the sandbox).

This module imports nothing heavy (no pydantic, pyarrow or pandas) unless a file
changed: a hook process imports it on every tool call.

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> find_workspace(root) == (root, False)
    True
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._util.defaults import (
    DEFAULT_BREAKER_THRESHOLD,
    DEFAULT_COMMAND_TIMEOUT,
    UNKNOWN_COMMAND_DEFAULT,
)
from .._util.jsoncache import file_key as _file_key
from .._util.jsoncache import read_cache as _read_cache
from .._util.jsoncache import write_json_atomic as _write_json_atomic
from ..access.pathrules import DEFAULT_DENY, GOVERNANCE, MAX_PATH_BYTES
from ..errors import ConfigError
from ..hashing import sha256_hex
from .core import IntentLike, IntentView, get_intent

__all__ = [
    "DEFAULT_SETTINGS",
    "find_workspace",
    "claim_scope",
    "intent_context_of",
    "intents_file",
    "load_intents_cached",
    "load_settings",
    "read_session_intent",
    "refresh_lease",
    "select_intent",
    "state_dir",
    "take_receipt",
    "write_receipt",
    "write_session_intent",
]

# The defaults of ctxnb.config for workspaces without settings, from the same constants.
DEFAULT_SETTINGS: dict[str, Any] = {
    "deny": list(DEFAULT_DENY),
    "allow": None,
    "max_path_bytes": MAX_PATH_BYTES,
    "unknown_command": UNKNOWN_COMMAND_DEFAULT,
    "safe_commands": [],
    "model_id": None,
    "breaker_threshold": DEFAULT_BREAKER_THRESHOLD,
    # The quality loop the post-tool-use hook runs after a Claude Code edit.
    "quality_commands": [],
    "command_timeout": DEFAULT_COMMAND_TIMEOUT,
    "sensitive": [],
    "overlap": "refuse",
    "overlap_strict": False,
    "lease_minutes": 30.0,
    # Without a configuration every [sandbox] key takes its default in
    # Sandbox.from_settings (defined once there, not copied here).
    "sandbox": {},
    # [budget]: only the limits that are set (none: no limit, and nothing more loaded).
    "budget": {},
}
_SETTINGS_FORM = 3
"""Bumped whenever the settings a hook caches gain or change a key."""
_ORCHESTRATION = ".orchestration"
_SAFE_SESSION_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


# -- the workspace ---------------------------------------------------------------------------------
def find_workspace(cwd: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The workspace of a hook call and whether it is governed.

    Walks up from ``cwd`` to the first directory holding ``.orchestration/``; without
    one, the workspace is ``cwd`` itself and it is not governed.

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / ".orchestration").mkdir(); (root / "src").mkdir()
        >>> find_workspace(root / "src") == (root, True)
        True
    """
    start = Path(os.path.abspath(os.fspath(cwd)))
    for d in (start, *start.parents):
        if (d / _ORCHESTRATION).is_dir():
            return d, True
    return start, False


# -- where the hooks keep their state ---------------------------------------------------------
def state_dir(root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
    """Where the hooks keep a workspace's session state and caches: outside the workspace.

    ``$CTXNB_STATE_DIR``, else ``$XDG_STATE_HOME/ctxnb``, else ``~/.local/state/ctxnb``,
    then ``hook-state/<hash of the workspace's real path>``. The agent's file tools only
    reach the workspace, so it cannot select its own intent or replace the cached
    settings by writing a file.

    Raises:
        ConfigError: the state directory would lie inside the workspace.

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> d = state_dir(root, {"CTXNB_STATE_DIR": "/var/tmp/ctxnb-doc"})
        >>> d.parent == pathlib.Path("/var/tmp/ctxnb-doc/hook-state"), root in d.parents
        (True, False)
    """
    env = os.environ if env is None else env
    base = env.get("CTXNB_STATE_DIR")
    if not base:
        xdg = env.get("XDG_STATE_HOME")
        home = env.get("HOME") or os.path.expanduser("~")
        base = os.path.join(xdg, "ctxnb") if xdg else os.path.join(home, ".local", "state", "ctxnb")
    real_root = os.path.realpath(root)
    key = sha256_hex(real_root.encode("utf-8", "surrogateescape"))[:24]
    out = Path(os.path.realpath(base)) / "hook-state" / key
    if os.path.commonpath([real_root, str(out)]) == real_root:
        raise ConfigError(
            f"the hook state directory {out} lies inside the workspace {real_root}, where the "
            "agent could forge it; set CTXNB_STATE_DIR (or XDG_STATE_HOME) to a directory "
            "outside the workspace"
        )
    return out


# -- settings and intents, cached -------------------------------------------------------------
def load_settings(root: Path, state_dir: Path | None) -> dict[str, Any]:
    """The settings a hook needs, from ctxnb.toml or [tool.ctxnb], validated on change."""
    toml_path = root / "ctxnb.toml"
    source = toml_path if toml_path.is_file() else root / "pyproject.toml"
    if _file_key(source) is None:
        return {**DEFAULT_SETTINGS, "protect": list(GOVERNANCE), "mounts": []}
    # The form of the cached value is part of its key: a cache written before a key was
    # added (quality_commands) is read again from the file, never taken as "none".
    key = [_SETTINGS_FORM, _file_key(source)]
    cache = state_dir / "cache" / "settings.json" if state_dir is not None else None
    if cache is not None:
        cached = _read_cache(cache, key)
        if isinstance(cached, dict):
            return cached
    value = _settings_from_file(root, source)
    if cache is not None:
        _write_json_atomic(cache, {"key": key, "value": value})
    return value


def _settings_from_file(root: Path, source: Path) -> dict[str, Any]:
    if source.name == "pyproject.toml":
        import tomllib

        try:
            with source.open("rb") as fh:
                has_section = "ctxnb" in tomllib.load(fh).get("tool", {})
        except tomllib.TOMLDecodeError:
            has_section = True  # let load_config name the error
        if not has_section:
            return {**DEFAULT_SETTINGS, "protect": list(GOVERNANCE), "mounts": []}
    from dataclasses import asdict

    from ..config import load_config  # validates every key; only when the file changed

    cfg = load_config(root)
    protect = [*GOVERNANCE, *(["/pyproject.toml"] if source.name == "pyproject.toml" else [])]
    return {
        "protect": protect,
        "mounts": [[m.agent_prefix, m.canonical_prefix] for m in cfg.mounts],
        # The files under a mount with its own filesystem id are stored under that id.
        "filesystems": [
            [m.canonical_prefix, m.filesystem_id] for m in cfg.mounts if m.filesystem_id
        ],
        "deny": list(cfg.policy.deny),
        "allow": None if cfg.policy.allow is None else list(cfg.policy.allow),
        "max_path_bytes": cfg.policy.max_path_bytes,
        "unknown_command": cfg.governance.unknown_command,
        "safe_commands": list(cfg.governance.safe_commands),
        "model_id": cfg.governance.model_id,
        "breaker_threshold": cfg.governance.breaker_threshold,
        "quality_commands": list(cfg.governance.quality_commands),
        "command_timeout": cfg.governance.command_timeout,
        "sensitive": list(cfg.policy.sensitive),
        "overlap": cfg.governance.overlap,
        "overlap_strict": cfg.governance.overlap_strict,
        "lease_minutes": cfg.governance.lease_minutes,
        "sandbox": asdict(cfg.sandbox),
        "compact_after": cfg.index.compact_after,
        "budget": {k: v for k, v in asdict(cfg.budget).items() if v is not None},
    }


def load_intents_cached(root: Path, state_dir: Path) -> dict[str, IntentLike]:
    """The intents by id, in file order; validated by ``load_intents`` when the file changed.

    Raises:
        ConfigError: the intents file is missing or invalid (the message names the line).
    """
    path = root / _ORCHESTRATION / "active_intents.yaml"
    key = _file_key(path)
    if key is None:
        raise ConfigError(
            f"{path}: no intents file. Create one with `ctxnb init-governance {root}`."
        )
    cache = state_dir / "cache" / "intents.json"
    items = _read_cache(cache, key)
    if not isinstance(items, list):
        from .intents import load_intents  # pydantic: paid once per change of the file

        items = [
            {
                "id": i.id,
                "name": i.name,
                "status": i.status,
                "owned_scope": list(i.owned_scope),
                "constraints": list(i.constraints),
                "acceptance_criteria": list(i.acceptance_criteria),
            }
            for i in load_intents(path).active_intents
        ]
        _write_json_atomic(cache, {"key": key, "value": items})
    return {d["id"]: IntentView(**d) for d in items}


def intents_file(root: Path) -> str:
    return str(root / _ORCHESTRATION / "active_intents.yaml")


_HOW_TO_SELECT = "Name one of the active intent ids in your next prompt."


# -- session state ---------------------------------------------------------------------------
def _session_file(state_dir: Path, session_id: str) -> Path:
    # Session ids are UUIDs in practice; anything else is hashed into a safe file name.
    if _SAFE_SESSION_ID.fullmatch(session_id):
        name = session_id
    else:
        name = "sid-" + sha256_hex(session_id.encode("utf-8"))[:32]
    return state_dir / f"{name}.json"


def read_session_intent(state_dir: Path, session_id: str) -> str | None:
    """The intent id recorded for a Claude Code session, or None."""
    try:
        with open(_session_file(state_dir, session_id), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    value = data.get("intent_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def write_session_intent(state_dir: Path, session_id: str, intent_id: str, *, source: str) -> Path:
    """Record ``intent_id`` as the active intent of a session (atomically)."""
    from datetime import UTC, datetime

    path = _session_file(state_dir, session_id)
    _write_json_atomic(
        path,
        {
            "session_id": session_id,
            "intent_id": intent_id,
            "source": source,
            "selected_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    return path


def select_intent(root: str | os.PathLike[str], intent_id: str, session_id: str) -> str:
    """Make ``intent_id`` the active intent of a Claude Code session; returns its context.

    Args:
        root: the workspace, or any directory inside it.
        intent_id: an active intent of ``.orchestration/active_intents.yaml``.
        session_id: Claude Code's ``session_id``.

    Raises:
        ConfigError: the workspace is not governed or its intents file is invalid.
        PolicyError: ``INVALID_INTENT``.

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb.govern import init_governance
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = init_governance(root)
        >>> _ = (root / ".orchestration" / "active_intents.yaml").write_text(
        ...     "active_intents:\\n  - id: INT-1\\n    name: Docs\\n    owned_scope: [docs/**]\\n")
        >>> select_intent(root, "INT-1", "s1").splitlines()[1]
        'id: INT-1'
    """
    ws, governed = find_workspace(root)
    if not governed:
        raise ConfigError(
            f"{ws} is not governed (no {_ORCHESTRATION}/ here or above); "
            f"run `ctxnb init-governance {ws}` first"
        )
    states = state_dir(ws, os.environ)
    intents = load_intents_cached(ws, states)
    intent = get_intent(intents, intent_id, where=intents_file(ws), how_to_select=_HOW_TO_SELECT)
    claim_scope(ws, states, session_id, intent)
    write_session_intent(states, session_id, intent.id, source="select-intent")
    return intent_context_of(ws, intent)


def claim_scope(root: Path, states: Path, session_id: str, intent: IntentLike) -> None:
    """Take a Claude Code session's lease on its intent's scope (:mod:`ctxnb.govern.partition`).

    Raises:
        PolicyError: ``SCOPE_OVERLAP`` when another live session holds an overlapping
            scope (a hook has no one to ask: ``overlap = "ask"`` refuses too, saying so).
    """
    from .partition import check_partition, indexed_files_at, lease_lock, write_lease

    settings = load_settings(root, states)
    with lease_lock(root):  # the check and the write are one step (see partition)
        err = (
            None
            if settings.get("overlap") == "allow"
            else check_partition(
                root,
                session_id,
                intent.id,
                list(intent.owned_scope),
                files=lambda: indexed_files_at(root),
                minutes=float(settings.get("lease_minutes", 30.0)),
                strict=bool(settings.get("overlap_strict", False)),
            )
        )
        if err is None:
            # Bound to no process: the hook process ends now, the Claude Code session
            # goes on; the lease lives by its age (lease_minutes).
            write_lease(root, session_id, intent.id, list(intent.owned_scope), bound=False)
            return
    if settings.get("overlap") == "ask":
        err.required_action += (
            ' ([governance] overlap = "ask": a hook has no one to ask, so it refuses.)'
        )
    raise err


def refresh_lease(root: Path, states: Path, session_id: str, intent: IntentLike) -> None:
    """Keep a Claude Code session's lease live on each of its tool calls; when it lapsed,
    take it again (refused if another session took an overlapping scope meanwhile)."""
    from .partition import lease_age

    age = lease_age(root, session_id)
    if age is not None and age < 30:
        return
    claim_scope(root, states, session_id, intent)


# -- receipts of confined runs ---------------------------------------------------------------
RECEIPT_TTL = 24 * 3600
"""Seconds a receipt nobody took is kept (a Bash call whose post-tool-use hook never ran:
Claude Code reports a failed command to another event)."""


def _receipt_file(state_dir: Path, session_id: str | None, tool_use_id: str) -> Path:
    # Both ids come from Claude Code's payload: hashed, so neither can name another path.
    sid = sha256_hex((session_id or "").encode("utf-8"))[:24]
    tid = sha256_hex(tool_use_id.encode("utf-8"))[:32]
    return state_dir / "receipts" / sid / f"{tid}.json"


def write_receipt(state_dir: Path, session_id: str | None, tool_use_id: str, *, kind: str) -> Path:
    """Record that Claude Code's Bash call ``tool_use_id`` ran ctxnb's rewritten command.

    Written by ``ctxnb sandbox exec`` (and ``sandbox commit``/``discard``) before the
    command runs, in the state directory, which lies outside the workspace and is not
    mounted in the sandbox: a command cannot leave one for itself from inside.

    Example:
        >>> import pathlib, tempfile
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = write_receipt(d, "s1", "toolu_1", kind="exec")
        >>> take_receipt(d, "s1", "toolu_1")["kind"], take_receipt(d, "s1", "toolu_1")
        ('exec', None)
    """
    import time

    path = _receipt_file(state_dir, session_id, tool_use_id)
    record = {
        "tool_use_id": tool_use_id,
        "session_id": session_id,
        "kind": kind,
        "pid": os.getpid(),
        "time": time.time(),
    }
    _write_json_atomic(path, record)
    return path


def take_receipt(
    state_dir: Path, session_id: str | None, tool_use_id: str
) -> dict[str, Any] | None:
    """The receipt of a Bash call, removed as it is read (each is taken once); None when
    ``sandbox exec`` left none for it. Receipts of the same session older than
    :data:`RECEIPT_TTL` are removed on the way."""
    import time

    path = _receipt_file(state_dir, session_id, tool_use_id)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = None
    found = (
        data
        if isinstance(data, dict)
        and data.get("tool_use_id") == tool_use_id
        and data.get("session_id") == session_id
        else None
    )
    try:
        os.unlink(path)
    except OSError:
        pass
    cutoff = time.time() - RECEIPT_TTL
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
    except OSError:
        pass
    return found


def intent_context_of(root: Path, intent: IntentLike) -> str:
    from .intents import Intent, intent_context  # only when an intent is selected
    from .ledger import TraceLedger
    from .lessons import lessons_for, read_lessons

    ledger = TraceLedger(root / _ORCHESTRATION / "agent_trace.jsonl")
    recent = list(ledger.records(intent_id=intent.id))[-10:]
    lessons = lessons_for(intent, read_lessons(root / _ORCHESTRATION / "AGENT.md"))
    fields = ("id", "name", "status", "owned_scope", "constraints", "acceptance_criteria")
    full = Intent(**{k: getattr(intent, k) for k in fields})
    return intent_context(full, recent, lessons=lessons)
