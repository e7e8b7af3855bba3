"""Claude Code's edits through the quality loop.

After the post-tool-use hook has recorded a Write, Edit or MultiEdit, it runs the
workspace's ``[governance] quality_commands`` as ctxnb's own write tools do after theirs
(:func:`ctxnb.govern.policies.run_quality`): in the sandbox of the session's intent
(read-only without one), what they change committed through the same recorder, each
command bounded by ``command_timeout`` and all of them by
:data:`~ctxnb._util.defaults.HOOK_QUALITY_BUDGET`, so that Claude Code does not cancel
the hook and lose the feedback. Failures go back to Claude Code as the hook's
``decision: "block"`` reason (what it tells the model, the edit having run) with the
structured failures in ``additionalContext``. Loaded only when quality commands are
configured: it opens the workspace (the store, the config models).
"""

from __future__ import annotations

import json
from typing import Any

from .._util.defaults import HOOK_QUALITY_BUDGET
from ..errors import CtxnbError
from ._claude_hookio import _Context


def quality_feedback(
    ctx: _Context, tool: str, path: str, intent_id: str | None
) -> list[dict[str, Any]]:
    """Run the quality commands after ``tool`` changed ``path``; their failures (empty
    when all passed). A loop that cannot run (no sandbox here, a broken workspace) is one
    failure saying why: ctxnb cannot tell whether the edit left the code sound."""
    from ..govern.policies import run_quality
    from .backend import WorkspaceBackend

    states = ctx.state_dir

    def prepare(ws: Any) -> None:
        ws.protected_cache = states  # what runs on the host, from the hook's cache

    sid = ctx.session_id
    try:
        with WorkspaceBackend.open(
            ctx.root,
            session_id=f"claude-code-{sid}" if sid else None,
            caller="claude-code",
            model_id=ctx.env.get("CTXNB_MODEL_ID"),
            prepare=prepare,
        ) as backend:
            engine = backend.engine
            # The checks run for the Claude Code session, under its lease on the
            # intent's scope (a second lease of this ctxnb session would be refused).
            engine.lease_session = sid
            if intent_id is not None:
                engine.select_active_intent(intent_id)
            return run_quality(
                engine, session_id=sid, after=tool, paths=[path], budget=HOOK_QUALITY_BUDGET
            )
    except (CtxnbError, OSError) as e:
        return [
            {
                "kind": "quality",
                "command": None,
                "returncode": None,
                "output": f"the quality commands could not run: {e}",
            }
        ]


def quality_answer(rel: str, feedback: list[dict[str, Any]]) -> tuple[str, str]:
    """The ``reason`` Claude Code shows the model, and the structured failures as JSON."""
    lines = [
        f"ctxnb: {rel} was changed and recorded, but the quality commands failed; fix "
        "what they report before going on:"
    ]
    for f in feedback:
        rc = f["returncode"]
        head = f"$ {f['command']}" if f["command"] else "quality loop"
        lines.append(f"{head} (exit {rc})" if rc is not None else head)
        lines.append(str(f["output"]).rstrip())
    detail = json.dumps({"quality": feedback}, ensure_ascii=False)
    return "\n".join(lines), detail
