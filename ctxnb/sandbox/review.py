"""What a human is shown of a command's changes before they are committed: the bytes.

The approval diff (:func:`~ctxnb.sandbox._commitsteps.approve`) is
computed on the *bytes'* lines (split at ``\\n``) and only then shown redacted, so
redaction can hide what a secret is, never that something changed:

* every redacted span becomes ``[REDACTED:<rule> <n> chars sha256:<8 hex>]``: its length
  and the start of the SHA-256 of its bytes, so a changed secret shows another marker;
  a span over several lines is marked on each line it covers;
* a changed line whose shown text is the same before and after (the change lies inside
  redacted text: a value under a secret-looking name, the rest of a file after a private
  key's header with no end line), or an added line that is nothing but redacted text, is
  **hidden**; :func:`redaction_notes` words the count for the approval question ("3
  changed lines are hidden by redaction; the committed bytes differ from what is
  shown");
* bytes that are not UTF-8 are shown as ``\\xff`` escapes (two different bytes never
  look alike); an unchanged line is redacted with the spans both sides find in it.

Lines are aligned by :func:`ctxnb._util.linediff.anchored` (patience anchors, longest
common subsequence in the gaps, bounded): near-linear time on any rewrite.

Example:
    >>> d = file_diff(b'token = "Xk9vQ2mLr7TzW4pN"\\n', b'token = "Pq3nB8sWe5YhR1dJ"\\n',
    ...               fromfile="a/x.toml", tofile="b/x.toml")
    >>> print(d.text, end="")  # doctest: +ELLIPSIS
    --- a/x.toml
    +++ b/x.toml
    @@ -1 +1 @@
    -token = "[REDACTED:generic-secret 16 chars sha256:...]"
    +token = "[REDACTED:generic-secret 16 chars sha256:...]"
    >>> d.hidden, d.spans
    (1, 2)
    >>> redaction_notes(d.hidden, d.spans)  # doctest: +NORMALIZE_WHITESPACE
    ['1 changed line is hidden by redaction; the committed bytes differ from what is shown',
     'the diff shows 2 redacted spans by their length and SHA-256 prefix']
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from typing import NamedTuple

from .._util.linediff import anchored, grouped_opcodes, intern_lines, lcs

__all__ = ["FileDiff", "file_diff", "redaction_notes"]

_MARK = "[REDACTED:"
_BARE_MARK = re.compile(r"\[REDACTED:[a-z0-9-]+\]")

Span = tuple[int, int, str]  # start, end (in the line, its ending excluded), rule


class FileDiff(NamedTuple):
    """One file's part of an approval diff.

    Attributes:
        text: the unified diff, redacted; ``""`` when no line changed.
        hidden: changed lines whose change the redaction hides (see the module).
        spans: redacted spans shown in ``text`` (by length and hash).
    """

    text: str
    hidden: int
    spans: int


class _Side:
    """One side of the diff: its lines as bytes (to align and compare), as text, and the
    redacted spans in each line."""

    def __init__(self, data: bytes) -> None:
        from ..redaction.redactor import redact

        self.raw = data.split(b"\n")
        text = data.decode("utf-8", "surrogateescape")  # one character per bad byte
        self.lines = text.split("\n")
        if self.raw[-1]:
            self.raw = [r + b"\n" for r in self.raw[:-1]] + [self.raw[-1]]
            self.lines = [t + "\n" for t in self.lines[:-1]] + [self.lines[-1]]
        else:
            self.raw = [r + b"\n" for r in self.raw[:-1]]
            self.lines = [t + "\n" for t in self.lines[:-1]]
        starts, at = [], 0
        for line in self.lines:
            starts.append(at)
            at += len(line)
        self.spans: list[list[Span]] = [[] for _ in self.lines]
        for f in redact(text).findings:
            k = max(0, bisect_right(starts, f.start) - 1)
            while k < len(self.lines) and starts[k] < f.end:
                body = len(self.lines[k].removesuffix("\n"))
                lo, hi = max(f.start - starts[k], 0), min(f.end - starts[k], body)
                if lo < hi:
                    self.spans[k].append((lo, hi, f.rule))
                k += 1


def _merged(a: list[Span], b: list[Span]) -> list[Span]:
    """The spans of both sides in one unchanged line: what either side hides stays hidden."""
    out: list[Span] = []
    for lo, hi, rule in sorted(a + b):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi), out[-1][2])
        else:
            out.append((lo, hi, rule))
    return out


def _escape(text: str) -> str:
    # Bytes that are not UTF-8 were decoded one per lone surrogate: shown as \xNN.
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _shown(line: str, spans: list[Span]) -> tuple[str, str]:
    """``line`` as shown (each span by rule, length and hash) and as plain redaction
    would show it (each span by rule only): equal plain forms hide a change."""
    body = line.removesuffix("\n")
    end = line[len(body) :]
    shown, plain, at = [], [], 0
    for lo, hi, rule in spans:
        kept = _escape(body[at:lo])
        piece = body[lo:hi].encode("utf-8", "surrogateescape")
        digest = hashlib.sha256(piece).hexdigest()[:8]
        shown.append(f"{kept}{_MARK}{rule} {hi - lo} chars sha256:{digest}]")
        plain.append(f"{kept}{_MARK}{rule}]")
        at = hi
    rest = _escape(body[at:])
    return "".join(shown) + rest + end, "".join(plain) + rest


def file_diff(before: bytes, after: bytes, *, fromfile: str, tofile: str) -> FileDiff:
    """The approval diff of one file's change from ``before`` to ``after`` bytes.

    Args:
        before: the bytes the approver's diff starts from (empty for a new file).
        after: the bytes to be committed (empty for a deletion).
        fromfile: the ``---`` name (already redacted).
        tofile: the ``+++`` name.

    Returns:
        The diff and what redaction hides in it (see the module).
    """
    from ..tools.patching import format_unified

    a, b = _Side(before), _Side(after)
    keys_a, keys_b = intern_lines(a.raw, b.raw)
    pairs = anchored(keys_a, keys_b).pairs
    partner = dict(pairs)
    # An unchanged line is shown once, from the old side, with the spans of both.
    marked_a = [
        a.spans[i] if partner.get(i) is None else _merged(a.spans[i], b.spans[partner[i]])
        for i in range(len(a.lines))
    ]
    shown_a, plain_a = _all_shown(a.lines, marked_a)
    shown_b, plain_b = _all_shown(b.lines, b.spans)
    groups = grouped_opcodes(pairs, len(a.lines), len(b.lines))
    text = format_unified(shown_a, shown_b, groups, fromfile=fromfile, tofile=tofile)
    hidden = spans = 0
    for group in groups:
        for tag, i1, i2, j1, j2 in group:
            spans += sum(len(marked_a[i]) for i in range(i1, i2))
            if tag == "equal":
                continue
            spans += sum(len(b.spans[j]) for j in range(j1, j2))
            hidden += _hidden(a, b, plain_a, plain_b, i1, i2, j1, j2)
    return FileDiff(text, hidden, spans)


def _all_shown(lines: list[str], spans: list[list[Span]]) -> tuple[list[str], list[str]]:
    shown, plain = [], []
    for line, marked in zip(lines, spans, strict=True):
        s, p = _shown(line, marked)
        shown.append(s)
        plain.append(p)
    return shown, plain


def _hidden(
    a: _Side, b: _Side, plain_a: list[str], plain_b: list[str], i1: int, i2: int, j1: int, j2: int
) -> int:
    """Changed lines of one change (old ``i1:i2`` to new ``j1:j2``) that plain redaction
    shows unchanged, and added lines that are nothing but redacted text."""
    keys_a, keys_b = intern_lines(plain_a[i1:i2], plain_b[j1:j2])
    found = lcs(keys_a, keys_b)
    if not found.exact:  # too large to pair up: every redacted line counts
        return sum(bool(a.spans[i]) for i in range(i1, i2)) + sum(
            bool(b.spans[j]) for j in range(j1, j2)
        )
    count = sum(a.raw[i1 + p] != b.raw[j1 + q] for p, q in found.pairs)
    paired = {q for _, q in found.pairs}
    for q in range(j2 - j1):
        if q not in paired and b.spans[j1 + q] and not _BARE_MARK.sub("", plain_b[j1 + q]).strip():
            count += 1
    return count


def redaction_notes(hidden: int, spans: int) -> list[str]:
    """What the approval question says of the redaction in its diff (nothing when the
    diff shows no redacted span)."""
    notes = []
    if hidden:
        lines = "line is" if hidden == 1 else "lines are"
        notes.append(
            f"{hidden} changed {lines} hidden by redaction; the committed bytes differ from "
            "what is shown"
        )
    if spans:
        notes.append(
            f"the diff shows {spans} redacted span{'' if spans == 1 else 's'} by their "
            "length and SHA-256 prefix"
        )
    return notes
