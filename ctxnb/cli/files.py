"""``ctxnb files``, ``open``, ``patch`` and ``stats``: the agent's file tools at a prompt.

Each command is the tool an agent calls, run through the same front door
(:meth:`~ctxnb.workspace.Workspace.tools` and its ``dispatch``): ``files`` is
``list_files`` (denied files are absent), ``open`` is ``read_file`` (content redacted
as the model gets it, with the sha256 an edit must name), ``patch`` is ``apply_patch``
(a unified diff on stdin; in a governed workspace under ``--intent``). Every call is
audited under its session (``--session``, default ``cli``) and caller ``cli``, so what
a person does here is governed, versioned and counted like an agent's call. ``stats``
sums the audit log per session (:mod:`ctxnb.tools.usage`). With a ``[budget]`` set,
``open`` and ``patch`` end their first line with what is left of it.

A refusal is printed as one line with its error code and what to do, and the command
exits 1; nothing was written.
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

from ..errors import CtxnbError
from .app import _out, _read_workspace, _workspace, arg, command, recorded_root, workspace_path

if TYPE_CHECKING:
    import argparse

__all__: list[str] = []

_SESSION_HELP = "the session the call is recorded in (default: cli)"


class _Refused(CtxnbError):
    """A tool call the policy (or the tool) refused, as ``dispatch`` reported it."""


def _run(
    ws: Any, session_id: str, tool: str, args: dict[str, Any], *, intent: str | None
) -> tuple[Any, dict[str, int] | None]:
    """One dispatched call in ``session_id``: its result and what is left of the session's
    ``[budget]`` (None: no limit), or :class:`_Refused` with the error code, message and
    required action on one line."""
    session = ws.session(session_id)
    try:
        tools = ws.tools(session, caller="cli")
        if intent is not None:
            if getattr(tools, "engine", None) is None:
                raise _Refused(
                    f"--intent {intent}: {ws.root} is not governed (no .orchestration/), so "
                    "there are no intents; drop --intent, or run `ctxnb init-governance`"
                )
            _check(tools.dispatch("select_active_intent", {"intent_id": intent}))
        answer = tools.dispatch(tool, args)
        return _check(answer, tool=tool, path=args.get("path")), answer.get("budget_remaining")
    finally:
        session.save()
        session.close()


def _check(answer: dict[str, Any], *, tool: str = "", path: Any = None) -> Any:
    if answer.get("ok"):
        return answer["result"]
    action = str(answer.get("required_action") or "")
    code = answer.get("error_code")
    message = " ".join(str(answer.get("message", "")).split())
    # The library's advice names the agent's tools; at a prompt they are options.
    if code == "READ_BEFORE_WRITE" and tool == "apply_patch":
        # The message ends with the library's fix (`; read it first …`): the command
        # line's replaces it rather than standing beside it.
        cause, sep, _ = message.partition("; read it first")
        message = cause if sep else message
        action = f"run `ctxnb open {path}` and pass its sha256 with --sha256"
    elif code in ("NO_ACTIVE_INTENT", "INVALID_INTENT"):
        known = re.search(r"Active intents: [^.]*", action)
        action = "pass --intent with an active intent's id" + (
            f"; {known.group(0)}" if known else ""
        )
    fix = f" ({action.rstrip('.')})" if action else ""
    raise _Refused(f"{answer.get('error_code')}: {message}{fix}")


def _left(remaining: dict[str, int] | None) -> str:
    """What is left of the session's budget, for the end of a result line."""
    if not remaining:
        return ""
    return "  budget left: " + ", ".join(f"{k} {v}" for k, v in remaining.items())


@command("files", help="list the files an agent may see (the governed list_files)")
@arg("path", nargs="?", default=None, help="only files under this directory or this one file")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--session", default="cli", help=_SESSION_HELP)
@arg("--json", action="store_true", help="print a JSON list")
def _cmd_files(ns: argparse.Namespace) -> int:
    """Files the path policy hides (``.env``, keys, ignored files) are absent, as they are
    from the agent's listing. A folder that is not a workspace is refused, and nothing is
    created there: a listing is a read."""
    with _read_workspace(ns.workspace) as ws:
        args: dict[str, Any] = {}
        if ns.path is not None:
            # A path outside the workspace is refused there, naming both.
            rel = workspace_path(ws, ns.path).strip("/")
            args["globs"] = [f"/{rel}", f"/{rel}/**"] if rel not in ("", ".") else None
        files, _ = _run(ws, ns.session, "list_files", args, intent=None)
    if ns.json:
        _out(json.dumps(files, ensure_ascii=False))
    else:
        for name in files:
            _out(name)
    return 0


@command("open", help="print a file as an agent reads it: redacted, with its sha256 and version")
@arg("file", help="path of the file, relative to the workspace or absolute")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--session", default="cli", help=_SESSION_HELP)
@arg("--json", action="store_true", help="print the whole read result as JSON")
def _cmd_open(ns: argparse.Namespace) -> int:
    """The governed read_file: the first line names the file, its sha256 (pass it to
    ``ctxnb patch --sha256``) and the stored version it was read as; then the content as
    the model gets it (secrets replaced by markers, a large file as excerpt and outline)."""
    with _workspace(ns.workspace) as ws:
        rel = workspace_path(ws, ns.file)
        res, left = _run(ws, ns.session, "read_file", {"path": rel}, intent=None)
    if ns.json:
        _out(json.dumps({**res, **({"budget_remaining": left} if left else {})}))
        return 0
    _out(f"==> {res['path']}  sha256 {res['sha256']}  version {res['version_id']}{_left(left)}")
    if res.get("content") is not None:
        sys.stdout.write(res["content"])
        if res["content"] and not res["content"].endswith("\n"):
            sys.stdout.write("\n")
    if res.get("note"):
        _out(f"[{res['note']}]")
    return 0


@command("patch", help="apply a unified diff from stdin to one file (the governed apply_patch)")
@arg("file", help="path of the file, relative to the workspace or absolute")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--session", default="cli", help=_SESSION_HELP)
@arg("--intent", default=None, help="governed workspaces: the intent the change is made under")
@arg("--sha256", default=None, help="the sha256 `ctxnb open` printed: the copy the diff is from")
def _cmd_patch(ns: argparse.Namespace) -> int:
    """The diff is checked like an agent's: path policy, intent and scope, the file's
    sha256 (a file changed since it was opened is refused), every hunk. Nothing is
    written unless the whole diff applies."""
    diff = sys.stdin.read()
    if not diff.strip():
        raise _Refused(
            "no diff on stdin; pipe one in: ctxnb patch FILE --sha256 HASH < change.diff"
        )
    with _workspace(ns.workspace) as ws:
        rel = workspace_path(ws, ns.file)
        args = {"path": rel, "unified_diff": diff, "expected_sha256": ns.sha256}
        res, left = _run(ws, ns.session, "apply_patch", args, intent=ns.intent)
    _out(
        f"{res['message']} (sha256 {res.get('sha256')}, version {res.get('version_id')})"
        f"{_left(left)}"
    )
    for item in res.get("feedback") or ():
        _out(f"  {item.get('error_code', 'feedback')}: {item.get('message', item)}")
    return 0


@command("stats", help="per session: reads, writes, tokens read and refusals, from the audit log")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--session", default=None, help="only this session (default: every session)")
@arg("--json", action="store_true", help="print a JSON object per session id")
def _cmd_stats(ns: argparse.Namespace) -> int:
    """Counts every door's calls (API, MCP, this command line, Claude Code's hook) that
    the workspace's ``.ctxnb/audit.jsonl`` holds."""
    from ..errors import NotFoundError
    from ..tools.audit import AuditLog
    from ..tools.usage import usage_by_session

    # The log alone: no store is opened, so no Parquet reader is loaded.
    root = recorded_root(ns.workspace)
    usage = usage_by_session(AuditLog(f"{root}/.ctxnb/audit.jsonl").records())
    if ns.session is not None:
        if ns.session not in usage:
            known = ", ".join(sorted(usage)) or "none"
            raise NotFoundError(
                f"session {ns.session!r} has no calls in the audit log; sessions with "
                f"calls: {known}"
            )
        usage = {ns.session: usage[ns.session]}
    if ns.json:
        _out(json.dumps({sid: u.to_dict() for sid, u in usage.items()}, ensure_ascii=False))
        return 0
    if not usage:
        _out("no tool calls in the audit log yet")
        return 0
    _out(f"{'session':<24} {'calls':>6} {'reads':>6} {'writes':>6} {'tokens read':>11}  refusals")
    for sid, u in usage.items():
        refused = ", ".join(f"{c} {n}" for c, n in sorted(u.refusals.items())) or "-"
        _out(f"{sid:<24} {u.calls:>6} {u.reads:>6} {u.writes:>6} {u.read_tokens:>11}  {refused}")
    return 0
