"""The approval question every door must ask for a command that deletes one file, built
here from the same bytes by the same builders the commit uses (the diff of the bytes,
the destructive reason, the one question), so that a door's test compares what its
client was shown with it, character for character.
"""

from __future__ import annotations

from ctxnb.govern.approval import ApprovalRequest, approval_question
from ctxnb.redaction.redactor import redact_text
from ctxnb.sandbox.destructive import destructive_reason
from ctxnb.sandbox.review import file_diff, redaction_notes

# Bytes that would clear the line, return the carriage, ring the bell and reverse the
# text in the user's terminal; and a command whose comment reverses what follows it.
HOSTILE = "fine\x1b[2K\rall clear \u202etxt.exe\u2066\x07\n"
HOSTILE_RM = "rm {path} # \u202egnp.cod"

# A file whose deletion's diff is longer than any door asks a person to read.
LONG = "".join(f"line {i} of a long file of notes\n" for i in range(400))

# What the question shows instead of each of HOSTILE's characters.
ESCAPES = ("\\u001b[2K", "\\u000d", "\\u202e", "\\u2066", "\\u0007")


def expected_question(cmd: str, rel: str, before: bytes, intent_id: str) -> str:
    """The question for ``cmd`` deleting ``rel`` (whose bytes were ``before``)."""
    diff = file_diff(before, b"", fromfile=f"a/{redact_text(rel)}", tofile="/dev/null")
    reasons = [redact_text(destructive_reason(rel, before, None) or "")]
    reasons += redaction_notes(diff.hidden, diff.spans)
    reason = "the command's changes are destructive: " + "; ".join(reasons)
    args = {"cmd": redact_text(cmd), "diff": diff.text}
    return approval_question(ApprovalRequest.new("run_command", args, reason, intent_id=intent_id))
