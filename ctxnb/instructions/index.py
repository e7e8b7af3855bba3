"""The index of a workspace's instruction files: rules files, their links, skills, shell paths.

:class:`RulesIndex` finds every ``AGENTS.md`` (and ``CLAUDE.md``) of a workspace,
indexes the markdown links in them (and the skills) for BM25 matching, and finds the
paths a shell command touches. Every read goes through the workspace's path policy:
a link to ``.env``, to a symbolic link or out of the workspace is never offered.
:mod:`ctxnb.instructions.tracker` decides what to load into a session.

Example:
    >>> import tempfile
    >>> RulesIndex.discover(tempfile.mkdtemp()).files
    {}
"""

from __future__ import annotations

import math
import os
import posixpath
import stat as stat_mod
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..access.door import own_roots
from ..access.fdio import PathPolicy
from ..access.ignore import TreeIgnores
from ..access.pathrules import DEFAULT_DENY
from ..errors import NotFoundError, PolicyError
from ..retrieval.embedding import CONFIGURED, HybridIndex
from ..retrieval.markdown_links import MarkdownLink, extract_markdown_links
from ..retrieval.textsearch import reciprocal_rank_fusion
from ._records import LinkHit, RuleLink, RulesFile, SkillHit
from ._rulewalk import rules_file_paths
from ._shellwords import CommandPaths
from .skills import SKILL_DIRS, Skill, SkillSet, discover_skills

if TYPE_CHECKING:
    from ..access.door import Access

__all__ = [
    "DEFAULT_MIN_SCORE",
    "RULES_FILE_NAMES",
    "LinkHit",
    "RuleLink",
    "RulesFile",
    "RulesIndex",
    "SkillHit",
]

#: File names read as rules files, in the order they load within one directory.
RULES_FILE_NAMES: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")
#: Least match strength for a query to load a link target or a skill. Strength is the
#: BM25 score divided by the score of one query word that occurs once in exactly one
#: indexed text, so the threshold means the same with 2 links or 5,000: 1.0 asks for the
#: equivalent of one such rare word; a word that many links share weighs less.
DEFAULT_MIN_SCORE = 1.0
#: Least cosine similarity, under the shared embedder, for a query to load a link target or
#: a skill by meaning alone (all-MiniLM-L6-v2: unrelated short texts score below ~0.3,
#: paraphrases without a shared word 0.3-0.6).
DEFAULT_MIN_SIMILARITY = 0.45

_HEADING_BYTES = 4096
_SKILL_ID = "\x00skill:"  # a prefix no link id (a path) can start with
_MARKDOWN_EXTS = (".md", ".markdown", ".mdx")


class RulesIndex:
    """Every rules file of a workspace, their links, and the workspace's skills.

    Build it with :meth:`discover`. Lookups are in-memory: :meth:`for_path` walks a
    path's parent directories through a dict, :meth:`match` runs one BM25 query.

    Attributes:
        root: the workspace root.
        files: rules files by workspace-relative path, root first then by depth.
        skills: the skills found (empty when discovery of skills was off).

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "a" / "b").mkdir(parents=True)
        >>> for d in ("", "a", "a/b"):
        ...     _ = (root / d / "AGENTS.md").write_text("rules\\n")
        >>> index = RulesIndex.discover(root)
        >>> index.for_path("a/b/c.py")
        ['AGENTS.md', 'a/AGENTS.md', 'a/b/AGENTS.md']
        >>> index.paths_in_command("cd a && sed -n '1,5p' b/c.py > ../out.txt")
        ['a/b/c.py', 'out.txt']
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        files: Iterable[RulesFile] = (),
        *,
        skills: SkillSet | None = None,
        names: Sequence[str] = RULES_FILE_NAMES,
        resolve: Callable[[str], str] | None = None,
        policy: PathPolicy | None = None,
        embedder: Any = CONFIGURED,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
    ) -> None:
        self.root = Path(root)
        self.min_similarity = min_similarity
        self._policy = policy
        self.names = tuple(names)
        self.files: dict[str, RulesFile] = {}
        self._by_dir: dict[str, tuple[str, ...]] = {}
        self._command_paths = CommandPaths(
            self.root, resolve=resolve, has_rules=lambda rel: rel in self._by_dir
        )
        self._links: dict[str, RuleLink] = {}
        self._link_ids: dict[str, list[str]] = {}
        # BM25 and, when CTXNB_EMBEDDER configures one, the shared embedder (by meaning).
        # Links are matched on every user turn: loading a model (torch) nobody configured
        # would make a session's first turn take seconds instead of milliseconds.
        self._bm25 = HybridIndex(embedder=embedder)
        self._headings: dict[str, str | None] = {}
        self.skills = skills if skills is not None else SkillSet()
        self._skill_paths: dict[str, str] = {}
        for f in files:
            self._put(f)
        self._sort()
        for skill in self.skills:
            self._add_skill(skill)

    def relative(self, path: str, cwd: str = "") -> str | None:
        """A path as the index keys it: workspace-relative, posix, normalised.

        Relative paths are taken from ``cwd`` (itself workspace-relative); absolute
        agent paths go through the workspace's mounts. Returns None for a path outside
        the workspace.
        """
        return self._command_paths.relative(path, cwd)

    def paths_in_command(self, cmd: str | Sequence[str], *, cwd: str = "") -> list[str]:
        """The workspace files a shell command names, as workspace-relative paths.

        Reads arguments that look like paths (a ``/`` or a file extension, or a
        directory that has rules), redirection targets, files written by ``tee``,
        ``cp``, ``sed -i`` and here-documents, and follows ``cd``. Patterns and
        scripts given to ``sed``, ``grep``, ``awk`` and ``python -c`` are not paths.
        It is a reader of common commands, not a shell: paths computed at run time
        (``$VAR/x``, ``$(…)``) are not followed, and paths outside the workspace are
        left out.

        Example:
            >>> RulesIndex(".").paths_in_command("grep -n 'a/b' src/x.py | head -3")
            ['src/x.py']
        """
        return self._command_paths.paths_in_command(cmd, cwd=cwd)

    @property
    def policy(self) -> PathPolicy:
        """The path policy every read of rules files and link targets goes through."""
        if self._policy is None:
            self._policy = PathPolicy(own_roots(self.root))
        return self._policy

    @policy.setter
    def policy(self, value: PathPolicy) -> None:
        self._policy = value

    # -- building ---------------------------------------------------------------------
    @classmethod
    def discover(
        cls,
        workspace: Access | str | os.PathLike[str],
        *,
        names: Sequence[str] = RULES_FILE_NAMES,
        skills: bool = True,
    ) -> RulesIndex:
        """Find every rules file (and skill) of a workspace.

        ``.git/``, ``.ctxnb/`` and ignored paths are skipped; a :class:`Workspace`
        brings its ``ignore`` and ``use_gitignore`` settings.

        Args:
            workspace: a :class:`~ctxnb.workspace.Workspace` or a root directory.
            names: file names that are rules files.
            skills: also load the skills in ``.ctxnb/skills`` and ``.claude/skills``.

        Example:
            >>> import tempfile
            >>> RulesIndex.discover(tempfile.mkdtemp()).files
            {}
        """
        resolve = None
        if isinstance(workspace, str | os.PathLike):
            ignores: tuple[str, ...] = ()
            root, use_gitignore = Path(workspace), True
        else:
            root = workspace.root
            ignores = tuple(workspace.config.index.ignore)
            use_gitignore = workspace.config.index.use_gitignore
            resolver = workspace.resolver
            if resolver.mounts:
                # Agents behind mounts name files by their agent path (/workspace/x.py).
                def resolve(path: str) -> str:
                    return resolver.resolve(path).path

        dirs: tuple[str, ...] = SKILL_DIRS
        if not isinstance(workspace, str | os.PathLike) and workspace.config.skills.root:
            # [skills] root in ctxnb.toml comes first; the usual places still count.
            dirs = (workspace.config.skills.root, *SKILL_DIRS)
        deny = (
            DEFAULT_DENY
            if isinstance(workspace, str | os.PathLike)
            else tuple(workspace.config.policy.deny)
        )
        found = discover_skills(root, dirs=dirs, deny=deny) if skills else None
        index = cls(root, skills=found, names=names, resolve=resolve)
        if not isinstance(workspace, str | os.PathLike):
            index.policy = workspace.policy
        wanted = frozenset(names)
        # [rules] root in ctxnb.toml limits discovery to one subtree ("." is everything).
        under = ""
        if not isinstance(workspace, str | os.PathLike):
            under = posixpath.normpath(workspace.config.rules.root).strip("/")
            under = "" if under == "." else under + "/"
        tree = TreeIgnores(ignores, use_gitignore=use_gitignore, root=root)
        first = index.policy.roots[0]

        # entry.rel and entry.root, not entry.safe: no path object for each file walked.
        def accept(rel: str, where: Any) -> bool:
            if under and not rel.startswith(under):
                return False
            return posixpath.basename(rel) in wanted and where == first

        key = (wanted, under, ignores, use_gitignore)
        keep = None
        if not isinstance(workspace, str | os.PathLike):
            from ..session._cold import rules_walk_path, workspace_key

            keep = (rules_walk_path(root), workspace_key(workspace))
        for rel in rules_file_paths(index.policy, tree, accept, key, keep=keep):
            rf = index._read_rules_file(rel)  # read each time: an edit is always seen
            if rf is not None:
                index._put(rf)
        index._sort()
        return index

    def _read(self, rel: str) -> bytes | None:
        """A file's bytes through the path policy; None when refused or missing."""
        try:
            return self.policy.read_bytes(str(self.root / rel))
        except (PolicyError, NotFoundError, OSError):
            return None

    def _read_rules_file(self, rel: str) -> RulesFile | None:
        data = self._read(rel)
        if data is None:
            return None
        text = data.decode("utf-8-sig", errors="replace")
        directory = posixpath.dirname(rel)
        scope = directory
        if posixpath.basename(directory) == ".claude":
            scope = posixpath.dirname(directory)
        links, imports = self._links_of(rel, extract_markdown_links(text), None)
        return RulesFile(rel, scope, tuple(links), tuple(imports))

    def _links_of(
        self, source: str, found: Iterable[MarkdownLink], skill: str | None
    ) -> tuple[list[RuleLink], list[RuleLink]]:
        base = posixpath.dirname(source)
        links: list[RuleLink] = []
        imports: list[RuleLink] = []
        for m in found:
            if m.kind not in ("link", "import"):
                continue
            target = _resolve_link(base, m.relative_path)
            # Only a target the policy lets ctxnb read: a link to .env, to a symbolic
            # link or out of the workspace is never offered, let alone loaded.
            if target is None or target == source or not self._readable(target):
                continue
            link = RuleLink(
                source=source,
                target=target,
                text=m.display_text,
                line_number=m.line_number,
                kind=m.kind,
                title=m.title,
                anchor=m.anchor,
                heading=self._heading(target),
                skill=skill,
            )
            (links if m.kind == "link" else imports).append(link)
        return links, imports

    def _heading(self, target: str) -> str | None:
        if target in self._headings:
            return self._headings[target]
        heading = None
        if target.lower().endswith(_MARKDOWN_EXTS):
            data = self._read(target) or b""
            head = data[:_HEADING_BYTES].decode("utf-8", errors="replace")
            for line in head.splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip() or None
                    break
        self._headings[target] = heading
        return heading

    def _readable(self, rel: str) -> bool:
        try:
            return stat_mod.S_ISREG(self.policy.stat(str(self.root / rel)).st_mode)
        except (PolicyError, NotFoundError, OSError):
            return False

    def _put(self, rf: RulesFile) -> None:
        self._drop(rf.path)
        self.files[rf.path] = rf
        self._by_dir[rf.scope] = (*self._by_dir.get(rf.scope, ()), rf.path)
        self._index_links(rf.path, rf.links)

    def _index_links(self, source: str, links: Iterable[RuleLink]) -> None:
        ids = []
        for n, link in enumerate(links):
            lid = f"{source}#{n}"
            self._links[lid] = link
            self._bm25.add(lid, link.search_text())
            ids.append(lid)
        self._link_ids[source] = ids

    def _drop(self, rel: str) -> None:
        old = self.files.pop(rel, None)
        if old is None:
            return
        rest = tuple(p for p in self._by_dir.get(old.scope, ()) if p != rel)
        if rest:
            self._by_dir[old.scope] = rest
        else:
            self._by_dir.pop(old.scope, None)
        for lid in self._link_ids.pop(rel, []):
            del self._links[lid]
            self._bm25.remove(lid)

    def _sort(self) -> None:
        order = {n: i for i, n in enumerate(self.names)}

        def key(p: str) -> tuple[int, str, int, str]:
            f = self.files[p]
            return (f.depth, f.scope, order.get(posixpath.basename(p), len(order)), p)

        self.files = {p: self.files[p] for p in sorted(self.files, key=key)}
        self._by_dir = {d: tuple(sorted(ps, key=key)) for d, ps in self._by_dir.items()}

    def _add_skill(self, skill: Skill) -> None:
        rel = self.relative(str(skill.path))
        if rel is None:
            return
        self._skill_paths[rel] = skill.name
        words = skill.name.replace("-", " ")
        # One index for links and skills, so that rare words weigh the same in both.
        self._bm25.add(_SKILL_ID + skill.name, f"{words} {skill.description}")
        links, imports = self._links_of(rel, skill.references, skill.name)
        self._index_links(rel, [*links, *imports])

    def update(self, path: str) -> RulesFile | None:
        """Re-read one rules file after it changed, appeared or went away.

        Returns:
            The file as now indexed, or None when it no longer exists.

        Example:
            >>> import pathlib, tempfile
            >>> root = pathlib.Path(tempfile.mkdtemp())
            >>> index = RulesIndex.discover(root)
            >>> _ = (root / "AGENTS.md").write_text("rules\\n")
            >>> index.update("AGENTS.md").tier
            1
        """
        rel = self.relative(path)
        if rel is None or posixpath.basename(rel) not in self.names:
            return None
        rf = self._read_rules_file(rel) if (self.root / rel).is_file() else None
        if rf is None:
            self._drop(rel)
        else:
            self._put(rf)
        self._sort()
        return rf

    # -- lookups ----------------------------------------------------------------------
    def tier1(self) -> list[str]:
        """The root's rules files (loaded always), ``AGENTS.md`` before ``CLAUDE.md``."""
        return list(self._by_dir.get("", ()))

    def for_path(self, path: str) -> list[str]:
        """The rules files that govern ``path``, root first, leaf last.

        ``path`` is workspace-relative and normalised (as :meth:`relative` returns
        it). A directory that has rules of its own counts as inside its own scope.
        """
        by_dir = self._by_dir
        out = list(by_dir.get("", ()))
        if len(by_dir) == len(out) > 0 or not path:
            return out  # no nested rules at all: skip the walk
        acc = ""
        for part in path.split("/")[:-1]:
            acc = f"{acc}/{part}" if acc else part
            found = by_dir.get(acc)
            if found:
                out.extend(found)
        found = by_dir.get(path)
        if found:
            out.extend(found)
        return out

    def links(self) -> list[RuleLink]:
        """Every indexed link, in the order of their source files."""
        return list(self._links.values())

    def imports_of(self, source: str) -> list[RuleLink]:
        """The ``@`` imports of a rules file or ``SKILL.md`` (loaded along with it)."""
        rf = self.files.get(source)
        if rf is not None:
            return list(rf.imports)
        links = (self._links[i] for i in self._link_ids.get(source, []))
        return [link for link in links if link.kind == "import"]

    def skill_for_path(self, path: str) -> str | None:
        """The name of the skill whose ``SKILL.md`` is at ``path``, or None."""
        return self._skill_paths.get(path)

    def skill_path(self, name: str) -> str:
        """The workspace-relative path of a skill's ``SKILL.md``.

        Raises:
            NotFoundError: no skill has that name.
        """
        skill = self.skills[name]
        rel = self.relative(str(skill.path))
        if rel is None:  # pragma: no cover - skills are discovered under the root
            raise NotFoundError(f"skill {name!r} lives outside the workspace: {skill.path}")
        return rel

    def match(
        self,
        query: str,
        k: int = 3,
        *,
        min_score: float = DEFAULT_MIN_SCORE,
        min_similarity: float | None = None,
        eligible: Callable[[RuleLink], bool] | None = None,
    ) -> list[LinkHit]:
        """The links whose text matches ``query``, best first, one hit per target.

        Args:
            query: the task or the latest user turn.
            k: at most this many hits.
            min_score: least strength (see :data:`DEFAULT_MIN_SCORE`).
            min_similarity: least cosine to match by meaning alone (default: the
                index's ``min_similarity``; above 1 turns meaning off).
            eligible: keep only links for which this returns true (applied before
                the ``k`` cut, so ineligible links never crowd out eligible ones).

        Example:
            >>> index = RulesIndex(".", [RulesFile("AGENTS.md", "", (
            ...     RuleLink("AGENTS.md", "docs/style.md", "Python style guide", 3),
            ...     RuleLink("AGENTS.md", "docs/testing.md", "how we test", 4)))])
            >>> [h.link.target for h in index.match("python style")]
            ['docs/style.md']
        """
        hits: list[LinkHit] = []
        seen: set[str] = set()
        query_terms = set(self._bm25.tokenizer(query))
        qualified = self._qualified(query, min_score, min_similarity, link_ids=True)
        for lid, score, strength, sim in qualified:
            if len(hits) >= k:
                break
            link = self._links.get(lid)
            if link is None or link.kind != "link" or link.target in seen:
                continue
            if eligible is not None and not eligible(link):
                continue
            seen.add(link.target)
            shared = query_terms & set(self._bm25.tokenizer(link.search_text()))
            hits.append(LinkHit(link, score, strength, tuple(sorted(shared)), sim))
        return hits

    def _qualified(
        self, query: str, min_score: float, min_similarity: float | None, *, link_ids: bool
    ) -> list[tuple[str, float, float, float | None]]:
        """Entries (links or skills) that match ``query``: ``(id, score, strength, sim)``.

        An entry qualifies by words (BM25 strength ≥ ``min_score``, or the query names
        every word of a link's own text — "templates" loads the link "templates"), or by
        meaning (cosine ≥ ``min_similarity`` with the shared embedder). Best first: by
        reciprocal rank over both orders.
        """
        unit = self._unit()
        scores = self._bm25.lexical_scores(query)
        query_terms = set(self._bm25.tokenizer(query))

        def wanted(eid: str) -> bool:
            return eid.startswith(_SKILL_ID) != link_ids

        def names_it(eid: str) -> bool:
            link = self._links.get(eid)
            words = set(self._bm25.tokenizer(link.text)) if link is not None else set()
            return bool(words) and words <= query_terms

        lexical = {
            e: v for e, v in scores.items() if wanted(e) and (v >= min_score * unit or names_it(e))
        }
        least = self.min_similarity if min_similarity is None else min_similarity
        sims = (
            {e: v for e, v in self._bm25.similarities(query).items() if wanted(e)}
            if least <= 1.0
            else {}
        )
        semantic = {e: v for e, v in sims.items() if v >= least}
        if not lexical and not semantic:
            return []

        def floor(e: str) -> float:
            # A link the query names outright counts as one rare shared word at least.
            return min_score if e in lexical else 0.0

        by_words = sorted(lexical, key=lambda e: (-lexical[e], e))
        by_meaning = sorted(semantic, key=lambda e: (-semantic[e], e))
        fused = reciprocal_rank_fusion([by_words, by_meaning])
        return [
            (e, scores.get(e, 0.0), max(scores.get(e, 0.0) / unit, floor(e)), sims.get(e))
            for e, _ in fused
        ]

    def _unit(self) -> float:
        # BM25 of a word with tf=1 in a text of average length, found in one text only.
        n = len(self._bm25)
        return math.log(1 + (n - 0.5) / 1.5) if n else 1.0

    def match_skills(
        self,
        query: str,
        k: int = 3,
        *,
        min_score: float = DEFAULT_MIN_SCORE,
        min_similarity: float | None = None,
        eligible: Callable[[Skill], bool] | None = None,
    ) -> list[SkillHit]:
        """The skills whose name or description matches ``query``, best first."""
        hits: list[SkillHit] = []
        query_terms = set(self._bm25.tokenizer(query))
        qualified = self._qualified(query, min_score, min_similarity, link_ids=False)
        for sid, score, strength, sim in qualified:
            if len(hits) >= k:
                break
            name = sid[len(_SKILL_ID) :]
            skill = self.skills[name]
            if eligible is not None and not eligible(skill):
                continue
            text = f"{name.replace('-', ' ')} {skill.description}"
            shared = query_terms & set(self._bm25.tokenizer(text))
            hits.append(SkillHit(skill, score, strength, tuple(sorted(shared)), sim))
        return hits

    @property
    def matched_by(self) -> str:
        """What matches queries: ``"BM25"`` (words alone) or ``"BM25+<embedder>"``."""
        return self._bm25.mode

    def __repr__(self) -> str:
        return (
            f"RulesIndex({str(self.root)!r}, files={len(self.files)}, "
            f"links={len(self._links)}, skills={len(self.skills)})"
        )


def _resolve_link(base: str, target: str) -> str | None:
    if not target or target.startswith("~"):
        return None
    # A leading "/" is the workspace root, as on code hosts that render these files.
    joined = target.lstrip("/") if target.startswith("/") else posixpath.join(base, target)
    rel = posixpath.normpath(joined)
    if rel in (".", "..") or rel.startswith("../"):
        return None
    return rel
