"""The governed workspace the live-agent front ends (ACP, A2A) are tested in: a small
calculator whose only active intent owns ``*.py`` and ``notes_*.txt``."""

from __future__ import annotations

from pathlib import Path

from ctxnb.govern import init_governance

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

INTENTS = """\
active_intents:
  - id: INT-CALC
    name: Fix the calculator
    status: active
    owned_scope:
      - "*.py"
      - "notes_*.txt"
"""


def make_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    (root / "notes_a.txt").write_text("old notes a\n", encoding="utf-8")
    (root / "notes_b.txt").write_text("old notes b\n", encoding="utf-8")
    (root / "README.md").write_text("# calc\n", encoding="utf-8")
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(INTENTS, encoding="utf-8")
    return root
