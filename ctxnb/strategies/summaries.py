"""File summaries that fit a token budget, computed without a model.

``outline(path, text, max_tokens=…)`` gives a model a map of a file it has not read:

* **Python** (``.py``, ``.pyi``), through ``ast``: the module docstring's first line,
  module-level constants, classes with their bases, functions and methods with full
  signatures (annotations and defaults), each definition's first docstring line and
  its line number (``L12``). A file that does not parse falls back to head/tail.
* **Markdown** (``.md``, ``.markdown``): the headings with their levels and line
  numbers (ATX ``#`` and setext underlines; headings inside code fences are ignored),
  each with the first lines of its section as far as the budget allows.
* **Anything else**: the first and last lines with a note of what lies between, e.g.
  ``… 340 lines omitted (lines 41-380); read them with read_lines …``.

When the full outline is over budget, detail is dropped step by step (docstrings,
private members, signatures, methods, constants, deep headings, then entries from the
end) and the outline says what was dropped. The result always fits: ``count_tokens``
of the returned string is at most ``max_tokens``.

Summaries are pluggable: anything matching the ``Summarizer`` protocol (for example a
model-backed summarizer) can replace ``OutlineSummarizer``.

Example:
    >>> src = 'def add(a: int, b: int = 1) -> int:\\n    \"\"\"Add two numbers.\"\"\"\\n'
    >>> print(outline("calc.py", src, max_tokens=200))
    calc.py: Python, 2 lines
    L1 def add(a: int, b: int=1) -> int
         Add two numbers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

__all__ = [
    "OutlineSummarizer",
    "Summarizer",
    "default_count_tokens",
    "fit_tokens",
    "outline",
]

TokenCounter = Callable[[str], int]

_MAX_LINE_CHARS = 160
_MAX_SIGNATURE_CHARS = 200


def default_count_tokens(text: str) -> int:
    """Estimate tokens as one per four characters, rounded up.

    Example:
        >>> default_count_tokens("abcdefgh"), default_count_tokens("abcdefghi")
        (2, 3)
    """
    return (len(text) + 3) // 4


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns a file into a summary of at most ``max_tokens`` tokens."""

    def __call__(self, path: str, text: str, max_tokens: int) -> str:
        """Summarize ``text`` (the content of ``path``) within ``max_tokens``."""
        ...


class OutlineSummarizer:
    """The default ``Summarizer``: a structural outline, no model involved.

    Args:
        count_tokens: the token counter the budget is measured with (default: one
            token per four characters).

    Example:
        >>> summarize = OutlineSummarizer()
        >>> print(summarize("notes.md", "# Title\\n\\n## Part\\n", 100))
        notes.md: Markdown, 3 lines
        L1 # Title
        L3   ## Part
    """

    def __init__(self, *, count_tokens: TokenCounter | None = None) -> None:
        self.count_tokens = count_tokens or default_count_tokens

    def __call__(self, path: str, text: str, max_tokens: int) -> str:
        return outline(path, text, max_tokens=max_tokens, count_tokens=self.count_tokens)

    def __repr__(self) -> str:
        return f"OutlineSummarizer(count_tokens={getattr(self.count_tokens, '__name__', '?')})"


def outline(
    path: str,
    text: str,
    *,
    max_tokens: int,
    count_tokens: TokenCounter | None = None,
) -> str:
    """Outline a file within a token budget.

    Args:
        path: the file's path; its suffix picks the outline kind.
        text: the file's content.
        max_tokens: the budget; the result never exceeds it.
        count_tokens: the token counter (default ``default_count_tokens``).

    Returns:
        The outline: a header line (path, kind, line count), the entries, and a final
        note when detail had to be dropped.

    Raises:
        ValueError: ``max_tokens`` is negative.

    Example:
        >>> text = "".join(f"row {i}\\n" for i in range(1, 101))
        >>> print(outline("data.txt", text, max_tokens=40))
        data.txt: text, 100 lines
        row 1
        row 2
        row 3
        row 4
        row 5
        row 6
        row 7
        … 89 lines omitted (lines 8-96); read them with read_lines
        row 97
        row 98
        row 99
        row 100
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    count = count_tokens or default_count_tokens
    lines = text.splitlines()
    lower = path.lower()
    candidates: Iterator[str]
    if lower.endswith((".py", ".pyi")):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            lineno = getattr(exc, "lineno", None)
            where = f" at line {lineno}" if lineno else ""
            note = f"not parsed as Python ({type(exc).__name__}{where}); showing head and tail"
            candidates = _head_tail_candidates(path, "Python", lines, note)
        else:
            candidates = _python_candidates(path, tree, lines)
    elif lower.endswith((".md", ".markdown")):
        candidates = _markdown_candidates(path, lines)
    else:
        candidates = _head_tail_candidates(path, "text", lines, None)
    last = ""
    for candidate in candidates:
        last = candidate
        if count(candidate) <= max_tokens:
            return candidate
    return fit_tokens(last, max_tokens, count)


def fit_tokens(text: str, max_tokens: int, count: TokenCounter) -> str:
    """The longest prefix of ``text`` (with ``…`` when cut) within ``max_tokens``.

    The last resort of :func:`outline`, and the guard after any summarizer.

    Example:
        >>> fit_tokens("one two three four", 2, lambda t: len(t.split()))
        'one two…'
    """
    if count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix that fits; counters are monotonic in practice
        mid = (lo + hi + 1) // 2
        if count(text[:mid].rstrip() + "…") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return ""
    return text[:lo].rstrip() + "…"


def _clip(line: str, limit: int = _MAX_LINE_CHARS) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _header(path: str, kind: str, n_lines: int) -> str:
    return f"{path}: {kind}, {n_lines} line{'s' if n_lines != 1 else ''}"


# --------------------------------------------------------------------------- head/tail


def _head_tail_candidates(
    path: str, kind: str, lines: list[str], note: str | None
) -> Iterator[str]:
    header = _header(path, kind, len(lines))
    if note:
        header += f" ({note})"
    n = len(lines)
    if n == 0:
        yield header
        return
    # Whole file first, then ever smaller head/tail windows (two thirds head).
    sizes = [n]
    size = min(n - 1, 60)
    while size > 0:
        sizes.append(size)
        size = size * 2 // 3 if size > 3 else size - 1
    for total in sizes:
        if total >= n:
            yield "\n".join([header, *(_clip(line) for line in lines)])
            continue
        head = (total + 1) // 2 if total < 6 else total * 2 // 3
        tail = total - head
        omitted_from, omitted_to = head + 1, n - tail
        out = [header, *(_clip(line) for line in lines[:head])]
        out.append(
            f"… {omitted_to - omitted_from + 1} lines omitted (lines {omitted_from}-"
            f"{omitted_to}); read them with read_lines"
        )
        out.extend(_clip(line) for line in lines[n - tail :])
        yield "\n".join(out)
    yield "\n".join([header, f"… all {n} lines omitted; read them with read_lines"])
    yield header


# --------------------------------------------------------------------------- Python


@dataclass(frozen=True)
class _Entry:
    kind: str  # "class" | "def" | "const"
    depth: int
    lineno: int
    signature: str  # full form, e.g. "def f(a: int=1) -> str"
    short: str  # name-only form, e.g. "def f(…)"
    doc: str | None
    private: bool
    is_method: bool


@dataclass(frozen=True)
class _PyDetail:
    docstrings: bool = True
    private: bool = True
    signatures: bool = True
    methods: bool = True
    constants: bool = True


def _first_doc_line(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    doc = ast.get_docstring(node, clean=True)
    if not doc:
        return None
    first = doc.strip().splitlines()[0].strip()
    return _clip(first, 120) if first else None


def _function_signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    sig = f"{prefix} {node.name}({ast.unparse(node.args)})"
    if node.returns is not None:
        sig += f" -> {ast.unparse(node.returns)}"
    return _clip(sig, _MAX_SIGNATURE_CHARS)


def _class_signature(node: ast.ClassDef) -> str:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    return _clip(f"class {node.name}" + (f"({', '.join(bases)})" if bases else ""))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _walk_definitions(body: list[ast.stmt], depth: int, in_class: bool) -> Iterator[_Entry]:
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield _Entry(
                "class",
                depth,
                node.lineno,
                _class_signature(node),
                f"class {node.name}",
                _first_doc_line(node),
                _is_private(node.name),
                in_class,
            )
            yield from _walk_definitions(node.body, depth + 1, True)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            yield _Entry(
                "def",
                depth,
                node.lineno,
                _function_signature(node),
                f"{prefix} {node.name}(…)",
                _first_doc_line(node),
                _is_private(node.name),
                in_class,
            )
        elif depth == 0 and isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and (target.id.isupper() or target.id == "__all__"):
                    yield _Entry(
                        "const",
                        depth,
                        node.lineno,
                        target.id,
                        target.id,
                        None,
                        _is_private(target.id),
                        False,
                    )


def _python_candidates(path: str, tree: ast.Module, lines: list[str]) -> Iterator[str]:
    header = _header(path, "Python", len(lines))
    module_doc = _first_doc_line(tree)
    entries = list(_walk_definitions(tree.body, 0, False))

    # Each step drops one more kind of detail, cheapest loss first.
    steps: list[tuple[_PyDetail, str]] = [(_PyDetail(), "")]
    detail = _PyDetail()
    for field_name, _label in _PY_LABELS:
        detail = replace(detail, **{field_name: False})
        dropped = ", ".join(label for f, label in _PY_LABELS if not getattr(detail, f))
        steps.append((detail, dropped))

    for detail, dropped in steps:
        body = _render_python(entries, detail)
        yield _assemble(header, module_doc, body, dropped, [])
    # Still too long: drop the module docstring, then cut entries from the end.
    body = _render_python(entries, steps[-1][0])
    dropped = steps[-1][1] + (", module docstring" if module_doc else "")
    yield _assemble(header, None, body, dropped, [])
    for keep in _shrinking(len(body)):
        yield _assemble(header, None, body[:keep], dropped, body[keep:])
    yield header


_PY_LABELS = (
    ("docstrings", "docstrings"),
    ("private", "private"),
    ("signatures", "signatures"),
    ("methods", "methods"),
    ("constants", "constants"),
)


def _render_python(entries: list[_Entry], detail: _PyDetail) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    hidden_depth: int | None = None  # inside a dropped private class
    # Enclosing classes as (depth, index in out or None when not shown).
    classes: list[tuple[int, int | None]] = []
    method_counts: dict[int, int] = {}
    for e in entries:
        while classes and classes[-1][0] >= e.depth:
            classes.pop()
        if hidden_depth is not None:
            if e.depth > hidden_depth:
                continue
            hidden_depth = None
        if e.kind == "const" and not detail.constants:
            continue
        if e.private and not detail.private:
            if e.kind == "class":
                hidden_depth = e.depth
            continue
        if e.is_method and e.kind == "def" and not detail.methods:
            owner = classes[-1][1] if classes else None
            if owner is not None:
                method_counts[owner] = method_counts.get(owner, 0) + 1
            continue
        if e.kind == "class":
            classes.append((e.depth, len(out)))
        indent = "  " * e.depth
        sig = e.signature if detail.signatures else e.short
        out.append((e.lineno, f"L{e.lineno} {indent}{sig}"))
        if detail.docstrings and e.doc:
            pad = " " * (len(f"L{e.lineno} ") + len(indent) + 2)
            out.append((e.lineno, f"{pad}{e.doc}"))
    for index, n in method_counts.items():
        lineno, text = out[index]
        out[index] = (lineno, f"{text}  ({n} method{'s' if n != 1 else ''})")
    return out


def _shrinking(n: int) -> Iterator[int]:
    keep = n - 1
    while keep > 0:
        yield keep
        keep = keep * 3 // 4 if keep > 4 else keep - 1
    yield 0


def _assemble(
    header: str,
    module_doc: str | None,
    body: list[tuple[int, str]],
    dropped: str,
    omitted: list[tuple[int, str]],
) -> str:
    out = [header]
    if module_doc:
        out.append(module_doc)
    out.extend(text for _, text in body)
    notes = [dropped] if dropped else []
    if omitted:
        first, last = omitted[0][0], omitted[-1][0]
        span = f"L{first}" if first == last else f"L{first}-L{last}"
        notes.append(f"{len(omitted)} more outline lines ({span})")
    if notes:
        # One terse line: in a tight budget the note competes with the outline itself.
        out.append(f"[omitted to fit: {'; '.join(notes)}]")
    return "\n".join(out)


# --------------------------------------------------------------------------- Markdown


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _markdown_headings(lines: list[str]) -> list[tuple[int, int, str]]:
    headings: list[tuple[int, int, str]] = []
    fence: str | None = None
    start = 0
    if lines and lines[0].strip() == "---":
        # YAML front matter: its closing "---" is not a setext underline.
        end = next((k for k in range(1, len(lines)) if lines[k].strip() in ("---", "...")), None)
        start = end + 1 if end is not None else 0
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append((i + 1, len(atx.group(1)), (atx.group(2) or "").strip()))
            continue
        setext = _SETEXT.match(line)
        if setext and i > start and lines[i - 1].strip() and not _ATX.match(lines[i - 1]):
            # "---" under a paragraph line is a level-2 heading; a lone "---" is a rule.
            level = 1 if setext.group(1)[0] == "=" else 2
            headings.append((i, level, lines[i - 1].strip()))
    return headings


_SECTION_LINES = (24, 12, 6, 3, 1)
"""Lines of text kept under each heading, tried from most to fewest."""


def _with_section_lines(
    rendered: list[tuple[int, int, str]], lines: list[str], keep: int
) -> list[tuple[int, str]]:
    """The headings, each followed by up to ``keep`` non-blank lines of its section."""
    out: list[tuple[int, str]] = []
    starts = [lineno for lineno, _, _ in rendered] + [len(lines) + 1]
    for (lineno, level, text), nxt in zip(rendered, starts[1:], strict=True):
        out.append((lineno, text))
        indent = "  " * level
        body = [
            (i + 1, f"{indent}{_clip(lines[i].strip(), 160)}")
            for i in range(lineno, nxt - 1)
            if lines[i].strip() and not _SETEXT.match(lines[i])
        ]
        # A marker costs about what two lines do: it stands only for more than two.
        shown = body if len(body) <= keep + 2 else body[:keep]
        out.extend(shown)
        if len(shown) < len(body):
            rest = body[keep:]
            out.append(
                (rest[0][0], f"{indent}… {len(rest)} more lines (L{rest[0][0]}-L{rest[-1][0]})")
            )
    return out


def _markdown_candidates(path: str, lines: list[str]) -> Iterator[str]:
    header = _header(path, "Markdown", len(lines))
    headings = _markdown_headings(lines)
    if not headings:
        yield from _head_tail_candidates(path, "Markdown", lines, "no headings")
        return
    levels = sorted({level for _, level, _ in headings}, reverse=True)
    max_level = levels[0]
    rendered = [
        (lineno, level, f"L{lineno} {'  ' * (level - 1)}{'#' * level} {_clip(title, 120)}")
        for lineno, level, title in headings
    ]
    # A budget the headings leave unused goes to each section's first lines (a file of
    # one heading and its text is not summarised to the heading alone): most lines
    # under every heading first, then fewer, then the headings alone.
    for per_section in _SECTION_LINES:
        yield _assemble(header, None, _with_section_lines(rendered, lines, per_section), "", [])
    while True:
        body = [(lineno, text) for lineno, level, text in rendered if level <= max_level]
        dropped = "" if max_level == levels[0] else f"headings deeper than level {max_level}"
        yield _assemble(header, None, body, dropped, [])
        smaller = [lv for lv in levels if lv < max_level]
        if not smaller:
            break
        max_level = smaller[0]
    for keep in _shrinking(len(body)):
        yield _assemble(header, None, body[:keep], dropped, body[keep:])
    yield header
