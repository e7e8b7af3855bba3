"""Startup excerpts (issue #49): a new session pins shaped excerpts of the README and the
package manifest before the chat, within ``[rules] startup_tokens``; through the path
policy and redaction like any read; rebuilt exactly by ``context_at``."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.errors import ConfigError
from ctxnb.integrations.mcp_server import URI_CONTEXT, McpBackend
from ctxnb.session.excerpts import TOOL

README_HEAD = "# Widget\nWidget makes widgets from a spec file.\n"
MANIFEST_NAME = 'name = "widget-maker"'


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CTXNB_EMBEDDER", "none")
    r = tmp_path / "ws"
    r.mkdir()
    (r / "AGENTS.md").write_text("Run make check.\n")
    # Long enough that no budget used here holds it whole.
    tail = "".join(
        f"Paragraph {i}: the widget option number {i} does a thing.\n" for i in range(2000)
    )
    (r / "README.md").write_text(README_HEAD + tail)
    (r / "pyproject.toml").write_text(f'[project]\n{MANIFEST_NAME}\nversion = "1.0"\n')
    return r


def _excerpts(session: object) -> list[dict[str, object]]:
    docs = [session.get(oid) for oid in session.session_index]  # type: ignore[attr-defined]
    return [d for d in docs if d.get("type") == "toolcall" and d.get("tool") == TOOL]


def test_a_new_session_pins_readme_and_manifest_before_the_chat(root: Path) -> None:
    s = Workspace.open(root).session("s")
    s.add_turn("user", "add a --dry-run flag")
    msgs = s.assemble().to_messages(format="anthropic")
    assert isinstance(msgs, dict)
    system = "".join(b["text"] for b in msgs["system"])
    # In the system part, the cached prefix every step shares, not in the chat.
    assert README_HEAD in system and MANIFEST_NAME in system
    assert "Paragraph 1999" not in system  # shaped, not the whole file
    assert "[… excerpt: lines 1-" in system
    assert all(
        README_HEAD not in str(m["content"]) and MANIFEST_NAME not in str(m["content"])
        for m in msgs["messages"]
    )
    assert [d["args"]["path"] for d in _excerpts(s)] == ["README.md", "pyproject.toml"]  # type: ignore[index]
    assert all(oid in s.pinned_set for oid in (d["xt/id"] for d in _excerpts(s)))


def test_the_excerpts_stay_within_the_configured_budget(root: Path) -> None:
    shown = []
    for budget in (60, 300, 2000):
        (root / "ctxnb.toml").write_text(f"[rules]\nstartup_tokens = {budget}\n")
        s = Workspace.open(root).session(f"s{budget}")
        spent = sum(s.token_counter.count(str(d["content"])) for d in _excerpts(s))
        assert 0 < spent <= budget
        readme = next(d for d in _excerpts(s) if d["args"]["path"] == "README.md")  # type: ignore[index]
        shown.append(readme["args"]["max_lines"])  # type: ignore[index]
    # A bigger budget shows more of the README.
    assert shown == sorted(shown) and shown[0] < shown[-1]


def test_a_zero_budget_or_rules_off_loads_no_excerpt(root: Path) -> None:
    assert _excerpts(Workspace.open(root).session("bare", rules=False)) == []
    (root / "ctxnb.toml").write_text("[rules]\nstartup_tokens = 0\n")
    s = Workspace.open(root).session("zero")
    assert _excerpts(s) == [] and README_HEAD not in s.assemble().to_text()


def test_a_negative_budget_is_a_config_error(root: Path) -> None:
    (root / "ctxnb.toml").write_text("[rules]\nstartup_tokens = -5\n")
    with pytest.raises(ConfigError, match="startup_tokens"):
        Workspace.open(root)


def test_a_denied_readme_is_not_read(root: Path) -> None:
    (root / "ctxnb.toml").write_text('[policy]\ndeny = [".git", "README.md"]\n')
    ws = Workspace.open(root)
    s = ws.session("s")
    s.save()
    assert [d["args"]["path"] for d in _excerpts(s)] == ["pyproject.toml"]  # type: ignore[index]
    assert "Widget makes widgets" not in s.assemble().to_text()
    # Nothing of it reached the store either.
    assert not any(
        b"Widget makes widgets" in p.read_bytes()
        for p in (root / ".ctxnb").rglob("*")
        if p.is_file()
    )


def test_a_denied_readme_gives_way_to_the_next_readme_name(root: Path) -> None:
    # A README.rst beside the denied README.md is a README too: it is the one shown.
    (root / "README.rst").write_text("Widget, the reStructuredText edition.\n")
    (root / "ctxnb.toml").write_text('[policy]\ndeny = [".git", "README.md"]\n')
    s = Workspace.open(root).session("s")
    assert "reStructuredText edition" in s.assemble().to_text()


def test_a_secret_in_the_manifest_is_redacted(root: Path) -> None:
    token = "ghp_" + secrets.token_hex(18)
    (root / "pyproject.toml").write_text(
        f'[project]\n{MANIFEST_NAME}\n[tool.x]\ntoken = "{token}"\n'
    )
    s = Workspace.open(root).session("s")
    s.save()
    text = s.assemble().to_text()
    assert MANIFEST_NAME in text and token not in text
    assert token not in str(_excerpts(s))


def test_context_at_rebuilds_the_first_step_after_the_readme_changes(root: Path) -> None:
    ws = Workspace.open(root)
    s = ws.session("s")
    s.add_turn("user", "first")
    first = s.assemble().to_text()
    s.save()
    (root / "README.md").write_text("# Renamed\nEverything changed.\n")
    s.add_turn("user", "second")
    s.assemble()
    s.save()
    assert s.context_at(1).to_text() == first
    # Resuming keeps the excerpts the session started with, once each.
    again = Workspace.open(root).session("s")
    assert len(_excerpts(again)) == 2
    assert "Everything changed." not in again.assemble().to_text()
    assert again.context_at(1).to_text() == first


def test_the_mcp_context_resource_holds_the_excerpts(root: Path) -> None:
    with McpBackend(root) as backend:
        context = backend.content.read_resource(URI_CONTEXT)
    assert README_HEAD in context and MANIFEST_NAME in context


def test_ctxnb_context_shows_the_excerpts_of_a_stored_session_once(root: Path) -> None:
    with Workspace.open(root) as ws:
        s = ws.session("cli-s")
        s.add_turn("user", "hello")
        s.save()
    ctxnb = Path(sys.executable).with_name("ctxnb")
    proc = subprocess.run(
        [str(ctxnb), "context", "cli-s", "-w", str(root), "--text"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # Another process resumes the session: its excerpts are the stored ones, once each.
    assert proc.stdout.count("Widget makes widgets") == 1
    assert proc.stdout.count(MANIFEST_NAME) == 1
    assert proc.stdout.index(MANIFEST_NAME) < proc.stdout.index("hello")
