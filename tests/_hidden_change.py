"""A change the redaction hides, for the approval-diff tests (tests/sandbox/test_approval_diff.py
and Claude Code's prompt in tests/integrations/test_sandbox_hooks.py).

A private key's header with no end line makes the redactor hide the rest of the file:
a line changed after it had no line in the approval diff made of redacted texts.
"""

from __future__ import annotations

import base64
import hashlib
import random

HIDDEN_ONE = "1 changed line is hidden by redaction; the committed bytes differ from what is shown"


def key_then_code(run: str) -> bytes:
    """A config whose private key has no end line, then ``run = "<run>"``."""
    rng = random.Random(5)
    body = [base64.b64encode(rng.randbytes(48)).decode() for _ in range(3)]
    lines = ["-----BEGIN RSA PRIVATE " + "KEY-----", *body, f'run = "{run}"', "port = 8080"]
    return ("\n".join(lines) + "\n").encode()


def marker(line: bytes, rule: str = "private-key") -> str:
    """How the approval diff shows ``line`` when all of it is redacted."""
    return f"[REDACTED:{rule} {len(line)} chars sha256:{hashlib.sha256(line).hexdigest()[:8]}]"
