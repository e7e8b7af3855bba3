"""Mutation classes and touched symbols."""

from __future__ import annotations

import doctest

import pytest

import ctxnb.govern.mutation as mutation_mod
from ctxnb.govern.mutation import classify_mutation, touched_symbols

BASE = '''\
"""Module doc."""
import os

LIMIT = 10


def area(width, height):
    """Area of a rectangle."""
    result = width * height  # multiply
    return result


class Shape:
    sides = 0

    def describe(self, prefix):
        text = prefix + str(self.sides)
        for item in range(2):
            text += str(item)
        return text
'''

REFACTORS = [
    (
        "reformatted",
        BASE.replace("width * height", "width*height").replace("\n\n\nclass", "\nclass"),
    ),
    ("comment removed", BASE.replace("  # multiply", "")),
    ("comment added", BASE.replace("    return result", "    # done\n    return result")),
    ("local renamed", BASE.replace("result", "product")),
    ("loop var renamed", BASE.replace("item", "i").replace("str(i)", "str(i)")),
    ("method local renamed", BASE.replace("text", "out")),
    ("quotes changed", BASE.replace('"""Area of a rectangle."""', "'''Area of a rectangle.'''")),
    ("parenthesized", BASE.replace("return result", "return (result)")),
]

EVOLUTIONS = [
    ("docstring changed", BASE.replace("Area of a rectangle.", "Area.")),
    ("operator changed", BASE.replace("width * height", "width + height")),
    ("parameter renamed", BASE.replace("width", "w")),
    ("global renamed", BASE.replace("LIMIT", "MAXIMUM")),
    ("method renamed", BASE.replace("describe", "show")),
    ("class attr renamed", BASE.replace("sides", "edges")),
    ("constant changed", BASE.replace("LIMIT = 10", "LIMIT = 11")),
    ("import added", BASE.replace("import os", "import os\nimport sys")),
    ("syntax error", BASE.replace("def area(width, height):", "def area(width, height)")),
    ("two locals merged", BASE.replace("text += str(item)", "text += str(text)")),
]


@pytest.mark.parametrize(("label", "new"), REFACTORS)
def test_python_refactors(label: str, new: str) -> None:
    assert new != BASE or label == "loop var renamed"
    assert classify_mutation("pkg/m.py", BASE, new) == "AST_REFACTOR", label


@pytest.mark.parametrize(("label", "new"), EVOLUTIONS)
def test_python_evolutions(label: str, new: str) -> None:
    assert new != BASE
    assert classify_mutation("pkg/m.py", BASE, new) == "INTENT_EVOLUTION", label


def test_swapping_two_locals_is_an_evolution() -> None:
    old = "def f(a):\n    x = a\n    y = 2\n    return x - y\n"
    new = "def f(a):\n    x = a\n    y = 2\n    return y - x\n"
    assert classify_mutation("m.py", old, new) == "INTENT_EVOLUTION"
    consistent = "def f(a):\n    y = a\n    x = 2\n    return y - x\n"
    assert classify_mutation("m.py", old, consistent) == "AST_REFACTOR"


def test_global_declaration_is_not_renamed() -> None:
    old = "def f():\n    global counter\n    counter = 1\n"
    new = "def f():\n    global total\n    total = 1\n"
    assert classify_mutation("m.py", old, new) == "INTENT_EVOLUTION"


def test_nonlocal_and_closures_rename_consistently() -> None:
    old = (
        "def outer():\n    count = 0\n    def inc():\n        nonlocal count\n"
        "        count += 1\n        return count\n    return inc\n"
    )
    new = old.replace("count", "n")
    assert classify_mutation("m.py", old, new) == "AST_REFACTOR"


def test_new_file_and_identical() -> None:
    assert classify_mutation("m.py", "", "x = 1\n") == "INTENT_EVOLUTION"
    assert classify_mutation("m.py", BASE, BASE) == "AST_REFACTOR"


@pytest.mark.parametrize(
    ("path", "old", "new", "expected"),
    [
        ("a.js", "let a = 1; // one\n", "let a=1;\n", "AST_REFACTOR"),
        ("a.js", "let a = 1;", "let a = 2;", "INTENT_EVOLUTION"),
        ("a.js", 'let u = "http://x";', 'let u = "http://y";', "INTENT_EVOLUTION"),
        ("a.js", 'let u = "a  b";', 'let u = "a b";', "INTENT_EVOLUTION"),
        ("a.ts", "/* doc */\nfunction f() {}", "function f() {\n}", "AST_REFACTOR"),
        ("main.go", "x := 1 // c", "x := 1", "AST_REFACTOR"),
        ("run.sh", "ls  -la # list\n", "ls -la\n", "AST_REFACTOR"),
        ("run.sh", "ls -la\n", "ls -l\n", "INTENT_EVOLUTION"),
        ("q.sql", "SELECT 1; -- c\n", "SELECT  1;\n", "AST_REFACTOR"),
        ("p.html", "<p>hi</p><!-- x -->", "<p>hi</p>", "AST_REFACTOR"),
        ("notes.md", "one two\nthree", "one\ntwo three", "AST_REFACTOR"),
        ("notes.md", "one two", "one three", "INTENT_EVOLUTION"),
        ("c.json", '{"a": 1, "b": [1]}', '{"b":[1],"a":1}', "AST_REFACTOR"),
        ("c.json", '{"a": 1}', '{"a": 2}', "INTENT_EVOLUTION"),
        ("c.json", '{"a": 1}', '{"a": ', "INTENT_EVOLUTION"),
        ("c.yaml", "a: 1 # c\nb: x\n", "b: x\na: 1\n", "AST_REFACTOR"),
        ("c.yaml", "a:\n  b: 1\n", "a:\nb: 1\n", "INTENT_EVOLUTION"),
        ("c.yaml", "a: 1\n", "a: [\n", "INTENT_EVOLUTION"),
        ("p.toml", "[x]\na = 1 # c\n", "[x]\na=1\n", "AST_REFACTOR"),
        ("p.toml", "[x]\na = 1\n", "[x\n", "INTENT_EVOLUTION"),
        ("Makefile", "all: # build\n\tcc x\n", "all:\n\tcc  x\n", "AST_REFACTOR"),
    ],
)
def test_other_languages(path: str, old: str, new: str, expected: str) -> None:
    assert classify_mutation(path, old, new) == expected


def test_touched_symbols() -> None:
    new = BASE.replace("width * height", "width + height").replace(
        "text += str(item)", "text += repr(item)"
    )
    assert touched_symbols("m.py", BASE, new) == ["area", "Shape.describe"]


def test_touched_symbols_class_level_and_added_removed() -> None:
    new = BASE.replace("sides = 0", "sides = 3").replace("def area(", "def surface(")
    assert touched_symbols("m.py", BASE, new) == ["surface", "Shape", "area"]


def test_touched_symbols_decorator_and_comment() -> None:
    old = "def f():\n    return 1\n"
    assert touched_symbols("m.py", old, "@cache\ndef f():\n    return 1\n") == ["f"]
    assert touched_symbols("m.py", old, "def f():\n    return 1  # one\n") == ["f"]
    assert touched_symbols("m.py", old, "\n\ndef f():\n    return 1\n") == []


def test_touched_symbols_other_languages_and_errors() -> None:
    assert touched_symbols("a.js", "a", "b") == []
    assert touched_symbols("m.py", "def f(:\n", "def f():\n    pass\n") == []


def test_docstring_examples() -> None:
    result = doctest.testmod(mutation_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5
    assert result.failed == 0


def test_touched_symbols_count_lines_as_the_parser_does() -> None:
    # A form feed (a page break in many older sources), a vertical tab or a Unicode line
    # separator in a comment or a string is no line break to Python's tokenizer, but it
    # is one to str.splitlines.
    for sep in ("\x0c", "\x0b", "\u2028", "\x1c", "\x85"):
        for old in (
            f"x = 1  # a{sep}b\ndef f():\n    return 1\n",
            f"s = 'a{sep}b'\ndef f():\n    return 1\n",
        ):
            new = old.replace("return 1", "return 2")
            assert touched_symbols("m.py", old, new) == ["f"], repr(old)
    page = "x = 1\n\x0c\ndef f():\n    return 1\n"
    assert touched_symbols("m.py", page, page.replace("return 1", "return 2")) == ["f"]
    crlf = "x = 1\r\ndef f():\r\n    return 1\r\n"
    assert touched_symbols("m.py", crlf, crlf.replace("return 1", "return 2")) == ["f"]
    assert touched_symbols("m.py", crlf, crlf.replace("\r\n", "\n")) == []
    lone_cr = "x = 1\rdef f():\r    return 1\r"
    assert touched_symbols("m.py", lone_cr, lone_cr.replace("return 1", "return 2")) == ["f"]


def test_the_kinds_stream_holds_every_node_of_real_files():
    # The necessary test walks depth first over _fields; it must see what ast.walk sees
    # (every node, constant and attribute name), only in another order.
    import ast
    import collections

    import ctxnb
    from ctxnb.govern._pyshape import _iter_kinds

    def walked(tree: ast.AST) -> collections.Counter:
        out: collections.Counter = collections.Counter()
        for n in ast.walk(tree):
            out[type(n).__name__] += 1
            if isinstance(n, ast.Constant):
                out[repr(n.value)] += 1
            elif isinstance(n, ast.Attribute):
                out[n.attr] += 1
        return out

    from pathlib import Path

    sources = sorted(Path(ctxnb.__file__).parent.rglob("*.py"))[:60] + [Path(ast.__file__)]
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert collections.Counter(_iter_kinds(tree)) == walked(tree), path
