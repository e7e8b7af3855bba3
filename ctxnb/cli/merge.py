"""``ctxnb merge``: the human's side of merge proposals (:mod:`ctxnb.tools.merging`).

An agent whose edit was refused as stale asks for a proposal (``propose_merge``); the
proposal is kept under ``.ctxnb/merges/`` (:mod:`ctxnb.tools.merge_store`), and a human
lists, reads, accepts or rejects it here, from any terminal:

- ``list``: the proposals waiting, with the session and intent that made each.
- ``show ID``: the question every door asks (the diff from the file as the proposal saw
  it to the merged text, built from the bytes, redacted) and the diff's SHA-256.
- ``accept ID --expect SHA256``: writes the merge through the governed write, traced
  ``MERGE`` with ``merged_from``, acting for the session that proposed it (under its
  intent, beside its lease), only if the diff is still the one with that hash (the yes
  is bound to the diff seen) and the file is still the one it was made against.
  Without ``--expect``, a terminal shows the diff and asks.
- ``reject ID``: drops it; nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from .app import _out, arg, command

__all__: list[str] = []


@command("merge", help="list, show, accept or reject merge proposals of stale edits")
@arg(
    "action",
    choices=("list", "show", "accept", "reject"),
    help="list: the proposals waiting; show ID: its diff and the diff's SHA-256; "
    "accept ID: write it (a human decides); reject ID: drop it",
)
@arg("id", nargs="?", default=None, help="the proposal's id (show, accept, reject)")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg(
    "--expect",
    default=None,
    metavar="SHA256",
    help="accept: the SHA-256 `ctxnb merge show` printed; nothing is written unless the "
    "diff now is that one (without it the diff is printed and a terminal asks)",
)
@arg("--json", action="store_true", help="list, show: print JSON")
def _cmd_merge(ns: argparse.Namespace) -> int:
    """Exit status 0; 1 when the proposal is missing, damaged, unresolved, or nothing was
    written (refused, a different diff, the file changed)."""
    from ..errors import PolicyError

    try:
        return _merge(ns)
    except PolicyError as e:
        # One line with the code, the cause and the fix (a refusal is not a crash).
        fix = f" ({e.required_action.rstrip('.')})" if e.required_action else ""
        message = " ".join(e.message.split())
        sys.stderr.write(f"ctxnb merge: error: {e.error_code}: {message}{fix}\n")
        return 1


def _merge(ns: argparse.Namespace) -> int:
    from ..govern.state import find_workspace

    root, governed = find_workspace(ns.workspace or os.getcwd())
    if ns.action == "list":
        if ns.id is not None:
            sys.stderr.write("ctxnb merge list: error: usage: list (no id)\n")
            return 2
        return _list(root, ns.json)
    if ns.id is None:
        sys.stderr.write(f"ctxnb merge {ns.action}: error: usage: {ns.action} ID\n")
        return 2
    from ..tools.merge_store import discard_proposal, load_proposal

    if ns.action == "reject":
        # A damaged proposal is rejected too: that is the way out its error names.
        if not discard_proposal(root, ns.id):
            load_proposal(root, ns.id)  # raises: names why there is none
        sys.stderr.write(f"ctxnb: merge proposal {ns.id} rejected; nothing was written\n")
        return 0
    kept = load_proposal(root, ns.id)
    if ns.action == "show":
        return _show(kept, ns.json)
    return _accept(root, governed, kept, ns.expect)


def _summary(kept: Any) -> dict[str, Any]:
    p = kept.proposal
    return {
        "proposal_id": p.id,
        "path": p.path,
        "session_id": kept.session_id,
        "intent_id": kept.intent_id,
        "ready": p.ready,
        "conflicts": p.conflicts,
        "resolved_by": p.resolved_by,
        "created": kept.created,
    }


def _list(root: Any, as_json: bool) -> int:
    from ..redaction.redactor import redact_text
    from ..tools.merge_store import list_proposals

    damaged: list[str] = []
    kept = list_proposals(root, damaged=damaged)
    for msg in damaged:
        sys.stderr.write(f"ctxnb: {msg}\n")
    if as_json:
        _out(redact_text(json.dumps([_summary(k) for k in kept])))
        return 0
    if not kept:
        _out("no merge proposals")
        return 0
    now = time.time()
    for k in kept:
        p = k.proposal
        state = "ready" if p.ready else f"{p.conflicts} unresolved conflict(s)"
        line = (
            f"{p.id}  {p.path}  session {k.session_id}  intent {k.intent_id or '-'}  "
            f"{state}  {max(0, now - k.created) / 60:.0f} min ago"
        )
        _out(redact_text(line))
    return 0


def _question(p: Any, session_id: str, intent_id: str | None) -> tuple[str, str]:
    """The approval question of the ready proposal ``p`` and its diff's SHA-256."""
    from ..govern.approval import question
    from ..govern.policies import proposal_diff
    from ..hashing import sha256_hex

    diff, notes = proposal_diff(p)
    reason = "; ".join(["a merge proposal writes a three-way merge of a stale edit", *notes])
    act = f"the merge proposal {p.id} for {p.path} (session {session_id})"
    asked = question(act, reason, intent_id=intent_id, diff=diff)
    return asked, sha256_hex(diff.encode("utf-8"))


def _show(kept: Any, as_json: bool) -> int:
    from ..redaction.redactor import redact_text

    p = kept.proposal
    if not p.ready:
        # Nothing to approve: the conflicts as the agent was shown them (redacted).
        if as_json:
            _out(redact_text(json.dumps({**_summary(kept), "merged": p.shown})))
        else:
            _out(f"merge proposal {p.id} of {redact_text(p.path)}: {p.conflicts} unresolved "
                 f"conflict(s); it cannot be written (`ctxnb merge reject {p.id}`)")  # fmt: skip
            sys.stdout.write(p.shown)
        return 1
    asked, sha = _question(p, kept.session_id, kept.intent_id)
    if as_json:
        _out(json.dumps({**_summary(kept), "question": asked, "diff_sha256": sha}))
        return 0
    _out(asked)
    _out(f"diff sha256 {sha}\nto write it: ctxnb merge accept {p.id} --expect {sha}")
    return 0


def _accept(root: Any, governed: bool, kept: Any, expect: str | None) -> int:
    from ..errors import PolicyError
    from ..govern.approval import CallbackApprover
    from ..hashing import sha256_hex
    from ..workspace import Workspace

    def approve(req: Any) -> bool:
        # The engine asks with the diff it computed from the bytes: the yes given here
        # holds only for the diff whose hash the human accepted.
        diff = req.args.get("diff")
        return isinstance(diff, str) and sha256_hex(diff.encode("utf-8")) == expect

    ws = Workspace.open(root)
    with ws.session(f"merge-{kept.proposal.id}", rules=False) as session:
        tools = ws.tools(
            session,
            caller="ctxnb merge",
            approver=CallbackApprover(approve, by="human (ctxnb merge accept)"),
            rules=False,
        )
        tools.merge_for = kept.session_id  # its proposal, applied for it
        # The one copy the question is built from and apply_merge writes.
        p = tools.merge_proposal(kept.proposal.id)
        asked, sha = _question(p, kept.session_id, kept.intent_id)  # MERGE_UNRESOLVED
        if expect is None:
            sys.stderr.write(asked + "\n")
            if not sys.stdin.isatty():
                sys.stderr.write(
                    "ctxnb: nothing was written; to write this diff run again with "
                    f"--expect {sha}\n"
                )
                return 1
            if input("write this merge? [y/N] ").strip().lower() not in ("y", "yes"):
                sys.stderr.write("ctxnb: nothing was written\n")
                return 1
            expect = sha
        if expect != sha:
            # Checked here for every workspace (an ungoverned one asks no approver).
            raise PolicyError(
                "MERGE_DIFF_CHANGED",
                f"the diff of merge proposal {p.id} is not the one with sha256 "
                f"{expect[:12]}… (it is {sha[:12]}…); nothing was written",
                required_action=f"Read it again with `ctxnb merge show {p.id}` and accept "
                "what you read.",
            )
        if governed:
            if kept.intent_id is None:
                raise PolicyError(
                    "NO_ACTIVE_INTENT",
                    f"merge proposal {p.id} was made without an intent; in a governed "
                    "workspace it cannot be written",
                    required_action="Reject it and ask the agent to redo the edit under an intent.",
                )
            engine = tools.engine  # type: ignore[attr-defined]
            # Acting for the proposing session: under its intent, and beside its lease
            # (as its worker would be), not against it; any other session's lease on
            # these files still refuses.
            engine.parent_session = kept.session_id
            engine.supervisors = [kept.session_id]
            engine.select_active_intent(kept.intent_id)
        result = tools.apply_merge(p.id)
    _out(result.message)
    return 0
