"""The access layer as an attacker sees it: denied files, links and races never get in.

Every test uses a real workspace on disk, a real store and real threads.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from _needs import require

from ctxnb import Workspace
from ctxnb.access import DEFAULT_DENY, GOVERNANCE, PathPolicy
from ctxnb.errors import PolicyError

SECRET = "outside-" + "marker-7f3a"  # built at run time: what must never be read


def _all_content(ws: Workspace) -> str:
    """Every content ever stored, as one string (every version of every file)."""
    if ws.store.latest_tx() is None:
        return ""
    frame = ws.store.scan("file", columns=["content"], format="arrow").to_pydict()
    out = [c for c in frame["content"] if c]
    for oid in ws.store.scan("file", columns=["xt_id"], format="arrow").to_pydict()["xt_id"]:
        out.extend(v.doc.get("content") or "" for v in ws.store.history(oid))
    return "\n".join(out)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "loot.txt").write_text(f"{SECRET}\n")
    (root / "app.py").write_text("x = 1\n")
    (root / ".env").write_text("TOKEN=abc\n")
    (root / "deploy.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (root / "sub").mkdir()
    (root / "sub" / "id_ed25519").write_text("key\n")
    (root / "sub" / "notes.md").write_text("notes\n")
    return root, outside


def test_one_deny_list() -> None:
    from ctxnb.config import PolicyConfig

    assert tuple(PolicyConfig().deny) == DEFAULT_DENY
    assert ".git" in DEFAULT_DENY and ".git/" not in DEFAULT_DENY
    assert ".orchestration/" in GOVERNANCE and ".ctxnb/" in GOVERNANCE


def test_index_never_stores_denied_files_and_counts_them(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    (root / "link.txt").symlink_to(outside / "loot.txt")
    (root / "linkdir").symlink_to(outside)
    ws = Workspace.open(root)
    report = ws.index()
    assert report.created == 2  # app.py and sub/notes.md
    refused = dict(report.denied_paths)
    assert refused[".env"] == "deny:.env*"
    assert refused["deploy.pem"] == "deny:**/*.pem"
    assert refused["sub/id_ed25519"] == "deny:**/id_*"
    assert refused["link.txt"] == "symlink" and refused["linkdir"] == "symlink"
    assert report.denied == len(report.denied_paths) >= 5
    stored = _all_content(ws)
    assert "TOKEN=abc" not in stored and "PRIVATE KEY" not in stored and SECRET not in stored
    for name in (".env", "deploy.pem", "sub/id_ed25519", "link.txt"):
        assert ws.store.get(ws.object_id(name)) is None, name


def test_session_add_path_refuses_denied_and_links(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    (root / "link.txt").symlink_to(outside / "loot.txt")
    (root / "linkdir").symlink_to(outside)
    ws = Workspace.open(root)
    s = ws.session("s")
    for bad in (".env", "deploy.pem", "link.txt", "linkdir/loot.txt", str(outside / "loot.txt")):
        with pytest.raises(PolicyError) as err:
            s.add_path(bad)
        assert err.value.error_code == "PATH_DENIED", bad
    with pytest.raises(PolicyError):
        s.add_paths(["app.py", ".env"])  # one bad path: nothing is added
    assert s.session_index == []
    assert s.add_path("app.py") in s.session_index
    assert "TOKEN" not in _all_content(ws) and SECRET not in _all_content(ws)
    assert SECRET not in s.assemble().to_text()


def test_resume_does_not_follow_a_file_swapped_for_a_link(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    ws = Workspace.open(root)
    s = ws.session("resume")
    oid = s.add_path("sub/notes.md")
    s.save()
    (root / "sub" / "notes.md").unlink()
    (root / "sub" / "notes.md").symlink_to(outside / "loot.txt")
    again = ws.session("resume")
    assert again.last_resume is not None
    assert oid in again.last_resume.orphaned
    assert SECRET not in _all_content(ws)
    assert SECRET not in again.assemble().to_text()
    # A directory above it swapped for a link is refused the same way.
    (root / "sub" / "notes.md").unlink()
    (root / "sub" / "notes.md").write_text("back\n")
    ws.session("resume").save()
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(outside)
    (outside / "notes.md").write_text(f"{SECRET} again\n")
    third = ws.session("resume")
    assert third.last_resume is not None and oid in third.last_resume.orphaned
    assert SECRET not in _all_content(ws)


def _swapper(root: Path, outside: Path, stop: threading.Event) -> threading.Thread:
    """Swap ``root/d`` between a real directory and a link to ``outside`` until stopped."""

    def run() -> None:
        real, parked = root / "d", root / "d.real"
        while not stop.is_set():
            try:
                os.rename(real, parked)
                os.symlink(outside, real)
                os.unlink(real)
                os.rename(parked, real)
            except OSError:
                pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _race_tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    for i in range(20):
        (root / "d" / f"f{i:02}.txt").write_text(f"inside {i} needle\n")
        (outside / f"f{i:02}.txt").write_text(f"{SECRET} needle\n")
    return root, outside


def test_raced_symlink_swap_yields_no_outside_byte_from_index_or_walk(tmp_path: Path) -> None:
    root, outside = _race_tree(tmp_path)
    ws = Workspace.open(root)
    policy = PathPolicy([root])
    stop = threading.Event()
    t = _swapper(root, outside, stop)
    seen_files = 0
    try:
        for _ in range(60):
            ws.index()
            for entry in policy.walk():
                try:
                    data = entry.read()
                except (PolicyError, OSError):
                    continue
                seen_files += 1
                assert SECRET.encode() not in data
    finally:
        stop.set()
        t.join()
    assert seen_files > 0  # the walk did read files while the swap ran
    assert SECRET not in _all_content(ws)


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_raced_symlink_swap_yields_no_outside_byte_from_search(
    tmp_path: Path, backend: str
) -> None:
    if backend == "ripgrep":
        require(shutil.which("rg") is not None, "ripgrep (rg)")
    root, outside = _race_tree(tmp_path)
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("race"), caller="attacker")
    tools.search_backend = backend
    stop = threading.Event()
    t = _swapper(root, outside, stop)
    hits = 0
    try:
        for _ in range(60):
            for hit in tools.search("needle"):
                hits += 1
                assert SECRET not in hit["line"]
    finally:
        stop.set()
        t.join()
    assert hits > 0


def test_raced_swap_yields_nothing_outside_from_ungoverned_search_and_glob(
    tmp_path: Path,
) -> None:
    # The library's own search and glob (no workspace, no policy) walk through the access
    # layer too: neither an outside line nor an outside name comes back.
    from ctxnb.tools.search import glob_files, search

    root, outside = _race_tree(tmp_path)
    (outside / "outside-only.txt").write_text(f"{SECRET} needle\n")
    (outside / "latin1.txt").write_bytes(b"caf\xe9 " + SECRET.encode() + b" needle\n")
    ws = Workspace.open(root)
    tools = ws.tools(ws.session("race"), caller="attacker")
    stop = threading.Event()
    t = _swapper(root, outside, stop)
    hits = names = 0
    try:
        for _ in range(60):
            for m in search(root, "needle", backend="python"):
                hits += 1
                assert SECRET not in m.line and "outside-only" not in m.path
            for listing in (glob_files(root, "**/*.txt"), tools.glob("**/*.txt")):
                names += len(listing)
                assert not {"d/outside-only.txt", "d/latin1.txt"} & set(listing)
    finally:
        stop.set()
        t.join()
    assert hits > 0 and names > 0


GOVERNED_INTENTS = """\
active_intents:
  - id: INT-ALL
    name: Everything
    status: active
    owned_scope: ["**"]
"""


def test_scope_everything_cannot_touch_governance_files(tmp_path: Path) -> None:
    from ctxnb.govern import init_governance

    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("x = 1\n")
    (root / "ctxnb.toml").write_text('profile = "cloud"\n')
    init_governance(root)
    intents = root / ".orchestration" / "active_intents.yaml"
    intents.write_text(GOVERNED_INTENTS)
    trace = root / ".orchestration" / "agent_trace.jsonl"
    ws = Workspace.open(root)
    t = ws.tools(ws.session("gov"), caller="attacker")
    assert t.dispatch("select_active_intent", {"intent_id": "INT-ALL"})["ok"]
    assert t.dispatch(
        "write_file", {"path": "app.py", "content": "x = 2\n", "expected_sha256": None}
    )["error_code"] in ("READ_BEFORE_WRITE",)
    assert t.dispatch("read_file", {"path": "app.py"})["ok"]
    assert t.dispatch("write_file", {"path": "app.py", "content": "x = 2\n"})["ok"]
    before_trace = trace.read_bytes()
    hostile = {
        ".orchestration/active_intents.yaml": "active_intents: []\n",
        ".orchestration/agent_trace.jsonl": "",
        ".orchestration/new.md": "x",
        ".ctxnb/hook-state/x.json": "{}",
        "ctxnb.toml": '[governance]\nquality_commands = ["touch /tmp/pwned"]\n',
        str(root / ".orchestration" / "intent_map.md"): "forged",
        "./.ORCHESTRATION/active_intents.yaml": "x",
    }
    patch = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    for i, (path, content) in enumerate(hostile.items()):
        # Each attempt is a fresh agent after the last: the last ends first, as agents
        # taking turns under one intent do (two live sessions may not hold one scope).
        t.session.close()
        t = ws.tools(ws.session(f"gov-{i}"), caller="attacker")
        assert t.dispatch("select_active_intent", {"intent_id": "INT-ALL"})["ok"]
        for tool, args in (
            ("write_file", {"path": path, "content": content}),
            ("write_file", {"path": path, "content": content, "mode": "create"}),
            ("read_file", {"path": path}),
            ("apply_patch", {"path": path, "unified_diff": patch}),
        ):
            t.hooks.reset_breaker()  # so that the circuit breaker never answers for the policy
            out = t.dispatch(tool, args)
            assert not out["ok"], (tool, path)
            assert out["error_code"] == "PATH_DENIED", (tool, path, out)
            assert out["details"]["rule"].startswith("governance:"), (tool, path, out)
    assert intents.read_text() == GOVERNED_INTENTS
    assert trace.read_bytes()[: len(before_trace)] == before_trace
    assert (root / "ctxnb.toml").read_text() == 'profile = "cloud"\n'
    assert not (root / ".orchestration" / "new.md").exists()
    assert not (root / ".ctxnb" / "hook-state" / "x.json").exists()
    refused = t.dispatch("write_file", {"path": ".orchestration/x", "content": ""})
    assert refused["details"]["rule"].startswith("governance:")


def test_mount_prefixes_work_in_every_file_tool(tmp_path: Path) -> None:
    from ctxnb import MountMapping

    root = tmp_path / "proj"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("x = 1\n")
    (tmp_path / "proj2").mkdir()
    (tmp_path / "proj2" / "x.py").write_text("nope\n")
    ws = Workspace.open(root, mounts=[MountMapping("/workspace", str(root), "fs")])
    t = ws.tools(ws.session("m"), caller="container-agent")
    r = t.read_file("/workspace/src/app.py")
    assert r.content == "x = 1\n" and r.path == "src/app.py"
    assert t.write_file("/workspace/src/app.py", "x = 2\n", expected_sha256=r.sha256).success
    assert (root / "src" / "app.py").read_text() == "x = 2\n"
    assert t.read_lines("/workspace/src/app.py", 1, 1).content == "x = 2\n"
    assert t.get_file_history("/workspace/src/app.py")
    assert t.get_diff("/workspace/src/app.py").path == "src/app.py"
    assert t.summarize_file("/workspace/src/app.py")
    assert t.write_file("/workspace/src/new.py", "y = 1\n", mode="create").success
    assert (root / "src" / "new.py").exists()
    # The same object whether named by the agent's path or the host's.
    assert ws.object_id("src/app.py") in t.session.session_index
    for bad in ("/workspace/../proj2/x.py", "/workspace2/x.py", "/workspace/.env"):
        out = t.dispatch("read_file", {"path": bad})
        assert out["error_code"] == "PATH_DENIED", bad


# -- the Claude Code hooks ----------------------------------------------------------------------
HOOK_INTENTS = """\
active_intents:
  - id: INT-SRC
    name: Source work
    status: active
    owned_scope: ["src/**"]
"""


@pytest.fixture
def hooked(tmp_path: Path) -> Path:
    from ctxnb.govern import init_governance

    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "app.py").write_text("x = 1\n")
    (root / ".env").write_text("TOKEN=abc\n")
    init_governance(root)
    (root / ".orchestration" / "active_intents.yaml").write_text(HOOK_INTENTS)
    return root


def _hook(event: str, payload: dict, *, process: bool = False) -> tuple[int, dict, str]:
    import json
    import subprocess
    import sys

    from ctxnb.integrations.claude_code import run_hook

    text = json.dumps(payload)
    if process:
        proc = subprocess.run(
            [sys.executable, "-m", "ctxnb", "hook", event],
            input=text.encode(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        code, out, err = proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    else:
        r = run_hook(event, text)
        code, out, err = r.exit_code, r.stdout, r.stderr
    return code, (json.loads(out) if out.strip() else {}), err


def _pre(root: Path, tool: str, tool_input: dict, sid: str = "s-1", **kw: bool):
    payload = {
        "session_id": sid,
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
    }
    code, answer, err = _hook("pre-tool-use", payload, **kw)
    return code, answer.get("hookSpecificOutput", {}).get("permissionDecision"), err


def test_a_forged_hook_state_file_changes_nothing(hooked: Path) -> None:
    import json

    from ctxnb.integrations.claude_code import state_dir

    root = hooked
    target = {"file_path": str(root / "src" / "app.py"), "old_string": "1", "new_string": "2"}
    assert _pre(root, "Edit", target)[1] == "deny"  # no intent selected yet
    # The agent writes the state files where the hooks used to keep them ...
    forged = root / ".ctxnb" / "hook-state"
    (forged / "cache").mkdir(parents=True)
    (forged / "s-1.json").write_text(json.dumps({"session_id": "s-1", "intent_id": "INT-SRC"}))
    (forged / "cache" / "settings.json").write_text(
        json.dumps({"key": None, "value": {"deny": [], "allow": None}})
    )
    assert _pre(root, "Edit", target)[1] == "deny"
    assert _pre(root, "Read", {"file_path": str(root / ".env")})[1] == "deny"
    # ... and cannot reach where they live now.
    real = state_dir(root) / "s-1.json"
    assert root not in real.parents
    write = {"file_path": str(real), "content": '{"intent_id": "INT-SRC"}'}
    assert _pre(root, "Write", write)[1] == "deny"
    assert _pre(root, "Write", {"file_path": str(forged / "s-2.json"), "content": "{}"})[1] == (
        "deny"
    )


def test_a_hook_that_crashes_denies(hooked: Path) -> None:
    root = hooked
    intents = root / ".orchestration" / "active_intents.yaml"
    intents.unlink()
    intents.mkdir()  # reading it now fails with an OSError, not a ctxnb error
    target = {"file_path": str(root / "src" / "app.py"), "content": "x = 2\n"}
    for process in (False, True):
        code, decision, err = _pre(root, "Write", target, process=process)
        assert (code, decision) == (2, None), (code, decision, err)
        assert "blocked: internal error: IsADirectoryError" in err and "Traceback" not in err
    assert (root / "src" / "app.py").read_text() == "x = 1\n"


def test_mount_paths_work_in_hooks(hooked: Path) -> None:
    root = hooked
    (root / "ctxnb.toml").write_text(
        f'[[mounts]]\nagent_prefix = "/workspace"\ncanonical_prefix = "{root}"\n'
    )
    from ctxnb.integrations.claude_code import select_intent

    select_intent(root, "INT-SRC", "s-1")
    edit = {"file_path": "/workspace/src/app.py", "old_string": "1", "new_string": "2"}
    assert _pre(root, "Edit", edit) == (0, None, "")  # in scope: no objection
    assert _pre(root, "Read", {"file_path": "/workspace/src/app.py"}) == (0, None, "")
    assert _pre(root, "Read", {"file_path": "/workspace/.env"})[1] == "deny"
    docs = {"file_path": "/workspace/docs/x.md", "content": "x"}
    assert _pre(root, "Write", docs)[1] == "deny"  # out of scope
    assert _pre(root, "Read", {"file_path": "/workspace/../etc/passwd"})[1] == "deny"


def test_post_hook_records_a_store_version_and_an_audit_line(hooked: Path) -> None:
    import json

    from ctxnb.integrations.claude_code import select_intent

    root = hooked
    select_intent(root, "INT-SRC", "s-1")
    (root / "src" / "app.py").write_text("x = 2\n")  # what Claude Code's Edit did
    payload = {
        "session_id": "s-1",
        "cwd": str(root),
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_input": {
            "file_path": str(root / "src" / "app.py"),
            "old_string": "1",
            "new_string": "2",
        },
        "tool_response": {"filePath": str(root / "src" / "app.py"), "success": True},
    }
    code, _, err = _hook("post-tool-use", payload, process=True)
    assert code == 0, err
    ws = Workspace.open(root)
    assert ws.get("src/app.py")["content"] == "x = 2\n"
    lines = (root / ".ctxnb" / "audit.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert (last["caller"], last["tool"], last["intent_id"]) == ("claude-code", "Edit", "INT-SRC")
    assert last["args"]["file_path"] == "src/app.py" and last["success"] is True


def test_rules_links_to_denied_files_and_links_are_never_loaded(tree: tuple[Path, Path]) -> None:
    from ctxnb.instructions import RulesIndex, RulesTracker

    root, outside = tree
    (root / "docs").mkdir()
    (root / "docs" / "style.md").write_text("# Style\nshort lines\n")
    (root / "docs" / "secrets.md").symlink_to(outside / "loot.txt")
    (root / "AGENTS.md").write_text(
        "Read the [environment settings](.env), the [style guide](docs/style.md),\n"
        "the [secret notes](docs/secrets.md) and the [outside](../outside/loot.txt).\n"
    )
    ws = Workspace.open(root)
    s = ws.session("rules")
    index = RulesIndex.discover(ws)
    targets = {link.target for link in index.links()}
    assert targets == {"docs/style.md"}
    tracker = RulesTracker(s, index)
    for query in ("environment settings", "secret notes", "outside", "style guide"):
        tracker.on_query(query)
    loaded = {r.path for r in tracker.records}
    assert loaded == {"AGENTS.md", "docs/style.md"}
    text = s.assemble().to_text()
    assert "TOKEN=abc" not in text and SECRET not in text
    assert "TOKEN=abc" not in _all_content(ws) and SECRET not in _all_content(ws)


def test_the_watcher_does_not_follow_a_file_swapped_for_a_link(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    ws = Workspace.open(root)
    s = ws.session("watch")
    oid = s.add_path("sub/notes.md")
    target = root / "sub" / "notes.md"

    def scripted(dirs: list[str], stop: threading.Event):  # the watchfiles events, replayed
        target.unlink()
        target.symlink_to(outside / "loot.txt")
        yield {(2, str(target))}

    from ctxnb.session.watch import Watcher

    w = Watcher(s, backend=scripted)
    w.start()
    w.join(10)
    assert w.errors == []
    assert SECRET not in _all_content(ws)
    assert s.get(oid)["content"] == "notes\n"  # the last version stays
