"""The mutation class of the changed region is the whole file's, edit after edit.

``classify_mutation`` and ``touched_symbols`` parse only the top-level statements a
change overlaps (ctxnb/govern/mutation.py, "regions"). Every test here asks the same
question twice, once as written and once with the region path switched off (today's
whole-file comparison), and wants the same answer: first for edits built to break the
region's self-containment, then for thousands of random edits of real Python sources.
"""

from __future__ import annotations

import ast
import random
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ctxnb.govern._regions as regions_mod
import ctxnb.govern.mutation as mutation_mod
from ctxnb.govern.mutation import classify_mutation, touched_symbols


def _forget() -> None:
    # Nothing learnt about one pair may answer for another.
    mutation_mod._forget()


def _whole(old: str, new: str) -> tuple[str, list[str]]:
    """Today's answer: the region path switched off."""
    _forget()
    saved = mutation_mod._region
    mutation_mod._region = lambda old, new: None  # type: ignore[assignment]
    try:
        return classify_mutation("m.py", old, new), touched_symbols("m.py", old, new)
    finally:
        mutation_mod._region = saved
        _forget()


def _by_region(old: str, new: str, *, warm: bool = False) -> tuple[str, list[str]]:
    _forget()
    if warm:  # as in a long-lived process: the old text was the previous write's new text
        classify_mutation("m.py", "", old)
    return classify_mutation("m.py", old, new), touched_symbols("m.py", old, new)


def _used_region(old: str, new: str, *, forget: bool = True) -> bool:
    if forget:
        _forget()
    try:
        return mutation_mod._region(old, new) is not None
    except (SyntaxError, ValueError):
        return False


def _agree(old: str, new: str) -> tuple[str, list[str]]:
    expected = _whole(old, new)
    assert _by_region(old, new) == expected, (old, new)
    assert _by_region(old, new, warm=True) == expected, (old, new)
    return expected


MODULE = '''\
"""A module."""
import os

LIMIT = 10


@decorate(LIMIT)
def area(width, height):
    """Area."""
    result = width * height
    return result


def scale(value):
    factor = 2
    return value * factor


class Shape:
    sides = 0

    def describe(self, prefix):
        text = prefix + str(self.sides)
        return text


TEMPLATE = """
def hidden(x):
    total = x
    return total
"""
'''


CLASSY = """\
import functools


@functools.total_ordering
class Account:
    \"\"\"A bank account.\"\"\"

    rate = 0.5
    # a comment at the members' level

    def __init__(self, owner):
        self.owner = owner
        self.balance = 0

    @property
    def value(self):
        subtotal = self.balance * self.rate
        return subtotal

    @value.setter
    def value(self, amount):
        self.balance = amount

# a comment in the first column, inside the class
    class Meta:
        ordering = ["owner"]

        def label(self):
            name = "meta"
            return name

    def close(self):
        done = True
        return done


def helper(x):
    return x
"""


# Each edit: (the text, a label, the part replaced, its replacement, the whole-file answer).
ATTACKS: list[tuple[str, str, str, str, str]] = [
    (MODULE, "local renamed", "factor", "k", "AST_REFACTOR"),
    (MODULE, "local renamed in a method", "text", "out", "AST_REFACTOR"),
    (MODULE, "comment inserted", "    factor = 2\n", "    # two\n    factor = 2\n", "AST_REFACTOR"),
    (MODULE, "reformatted", "value * factor", "value*factor", "AST_REFACTOR"),
    (MODULE, "constant changed", "factor = 2", "factor = 3", "INTENT_EVOLUTION"),
    (
        MODULE,
        "global used elsewhere renamed at its definition",
        "LIMIT = 10",
        "LIMITS = 10",
        "INTENT_EVOLUTION",
    ),
    (MODULE, "top-level rename used by a decorator", "LIMIT", "CAP", "INTENT_EVOLUTION"),
    (MODULE, "decorator changed", "@decorate(LIMIT)", "@decorate(LIMIT, 1)", "INTENT_EVOLUTION"),
    (MODULE, "decorator removed", "@decorate(LIMIT)\n", "", "INTENT_EVOLUTION"),
    (
        MODULE,
        "a decorator over another def",
        "\n\ndef scale",
        "\n@decorate(LIMIT)\ndef scale",
        "INTENT_EVOLUTION",
    ),
    (MODULE, "code-like text inside a string renamed", "total", "t", "INTENT_EVOLUTION"),
    (
        MODULE,
        "a line turned into the start of a string",
        "    factor = 2\n",
        '    factor = """2\n',
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "a string closed early",
        'TEMPLATE = """\n',
        'TEMPLATE = """"""\n',
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "an open bracket across statements",
        "    factor = 2\n",
        "    factor = (2\n",
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "a backslash joining the blank line below",
        "LIMIT = 10\n",
        "LIMIT = 10 \\\n",
        "AST_REFACTOR",
    ),
    (
        MODULE,
        "a backslash joining the next statement",
        "    factor = 2\n",
        "    factor = 2 \\\n",
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "a line indented into the function above",
        "\n\ndef scale(value):",
        "\n    pass\ndef scale(value):",
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "a def dedented out of its class",
        "    def describe",
        "def describe",
        "INTENT_EVOLUTION",
    ),
    (MODULE, "class attribute renamed", "sides", "edges", "INTENT_EVOLUTION"),
    (MODULE, "method renamed", "describe", "show", "INTENT_EVOLUTION"),
    (MODULE, "parameter renamed", "value", "v", "INTENT_EVOLUTION"),
    (
        MODULE,
        "local made global",
        "    factor = 2\n",
        "    global factor\n    factor = 2\n",
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "syntax error in the region",
        "def scale(value):",
        "def scale(value)",
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "statement split by a semicolon",
        "import os\n",
        "import os; import sys\n",
        "INTENT_EVOLUTION",
    ),
    (
        MODULE,
        "two statements joined by a semicolon",
        "import os\n\nLIMIT",
        "import os; LIMIT",
        "AST_REFACTOR",
    ),
    (MODULE, "the renamer's own names spelled", "factor", "_ctxnb_0_0", "AST_REFACTOR"),
    (
        MODULE,
        "tab indentation",
        "    factor = 2\n    return value * factor",
        "\tfactor = 2\n\treturn value * factor",
        "AST_REFACTOR",
    ),
    (
        MODULE,
        "inconsistent tabs",
        "    return value * factor",
        "\treturn value * factor",
        "INTENT_EVOLUTION",
    ),
    (MODULE, "the first line changed", '"""A module."""', '"""A module!"""', "INTENT_EVOLUTION"),
    (CLASSY, "method local renamed", "subtotal", "t", "AST_REFACTOR"),
    (CLASSY, "nested class method local renamed", "name", "n", "AST_REFACTOR"),
    (
        CLASSY,
        "comment in a method",
        "        done = True\n",
        "        # c\n        done = True\n",
        "AST_REFACTOR",
    ),
    (CLASSY, "class attribute changed", "rate = 0.5", "rate = 0.25", "INTENT_EVOLUTION"),
    (CLASSY, "class comment changed", "members' level", "members level", "AST_REFACTOR"),
    (CLASSY, "class docstring changed", "A bank account.", "An account.", "INTENT_EVOLUTION"),
    (
        CLASSY,
        "setter changed",
        "self.balance = amount",
        "self.balance = -amount",
        "INTENT_EVOLUTION",
    ),
    (
        CLASSY,
        "method deleted",
        "    def close(self):\n        done = True\n        return done\n",
        "",
        "INTENT_EVOLUTION",
    ),
    (
        CLASSY,
        "method added at the class's end",
        "        return done\n",
        "        return done\n\n    def open(self):\n        pass\n",
        "INTENT_EVOLUTION",
    ),
    (
        CLASSY,
        "code added after the class's last line",
        "        return done\n",
        "        return done\nx = 1\n",
        "INTENT_EVOLUTION",
    ),
    (
        CLASSY,
        "a member indented deeper",
        "    def close(self):\n        done = True\n        return done\n",
        "        def close(self):\n            done = True\n            return done\n",
        "INTENT_EVOLUTION",
    ),
    (
        CLASSY,
        "a member indented with a tab",
        "    def close(self):\n        done = True\n        return done\n",
        "\tdef close(self):\n\t\tdone = True\n\t\treturn done\n",
        "INTENT_EVOLUTION",
    ),
    (
        CLASSY,
        "a method dedented to the module",
        "    def close(self):\n        done = True\n        return done\n",
        "def close(self):\n    done = True\n    return done\n",
        "INTENT_EVOLUTION",
    ),
    (CLASSY, "a decorator removed from a member", "    @property\n", "", "INTENT_EVOLUTION"),
    (CLASSY, "the class decorator changed", "@functools.total_ordering\n", "", "INTENT_EVOLUTION"),
    (
        CLASSY,
        "an open string in a member",
        'ordering = ["owner"]',
        'ordering = ["""owner"]',
        "INTENT_EVOLUTION",
    ),
    (CLASSY, "a member renamed to the renamer's names", "done", "_ctxnb_3_0", "AST_REFACTOR"),
]


@pytest.mark.parametrize(
    ("text", "label", "before", "after", "expected"), ATTACKS, ids=[a[1] for a in ATTACKS]
)
def test_edits_built_to_break_the_region(
    text: str, label: str, before: str, after: str, expected: str
) -> None:
    new = text.replace(before, after)
    assert new != text, label
    assert _agree(text, new)[0] == expected, label


def test_edits_at_the_ends_of_the_text() -> None:
    assert _agree(MODULE, "")[0] == "INTENT_EVOLUTION"
    assert _agree(MODULE, MODULE + "\n# end\n")[0] == "AST_REFACTOR"
    assert _agree(MODULE, MODULE + "EXTRA = 1\n")[0] == "INTENT_EVOLUTION"
    assert _agree(MODULE, MODULE[:-1])[0] == "AST_REFACTOR"
    assert _agree("", MODULE)[0] == "INTENT_EVOLUTION"
    future = "from __future__ import barry_as_FLUFL\n" + MODULE
    assert _agree(MODULE, future)[0] == "INTENT_EVOLUTION"


def test_a_method_edit_is_compared_among_the_members() -> None:
    new = CLASSY.replace("subtotal", "t")
    region = mutation_mod._region(CLASSY, new)
    assert region is not None and region.nested
    assert [p.text.split("(")[0].strip() for p in region.before] == ["@property\n    def value"]
    # A name defined twice (the property's getter and setter) keeps its last text, as in
    # the whole-file answer: the getter's change does not show, the setter's does.
    getter = CLASSY.replace("subtotal = self", "subtotal = 2 * self")
    assert _agree(CLASSY, getter) == ("INTENT_EVOLUTION", [])
    setter = CLASSY.replace("self.balance = amount", "self.balance = -amount")
    assert _agree(CLASSY, setter)[1] == ["Account.value"]
    assert _agree(CLASSY, CLASSY.replace("rate = 0.5", "rate = 1"))[1] == ["Account"]
    # The class ends at its last statement: a comment after it is not the class's text.
    commented_out = CLASSY.replace("        return done\n", "#        return done\n")
    assert _agree(CLASSY, commented_out) == ("INTENT_EVOLUTION", ["Account.close"])
    assert mutation_mod._region(CLASSY, commented_out).nested  # type: ignore[union-attr]
    assert _agree(CLASSY, CLASSY.replace("return name", "return 1"))[1] == ["Account.Meta.label"]


def test_a_class_left_without_members_then_edited_elsewhere() -> None:
    # The second write's old text does not parse: nothing learnt from the first write
    # may make it look as if it did.
    first = "class A:\n    x = 1\n\n\ny = 2\n"
    emptied = "class A:\n\n\ny = 2\n"
    commented = "class A:\n\n\ny = 2  # two\n"
    one_line = "class A: x = 1\n\n\ny = 2\n"
    _forget()
    for old, new in ((first, emptied), (emptied, commented), (one_line, one_line + "# c\n")):
        got = classify_mutation("m.py", old, new), touched_symbols("m.py", old, new)
        known = dict(regions_mod._known)
        assert got == _whole(old, new), (old, new)
        regions_mod._known.update(known)
    assert _agree(one_line, one_line.replace("x = 1", "x=1")) == ("AST_REFACTOR", ["A"])
    no_class = CLASSY[: CLASSY.index('    """A bank')] + "\n\ndef helper(x):\n    return x\n"
    assert _agree(CLASSY, no_class)[0] == "INTENT_EVOLUTION"


def test_the_region_is_used_where_it_can_be() -> None:
    # Otherwise the agreement above would only show that the whole file was compared.
    assert _used_region(MODULE, MODULE.replace("factor", "k"))
    assert _used_region(MODULE, MODULE.replace("LIMIT = 10", "LIMIT = 11"))
    assert _used_region(MODULE, MODULE + "EXTRA = 1\n")
    assert not _used_region(MODULE, MODULE.replace("factor", "_ctxnb_0_0"))
    assert not _used_region(MODULE, MODULE.replace("    factor = 2\n", "    factor = (2\n"))


def test_a_lone_backslash_line_joins_the_next_statement() -> None:
    old = "x = 1\n\\\ny = 2\n"  # the backslash line continues into y's line
    assert ast.parse(old).body[1].lineno == 3
    assert _agree(old, old.replace("x = 1", "x = 1  # c")) == ("AST_REFACTOR", [])
    assert _agree(old, old.replace("y = 2", "y = 2  # c")) == ("AST_REFACTOR", [])
    assert _agree(old, "x = 1\ny = 2\n") == ("AST_REFACTOR", [])
    assert _agree(old, "x = 1\n\\\n\ny = 2\n") == ("AST_REFACTOR", [])


def test_a_future_import_that_could_change_the_parser() -> None:
    # barry_as_FLUFL swaps "!=" for "<>" in the compiler; a region parsed without the
    # import must not answer differently from the whole file.
    old = "from __future__ import barry_as_FLUFL\n\n\ndef f():\n    return 1 <> 2\n"
    assert _agree(old, old.replace("1 <> 2", "1 <>  2")) == ("INTENT_EVOLUTION", [])
    plain = "from __future__ import barry_as_FLUFL\n\n\ndef f():\n    return 1\n"
    assert _agree(plain, plain.replace("return 1", "return 1 != 2"))[0] == "INTENT_EVOLUTION"
    assert not _used_region(plain, plain.replace("return 1", "return 1  # one"))


def test_a_statement_too_deep_to_rename() -> None:
    # The whole-file comparison overflows the recursion limit on a 600-term sum and
    # calls every change of such a file an evolution; the region compares only what
    # changed. Inside the region the deep statement still makes it an evolution.
    deep = "X = " + " + ".join(["1"] * 600) + "\n\n\ndef f(a):\n    b = a\n    return b\n"
    renamed = deep.replace("b", "c")
    assert _whole(deep, renamed)[0] == "INTENT_EVOLUTION"
    assert _by_region(deep, renamed) == ("AST_REFACTOR", ["f"])
    assert _by_region(deep, renamed, warm=True) == ("AST_REFACTOR", ["f"])
    spaced = deep.replace("1 + 1", "1+1", 1)
    assert _by_region(deep, spaced) == _whole(deep, spaced) == ("INTENT_EVOLUTION", [])


def test_a_syntax_error_outside_the_region_still_counts() -> None:
    broken = MODULE.replace("class Shape:", "class Shape")
    assert _agree(broken, broken.replace("factor", "k")) == ("INTENT_EVOLUTION", [])


def test_crlf_and_lone_carriage_returns() -> None:
    crlf = MODULE.replace("\n", "\r\n")
    assert _agree(crlf, crlf.replace("factor", "k")) == ("AST_REFACTOR", ["scale"])
    assert _agree(crlf, crlf.replace("factor = 2", "factor = 3"))[1] == ["scale"]
    assert _used_region(crlf, crlf.replace("factor", "k"))
    mixed = MODULE.replace("import os\n", "import os\r")
    assert _agree(mixed, mixed.replace("factor = 2", "factor = 3"))[1] == ["scale"]
    assert _agree(MODULE, MODULE.replace("import os\n", "import os\r"))[0] == "AST_REFACTOR"


def test_redefinitions_keep_their_order_and_last_text() -> None:
    old = "def f():\n    return 1\n\n\ndef g():\n    pass\n\n\ndef f():\n    return 2\n"
    assert _agree(old, old.replace("return 2", "return 3")) == ("INTENT_EVOLUTION", ["f"])
    assert _agree(old, old.replace("return 1", "return 3"))[1] == []
    assert _agree(old, old.replace("pass", "return 0"))[1] == ["g"]


def test_successive_writes_in_one_process() -> None:
    # Each write's new text is the next one's old text, as in a long-lived server; the
    # pieces learnt from one write are reused for the next.
    _forget()
    text = MODULE
    rng = random.Random(7)
    for step in range(60):
        new = _random_edit(text, rng)
        got = classify_mutation("m.py", text, new), touched_symbols("m.py", text, new)
        known = dict(regions_mod._known)
        assert got == _whole(text, new), (step, text, new)
        assert new in known or not _used_region(text, new)  # kept for the next write
        regions_mod._known.update(known)  # _whole forgot them: keep the process's memory
        text = new


# --------------------------------------------------------------------------- fuzzing

_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z_0-9]*\b")
_NUMBER = re.compile(r"\b\d+\b")


def _rename(lines: list[str], i: int, rng: random.Random) -> None:
    names = _IDENT.findall(lines[i])
    if not names:
        return
    name = rng.choice(names)
    other = rng.choice(["x", "tmp", "renamed_" + name, name + "2", "self", "_ctxnb_1_0"])
    # In this line, in the lines around it, or everywhere: a rename may cross the region.
    span = rng.choice([(i, i + 1), (max(0, i - 8), i + 8), (0, len(lines))])
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    for j in range(*span):
        if j < len(lines):
            lines[j] = pattern.sub(other, lines[j])


def _edits() -> list[Callable[[list[str], int, random.Random], None]]:
    def constant(lines: list[str], i: int, rng: random.Random) -> None:
        lines[i] = _NUMBER.sub(lambda m: str(int(m.group()) + rng.choice([0, 1])), lines[i], 1)

    def comment(lines: list[str], i: int, rng: random.Random) -> None:
        indent = rng.choice(["", "    ", "        ", "\t"])
        lines.insert(i, indent + "# note\n")

    def trailing_comment(lines: list[str], i: int, rng: random.Random) -> None:
        lines[i] = lines[i].rstrip("\n") + "  # why\n"

    def reformat(lines: list[str], i: int, rng: random.Random) -> None:
        old = rng.choice([" = ", ", ", " + ", "(", " if ", ": "])
        new = {" = ": "=", ", ": ",", " + ": "+", "(": "( ", " if ": "  if ", ": ": ":"}[old]
        lines[i] = lines[i].replace(old, new)

    def delete(lines: list[str], i: int, rng: random.Random) -> None:
        del lines[i : i + rng.choice([1, 1, 2, 5])]

    def duplicate(lines: list[str], i: int, rng: random.Random) -> None:
        lines.insert(i, lines[i])

    def blank(lines: list[str], i: int, rng: random.Random) -> None:
        lines.insert(i, rng.choice(["\n", "   \n", "\x0c\n"]))

    def indent(lines: list[str], i: int, rng: random.Random) -> None:
        lines[i] = rng.choice(
            ["    " + lines[i], lines[i][4:] if lines[i][:4] == "    " else lines[i]]
        )

    def quote(lines: list[str], i: int, rng: random.Random) -> None:
        lines[i] = rng.choice(['"""', "'''", "#", "@decorate\n", "\\\n", "(", ")"]) + lines[i]

    def line_end(lines: list[str], i: int, rng: random.Random) -> None:
        lines[i] = (
            lines[i].rstrip("\n") + rng.choice([" \\", "(", ",", ";", '"""', ";x = 1"]) + "\n"
        )

    def swap(lines: list[str], i: int, rng: random.Random) -> None:
        if i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]

    def statement(lines: list[str], i: int, rng: random.Random) -> None:
        lines.insert(
            i,
            rng.choice(
                [
                    "x = 1\n",
                    "    y = 2\n",
                    "global LIMIT\n",
                    "    nonlocal y\n",
                    "def q():\n    pass\n",
                ]
            ),
        )

    return [
        _rename, _rename, constant, comment, trailing_comment, reformat, delete, duplicate,
        blank, indent, quote, line_end, swap, statement,
    ]  # fmt: skip


_EDITS = _edits()


def _random_edit(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True) or ["\n"]
    for _ in range(rng.choice([1, 1, 1, 2])):
        if not lines:
            break
        i = rng.randrange(len(lines))
        rng.choice(_EDITS)(lines, i, rng)
    return "".join(lines)


def _stdlib_sources() -> Iterator[tuple[str, str]]:
    """Real Python: the standard library's own modules, smallest first."""
    root = Path(ast.__file__).parent
    for path in sorted(root.rglob("*.py")):
        if 200 < path.stat().st_size < 12_000 and "site-packages" not in path.parts:
            yield str(path.relative_to(root)), path.read_text("utf-8", errors="replace")


def test_random_edits_of_the_standard_library_agree() -> None:
    rng = random.Random(20261125)
    sources = list(_stdlib_sources())
    assert len(sources) > 100, sys.prefix
    compared = regions = 0
    outcomes: set[str] = set()
    for name, text in rng.sample(sources, 48):
        regions_mod._known.clear()
        edits = 0
        while edits < 25:
            new = _random_edit(text, rng)
            if new == text:
                continue
            edits += 1
            expected = _whole(text, new)
            assert _by_region(text, new) == expected, (name, new)
            compared += 1
            outcomes.add(expected[0])
            regions += _used_region(text, new, forget=False)  # cached by the call above
    assert compared == 1200
    assert outcomes == {"AST_REFACTOR", "INTENT_EVOLUTION"}
    assert regions > compared // 2  # most edits were answered from their region
