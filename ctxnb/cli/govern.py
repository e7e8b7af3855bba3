"""The governance commands: ``ctxnb init``, ``ctxnb init-governance``, ``ctxnb trace``,
``ctxnb why``, ``ctxnb sandbox``.

``ctxnb sandbox exec`` is what a Claude Code Bash call runs, so this module imports
only the command-line framework; each command imports what it needs.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb.cli import main
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> main(["init-governance", str(root)])  # doctest: +ELLIPSIS
    created .../.orchestration/active_intents.yaml
    ...
    0
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .app import _out, _read_workspace, arg, command, workspace_path

__all__: list[str] = []


# The store is every version of every file the agent saw, secrets the path rules let
# through included: `git add -A` must not commit it.
_CTXNB_GITIGNORE = "# ctxnb's store and state: never committed (ctxnb init wrote this file)\n*\n"


@command(
    "init",
    help="set up a project: governance files, .ctxnb/.gitignore, Claude Code's hooks "
    "(--claude-code); prints the next steps",
)
@arg("path", nargs="?", default=None, help="project directory (default: current)")
@arg(
    "--claude-code",
    action="store_true",
    help="also add ctxnb's hooks to the project's .claude/settings.json",
)
def _cmd_init(ns: argparse.Namespace) -> int:
    """Set up a project for a governed agent, in one step: ``.orchestration/`` (intents with
    a commented example, the trace, the intent map, AGENT.md), ``.ctxnb/.gitignore`` (the
    store is never committed) and, with ``--claude-code``, Claude Code's hooks. Existing
    files are left as they are, so running it again is safe."""
    from ..govern.intents import init_governance

    root = os.path.abspath(ns.path or os.getcwd())
    if not os.path.isdir(root):
        from ..errors import NotFoundError

        raise NotFoundError(f"{root} is not a directory; create it first")
    created = [str(p) for p in init_governance(root)]
    store_dir = os.path.join(root, ".ctxnb")
    os.makedirs(store_dir, exist_ok=True)
    ignore = os.path.join(store_dir, ".gitignore")
    try:
        with open(ignore, "x", encoding="utf-8") as fh:
            fh.write(_CTXNB_GITIGNORE)
        created.append(ignore)
    except FileExistsError:
        pass
    for p in created:
        _out(f"created {p}")
    if ns.claude_code:
        from ..integrations.claude_code_install import install_settings

        path, changed = install_settings(root)
        _out(f"{'updated' if changed else 'unchanged'} {path} (Claude Code's hooks)")
    if not created and not ns.claude_code:
        _out(f"{root} is set up already; nothing created")
    intents = os.path.join(".orchestration", "active_intents.yaml")
    agent = (
        "start Claude Code here (`claude`) and name the intent in your prompt "
        '("... under INT-001"); every edit is checked and recorded'
        if ns.claude_code
        else "connect an agent: `ctxnb init --claude-code` for Claude Code, "
        "`ctxnb mcp serve` for MCP clients, `ctxnb acp serve` for ACP editors "
        "(docs/integrations.md)"
    )
    _out("next:")
    _out(f"  1. describe the work in {intents}: uncomment the example intent as it says")
    _out("  2. `ctxnb index`: store every file's first version, so any change can be undone")
    _out(f"  3. {agent}")
    return 0


@command("init-governance", help="create .orchestration/ (intents, trace, intent map, AGENT.md)")
@arg("path", nargs="?", default=None, help="workspace directory (default: current)")
def _cmd_init_governance(ns: argparse.Namespace) -> int:
    """Create the governance files; existing files are left as they are."""
    from ..govern.intents import init_governance

    root = os.path.abspath(ns.path or os.getcwd())
    if not os.path.isdir(root):
        from ..errors import NotFoundError

        raise NotFoundError(f"{root} is not a directory; create it first")
    created = init_governance(root)
    for p in created:
        _out(f"created {p}")
    if not created:
        _out(f"{os.path.join(root, '.orchestration')} already has every file; nothing created")
    else:
        _out(
            "next: add intents to .orchestration/active_intents.yaml; for Claude Code, "
            "run `ctxnb hook install`"
        )
    return 0


@command(
    "trace",
    help="check the Agent Trace ledger: its hash chain, and each record against its copy "
    "in the store's log (trace verify)",
)
@arg("action", choices=("verify",), help="verify: exit 0 if no line was forged, 1 if one was")
@arg("path", nargs="?", default=None, help="workspace directory (default: current)")
def _cmd_trace(ns: argparse.Namespace) -> int:
    """Check that no line of .orchestration/agent_trace.jsonl was edited, inserted,
    deleted or moved since ctxnb appended it, and that every record the store's log holds
    a copy of equals it (so an edit that recomputed the chain is caught too); name the
    first bad line, then every other one."""
    from ..govern.ledgercheck import check_ledger

    root = os.path.abspath(ns.path or os.getcwd())
    if not os.path.isdir(root):
        from ..errors import NotFoundError

        raise NotFoundError(f"{root} is not a directory; pass a workspace")
    ledger = os.path.join(root, ".orchestration", "agent_trace.jsonl")
    if not os.path.isfile(ledger):
        # Nothing to check is not "intact": an ungoverned tree (or a ledger someone
        # deleted) must not read as a chain that holds.
        sys.stderr.write(
            f"{ledger}: no ledger, so nothing to verify ({root} is not governed, or its "
            "ledger was removed); `ctxnb init` starts one\n"
        )
        return 1
    store_dir = os.path.join(root, ".ctxnb", "store")
    if os.path.isdir(store_dir):
        from ..govern.ledger import TraceLedger
        from ..govern.tracewal import restore

        # Records a crash or a power loss took from the ledger after their store
        # transaction committed them (or that someone deleted): put back, chained,
        # before the ledger is checked.
        restored = restore(store_dir, TraceLedger(ledger), durable=True)
        if restored:
            _out(
                f"{ledger}: restored {len(restored)} record(s) from the store's log "
                "(missing from the ledger: lost in a crash, or deleted)"
            )
    check = check_ledger(ledger)
    if check.ok:
        _out(f"{ledger}: {check.message}")
        return 0
    sys.stderr.write(f"{ledger}:{check.first_bad_line}: {check.message}\n")
    for n, message in check.problems:
        if (n, message) != (check.first_bad_line, check.message):
            sys.stderr.write(f"{ledger}:{n}: {message}\n")
    return 1


@command(
    "why",
    help="which trace record wrote each line of a file (or FILE:LINE): contributor, intent, "
    "tool, approval, session, turn and the context the model had",
)
@arg("file", metavar="FILE[:LINE]", help="a file, relative or absolute; :LINE for one line")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--json", action="store_true", help="print the answer as JSON")
@arg(
    "--context",
    action="store_true",
    help="also print the context each record's model had, rebuilt from the store",
)
def _cmd_why(ns: argparse.Namespace) -> int:
    """Lines are matched to records by content, so the answer survives edits and history
    rewrites (rebase, squash, amend, cherry-pick); a line no record wrote says so. A record
    changed outside ctxnb is marked TAMPERED, and the exit status is then 1."""
    file, line = ns.file, None
    head, sep, tail = file.rpartition(":")
    if sep and head and tail.isdigit() and not os.path.exists(file):
        file, line = head, int(tail)
    with _read_workspace(ns.workspace) as ws:
        result = ws.why(workspace_path(ws, file), line, context=True)
    # A line written by a record changed outside ctxnb: the answer is printed with the
    # record marked, and the status says it is not evidence.
    status = 1 if result.tampered else 0
    if ns.json:
        _out(result.to_json(context_text=ns.context))
        return status
    _out(str(result))
    if ns.context:
        for key, rec in result.records.items():
            if rec.context is not None:
                # Assembled text is redacted as it is built (ctxnb.context).
                _out(f"\n--- context of record {key} (session {rec.session_id}, turn {rec.turn})")
                _out(rec.context.to_text())
    return status


@command(
    "sandbox",
    help="run a command in ctxnb's sandbox, storing and tracing what it changes "
    "(the Claude Code hook rewrites Bash commands to this); commit or discard a command "
    "whose destructive changes are held for a human",
)
@arg(
    "action",
    choices=("exec", "commit", "discard"),
    help="exec: run ARGV confined; commit ID: commit the held changes ID (a human "
    "decides: Claude Code asks its user with the diff); discard ID: drop them",
)
@arg("-w", "--workspace", default=None, help="the workspace (default: the current directory's)")
@arg("--session", default=None, help="Claude Code's session_id (names the ctxnb session)")
@arg(
    "--intent",
    default=None,
    help="the intent whose scope is writable; without one nothing is writable",
)
@arg("--timeout", type=float, default=600.0, help="seconds before the command is stopped")
@arg(
    "--expect",
    default=None,
    metavar="SHA256",
    help="commit: the SHA-256 of the diff the human was shown; nothing is committed "
    "unless the diff now is that one (without it the diff is printed and a terminal asks)",
)
@arg(
    "--prompt-id",
    default=None,
    help="the Claude Code prompt the command serves, kept in its trace records",
)
@arg(
    "--receipt",
    default=None,
    metavar="TOOL_USE_ID",
    help="leave a receipt for Claude Code's Bash call TOOL_USE_ID before running (the "
    "post-tool-use hook checks that the call ran here, confined)",
)
@arg(
    "--state-dir",
    default=None,
    help="the hook state directory of the workspace (default: the one for this user)",
)
@arg(
    "argv",
    nargs="*",
    metavar="-- COMMAND | ID",
    help="exec: -- then the command and its arguments; commit, discard: the hold's id",
)
def _cmd_sandbox(ns: argparse.Namespace) -> int:
    """Exit status: the command's (128+N when signal N ended it), 1 when it cannot run
    or its changes were not committed (held, refused)."""
    argv = list(ns.argv)
    if ns.action != "exec":
        if len(argv) != 1:
            sys.stderr.write(f"ctxnb sandbox {ns.action}: error: usage: {ns.action} ID\n")
            return 2
        return _held(ns.action, argv[0], ns)
    if not argv:
        sys.stderr.write("ctxnb sandbox exec: error: usage: exec [options] -- COMMAND [ARG...]\n")
        return 2
    from ..govern.core import get_intent
    from ..govern.state import (
        find_workspace,
        intents_file,
        load_intents_cached,
        load_settings,
    )

    root, governed = find_workspace(ns.workspace or os.getcwd())
    cwd = os.getcwd()
    if not (cwd == str(root) or cwd.startswith(str(root) + os.sep)):
        cwd = str(root)
    states = _states(root, ns)
    _leave_receipt(states, ns, "exec")
    settings = load_settings(root, states if governed else None)
    if ns.intent is not None and governed:
        intent = get_intent(load_intents_cached(root, states), ns.intent, where=intents_file(root))
        return _exec_governed(root, intent.id, argv, cwd, ns)
    from ..redaction.redactor import redact
    from ..sandbox import Sandbox

    sb = Sandbox.from_settings(root, settings.get("sandbox") or {}, deny=settings["deny"])
    # No intent: nothing is in scope, so the whole overlay is discarded.
    sres = sb.run(argv, cwd=cwd, timeout=ns.timeout, redact=lambda s: redact(s).text)
    sres.discard()
    res = sres.result
    notes = sres.plan.notes if sres.plan is not None else []
    out: dict[str, Any] | None = {"notes": notes} if notes else None
    if sres.network:
        out = {**(out or {}), "network": sres.network}
    return _finish(res.stdout, res.stderr, res.returncode, res.timed_out, out)


def _states(root: Any, ns: Any) -> Any:
    """The workspace's hook state directory: ``--state-dir`` (the hook's own, named in
    the command it rewrote) or this user's; never one inside the workspace."""
    from pathlib import Path

    from ..errors import ConfigError
    from ..govern.state import state_dir

    if not ns.state_dir:
        return state_dir(root)
    given = Path(os.path.realpath(ns.state_dir))
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, str(given)]) == real_root:
        raise ConfigError(
            f"--state-dir {given} lies inside the workspace {real_root}, where the agent "
            "could forge what it holds; name a directory outside the workspace"
        )
    return given


def _leave_receipt(states: Any, ns: Any, kind: str) -> None:
    """The receipt of Claude Code's Bash call, before anything runs: that call reached
    this confined command (see ctxnb.integrations._claude_bash)."""
    if ns.receipt:
        from ..govern.state import write_receipt

        write_receipt(states, ns.session, ns.receipt, kind=kind)


def _exec_governed(root: Any, intent_id: str, argv: list[str], cwd: str, ns: Any) -> int:
    import shlex
    from pathlib import Path

    from ..errors import PolicyError
    from ..integrations.backend import WorkspaceBackend
    from ..redaction.redactor import redact
    from ..sandbox.held import PROMPT_DIFF_CHARS, Hold, hold_overlay
    from ..sandbox.runner import SandboxResult

    sid = ns.session
    ran: list[Any] = []

    def hold(sres: SandboxResult, diff: str, reasons: list[str]) -> Hold:
        # Nobody can be asked while Claude Code's Bash runs: the destructive changes
        # wait, in their overlay, for the user's answer to `ctxnb sandbox commit ID`.
        ran.append(sres.result)
        command = argv[2] if argv[:2] == ["bash", "-c"] and len(argv) == 3 else shlex.join(argv)
        return hold_overlay(
            sres,
            command=redact(command).text,
            intent_id=intent_id,
            session_id=sid,
            diff=diff,
            reasons=reasons,
            cwd=cwd,
        )

    states = _states(root, ns)

    def prepare(ws: Any) -> None:
        # What runs on the host, from the hook's cache: derived again only when one of
        # the files it came from changed, not once per command.
        ws.protected_cache = states

    with WorkspaceBackend.open(
        root,
        session_id=f"claude-code-{sid}" if sid else None,
        caller="claude-code",
        model_id=os.environ.get("CTXNB_MODEL_ID"),
        prepare=prepare,
    ) as backend:
        engine = backend.engine
        from ..govern.tracecontext import carried_metadata

        # Claude Code exports its trace context to the commands its Bash tool runs.
        engine.recorder.carried.update(carried_metadata(os.environ, ns.prompt_id))
        engine.lease_session = sid  # the Claude Code session's lease on its scope
        engine.select_active_intent(intent_id)
        try:
            out = engine.commands.run(
                argv,
                cwd=Path(cwd),
                timeout=ns.timeout,
                session_id=sid,
                caller="claude-code",
                tool="Bash",
                hold=hold,
            )
        except PolicyError as e:
            if ran:
                sys.stdout.write(ran[0].stdout)
                sys.stderr.write(ran[0].stderr)
            sys.stderr.write(f"ctxnb: {e.error_code}: {e.message}\n")
            diff = e.details.get("diff")
            if diff:
                sys.stderr.write(diff)
            hold_id = e.details.get("hold_id")
            if hold_id and len(diff or "") > PROMPT_DIFF_CHARS:
                sys.stderr.write(
                    f"ctxnb: nothing was committed. This diff is longer than Claude Code's "
                    f"prompt shows ({PROMPT_DIFF_CHARS} characters), so the user cannot be "
                    f"asked: run `ctxnb sandbox discard {hold_id}` and make the change in "
                    "smaller commands (fewer files each).\n"
                )
            elif hold_id:
                sys.stderr.write(
                    f"ctxnb: nothing was committed. To commit these changes run exactly "
                    f"`ctxnb sandbox commit {hold_id}` (the user is asked, shown this diff); "
                    f"to drop them, `ctxnb sandbox discard {hold_id}`. Unanswered, they are "
                    "dropped after an hour.\n"
                )
            return 1
    return _finish(out["stdout"], out["stderr"], out["returncode"], out["timed_out"], out)


def _held(action: str, hold_id: str, ns: Any) -> int:
    """``ctxnb sandbox commit|discard ID``."""
    import contextlib

    from ..errors import NotFoundError, PolicyError
    from ..govern.state import find_workspace
    from ..sandbox.held import discard_hold, load_hold

    root, _ = find_workspace(ns.workspace or os.getcwd())
    _leave_receipt(_states(root, ns), ns, action)
    if action == "discard":
        with contextlib.suppress(NotFoundError):
            if load_hold(root, hold_id).session_id != ns.session:
                sys.stderr.write(f"ctxnb: the held changes {hold_id} belong to another session\n")
                return 1
        gone = discard_hold(root, hold_id)
        sys.stderr.write(
            f"ctxnb: the held changes {hold_id} were discarded\n"
            if gone
            else f"ctxnb: no held changes {hold_id} (committed, discarded or expired)\n"
        )
        return 0
    hold = load_hold(root, hold_id)
    if hold.session_id != ns.session:
        sys.stderr.write(f"ctxnb: the held changes {hold_id} belong to another session\n")
        return 1
    if ns.expect is None:
        # Typed in a terminal, not asked by Claude Code: the human reads the diff here,
        # and commits only what they read.
        from ..govern.approval import held_question
        from ..sandbox.held import diff_sha256

        sha = diff_sha256(hold.diff)
        # The question every door asks: the reasons (what the redaction hides among
        # them) and the diff.
        sys.stderr.write(f"{held_question(hold)}ctxnb: the diff of the held changes {hold_id}\n")
        if not sys.stdin.isatty():
            sys.stderr.write(
                f"ctxnb: nothing was committed; to commit this diff run again with --expect {sha}\n"
            )
            return 1
        if input("commit these changes? [y/N] ").strip().lower() not in ("y", "yes"):
            sys.stderr.write("ctxnb: nothing was committed\n")
            return 1
        ns.expect = sha
    from ..govern.approval import CallbackApprover
    from ..integrations.backend import WorkspaceBackend

    by = "human (asked by Claude Code)" if ns.session else "human (ctxnb sandbox commit)"
    states = _states(root, ns)

    def prepare(ws: Any) -> None:
        ws.protected_cache = states

    with WorkspaceBackend.open(
        root,
        session_id=f"claude-code-{ns.session}" if ns.session else None,
        caller="claude-code",
        model_id=os.environ.get("CTXNB_MODEL_ID"),
        # Whoever runs this is the human who saw the diff (Claude Code asks its user
        # before this command runs; the commit checks it is still that diff).
        approver=CallbackApprover(lambda req: True, by=by),
        prepare=prepare,
    ) as backend:
        engine = backend.engine
        engine.lease_session = ns.session  # the Claude Code session's lease, if one
        engine.select_active_intent(hold.intent_id)
        try:
            out = engine.commands.commit_held(
                hold_id, caller="claude-code", tool="Bash", expect=ns.expect
            )
        except PolicyError as e:
            sys.stderr.write(f"ctxnb: {e.error_code}: {e.message}\n")
            return 1
    code = _finish("", "", 0, False, out)
    return 1 if out["effects"]["conflicts"] else code


def _finish(stdout: str, stderr: str, code: int, timed_out: bool, out: Any) -> int:
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)
    notes = []
    if timed_out:
        notes.append("ctxnb: the command was stopped at the timeout")
    if out is not None:
        notes += [f"ctxnb: {n}" for n in out.get("notes", ())]
        # A refusal a client prints only as "403" (curl's CONNECT): the reason, once each.
        refused = {f"{d['host']}:{d['port']}": d["reason"] for d in out.get("network", ())
                   if not d.get("allowed")}  # fmt: skip
        notes += [
            f"ctxnb: network refused {where}: {why.removeprefix('ctxnb: ')}"
            for where, why in refused.items()
        ]
    if out is not None and "effects" in out:
        eff = out["effects"]
        if eff["changed"]:
            paths = ", ".join(c["path"] for c in eff["changed"])
            notes.append(f"ctxnb: stored and traced: {paths}")
        if eff["dropped"]:
            paths = ", ".join(f"{c['path']} ({c['reason']})" for c in eff["dropped"])
            notes.append(f"ctxnb: not committed: {paths}")
        if eff["conflicts"]:
            paths = ", ".join(c["path"] for c in eff["conflicts"])
            notes.append(
                f"ctxnb: changed by someone else while the command ran: {paths}; "
                + (
                    "their version was kept"
                    if eff["changed"]
                    else "nothing of this command was committed"
                )
            )
    if notes:
        sys.stderr.write("\n".join(notes) + "\n")
    return 128 - code if code < 0 else code
