"""Find the files a markdown document links to.

Rules files (``AGENTS.md``, ``CLAUDE.md``) and skills point at further reading with
markdown links; ctxnb indexes those links by their text and loads the target when a
task needs it. :func:`extract_markdown_links` returns every such link with the line
it starts on.

What counts, following CommonMark where it matters for finding files:

* inline links ``[text](path "title")``, with nested brackets in the text, angle
  destinations ``[t](<a b.md>)``, balanced parentheses in a destination and titles in
  ``"…"``, ``'…'`` or ``(…)``;
* reference links ``[text][ref]``, ``[ref][]`` and ``[ref]`` with a ``[ref]: path``
  definition anywhere in the document (the definition line itself is not a link);
* images ``![alt](img.png)`` (kind ``"image"``, off by default);
* external targets — a scheme (``https://``, ``mailto:``) or ``//host`` — and the
  autolinks ``<https://…>`` and ``<me@example.com>`` (kind ``"external"``, off by
  default; an external image needs both ``include_images`` and ``include_external``);
* ``@path`` imports as Claude Code reads them from ``CLAUDE.md`` (kind ``"import"``):
  ``@`` at the start of a line or after whitespace, followed by a path that contains a
  ``/`` or a ``.`` or starts with ``~``. ``a@b.com`` and ``@alice`` are not imports.

What is skipped: code spans of any backtick count, fenced code blocks (backticks or
tildes, with info strings, indented up to three spaces, or more inside a list),
indented code blocks, HTML comments, backslash-escaped brackets, pure ``#anchor``
links and empty destinations. Raw HTML (``<a href>``) is not read.

Targets: the fragment goes to ``anchor`` and a ``?query`` is dropped. Because a
CommonMark destination is a URL, percent-escapes in a relative path are decoded
(``my%20notes.md`` → ``my notes.md``) and backslash escapes are removed; entity
references (``&amp;``) are left as written. External targets are kept verbatim,
fragment included. Import paths are file paths, not URLs: only ``\\ `` (an escaped
space) is unescaped. Paths are returned as written (``./a.md`` stays ``./a.md``);
resolving them against the linking file is the caller's job.

Example:
    >>> text = "See [the rules](docs/rules.md#style) and @notes/todo.md.\\n"
    >>> for link in extract_markdown_links(text):
    ...     print(link.kind, link.relative_path, link.anchor, link.line_number)
    link docs/rules.md style 1
    import notes/todo.md None 1
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

__all__ = ["LinkKind", "MarkdownLink", "extract_markdown_links"]

LinkKind = Literal["link", "image", "import", "external"]
_Mode = Literal["full", "text", "detect"]


@dataclass(frozen=True, slots=True)
class MarkdownLink:
    """One link found in a markdown document.

    Attributes:
        display_text: the link text (alt text for images, ``@path`` for imports, the
            address for autolinks), whitespace collapsed and escapes removed.
        relative_path: the target without fragment or query, percent-decoded for
            relative targets; the whole address for external targets.
        line_number: 1-based line on which the link starts.
        kind: ``"link"``, ``"image"``, ``"import"`` or ``"external"``.
        title: the link title, if one was given.
        anchor: the fragment after ``#`` (without the ``#``), if any.
    """

    display_text: str
    relative_path: str
    line_number: int
    kind: LinkKind
    title: str | None = None
    anchor: str | None = None


def extract_markdown_links(
    text: str,
    *,
    include_images: bool = False,
    include_external: bool = False,
    include_imports: bool = True,
) -> list[MarkdownLink]:
    """Every link to a file in ``text``, in document order.

    Args:
        text: markdown source.
        include_images: also return images (kind ``"image"``).
        include_external: also return links to other hosts and schemes (kind
            ``"external"``).
        include_imports: return ``@path`` imports (kind ``"import"``).

    Returns:
        The links in the order they start in the text.

    Example:
        >>> md = '''# Rules
        ... Read [the style guide][style] first.
        ...
        ... ```sh
        ... cat [not](a-link.md)
        ... ```
        ... ![diagram](arch.png) and [home](https://example.com)
        ...
        ... [style]: docs/style%20guide.md "Style"
        ... '''
        >>> [(x.display_text, x.relative_path, x.title) for x in extract_markdown_links(md)]
        [('the style guide', 'docs/style guide.md', 'Style')]
        >>> [x.kind for x in extract_markdown_links(md, include_images=True,
        ...                                          include_external=True)]
        ['link', 'image', 'external']
    """
    scanner = _Scanner(text)
    found = scanner.run()
    out: list[MarkdownLink] = []
    for _pos, link, is_image in found:
        if link.kind == "import" and not include_imports:
            continue
        if is_image and not include_images:
            continue
        if link.kind == "external" and not include_external:
            continue
        out.append(link)
    return out


# --- block structure -------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_LIST_ITEM = re.compile(r"(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_THEMATIC_BREAK = re.compile(r"([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_ATX_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
_BLOCKQUOTE = re.compile(r"[ ]{0,3}>[ ]?")
# A reference definition on one line: label, destination, optional title.
_REF_DEF = re.compile(
    r"""[ ]{0,3}\[(?P<label>(?:[^\[\]\\]|\\.){1,999})\]:[ \t]*
        (?:<(?P<angle>[^<>\n]*)>|(?P<raw>\S+))
        (?:[ \t]+(?P<title>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\)))?
        [ \t]*$""",
    re.VERBOSE,
)


def _indent_width(line: str) -> tuple[int, int]:
    """Columns of leading whitespace (tabs to multiples of 4) and its length in chars."""
    col = 0
    n = 0
    for ch in line:
        if ch == " ":
            col += 1
        elif ch == "\t":
            col += 4 - col % 4
        else:
            break
        n += 1
    return col, n


def _strip_blockquotes(line: str) -> str:
    while True:
        m = _BLOCKQUOTE.match(line)
        if not m:
            return line
        line = line[m.end() :]


@dataclass
class _Blocks:
    masked: str  # the text with code-block lines blanked (same offsets)
    definitions: dict[str, tuple[str, str | None]]


def _normalize_label(label: str) -> str:
    return " ".join(label.split()).casefold()


def _analyse_blocks(text: str) -> _Blocks:
    """Blank out code blocks and reference definitions, keeping every offset.

    Blanked characters become spaces so that positions (and so line numbers) in the
    masked text equal those in the original.
    """
    # Split on "\n" only: str.splitlines also breaks on \f, \x1c, \u2028 and others,
    # which would put line numbers out of step with the scanner's.
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    out: list[str] = []
    definitions: dict[str, tuple[str, str | None]] = {}
    fence: tuple[str, int] | None = None  # (char, length) of the open fence
    in_paragraph = False
    in_list = False
    prev_blank = True

    def blank(line: str) -> str:
        return "".join(ch if ch in "\r\n" else " " for ch in line)

    for raw in lines:
        line = _strip_blockquotes(raw.rstrip("\r\n"))
        if fence is not None:
            out.append(blank(raw))
            stripped = line.strip()
            char, length = fence
            if (
                stripped
                and set(stripped) == {char}
                and len(stripped) >= length
                and (_indent_width(line)[0] <= 3 or in_list)
            ):
                fence = None
            continue
        if not line.strip():
            out.append(raw)
            prev_blank = True
            in_paragraph = False
            continue
        indent, nchars = _indent_width(line)
        content = line[nchars:]
        m = _FENCE_OPEN.match(content)
        if m and (indent <= 3 or in_list):
            info = m.group("info")
            if not (m.group("fence")[0] == "`" and "`" in info):
                fence = (m.group("fence")[0], len(m.group("fence")))
                out.append(blank(raw))
                in_paragraph = False
                prev_blank = False
                continue
        if indent >= 4 and not in_paragraph and not in_list:
            out.append(blank(raw))  # indented code block
            prev_blank = False
            continue
        d = _REF_DEF.match(line) if not in_paragraph else None
        if d:
            label = _normalize_label(d.group("label"))
            if label and label not in definitions:  # the first definition wins
                dest = d.group("angle") if d.group("angle") is not None else d.group("raw")
                title = d.group("title")
                definitions[label] = (dest, _unescape(title[1:-1]) if title else None)
            out.append(blank(raw))
            prev_blank = False
            continue
        if indent <= 3 and _THEMATIC_BREAK.match(content):
            # "* * *" is a rule, not a list item; like a heading it ends a paragraph.
            in_list = in_paragraph = False
            prev_blank = False
            out.append(raw)
            continue
        if (_LIST_ITEM.match(content) and indent <= 3) or (in_list and indent > 0):
            in_list = True
        elif prev_blank and indent == 0:
            in_list = False
        in_paragraph = not _ATX_HEADING.match(content)
        prev_blank = False
        out.append(raw)
    return _Blocks("".join(out), definitions)


# --- inline scanning -------------------------------------------------------------------

_MAX_NESTING = 32
_ESCAPABLE = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_BLANK_LINE = re.compile(r"\n[ \t]*\r?\n")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,31}:")
_AUTOLINK_URI = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>")
_AUTOLINK_EMAIL = re.compile(
    r"<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)>"
)
_IMPORT = re.compile(r"@((?:\\ |[^\s\\]|\\(?! ))+)")
# Sentence punctuation that ends a prose import rather than belonging to the path.
_IMPORT_TRAILING = ".,;:!?)]}'\""


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: m.group(1) if m.group(1) in _ESCAPABLE else m.group(0), s)


def _collapse(s: str) -> str:
    return " ".join(s.split())


def _is_external(dest: str) -> bool:
    return dest.startswith("//") or bool(_SCHEME.match(dest))


class _Scanner:
    def __init__(self, text: str) -> None:
        blocks = _analyse_blocks(text)
        self.s = blocks.masked
        self.defs = blocks.definitions
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", self.s)]
        self.found: list[tuple[int, MarkdownLink, bool]] = []

    def line_of(self, pos: int) -> int:
        return bisect.bisect_right(self.line_starts, pos)

    def run(self) -> list[tuple[int, MarkdownLink, bool]]:
        self.scan(0, len(self.s), "full")
        self.found.sort(key=lambda item: item[0])
        return self.found

    # Code spans: a run of n backticks closes at the next run of exactly n backticks in
    # the same paragraph; an unmatched run is literal text.
    def code_span_end(self, i: int, end: int) -> tuple[int, bool]:
        s = self.s
        j = i
        while j < end and s[j] == "`":
            j += 1
        n = j - i
        # Search only to the end of the paragraph: keeps unmatched runs cheap.
        para = _BLANK_LINE.search(s, j, end)
        limit = para.start() if para else end
        m = re.compile(rf"(?<!`)`{{{n}}}(?!`)").search(s, j, limit)
        if m:
            return m.end(), True
        return j, False

    def scan(self, start: int, end: int, mode: _Mode) -> bool:
        """Scan ``s[start:end]``; return whether a (non-image) link was found.

        ``mode`` is ``"full"`` for body text, ``"text"`` for the text of an accepted
        link (images and imports there are recorded, links cannot occur) and
        ``"detect"`` to learn whether a span holds a link without recording anything:
        a link whose text holds another link is not a link.
        """
        s = self.s
        i = start
        saw_link = False
        while i < end:
            ch = s[i]
            if ch == "\\":
                i += 2
            elif ch == "`":
                i, _ = self.code_span_end(i, end)
            elif ch == "<":
                i = self.angle(i, end, record=mode == "full")
            elif ch == "!" and i + 1 < end and s[i + 1] == "[":
                nxt = self.bracket(i + 1, end, image=True, record=mode != "detect")
                i = nxt if nxt is not None else i + 2
            elif ch == "[":
                nxt = self.bracket(i, end, image=False, record=mode == "full")
                if nxt is None:
                    i += 1
                else:
                    saw_link = True
                    i = nxt
            elif ch == "@" and mode != "detect":
                i = self.import_at(i, end)
            else:
                i += 1
        return saw_link

    def angle(self, i: int, end: int, *, record: bool) -> int:
        s = self.s
        if s.startswith("<!--", i):
            close = s.find("-->", i + 4)
            return len(s) if close == -1 else close + 3
        for pattern, mailto in ((_AUTOLINK_URI, False), (_AUTOLINK_EMAIL, True)):
            m = pattern.match(s, i, end)
            if m:
                if record:
                    addr = m.group(1)
                    target = "mailto:" + addr if mailto else addr
                    link = MarkdownLink(addr, target, self.line_of(i), "external")
                    self.found.append((i, link, False))
                return m.end()
        return i + 1

    def import_at(self, i: int, end: int) -> int:
        s = self.s
        if i > 0 and not s[i - 1].isspace():
            return i + 1
        m = _IMPORT.match(s, i, end)
        if not m:
            return i + 1
        path = m.group(1).rstrip(_IMPORT_TRAILING)
        stop = i + 1 + len(path)
        if not path or not ("/" in path or "." in path or path.startswith("~")):
            return stop
        if _is_external(path) or path.startswith("@"):
            return stop
        path = path.replace("\\ ", " ")
        anchor = None
        if "#" in path:
            path, anchor = path.split("#", 1)
            anchor = anchor or None
        if path:
            link = MarkdownLink(s[i:stop], path, self.line_of(i), "import", None, anchor)
            self.found.append((i, link, False))
        return stop

    def close_bracket(self, i: int, end: int) -> int | None:
        """Index of the ``]`` matching the ``[`` at ``i``, or None."""
        s = self.s
        depth = 0
        j = i
        while j < end:
            ch = s[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "`":
                j, _ = self.code_span_end(j, end)
                continue
            if ch == "\n" and _BLANK_LINE.match(s, j):
                return None  # link text cannot cross a paragraph break
            if ch == "[":
                depth += 1
                if depth > _MAX_NESTING:
                    return None  # bounds the recursion of nested-link checks
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return None

    def bracket(self, i: int, end: int, *, image: bool, record: bool) -> int | None:
        """Parse a link or image whose ``[`` is at ``i``; return the end, or None."""
        s = self.s
        close = self.close_bracket(i, end)
        if close is None:
            return None
        text_start, text_end = i + 1, close
        j = close + 1
        dest_title: tuple[str, str | None] | None = None
        after = None
        if j < end and s[j] == "(":
            parsed = self.inline_destination(j + 1, end)
            if parsed is not None:
                dest_title, after = parsed[:2], parsed[2]
        if dest_title is None:
            label = None
            if j < end and s[j] == "[":
                ref_close = self.close_bracket(j, end)
                if ref_close is not None:
                    inner = s[j + 1 : ref_close]
                    label = inner if inner.strip() else s[text_start:text_end]
                    after = ref_close + 1
            if label is None:  # shortcut reference
                label = s[text_start:text_end]
                after = close + 1
            dest_title = self.defs.get(_normalize_label(label))
            if dest_title is None:
                return None
        assert after is not None
        # Links cannot contain links: if the text holds one, this bracket is plain text
        # and the inner link is the real one. Images and imports inside still count.
        if not image and self.scan(text_start, text_end, "detect"):
            return None
        if record:
            self.scan(text_start, text_end, "text")
        dest, title = dest_title
        if record:
            link = self.make_link(s[text_start:text_end], dest, title, i - image, image)
            if link is not None:
                self.found.append((i - image, link, image))
        return after

    def inline_destination(self, j: int, end: int) -> tuple[str, str | None, int] | None:
        """Parse ``dest "title")`` starting just after ``(``: (dest, title, end)."""
        s = self.s
        j = self.skip_space(j, end)
        dest: str
        if j < end and s[j] == "<":
            k = j + 1
            while k < end and s[k] not in "<>\n":
                k += 2 if s[k] == "\\" else 1
            if k >= end or s[k] != ">":
                return None
            dest = s[j + 1 : k]
            j = k + 1
        else:
            k = j
            depth = 0
            while k < end:
                ch = s[k]
                if ch == "\\" and k + 1 < end and s[k + 1] in _ESCAPABLE:
                    k += 2
                    continue
                if ch.isspace() or ord(ch) < 0x20:
                    break
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    if depth == 0:
                        break
                    depth -= 1
                k += 1
            if depth != 0:
                return None
            dest = s[j:k]
            j = k
        title: str | None = None
        k = self.skip_space(j, end)
        if k > j and k < end and s[k] in "\"'(":
            closer = ")" if s[k] == "(" else s[k]
            m = k + 1
            while m < end and s[m] != closer:
                if s[m] == "\\":
                    m += 1
                elif s[m] == "(" and closer == ")":
                    return None
                elif s[m] == "\n" and _BLANK_LINE.match(s, m):
                    return None
                m += 1
            if m >= end:
                return None
            title = _unescape(s[k + 1 : m])
            k = self.skip_space(m + 1, end)
        if k < end and s[k] == ")":
            return dest, title, k + 1
        return None

    def skip_space(self, j: int, end: int) -> int:
        """Skip spaces and tabs and at most one line ending."""
        s = self.s
        newline = False
        while j < end and s[j] in " \t\r\n":
            if s[j] == "\n":
                if newline:
                    break
                newline = True
            j += 1
        return j

    def make_link(
        self, raw_text: str, dest: str, title: str | None, pos: int, image: bool
    ) -> MarkdownLink | None:
        display = _collapse(_unescape(raw_text))
        line = self.line_of(pos)
        if not dest.strip():
            return None
        if _is_external(dest):
            return MarkdownLink(display, _unescape(dest), line, "external", title, None)
        dest = _unescape(dest)
        if dest.startswith("#"):
            return None  # a jump within the same document, not a file
        anchor: str | None = None
        if "#" in dest:
            dest, frag = dest.split("#", 1)
            anchor = unquote(frag) or None
        dest = dest.split("?", 1)[0]
        if not dest:
            return None
        kind: LinkKind = "image" if image else "link"
        return MarkdownLink(display, unquote(dest), line, kind, title, anchor)
