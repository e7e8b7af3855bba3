"""Python's syntax trees as the mutation class compares them (:mod:`ctxnb.govern.mutation`).

A module's *shape* is its syntax tree without positions, each function's local variables
renamed to canonical names in order of first appearance; its *node kinds* are what no
renaming changes (a faster, necessary test); its *symbols* are the source text of each
function, class and method.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from itertools import zip_longest
from typing import cast

# Lines as the parser counts them: str.splitlines also breaks at form feeds and other
# separators, which would shift every later symbol off its own lines.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@functools.lru_cache(maxsize=4)
def _tree(source: str) -> ast.Module:
    # One parse of a write's new text for the node kinds and the touched symbols, which
    # only read it (_python_shape renames in place: it parses its own copy).
    return ast.parse(source)


def _same_kinds(old: str, new: str) -> bool:
    """Whether two texts have the same node kinds, walked side by side: a change of
    meaning usually shows within the first nodes, and the walk ends there."""
    end = object()
    pairs = zip_longest(_iter_kinds(_tree(old)), _iter_kinds(_tree(new)), fillvalue=end)
    return all(a == b for a, b in pairs)


def _kinds_of(node: ast.AST) -> tuple[object, ...]:
    return tuple(_iter_kinds(node))


def _iter_kinds(node: ast.AST) -> Iterator[object]:
    # Node kinds, constants and attribute names: what renaming local variables leaves alone.
    # Depth first, in source order (any fixed order serves: equal trees give equal
    # streams), so that a change in the first statement ends the comparison within a few
    # nodes; ast.walk's breadth-first order would visit every statement's head first.
    # Children are read from _fields directly: ast.iter_child_nodes costs two generators
    # per node.
    stack = [node]
    while stack:
        n = stack.pop()
        yield type(n).__name__
        if isinstance(n, ast.Constant):
            yield repr(n.value)
            continue
        if isinstance(n, ast.Attribute):
            yield n.attr
        children: list[ast.AST] = []
        for field in n._fields:
            value = getattr(n, field, None)
            if isinstance(value, ast.AST):
                children.append(value)
            elif isinstance(value, list):
                children.extend(v for v in value if isinstance(v, ast.AST))
        stack.extend(reversed(children))


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
            for sub in _walk_scope(ast.Module(body=[cast(ast.stmt, stmt)], type_ignores=[])):
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


@functools.lru_cache(maxsize=64)
def _symbols(source: str) -> dict[str, str]:
    """Symbol name → its source text (classes without their methods), in file order."""
    # Cached like _python_shape (callers only read the result). Lines as the parser
    # counts them: str.splitlines also breaks at form feeds and other separators, which
    # would shift every later symbol off its own lines.
    return _symbols_of(_tree(source).body, _LINE_BREAK.split(source))


def _symbols_of(body: list[ast.stmt], lines: list[str], prefix: str = "") -> dict[str, str]:
    """The symbols of statements ``body`` (numbered as ``lines`` are), named ``prefix`` + name."""
    out: dict[str, str] = {}

    def segment(node: ast.stmt) -> list[str]:
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

    visit(body, prefix)
    return out
