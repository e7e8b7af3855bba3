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

import ast
import bisect
import functools
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import PurePath
from typing import Literal

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
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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


@functools.lru_cache(maxsize=4)
def _tree(source: str) -> ast.Module:
    # One parse of a write's new text for the node kinds and the touched symbols, which
    # only read it (_python_shape renames in place: it parses its own copy).
    return ast.parse(source)


@functools.lru_cache(maxsize=64)
def _node_kinds(source: str) -> tuple[object, ...]:
    # Node kinds, constants and attribute names: what renaming local variables leaves alone.
    return _kinds_of(_tree(source))


def _kinds_of(node: ast.AST) -> tuple[object, ...]:
    out: list[object] = []
    for n in ast.walk(node):
        out.append(type(n).__name__)
        if isinstance(n, ast.Constant):
            out.append(repr(n.value))
        elif isinstance(n, ast.Attribute):
            out.append(n.attr)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _python_shape(source: str) -> str:
    # Cached: the new text of one write is the old text of the next.
    tree = ast.parse(source)
    _LocalRenamer().visit(tree)
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


class _LocalRenamer(ast.NodeTransformer):
    """Renames each function's local variables to ``_ctxnb_<function>_<n>``."""

    def __init__(self) -> None:
        self.counter = 0
        self.mapping: dict[str, str] = {}

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> ast.AST:
        outer = self.mapping
        index = self.counter
        self.counter += 1
        params = {a.arg for a in _all_args(node.args)}
        body = node.body if isinstance(node.body, list) else [node.body]
        declared: set[str] = set()
        globals_: set[str] = set()
        locals_in_order: list[str] = []
        for stmt in body:
            for sub in _walk_scope(ast.Module(body=[stmt], type_ignores=[])):
                if isinstance(sub, ast.Global | ast.Nonlocal):
                    declared.update(sub.names)
                    if isinstance(sub, ast.Global):
                        globals_.update(sub.names)
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
                    locals_in_order.append(sub.id)
                elif isinstance(sub, ast.ExceptHandler) and sub.name:
                    locals_in_order.append(sub.name)
        inner = dict(outer)
        for name in (p for p in params if p in inner):
            del inner[name]  # a parameter shadows an outer local of the same name
        n = 0
        for name in dict.fromkeys(locals_in_order):
            if name not in params and name not in declared:
                inner[name] = f"_ctxnb_{index}_{n}"
                n += 1
        # Names declared nonlocal keep the enclosing function's canonical name; names
        # declared global are the module's and keep their own.
        for name in globals_:
            inner.pop(name, None)
        self.mapping = inner
        try:
            if isinstance(node, ast.Lambda):
                node.body = self.visit(node.body)
            else:
                node.decorator_list = [self.visit(d) for d in node.decorator_list]
                node.body = [self.visit(s) for s in node.body]
                if node.returns is not None:
                    node.returns = self.visit(node.returns)
        finally:
            self.mapping = outer
        # Defaults are evaluated in the enclosing scope.
        node.args = self.visit(node.args)
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        outer = self.mapping
        self.generic_visit(node)  # class bodies see enclosing locals by name
        self.mapping = outer
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        node.names = [self.mapping.get(n, n) for n in node.names]
        return node

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        # Only defaults and annotations are expressions here; parameter names stay.
        node.defaults = [self.visit(d) for d in node.defaults]
        node.kw_defaults = [self.visit(d) if d is not None else None for d in node.kw_defaults]
        for a in _all_args(node):
            if a.annotation is not None:
                a.annotation = self.visit(a.annotation)
        return node


def _all_args(args: ast.arguments) -> list[ast.arg]:
    out = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg:
        out.append(args.vararg)
    if args.kwarg:
        out.append(args.kwarg)
    return out


def _walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """Walk a statement without entering nested function, lambda or class bodies."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield ast.Name(id=child.name, ctx=ast.Store())  # the def binds its name
            continue
        if isinstance(child, ast.Lambda):
            continue
        yield from _walk_scope(child)


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
        elif not any(p.symbols() for p in (*region.before, *region.after)):
            return []  # the pieces outside the region are the same text on both sides
        else:
            before, after = region.old.symbols(), region.new.symbols()
    except (SyntaxError, ValueError, RecursionError):
        return []
    out = [name for name, text in after.items() if before.get(name) != text]
    out += [name for name in before if name not in after]
    return out


@functools.lru_cache(maxsize=64)
def _symbols(source: str) -> dict[str, str]:
    """Symbol name → its source text (classes without their methods), in file order."""
    # Cached like _python_shape (callers only read the result). Lines as the parser
    # counts them: str.splitlines also breaks at form feeds and other separators, which
    # would shift every later symbol off its own lines.
    return _symbols_of(_tree(source).body, _LINE_BREAK.split(source))


def _symbols_of(body: list[ast.stmt], lines: list[str]) -> dict[str, str]:
    """The symbols of top-level statements ``body``, numbered as ``lines`` are."""
    out: dict[str, str] = {}

    def segment(node: ast.AST) -> list[str]:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return [line.rstrip() for line in lines[first - 1 : node.end_lineno]]

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out[prefix + node.name] = "\n".join(segment(node))
            elif isinstance(node, ast.ClassDef):
                name = prefix + node.name
                text = segment(node)
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                kept = list(text)
                # Blank out nested defs so a method change does not touch the class.
                for child in node.body:
                    if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        c_start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                        for i in range(c_start - start, (child.end_lineno or 0) - start + 1):
                            kept[i] = ""
                out[name] = "\n".join(k for k in kept if k.strip())
                visit(node.body, name + ".")

    visit(body, "")
    return out


# --------------------------------------------------------------------------- regions
#
# A one-line edit of a long file need not parse the file twice. A Python text is cut into
# pieces at top-level statement boundaries where the tokenizer starts afresh (column 0,
# no open bracket, string or backslash continuation), so each piece parses on its own and
# a text parses exactly when all its pieces do. The pieces before and after a change are
# the same text in both versions; only the pieces the change overlaps are parsed and
# compared. The answer is the whole-file answer (tests/test_govern_mutation_regions.py):
#
# - the renamer's only state between top-level statements is its function counter, so
#   with the counter started afresh in each statement, two modules' shapes are equal
#   exactly when their statements' shapes are equal in order (unless the text itself
#   spells the renamer's names, ``_ctxnb_``: then the whole file is compared);
# - a piece list comes from one whole parse of a text, or from the old text's pieces
#   with the changed ones swapped for the parse of the changed region: if that region
#   does not parse on its own, or ends mid-line, the whole file is compared instead.
# What would change the parse of the rest (``barry_as_FLUFL``) or the line numbering
# (a carriage return that is not part of CRLF) sends the whole file down that path too.
# One answer differs, on purpose: a statement nested so deeply that renaming it exceeds
# the interpreter's recursion limit makes the whole-file comparison fail (an evolution,
# whatever changed, depending on the caller's stack depth); outside the changed region
# such a statement is not compared again, and the region gives the real answer.

_PIECES_KEPT = 4  # texts; each holds its parse: a few files edited in turn


class _Piece:
    """Whole top-level statements of a Python text, with the comments after them."""

    __slots__ = ("_kinds", "_shapes", "_symbols", "lines", "stmts", "text")

    def __init__(self, text: str, stmts: list[ast.stmt], lines: list[str]) -> None:
        self.text = text
        self.stmts = stmts  # numbered as ``lines`` (the text they were parsed from) are
        self.lines = lines
        self._kinds: list[tuple[object, ...]] | None = None
        self._shapes: tuple[str, ...] | None = None
        self._symbols: dict[str, str] | None = None

    def shapes(self) -> tuple[str, ...]:
        """Each statement's shape, its local variables renamed as in the whole module."""
        if self._shapes is None:
            # A fresh parse: renaming works in place, and the statements may be shared.
            out = []
            for stmt in ast.parse(self.text).body:
                _LocalRenamer().visit(stmt)  # the counter starts afresh per statement
                out.append(ast.dump(stmt, annotate_fields=True, include_attributes=False))
            self._shapes = tuple(out)
        return self._shapes

    def kinds(self) -> list[tuple[object, ...]]:
        """Each statement's node kinds: unequal kinds make unequal shapes, sooner."""
        if self._kinds is None:  # kept: this write's new piece is the next one's old
            self._kinds = [_kinds_of(stmt) for stmt in self.stmts]
        return self._kinds

    def symbols(self) -> dict[str, str]:
        if self._symbols is None:
            self._symbols = _symbols_of(self.stmts, self.lines)
        return self._symbols


class _Pieces:
    """A Python text cut into pieces; ``bounds[i]`` is where piece ``i`` starts."""

    __slots__ = ("bounds", "pieces")

    def __init__(self, bounds: list[int], pieces: list[_Piece]) -> None:
        self.bounds = bounds  # one more than the pieces: the last is the text's length
        self.pieces = pieces

    def symbols(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for piece in self.pieces:
            out.update(piece.symbols())  # as one pass over the file: a later def wins
        return out


class _Region:
    __slots__ = ("after", "before", "new", "old")

    def __init__(self, old: _Pieces, new: _Pieces, before: list[_Piece], after: list[_Piece]):
        self.old, self.new, self.before, self.after = old, new, before, after


_known: dict[str, _Pieces] = {}  # text -> its pieces, most recently used last


def _remember(text: str, pieces: _Pieces) -> None:
    _known.pop(text, None)
    _known[text] = pieces
    while len(_known) > _PIECES_KEPT:
        del _known[next(iter(_known))]


def _cut(text: str, body: list[ast.stmt]) -> _Pieces:
    """Cut ``text`` (parsed as ``body``) at the lines where a top-level statement starts
    on a fresh line: the previous statement ended above it, not by a backslash."""
    if not text:
        return _Pieces([0], [])
    lines = text.split("\n")
    starts = [0]
    groups: list[list[ast.stmt]] = [[]]
    end = 0
    for node in body:
        first = node.lineno
        for decorator in getattr(node, "decorator_list", ()):
            first = min(first, decorator.lineno)
        if groups[-1] and first > end and not lines[first - 2].endswith(("\\", "\\\r")):
            starts.append(first - 1)
            groups.append([])
        groups[-1].append(node)
        end = max(end, node.end_lineno or first)
    lengths = list(itertools.accumulate(map(len, lines)))  # line k starts after k newlines
    bounds = [0, *(lengths[start - 1] + start for start in starts[1:]), len(text)]
    pieces = [
        _Piece(text[bounds[i] : bounds[i + 1]], group, lines) for i, group in enumerate(groups)
    ]
    return _Pieces(bounds, pieces)


def _splittable(text: str) -> bool:
    return "barry_as_FLUFL" not in text and text.count("\r") == text.count("\r\n")


def _pieces_of(text: str) -> _Pieces | None:
    """The pieces of a whole text (``None``: compare it whole); raises if it does not parse."""
    known = _known.get(text)
    if known is not None:
        _remember(text, known)
        return known
    if not _splittable(text):
        return None
    pieces = _cut(text, _tree(text).body)
    _remember(text, pieces)
    return pieces


def _common_ends(x: str, y: str) -> tuple[int, int]:
    """Lengths of the common prefix and (not overlapping it) suffix of ``x`` and ``y``."""
    limit = min(len(x), len(y))
    a = 0
    step = 4096
    while step:  # compares blocks in C: no Python loop over characters
        while a + step <= limit and x[a : a + step] == y[a : a + step]:
            a += step
        step //= 8
    limit -= a
    b = 0
    step = 4096
    lx, ly = len(x), len(y)
    while step:
        while b + step <= limit and x[lx - b - step : lx - b] == y[ly - b - step : ly - b]:
            b += step
        step //= 8
    return a, b


@functools.lru_cache(maxsize=4)
def _region(old: str, new: str) -> _Region | None:
    """The pieces a change overlaps, before and after it (``None``: compare whole files).

    Raises SyntaxError (or ValueError) when ``old`` does not parse. Cached: the mutation
    class and the touched symbols of one change both ask.
    """
    before = _pieces_of(old)
    if before is None:
        return None
    bounds = before.bounds
    n = len(before.pieces)
    a, b = _common_ends(old, new)
    a = old.rfind("\n", 0, a) + 1  # the changed line's start
    i0 = min(bisect.bisect_right(bounds, a) - 1, n)
    start = bounds[i0]
    i1 = bisect.bisect_left(bounds, len(old) - b)
    delta = len(new) - len(old)
    # The region must end a line in the new text too, so the rest starts a fresh line.
    while i1 < n and bounds[i1] + delta > start and new[bounds[i1] + delta - 1] != "\n":
        i1 += 1
    end = bounds[i1]
    changed_old, changed_new = old[start:end], new[start : end + delta]
    if "_ctxnb_" in changed_old or "_ctxnb_" in changed_new or not _splittable(changed_new):
        return None
    try:
        cut = _cut(changed_new, ast.parse(changed_new).body)
    except (SyntaxError, ValueError, RecursionError):
        return None  # not self-contained (or not Python): the whole file decides
    after = _Pieces(
        bounds[:i0] + [start + x for x in cut.bounds[:-1]] + [x + delta for x in bounds[i1:]],
        before.pieces[:i0] + cut.pieces + before.pieces[i1:],
    )
    _remember(new, after)  # the next write's old text
    return _Region(before, after, before.pieces[i0:i1], cut.pieces)


def _python_same(old: str, new: str) -> bool:
    """Whether two Python texts have the same shape (raises when one does not parse)."""
    region = _region(old, new)
    if region is None:
        # Renaming never changes the kinds of nodes in order: when they differ the
        # answer is known without the (slower) renaming comparison.
        return _node_kinds(old) == _node_kinds(new) and _python_shape(old) == _python_shape(new)
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
