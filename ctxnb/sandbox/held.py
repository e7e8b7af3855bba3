"""Held overlays: a command's destructive changes kept, uncommitted, until a human decides.

A command's destructive changes are shown to an approver with their diff before anything
is committed (:mod:`ctxnb.sandbox.commit`). Where nobody can be asked while the command
runs — Claude Code's Bash, which runs as a tool call, and Claude Code asks its user only
*before* a tool call — the overlay is **held** instead of discarded: its state directory
is renamed ``.ctxnb/overlay/held-ID`` (out of every command's and file tool's reach) with
``hold.json`` beside the upper layer: the command, the intent, the session, the diff and
its SHA-256. Nothing reaches the workspace.

The agent's next call, ``ctxnb sandbox commit ID``, is shown to the user by the
pre-tool-use hook *with that diff*; a yes runs the commit on the host, which reads the
upper layer again and commits only when the diff it computes now is the one the user
saw (same hash) and no file changed since the command started (the commit's conflict
check). A no, ``ctxnb sandbox discard ID``, or :data:`HOLD_TTL` seconds, and the overlay
is removed: nothing happened.

Example:
    >>> import tempfile, pathlib
    >>> from ctxnb.sandbox import Sandbox
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> (ws / "src").mkdir(); _ = (ws / "src" / "a.txt").write_text("keep\\n")
    >>> r = Sandbox(ws, owned_scope=["src/**"]).run("rm src/a.txt", shell=True)
    >>> h = hold_overlay(r, command="rm src/a.txt", intent_id="INT-1", session_id="s",
    ...                  diff="-keep\\n", reasons=["deletes src/a.txt"])
    >>> r.upper is None, load_hold(ws, h.id).command, (ws / "src" / "a.txt").exists()
    (True, 'rm src/a.txt', True)
    >>> [c.path for c in resume_hold(ws, load_hold(ws, h.id)).changes]
    ['src/a.txt']
    >>> discard_hold(ws, h.id), discard_hold(ws, h.id)
    (True, False)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NotFoundError
from .changes import classify
from .process import CommandResult
from .runner import HOLD_TTL, SandboxResult, _rmtree, overlay_dir
from .upper import walk_upper

__all__ = [
    "HOLD_TTL",
    "PROMPT_DIFF_CHARS",
    "Hold",
    "discard_hold",
    "hold_overlay",
    "load_hold",
    "resume_hold",
]


PROMPT_DIFF_CHARS = 6_000
"""The longest held diff Claude Code's permission prompt is asked with: a longer one gets
no question (the user would approve what they were not shown)."""

_ID = re.compile(r"[0-9a-f]{12}")
_RECORD = "hold.json"
_MAX_RECORD = 1 << 20


@dataclass
class Hold:
    """A command's overlay waiting for a human's decision.

    Attributes:
        id: 12 hexadecimal digits (``ctxnb sandbox commit ID``).
        command: the command, redacted.
        intent_id: the intent whose scope its changes are in.
        session_id: the session (Claude Code's ``session_id``) that ran it; only that
            session may commit it.
        diff: the diff of its changes (redacted, cut at the commit's limit), as shown.
        diff_sha256: SHA-256 of ``diff``: the commit goes ahead only when the diff it
            computes is this one.
        reasons: why the changes are destructive.
        started_ns: when the command started; a workspace file changed since is a
            conflict at the commit.
        created: when it was held (seconds since the epoch).
        cwd: the command's working directory.
        returncode: the command's exit status.
    """

    id: str
    command: str
    intent_id: str
    session_id: str | None
    diff: str
    diff_sha256: str
    reasons: list[str] = field(default_factory=list)
    started_ns: int = 0
    created: float = 0.0
    cwd: str = ""
    returncode: int = 0

    @property
    def expires(self) -> float:
        return self.created + HOLD_TTL


def diff_sha256(diff: str) -> str:
    """The hash a held diff is known by."""
    return hashlib.sha256(diff.encode("utf-8")).hexdigest()


def _held_dir(root: str | os.PathLike[str], hold_id: str) -> Path:
    if not isinstance(hold_id, str) or not _ID.fullmatch(hold_id):
        raise NotFoundError(
            f"{hold_id!r} is not a held command's id (12 hexadecimal digits); use the id "
            "ctxnb printed when it held the command's changes"
        )
    return overlay_dir(root) / f"held-{hold_id}"


def hold_overlay(
    sres: SandboxResult,
    *,
    command: str,
    intent_id: str,
    session_id: str | None,
    diff: str,
    reasons: list[str],
    cwd: str = "",
) -> Hold:
    """Keep ``sres``'s overlay for a later decision (``sres`` no longer owns it: its
    :meth:`~SandboxResult.discard` does nothing)."""
    state = sres._state
    if state is None:
        raise NotFoundError("the overlay of this command was already discarded")
    hold = Hold(
        id=secrets.token_hex(6),
        command=command,
        intent_id=intent_id,
        session_id=session_id,
        diff=diff,
        diff_sha256=diff_sha256(diff),
        reasons=list(reasons),
        started_ns=sres.started_ns,
        created=time.time(),
        cwd=cwd,
        returncode=sres.result.returncode,
    )
    # The record first, inside the state directory, then one rename: a hold is whole or
    # it is not there.
    fd = os.open(state / _RECORD, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(asdict(hold), fh)
    os.rename(state, state.parent / f"held-{hold.id}")
    sres._state = sres.upper = None
    return hold


def load_hold(root: str | os.PathLike[str], hold_id: str) -> Hold:
    """The held overlay ``hold_id`` of the workspace ``root``.

    Raises:
        NotFoundError: not an id, no such hold (committed, discarded), or it expired
            (then it is removed).
    """
    d = _held_dir(root, hold_id)
    try:
        fd = os.open(d / _RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise NotFoundError(
            f"no held command {hold_id} in {root}: it was committed, discarded or "
            "expired; run the command again"
        ) from None
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(_MAX_RECORD)
    hold = _parse(raw, hold_id)
    if time.time() > hold.expires:
        discard_hold(root, hold_id)
        raise NotFoundError(
            f"the held command {hold_id} expired ({HOLD_TTL:.0f} s) and was discarded; "
            "run the command again"
        )
    return hold


_TYPES: dict[str, tuple[type, ...]] = {
    "command": (str,),
    "intent_id": (str,),
    "session_id": (str, type(None)),
    "diff": (str,),
    "diff_sha256": (str,),
    "reasons": (list,),
    "started_ns": (int,),
    "created": (int, float),
    "cwd": (str,),
    "returncode": (int,),
}


def _parse(raw: bytes, hold_id: str) -> Hold:
    """The record, checked field by field: one clear error for a damaged one."""
    try:
        data = json.loads(raw)
        fields = {k: data[k] for k in _TYPES}
    except (ValueError, TypeError, KeyError):
        fields = None
    if (
        fields is None
        or any(not isinstance(v, _TYPES[k]) or isinstance(v, bool) for k, v in fields.items())
        or not all(isinstance(r, str) for r in fields["reasons"])
    ):
        raise NotFoundError(
            f"the record of the held command {hold_id} is damaged; run `ctxnb sandbox "
            f"discard {hold_id}` and the command again"
        )
    return Hold(id=hold_id, **fields)  # the directory is the hold, whatever the record says


def resume_hold(
    root: str | os.PathLike[str],
    hold: Hold,
    *,
    keep: Callable[[str], str | None] | None = None,
) -> SandboxResult:
    """The held command's result, its changes read again from its upper layer and
    classified with ``keep`` (by default every workspace path may be committed); it owns
    the overlay again (commit it, or :meth:`~SandboxResult.discard` it)."""
    state = _held_dir(root, hold.id)
    upper = state / "upper"
    entries = walk_upper(upper)
    changes, dropped = classify(root, entries, keep=keep or (lambda rel: None))
    return SandboxResult(
        CommandResult(hold.returncode, "", ""),
        changes,
        dropped,
        started_ns=hold.started_ns,
        upper=upper,
        entries=entries,
        _state=state,
    )


def discard_hold(root: str | os.PathLike[str], hold_id: str) -> bool:
    """Remove the held overlay ``hold_id``; False when there was none."""
    d = _held_dir(root, hold_id)
    if not d.is_dir() or d.is_symlink():
        return False
    _rmtree(d)
    return True


def hold_info(hold: Hold) -> dict[str, Any]:
    """What the agent is told of a hold."""
    return {"hold_id": hold.id, "diff_sha256": hold.diff_sha256, "expires": hold.expires}
