"""Rules discovery without a second walk: every change a walk would see is still seen.

After one walk, a discovery stats the directories it entered instead of walking again.
Each stage below waits out the racy window (a real tree is older than two seconds),
lets a discovery remember the tree, changes it the way an editor or an agent would,
and checks the next discovery against a fresh walk (an index with no memory).
"""

import os
import time

import pytest

from ctxnb import Workspace
from ctxnb.instructions import RulesIndex

pytestmark = pytest.mark.slow  # each stage waits out the two-second racy window


def _settle() -> None:
    time.sleep(2.1)


def _write_keeping_stat(path, old: str, new: str) -> None:
    """Same size, same mtime (and the directory's mtime put back too)."""
    assert len(old) == len(new)
    st, dst = path.stat(), path.parent.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.utime(path.parent, ns=(dst.st_atime_ns, dst.st_mtime_ns))


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "ws"
    for rel, text in {
        "AGENTS.md": "See [style](docs/style.md).\n",
        "docs/style.md": "# Style\n",
        "docs/types.md": "# Types\n",
        "a/AGENTS.md": "rules of a\n",
        "a/b/x.py": "x = 1\n",
        "ignored/AGENTS.md": "hidden rules\n",
        ".gitignore": "ignored/\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_each_change_is_seen_without_walking_when_nothing_changed(tree, monkeypatch):
    ws = Workspace.open(tree)
    walks = []
    real_walk = ws.policy.walk

    def counted(*args, **kwargs):
        walks.append(1)
        return real_walk(*args, **kwargs)

    monkeypatch.setattr(ws.policy, "walk", counted)

    def check() -> RulesIndex:
        index = RulesIndex.discover(ws)
        fresh = RulesIndex.discover(str(tree))  # its own policy: a full walk
        assert list(index.files) == list(fresh.files)
        assert [lk.target for lk in index.links()] == [lk.target for lk in fresh.links()]
        return index

    def remembered() -> None:
        _settle()
        check()  # walks (the last change is recent) and remembers a settled tree
        before = len(walks)
        check()
        assert len(walks) == before  # nothing changed: no walk

    remembered()
    assert list(check().files) == ["AGENTS.md", "a/AGENTS.md"]

    # A rules file in a new directory, however deep.
    (tree / "n1" / "n2" / "n3").mkdir(parents=True)
    (tree / "n1" / "n2" / "n3" / "AGENTS.md").write_text("deep rules\n")
    assert "n1/n2/n3/AGENTS.md" in check().files

    # A rules file removed.
    remembered()
    (tree / "a" / "AGENTS.md").unlink()
    assert "a/AGENTS.md" not in check().files

    # A rules file added to a directory whose mtime is then put back (its ctime moves).
    remembered()
    d = tree / "a" / "b"
    st = d.stat()
    (d / "AGENTS.md").write_text("rules of b\n")
    os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "a/b/AGENTS.md" in check().files

    # A rules file edited with the same size and mtime: its link now goes elsewhere.
    remembered()
    _write_keeping_stat(tree / "AGENTS.md", "docs/style.md", "docs/types.md")
    assert [lk.target for lk in check().links()] == ["docs/types.md"]

    # A .gitignore edited with the same size and mtime: an ignored directory's rules
    # come into view.
    remembered()
    _write_keeping_stat(tree / ".gitignore", "ignored/", "ignorex/")
    assert "ignored/AGENTS.md" in check().files


def test_a_new_workspace_object_walks_its_own_tree(tree):
    # What one workspace remembers is its own: another policy (another config) walks.
    first = Workspace.open(tree)
    RulesIndex.discover(first)
    (tree / "c").mkdir()
    (tree / "c" / "AGENTS.md").write_text("rules of c\n")
    assert "c/AGENTS.md" in RulesIndex.discover(Workspace.open(tree)).files


def test_a_resumed_session_sees_rules_added_and_edited_since_its_save(tree):
    from ctxnb.instructions import tracker_for

    ws = Workspace.open(tree)
    s = ws.session("r")
    s.add_path("a/b/x.py", activate=False)
    s.save()
    _settle()
    ws.session("r")  # remembers a settled tree
    (tree / "d1" / "d2").mkdir(parents=True)
    (tree / "d1" / "d2" / "AGENTS.md").write_text("deep rules\n")
    _write_keeping_stat(tree / "AGENTS.md", "See [style]", "SEE [style]")
    r = ws.session("r")
    assert "d1/d2/AGENTS.md" in tracker_for(r).index.files
    assert "SEE [style]" in r.assemble(record=False).to_text()


def test_only_the_changed_directories_and_those_above_them_are_listed(tree, monkeypatch):
    from ctxnb.access.ignore import TreeIgnores

    for d in ("p/q/r", "p/s", "t/u"):
        (tree / d).mkdir(parents=True)
        (tree / d / "AGENTS.md").write_text(f"rules of {d}\n")
    ws = Workspace.open(tree)
    _settle()
    RulesIndex.discover(ws)  # a settled tree, remembered
    entered = []
    real_on_dir = TreeIgnores.on_dir

    def spy(self, rel, read):
        entered.append(rel)
        return real_on_dir(self, rel, read)

    monkeypatch.setattr(TreeIgnores, "on_dir", spy)
    (tree / "p" / "q" / "new").mkdir()
    (tree / "p" / "q" / "new" / "AGENTS.md").write_text("new rules\n")
    (tree / "p" / "s" / "AGENTS.md").unlink()
    index = RulesIndex.discover(ws)
    assert sorted(entered) == ["", "p", "p/q", "p/q/new", "p/s"]
    fresh = RulesIndex.discover(str(tree))
    assert list(index.files) == list(fresh.files)
    assert "p/q/new/AGENTS.md" in index.files and "p/s/AGENTS.md" not in index.files
    assert "t/u/AGENTS.md" in index.files and "p/q/r/AGENTS.md" in index.files


@pytest.mark.parametrize("name", [".gitignore", ".ctxnbignore"])
def test_an_ignore_file_added_or_removed_judges_the_whole_subtree_again(tree, name):
    (tree / "p" / "q").mkdir(parents=True)
    (tree / "p" / "q" / "AGENTS.md").write_text("rules of q\n")
    (tree / "w" / "v").mkdir(parents=True)
    (tree / "w" / "v" / "AGENTS.md").write_text("rules of v\n")
    (tree / "w" / name).write_text("AGENTS.md\n")  # at any depth below w
    ws = Workspace.open(tree)
    _settle()
    assert "p/q/AGENTS.md" in RulesIndex.discover(ws).files  # remembered, settled
    (tree / "p" / name).write_text("AGENTS.md\n")  # p's listing changes, q's does not
    (tree / "w" / name).unlink()  # w's too: v's rules are no longer ignored
    index = RulesIndex.discover(ws)
    assert "p/q/AGENTS.md" not in index.files and "w/v/AGENTS.md" in index.files
    assert list(index.files) == list(RulesIndex.discover(str(tree)).files)


def test_random_changes_are_found_as_a_fresh_walk_finds_them(tree, monkeypatch):
    # Many rounds of remember, change, rediscover. The racy window is set to nothing
    # and each change waits 30 ms (past the filesystem clock's tick) instead, so that
    # every round goes through the remembered walk rather than around it.
    import random
    import shutil

    from ctxnb.access import observe

    monkeypatch.setattr(observe, "RACY_NS", 0)
    rng = random.Random(31)
    ws = Workspace.open(tree)

    def dirs() -> list:
        out = [tree]
        for p in sorted(tree.rglob("*")):
            if p.is_dir() and ".ctxnb" not in p.parts and ".git" not in p.parts:
                out.append(p)
        return out

    for _ in range(40):
        RulesIndex.discover(ws)
        time.sleep(0.03)
        for _ in range(rng.randint(1, 3)):
            d = rng.choice(dirs())
            op = rng.randrange(7)
            if op == 0:
                (d / rng.choice("xyz") / rng.choice("uv")).mkdir(parents=True, exist_ok=True)
            elif op == 1:
                (d / "AGENTS.md").write_text(f"rules {rng.random()}\n")
            elif op == 2 and (d / "AGENTS.md").exists():
                (d / "AGENTS.md").unlink()
            elif op == 3:
                pattern = rng.choice(["AGENTS.md", "x/", "*.md", "!AGENTS.md", "u", ""])
                (d / rng.choice([".gitignore", ".ctxnbignore"])).write_text(pattern + "\n")
            elif op == 4:
                for name in (".gitignore", ".ctxnbignore"):
                    if (d / name).exists():
                        (d / name).unlink()
            elif op == 5 and d != tree:
                d.rename(d.with_name(d.name + "m"))
            elif op == 6 and d != tree and d.name not in ("a", "docs"):
                shutil.rmtree(d)
        index = RulesIndex.discover(ws)
        assert list(index.files) == list(RulesIndex.discover(str(tree)).files)


def _counting(ws, monkeypatch) -> list[int]:
    walks: list[int] = []
    real_walk = ws.policy.walk

    def counted(*args, **kwargs):
        walks.append(1)
        return real_walk(*args, **kwargs)

    monkeypatch.setattr(ws.policy, "walk", counted)
    return walks


def test_a_new_process_takes_the_kept_walk_and_still_sees_changes(tree, monkeypatch):
    # A workspace object of its own stands for a new process: its policy is new, so
    # nothing of the last walk is in memory; only .ctxnb/sessions/rules-walk.json is.
    from ctxnb.session._cold import rules_walk_path

    (tree / ".ctxnb").mkdir()
    _settle()
    RulesIndex.discover(Workspace.open(tree))
    assert rules_walk_path(tree).is_file()
    ws = Workspace.open(tree)
    walks = _counting(ws, monkeypatch)
    assert list(RulesIndex.discover(ws).files) == ["AGENTS.md", "a/AGENTS.md"]
    assert walks == []  # nothing changed: the kept walk's directories were stat'ed
    (tree / "a" / "b" / "AGENTS.md").write_text("rules of b\n")
    ws = Workspace.open(tree)
    walks = _counting(ws, monkeypatch)
    assert "a/b/AGENTS.md" in RulesIndex.discover(ws).files
    assert walks == [1]


def _forge_walk(tree, change) -> None:
    """Edit the kept walk and seal it again with the workspace's secret (what a process
    of the user outside ctxnb could do)."""
    from ctxnb.session._cold import read_sealed, rules_walk_path, write_sealed

    path = rules_walk_path(tree)
    doc = read_sealed(path)
    change(doc)
    assert write_sealed(path, doc)


def _hide_rules(doc) -> None:
    doc["found"] = []  # believed, the next discovery would find no rules file at all


@pytest.mark.parametrize(
    "how",
    [
        "sealed",  # the control: the forgery is taken when the file is believed
        "sha256 line",
        "plain-hash seal",
        "copied .ctxnb",
        "group-writable",
        "symlinked file",
        "readable key",
    ],
)
def test_a_kept_walk_not_sealed_by_this_workspace_is_not_believed(tree, monkeypatch, how):
    import hashlib
    import json
    import shutil

    from ctxnb.session._cold import read_sealed, rules_walk_path

    (tree / ".ctxnb").mkdir()
    _settle()
    RulesIndex.discover(Workspace.open(tree))
    path, state = rules_walk_path(tree), tree / ".ctxnb"
    _forge_walk(tree, _hide_rules)
    body = json.dumps(read_sealed(path)).encode()
    if how == "sha256 line":  # a right SHA-256 where the MAC goes, and no secret
        path.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    elif how == "plain-hash seal":  # the plain-hash seal these files had before
        path.write_bytes(b"CTXNBCR1" + hashlib.sha256(body).digest() + body)
    elif how == "copied .ctxnb":  # the same bytes, secret and all, in new inodes
        shutil.copytree(state, tree / "copy", symlinks=True)
        shutil.rmtree(state)
        (tree / "copy").rename(state)  # the root is listed again; a/ is not
    elif how == "group-writable":
        path.chmod(0o620)
    elif how == "symlinked file":
        path.rename(state / "real-walk.json")
        path.symlink_to(state / "real-walk.json")
    elif how == "readable key":
        (state / "judgments.key").chmod(0o640)
    files = list(RulesIndex.discover(Workspace.open(tree)).files)
    if how == "sealed":
        assert files == []
    else:
        assert files == ["AGENTS.md", "a/AGENTS.md"]


def test_a_forged_kept_walk_cannot_bring_in_a_denied_file(tree, monkeypatch):
    (tree / ".ctxnb").mkdir()
    (tree / ".env").write_text("TOKEN=not-a-real-one\n")
    _settle()
    RulesIndex.discover(Workspace.open(tree))
    _forge_walk(tree, lambda doc: doc["found"].append(".env"))
    files = RulesIndex.discover(Workspace.open(tree)).files
    assert ".env" not in files and list(files) == ["AGENTS.md", "a/AGENTS.md"]


@pytest.mark.parametrize("how", ["damaged", "other settings", "other digest"])
def test_a_kept_walk_that_does_not_match_is_walked_again(tree, monkeypatch, how):
    import dataclasses

    from ctxnb.session._cold import rules_walk_path

    (tree / ".ctxnb").mkdir()
    _settle()
    RulesIndex.discover(Workspace.open(tree))
    path = rules_walk_path(tree)
    config = None
    if how == "damaged":
        data = bytearray(path.read_bytes())
        data[-2] ^= 1
        path.write_bytes(bytes(data))
    elif how == "other settings":  # handed in: the tree itself is not touched
        cfg = Workspace.open(tree).config
        config = dataclasses.replace(
            cfg, index=dataclasses.replace(cfg.index, ignore=["nothing-here/"])
        )
    else:
        _forge_walk(tree, lambda doc: doc.update(digest="0" * 64))
    ws = Workspace.open(tree, config=config)
    walks = _counting(ws, monkeypatch)
    index = RulesIndex.discover(ws)
    assert walks == [1]  # a kept walk that matched would have been taken (no walk)
    assert list(index.files) == list(RulesIndex.discover(str(tree)).files)
