"""Look-alikes from real prose and code: ctxnb's own docs and sources, read at test time.

Documentation and source code talk about tokens, passwords, keys and secrets all the
time (``bearer token: give each client its own``, ``--no-token   serve without…``,
`` `TiktokenCounter`: exact``, ``{"Authorization": f"Bearer {TOKEN}"}``) and hold almost
none. Every paragraph (a block between blank lines) of ``README.md``, ``docs/*.md``, the
package's ``.py`` files and two vendored prose-heavy data files that names a secret word
is a look-alike, unless it holds one of the example secrets the docs show being
redacted (:data:`EXAMPLE_SECRETS`): such a paragraph is an example and is left out.
A redaction anywhere else is a false redaction.

Used by ``tests/redaction/test_redact_prose.py`` (must be 0) and ``bench/redact.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The generated example secrets that ctxnb's docs and docstrings show being redacted
#: (each a value written to be a secret: a paragraph holding one is an example, not a
#: look-alike). A new example in the docs belongs here; a new redaction of anything
#: else is a false redaction to fix in the rules.
EXAMPLE_SECRETS = (
    "k3Vq9ZrT1xWm7Lp2Nc8Yb4Hd6Fs0Gj5Qe2Ua",  # a GitHub token, assembled from parts
    "Zx81Qw",  # a GitHub token, "gh" + "p_" + "Zx81Qw" * 6
    "not-for-the-agent",  # the value of TOKEN in a .env the agent must not see
    "3q2vJ0w5",  # the start of a generated A2A bearer token in printed output
    "Maple orbit12",  # a human password under DB_PASSWORD
    "'*hash'",  # a password hash after IDENTIFIED BY PASSWORD
    "s3cr3t",  # password = "s3cr3t…"
    "AKIAZ7Q2MXK4TR6W3PLN",  # an AWS access key id
    "Pq7xZ2rLk9",  # a URL's password
    '"sk-x"',  # an API key that provenance records as "[set]"
    "Xk9vQ2mLr7TzW4pN",  # a token before and after a change
)

# Words a secret-like name holds (those of ctxnb.redaction's assignment rules, read
# here apart from the package so that a change there does not change the corpus).
_SECRET_WORD = re.compile(r"(?i)pass|pwd|secret|token|key|auth|credential|cookie|identified")


@dataclass(frozen=True)
class ProsePiece:
    """One paragraph: its file, its first line there, its offsets in the file, its text."""

    path: str
    line: int
    start: int
    end: int
    text: str


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted(p for p in (ROOT / "ctxnb").rglob("*.py") if "__pycache__" not in p.parts)
    # Vendored prose-heavy data: a JSON Schema's descriptions, pytest summaries.
    files += [
        ROOT / "tests/data/acp-schema-v1/schema.json",
        ROOT / "tests/data/tasks/swebench_reference.json",
    ]
    return files


def prose_files() -> dict[str, str]:
    """The corpus's files by path (relative to the checkout), read now."""
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in _sources()}


def prose_pieces(files: dict[str, str]) -> tuple[list[ProsePiece], list[ProsePiece]]:
    """(look-alikes, examples): the paragraphs naming a secret word, split by whether
    they hold an example secret. A JSON file is one piece (a document, not paragraphs)."""
    look: list[ProsePiece] = []
    examples: list[ProsePiece] = []
    for rel, text in files.items():
        bounds = [(0, len(text))] if rel.endswith(".json") else _paragraphs(text)
        for a, b in bounds:
            block = text[a:b]
            if _SECRET_WORD.search(block) is None:
                continue
            piece = ProsePiece(rel, text.count("\n", 0, a) + 1, a, b, block)
            if any(s in block for s in EXAMPLE_SECRETS):
                examples.append(piece)
            else:
                look.append(piece)
    return look, examples


def _paragraphs(text: str) -> list[tuple[int, int]]:
    out, pos = [], 0
    for m in re.finditer(r"\n[ \t]*\n", text):
        if text[pos : m.start()].strip():
            out.append((pos, m.start()))
        pos = m.end()
    if text[pos:].strip():
        out.append((pos, len(text)))
    return out


def false_redactions(
    files: dict[str, str], redact: Callable[[str], Any]
) -> tuple[int, list[tuple[ProsePiece, list[str]]]]:
    """Redact each file whole (as ``read_file`` does) and report the look-alike
    paragraphs a finding falls in: (how many look-alikes, [(paragraph, the redacted
    values)]). ``redact`` returns an object with ``findings`` (start, end) or, from
    another ctxnb (the bench's baseline), the redacted text."""
    look, _ = prose_pieces(files)
    by_file: dict[str, list[ProsePiece]] = {}
    for piece in look:
        by_file.setdefault(piece.path, []).append(piece)
    false = []
    for rel, pieces in by_file.items():
        text = files[rel]
        spans = [(f.start, f.end) for f in redact(text).findings]
        for piece in pieces:
            hit = [text[a:b] for a, b in spans if a < piece.end and piece.start < b]
            if hit:
                false.append((piece, hit))
    return len(look), false
