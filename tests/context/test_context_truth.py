"""The context tells the truth: what the prompt shows is the workspace as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.context.relations import Node, RelationStore
from ctxnb.errors import PolicyError
from ctxnb.instructions import RulesTracker
from ctxnb.strategies.builtin import Selection, StrategyInput


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text("def total(xs):\n    return sum(xs)\n")
    return tmp_path


def test_index_and_outside_edits_refresh_every_open_session(root: Path) -> None:
    ws = Workspace.open(root)
    first = ws.session("one")
    second = Workspace.open(root).session("two")  # another open session, its own store
    for s in (first, second):
        s.add_path("app.py")
        s.add_turn("user", "look")
        assert "return sum(xs)" in s.assemble().to_text()
    (root / "app.py").write_text("def total(xs):\n    return max(xs)  # edited outside\n")
    ws.index()
    for s in (first, second):
        s.add_turn("user", "again")
        ctx = s.assemble()
        text = ctx.to_text()
        assert "edited outside" in text and "return sum(xs)" not in text
        # context_at rebuilds exactly what was shown, at both turns
        assert s.context_at(2).to_text() == text
        assert "return sum(xs)" in s.context_at(1).to_text()


def test_the_active_copy_is_what_the_prompt_shows_and_snippets_never_displace_it(
    root: Path,
) -> None:
    ws = Workspace.open(root)
    s = ws.session("buf")
    tools = ws.tools(s, caller="editor")
    tools.read_file("app.py")
    buffer = "def total(xs):\n    return sum(xs)  # unsaved edit\n"
    tools.set_active_copy("app.py", buffer)
    tools.set_active_copy("app.py", "return sum(", source="rag-snippet")
    s.add_turn("user", "what does total do?")
    ctx = s.assemble()
    assert "# unsaved edit" in ctx.to_text()
    assert tools.read_file("app.py").content == buffer and tools.read_file("app.py").source == (
        "active"
    )
    assert s.context_at(1).to_text() == ctx.to_text()
    # the disk never changed; back to it once the buffer is dropped
    tools.clear_active_copy("app.py")
    s.add_turn("user", "and now?")
    assert "# unsaved edit" not in s.assemble().to_text()
    assert "# unsaved edit" in s.context_at(1).to_text()


def test_a_rag_hit_equal_to_the_whole_file_is_no_reason_to_refuse_an_edit(root: Path) -> None:
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("rag"), caller="agent")
    whole = (root / "app.py").read_text()
    tools.set_active_copy("app.py", whole, source="rag-snippet")
    r = tools.read_file("app.py")
    edit = {
        "start_line": 2,
        "end_line": 2,
        "expected_original_lines": ["    return sum(xs)"],
        "new_lines": ["    return sum(xs) or 0"],
    }
    assert tools.write_patch("app.py", r.sha256, [edit]).success
    # a real snippet's hash is still refused
    snippet = "    return sum(xs) or 0\n"
    h = tools.set_active_copy("app.py", snippet, source="rag-snippet")
    tools.read_file("app.py")
    edit = {**edit, "expected_original_lines": ["    return sum(xs) or 0"]}
    with pytest.raises(PolicyError) as e:
        tools.write_patch("app.py", h, [edit])
    assert e.value.error_code == "SNIPPET_NOT_EDIT_BASE"


def test_readme_and_readme_lowercase_are_two_files(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("upper\n")
    (tmp_path / "readme.md").write_text("lower\n")
    if len(list(tmp_path.iterdir())) != 2:
        pytest.skip("case-insensitive filesystem: the two names are one file here")
    ws = Workspace.open(tmp_path)
    s = ws.session("case")
    tools = ws.tools(s, caller="agent")
    tools.set_active_copy("README.md", "upper, unsaved\n")
    assert tools.read_file("readme.md").content == "lower\n"
    assert tools.read_file("README.md").content == "upper, unsaved\n"
    with pytest.raises(PolicyError) as e:
        tools.set_active_copy("Readme.MD", "which one?\n")
    assert e.value.error_code == "AMBIGUOUS_DOC_PATH" and "readme.md" in str(e.value)
    # reading one never stands for having read the other
    fresh = ws.tools(ws.session("case2"), caller="agent")
    fresh.read_file("README.md")
    with pytest.raises(PolicyError) as e:
        fresh.write_file("readme.md", "overwritten\n")
    assert e.value.error_code == "READ_BEFORE_WRITE"
    assert (tmp_path / "readme.md").read_text() == "lower\n"


class ForgetsPins:
    name = "forgets-pins"

    def select(self, inp: StrategyInput) -> Selection:
        return Selection(active=[], evicted=[i.id for i in inp.items])


def test_pinned_items_stay_whatever_the_strategy_returns(root: Path) -> None:
    (root / "b.py").write_text("b = 2\n")
    ws = Workspace.open(root)
    s = ws.session("pins")
    a = s.add_path("app.py")
    b = s.add_path("b.py")
    s.pin(a)
    ctx = s.assemble(ForgetsPins())
    assert [it.id for it in ctx.items] == [a] and a not in ctx.evicted and b in ctx.evicted
    assert ctx.items[0].pinned
    assert s.context_at(0).hash == ctx.hash


def test_a_line_range_read_puts_only_those_lines_in_the_context(root: Path) -> None:
    lines = [f"line_{i:04d} = {i}\n" for i in range(1, 2001)]
    (root / "big.py").write_text("".join(lines))
    ws = Workspace.open(root)
    s = ws.session("lines")
    tools = ws.tools(s, caller="agent")
    tools.read_lines("big.py", 100, 130)
    tools.get_excerpt("big.py", max_lines=5)
    ctx = s.assemble()
    text = ctx.to_text()
    assert "line_0100 = 100" in text and "line_0130 = 130" in text
    assert "line_0003 = 3" in text  # the excerpt
    assert "line_0131 = 131" not in text and "line_0099 = 99" not in text
    fid = s.find("big.py")
    assert fid not in {it.id for it in ctx.items} and fid in s.metadata_pool
    assert ctx.total_tokens < 2_000
    # a whole-file read shows the file object itself
    tools.read_file("app.py")
    assert s.find("app.py") in {it.id for it in s.assemble().items}


def test_summaries_fit_the_budget_in_the_sessions_tokens(root: Path) -> None:
    body = "".join(
        f"def function_number_{i}(alpha, beta, gamma):\n    '''Doc {i}.'''\n    return {i}\n"
        for i in range(300)
    )
    (root / "many.py").write_text(body)
    ws = Workspace.open(root)
    s = ws.session("sum")
    for summarizer in (None, lambda path, text, max_tokens: text):  # ours, and a careless one
        tools = ws.tools(s, caller="agent", summarizer=summarizer)
        for budget in (40, 120, 400):
            out = tools.summarize_file("many.py", max_tokens=budget)
            assert 0 < s.token_counter.count(out) <= budget


def test_a_plan_renders_as_text(root: Path) -> None:
    ws = Workspace.open(root)
    plan = RelationStore("release")
    plan.add(Node("p", kind="plan", title="Ship 1.0", status="doing"))
    plan.add(Node("t", title="Write the tests"), parents="p")
    plan.save(ws.store)
    s = ws.session("plan")
    s.add(plan.doc_id)
    text = s.assemble().to_text()
    assert "- [~] Ship 1.0 (doing)" in text and "Write the tests" in text
    assert "binary" not in text
    plan.update("t", status="done")
    plan.save(ws.store)
    s.add_turn("user", "progress?")
    assert "[x] Write the tests" in s.assemble().to_text()
    assert "[x] Write the tests" not in s.context_at(0).to_text()


def test_tier3_rules_load_when_any_tool_touches_the_subtree(root: Path) -> None:
    for d in ("pkg/sub", "tools", "web"):
        (root / d).mkdir(parents=True)
    (root / "AGENTS.md").write_text("# root rules\n")
    (root / "pkg" / "AGENTS.md").write_text("# pkg rules\nUse tabs in pkg.\n")
    (root / "pkg" / "sub" / "x.py").write_text("x = 1\n")
    (root / "tools" / "AGENTS.md").write_text("# tools rules\nNo network in tools.\n")
    (root / "tools" / "y.sh").write_text("echo y\n")
    (root / "web" / "AGENTS.md").write_text("# web rules\nNo frameworks.\n")
    ws = Workspace.open(root)
    s = ws.session("rules")
    RulesTracker(s, skills=False)
    tools = ws.tools(s, caller="agent")
    text = s.assemble().to_text()
    assert "Use tabs in pkg." not in text and "No network in tools." not in text
    tools.read_file("pkg/sub/x.py")  # a file tool
    s.record_toolcall("run_command", {"cmd": "bash tools/y.sh"}, "y\n")  # a shell command
    # a command whose effect (a file it wrote) was observed, though its text names no path
    (root / "web" / "index.html").write_text("<p>hi</p>\n")
    web = s.add_path("web/index.html", activate=False)
    s.record_toolcall("run_command", {"cmd": "make site"}, "", file_refs=[web])
    text = s.assemble().to_text()
    assert "Use tabs in pkg." in text and "No network in tools." in text
    assert "No frameworks." in text
    assert text.index("# root rules") < text.index("Use tabs in pkg.")


def test_a_watcher_update_reaches_every_open_session(root: Path) -> None:
    from watchfiles import Change

    from ctxnb.session.watch import Watcher

    ws = Workspace.open(root)
    watched, other = ws.session("watched"), ws.session("other")
    for s in (watched, other):
        s.add_path("app.py")
        s.add_turn("user", "look")
        s.assemble()
    (root / "app.py").write_text("def total(xs):\n    return len(xs)  # seen by the watcher\n")
    events = [{(Change.modified, str(root / "app.py"))}]
    with Watcher(watched, backend=lambda dirs, stop: iter(events)) as w:
        w.join(10)
    for s in (watched, other):  # only one session watches; both show the new content
        s.add_turn("user", "again")
        text = s.assemble().to_text()
        assert "seen by the watcher" in text and "return sum(xs)" not in text
        assert s.context_at(2).to_text() == text
