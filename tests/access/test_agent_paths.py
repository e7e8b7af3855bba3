"""Every door takes the agent's paths (issue #28, point 2), and the context names files by
workspace-relative or agent path, never by the host's layout (point 7)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxnb import MountMapping, Workspace

_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)


def _workspace(files: dict[str, str], mounts: list[tuple[str, str]]) -> tuple[Path, Workspace]:
    root = Path(tempfile.mkdtemp()).resolve()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    probe = Workspace.open(root)
    fs = probe.resolver.default_filesystem_id()
    probe.close()
    table = [
        MountMapping(agent, str(root / sub) if sub else str(root), fs) for agent, sub in mounts
    ]
    return root, Workspace.open(root, mounts=table)


@st.composite
def mount_tables(draw: st.DrawFn) -> tuple[dict[str, str], list[tuple[str, str]]]:
    dirs = draw(st.lists(_NAME, min_size=1, max_size=3, unique=True))
    files = {}
    for d in dirs:
        for name in draw(st.lists(_NAME, min_size=1, max_size=3, unique=True)):
            files[f"{d}/{name}.py"] = f"value = {draw(st.integers(0, 999))}  # {d}/{name}\n"
    # The workspace root under one agent prefix, and perhaps a longer prefix for one
    # of its folders (the longest prefix wins; both name the same files).
    top = "/" + draw(_NAME)
    mounts = [(top, "")]
    if draw(st.booleans()):
        mounts.append((f"{top}/{draw(_NAME)}-{draw(_NAME)}", draw(st.sampled_from(dirs))))
    return files, mounts


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mount_tables())
def test_every_tool_takes_agent_paths_and_answers_in_kind(
    table: tuple[dict[str, str], list[tuple[str, str]]],
) -> None:
    files, mounts = table
    root, ws = _workspace(files, mounts)
    try:
        session = ws.session("s", rules=False)
        tools = ws.tools(session)
        for agent, sub in mounts:
            under = {rel for rel in files if not sub or rel.startswith(sub + "/")}
            shown = {f"{agent}/{rel[len(sub) + 1 :] if sub else rel}": rel for rel in under}
            # globs name the files the way the caller did
            assert set(tools.glob(f"{agent}/**/*.py")) == set(shown)
            assert set(tools.list_files([f"{agent}/**/*.py"])) == set(shown)
            for agent_path, rel in shown.items():
                result = tools.read_file(agent_path)
                assert result.path == rel and result.content == files[rel]
                # Through the agent's door (MCP, live runs), the answer names the file
                # the way the call did.
                answer = tools.dispatch("read_file", {"path": agent_path})["result"]
                assert answer["path"] == agent_path and answer["doc_path"] == rel.lower()
                hits = tools.search(f"# {rel[:-3]}$", globs=[f"{agent}/**/*.py"])
                assert [h["path"] for h in hits] == [agent_path]
                oid = session.add_path(agent_path)
                assert oid == ws.object_id(rel)
                history = tools.get_file_history(agent_path)
                assert history and history[-1].action in ("created", "unchanged")
        assert str(root) not in session.assemble().to_text()
        # a host path in a glob gives host paths back
        assert set(tools.glob(f"{root}/**/*.py")) == {f"{root}/{rel}" for rel in files}
    finally:
        ws.close()
        shutil.rmtree(root, ignore_errors=True)


def test_the_context_labels_files_without_the_host_path(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("a = 1\n")
    ws = Workspace.open(root)
    session = ws.session("s", rules=False)
    session.add_path("src/a.py")
    ws.tools(session).read_file("src/a.py")
    ctx = session.assemble()
    assert str(root) not in ctx.to_text()
    assert "- file src/a.py" in ctx.to_text()
    assert [i.label for i in ctx.section("active").items if i.label.endswith("a.py")] == [
        "src/a.py"
    ]


def test_under_a_mount_the_context_labels_files_by_agent_path(tmp_path: Path) -> None:
    root, ws = _workspace({"src/a.py": "a = 1\n"}, [("/workspace", "")])
    try:
        session = ws.session("s", rules=False)
        session.add_path("/workspace/src/a.py")
        text = session.assemble().to_text()
        assert "/workspace/src/a.py" in text and str(root) not in text
    finally:
        ws.close()
        shutil.rmtree(root, ignore_errors=True)


def test_the_agents_door_answers_with_the_real_name_under_the_callers_mount(
    tmp_path: Path,
) -> None:
    root, ws = _workspace({"src/App.py": "x = 1\n"}, [("/workspace", ""), ("/code", "src")])
    try:
        tools = ws.tools(ws.session("s", rules=False))
        for given, shown in [
            ("/workspace/src/app.py", "/workspace/src/App.py"),  # a docPath variant
            ("/code/App.py", "/code/App.py"),  # the longer mount, as the caller used it
            ("/workspace/src/App.py", "/workspace/src/App.py"),
            ("src/app.py", "src/App.py"),  # relative in, relative out
        ]:
            out = tools.dispatch("read_file", {"path": given})
            assert out["ok"] and out["result"]["path"] == shown, (given, out)
        wrote = tools.dispatch("write_file", {"path": "/code/new.py", "content": "y\n"})
        assert wrote["result"]["path"] == "/code/new.py"
        assert (root / "src" / "new.py").read_text() == "y\n"
    finally:
        ws.close()
        shutil.rmtree(root, ignore_errors=True)


def test_a_mounts_filesystem_id_is_the_identity_of_its_files(tmp_path: Path) -> None:
    root = (tmp_path / "proj").resolve()
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    (root / "data").mkdir()
    (root / "data" / "d.csv").write_text("a,b\n")
    mounts = [
        MountMapping("/workspace", str(root), "proj-fs"),
        MountMapping("/data", str(root / "data"), "nfs"),  # a longer canonical prefix
    ]
    with Workspace.open(root, mounts=mounts) as ws:
        ws.index()
        session = ws.session("s", rules=False)
        tools = ws.tools(session)
        for agent, rel, fs in [
            ("/workspace/src/a.py", "src/a.py", "proj-fs"),
            ("/data/d.csv", "data/d.csv", "nfs"),
            ("/workspace/data/d.csv", "data/d.csv", "nfs"),  # the same file, another door
        ]:
            source = ws.resolver.resolve(agent)
            assert ws.resolver.filesystem_of(source.path) == fs
            oid = session.add_path(agent)
            assert oid == ws.object_id(rel) == ws.store.get(oid)["xt/id"]
            assert ws.source_for(rel).filesystem_id == fs
        assert tools.dispatch("read_file", {"path": "/workspace/src/a.py"})["ok"]
        wrote = tools.dispatch("write_file", {"path": "/workspace/src/a.py", "content": "x = 2\n"})
        assert wrote["ok"], wrote
        versions = ws.history("src/a.py")
        assert [v.doc["content"] for v in versions] == ["x = 1\n", "x = 2\n"]
        # One object per file in the store: the index, the session and the write agree.
        docs = ws.store.get_many(ws.store.ids("file")).values()
        sources = {(d["source"]["filesystemId"], d["source"]["path"]) for d in docs}
        assert sources == {("proj-fs", f"{root}/src/a.py"), ("nfs", f"{root}/data/d.csv")}


def _folded_reference(parts: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The three forms computed for every name, as before the ASCII shortcuts."""
    import unicodedata

    variants = {tuple(p.lower() for p in parts)}
    variants.add(tuple(unicodedata.normalize("NFKC", p).lower() for p in parts))
    variants.add(tuple((p.rstrip(" .") or p).lower() for p in parts))
    return sorted(variants)


_NAME_CHARS = st.sampled_from(list("aZ.  _-~9") + ["Ｅ", "ﬁ", "é", "\u2024", "K", "ß", "İ"])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(_NAME_CHARS, min_size=1, max_size=6), min_size=1, max_size=4))
def test_the_denial_forms_of_a_name_skip_no_form_that_differs(names: list[str]) -> None:
    # The walk judges every name it meets: ASCII names skip NFKC, names without a
    # trailing dot or space skip the stripped form. Neither may drop a form that
    # differs from the others (a denied name matched only by it would be let through).
    from ctxnb.access.pathrules import folded

    parts = tuple(names)
    assert folded(parts) == _folded_reference(parts)


def test_a_long_non_ascii_name_is_measured_in_bytes(tmp_path: Path) -> None:
    from ctxnb.access import PathPolicy
    from ctxnb.errors import PolicyError

    policy = PathPolicy([tmp_path])
    (tmp_path / ("a" * 255)).write_text("x")  # 255 bytes: the longest name
    (tmp_path / ("é" * 127)).write_text("x")  # 254 bytes
    entries = {e.rel for e in policy.walk()}
    assert "a" * 255 in entries and "é" * 127 in entries
    with pytest.raises(PolicyError, match="over 255"):
        policy.stat("é" * 128)  # 256 bytes in 128 characters
