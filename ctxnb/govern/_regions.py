"""The changed region of a Python text, for the mutation class (:mod:`ctxnb.govern.mutation`).

A one-line edit of a long file need not parse the file twice. A Python text is cut into
pieces at statement boundaries where the tokenizer starts afresh (no open bracket,
string or backslash continuation, the indentation of the level), so each piece parses on
its own and a text parses exactly when all its pieces do: top-level statements, and the
members of a top-level class (parsed inside a stand-in ``class _:`` at their own
indentation). The pieces before and after a change are the same text in both versions;
only the pieces the change overlaps are parsed and compared. The answer is the
whole-file answer (tests/govern/test_govern_mutation_regions.py):

- the renamer's only state between the statements of the module, or of a top-level
  class's body, is its function counter, so with the counter started afresh in each
  statement two modules' shapes are equal exactly when those statements' shapes are
  equal in order (unless the changed text spells the renamer's names, ``_ctxnb_``: then
  the whole file is compared);
- a piece list comes from one whole parse of a text, or from the old text's pieces with
  the changed ones swapped for the parse of the changed region: if that region does not
  parse on its own, leaves its level, or ends mid-line, the whole file is compared.

What would change the parse of the rest (``barry_as_FLUFL``) or the line numbering (a
carriage return that is not part of CRLF) sends the whole file down that path too. One
answer differs, on purpose: a statement nested so deeply that renaming it exceeds the
interpreter's recursion limit makes the whole-file comparison fail (an evolution,
whatever changed, depending on the caller's stack depth); outside the changed region
such a statement is not compared again, and the region gives the real answer.
"""

from __future__ import annotations

import ast
import bisect
import functools
import itertools
from collections.abc import Callable

from ._pyshape import _kinds_of, _LocalRenamer, _symbols_of, _tree

_PIECES_KEPT = 4  # texts; each holds its parse: a few files edited in turn
_WRAPPER = "class _:\n"  # parses a class's members on their own, at their own indentation


class _Piece:
    """Whole statements of one level of a Python text, with the comments after them."""

    __slots__ = (
        "_build", "_head", "_indent", "_kinds", "_lines", "_members", "_shapes", "_stmts",
        "_symbols", "line0", "member", "prefix", "text",
    )  # fmt: skip

    def __init__(
        self,
        text: str,
        stmts: list[ast.stmt] | None,
        lines: list[str] | None,
        *,
        line0: int = 1,
        prefix: str = "",
        member: bool = False,
        members: _Pieces | None = None,
        indent: str = "",
        head: list[str] | None = None,
        build: Callable[[], _Members] | None = None,
    ) -> None:
        self.text = text
        # Numbered as ``lines`` (the text they were parsed from) are; None for a class
        # rebuilt from its members, parsed from ``text`` when asked.
        self._stmts = stmts
        self._lines = lines
        self.line0 = line0  # the number ``stmts`` give the text's first line
        self.prefix = prefix  # "Class." for a class's members
        self.member = member  # a class's member: parsed inside _WRAPPER
        self._members = members  # a top-level class's members (bounds from the text's start)
        self._indent = indent  # of those members
        self._head = head  # the class's own lines before them, as its symbol keeps them
        self._build = build  # cuts the members when first asked: most classes never are
        self._kinds: list[tuple[object, ...]] | None = None
        self._shapes: tuple[str, ...] | None = None
        self._symbols: dict[str, str] | None = None

    @property
    def members(self) -> _Pieces | None:
        if self._build is not None:
            self._members, self._indent, self._head = self._build()
            self._build = None
        return self._members

    @property
    def indent(self) -> str:
        return self._indent if self.members is not None else ""

    @property
    def stmts(self) -> list[ast.stmt]:
        if self._stmts is None:
            self._stmts = ast.parse(self.text).body
            self._lines = self.text.split("\n")
        return self._stmts

    def shapes(self) -> tuple[str, ...]:
        """Each statement's shape, its local variables renamed as in the whole module."""
        if self._shapes is None:
            # A fresh parse: renaming works in place, and the statements may be shared.
            out = []
            for stmt in _body(self.text, self.member):
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
            if self._stmts is None and self._members is not None and self._head is not None:
                self._symbols = _class_symbols(self._head, self._members)  # no parse
            else:
                stmts = self.stmts
                self._symbols = _symbols_of(stmts, self._lines or [], self.prefix)
        return self._symbols

    def kept(self, last: bool) -> list[str]:
        """A member's lines as its class's symbol keeps them: nested defs blanked out, and
        after the ``last`` member nothing past its end (the class ends there)."""
        lines = self.text.split("\n")
        if self.text.endswith("\n"):
            lines.pop()
        first = self.line0
        if last:
            del lines[(self.stmts[-1].end_lineno or 0) - first + 1 :]
        for stmt in self.stmts:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                for i in range(_first_line(stmt) - first, (stmt.end_lineno or 0) - first + 1):
                    lines[i] = ""
        return [line.rstrip() for line in lines]


def _class_symbols(head: list[str], members: _Pieces) -> dict[str, str]:
    """A class's symbols from its members' (as _symbols_of finds them in the whole text)."""
    kept = list(head)
    for piece in members.pieces:
        kept += piece.kept(piece is members.pieces[-1])
    out = {members.pieces[0].prefix[:-1]: "\n".join(k for k in kept if k.strip())}
    for piece in members.pieces:
        out.update(piece.symbols())
    return out


def _body(text: str, member: bool) -> list[ast.stmt]:
    if not member:
        return ast.parse(text).body
    wrapper = ast.parse(_WRAPPER + text).body[0]
    assert isinstance(wrapper, ast.ClassDef)
    return wrapper.body


class _Pieces:
    """Pieces of a text; piece ``i`` spans ``bounds[i]`` to ``bounds[i + 1]``."""

    __slots__ = ("bounds", "pieces")

    def __init__(self, bounds: list[int], pieces: list[_Piece]) -> None:
        self.bounds = bounds
        self.pieces = pieces

    def symbols(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for piece in self.pieces:
            out.update(piece.symbols())  # as one pass over the file: a later def wins
        return out


class _Region:
    """A change's pieces before and after it, and the whole texts' pieces."""

    __slots__ = ("after", "before", "nested", "new", "old")

    def __init__(
        self, old: _Pieces, new: _Pieces, before: list[_Piece], after: list[_Piece], nested: bool
    ) -> None:
        self.old, self.new, self.before, self.after = old, new, before, after
        self.nested = nested  # members of a class: the class's own text may have changed


_known: dict[str, _Pieces] = {}  # text -> its pieces, most recently used last


def _remember(text: str, pieces: _Pieces) -> None:
    _known.pop(text, None)
    _known[text] = pieces
    while len(_known) > _PIECES_KEPT:
        del _known[next(iter(_known))]


def _first_line(node: ast.stmt) -> int:
    first = node.lineno
    for decorator in getattr(node, "decorator_list", ()):
        first = min(first, decorator.lineno)
    return first


def _fresh(lines: list[str], first: int, end: int) -> bool:
    """Whether a statement on line ``first`` starts afresh after one ending on ``end``."""
    return first > end and not lines[first - 2].endswith(("\\", "\\\r"))


def _cut(
    source: str,
    body: list[ast.stmt],
    *,
    start_line: int = 0,
    stop: int | None = None,
    prefix: str = "",
    member: bool = False,
) -> _Pieces:
    """Cut ``source`` (parsed as ``body``) from line ``start_line`` (0-based) to ``stop``
    at the lines where a statement of ``body`` starts afresh; bounds count from there."""
    lines = source.split("\n")
    lengths = list(itertools.accumulate(map(len, lines)))

    def offset(line: int) -> int:  # line ``line`` (0-based) starts after that many newlines
        return lengths[line - 1] + line if line else 0

    skip = offset(start_line)
    stop = len(source) if stop is None else stop
    if skip >= stop:
        return _Pieces([0], [])
    starts = [start_line]
    groups: list[list[ast.stmt]] = [[]]
    end = 0
    for node in body:
        first = _first_line(node)
        if groups[-1] and _fresh(lines, first, end):
            starts.append(first - 1)
            groups.append([])
        groups[-1].append(node)
        end = max(end, node.end_lineno or first)
    bounds = [offset(s) - skip for s in starts] + [stop - skip]
    pieces = []
    for i, group in enumerate(groups):
        text = source[skip + bounds[i] : skip + bounds[i + 1]]
        build = None
        if not member and len(group) == 1 and isinstance(group[0], ast.ClassDef):
            build = functools.partial(_members, source, group[0], lines, offset, skip + bounds[i])
        pieces.append(
            _Piece(
                text, group, lines, line0=starts[i] + 1, prefix=prefix, member=member, build=build
            )
        )
    return _Pieces(bounds, pieces)


_Members = tuple["_Pieces | None", str, "list[str] | None"]


def _members(
    source: str, node: ast.ClassDef, lines: list[str], offset: Callable[[int], int], base: int
) -> _Members:
    """A top-level class's members as pieces (bounds from ``base``), their indentation,
    and the class's lines before them."""
    first = _first_line(node.body[0])
    header = [node.lineno]
    header += [n.end_lineno or 0 for n in node.bases]
    header += [k.end_lineno or 0 for k in node.keywords]
    if not _fresh(lines, first, max(header)):
        return None, "", None  # a body on the header's line
    stop = min(offset(node.end_lineno or node.lineno), len(source))
    cut = _cut(
        source, node.body, start_line=first - 1, stop=stop, prefix=node.name + ".", member=True
    )
    start = offset(first - 1) - base
    cut.bounds = [start + x for x in cut.bounds]
    head = [line.rstrip() for line in lines[_first_line(node) - 1 : first - 1]]
    return cut, _indent(lines[first - 1]), head


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t\f"))]


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


def _span(bounds: list[int], first: int, last: int, new: str, delta: int) -> tuple[int, int]:
    """The pieces from the one holding ``first`` to the one ending at or after ``last``,
    widened until the new text's region ends a line, so the rest starts a fresh one."""
    n = len(bounds) - 1
    i0 = min(bisect.bisect_right(bounds, first) - 1, n)
    i1 = bisect.bisect_left(bounds, last)
    while i1 < n and bounds[i1] + delta > bounds[i0] and new[bounds[i1] + delta - 1] != "\n":
        i1 += 1
    return i0, i1


@functools.lru_cache(maxsize=4)
def _region(old: str, new: str) -> _Region | None:
    """The pieces a change overlaps, before and after it (``None``: compare whole files).

    Raises SyntaxError (or ValueError) when ``old`` does not parse. Cached: the mutation
    class and the touched symbols of one change both ask.
    """
    a, b = _common_ends(old, new)
    if 2 * (a + b) < len(old):
        return None  # most of the text changed: comparing it whole is no slower
    before = _pieces_of(old)
    if before is None:
        return None
    first = old.rfind("\n", 0, a) + 1  # the changed line's start
    last = len(old) - b
    delta = len(new) - len(old)
    bounds = before.bounds
    i0, i1 = _span(bounds, first, last, new, delta)
    if i1 == i0 + 1:
        inner = _member_region(old, new, before, i0, first, last)
        if inner is not None:
            return inner
    start, end = bounds[i0], bounds[i1]
    changed_old, changed_new = old[start:end], new[start : end + delta]
    if not _self_contained(changed_old, changed_new):
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
    return _Region(before, after, before.pieces[i0:i1], cut.pieces, nested=False)


def _self_contained(changed_old: str, changed_new: str) -> bool:
    return (
        "_ctxnb_" not in changed_old
        and "_ctxnb_" not in changed_new
        and (not changed_new or changed_new.endswith("\n"))
        and _splittable(changed_new)
    )


def _member_region(
    old: str, new: str, before: _Pieces, i: int, first: int, last: int
) -> _Region | None:
    """The members of top-level class ``i`` a change overlaps, when it stays among them."""
    piece = before.pieces[i]
    members = piece.members
    if members is None:
        return None
    base = before.bounds[i]
    bounds = [base + x for x in members.bounds]
    if not bounds[0] <= first <= last <= bounds[-1]:
        return None
    delta = len(new) - len(old)
    m0, m1 = _span(bounds, first, last, new, delta)
    start, end = bounds[m0], bounds[m1]
    changed_old, changed_new = old[start:end], new[start : end + delta]
    if not _self_contained(changed_old, changed_new):
        return None
    if changed_new:
        try:
            wrapper = ast.parse(_WRAPPER + changed_new).body
        except (SyntaxError, ValueError, RecursionError):
            return None
        # Still one class, at the members' own indentation: nothing left the class.
        if len(wrapper) != 1 or not isinstance(wrapper[0], ast.ClassDef):
            return None
        stmts = wrapper[0].body
        source = _WRAPPER + changed_new
        if _indent(source.split("\n")[_first_line(stmts[0]) - 1]) != piece.indent:
            return None
        prefix = members.pieces[0].prefix
        cut = _cut(source, stmts, start_line=1, prefix=prefix, member=True)
    elif m1 - m0 == len(members.pieces):
        return None  # a class left without members
    else:
        cut = _Pieces([0], [])
    rel = members.bounds
    inner = _Pieces(
        rel[:m0] + [start - base + x for x in cut.bounds[:-1]] + [x + delta for x in rel[m1:]],
        members.pieces[:m0] + cut.pieces + members.pieces[m1:],
    )
    rebuilt = _Piece(
        new[base : base + len(piece.text) + delta],
        None,
        None,
        members=inner,
        indent=piece.indent,
        head=piece._head,
    )
    after = _Pieces(
        before.bounds[: i + 1] + [x + delta for x in before.bounds[i + 1 :]],
        [*before.pieces[:i], rebuilt, *before.pieces[i + 1 :]],
    )
    _remember(new, after)
    return _Region(before, after, members.pieces[m0:m1], cut.pieces, nested=True)
