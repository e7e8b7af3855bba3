"""Text patching: unified diffs and line-level edits, without touching the disk.

Everything here is a pure function from text to text. The file tools read a file,
call these functions and write the result back after checking the base hash; this
module never sees a path.

Two edit forms are supported:

* **Unified diffs** (``parse_patch``, ``apply_file_patch``, ``apply_unified_diff``):
  the format of ``diff -u`` and ``git diff``. Application follows ``git apply``: each
  hunk may be found at a shifted offset (as GNU ``patch`` and git do) but its context
  and removed lines must match exactly, byte for byte, unless ``fuzz`` is raised.
* **Line edits** (``LineEdit``, ``apply_line_edits``): replace lines ``start_line`` to
  ``end_line`` (1-based, inclusive) after checking that they still read
  ``expected_original_lines``. All line numbers in one call refer to the original text.

Line endings in a diff follow git. A diff line ends at ``\\n``; a ``\\r`` before it is
part of the line, so the diff of a CRLF file carries its CRs, and every line the patch
adds keeps exactly the ending the diff gives it (``\\r\\n``, ``\\n``, or none when
``\\ No newline at end of file`` follows). A line-ending conversion is a diff like any
other. Two leniencies, both for diffs that ``git apply`` would refuse, so they never
change a result git produces:

* a diff whose every line ends in ``\\r\\n`` (headers included) went through a CRLF
  channel: one ``\\r`` is taken off each line before it is read;
* when the hunks do not match byte for byte, they are matched once more ignoring line
  terminators (a diff written from a view that hides CRs, or that forgets a final
  newline): then untouched lines keep their endings, added lines take the file's
  dominant one, and a missing final newline is kept unless a marker says otherwise.

Line edits split on ``\\n`` and ``\\r\\n`` only (never on form feeds or Unicode line
separators, which are content); new lines take the file's dominant style.

Example:
    >>> from ctxnb.tools.patching import apply_unified_diff, unified_diff
    >>> old = "a\\r\\nb\\r\\nc\\n"
    >>> new = "a\\r\\nb\\r\\nC\\n"
    >>> apply_unified_diff(old, unified_diff(old, new)) == new
    True
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxnb.errors import PatchConflict, PatchError
from ctxnb.redaction import redact_text

__all__ = [
    "FilePatch",
    "Hunk",
    "LineEdit",
    "apply_file_patch",
    "apply_line_edits",
    "apply_unified_diff",
    "changed_line_ranges",
    "diff_stats",
    "parse_patch",
    "parse_unified_diff",
    "unified_diff",
]

NO_NEWLINE_MARKER = "\\ No newline at end of file"
DEV_NULL = "/dev/null"

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_LINE_SPLIT = re.compile(r"\r\n|\n")
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


# --------------------------------------------------------------------------- lines


@dataclass
class _Text:
    """A text split into line contents and their terminators."""

    lines: list[str]
    terms: list[str]
    newline: str
    ends_with_newline: bool

    @classmethod
    def split(cls, text: str) -> _Text:
        lines: list[str] = []
        terms: list[str] = []
        pos = 0
        crlf = lf = 0
        for m in _LINE_SPLIT.finditer(text):
            lines.append(text[pos : m.start()])
            terms.append(m.group())
            if m.group() == "\r\n":
                crlf += 1
            else:
                lf += 1
            pos = m.end()
        if pos < len(text):
            lines.append(text[pos:])
            terms.append("")
        # An empty file counts as newline-terminated so that text added to it ends
        # with a newline, as editors do.
        ends = text == "" or bool(terms and terms[-1])
        return cls(lines, terms, "\r\n" if crlf > lf else "\n", ends)

    def join(self, lines: Sequence[str], terms: Sequence[str | None], ends: bool) -> str:
        """Join lines; a ``None`` terminator means "new line, use the file's style"."""
        if not lines:
            return ""
        out: list[str] = []
        last = len(lines) - 1
        for i, (line, term) in enumerate(zip(lines, terms, strict=True)):
            t = term or self.newline
            if i == last and not ends:
                t = ""
            out.append(line + t)
        return "".join(out)


def _strip_terminator(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n"):
        return line[:-1]
    return line


# --------------------------------------------------------------------------- hunks


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


def _show(line: str, limit: int = 60) -> str:
    # Redacted whole, then cut: a secret cut in half is no longer recognisable.
    line = redact_text(line)
    return repr(line if len(line) <= limit else line[:limit] + "…")


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


# --------------------------------------------------------------------------- apply


def _find(lines: list[str], expected: list[str], pos: int, lo: int) -> int | None:
    """Nearest position >= lo where ``expected`` matches, searching outwards from pos."""
    hi = len(lines) - len(expected)
    pos = max(lo, min(pos, max(hi, lo)))
    if not expected:
        return pos if lo <= pos <= len(lines) else None
    span = max(pos - lo, hi - pos)
    for d in range(span + 1):
        for p in (pos - d, pos + d) if d else (pos,):
            if lo <= p <= hi and lines[p : p + len(expected)] == expected:
                return p
    return None


# A placement: where the hunk's (fuzz-trimmed) old lines start, how many, and how many
# outer context lines fuzz trimmed at each end.
_Placement = tuple[int, int, int, int]


def _place(
    lines: list[str], hunks: Sequence[Hunk], olds: Sequence[list[str]], fuzz: int
) -> list[_Placement]:
    """Find every hunk in ``lines`` (comparing with ``olds``), all or nothing."""
    placements: list[_Placement] = []
    failures: list[dict[str, Any]] = []
    offset = 0
    lo = 0
    for index, (hunk, old) in enumerate(zip(hunks, olds, strict=True)):
        want = (hunk.old_start if hunk.old_count == 0 else hunk.old_start - 1) + offset
        lead_ctx = _count_leading(hunk.lines)
        trail_ctx = _count_leading(reversed(hunk.lines)) if len(old) > lead_ctx else 0
        found_at: int | None = None
        used = (0, 0)
        for f in range(fuzz + 1):
            cut_lead, cut_trail = min(f, lead_ctx), min(f, trail_ctx)
            if f and (cut_lead, cut_trail) == used:
                continue
            core = old[cut_lead : len(old) - cut_trail]
            p = _find(lines, core, want + cut_lead, lo)
            if p is not None:
                found_at, used = p, (cut_lead, cut_trail)
                break
            used = (cut_lead, cut_trail)
        if found_at is None:
            start = min(max(want, 0), len(lines))
            found = lines[start : start + len(old)]
            failures.append(
                {
                    "hunk": index,
                    "header": hunk.header,
                    "reason": _conflict_reason(old, found, start),
                    "expected": old,
                    "found": found,
                }
            )
            continue
        cut_lead, cut_trail = used
        placements.append((found_at, len(old) - cut_lead - cut_trail, cut_lead, cut_trail))
        offset = found_at - cut_lead - (want - offset)
        lo = found_at + len(old) - cut_lead - cut_trail
    if failures:
        raise PatchConflict(
            f"{len(failures)} of {len(hunks)} hunk(s) do not apply: "
            + "; ".join(f"hunk {f['hunk']} {f['header']!r}: {f['reason']}" for f in failures)
            + ". Read the file again and recompute the diff from its current content.",
            failed_hunks=failures,
        )
    return placements


def _raw_split(text: str) -> list[str]:
    """Lines with their terminators, split at ``\\n`` only (git's notion of a line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _apply_exact(original: str, hunks: Sequence[Hunk], fuzz: int) -> str:
    """git's application: lines compared and written with their exact terminators."""
    lines = _raw_split(original)
    bodies = [h.raw_lines() for h in hunks]
    olds = [[r for tag, r in body if tag != "+"] for body in bodies]
    placements = _place(lines, hunks, olds, fuzz)
    out: list[str] = []
    cursor = 0
    for (pos, length, cut_lead, cut_trail), body in zip(placements, bodies, strict=True):
        out.extend(lines[cursor:pos])
        k = pos
        for tag, r in body[cut_lead : len(body) - cut_trail]:
            if tag == " ":
                out.append(lines[k])
                k += 1
            elif tag == "-":
                k += 1
            else:
                out.append(r)
        cursor = pos + length
    out.extend(lines[cursor:])
    return "".join(out)


def _strip_cr(text: str) -> str:
    return text[:-1] if text.endswith("\r") else text


def _apply_lenient(original: str, hunks: Sequence[Hunk], fuzz: int) -> str:
    """Match ignoring terminators; added lines take the file's dominant ending."""
    src = _Text.split(original)
    lines = src.lines
    olds = [[_strip_cr(t) for t in h.old_lines] for h in hunks]
    placements = _place(lines, hunks, olds, fuzz)
    out_lines: list[str] = []
    out_terms: list[str | None] = []
    ends = src.ends_with_newline
    cursor = 0
    for (pos, length, cut_lead, cut_trail), hunk in zip(placements, hunks, strict=True):
        out_lines.extend(lines[cursor:pos])
        out_terms.extend(src.terms[cursor:pos])
        # Fuzz trims outer context only, so the body slice is plain.
        body = hunk.lines[cut_lead : len(hunk.lines) - cut_trail]
        k = pos
        for tag, text in body:
            if tag == " ":
                out_lines.append(lines[k])
                out_terms.append(src.terms[k] or None)
                k += 1
            elif tag == "-":
                k += 1
            else:
                out_lines.append(_strip_cr(text))
                out_terms.append(None)
        cursor = pos + length
        if cursor == len(lines) and cut_trail == 0:
            if hunk.new_missing_newline:
                ends = False
            elif hunk.old_missing_newline:
                ends = True
    out_lines.extend(lines[cursor:])
    out_terms.extend(src.terms[cursor:])
    return src.join(out_lines, out_terms, ends)


def _apply_hunks(original: str, hunks: Sequence[Hunk], fuzz: int) -> str:
    if fuzz < 0:
        raise ValueError(f"fuzz must be >= 0, got {fuzz}")
    try:
        return _apply_exact(original, hunks, fuzz)
    except PatchConflict:
        # Report what the lenient pass found: its lines are the ones a reader sees.
        return _apply_lenient(original, hunks, fuzz)


def apply_file_patch(original: str | None, patch: FilePatch, *, fuzz: int = 0) -> str | None:
    """Apply one file's patch; ``None`` in or out means "no such file".

    A creation needs no file (``original`` None) and returns the new text; a deletion
    must remove the whole text and returns ``None``; a rename or a modification
    returns the patched text (the caller moves the file for a rename).

    Args:
        original: the file's current text, ``None`` when it does not exist.
        patch: one :class:`FilePatch` from :func:`parse_patch`.
        fuzz: how many outer context lines may be ignored per hunk.

    Returns:
        The new text, or ``None`` when the patch deletes the file.

    Raises:
        PatchConflict: a hunk does not apply, the file to create exists, the file to
            patch does not, or a deletion would leave text behind. Nothing is applied.

    Example:
        >>> (fp,) = parse_patch("--- a/x\\n+++ /dev/null\\n@@ -1 +0,0 @@\\n-gone\\n")
        >>> apply_file_patch("gone\\n", fp) is None
        True
    """
    name = patch.path or "the file"
    if patch.created:
        if original is not None:
            raise PatchConflict(
                f"the diff creates {name}, which already exists; read it and diff "
                "against its content instead",
                failed_hunks=[],
            )
        return _apply_hunks("", patch.hunks, fuzz)
    if original is None:
        raise PatchConflict(
            f"the diff changes {name}, which does not exist; give a diff from {DEV_NULL} "
            "to create it",
            failed_hunks=[],
        )
    new = _apply_hunks(original, patch.hunks, fuzz)
    if patch.deleted:
        if new != "":
            left = len(_raw_split(new))
            raise PatchConflict(
                f"the diff deletes {name} but its hunks leave {left} line(s) of it; read "
                "the file again and recompute the diff",
                failed_hunks=[],
            )
        return None
    return new


def apply_unified_diff(original: str, diff: str, *, fuzz: int = 0) -> str:
    """Apply a single-file unified diff to a text, all hunks or nothing.

    Each hunk is looked for at the line its header names, shifted by the offset at
    which the previous hunk was found; if its context and removed lines are not there,
    the nearest position where they match is used (as GNU ``patch`` and ``git apply``
    do). Lines compare with their exact terminators, so the bytes match ``git apply``;
    see the module docs for the leniency when they only match ignoring terminators.
    With ``fuzz=n`` up to ``n`` leading and trailing context lines may be ignored.

    Args:
        original: the current text of the file.
        diff: a unified diff for that one file.
        fuzz: how many outer context lines may be ignored per hunk (0: none).

    Returns:
        The patched text.

    Raises:
        PatchError: the diff is malformed, covers several files, or deletes the file
            (a text cannot express that; use :func:`apply_file_patch`).
        PatchConflict: one or more hunks do not match; ``failed_hunks`` lists each as
            ``{"hunk", "header", "reason", "expected", "found"}``. Nothing is applied.

    Example:
        >>> apply_unified_diff("x\\r\\ny\\r\\n", "@@ -2 +2 @@\\n-y\\r\\n+z\\n")
        'x\\r\\nz\\n'
    """
    patch = _single(_parse(diff))
    if patch.deleted:
        raise PatchError(
            f"the diff deletes {patch.path or 'the file'} (+++ {DEV_NULL}); a text cannot "
            "be deleted: apply it with apply_file_patch or FileTools.apply_patch"
        )
    return _apply_hunks(original, patch.hunks, fuzz)


def _count_leading(body: Iterable[tuple[HunkTag, str]]) -> int:
    count = 0
    for tag, _ in body:
        if tag != " ":
            break
        count += 1
    return count


def _conflict_reason(expected: list[str], found: list[str], start: int) -> str:
    for k, (e, f) in enumerate(zip(expected, found, strict=False)):
        if e != f:
            return (
                f"line {start + k + 1} reads {_show(f)}, the hunk expects {_show(e)}, and the "
                "expected lines are not at any other offset either"
            )
    return (
        f"the hunk expects {len(expected)} lines from line {start + 1} but the text ends "
        f"after {len(found)} of them, and they are not at any other offset either"
    )


# --------------------------------------------------------------------------- line edits


class LineEdit(BaseModel):
    """Replace lines ``start_line``..``end_line`` (1-based, inclusive) of a text.

    ``expected_original_lines`` must equal the lines there now, so an edit computed
    from an outdated copy is refused rather than applied in the wrong place. An
    insertion before line ``k`` is ``start_line=k, end_line=k-1`` with no expected
    lines; ``k`` may be one past the last line to append.

    Example:
        >>> LineEdit(start_line=2, end_line=2, expected_original_lines=["b"], new_lines=["B"])
        LineEdit(start_line=2, end_line=2, expected_original_lines=['b'], new_lines=['B'])
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_line: int = Field(ge=1, description="First line to replace (1-based).")
    end_line: int = Field(
        ge=0, description="Last line to replace, inclusive; start_line - 1 for an insertion."
    )
    expected_original_lines: list[str] = Field(
        default_factory=list, description="The lines start_line..end_line as they read now."
    )
    new_lines: list[str] = Field(
        default_factory=list, description="Replacement lines, without line terminators."
    )

    @model_validator(mode="after")
    def _check_range(self) -> LineEdit:
        if self.end_line < self.start_line - 1:
            raise ValueError(
                f"end_line ({self.end_line}) must be >= start_line - 1 ({self.start_line - 1}); "
                "use end_line = start_line - 1 for an insertion"
            )
        if len(self.expected_original_lines) != self.end_line - self.start_line + 1:
            raise ValueError(
                f"expected_original_lines has {len(self.expected_original_lines)} lines but "
                f"lines {self.start_line}-{self.end_line} are "
                f"{self.end_line - self.start_line + 1}; give exactly the lines being replaced"
            )
        return self

    def describe(self, index: int) -> str:
        if self.end_line < self.start_line:
            return f"edit {index} (insertion before line {self.start_line})"
        return f"edit {index} (lines {self.start_line}-{self.end_line})"


def _clean_lines(lines: list[str], what: str, label: str) -> list[str]:
    out = []
    for k, line in enumerate(lines):
        line = _strip_terminator(line)
        if "\n" in line:
            raise PatchError(
                f"{label}: {what}[{k}] contains a line break; give one line per list item"
            )
        out.append(line)
    return out


def apply_line_edits(original: str, edits: Sequence[LineEdit]) -> str:
    """Apply line-range edits, all or nothing.

    Line numbers in every edit refer to ``original``; edits are applied bottom-up so
    one edit never shifts another. A single trailing newline on a given line is
    ignored (``"x\\n"`` is the line ``"x"``).

    Args:
        original: the current text.
        edits: the edits; their ranges must not overlap (two insertions at the same
            place count as overlapping, since their order would be a guess).

    Returns:
        The edited text, keeping the original's newline style and final newline.

    Raises:
        PatchError: a range is outside the text, or two edits overlap (both named).
        PatchConflict: an edit's ``expected_original_lines`` differ from the text;
            ``failed_hunks`` lists every such edit. Nothing is applied.

    Example:
        >>> edit = LineEdit(start_line=2, end_line=2, expected_original_lines=["b"],
        ...                 new_lines=["B", "b2"])
        >>> apply_line_edits("a\\nb\\nc\\n", [edit])
        'a\\nB\\nb2\\nc\\n'
    """
    src = _Text.split(original)
    lines = src.lines
    prepared: list[tuple[int, int, int, LineEdit, list[str], list[str]]] = []
    for index, edit in enumerate(edits):
        label = edit.describe(index)
        if edit.start_line > len(lines) + 1 or edit.end_line > len(lines):
            raise PatchError(
                f"{label} is outside the text, which has {len(lines)} lines; "
                f"start_line may be at most {len(lines) + 1} and end_line at most {len(lines)}"
            )
        expected = _clean_lines(edit.expected_original_lines, "expected_original_lines", label)
        new = _clean_lines(edit.new_lines, "new_lines", label)
        prepared.append((edit.start_line - 1, edit.end_line, index, edit, expected, new))
    ordered = sorted(prepared, key=lambda p: (p[0], p[1]))
    for a, b in zip(ordered, ordered[1:], strict=False):
        a_lo, a_hi, b_lo, b_hi = a[0], a[1], b[0], b[1]
        both_insert = a_lo == a_hi and b_lo == b_hi and a_lo == b_lo
        if both_insert or b_lo < a_hi:
            raise PatchError(
                f"{a[3].describe(a[2])} and {b[3].describe(b[2])} overlap; "
                "merge them into one edit or give non-overlapping ranges"
            )
    failures = []
    for lo, hi, index, edit, expected, _new in prepared:
        found = lines[lo:hi]
        if found != expected:
            k = next(k for k, (e, f) in enumerate(zip(expected, found, strict=True)) if e != f)
            failures.append(
                {
                    "hunk": index,
                    "header": f"lines {edit.start_line}-{edit.end_line}",
                    "reason": f"line {lo + k + 1} reads {_show(found[k])}, "
                    f"expected {_show(expected[k])}",
                    "expected": expected,
                    "found": found,
                }
            )
    if failures:
        raise PatchConflict(
            f"{len(failures)} of {len(edits)} edit(s) do not match the current text: "
            + "; ".join(f"edit {f['hunk']} ({f['header']}): {f['reason']}" for f in failures)
            + ". Read the lines again and recompute the edit.",
            failed_hunks=failures,
        )
    out_lines = list(lines)
    out_terms: list[str | None] = [t or None for t in src.terms]
    # Descending start, and for equal starts the wider range first, so an insertion
    # at line k lands before a replacement that also starts at k.
    for lo, hi, _index, _edit, _expected, new in sorted(
        prepared, key=lambda p: (p[0], p[1]), reverse=True
    ):
        out_lines[lo:hi] = new
        out_terms[lo:hi] = [None] * len(new)
    return src.join(out_lines, out_terms, src.ends_with_newline)


# --------------------------------------------------------------------------- diffs


def _diff_lines(text: str) -> list[str]:
    # git's lines: split at "\n" only, so a CR stays in the line it ends.
    return _raw_split(text)


def unified_diff(a: str, b: str, *, fromfile: str = "a", tofile: str = "b", n: int = 3) -> str:
    """A unified diff from ``a`` to ``b`` that ``apply_unified_diff`` accepts.

    Lines are git's (split at ``\\n``, a CR kept in its line), so a change of line
    ending shows as a changed line, as in ``git diff``, and the diff carries each
    line's exact ending. A missing final newline is marked with
    ``\\ No newline at end of file``.

    Args:
        a: the old text.
        b: the new text.
        fromfile: name on the ``---`` line.
        tofile: name on the ``+++`` line.
        n: lines of context around each change.

    Returns:
        The diff, or ``""`` when the texts have the same lines.

    Example:
        >>> print(unified_diff("a\\nb\\n", "a\\nc\\n"), end="")
        --- a
        +++ b
        @@ -1,2 +1,2 @@
         a
        -b
        +c
    """
    out: list[str] = []
    for line in difflib.unified_diff(
        _diff_lines(a), _diff_lines(b), fromfile=fromfile, tofile=tofile, n=n
    ):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE_MARKER + "\n")
    return "".join(out)


def diff_stats(diff: str) -> tuple[int, int]:
    """Count added and removed lines in a unified diff (one or several files).

    Args:
        diff: the diff text; ``""`` counts as no change.

    Returns:
        ``(added, removed)``.

    Raises:
        PatchError: the diff is malformed.

    Example:
        >>> diff_stats("@@ -1,2 +1,2 @@\\n a\\n-b\\n+B\\n")
        (1, 1)
    """
    if not diff.strip():
        return (0, 0)
    added = removed = 0
    for f in _parse(diff):
        for h in f.hunks:
            added += h.added
            removed += h.removed
    return (added, removed)


def changed_line_ranges(old: str, new: str) -> list[tuple[int, int]]:
    """Line ranges of ``new`` that were added or changed relative to ``old``.

    Pure deletions leave nothing in ``new`` to point to and are not reported.
    Adjacent ranges are merged.

    Args:
        old: the text before.
        new: the text after.

    Returns:
        1-based inclusive ``(start, end)`` ranges in ``new``, in order.

    Example:
        >>> changed_line_ranges("a\\nb\\nc\\n", "a\\nB\\nc\\nd\\n")
        [(2, 2), (4, 4)]
    """
    a, b = _Text.split(old).lines, _Text.split(new).lines
    ranges: list[tuple[int, int]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert") and j2 > j1:
            if ranges and ranges[-1][1] >= j1:
                ranges[-1] = (ranges[-1][0], j2)
            else:
                ranges.append((j1 + 1, j2))
    return ranges
