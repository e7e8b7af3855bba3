"""Agent Trace ``content_hash``: every range's hash follows the documented steps."""

from __future__ import annotations

import hashlib
import re

import pytest
from _paths import REPO

from ctxnb.govern.ledger import build_trace_record

DOC = REPO / "docs" / "agent-trace-mapping.md"
SAMPLE = REPO / "data" / "sample_workspace"


def documented_hash(text: str, start: int, end: int) -> str:
    """The steps of docs/agent-trace-mapping.md, "Content hashes", one by one."""
    lines = re.split(r"\r?\n", text)  # a line ends at \n or \r\n; a lone \r stays inside
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends its last line
    range_text = "".join(line + "\n" for line in lines[start - 1 : end])
    step1 = range_text.replace("\r\n", "\n").replace("\r", "\n")
    step2 = step1[:-1] if step1.endswith("\n") else step1
    step3 = [line.rstrip(" \t") for line in step2.split("\n")]
    step4 = "\n".join(step3)
    return "sha256:" + hashlib.sha256(step4.encode("utf-8")).hexdigest()


def test_the_documented_steps_are_the_ones_tested() -> None:
    doc = DOC.read_text()
    for phrase in [
        "`\\r\\n` and lone `\\r` become `\\n`",
        "one final `\\n` is dropped",
        "trailing spaces and tabs are stripped from every line",
        "the lines are joined with `\\n`, with no newline after the last one",
    ]:
        assert phrase in doc


TEXTS = {
    "blank-lines": "def f():\n\n    return 1\n\n\nx = 2\n\n",
    "crlf": "a = 1  \r\n\r\nb = 2\t\r\n\r\n",
    "mixed": "a\r\nb\n\r\nc \n",
    "lone-cr": "a\rb\nc\r\n\n",
    "no-final-newline": "a\n\nb",
    "whitespace-only": "  \n\t\n \t \n",
    "unicode-space": "a\u00a0\nb\u3000\n\n",
}


def _texts() -> dict[str, str]:
    out = dict(TEXTS)
    for path in sorted(SAMPLE.rglob("*.py"))[:6]:
        out[str(path.relative_to(SAMPLE))] = path.read_text()
    return out


@pytest.mark.parametrize("name", sorted(_texts()))
def test_every_range_hash_follows_the_documented_steps(name: str) -> None:
    text = _texts()[name]
    n = len(re.split(r"\r?\n", text)) - (1 if re.search(r"\r?\n\Z", text) else 0)
    ranges = [(s, e) for s in range(1, n + 1) for e in range(s, min(n, s + 12) + 1)]
    record = build_trace_record(
        file_path="f.py",
        ranges=ranges,
        new_text=text,
        intent_id="INT-1",
        session_id=None,
        model_id=None,
        repo_root=None,
    )
    got = record["files"][0]["conversations"][0]["ranges"]
    assert len(got) == len(ranges) > 0
    for r in got:
        want = documented_hash(text, r["start_line"], r["end_line"])
        assert r["content_hash"] == want, (r["start_line"], r["end_line"])


def test_a_blank_last_line_changes_the_hash() -> None:
    text = "x = 1\n\ny = 2\n"
    record = build_trace_record(
        file_path="f.py", ranges=[(1, 1), (1, 2)], new_text=text, intent_id="I",
        session_id=None, model_id=None, repo_root=None,
    )  # fmt: skip
    one, two = (r["content_hash"] for r in record["files"][0]["conversations"][0]["ranges"])
    assert one != two
