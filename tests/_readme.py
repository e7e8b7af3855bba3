"""The README's code as a user copies it, for tests that run it elsewhere."""

from __future__ import annotations

from _paths import REPO
from test_docs import code_blocks


def readme_quickstart() -> str:
    """The README's "Five minutes in Python" block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Five minutes in Python", 1)[1]
    return next(b.code for b in code_blocks(section) if b.info == "python")
