"""The three-way merge against ``git merge-file -p --diff3``, its baseline.

A clean merge of ours must be git's, to the byte, and git must call it clean too: a
merge that is silently different from git's is the failure that matters (it is written
after one approval). Ours may call a conflict where git merges cleanly (repeated lines
let two minimal diffs disagree, and ours then asks instead of guessing); how often is
bounded below, per kind of text.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from _needs import require
from _paths import REPO

from ctxnb._util.merge3 import merge3, split_lines


def _git_merge(tmp: Path, base: str, ours: str, theirs: str) -> tuple[int, str]:
    paths = []
    for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        p = tmp / name
        p.write_bytes(text.encode("utf-8"))
        paths.append(str(p))
    r = subprocess.run(
        ["git", "merge-file", "-p", "--diff3", "-L", "ours", "-L", "base", "-L", "theirs", *paths],
        capture_output=True,
        check=False,
    )
    assert r.returncode >= 0, r.stderr
    return r.returncode, r.stdout.decode("utf-8")


def _edit(rng: random.Random, lines: list[str], alphabet: list[str], edits: int) -> list[str]:
    out = list(lines)
    for _ in range(rng.randint(0, edits)):
        k = rng.randint(0, len(out))
        roll = rng.random()
        if roll < 0.35 and out:
            del out[min(k, len(out) - 1)]
        elif roll < 0.7:
            out.insert(k, rng.choice(alphabet))
        elif out:
            out[min(k, len(out) - 1)] = rng.choice(alphabet)
    return out


def _compare(tmp: Path, cases: list[tuple[str, str, str]]) -> tuple[int, int]:
    """(cases git merged cleanly, of which ours called a conflict); fails on any clean
    merge of ours that git does not make, byte for byte."""
    git_clean = asked = 0
    for base, ours, theirs in cases:
        code, out = _git_merge(tmp, base, ours, theirs)
        m = merge3(base, ours, theirs)
        if m.clean:
            assert code == 0 and m.text() == out, (
                f"clean merge differs from git's:\nbase={base!r}\nours={ours!r}\n"
                f"theirs={theirs!r}\ngit ({code} conflicts):\n{out}\nours:\n{m.text()}"
            )
        if code == 0:
            git_clean += 1
            asked += not m.clean
        else:
            # git's conflicts are conflicts here too, and the markers hold every side.
            assert not m.clean
            shown = m.text()
            for c in m.conflicts():
                assert "".join(c.ours) in shown and "".join(c.theirs) in shown
    return git_clean, asked


@pytest.fixture(autouse=True)
def _git() -> None:
    require(shutil.which("git") is not None, "git")


@pytest.mark.parametrize(
    ("alphabet", "seed", "most_asked"),
    [(4, 1, 0.2), (8, 2, 0.1), (40, 3, 0.03)],
    ids=["4-lines", "8-lines", "40-lines"],
)
def test_generated_clean_merges_are_gits(
    tmp_path: Path, alphabet: int, seed: int, most_asked: float
) -> None:
    # Few distinct lines make many equally short diffs (the hard case); many distinct
    # lines are what source files mostly look like.
    rng = random.Random(seed)
    lines = [f"line {i}\n" for i in range(alphabet)]
    cases = []
    for _ in range(300):
        base = [rng.choice(lines) for _ in range(rng.randint(0, 14))]
        ours, theirs = _edit(rng, base, lines, 4), _edit(rng, base, lines, 4)
        # Now and then a last line without its newline, as files end.
        texts = ["".join(t) for t in (base, ours, theirs)]
        if rng.random() < 0.1:
            texts = [t.removesuffix("\n") for t in texts]
        cases.append((texts[0], texts[1], texts[2]))
    git_clean, asked = _compare(tmp_path, cases)
    assert git_clean > 100  # the cases are not all conflicts
    assert asked <= most_asked * git_clean, (asked, git_clean)


def test_real_files_edited_apart_merge_as_git_does(tmp_path: Path) -> None:
    # ctxnb's own modules, edited by two hands in random places (a real file's blank lines,
    # brackets and repeated statements included).
    rng = random.Random(7)
    sources = sorted((REPO / "ctxnb").rglob("*.py"))
    cases = []
    for path in rng.sample(sources, 25):
        base = split_lines(path.read_text(encoding="utf-8"))
        pool = base or ["\n"]
        for _ in range(4):
            ours = _edit(rng, base, pool, 6)
            theirs = _edit(rng, base, pool, 6)
            cases.append(("".join(base), "".join(ours), "".join(theirs)))
    git_clean, asked = _compare(tmp_path, cases)
    assert git_clean > 50
    assert asked <= 0.05 * git_clean, (asked, git_clean)


def test_both_sides_same_change_is_clean_and_one_side_alone_is_taken() -> None:
    base = "a\nb\nc\n"
    assert merge3(base, "a\nB\nc\n", "a\nB\nc\n").text() == "a\nB\nc\n"
    assert merge3(base, base, "x\n").text() == "x\n"
    assert merge3(base, "", base).text() == ""


def test_touching_changes_conflict_as_in_git(tmp_path: Path) -> None:
    # Line 2 changed by one side, line 3 by the other: git calls it a conflict.
    base, ours, theirs = "a\nb\nc\nd\n", "a\nB\nc\nd\n", "a\nb\nC\nd\n"
    m = merge3(base, ours, theirs)
    assert not m.clean
    code, out = _git_merge(tmp_path, base, ours, theirs)
    assert code == 1 and m.text() == out


def test_resolved_text_needs_one_answer_per_conflict() -> None:
    m = merge3("a\n", "b\n", "c\n")
    assert m.text([["d\n"]]) == "d\n"
    with pytest.raises(ValueError, match="1 conflicts"):
        m.text([])
