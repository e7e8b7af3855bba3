"""Startup excerpts: what a new session knows of the project before its first turn.

An agent's first moves in an unknown repository are nearly always the same: read the
README, read the manifest (``pyproject.toml``, ``package.json`` …). A new session
preloads a shaped excerpt of each (the root ``AGENTS.md`` is already pinned whole by the
rules tracker), so those reads cost no tool round trip and sit at the very start of the
context, before the chat, where a provider's prompt cache keeps them.

Each excerpt is an ordinary ``get_excerpt`` tool call of the session (``ctxnb.tools``'
own read-the-head tool): stored, redacted like every tool output, pinned, and rebuilt by
``context_at`` from the store as any other item. The files are read through the
workspace's path policy, so a denied README is never loaded.

The budget is ``[rules] startup_tokens`` (0 turns the excerpts off), split between the
README and the manifest; each excerpt is the longest run of whole lines from the top
that fits its share, with a last line saying how much of the file it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import NotFoundError, PolicyError

if TYPE_CHECKING:
    from ..llm.tokens import TokenCounter
    from .core import Session

__all__ = ["MANIFEST_NAMES", "README_NAMES", "TOOL", "preload_excerpts", "shape_excerpt"]

#: The README names looked for at the workspace root, first found wins.
README_NAMES: tuple[str, ...] = ("README.md", "README.rst", "README.txt", "README")
#: Package manifests looked for at the workspace root, first found wins.
MANIFEST_NAMES: tuple[str, ...] = (
    "pyproject.toml",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle.kts",
    "build.gradle",
    "Gemfile",
    "composer.json",
    "setup.cfg",
    "setup.py",
)
#: The tool name the excerpts are recorded under (the file tools' head-of-file read).
TOOL = "get_excerpt"

# The head is all an excerpt shows; a huge README is not read whole to cut its top.
_READ_CAP = 256 * 1024


def shape_excerpt(text: str, budget: int, tokens: TokenCounter) -> tuple[str, int] | None:
    """The longest head of ``text`` in whole lines within ``budget`` tokens, and the
    number of lines it keeps; None when not even the first line fits.

    ``tokens`` counts the tokens (the session's counter). A cut excerpt ends with a
    line that names how many lines it shows, so the model knows to read on.
    """
    counter = tokens.count
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if total and counter(text) <= budget:
        return text, total
    kept: list[str] = []
    used = 0
    for line in lines:
        # The footer is counted up front so the cut excerpt as a whole stays within budget.
        footer = f"[… excerpt: lines 1-{len(kept) + 1} of {total} …]\n"
        cost = counter(line)
        if used + cost + counter(footer) > budget:
            break
        kept.append(line)
        used += cost
    if not kept:
        return None
    body = "".join(kept)
    if not body.endswith("\n"):
        body += "\n"
    return f"{body}[… excerpt: lines 1-{len(kept)} of {total} …]\n", len(kept)


def _read_text(session: Session, rel: str) -> str | None:
    """The file's text through the path policy; None when absent, refused or binary."""
    ws = session.workspace
    try:
        safe = ws.policy.check(ws.host_path(rel))
        data = ws.read(safe, max_bytes=_READ_CAP)
    except (PolicyError, NotFoundError):
        # A denied or linked README is as good as absent: nothing of it is read.
        return None
    if data is None:
        return None
    try:
        # A cut at the byte cap may split a character: only the whole lines are kept.
        return data.decode("utf-8", errors="strict" if len(data) < _READ_CAP else "ignore")
    except UnicodeDecodeError:
        return None


def _first(session: Session, names: Sequence[str]) -> tuple[str, str] | None:
    for name in names:
        text = _read_text(session, name)
        if text is not None and text.strip():
            return name, text
    return None


def preload_excerpts(session: Session, budget: int) -> list[str]:
    """Record and pin the startup excerpts of the README and the manifest in ``session``.

    Returns the ids of the recorded calls (none when ``budget`` is 0 or neither file is
    found). Meant for a new session: a resumed one already holds its excerpts.

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "README.md").write_text("# Widget\\nMakes widgets.\\n")
        >>> s = Workspace.open(root).session("doc")
        >>> "Makes widgets." in s.assemble().to_text()
        True
    """
    if budget <= 0:
        return []
    found = [f for f in (_first(session, README_NAMES), _first(session, MANIFEST_NAMES)) if f]
    ids: list[str] = []
    left = budget
    for i, (rel, text) in enumerate(found):
        # An even share of what is left: a short README leaves more to the manifest.
        share = left // (len(found) - i)
        shaped = shape_excerpt(text, share, session.token_counter)
        if shaped is None:
            continue
        excerpt, kept = shaped
        oid = session.record_toolcall(TOOL, {"path": rel, "max_lines": kept}, excerpt)
        session.pin(oid)
        ids.append(oid)
        left -= session.token_counter.count(session.get(oid).get("content") or "")
    return ids
