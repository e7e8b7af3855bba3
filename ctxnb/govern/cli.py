"""The governance commands: ``ctxnb init-governance`` and ``ctxnb hook``.

``ctxnb hook EVENT`` is what Claude Code runs on every tool call, so this module
imports only the command-line framework; each command imports what it needs.

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

from ..cli import _out, arg, command

__all__: list[str] = []

_HOOK_EVENTS = ("pre-tool-use", "post-tool-use", "user-prompt-submit")
_HOOK_CHOICES = (*_HOOK_EVENTS, "select-intent", "install")


@command("init-governance", help="create .orchestration/ (intents, trace, intent map, AGENT.md)")
@arg("path", nargs="?", default=None, help="workspace directory (default: current)")
def _cmd_init_governance(ns: argparse.Namespace) -> int:
    """Create the governance files; existing files are left as they are."""
    from .intents import init_governance

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
    "hook",
    help="answer a Claude Code hook event (JSON on stdin), select a session's intent, "
    "or install the hooks",
)
@arg(
    "event",
    choices=_HOOK_CHOICES,
    help="pre-tool-use | post-tool-use | user-prompt-submit (read Claude Code's JSON on "
    "stdin); select-intent ID --session S; install [PATH]",
)
@arg(
    "target",
    nargs="?",
    default=None,
    help="select-intent: the intent id; install: the project directory (default: current)",
)
@arg("--session", default=None, help="select-intent: Claude Code's session_id")
@arg(
    "-w",
    "--workspace",
    default=None,
    help="select-intent: the workspace (default: current directory)",
)
@arg(
    "--command",
    dest="hook_command",
    default="ctxnb",
    help="install: how the hooks run ctxnb (default: ctxnb)",
)
def _cmd_hook(ns: argparse.Namespace) -> int:
    """Exit codes: 0 answered, 1 an error (Claude Code carries on), 2 a usage error."""
    if ns.event in _HOOK_EVENTS:
        return _run_event(ns.event)
    if ns.event == "select-intent":
        from .claude_hooks import select_intent

        if not ns.target or not ns.session:
            sys.stderr.write("ctxnb hook select-intent: error: usage: ID --session SESSION_ID\n")
            return 2
        _out(select_intent(ns.workspace or os.getcwd(), ns.target, ns.session))
        return 0
    from .claude_hooks import install_settings

    path, changed = install_settings(ns.target or os.getcwd(), command=ns.hook_command)
    _out(f"{'updated' if changed else 'unchanged'} {path}")
    return 0


def _run_event(event: str) -> int:
    from .claude_hooks import run_hook

    try:
        text = sys.stdin.buffer.read().decode("utf-8")
        result = run_hook(event, text)
    except Exception as e:  # a hook must never answer with a traceback
        sys.stderr.write(f"ctxnb hook {event}: error: {type(e).__name__}: {e}\n")
        return 1
    if result.stdout:
        sys.stdout.write(result.stdout)
    if result.stderr:
        sys.stderr.write(result.stderr)
    return result.exit_code
