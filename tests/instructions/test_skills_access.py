"""Skills are read through the access layer: links and denied paths never yield a skill.

Each test plants a valid skill outside the workspace (its body holds a marker) and tries
to get it loaded through a symbolic link, a denied folder or a link swapped in while
discovery runs. No outside byte may come back, in any field of any skill.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from ctxnb import Workspace
from ctxnb.errors import CtxnbError, PolicyError
from ctxnb.instructions import RulesIndex
from ctxnb.instructions.skills import Skill, SkillSet, discover_skills, load_skill

OUTSIDE = "OUTSIDE-MARKER-7f3a"


def write_skill(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Does {name} {body}.\n---\n{body}\n"
    )
    return folder


def leaked(skills: SkillSet | list[Skill]) -> list[str]:
    out = []
    for s in skills:
        text = f"{s.body} {s.description} {s.frontmatter} {s.files}"
        if OUTSIDE in text:
            out.append(s.name)
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A skills folder outside the workspace holding a valid skill ``pdf``."""
    d = tmp_path / "outside" / "skills"
    write_skill(d / "pdf", "pdf", OUTSIDE)
    (d / "pdf" / "references").mkdir()
    (d / "pdf" / "references" / "notes.md").write_text(OUTSIDE)
    return d


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "ws"
    r.mkdir()
    return r


def test_symlinked_skills_folder_pointing_outside(root: Path, outside: Path) -> None:
    (root / ".claude").mkdir()
    (root / ".claude" / "skills").symlink_to(outside, target_is_directory=True)
    write_skill(root / ".ctxnb" / "skills" / "lint", "lint", "inside")
    skills = discover_skills(root)
    assert skills.names() == ["lint"] and leaked(skills) == []
    assert [e.path for e in skills.errors] == [root / ".claude" / "skills"]
    assert "symbolic link" in skills.errors[0].problem


def test_symlinked_ctxnb_folder(root: Path, outside: Path) -> None:
    (root / ".ctxnb").symlink_to(outside.parent, target_is_directory=True)
    skills = discover_skills(root)
    assert len(skills) == 0 and leaked(skills) == []


def test_symlinked_skill_folder_and_skill_file(root: Path, outside: Path) -> None:
    skills_dir = root / ".ctxnb" / "skills"
    skills_dir.mkdir(parents=True)
    (skills_dir / "pdf").symlink_to(outside / "pdf", target_is_directory=True)
    linked = skills_dir / "docs"
    linked.mkdir()
    (linked / "SKILL.md").symlink_to(outside / "pdf" / "SKILL.md")
    # An in-workspace link is refused too: it would give one file two names.
    write_skill(skills_dir / "real", "real", "inside")
    (skills_dir / "real" / "references").mkdir()
    (skills_dir / "real" / "references" / "alias.md").symlink_to(skills_dir / "real" / "SKILL.md")
    skills = discover_skills(root)
    assert skills.names() == ["real"] and leaked(skills) == []
    assert skills["real"].files["references"] == []
    problems = {e.path.relative_to(root).as_posix(): e.problem for e in skills.errors}
    assert set(problems) == {".ctxnb/skills/pdf", ".ctxnb/skills/docs/SKILL.md"}
    assert all("symbolic link" in p for p in problems.values())
    with pytest.raises(Exception, match="symbolic link"):
        load_skill(skills_dir / "pdf")
    with pytest.raises(Exception, match="symbolic link"):
        load_skill(linked)


def test_skill_under_a_denied_path(root: Path) -> None:
    write_skill(root / ".git" / "skills" / "a", "a", OUTSIDE)
    write_skill(root / ".env" / "skills" / "b", "b", OUTSIDE)
    write_skill(root / ".ctxnb" / "store" / "c", "c", OUTSIDE)
    write_skill(root / "secrets" / "skills" / "d", "d", OUTSIDE)
    dirs = [".git/skills", ".env/skills", ".ctxnb/store", "secrets/skills", ".ctxnb/skills"]
    skills = discover_skills(root, dirs=dirs, deny=[".git", ".env*", ".ctxnb/", "secrets/"])
    assert len(skills) == 0 and leaked(skills) == []
    # Without the deny glob, the same folder loads: the rule is what refused it.
    assert discover_skills(root, dirs=["secrets/skills"], deny=[]).names() == ["d"]


def test_denied_files_inside_a_skill_are_not_listed(root: Path) -> None:
    folder = write_skill(root / ".ctxnb" / "skills" / "deploy", "deploy", "inside")
    (folder / "assets").mkdir()
    (folder / "assets" / "server.pem").write_text(OUTSIDE)
    (folder / "assets" / "id_rsa").write_text(OUTSIDE)
    (folder / "assets" / "config.yaml").write_text("ok\n")
    skills = discover_skills(root)
    assert skills["deploy"].files["assets"] == ["assets/config.yaml"]


def test_ctxnb_folder_other_than_skills_stays_denied(root: Path) -> None:
    write_skill(root / ".ctxnb" / "skills" / "ok", "ok", "inside")
    write_skill(root / ".ctxnb" / "skillsx" / "no", "no", OUTSIDE)
    skills = discover_skills(root, dirs=[".ctxnb/skills", ".ctxnb/skillsx"])
    assert skills.names() == ["ok"]


@pytest.mark.parametrize("where", ["", "/..", "../outside/skills", "/etc"])
def test_skills_folder_must_be_inside_the_workspace(root: Path, outside: Path, where: str) -> None:
    skills = discover_skills(root, dirs=[where])
    assert len(skills) == 0 and leaked(skills) == []


def test_workspace_config_deny_and_skills_root(root: Path) -> None:
    (root / "ctxnb.toml").write_text(
        '[policy]\ndeny = [".git", ".ctxnb/", "private/"]\n[skills]\nroot = "private/skills"\n'
    )
    write_skill(root / "private" / "skills" / "p", "p", OUTSIDE)
    write_skill(root / ".ctxnb" / "skills" / "q", "q", "inside")
    index = RulesIndex.discover(Workspace.open(root))
    assert index.skills.names() == ["q"] and leaked(index.skills) == []


def _swapper(
    path: Path, target: Path, stop: threading.Event, swaps: list[int], *, is_dir: bool
) -> None:
    """Flip ``path`` between its real self and a symbolic link to ``target``."""
    hold = path.with_name(path.name + ".hold")
    while not stop.is_set():
        os.rename(path, hold)
        os.symlink(target, path, target_is_directory=is_dir)
        stop.wait(0.0002)  # each state lasts a moment, so readers meet both
        os.unlink(path)
        os.rename(hold, path)
        swaps[0] += 1
        stop.wait(0.0002)


@pytest.mark.parametrize(
    "swapped",
    [".ctxnb", ".ctxnb/skills", ".ctxnb/skills/pdf", ".ctxnb/skills/pdf/SKILL.md"],
)
def test_raced_swap_to_a_symlink_never_returns_outside_bytes(
    root: Path, outside: Path, swapped: str
) -> None:
    write_skill(root / ".ctxnb" / "skills" / "pdf", "pdf", "inside")
    (root / ".ctxnb" / "skills" / "pdf" / "references").mkdir()
    (root / ".ctxnb" / "skills" / "pdf" / "references" / "a.md").write_text("inside")
    target = {
        ".ctxnb": outside.parent,
        ".ctxnb/skills": outside,
        ".ctxnb/skills/pdf": outside / "pdf",
        ".ctxnb/skills/pdf/SKILL.md": outside / "pdf" / "SKILL.md",
    }[swapped]
    stop = threading.Event()
    swaps = [0]
    t = threading.Thread(
        target=_swapper,
        args=(root / swapped, target, stop, swaps),
        kwargs={"is_dir": swapped != ".ctxnb/skills/pdf/SKILL.md"},
    )
    t.start()
    runs = loaded = 0
    bad: list[str] = []
    deadline = time.monotonic() + 2.0
    give_up = deadline + 30.0  # a busy machine: keep going until the inside skill loaded
    try:
        while (time.monotonic() < deadline or runs < 50 or not loaded) and (
            time.monotonic() < give_up
        ):
            skills = discover_skills(root)
            runs += 1
            loaded += len(skills)
            bad += leaked(skills)
    finally:
        stop.set()
        t.join()
    assert bad == []
    assert swaps[0] > 0 and runs >= 50
    assert loaded > 0  # the inside skill still loads between swaps


def test_workspace_reads_of_skill_files_refuse_a_swapped_ctxnb(root: Path, outside: Path) -> None:
    # The skills folder is a root of the workspace's own policy (the rules tracker loads
    # SKILL.md through it); .ctxnb above it swapped for a link after the policy was made
    # must not lead there.
    write_skill(root / ".ctxnb" / "skills" / "pdf", "pdf", "inside")
    ws = Workspace.open(root)
    skill_md = root / ".ctxnb" / "skills" / "pdf" / "SKILL.md"
    assert b"inside" in (ws.read(str(skill_md)) or b"")
    stop = threading.Event()
    swaps = [0]
    t = threading.Thread(
        target=_swapper,
        args=(root / ".ctxnb", outside.parent, stop, swaps),
        kwargs={"is_dir": True},
    )
    t.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline or len(got) < 20:
            try:
                got.append(ws.read(str(skill_md)) or b"")
            except CtxnbError as exc:
                got.append(str(exc).encode())
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 0
    assert not [g for g in got if OUTSIDE.encode() in g]
    assert any(b"inside" in g for g in got)
    # Swapped and left so: refused with the reason.
    os.rename(root / ".ctxnb", root / ".ctxnb.hold")
    os.symlink(outside.parent, root / ".ctxnb")
    with pytest.raises(PolicyError, match="symbolic link"):
        ws.read(str(skill_md))
