"""Tests for ctxnb.strategies.summaries: outlines within a token budget."""

from __future__ import annotations

import doctest
import inspect
import textwrap
from pathlib import Path

import pytest

from ctxnb.strategies import summaries as summarize_module
from ctxnb.strategies.summaries import (
    OutlineSummarizer,
    Summarizer,
    default_count_tokens,
    outline,
)

PY = textwrap.dedent(
    '''\
    """Sample module for outlines.

    More text that is not shown.
    """
    import os

    MAX_SIZE = 10
    __all__ = ["Foo", "bar"]


    class Foo(Base, metaclass=Meta):
        """A foo."""

        def __init__(self, x: int = 3, *args: str, key: str | None = None, **kw) -> None:
            """Make one.

            Details.
            """

        def _private(self):
            pass

        async def run(self) -> int:
            return 1

        class Inner:
            def m(self): ...

        def after_inner(self): ...


    def bar(a, b=[1, 2], /, c=None) -> dict[str, int]:
        """Bar things."""


    class _Hidden:
        def z(self): ...
    '''
)

MD = textwrap.dedent(
    """\
    ---
    title: front matter
    ---
    # Guide

    Intro.

    ## Install
    ### From PyPI
    ```bash
    # not a heading
    ```
    Usage
    -----
    #### Deep detail
    ## Closing ##
    """
)


def words(text: str) -> int:
    return len(text.split())


def test_python_outline_full_detail() -> None:
    result = outline("pkg/mod.py", PY, max_tokens=10_000)
    assert result.splitlines() == [
        "pkg/mod.py: Python, 37 lines",
        "Sample module for outlines.",
        "L7 MAX_SIZE",
        "L8 __all__",
        "L11 class Foo(Base, metaclass=Meta)",
        "      A foo.",
        "L14   def __init__(self, x: int=3, *args: str, key: str | None=None, **kw) -> None",
        "        Make one.",
        "L20   def _private(self)",
        "L23   async def run(self) -> int",
        "L26   class Inner",
        "L27     def m(self)",
        "L29   def after_inner(self)",
        "L32 def bar(a, b=[1, 2], /, c=None) -> dict[str, int]",
        "      Bar things.",
        "L36 class _Hidden",
        "L37   def z(self)",
    ]


def test_python_detail_is_dropped_in_order_and_announced() -> None:
    full = outline("m.py", PY, max_tokens=10_000)
    budget = default_count_tokens(full) - 1
    no_docs = outline("m.py", PY, max_tokens=budget)
    assert "A foo." not in no_docs and "Make one." not in no_docs
    assert "def __init__(self, x: int=3" in no_docs  # signatures survive longer
    assert "Sample module for outlines." in no_docs  # module docstring survives longer
    assert no_docs.endswith("[omitted to fit: docstrings]")

    outlines = [outline("m.py", PY, max_tokens=b) for b in range(budget, 0, -1)]
    notes = [o.splitlines()[-1] for o in outlines if o.splitlines()[-1].startswith("[omitted")]
    # Each later note drops at least what the earlier ones dropped.
    for kind in ("docstrings", "private", "signatures", "methods", "constants"):
        first = next(i for i, n in enumerate(notes) if kind in n)
        assert all(kind in n for n in notes[first:])
    methods_dropped = next(o for o in outlines if "methods" in o.splitlines()[-1])
    assert "class Foo  (3 methods)" in methods_dropped
    assert "class Inner  (1 method)" in methods_dropped
    assert "_Hidden" not in methods_dropped


@pytest.mark.parametrize("path", ["m.py", "notes.md", "data.csv", "broken.py", "empty.txt"])
@pytest.mark.parametrize("counter", [None, words])
def test_result_never_exceeds_budget(path: str, counter: object) -> None:
    texts = {
        "m.py": PY,
        "notes.md": MD,
        "data.csv": "".join(f"{i},{'x' * (i % 50)}\n" for i in range(500)),
        "broken.py": "def broken(:\n" + "x = 1\n" * 200,
        "empty.txt": "",
    }
    count = counter or default_count_tokens
    for budget in range(0, 400, 3):
        result = outline(path, texts[path], max_tokens=budget, count_tokens=counter)  # type: ignore[arg-type]
        assert count(result) <= budget, (budget, result)  # type: ignore[operator]


def test_markdown_headings_with_levels_and_lines() -> None:
    result = outline("docs/guide.md", MD, max_tokens=10_000)
    assert result.splitlines() == [
        "docs/guide.md: Markdown, 16 lines",
        "L4 # Guide",
        "  Intro.",
        "L8   ## Install",
        "L9     ### From PyPI",
        "      ```bash",
        "      # not a heading",
        "      ```",
        "L13   ## Usage",
        "L15       #### Deep detail",
        "L16   ## Closing",
    ]
    # A smaller budget drops the sections' lines before any heading.
    tight = outline("docs/guide.md", MD, max_tokens=default_count_tokens(result) - 1)
    assert [ln for ln in tight.splitlines() if ln.startswith("L")] == [
        ln for ln in result.splitlines() if ln.startswith("L")
    ]
    assert len(tight) < len(result) and "Intro." in result


def test_a_markdown_summary_uses_its_budget() -> None:
    """Old gap: a file of one heading and its text summarised to the heading alone at any
    budget. Now the budget goes to the section's first lines, more for more budget, and
    says which lines it left out."""
    text = "# Runbook\n\n" + "".join(f"Step {i}: restart worker {i}.\n" for i in range(1, 61))
    sizes = []
    for budget in (40, 80, 160, 400):
        result = outline("ops/runbook.md", text, max_tokens=budget)
        assert default_count_tokens(result) <= budget
        sizes.append(result.count("Step "))
    assert sizes[0] >= 1 and sizes == sorted(sizes) and sizes[-1] > sizes[1] > 1, sizes
    assert "more lines (L" in outline("ops/runbook.md", text, max_tokens=120)


def test_markdown_drops_deepest_levels_first() -> None:
    headings = [ln for ln in MD.splitlines(keepends=True) if ln.lstrip().startswith("#")]
    text = "".join(headings) + "".join(f"#### More detail {i}\n" for i in range(10))
    full = outline("g.md", text, max_tokens=10_000)
    budgets = range(default_count_tokens(full), 0, -1)
    shorter = next(o for o in (outline("g.md", text, max_tokens=b) for b in budgets) if o != full)
    assert "Deep detail" not in shorter and "More detail" not in shorter
    assert "From PyPI" in shorter
    assert shorter.endswith("[omitted to fit: headings deeper than level 3]")


def test_markdown_without_headings_uses_head_and_tail() -> None:
    text = "".join(f"para {i}\n" for i in range(100))
    result = outline("a.md", text, max_tokens=40)
    assert result.startswith("a.md: Markdown, 100 lines (no headings)")
    assert "lines omitted" in result


def test_head_tail_for_other_languages() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 381))
    result = outline("main.rs", text, max_tokens=60)
    lines = result.splitlines()
    assert lines[0] == "main.rs: text, 380 lines"
    assert lines[1] == "line 1"
    assert lines[-1] == "line 380"
    omitted = next(line for line in lines if line.startswith("…"))
    # The note's range matches what is actually missing.
    shown = {int(line.split()[1]) for line in lines[1:] if line.startswith("line ")}
    start, end = (int(x) for x in omitted.split("(lines ")[1].split(")")[0].split("-"))
    assert shown.isdisjoint(range(start, end + 1))
    assert shown | set(range(start, end + 1)) == set(range(1, 381))
    assert f"… {end - start + 1} lines omitted" in omitted
    assert "read_lines" in omitted


def test_small_file_is_shown_whole() -> None:
    assert outline("a.txt", "one\ntwo\n", max_tokens=100) == "a.txt: text, 2 lines\none\ntwo"


def test_long_lines_are_clipped() -> None:
    result = outline("min.js", "x" * 10_000, max_tokens=100)
    assert len(result.splitlines()[1]) <= 160
    assert result.splitlines()[1].endswith("…")


def test_python_syntax_error_falls_back_to_head_tail() -> None:
    text = "def broken(:\n" + "x = 1\n" * 200
    result = outline("bad.py", text, max_tokens=50)
    assert result.startswith(
        "bad.py: Python, 201 lines (not parsed as Python (SyntaxError at line 1)"
    )
    assert "lines omitted" in result


def test_real_stdlib_module_fits_and_names_its_classes() -> None:
    path = Path(inspect.getfile(textwrap))
    text = path.read_text(encoding="utf-8")
    result = outline(str(path), text, max_tokens=300)
    assert default_count_tokens(result) <= 300
    assert "class TextWrapper" in result
    assert "def dedent" in result


def test_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        outline("a.py", "", max_tokens=-1)


def test_summarizer_protocol_and_default() -> None:
    default = OutlineSummarizer(count_tokens=words)
    assert isinstance(default, Summarizer)
    assert default("m.py", PY, 10_000) == outline("m.py", PY, max_tokens=10_000, count_tokens=words)
    assert "words" in repr(default)

    class Fixed:
        def __call__(self, path: str, text: str, max_tokens: int) -> str:
            return f"{path}: {len(text)} chars"

    custom: Summarizer = Fixed()
    assert isinstance(custom, Summarizer)
    assert custom("x", "abc", 5) == "x: 3 chars"


def test_docstring_examples_run() -> None:
    result = doctest.testmod(summarize_module)
    assert result.attempted > 0
    assert result.failed == 0
