"""`make demo` runs end to end and shows what the README promises."""

import subprocess
import sys


def test_demo_runs_the_scripted_session():
    out = subprocess.run(
        [sys.executable, "-m", "ctxnb.demo"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for section in (
        "1. index",
        "2. govern",
        "3. a scripted agent",
        "4. the context",
        "5. the Agent",
    ):
        assert section in text
    assert "REFUSED NO_ACTIVE_INTENT" in text
    assert text.count("REFUSED") == 1
    assert "passed" in text  # the agent's test run
    assert "keep-all" in text and "observation-masking" in text
    assert "INT-001  inventory/models.py" in text
    # One command confined to the intent's scope, and its trace record.
    assert "cat: .env: Permission denied" in text
    assert "modified inventory/report.py" in text
    assert '"tool": "run_command"' in text and '"intent_id": "INT-001"' in text
