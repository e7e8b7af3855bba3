"""`make demo` (and `ctxnb demo`, its form after a pip install) runs end to end and shows
what the README promises."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from _paths import REPO


def _readme_demo() -> types.ModuleType:
    path = REPO / "scripts" / "readme_demo.py"
    spec = importlib.util.spec_from_file_location("ctxnb_readme_demo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo_output() -> str:
    # The command a pip user has (the Makefile's `python -m ctxnb.demo` is the same run).
    out = subprocess.run(
        [sys.executable, "-m", "ctxnb", "demo"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _ctxnb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxnb", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_a_kept_demo_leaves_a_workspace_the_other_commands_read(tmp_path: Path) -> None:
    """``--keep DIR``: the demo's store and ledger stay, and the commands it names find
    the agent's edit and an intact ledger there."""
    out = _ctxnb("demo", "--keep", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    root = tmp_path / "tinyinv"
    assert f"the workspace is kept in {root}" in out.stdout
    history = _ctxnb("history", "inventory/models.py", "-w", str(root), cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert "scripted-agent (ai (example/scripted-agent))" in history.stdout
    verify = _ctxnb("trace", "verify", str(root), cwd=tmp_path)
    assert verify.returncode == 0 and "chain intact" in verify.stdout, verify


def test_a_kept_demo_never_runs_over_an_earlier_one(tmp_path: Path) -> None:
    """A second ``--keep`` into the same directory is refused before anything is copied:
    the first demo's ledger is the same bytes after, and a missing directory is named."""
    assert _ctxnb("demo", "--keep", str(tmp_path), cwd=tmp_path).returncode == 0
    ledger = tmp_path / "tinyinv" / ".orchestration" / "agent_trace.jsonl"
    before = ledger.read_bytes()
    again = _ctxnb("demo", "--keep", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 1
    assert "exists already" in again.stderr and "remove it" in again.stderr, again.stderr
    assert ledger.read_bytes() == before
    missing = _ctxnb("demo", "--keep", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 1 and "not a directory; create it" in missing.stderr
    assert not (tmp_path / "nope").exists()


def test_demo_runs_the_scripted_session(demo_output: str) -> None:
    text = demo_output
    for section in (
        "1. index",
        "2. govern",
        "3. a scripted agent",
        "4. the context",
        "5. the Agent",
    ):
        assert section in text
    # The seed's demo script whole: no intent, out of scope, a stale version; each once,
    # in that order, and the file the person changed keeps the person's line.
    refused = re.findall(r"REFUSED (\w+)", text)
    assert refused == ["NO_ACTIVE_INTENT", "SCOPE_VIOLATION", "STALE_FILE"]
    assert "README.md is outside the scope of intent INT-001" in text
    assert "nothing was written" in text
    assert "Ran 4 tests" in text and "OK" in text  # the agent's test run
    assert "keep-all" in text and "observation-masking" in text
    assert "INT-001  inventory/models.py" in text
    # One command confined to the intent's scope, and its trace record.
    assert "cat: .env: Permission denied" in text
    assert "modified inventory/report.py" in text
    assert '"tool": "run_command"' in text and '"intent_id": "INT-001"' in text
    # Nothing of the machine it ran on: no temporary path, no interpreter path.
    assert "/tmp/" not in text and sys.executable not in text


def test_a_check_mark_never_stands_over_a_failed_command(demo_output: str) -> None:
    lines = demo_output.splitlines()
    for mark, detail in zip(lines, lines[1:], strict=False):
        failed = re.match(r"\s+exit (\d+):", detail)
        if failed:
            want = "✓" if failed.group(1) == "0" else "✗"
            assert mark.strip().startswith(want), f"{mark!r} is followed by {detail!r}"


def test_the_readme_shows_what_the_demo_prints(demo_output: str) -> None:
    readme_demo = _readme_demo()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    problems = readme_demo.differences(
        readme_demo.readme_excerpt(readme), readme_demo.excerpt(demo_output)
    )
    assert not problems, f"README.md's demo output is stale ({problems[:3]}); run: " + (
        "python scripts/readme_demo.py"
    )


def test_the_readme_check_catches_a_changed_figure(demo_output: str) -> None:
    # The check compares token counts and tool calls exactly: a changed figure is caught,
    # while a different time or revision is not a difference.
    readme_demo = _readme_demo()
    shown = readme_demo.excerpt(demo_output)
    changed = re.sub(r"(\d+) tokens \(", lambda m: f"{int(m.group(1)) * 2} tokens (", shown)
    assert readme_demo.differences(changed, shown)
    exit_code = shown.replace("exit 0:", "exit 1:", 1)
    assert readme_demo.differences(exit_code, shown)
    later = re.sub(r"rev [0-9a-f]{10}", "rev 0123456789", shown)
    assert not readme_demo.differences(later, shown)
