"""What the index of instruction files holds and returns: files, links and hits.

A :class:`RulesFile` is one ``AGENTS.md`` (or ``CLAUDE.md``) with its tier and links, a
:class:`RuleLink` one markdown link or ``@`` import in it; a query's matches come back as
:class:`LinkHit` and :class:`SkillHit`. :mod:`ctxnb.instructions.index` builds them.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from .skills import Skill


@dataclass(frozen=True)
class RuleLink:
    """A link (or ``@`` import) from a rules file or a ``SKILL.md`` to another file.

    Attributes:
        source: the workspace-relative path of the file that holds the link.
        target: the workspace-relative path of the linked file.
        text: the link text, whitespace collapsed.
        line_number: 1-based line of the link in ``source``.
        kind: ``"link"`` (loaded on a matching query) or ``"import"`` (loaded with
            its source).
        title: the link title, if any.
        anchor: the fragment after ``#``, if any.
        heading: the first markdown heading of the target, if it has one.
        skill: the skill whose ``SKILL.md`` holds the link, or None for rules files.
    """

    source: str
    target: str
    text: str
    line_number: int
    kind: str = "link"
    title: str | None = None
    anchor: str | None = None
    heading: str | None = None
    skill: str | None = None

    def search_text(self) -> str:
        """What a query is matched against: text, title, target heading and file name."""
        stem = posixpath.splitext(posixpath.basename(self.target))[0]
        return " ".join(p for p in (self.text, self.title, self.heading, stem) if p)


@dataclass(frozen=True)
class RulesFile:
    """One rules file found in the workspace.

    Attributes:
        path: its workspace-relative posix path (``"inventory/AGENTS.md"``).
        scope: the directory it governs, ``""`` for the root. A rules file in a
            ``.claude/`` folder governs that folder's parent.
        links: the links it holds to existing files.
        imports: its ``@path`` imports of existing files.
    """

    path: str
    scope: str
    links: tuple[RuleLink, ...] = ()
    imports: tuple[RuleLink, ...] = ()

    @property
    def depth(self) -> int:
        """0 for the root's rules, 1 for ``pkg/``, and so on."""
        return 0 if not self.scope else self.scope.count("/") + 1

    @property
    def tier(self) -> int:
        """1 for root rules (always loaded), 3 for nested ones (loaded on touch)."""
        return 1 if not self.scope else 3


@dataclass(frozen=True)
class LinkHit:
    """A link whose text matched a query.

    Attributes:
        link: the matched link.
        score: its BM25 score.
        strength: the score in units of one rare shared word (see
            :data:`DEFAULT_MIN_SCORE`).
        matched: the query terms it shares with the link's search text.
        similarity: its cosine with the query under the shared embedder (``None``
            without one); a hit with no shared word came by meaning alone.
    """

    link: RuleLink
    score: float
    strength: float = 0.0
    matched: tuple[str, ...] = ()
    similarity: float | None = None


@dataclass(frozen=True)
class SkillHit:
    """A skill whose name or description matched a query (fields as in :class:`LinkHit`)."""

    skill: Skill
    score: float
    strength: float = 0.0
    matched: tuple[str, ...] = ()
    similarity: float | None = None
