"""Reading unified diffs: ``diff -u`` and ``git diff`` output, with git's extended headers.

:func:`parse_patch` gives one :class:`FilePatch` per file (created, deleted, renamed or
modified, with its hunks); :func:`parse_unified_diff` the hunks of a one-file diff. A
diff line ends at ``\\n`` and a ``\\r`` before it belongs to the line, as in git.
Applying them is :mod:`ctxnb.tools.patching`'s job.

Example:
    >>> diff = "--- /dev/null\\n+++ b/new.txt\\n@@ -0,0 +1 @@\\n+hi\\n"
    >>> [(f.kind, f.path) for f in parse_patch(diff)]
    [('create', 'new.txt')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxnb.errors import PatchError

from ._textlines import show as _show

__all__ = [
    "DEV_NULL",
    "NO_NEWLINE_MARKER",
    "FilePatch",
    "Hunk",
    "parse_patch",
    "parse_unified_diff",
]

NO_NEWLINE_MARKER = "\\ No newline at end of file"
DEV_NULL = "/dev/null"

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_GIT_HEADER = re.compile(r'^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$')

# Lines git writes between "diff --git" and the "---" header (see git-diff(1),
# "extended header lines").
_GIT_EXTENDED_HEADERS = (
    "index ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Binary files ",
    "GIT binary patch",
)

HunkTag = Literal[" ", "-", "+"]


@dataclass(frozen=True)
class Hunk:
    """One ``@@ -a,b +c,d @@`` hunk of a unified diff.

    Attributes:
        old_start: first line of the hunk in the old text (1-based; 0 for an
            insertion at the top of an empty file).
        old_count: number of old lines the hunk covers (context + removed).
        new_start: first line in the new text.
        new_count: number of new lines (context + added).
        lines: the body as ``(tag, text)`` pairs, tag one of ``" "``, ``"-"``, ``"+"``;
            the text has no ``\\n`` but keeps a ``\\r`` that ends it (a CRLF line).
        header: the ``@@ … @@`` line as written.
        old_missing_newline: the old text's last line (in this hunk) had no newline.
        new_missing_newline: the new text's last line (in this hunk) has no newline.
        line_number: where the header is in the diff text (1-based).
    """

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[tuple[HunkTag, str], ...] = field(default_factory=tuple)
    header: str = ""
    old_missing_newline: bool = False
    new_missing_newline: bool = False
    line_number: int = 0

    @property
    def old_lines(self) -> list[str]:
        """Context and removed lines: what the hunk expects to find."""
        return [text for tag, text in self.lines if tag != "+"]

    @property
    def new_lines(self) -> list[str]:
        """Context and added lines: what the hunk leaves behind."""
        return [text for tag, text in self.lines if tag != "-"]

    @property
    def added(self) -> int:
        return sum(1 for tag, _ in self.lines if tag == "+")

    @property
    def removed(self) -> int:
        return sum(1 for tag, _ in self.lines if tag == "-")

    def raw_lines(self) -> list[tuple[HunkTag, str]]:
        """The body with each line's exact terminator: ``\\n``, or none before a marker."""
        last_old = max((k for k, (t, _) in enumerate(self.lines) if t != "+"), default=-1)
        last_new = max((k for k, (t, _) in enumerate(self.lines) if t != "-"), default=-1)
        out: list[tuple[HunkTag, str]] = []
        for k, (tag, text) in enumerate(self.lines):
            cut = (k == last_old and self.old_missing_newline and tag != "+") or (
                k == last_new and self.new_missing_newline and tag != "-"
            )
            out.append((tag, text if cut else text + "\n"))
        return out


@dataclass(frozen=True)
class FilePatch:
    """One file's part of a unified diff, with what git's headers say about the file.

    Attributes:
        old_path: the path before (``a/`` prefix removed), ``None`` when the diff
            creates the file or names no file.
        new_path: the path after (``b/`` prefix removed), ``None`` when the diff
            deletes the file or names no file.
        hunks: the hunks, in order (none for a pure rename or an empty file).
        created: the file does not exist before (``--- /dev/null``, ``new file mode``).
        deleted: the file does not exist after (``+++ /dev/null``, ``deleted file mode``).

    Example:
        >>> (fp,) = parse_patch("--- a/x.py\\n+++ /dev/null\\n@@ -1 +0,0 @@\\n-x = 1\\n")
        >>> fp.kind, fp.old_path, fp.new_path
        ('delete', 'x.py', None)
    """

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]
    created: bool = False
    deleted: bool = False

    @property
    def kind(self) -> Literal["modify", "create", "delete", "rename"]:
        """What applying the patch does to the file."""
        if self.created:
            return "create"
        if self.deleted:
            return "delete"
        if self.old_path and self.new_path and self.old_path != self.new_path:
            return "rename"
        return "modify"

    @property
    def path(self) -> str | None:
        """The path the patch applies to: the new path, else the old one."""
        return self.new_path or self.old_path


@dataclass
class _FileDiff:
    old_name: str | None = None
    new_name: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    git: bool = False
    has_names: bool = False
    created: bool = False
    deleted: bool = False
    renamed: bool = False
    line_number: int = 0

    def finish(self) -> FilePatch:
        return FilePatch(
            old_path=None if self.created else self.old_name,
            new_path=None if self.deleted else self.new_name,
            hunks=tuple(self.hunks),
            created=self.created,
            deleted=self.deleted,
        )


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f"}
_ESCAPES |= {"r": "\r", "v": "\v"}


def _unquote(name: str) -> str:
    """A path as git writes it: C-quoted (with octal UTF-8 bytes) when unusual."""
    if not (len(name) >= 2 and name[0] == '"' and name[-1] == '"'):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567":
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out += _ESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _path_name(raw: str, prefix: str, strip: bool) -> str | None:
    name = _unquote(raw)
    if name == DEV_NULL:
        return None
    if strip and name.startswith(prefix):
        return name[len(prefix) :]
    return name


def _parse(text: str) -> list[FilePatch]:
    """Parse a unified diff that may cover several files."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()  # the final newline of the diff does not open an empty line
    if raw and all(line.endswith("\r") for line in raw):
        # Every line, headers included, ends in CRLF: the diff crossed a channel that
        # converts line endings (git never writes a CR on its own header lines).
        raw = [line[:-1] for line in raw]
    files: list[_FileDiff] = []
    current: _FileDiff | None = None
    i = 0
    n = len(raw)

    def line_at(k: int) -> str:
        s = raw[k]
        return s[:-1] if s.endswith("\r") else s

    while i < n:
        line = line_at(i)
        lineno = i + 1
        if line.startswith("diff --git "):
            m = _GIT_HEADER.match(line)
            current = _FileDiff(git=True, line_number=lineno)
            if m is not None:
                current.old_name = _path_name(m.group(1), "a/", True)
                current.new_name = _path_name(m.group(2), "b/", True)
            files.append(current)
            i += 1
            continue
        if line.startswith("--- "):
            if i + 1 >= n or not line_at(i + 1).startswith("+++ "):
                raise PatchError(
                    f"line {lineno}: a '---' file header must be followed by a '+++' header; "
                    f"found {_show(line_at(i + 1)) if i + 1 < n else 'end of diff'}"
                )
            if current is None or current.hunks or current.has_names:
                current = _FileDiff(line_number=lineno)
                files.append(current)
            old_raw, new_raw = _header_name(line[4:]), _header_name(line_at(i + 1)[4:])
            # git writes a/ and b/ prefixes; so do most tools that name both sides so.
            strip = current.git or all(
                name == DEV_NULL or name.startswith(prefix)
                for name, prefix in ((_unquote(old_raw), "a/"), (_unquote(new_raw), "b/"))
            )
            current.old_name = _path_name(old_raw, "a/", strip)
            current.new_name = _path_name(new_raw, "b/", strip)
            current.has_names = True
            current.created = current.created or current.old_name is None
            current.deleted = current.deleted or current.new_name is None
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                current = _FileDiff(line_number=lineno)
                files.append(current)
            hunk, i = _parse_hunk(raw, i, line_at)
            if current.hunks:
                prev = current.hunks[-1]
                prev_end = prev.old_start + prev.old_count - (1 if prev.old_count else 0)
                if hunk.old_start <= prev_end:
                    raise PatchError(
                        f"line {lineno}: hunk {hunk.header!r} starts at old line "
                        f"{hunk.old_start}, inside or before the previous hunk (which ends at "
                        f"line {prev_end}); hunks must be in order and must not overlap"
                    )
            current.hunks.append(hunk)
            continue
        if line.strip() == "":
            i += 1
            continue
        if (current is None or not current.hunks) and line.startswith(_GIT_EXTENDED_HEADERS):
            if current is None:
                current = _FileDiff(line_number=lineno)
                files.append(current)
            _extended_header(current, line, lineno)
            i += 1
            continue
        if line.startswith(("+++ ", "-", "+", " ")) and current is not None and current.hunks:
            last = current.hunks[-1]
            raise PatchError(
                f"line {lineno}: {_show(line)} follows the hunk {last.header!r} (line "
                f"{last.line_number}), which already has the {last.old_count} old and "
                f"{last.new_count} new lines its header announces; expected a new '@@' "
                "hunk header; fix the counts in the header"
            )
        raise PatchError(
            f"line {lineno}: unexpected {_show(line)}; expected a '---'/'+++' file header "
            "or an '@@ -start,count +start,count @@' hunk header"
        )
    if not files or not any(f.hunks or f.git for f in files):
        raise PatchError(
            "the diff contains no hunks; expected at least one "
            "'@@ -start,count +start,count @@' hunk"
        )
    for f in files:
        # git writes no hunk for a pure rename, a mode change or an empty file.
        if not f.hunks and not f.git:
            raise PatchError(
                f"file header '--- {f.old_name}' has no hunks; expected an '@@' hunk header"
            )
        if f.created and f.deleted:
            raise PatchError(
                f"line {f.line_number}: both file headers are {DEV_NULL}; name the file on "
                "at least one side"
            )
    return [f.finish() for f in files]


def _extended_header(current: _FileDiff, line: str, lineno: int) -> None:
    if line.startswith(("Binary files ", "GIT binary patch")):
        raise PatchError(
            f"line {lineno}: {_show(line)}: binary patches are not supported; diff text files only"
        )
    if line.startswith(("copy from ", "copy to ")):
        raise PatchError(
            f"line {lineno}: copy diffs are not supported; give the new file as a diff "
            f"from {DEV_NULL}"
        )
    if line.startswith("new file mode "):
        current.created = True
    elif line.startswith("deleted file mode "):
        current.deleted = True
    elif line.startswith("rename from "):
        current.old_name = _unquote(line[len("rename from ") :])
        current.renamed = True
    elif line.startswith("rename to "):
        current.new_name = _unquote(line[len("rename to ") :])
        current.renamed = True


def _parse_hunk(raw: list[str], i: int, line_at: Any) -> tuple[Hunk, int]:
    header = line_at(i)
    m = _HUNK_HEADER.match(header)
    if m is None:
        raise PatchError(
            f"line {i + 1}: malformed hunk header {_show(header)}; expected "
            "'@@ -start,count +start,count @@' (counts may be omitted when 1)"
        )
    old_start, new_start = int(m.group(1)), int(m.group(3))
    old_count = int(m.group(2)) if m.group(2) is not None else 1
    new_count = int(m.group(4)) if m.group(4) is not None else 1
    if (old_start == 0 and old_count) or (new_start == 0 and new_count):
        raise PatchError(
            f"line {i + 1}: hunk header {header!r} starts at line 0 with a non-zero count; "
            "line numbers are 1-based (0 only with a count of 0)"
        )
    body: list[tuple[HunkTag, str]] = []
    old_seen = new_seen = 0
    old_nl = new_nl = False
    header_line = i + 1
    i += 1
    n = len(raw)
    while i < n and (old_seen < old_count or new_seen < new_count):
        line = raw[i]  # the CR before the newline is part of the line
        tag = line[:1]
        if tag in (" ", "-", "+") or line in ("", "\r"):
            # An empty line stands for an empty context line: some tools strip the
            # trailing space of context lines.
            t: HunkTag = " " if line in ("", "\r") else tag  # type: ignore[assignment]
            text = line if line == "\r" else line[1:]
            if t in (" ", "-"):
                old_seen += 1
            if t in (" ", "+"):
                new_seen += 1
            if old_seen > old_count or new_seen > new_count:
                raise PatchError(
                    f"line {i + 1}: hunk {header!r} (line {header_line}) has more "
                    f"{'old' if old_seen > old_count else 'new'} lines than its header "
                    f"announces ({old_count} old, {new_count} new); fix the counts in the header"
                )
            body.append((t, text))
            i += 1
        elif line.startswith("\\"):
            if not body:
                raise PatchError(f"line {i + 1}: {NO_NEWLINE_MARKER!r} must follow a hunk line")
            i += 1
        else:
            raise PatchError(
                f"line {i + 1}: hunk {header!r} (line {header_line}) ends early: expected "
                f"{old_count - old_seen} more old and {new_count - new_seen} more new lines "
                f"(lines starting with ' ', '-' or '+'), found {_show(line_at(i))}"
            )
        # A marker applies to the line just before it.
        if i < n and line_at(i).startswith("\\"):
            last_tag = body[-1][0]
            if last_tag in (" ", "-"):
                old_nl = True
            if last_tag in (" ", "+"):
                new_nl = True
            i += 1
    if old_seen < old_count or new_seen < new_count:
        raise PatchError(
            f"line {i + 1 if i < n else n}: hunk {header!r} (line {header_line}) ends early "
            f"at the end of the diff: expected {old_count - old_seen} more old and "
            f"{new_count - new_seen} more new lines"
        )
    hunk = Hunk(
        old_start=old_start,
        old_count=old_count,
        new_start=new_start,
        new_count=new_count,
        lines=tuple(body),
        header=header,
        old_missing_newline=old_nl,
        new_missing_newline=new_nl,
        line_number=header_line,
    )
    return hunk, i


def _header_name(rest: str) -> str:
    # "--- a/file\t2024-01-01 ..." carries a timestamp after a tab.
    return rest.split("\t", 1)[0].strip()


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a unified diff (one file or several) into one :class:`FilePatch` per file.

    Reads ``diff -u`` output and ``git diff`` output with its extended headers: new and
    deleted files (``/dev/null``, ``new file mode``, ``deleted file mode``), renames
    (``rename from``/``rename to``, with or without hunks), C-quoted paths, and
    ``\\ No newline at end of file`` markers.

    Args:
        text: the diff.

    Returns:
        The files, in the order the diff gives them.

    Raises:
        PatchError: the diff is malformed, binary, or a copy; the message names the
            line number and what was expected there.

    Example:
        >>> patch = "diff --git a/x b/y\\nsimilarity index 100%\\nrename from x\\nrename to y\\n"
        >>> [(f.kind, f.old_path, f.new_path) for f in parse_patch(patch)]
        [('rename', 'x', 'y')]
    """
    return _parse(text)


def parse_unified_diff(text: str) -> list[Hunk]:
    """Parse a single-file unified diff into hunks.

    Accepts optional ``---``/``+++`` headers (and git's ``diff --git``/``index`` lines
    before them), ``@@ -a,b +c,d @@`` hunks whose counts may be omitted when 1, and
    ``\\ No newline at end of file`` markers.

    Args:
        text: the diff.

    Returns:
        The hunks, in order.

    Raises:
        PatchError: the diff is malformed (bad header, counts that do not match the
            body, stray lines, several files); the message names the line number and
            what was expected there.

    Example:
        >>> hunks = parse_unified_diff("@@ -1,2 +1,2 @@\\n a\\n-b\\n+B\\n")
        >>> hunks[0].old_lines, hunks[0].new_lines
        (['a', 'b'], ['a', 'B'])
    """
    return list(_single(_parse(text)).hunks)


def _single(files: list[FilePatch]) -> FilePatch:
    if len(files) > 1:
        names = ", ".join(repr(f.path) for f in files)
        raise PatchError(
            f"the diff covers {len(files)} files ({names}); apply one file's diff at a time"
        )
    return files[0]
