"""The overlap check's shortcuts: directory listings and match results kept between
selections must never let two sessions own one file the disk or the index holds."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_partition import make_ws, select

from ctxnb import Workspace
from ctxnb._util.wildmatch import GlobList
from ctxnb.govern.core import files_in_scope, in_scope
from ctxnb.govern.partition import _TRUST_NS, scope_overlap, tree_files


def _settle() -> None:
    # Past the window in which a directory's listing is not kept (its timestamps may
    # not have moved yet): the cache is in use for what follows.
    time.sleep(_TRUST_NS / 1e9 + 0.2)


def test_a_file_made_after_the_check_in_a_kept_directory_is_found(tmp_path):
    """The attack on the kept listings: the directory's mtime is set back to what it
    was after a file is added (a tool that restores timestamps), and the index never
    saw the file: both src/** and *.css own it, so the second session is refused."""
    root = make_ws(tmp_path / "ws")
    gen = root / "src" / "gen"
    _settle()
    ws = Workspace.open(root)
    ta, tb = ws.tools(ws.session("a")), ws.tools(ws.session("b"))
    assert select(ta, "INT-APP")["ok"]
    assert select(tb, "INT-CSS")["ok"]  # no .css anywhere: lists (and keeps) the tree
    assert select(tb, "INT-CSS")["ok"]  # again, from what was kept
    before = os.stat(gen)
    (gen / "theme.css").write_text("a { color: red }\n")
    os.utime(gen, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(gen).st_mtime_ns == before.st_mtime_ns
    out = select(tb, "INT-CSS")
    assert out["error_code"] == "SCOPE_OVERLAP", out
    assert "src/gen/theme.css" in out["message"]


def test_a_directory_made_or_renamed_into_a_kept_tree_is_walked(tmp_path):
    root = tmp_path / "t"
    (root / "src" / "a").mkdir(parents=True)
    (root / "src" / "a" / "x.py").write_text("")
    (root / "elsewhere" / "deep").mkdir(parents=True)
    (root / "elsewhere" / "deep" / "y.css").write_text("")
    _settle()
    assert sorted(tree_files(root, ["src/**"])) == ["src/a/x.py"]
    assert sorted(tree_files(root, ["src/**"])) == ["src/a/x.py"]  # kept listings
    (root / "src" / "a" / "b").mkdir()
    (root / "src" / "a" / "b" / "z.css").write_text("")
    os.rename(root / "elsewhere" / "deep", root / "src" / "deep")
    assert sorted(tree_files(root, ["src/**"])) == [
        "src/a/b/z.css",
        "src/a/x.py",
        "src/deep/y.css",
    ]
    # A directory replaced by a file of the same name (and back) is seen each time.
    os.rename(root / "src" / "deep", root / "gone")
    (root / "src" / "deep").write_text("")
    assert sorted(tree_files(root, ["src/**"])) == ["src/a/b/z.css", "src/a/x.py", "src/deep"]


def test_a_file_removed_from_disk_and_index_frees_the_scope(tmp_path):
    """The kept results follow the files both ways: a removed file is no overlap."""
    root = make_ws(tmp_path / "ws")
    (root / "src" / "theme.css").write_text("a {}\n")
    ws = Workspace.open(root)
    ta, tb = ws.tools(ws.session("a")), ws.tools(ws.session("b"))
    assert select(ta, "INT-APP")["ok"]
    assert select(tb, "INT-CSS")["error_code"] == "SCOPE_OVERLAP"
    (root / "src" / "theme.css").unlink()
    assert select(tb, "INT-CSS")["ok"]


# -- the bulk matcher is the single-path matcher -------------------------------------------------
_SEG = st.sampled_from(["src", "a", "b.py", "x.md", "gen", "A", ".env", "b"])
_PATH = st.lists(_SEG, min_size=1, max_size=5).map("/".join)
_GLOB = st.one_of(
    st.sampled_from(
        ["src/**", "*.py", "a/", "!b.py", "src/*", "**/gen/**", "/a/b.py", "!src/a/**", "A"]
    ),
    st.lists(
        st.sampled_from(["src", "a", "*", "**", "b.py", "?", "[ab]*"]), min_size=1, max_size=4
    ).map("/".join),
)
_ODD = st.sampled_from(["./a/b.py", "src//a", "src/./b.py", "../src/a", "/src/a", "src/a/", ""])


@settings(max_examples=400, deadline=None)
@given(st.lists(_GLOB, min_size=1, max_size=4), st.lists(st.one_of(_PATH, _ODD), max_size=30))
def test_bulk_matching_agrees_with_in_scope_path_by_path(globs, paths):
    assert GlobList(globs).match_files([p for p in paths if p and not p.startswith("/")]) == [
        p for p in paths if p and not p.startswith("/") and GlobList(globs).match_file(p)
    ]
    assert files_in_scope(globs, paths) == [p for p in paths if in_scope(globs, p)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_GLOB, min_size=1, max_size=3),
    st.lists(_GLOB, min_size=1, max_size=3),
    st.lists(_PATH, max_size=30),
)
def test_scope_overlap_is_every_file_both_scopes_own(a, b, files):
    common = scope_overlap(a, b, files, strict=True)
    both = sorted(f for f in files if in_scope(a, f) and in_scope(b, f))
    # None only when the globs alone rule an overlap out, and then no file has both.
    assert (common if common is not None else []) == both


def test_tree_files_is_os_walk(tmp_path: Path):
    root = tmp_path / "t"
    for rel in ("src/a/x.py", "src/b.py", "docs/c.md", ".git/HEAD", ".ctxnb/s", "deep/.git/k"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "link").symlink_to(root / "src", target_is_directory=True)
    (root / "flink.py").symlink_to(root / "src" / "b.py")
    walked = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in (".git", ".ctxnb")]
        walked += [os.path.normpath(os.path.join(rel, f)) for f in filenames]
    assert sorted(tree_files(root, ["*.py"])) == sorted(walked)
    assert "deep/.git/k" in walked and "flink.py" in walked and "link" not in walked


def test_a_start_directory_that_is_a_link_is_walked_and_followed_when_it_moves(tmp_path):
    """The walk's start is followed as os.walk follows its top (a workspace whose src/
    is a link), and a link pointed elsewhere is not answered from the old listing."""
    root = tmp_path / "t"
    for d, name in (("one", "a.py"), ("two", "b.py")):
        (tmp_path / d).mkdir()
        (tmp_path / d / name).write_text("")
    root.mkdir()
    (root / "src").symlink_to(tmp_path / "one", target_is_directory=True)
    _settle()
    assert tree_files(root, ["src/**"]) == ["src/a.py"]
    assert tree_files(root, ["src/**"]) == ["src/a.py"]
    (root / "src").unlink()
    (root / "src").symlink_to(tmp_path / "two", target_is_directory=True)
    assert tree_files(root, ["src/**"]) == ["src/b.py"]
