"""Line-range edits: replace lines ``start_line``..``end_line`` after checking them.

The line-level patch of the docPath rules (``FileTools.write_patch``). Every line
number in one call refers to the original text; edits are applied all or nothing.

Example:
    >>> apply_line_edits("a\\nb\\n", [LineEdit(start_line=2, end_line=2,
    ...                  expected_original_lines=["b"], new_lines=["B"])])
    'a\\nB\\n'
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxnb.errors import PatchConflict, PatchError

from ._textlines import Text as _Text
from ._textlines import show as _show
from ._textlines import strip_terminator as _strip_terminator

__all__ = ["LineEdit", "apply_line_edits"]


class LineEdit(BaseModel):
    """Replace lines ``start_line``..``end_line`` (1-based, inclusive) of a text.

    ``expected_original_lines`` must equal the lines there now, so an edit computed
    from an outdated copy is refused rather than applied in the wrong place. An
    insertion before line ``k`` is ``start_line=k, end_line=k-1`` with no expected
    lines; ``k`` may be one past the last line to append.

    Example:
        >>> LineEdit(start_line=2, end_line=2, expected_original_lines=["b"], new_lines=["B"])
        LineEdit(start_line=2, end_line=2, expected_original_lines=['b'], new_lines=['B'])
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_line: int = Field(ge=1, description="First line to replace (1-based).")
    end_line: int = Field(
        ge=0, description="Last line to replace, inclusive; start_line - 1 for an insertion."
    )
    expected_original_lines: list[str] = Field(
        default_factory=list, description="The lines start_line..end_line as they read now."
    )
    new_lines: list[str] = Field(
        default_factory=list, description="Replacement lines, without line terminators."
    )

    @model_validator(mode="after")
    def _check_range(self) -> LineEdit:
        if self.end_line < self.start_line - 1:
            raise ValueError(
                f"end_line ({self.end_line}) must be >= start_line - 1 ({self.start_line - 1}); "
                "use end_line = start_line - 1 for an insertion"
            )
        if len(self.expected_original_lines) != self.end_line - self.start_line + 1:
            raise ValueError(
                f"expected_original_lines has {len(self.expected_original_lines)} lines but "
                f"lines {self.start_line}-{self.end_line} are "
                f"{self.end_line - self.start_line + 1}; give exactly the lines being replaced"
            )
        return self

    def describe(self, index: int) -> str:
        if self.end_line < self.start_line:
            return f"edit {index} (insertion before line {self.start_line})"
        return f"edit {index} (lines {self.start_line}-{self.end_line})"


def _clean_lines(lines: list[str], what: str, label: str) -> list[str]:
    out = []
    for k, line in enumerate(lines):
        line = _strip_terminator(line)
        if "\n" in line:
            raise PatchError(
                f"{label}: {what}[{k}] contains a line break; give one line per list item"
            )
        out.append(line)
    return out


def apply_line_edits(original: str, edits: Sequence[LineEdit]) -> str:
    """Apply line-range edits, all or nothing.

    Line numbers in every edit refer to ``original``; edits are applied bottom-up so
    one edit never shifts another. A single trailing newline on a given line is
    ignored (``"x\\n"`` is the line ``"x"``).

    Args:
        original: the current text.
        edits: the edits; their ranges must not overlap (two insertions at the same
            place count as overlapping, since their order would be a guess).

    Returns:
        The edited text, keeping the original's newline style and final newline.

    Raises:
        PatchError: a range is outside the text, or two edits overlap (both named).
        PatchConflict: an edit's ``expected_original_lines`` differ from the text;
            ``failed_hunks`` lists every such edit. Nothing is applied.

    Example:
        >>> edit = LineEdit(start_line=2, end_line=2, expected_original_lines=["b"],
        ...                 new_lines=["B", "b2"])
        >>> apply_line_edits("a\\nb\\nc\\n", [edit])
        'a\\nB\\nb2\\nc\\n'
    """
    src = _Text.split(original)
    lines = src.lines
    prepared: list[tuple[int, int, int, LineEdit, list[str], list[str]]] = []
    for index, edit in enumerate(edits):
        label = edit.describe(index)
        if edit.start_line > len(lines) + 1 or edit.end_line > len(lines):
            raise PatchError(
                f"{label} is outside the text, which has {len(lines)} lines; "
                f"start_line may be at most {len(lines) + 1} and end_line at most {len(lines)}"
            )
        expected = _clean_lines(edit.expected_original_lines, "expected_original_lines", label)
        new = _clean_lines(edit.new_lines, "new_lines", label)
        prepared.append((edit.start_line - 1, edit.end_line, index, edit, expected, new))
    ordered = sorted(prepared, key=lambda p: (p[0], p[1]))
    for a, b in zip(ordered, ordered[1:], strict=False):
        a_lo, a_hi, b_lo, b_hi = a[0], a[1], b[0], b[1]
        both_insert = a_lo == a_hi and b_lo == b_hi and a_lo == b_lo
        if both_insert or b_lo < a_hi:
            raise PatchError(
                f"{a[3].describe(a[2])} and {b[3].describe(b[2])} overlap; "
                "merge them into one edit or give non-overlapping ranges"
            )
    failures = []
    for lo, hi, index, edit, expected, _new in prepared:
        found = lines[lo:hi]
        if found != expected:
            k = next(k for k, (e, f) in enumerate(zip(expected, found, strict=True)) if e != f)
            failures.append(
                {
                    "hunk": index,
                    "header": f"lines {edit.start_line}-{edit.end_line}",
                    "reason": f"line {lo + k + 1} reads {_show(found[k])}, "
                    f"expected {_show(expected[k])}",
                    "expected": expected,
                    "found": found,
                }
            )
    if failures:
        raise PatchConflict(
            f"{len(failures)} of {len(edits)} edit(s) do not match the current text: "
            + "; ".join(f"edit {f['hunk']} ({f['header']}): {f['reason']}" for f in failures)
            + ". Read the lines again and recompute the edit.",
            failed_hunks=failures,
        )
    out_lines = list(lines)
    out_terms: list[str | None] = [t or None for t in src.terms]
    # Descending start, and for equal starts the wider range first, so an insertion
    # at line k lands before a replacement that also starts at k.
    for lo, hi, _index, _edit, _expected, new in sorted(
        prepared, key=lambda p: (p[0], p[1]), reverse=True
    ):
        out_lines[lo:hi] = new
        out_terms[lo:hi] = [None] * len(new)
    return src.join(out_lines, out_terms, src.ends_with_newline)
