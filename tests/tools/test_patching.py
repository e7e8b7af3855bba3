"""Tests for ctxnb.tools.patching: unified diffs and line edits."""

from __future__ import annotations

import doctest
import shutil
import subprocess
from pathlib import Path

import pytest
from _needs import needs
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxnb.errors import PatchConflict, PatchError
from ctxnb.tools import diffparse, lineedits, patching
from ctxnb.tools.patching import (
    LineEdit,
    apply_line_edits,
    apply_unified_diff,
    changed_line_ranges,
    diff_stats,
    parse_unified_diff,
    unified_diff,
)

TEN = "".join(f"line{i}\n" for i in range(1, 11))


@pytest.mark.parametrize("module", [patching, diffparse, lineedits], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0
    assert result.failed == 0


# ------------------------------------------------------------------ parsing


def test_parse_with_git_headers_and_omitted_counts() -> None:
    diff = (
        "diff --git a/x.py b/x.py\n"
        "index 83db48f..bf269f4 100644\n"
        "--- a/x.py\t2024-01-01 00:00:00\n"
        "+++ b/x.py\n"
        "@@ -2 +2 @@ def f():\n"
        "-old\n"
        "+new\n"
        "@@ -10,0 +11,2 @@\n"
        "+x\n"
        "+y\n"
    )
    hunks = parse_unified_diff(diff)
    assert [(h.old_start, h.old_count, h.new_start, h.new_count) for h in hunks] == [
        (2, 1, 2, 1),
        (10, 0, 11, 2),
    ]
    assert hunks[0].header == "@@ -2 +2 @@ def f():"
    assert hunks[0].old_lines == ["old"] and hunks[0].new_lines == ["new"]
    assert hunks[1].added == 2 and hunks[1].removed == 0
    assert hunks[1].line_number == 8


def test_parse_no_newline_markers() -> None:
    diff = "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    (hunk,) = parse_unified_diff(diff)
    assert hunk.old_missing_newline is True
    assert hunk.new_missing_newline is False


def test_parse_crlf_diff_text() -> None:
    diff = "--- a\r\n+++ b\r\n@@ -1 +1 @@\r\n-x\r\n+y\r\n"
    (hunk,) = parse_unified_diff(diff)
    assert hunk.lines == (("-", "x"), ("+", "y"))


@pytest.mark.parametrize(
    ("diff", "needle"),
    [
        ("@@ -1,2 +1,2 @\n a\n", "line 1: malformed hunk header"),
        ("@@ -x +1 @@\n a\n", "line 1: malformed hunk header"),
        ("--- a\n@@ -1 +1 @@\n-a\n+b\n", "line 1: a '---' file header must be followed by"),
        ("@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "ends early at the end of the diff"),
        ("@@ -1,3 +1,3 @@\n a\n-b\n+c\nGARBAGE\n", "line 5: hunk '@@ -1,3 +1,3 @@'"),
        ("@@ -1,1 +1,1 @@\n-a\n+b\n-c\n", "line 4: '-c' follows the hunk"),
        ("@@ -1,1 +1,1 @@\n-a\n-b\n+c\n", "line 3: hunk '@@ -1,1 +1,1 @@' (line 1) has more old"),
        ("hello there\n@@ -1 +1 @@\n-a\n+b\n", "line 1: unexpected 'hello there'"),
        ("@@ -1 +1 @@\n-a\n+b\nstray words\n", "line 4: unexpected 'stray words'"),
        ("", "contains no hunks"),
        ("--- a\n+++ b\n", "contains no hunks"),
        ("@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n", "line 2"),
        ("@@ -0,1 +1 @@\n-a\n+b\n", "line 1: hunk header '@@ -0,1 +1 @@' starts at line 0"),
        ("@@ -5 +5 @@\n-a\n+b\n@@ -3 +3 @@\n-c\n+d\n", "line 4: hunk '@@ -3 +3 @@' starts"),
    ],
)
def test_parse_errors_name_line_and_expectation(diff: str, needle: str) -> None:
    with pytest.raises(PatchError) as info:
        parse_unified_diff(diff)
    assert needle in str(info.value)
    assert not isinstance(info.value, PatchConflict)


def test_parse_refuses_multi_file_diff_but_stats_count_it() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1,2 @@\n c\n+d\n"
    with pytest.raises(PatchError, match="covers 2 files"):
        parse_unified_diff(diff)
    assert diff_stats(diff) == (2, 1)


def test_empty_line_counts_as_empty_context_line() -> None:
    # Some tools strip the single space of an empty context line.
    diff = "@@ -1,3 +1,3 @@\n a\n\n-c\n+C\n"
    assert apply_unified_diff("a\n\nc\n", diff) == "a\n\nC\n"


# ------------------------------------------------------------------ applying


def test_apply_exact_position() -> None:
    new = TEN.replace("line5\n", "five\n")
    assert apply_unified_diff(TEN, unified_diff(TEN, new)) == new


def test_apply_at_shifted_offset() -> None:
    diff = unified_diff(TEN, TEN.replace("line7\n", "seven\n"), n=2)
    shifted = "x\ny\nz\n" + TEN  # three lines added above the hunk since the diff was made
    assert apply_unified_diff(shifted, diff) == "x\ny\nz\n" + TEN.replace("line7\n", "seven\n")


def test_offset_carries_to_later_hunks() -> None:
    base = "".join(f"l{i}\n" for i in range(40))
    new = base.replace("l5\n", "L5\n").replace("l30\n", "L30\n")
    diff = unified_diff(base, new, n=1)
    assert len(parse_unified_diff(diff)) == 2
    moved = "top\n" + base
    assert apply_unified_diff(moved, diff) == "top\n" + new


def test_conflict_reports_every_failed_hunk_and_applies_nothing() -> None:
    base = "".join(f"l{i}\n" for i in range(40))
    new = base.replace("l5\n", "L5\n").replace("l30\n", "L30\n")
    diff = unified_diff(base, new, n=1)
    current = base.replace("l5\n", "changed\n").replace("l30\n", "also changed\n")
    with pytest.raises(PatchConflict) as info:
        apply_unified_diff(current, diff)
    failed = info.value.failed_hunks
    assert [f["hunk"] for f in failed] == [0, 1]
    assert failed[0]["header"] == "@@ -5,3 +5,3 @@"
    assert failed[0]["expected"] == ["l4", "l5", "l6"]
    assert failed[0]["found"] == ["l4", "changed", "l6"]
    assert "line 6 reads 'changed'" in failed[0]["reason"]
    assert "Read the file again" in str(info.value)


def test_conflict_when_one_of_two_hunks_fails() -> None:
    base = "".join(f"l{i}\n" for i in range(40))
    new = base.replace("l5\n", "L5\n").replace("l30\n", "L30\n")
    diff = unified_diff(base, new, n=1)
    with pytest.raises(PatchConflict) as info:
        apply_unified_diff(base.replace("l30\n", "x\n"), diff)
    assert [f["hunk"] for f in info.value.failed_hunks] == [1]


def test_conflict_past_end_of_file() -> None:
    with pytest.raises(PatchConflict) as info:
        apply_unified_diff("a\n", "@@ -1,3 +1,3 @@\n a\n b\n-c\n+C\n")
    (failure,) = info.value.failed_hunks
    assert failure["found"] == ["a"]
    assert "text ends" in failure["reason"]


def test_fuzz_ignores_outer_context_only_when_asked() -> None:
    diff = "@@ -2,3 +2,3 @@\n line2\n-line3\n+THREE\n line4\n"
    drifted = TEN.replace("line2\n", "LINE2\n")
    with pytest.raises(PatchConflict):
        apply_unified_diff(drifted, diff)
    assert apply_unified_diff(drifted, diff, fuzz=1) == drifted.replace("line3\n", "THREE\n")
    # Fuzz never relaxes the removed lines themselves.
    with pytest.raises(PatchConflict):
        apply_unified_diff(TEN.replace("line3\n", "x\n"), diff, fuzz=2)


def test_negative_fuzz_is_refused() -> None:
    with pytest.raises(ValueError, match="fuzz"):
        apply_unified_diff("a\n", "@@ -1 +1 @@\n-a\n+b\n", fuzz=-1)


def test_crlf_file_keeps_crlf() -> None:
    original = "a\r\nb\r\nc\r\n"
    diff = unified_diff("a\nb\nc\n", "a\nB\nc\nd\n")
    assert apply_unified_diff(original, diff) == "a\r\nB\r\nc\r\nd\r\n"


def test_missing_final_newline_follows_the_diff() -> None:
    assert apply_unified_diff("a\nb", unified_diff("a\nb", "a\nb\n")) == "a\nb\n"
    assert apply_unified_diff("a\nb\n", unified_diff("a\nb\n", "a\nb")) == "a\nb"
    assert apply_unified_diff("a\nb", unified_diff("a\nb", "A\nb")) == "A\nb"


def test_create_and_delete_whole_file() -> None:
    assert apply_unified_diff("", unified_diff("", "x\ny\n")) == "x\ny\n"
    assert apply_unified_diff("x\ny\n", unified_diff("x\ny\n", "")) == ""


def test_form_feed_and_unicode_separators_are_content() -> None:
    original = "a\x0cb\nc\u2028d\n"
    new = "a\x0cb\nC\u2028d\n"
    diff = unified_diff(original, new)
    assert diff_stats(diff) == (1, 1)
    assert apply_unified_diff(original, diff) == new


@needs(shutil.which("patch") is not None, "GNU patch")
def test_our_diffs_apply_with_gnu_patch(tmp_path: Path) -> None:
    old = TEN + "tail"
    new = TEN.replace("line3\n", "three\n").replace("line9\n", "") + "TAIL\n"
    target = tmp_path / "f.txt"
    target.write_text(old, newline="")
    subprocess.run(
        ["patch", "-s", str(target)],
        input=unified_diff(old, new).encode(),
        check=True,
    )
    assert target.read_bytes().decode() == new


lines_st = st.lists(st.sampled_from(["a", "b", "c", "", "  x", "é", "a b"]), max_size=12)


@st.composite
def texts(draw: st.DrawFn) -> str:
    lines = draw(lines_st)
    if not lines:
        return ""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    return nl.join(lines) + (nl if draw(st.booleans()) else "")


@settings(max_examples=300, deadline=None)
@given(texts(), texts(), st.integers(min_value=0, max_value=3))
def test_roundtrip_unified_diff(a: str, b: str, n: int) -> None:
    diff = unified_diff(a, b, n=n)
    result = apply_unified_diff(a, diff) if diff else a
    # Only the newline style may differ: the diff does not carry it.
    assert result.replace("\r\n", "\n") == b.replace("\r\n", "\n")
    added, removed = diff_stats(diff)
    assert added >= 0 and removed >= 0


# ------------------------------------------------------------------ line edits


def edit(start: int, end: int, expected: list[str], new: list[str]) -> LineEdit:
    return LineEdit(start_line=start, end_line=end, expected_original_lines=expected, new_lines=new)


def test_line_edits_refer_to_original_numbers() -> None:
    text = "a\nb\nc\nd\n"
    result = apply_line_edits(
        text,
        [edit(1, 1, ["a"], ["A1", "A2"]), edit(3, 4, ["c", "d"], ["CD"])],
    )
    assert result == "A1\nA2\nb\nCD\n"


def test_insertions_at_top_middle_and_end() -> None:
    text = "a\nb\n"
    result = apply_line_edits(
        text, [edit(1, 0, [], ["top"]), edit(2, 1, [], ["mid"]), edit(3, 2, [], ["end"])]
    )
    assert result == "top\na\nmid\nb\nend\n"


def test_insertion_before_a_replacement_at_the_same_line() -> None:
    result = apply_line_edits("a\nb\nc\n", [edit(2, 2, ["b"], ["B"]), edit(2, 1, [], ["new"])])
    assert result == "a\nnew\nB\nc\n"


def test_delete_lines() -> None:
    assert apply_line_edits("a\nb\nc\n", [edit(2, 3, ["b", "c"], [])]) == "a\n"


def test_overlapping_edits_are_refused_naming_both() -> None:
    with pytest.raises(PatchError) as info:
        apply_line_edits("a\nb\nc\n", [edit(1, 2, ["a", "b"], ["x"]), edit(2, 3, ["b", "c"], [])])
    message = str(info.value)
    assert "edit 0 (lines 1-2)" in message and "edit 1 (lines 2-3)" in message
    assert not isinstance(info.value, PatchConflict)


def test_two_insertions_at_the_same_place_are_refused() -> None:
    with pytest.raises(PatchError, match="overlap"):
        apply_line_edits("a\n", [edit(1, 0, [], ["x"]), edit(1, 0, [], ["y"])])


def test_insertion_inside_replaced_range_is_refused() -> None:
    with pytest.raises(PatchError, match="insertion before line 2"):
        apply_line_edits("a\nb\nc\n", [edit(1, 2, ["a", "b"], []), edit(2, 1, [], ["x"])])


def test_expected_lines_mismatch_is_a_conflict_and_nothing_is_applied() -> None:
    with pytest.raises(PatchConflict) as info:
        apply_line_edits("a\nb\nc\n", [edit(1, 1, ["a"], ["A"]), edit(3, 3, ["stale"], ["C"])])
    (failure,) = info.value.failed_hunks
    assert failure["hunk"] == 1
    assert failure["expected"] == ["stale"] and failure["found"] == ["c"]
    assert "line 3 reads 'c'" in failure["reason"]


def test_range_outside_text() -> None:
    with pytest.raises(PatchError, match="has 2 lines"):
        apply_line_edits("a\nb\n", [edit(3, 3, ["x"], [])])


def test_line_edit_validation() -> None:
    with pytest.raises(ValidationError, match="end_line"):
        edit(3, 1, [], [])
    with pytest.raises(ValidationError, match="expected_original_lines has 1 lines"):
        edit(1, 2, ["a"], [])
    with pytest.raises(ValidationError):
        LineEdit(start_line=0, end_line=0)


def test_embedded_line_break_in_new_lines_is_refused() -> None:
    with pytest.raises(PatchError, match="contains a line break"):
        apply_line_edits("a\n", [edit(1, 1, ["a"], ["x\ny"])])


def test_trailing_terminator_on_given_lines_is_tolerated() -> None:
    assert apply_line_edits("a\nb\n", [edit(1, 1, ["a\n"], ["A\n"])]) == "A\nb\n"


def test_line_edits_preserve_crlf_and_missing_final_newline() -> None:
    assert apply_line_edits("a\r\nb", [edit(3, 2, [], ["c"])]) == "a\r\nb\r\nc"
    assert apply_line_edits("a\r\nb\r\n", [edit(1, 1, ["a"], ["A"])]) == "A\r\nb\r\n"


def test_mixed_newlines_keep_per_line_terminators() -> None:
    assert apply_line_edits("a\r\nb\nc\n", [edit(2, 2, ["b"], ["B"])]) == "a\r\nB\nc\n"


def test_line_edit_into_empty_text() -> None:
    assert apply_line_edits("", [edit(1, 0, [], ["x"])]) == "x\n"


def test_line_edit_json_schema_is_reusable() -> None:
    schema = LineEdit.model_json_schema()
    assert set(schema["required"]) == {"start_line", "end_line"}
    assert schema["properties"]["start_line"]["minimum"] == 1


# ------------------------------------------------------------------ diffs and ranges


def test_unified_diff_marks_missing_newline() -> None:
    diff = unified_diff("a\nb", "a\nc", fromfile="x", tofile="y")
    assert diff.startswith("--- x\n+++ y\n")
    assert diff.count("\\ No newline at end of file") == 2


def test_unified_diff_equal_texts_is_empty() -> None:
    assert unified_diff("a\n", "a\n") == ""
    assert diff_stats("") == (0, 0)


def test_diff_stats() -> None:
    assert diff_stats(unified_diff(TEN, TEN.replace("line2\n", "") + "x\ny\n")) == (2, 1)


@pytest.mark.parametrize(
    ("old", "new", "ranges"),
    [
        ("a\nb\nc\n", "a\nb\nc\n", []),
        ("a\nb\nc\n", "a\nB\nc\n", [(2, 2)]),
        ("a\nb\nc\n", "x\na\nb\nc\ny\nz\n", [(1, 1), (5, 6)]),
        ("a\nb\nc\n", "a\nc\n", []),
        ("", "a\nb\n", [(1, 2)]),
        ("a\nb\nc\nd\n", "A\nB\nc\nD\n", [(1, 2), (4, 4)]),
    ],
)
def test_changed_line_ranges(old: str, new: str, ranges: list[tuple[int, int]]) -> None:
    assert changed_line_ranges(old, new) == ranges
