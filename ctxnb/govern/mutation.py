"""Mutation classes: did a write change what the code means, or only how it looks?

After every governed write the trace record gets a mutation class:

- ``AST_REFACTOR``: the code is the same up to formatting, comments and renames of
  local variables. For Python the two syntax trees are compared (``ast.dump`` without
  positions); before comparing, the local variables of every function (names it
  assigns that are not parameters, ``global`` or ``nonlocal``) are renamed to
  canonical names in order of first appearance, so renaming a local is a refactor.
  Parameters, attributes, module- and class-level names are the code's interface and
  are compared as written. Docstrings are content: changing one is an evolution.
  JSON, YAML and TOML files compare by their parsed values. Other languages compare
  by tokens, with comments removed for the common comment syntaxes of the file's
  extension and whitespace between tokens ignored (strings are kept whole).
- ``INTENT_EVOLUTION``: anything else, including text that does not parse.

:func:`touched_symbols` names the Python functions, classes and methods whose source
changed, for the intent map.

For Python both parse only the top-level statements a change overlaps when that region
parses on its own (the old text's statements are known from one parse of it, or from
the previous write); the answer is the whole file's.

Example:
    >>> classify_mutation("a.py", "def f(x):\\n    y = x + 1\\n    return y\\n",
    ...                   "def f(x):  # add one\\n    total = x+1\\n    return total\\n")
    'AST_REFACTOR'
    >>> classify_mutation("a.py", "def f(x):\\n    return x\\n", "def f(x):\\n    return -x\\n")
    'INTENT_EVOLUTION'
    >>> touched_symbols("a.py", "def f():\\n    pass\\n", "def f():\\n    return 1\\n")
    ['f']
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath
from typing import Literal

from ._pyshape import _python_shape, _same_kinds, _symbols, _tree
from ._regions import _known, _region

__all__ = ["MutationClass", "classify_mutation", "touched_symbols"]

MutationClass = Literal["AST_REFACTOR", "INTENT_EVOLUTION"]

_PY = {".py", ".pyi", ".pyw"}
_C_LIKE = set(
    ".c .h .cc .cpp .cxx .hpp .hh .cs .java .js .jsx .mjs .cjs .ts .tsx .go .rs .swift .kt "
    ".kts .scala .dart .php .css .scss .less .groovy .gradle .proto .zig .v .sol".split()
)
_HASH = set(
    ".sh .bash .zsh .fish .rb .pl .pm .r .ps1 .cfg .conf .ini .mk .cmake .tf .hcl .nix "
    ".dockerfile .gitignore .env .properties .jl .ex .exs .cr .coffee".split()
)
_DASH = {".sql", ".lua", ".hs", ".elm", ".ada", ".adb", ".ads"}
_MARKUP = {".html", ".htm", ".xml", ".svg", ".xhtml", ".vue", ".svelte"}
_HASH_NAMES = {"Makefile", "makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Gemfile"}

_STRING = r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|`(?:\\.|[^`\\])*`'
_WORD = r"[A-Za-z0-9_$.]+|\S"


def classify_mutation(path: str, old: str, new: str) -> MutationClass:
    """``AST_REFACTOR`` when ``new`` means what ``old`` meant, else ``INTENT_EVOLUTION``.

    Args:
        path: the file's path; its extension picks the comparison.
        old: the content before the write (empty for a new file).
        new: the content after the write.

    Example:
        >>> classify_mutation("app.js", "let a = 1; // one", "let a=1;")
        'AST_REFACTOR'
        >>> classify_mutation("conf.yaml", "a: 1\\nb: [1, 2]\\n", "b:\\n  - 1\\n  - 2\\na: 1\\n")
        'AST_REFACTOR'
    """
    if old == new:
        return "AST_REFACTOR"
    p = PurePath(path)
    ext = p.suffix.lower()
    try:
        if ext in _PY:
            same = _python_same(old, new)
        elif ext == ".json":
            same = json.loads(old) == json.loads(new)
        elif ext in (".yaml", ".yml"):
            import yaml  # only for YAML: the post-edit hook imports this module

            try:
                same = list(yaml.safe_load_all(old)) == list(yaml.safe_load_all(new))
            except yaml.YAMLError:
                return "INTENT_EVOLUTION"
        elif ext == ".toml":
            import tomllib

            same = tomllib.loads(old) == tomllib.loads(new)
        else:
            same = _tokens(p, old) == _tokens(p, new)
    except (SyntaxError, ValueError, RecursionError):
        return "INTENT_EVOLUTION"  # what does not parse cannot be shown to be unchanged
    return "AST_REFACTOR" if same else "INTENT_EVOLUTION"


# --------------------------------------------------------------------------- Python


def touched_symbols(path: str, old: str, new: str) -> list[str]:
    """Python functions, classes and methods whose source differs between two versions.

    Methods are named ``Class.method``; a class itself is listed when its header,
    decorators or class-level statements changed. Added and removed symbols count.
    Returns ``[]`` for other languages and when either version does not parse.

    Example:
        >>> old = "class A:\\n    def f(self):\\n        return 1\\n\\ndef g():\\n    pass\\n"
        >>> new = "class A:\\n    def f(self):\\n        return 2\\n\\ndef h():\\n    pass\\n"
        >>> touched_symbols("m.py", old, new)
        ['A.f', 'h', 'g']
    """
    if PurePath(path).suffix.lower() not in _PY:
        return []
    try:
        region = _region(old, new)
        if region is None:
            before = _symbols(old)
            after = _symbols(new)
        elif not region.nested and not any(p.symbols() for p in (*region.before, *region.after)):
            return []  # the pieces outside the region are the same text on both sides
        else:
            before, after = region.old.symbols(), region.new.symbols()
    except (SyntaxError, ValueError, RecursionError):
        return []
    out = [name for name, text in after.items() if before.get(name) != text]
    out += [name for name in before if name not in after]
    return out


def _forget() -> None:
    """Drop every parse and region kept (benchmarks and tests start from nothing)."""
    _known.clear()
    for cached in (_region, _tree, _python_shape, _symbols):
        cached.cache_clear()


def _python_same(old: str, new: str) -> bool:
    """Whether two Python texts have the same shape (raises when one does not parse)."""
    region = _region(old, new)
    if region is None:
        # Renaming never changes the kinds of nodes in order: when they differ the
        # answer is known without the (slower) renaming comparison.
        return _same_kinds(old, new) and _python_shape(old) == _python_shape(new)
    sides = (region.before, region.after)
    if sum(len(p.stmts) for p in region.before) != sum(len(p.stmts) for p in region.after):
        return False
    # Statement by statement, piece by piece, so the first difference ends the walk.
    kinds = [(k for piece in side for k in piece.kinds()) for side in sides]
    if any(a != b for a, b in zip(*kinds, strict=True)):
        return False
    shapes = [(s for piece in side for s in piece.shapes()) for side in sides]
    return all(a == b for a, b in zip(*shapes, strict=True))


# --------------------------------------------------------------------------- tokens


def _tokens(path: PurePath, text: str) -> list[str]:
    ext = path.suffix.lower()
    comments: list[str] = []
    if ext in _C_LIKE:
        comments = [r"//[^\n]*", r"/\*.*?\*/"]
        if ext == ".php":
            comments.append(r"#[^\n]*")
        if ext == ".css":
            comments = [r"/\*.*?\*/"]
    elif ext in _HASH or path.name in _HASH_NAMES:
        comments = [r"#[^\n]*"]
    elif ext in _DASH:
        comments = [r"--[^\n]*"] + ([r"\{-.*?-\}"] if ext in (".hs", ".elm") else [])
    elif ext in _MARKUP:
        comments = [r"<!--.*?-->"]
    strings = _STRING if ext not in _MARKUP else r'"[^"]*"|\'[^\']*\''
    pattern = "|".join([*(f"(?P<c{i}>{c})" for i, c in enumerate(comments)), strings, _WORD])
    out: list[str] = []
    for m in re.finditer(pattern, text, re.S):
        if m.lastgroup and m.lastgroup.startswith("c"):
            continue
        out.append(m.group(0))
    return out
