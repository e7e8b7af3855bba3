"""Ignore rules against git itself: the walk must list what ``git ls-files`` lists.

One real repository (no commits, so ``--cached`` adds nothing) holds a fixed tree with
awkward names; each case writes ``.gitignore`` files at several levels and compares
``iter_tree`` with ``git ls-files --cached --others --exclude-standard``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from _gitignore_cases import FILES, _random_line
from _needs import require

from ctxnb._util.wildmatch import GlobList, compile_glob, parse_line
from ctxnb.access.ignore import iter_tree

IGNORE_DIRS = ["", "src", "d/e", "logs", "src/sub"]

IDIOMS = {
    "keep-only-py": {"": ["*", "!*/", "!*.py"]},
    "keep-gitkeep": {"": ["logs/**", "!logs/**/", "!logs/**/.gitkeep"]},
    "dirs-below-d": {"": ["d/**/"]},
    "class-then-negation": {"": ["[a-c]*", "!a"]},
    "odd-lines": {"": ["foo\\", "!", "[z-a]", "[", "x[", "\\", "[[:bogus:]]", "*.py\\ "]},
    "escapes": {"": ["\\#hash", "\\!bang", "q\\?.txt", "star\\*.md", "\\[x].txt"]},
    "trailing-spaces": {"": ["f.txt   ", "ab\\ ", "*.log\t"]},
    "crlf-lines": {"": ["*.py\r", "!top.py\r"]},
    "nested-override": {"": ["*.py"], "src": ["!a.py"], "src/sub": ["!*.py", "deep/"]},
    "anchored": {"": ["/ab", "/src/*.log", "d/e"], "d/e": ["/g"]},
    "double-star": {"": ["**/f.txt", "a/**/b", "src/**", "!src/sub/**"]},
    "dir-only": {"": ["build/", "!build/keep.txt", "Build"]},
    "classes": {"": ["[[:digit:]]*", "[[:upper:]]*", "[!a-m]*.txt", "[^b]?.py", "[]x]*"]},
    "negated-dir": {"": ["*/", "!src/"], "src": ["!sub"]},
}


def _random_set(rng: random.Random) -> dict[str, list[str]]:
    sets: dict[str, list[str]] = {}
    for d in IGNORE_DIRS:
        if d == "" or rng.random() < 0.35:
            sets[d] = [_random_line(rng) for _ in range(rng.randint(1, 5))]
    return sets


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("git") is not None, "git")
    root = tmp_path_factory.mktemp("ignore") / "repo"
    for rel in FILES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel + "\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _git_files(root: Path) -> set[str]:
    env = {**os.environ, "HOME": str(root.parent), "XDG_CONFIG_HOME": str(root.parent)}
    out = subprocess.run(
        ["git", "-c", "core.quotePath=false", "ls-files", "-z", "--cached", "--others"]
        + ["--exclude-standard"],
        cwd=root,
        env=env,
        capture_output=True,
        check=True,
    ).stdout
    return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}


def _compare(root: Path, sets: dict[str, list[str]]) -> tuple[set[str], set[str]]:
    for d in IGNORE_DIRS:
        (root / d / ".gitignore").unlink(missing_ok=True)
    for d, lines in sets.items():
        (root / d / ".gitignore").write_bytes("\n".join(lines).encode() + b"\n")
    ours = {rel for rel, _ in iter_tree(root)}
    return ours, _git_files(root)


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_idioms_match_git(repo: Path, name: str) -> None:
    ours, git = _compare(repo, IDIOMS[name])
    assert ours == git, f"only ctxnb: {sorted(ours - git)}; only git: {sorted(git - ours)}"


def test_keep_only_idiom_keeps_nested_files(repo: Path) -> None:
    ours, _ = _compare(repo, IDIOMS["keep-only-py"])
    assert {"top.py", "src/a.py", "src/sub/b.py", "d/e/g/h.py"} <= ours
    assert "f.txt" not in ours


def test_random_pattern_sets_match_git(repo: Path) -> None:
    rng = random.Random(20251123)
    mismatches = []
    for n in range(600):
        sets = _random_set(rng)
        ours, git = _compare(repo, sets)
        if ours != git:
            mismatches.append((n, sets, sorted(ours - git), sorted(git - ours)))
    assert not mismatches, mismatches[:3]


def test_glob_lists_decide_as_git(repo: Path) -> None:
    # Deny, allow and scope lists are one GlobList each: a file it includes is a file
    # git ignores under the same lines as the root .gitignore.
    rng = random.Random(20251124)
    cases = [sets[""] for sets in IDIOMS.values() if set(sets) == {""}]
    cases += [[_random_line(rng) for _ in range(rng.randint(1, 5))] for _ in range(300)]
    mismatches = []
    for lines in cases:
        globs = GlobList(lines)
        ours = {rel for rel in [*FILES, ".gitignore"] if globs.match(rel) is None}
        _, git = _compare(repo, {"": lines})
        if ours != git:
            mismatches.append((lines, sorted(ours - git), sorted(git - ours)))
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize(
    ("pattern", "path", "matched"),
    [
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("**/b", "b", True),
        ("a/**", "a", False),
        ("a**b", "a/x/b", False),
        ("**\\/b", "b", False),
        ("[z-a]", "z", True),  # git matches the "z" before it reads the empty range
        ("[z-a]", "y", False),
        ("[!z-a]", "y", True),
        ("[a-]", "-", True),
        ("[]]", "]", True),
        ("[[:bogus:]]", "b", False),
        ("[[:x]", "x", True),
        ("[[:x]", "[", True),
        ("?", "é", False),  # one byte, as in git; "é" is two
        ("foo\\", "foo", False),
    ],
)
def test_wildmatch_corner_cases(tmp_path: Path, pattern: str, path: str, matched: bool) -> None:
    regex = compile_glob(pattern.encode())
    assert (regex.fullmatch(path.encode()) is not None) is matched
    # The table is git's answer, asked again here.
    require(shutil.which("git") is not None, "git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text(pattern + "\n")
    out = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=tmp_path)
    assert (out.returncode == 0) is matched


def test_every_line_parses() -> None:
    for line in ["foo\\", "!", "[z-a]", "[", "\\", "!/", "/", "**", "[[:", "#c", ""]:
        parse_line(line, base="")
