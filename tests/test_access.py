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
