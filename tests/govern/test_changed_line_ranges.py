"""changed_line_ranges gives the ranges of a plain SequenceMatcher diff of the lines,
whatever shortcut it takes (texts with equal lines, disjoint lines, an empty side)."""

from __future__ import annotations

import subprocess

import pytest
from _paths import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxnb.tools._textlines import Text, _matched_ranges, changed_line_ranges


def reference(old: str, new: str) -> list[tuple[int, int]]:
    """The ranges by difflib's matcher alone, of the lines Text.split gives (the
    function before its shortcuts and its C split)."""
    return _matched_ranges(Text.split(old).lines, Text.split(new).lines)


# Few distinct lines, so that pairs share lines often; terminators of every kind.
_LINE = st.sampled_from(["a", "b", "c", "", " ", "a ", "x = 1", "\r", "a\rb"])
_TERM = st.sampled_from(["\n", "\r\n", "\n", ""])
_TEXT = st.lists(st.tuples(_LINE, _TERM), max_size=14).map(
    lambda parts: "".join(line + term for line, term in parts)
)


@settings(max_examples=3000, deadline=None)
@given(_TEXT, _TEXT)
def test_generated_pairs_give_the_reference_ranges(old: str, new: str) -> None:
    assert changed_line_ranges(old, new) == reference(old, new)


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_edits_of_one_text_give_the_reference_ranges(old: str) -> None:
    # The text against itself, its reverse, with a line added, and with every line new.
    lines = old.splitlines(keepends=True)
    for new in (old, "".join(reversed(lines)), "q\n" + old, old + "q", old.upper() + "#"):
        assert changed_line_ranges(old, new) == reference(old, new)
        assert changed_line_ranges(new, old) == reference(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("", ""),
        ("", "a\n"),
        ("a\n", ""),
        ("a\nb\n", "c\nd\n"),  # disjoint: one range over all of new
        ("a\nb\n", "c\r\nd"),
        ("a\rb\n", "a\nb\n"),  # a lone \r stays inside its line
        ("a\n", "a"),  # the same lines, one final newline less
        ("a\n\n", "a\n"),
        ("\n", ""),
        # Trimming the common first and last lines before the matcher would give (4, 6):
        # the matcher takes the longest block (A B C D) first, not the common prefix.
        ("A\nB\nC\nD\n", "A\nB\nC\nA\nB\nC\nD\n"),
    ],
)
def test_edge_pairs(old: str, new: str) -> None:
    assert changed_line_ranges(old, new) == reference(old, new)


def _history(path: str, count: int) -> list[str]:
    """The file's last ``count`` versions, newest first, followed across renames."""
    try:
        log = subprocess.run(
            ["git", "-C", str(REPO), "log", "--follow", f"-n{count}", "--name-only"]
            + ["--format=%x00%H", "--", path],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        versions = []
        for entry in log.split("\0")[1:]:
            rev, *names = entry.split()
            versions.append(
                subprocess.run(
                    ["git", "-C", str(REPO), "show", f"{rev}:{names[-1]}"],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
        return versions
    except (OSError, subprocess.CalledProcessError):
        return []


@pytest.mark.parametrize(
    "path",
    [
        "ctxnb/govern/record.py",
        "ctxnb/redaction/redactor.py",
        "ctxnb/store/objectstore.py",
        "docs/store-format.md",
    ],
)
def test_real_file_histories_give_the_reference_ranges(path: str) -> None:
    versions = _history(path, 25)
    if len(versions) < 2:
        # A full clone has the history (CI's checkout and its fresh clone are full
        # clones); a shallow one or a copy without .git has not: only those skip.
        shallow = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
            capture_output=True,
            text=True,
            check=False,
        )
        if shallow.returncode != 0 or shallow.stdout.strip() == "true":
            pytest.skip("no full git history here (a shallow clone or no .git)")
        pytest.fail(f"{path} has fewer than two versions in this repository's history")
    for older, newer in zip(versions[1:], versions[:-1], strict=True):
        assert changed_line_ranges(older, newer) == reference(older, newer)
        assert changed_line_ranges(newer, older) == reference(newer, older)
