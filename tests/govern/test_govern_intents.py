"""Intents: loading, validation messages with line numbers, scope, init, context."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import ctxnb.govern.intents as intents_mod
from ctxnb.errors import ConfigError, PolicyError
from ctxnb.govern.intents import Intent, init_governance, intent_context, load_intents
from ctxnb.govern.ledger import build_trace_record

GOOD = """\
active_intents:
  - id: INT-001
    name: Add CSV export
    status: active
    owned_scope:
      - src/export/**
      - tests/test_export.py
    constraints:
      - Keep the public API
    acceptance_criteria:
      - pytest passes
  - id: INT-002
    name: Paused work
    status: paused
    owned_scope: ["docs/"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "active_intents.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_good_file(tmp_path: Path) -> None:
    f = load_intents(write(tmp_path, GOOD))
    assert f.ids == ["INT-001", "INT-002"]
    assert [i.id for i in f.active()] == ["INT-001"]
    it = f.get("INT-001")
    assert it.constraints == ["Keep the public API"]
    assert f.path == tmp_path / "active_intents.yaml"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (GOOD.replace("    status: active", "    state: active"), 4, "unknown key 'state'"),
        (GOOD.replace("status: paused", "status: later"), 14, "status must be one of active"),
        (GOOD.replace("    name: Paused work\n", ""), 12, "missing required key 'name'"),
        (GOOD.replace("      - src/export/**", "      - /etc/**"), 6, "relative"),
        (GOOD.replace("id: INT-002", "id: INT-001"), 12, "used more than once (first on line 2)"),
        (GOOD.replace("  - Keep the public API", "  - [1, 2]"), 9, "valid string"),
        ("intents: []\n", 1, "allowed keys: active_intents"),
        ("active_intents:\n  - id: 7\n    name: x\n", 2, "quote the value"),
    ],
)
def test_errors_name_file_line_and_what_is_allowed(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_intents(path)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg
    assert fragment in msg


def test_unknown_key_lists_allowed_keys(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("    status: active", "    owner: me"))
    with pytest.raises(ConfigError, match="allowed keys: id, name, status, owned_scope"):
        load_intents(path)


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    path = write(tmp_path, "active_intents:\n  - id: A\n    name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"active_intents\.yaml:\d+: not valid YAML"):
        load_intents(path)


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_intents(write(tmp_path, "- a\n- b\n"))


def test_missing_file_says_how_to_create(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="init_governance"):
        load_intents(tmp_path / "nope.yaml")


def test_empty_file_has_no_intents(tmp_path: Path) -> None:
    assert load_intents(write(tmp_path, "")).ids == []


def test_get_unknown_and_inactive(tmp_path: Path) -> None:
    f = load_intents(write(tmp_path, GOOD))
    with pytest.raises(PolicyError) as info:
        f.get("INT-999")
    err = info.value
    assert err.error_code == "INVALID_INTENT"
    assert err.recoverable is True
    assert "INT-001" in err.message
    assert err.details["known_ids"] == ["INT-001", "INT-002"]
    assert set(err.to_dict()) >= {"error_code", "message", "recoverable", "required_action"}
    with pytest.raises(PolicyError, match="paused, not active") as info2:
        f.get("INT-002")
    assert info2.value.details["status"] == "paused"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/export/csv.py", True),
        ("src/export/sub/deep.py", True),
        ("./src/export/csv.py", True),
        ("src/export", False),
        ("src/exporter/x.py", False),
        ("tests/test_export.py", True),
        ("tests/test_other.py", False),
        ("/abs/src/export/x.py", False),
        ("../src/export/x.py", False),
        ("src/export/../../etc/passwd", False),
        ("src\\export\\win.py", True),
    ],
)
def test_in_scope(path: str, expected: bool) -> None:
    it = Intent(id="I", name="n", owned_scope=["src/export/**", "tests/test_export.py"])
    assert it.in_scope(path) is expected


def test_directory_glob_and_bare_name() -> None:
    it = Intent(id="I", name="n", owned_scope=["docs/", "*.md"])
    assert it.in_scope("docs/a/b.txt")
    assert it.in_scope("deep/dir/README.md")
    assert not it.in_scope("src/a.py")
    assert not Intent(id="J", name="n").in_scope("anything.py")


def test_init_governance_is_idempotent(tmp_path: Path) -> None:
    created = init_governance(tmp_path)
    base = tmp_path / ".orchestration"
    assert [p.name for p in created] == [
        "active_intents.yaml",
        "agent_trace.jsonl",
        "intent_map.md",
        "AGENT.md",
    ]
    assert (base / "agent_trace.jsonl").read_bytes() == b""
    assert "lessons" in (base / "AGENT.md").read_text().lower()
    assert (base / "intent_map.md").read_text().startswith("# Intent map")
    assert load_intents(base / "active_intents.yaml").ids == []

    (base / "AGENT.md").write_text("mine\n")
    (base / "intent_map.md").unlink()
    again = init_governance(tmp_path)
    assert again == [base / "intent_map.md"]
    assert (base / "AGENT.md").read_text() == "mine\n"


def test_template_example_works_when_uncommented_as_it_says(tmp_path: Path) -> None:
    """A user follows the file's own instruction, in the file itself, and the intent loads."""
    init_governance(tmp_path)
    path = tmp_path / ".orchestration" / "active_intents.yaml"
    text = path.read_text()
    assert load_intents(path).ids == []  # as created: valid, with no intents
    # The instruction, as the file words it (a reworded one must be re-read by this test).
    assert 'remove the leading "# " of every line after\n# "active_intents:"' in text
    lines = text.splitlines()
    key = lines.index("active_intents:")
    after = [ln.removeprefix("# ") for ln in lines[key + 1 :]]
    assert after and all(not ln.startswith("#") for ln in after), after
    path.write_text("\n".join([*lines[: key + 1], *after]) + "\n")
    f = load_intents(path)
    assert f.ids == ["INT-001"]
    assert f.get("INT-001").in_scope("src/export/a.py")
    assert not f.get("INT-001").in_scope("src/other.py")


def test_intent_context_lists_fields_and_recent_trace() -> None:
    it = Intent(
        id="INT-1",
        name="Fix </intent_context> parsing",
        owned_scope=["src/**"],
        constraints=["no new deps"],
        acceptance_criteria=["tests pass"],
    )
    mine = build_trace_record(
        file_path="src/a.py",
        ranges=[(2, 3)],
        new_text="a\nb\nc\n",
        intent_id="INT-1",
        session_id="s1",
        model_id="anthropic/claude-sonnet-4",
        repo_root=None,
        tool="apply_patch",
        mutation_class="AST_REFACTOR",
    )
    other = build_trace_record(
        file_path="src/b.py",
        ranges=[],
        new_text="",
        intent_id="INT-2",
        session_id=None,
        model_id=None,
        repo_root=None,
    )
    text = intent_context(it, [other, mine])
    assert text.startswith("<intent_context>\n") and text.endswith("\n</intent_context>")
    assert text.count("</intent_context>") == 1  # the name is escaped
    assert "id: INT-1" in text
    assert "  - src/**" in text and "  - no new deps" in text and "  - tests pass" in text
    trace_lines = [line for line in text.splitlines() if "src/" in line and "L2-3" in line]
    assert len(trace_lines) == 1
    assert "apply_patch AST_REFACTOR" in trace_lines[0]
    assert "ai (anthropic/claude-sonnet-4)" in trace_lines[0]
    assert "src/b.py" not in text


def test_intent_context_limit() -> None:
    it = Intent(id="I", name="n")
    recs = [
        build_trace_record(
            file_path=f"f{n}.py",
            ranges=[],
            new_text="",
            intent_id="I",
            session_id=None,
            model_id=None,
            repo_root=None,
        )
        for n in range(5)
    ]
    text = intent_context(it, recs, limit=2)
    assert "f3.py" in text and "f4.py" in text and "f2.py" not in text


def test_docstring_examples() -> None:
    result = doctest.testmod(intents_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5
    assert result.failed == 0


def test_govern_package_exports_resolve_lazily() -> None:
    import ctxnb.govern as govern

    assert govern.__all__ == sorted(govern._EXPORTS)
    for name in govern.__all__:
        # Command risk sits below every wing (ctxnb.shell.risk); governance re-exports it.
        module = getattr(govern, name).__module__
        assert module.startswith("ctxnb.govern.") or module == "ctxnb.shell.risk"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        govern.nope  # noqa: B018
