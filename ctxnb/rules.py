"""Rules discovery: which ``AGENTS.md`` files, linked docs and skills are in context, and why.

Rules files (``AGENTS.md``, and ``CLAUDE.md`` when present) reach the context in three
tiers (DESIGN §6):

1. **Always.** The rules files at the workspace root are loaded when tracking starts.
2. **On a matching query.** Markdown links ``[text](path)`` in loaded rules files
   (images and external URLs excluded) are indexed by their text, their title, the
   first heading of the target and the target's file name. When a query (the task, the
   latest user turn) matches a link above a threshold, the target is loaded. A link is
   eligible only once the file that contains it is loaded, so links in a nested
   ``AGENTS.md`` are disclosed progressively. ``@path`` imports (as in ``CLAUDE.md``)
   load together with the file that imports them.
3. **On touch.** A nested rules file is loaded when the agent reads or writes a file in
   its subtree, through any tool: a ``path`` argument, a patch header, or the file
   arguments and redirections of a shell command (``cat pkg/x.py``,
   ``sed -n '1,5p' pkg/x.py``, ``python pkg/x.py > out.txt``, ``cd pkg && cat x.py``).

Skills work the same way: each skill's ``SKILL.md`` sits in the metadata pool without
its body, and a small ``list_skills()`` object lists every skill's name and
description; the body is activated when a query matches the description or when the
agent asks for the skill (:meth:`RulesTracker.load_skill`), and the files the body links
to load on later matching queries.

Everything loaded is a versioned content object of the session (``session.add_path``),
visible in the metadata pool. :func:`rules_status` tells what was loaded and why, with a
``load_reason`` vocabulary close to Claude Code's ``InstructionsLoaded`` hook
(``session_start``, ``nested_traversal``, ``include``) plus ``link_match``,
``skill_match`` and ``skill_request``.

The :class:`RulesTiered` strategy keeps the tracked rules in context whatever the base
strategy decides for everything else; :class:`AllRules` loads every rules file and
linked doc at once, the baseline to compare tiered loading with.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb import Workspace
    >>> from ctxnb.strategies import MetadataOnly
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "docs").mkdir(); (root / "pkg").mkdir()
    >>> _ = (root / "AGENTS.md").write_text("Follow the [Python style guide](docs/style.md).\\n")
    >>> _ = (root / "docs" / "style.md").write_text("# Python style\\nType hints.\\n")
    >>> _ = (root / "pkg" / "AGENTS.md").write_text("No I/O in pkg.\\n")
    >>> _ = (root / "pkg" / "x.py").write_text("x = 1\\n")
    >>> session = Workspace.open(root).session("demo")
    >>> tracker = RulesTracker(session, RulesIndex.discover(session.workspace))
    >>> [r.path for r in tracker.on_query("fix the python style")]
    ['docs/style.md']
    >>> [r.path for r in tracker.on_tool_call("bash", {"command": "cat pkg/x.py"})]
    ['pkg/AGENTS.md']
    >>> ctx = session.assemble(strategy=RulesTiered(MetadataOnly(), tracker))
    >>> [session.workspace.relpath(item.label) for item in ctx.sections[2].items]
    ['AGENTS.md', 'pkg/AGENTS.md', 'docs/style.md']
    >>> rules_status(session)[["path", "tier", "load_reason"]].values.tolist()
    [['AGENTS.md', 1, 'session_start'], ['docs/style.md', 2, 'link_match'], \
['pkg/AGENTS.md', 3, 'nested_traversal']]
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import stat as stat_mod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .access.door import own_roots
from .access.fdio import PathPolicy
from .errors import CtxnbError, NotFoundError, PolicyError
from .govern.risk import classify_command
from .ignore import TreeIgnores
from .markdown_links import MarkdownLink, extract_markdown_links
from .skills import Skill, SkillSet, discover_skills
from .strategies import ContextStrategy, Selection, StrategyInput
from .textsearch import BM25Index

if TYPE_CHECKING:
    import pandas as pd

    from .session import Session
    from .workspace import Workspace

__all__ = [
    "DEFAULT_MIN_SCORE",
    "RULES_FILE_NAMES",
    "AllRules",
    "LinkHit",
    "LoadRecord",
    "RuleLink",
    "RulesFile",
    "RulesIndex",
    "RulesTiered",
    "RulesTracker",
    "SkillHit",
    "rules_status",
    "tracker_for",
]

#: File names read as rules files, in the order they load within one directory.
RULES_FILE_NAMES: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")
#: Least match strength for a query to load a link target or a skill. Strength is the
#: BM25 score divided by the score of one query word that occurs once in exactly one
#: indexed text, so the threshold means the same with 2 links or 5,000: 1.0 asks for the
#: equivalent of one such rare word; a word that many links share weighs less.
DEFAULT_MIN_SCORE = 1.0

STATUS_COLUMNS: tuple[str, ...] = (
    "path",
    "tier",
    "reason",
    "trigger",
    "turn",
    "loaded_at",
    "kind",
    "load_reason",
    "id",
    "active",
    "pinned",
)

_HEADING_BYTES = 4096
_SKILL_ID = "\x00skill:"  # a prefix no link id (a path) can start with
_MARKDOWN_EXTS = (".md", ".markdown", ".mdx")
_TRIGGER_MAX = 120


# --------------------------------------------------------------------------- index


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
    """

    link: RuleLink
    score: float
    strength: float = 0.0
    matched: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillHit:
    """A skill whose name or description matched a query (fields as in :class:`LinkHit`)."""

    skill: Skill
    score: float
    strength: float = 0.0
    matched: tuple[str, ...] = ()


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
    ) -> None:
        self.root = Path(root)
        self._policy = policy
        self._resolve = resolve
        self._root_prefix = str(self.root).rstrip("/") + "/"
        self.names = tuple(names)
        self.files: dict[str, RulesFile] = {}
        self._by_dir: dict[str, tuple[str, ...]] = {}
        self._links: dict[str, RuleLink] = {}
        self._link_ids: dict[str, list[str]] = {}
        self._bm25 = BM25Index()
        self._headings: dict[str, str | None] = {}
        self.skills = skills if skills is not None else SkillSet()
        self._skill_paths: dict[str, str] = {}
        for f in files:
            self._put(f)
        self._sort()
        for skill in self.skills:
            self._add_skill(skill)

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
        workspace: Workspace | str | os.PathLike[str],
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
            root, ignores, use_gitignore = Path(workspace), (), True
        else:
            root = workspace.root
            ignores = tuple(workspace.config.index.ignore)
            use_gitignore = workspace.config.index.use_gitignore
            resolver = workspace.resolver
            if resolver.mounts:
                # Agents behind mounts name files by their agent path (/workspace/x.py).
                def resolve(path: str) -> str:
                    return resolver.resolve(path).path

        found = discover_skills(root) if skills else None
        index = cls(root, skills=found, names=names, resolve=resolve)
        if not isinstance(workspace, str | os.PathLike):
            index.policy = workspace.policy
        wanted = frozenset(names)
        tree = TreeIgnores(ignores, use_gitignore=use_gitignore)
        for entry in index.policy.walk(skip=tree.skip, on_dir=tree.on_dir):
            rel = entry.safe.rel
            if entry.safe.root == index.policy.roots[0] and posixpath.basename(rel) in wanted:
                rf = index._read_rules_file(rel)
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
        eligible: Callable[[RuleLink], bool] | None = None,
    ) -> list[LinkHit]:
        """The links whose text matches ``query``, best first, one hit per target.

        Args:
            query: the task or the latest user turn.
            k: at most this many hits.
            min_score: least strength (see :data:`DEFAULT_MIN_SCORE`).
            eligible: keep only links for which this returns true (applied before
                the ``k`` cut, so ineligible links never crowd out eligible ones).

        Example:
            >>> index = RulesIndex(".", [RulesFile("AGENTS.md", "", (
            ...     RuleLink("AGENTS.md", "docs/style.md", "Python style guide", 3),
            ...     RuleLink("AGENTS.md", "docs/testing.md", "how we test", 4)))])
            >>> [h.link.target for h in index.match("python style")]
            ['docs/style.md']
        """
        unit = self._unit()
        scores = self._bm25.scores(query)
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        hits: list[LinkHit] = []
        seen: set[str] = set()
        query_terms: set[str] | None = None
        for lid, score in ranked:
            if score < min_score * unit or len(hits) >= k:
                break
            link = self._links.get(lid)
            if link is None or link.kind != "link" or link.target in seen:
                continue
            if eligible is not None and not eligible(link):
                continue
            seen.add(link.target)
            if query_terms is None:
                query_terms = set(self._bm25.tokenizer(query))
            shared = query_terms & set(self._bm25.tokenizer(link.search_text()))
            hits.append(LinkHit(link, score, score / unit, tuple(sorted(shared))))
        return hits

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
        eligible: Callable[[Skill], bool] | None = None,
    ) -> list[SkillHit]:
        """The skills whose name or description matches ``query``, best first."""
        hits: list[SkillHit] = []
        unit = self._unit()
        scores = self._bm25.scores(query)
        ranked = sorted(
            ((sid, v) for sid, v in scores.items() if sid.startswith(_SKILL_ID)),
            key=lambda kv: (-kv[1], kv[0]),
        )
        query_terms = set(self._bm25.tokenizer(query))
        for sid, score in ranked:
            if score < min_score * unit or len(hits) >= k:
                break
            name = sid[len(_SKILL_ID) :]
            skill = self.skills[name]
            if eligible is not None and not eligible(skill):
                continue
            text = f"{name.replace('-', ' ')} {skill.description}"
            shared = query_terms & set(self._bm25.tokenizer(text))
            hits.append(SkillHit(skill, score, score / unit, tuple(sorted(shared))))
        return hits

    # -- paths ------------------------------------------------------------------------
    def relative(self, path: str, cwd: str = "") -> str | None:
        """A path as the index keys it: workspace-relative, posix, normalised.

        Relative paths are taken from ``cwd`` (itself workspace-relative); absolute
        agent paths go through the workspace's mounts. Returns None for a path outside
        the workspace.
        """
        if path.startswith("/"):
            if not path.startswith(self._root_prefix) and self._resolve is not None:
                try:
                    path = self._resolve(path)
                except CtxnbError:
                    return None
            if not path.startswith(self._root_prefix):
                return "" if path.rstrip("/") == str(self.root) else None
            path = path[len(self._root_prefix) :]
        elif cwd:
            path = f"{cwd}/{path}"
        rel = posixpath.normpath(path)
        if rel == ".":
            return ""
        if rel == ".." or rel.startswith("../"):
            return None
        return rel

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
        writes: list[str] = []

        def collect(target: str) -> bool:
            writes.append(target)
            return True

        try:
            found = classify_command(cmd, scope_check=collect, unknown_default="SAFE")
        except (ValueError, TypeError):  # pragma: no cover - the classifier never raises
            return []
        out: dict[str, None] = {}
        here = cwd
        for argv in found.commands:
            if len(argv) == 2 and argv[0] in ("cd", "pushd"):
                moved = self.relative(argv[1], here) if _pathish_word(argv[1]) else None
                here = moved if moved is not None else here
                continue
            for word in _path_words(argv):
                self._keep(word, here, out)
        for word in writes:
            self._keep(word, here, out)
        if isinstance(cmd, str):
            for m in _REDIRECT.finditer(cmd):
                self._keep(m.group(1), here, out)
        return list(out)

    def _keep(self, word: str, cwd: str, out: dict[str, None]) -> None:
        if not _pathish_word(word):
            return
        rel = self.relative(word, cwd)
        if rel is None or not rel:
            return
        if "/" in word or _EXTENSION.search(word) or rel in self._by_dir:
            out.setdefault(rel, None)

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


# --------------------------------------------------------------------------- shell words

_EXTENSION = re.compile(r"\.[A-Za-z0-9_]{1,12}$")
_NOT_PATH = re.compile(r"[\n$`'\"\\]|://|^-|^~|^\s|\s$")
# Redirection targets, read off the raw text: the classifier leaves out reads (``<``)
# and writes outside the working directory (``> ../x``), which still touch files.
_REDIRECT = re.compile(r"(?:(?<![<\d])<(?![<(&])|>{1,2}\|?)\s*([^\s<>|&;()'\"]+)")
# Programs whose first operand is a pattern or a script, unless given with -e/-f.
_PATTERN_FIRST = frozenset(
    {"sed", "grep", "egrep", "fgrep", "rg", "ag", "ack", "awk", "gawk", "mawk", "jq"}
)
# Options whose value is code or a pattern, not a file.
_CODE_OPTIONS = frozenset({"-c", "-e", "--expression", "--regexp", "-m", "--eval"})


def _pathish_word(word: str) -> bool:
    return bool(word) and not _NOT_PATH.search(word)


def _path_words(argv: list[str]) -> list[str]:
    """The words of one simple command that may name files."""
    prog = posixpath.basename(argv[0])
    words = [argv[0]] if "/" in argv[0] else []
    skip_pattern = prog in _PATTERN_FIRST
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in _CODE_OPTIONS:
            # sed -e / grep -e give the pattern explicitly: every operand is then a file
            skip_pattern = skip_pattern and word not in ("-e", "--expression", "--regexp")
            i += 2
            continue
        if word.startswith("-"):
            if word.startswith("--") and "=" in word:
                words.append(word.split("=", 1)[1])
            elif word == "-f" and skip_pattern:
                skip_pattern = False  # the script comes from a file named next
            i += 1
            continue
        if skip_pattern:
            skip_pattern = False
        else:
            words.append(word)
        i += 1
    return words


_PATCH_FILE = re.compile(
    r"^(?:\*\*\* (?:Add|Update|Delete) File: (.+?)|\*\*\* Move to: (.+?)"
    r"|(?:---|\+\+\+) (?:[ab]/)?([^\t\n]+?))\s*$",
    re.M,
)
_PATH_KEYS: tuple[str, ...] = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "target_file",
    "notebook_path",
    "dir_path",
    "directory",
    "source",
    "destination",
    "old_path",
    "new_path",
)
_CWD_KEYS = ("cwd", "workdir", "working_directory")
_ARG_KINDS: dict[str, str] = {
    **dict.fromkeys(_PATH_KEYS, "path"),
    **dict.fromkeys(("paths", "files", "file_paths"), "paths"),
    **dict.fromkeys(("cmd", "command", "script"), "cmd"),
    **dict.fromkeys(("patch", "input", "diff"), "patch"),
}
# For the quick pre-check of shell commands: words are split on whitespace, operators,
# quotes' neighbours and "=" (so --out=x.py yields x.py).
_QUICK_SPLIT = re.compile(r"[\s;|&<>()=`$]+")
_CHANGES_DIR = re.compile(r"(?:^|[\s;&|(])(?:cd|pushd)(?:\s|$)")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")


def _quoted_path_with_space(cmd: str) -> bool:
    # The quick split would cut such a path in two and look in the wrong directory.
    if "\\ " in cmd:
        return True
    return any("/" in q and any(c.isspace() for c in q) for q in _QUOTED.findall(cmd))


def _patch_paths(text: str) -> list[str]:
    out = []
    for m in _PATCH_FILE.finditer(text):
        p = m.group(1) or m.group(2) or m.group(3)
        if p and p != "/dev/null":
            out.append(p.strip())
    return out


# --------------------------------------------------------------------------- tracker


@dataclass
class LoadRecord:
    """Why one object of the session is there as a rule.

    Attributes:
        id: the object id in the session.
        path: the workspace-relative path.
        tier: 1 (always), 2 (query matched) or 3 (a file in its subtree was touched).
        kind: ``rules``, ``linked``, ``import``, ``skill``, ``skill-reference`` or
            ``skills-index``.
        reason: a sentence for people (``"touched inventory/models.py"``).
        load_reason: a keyword for programs (``session_start``, ``nested_traversal``,
            ``include``, ``link_match``, ``skill_match``, ``skill_request``).
        trigger: the query or tool call that caused the load.
        turn: the session's turn count at the load.
        loaded_at: when (UTC).
        seq: load order within the tracker.
        updated_at: when a changed file was last re-read, if ever.
    """

    id: str
    path: str
    tier: int
    kind: str
    reason: str
    load_reason: str
    trigger: str
    turn: int
    loaded_at: datetime
    seq: int = 0
    updated_at: datetime | None = None


_KIND_ORDER = {"rules": 0, "import": 1, "skills-index": 2}


class RulesTracker:
    """Loads rules files, linked docs and skills into a session as the agent works.

    Call :meth:`on_query` with each new task or user turn and :meth:`on_tool_call`
    with each tool call the agent makes; both return what they loaded. Loaded files
    are activated (or pinned with ``pin=True``); assemble with :class:`RulesTiered` to
    keep them whatever the base strategy does. The tracker is reachable from its
    session through :func:`tracker_for` and :func:`rules_status`.

    Args:
        session: the session to load into.
        index: the workspace's rules; discovered from the session's workspace when
            omitted.
        k: at most this many link targets (and skills) per query.
        min_score: least match strength for a query to load something (see
            :data:`DEFAULT_MIN_SCORE`).
        pin: pin loaded rules (no strategy may then drop them).
        skills: track skills: put every skill's ``SKILL.md`` in the metadata pool, a
            ``list_skills()`` object with their names and descriptions in context, and
            load a skill's body on a matching query. False leaves skills alone.
        clock: returns the current time (a seam for tests).

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "AGENTS.md").write_text("Be brief.\\n")
        >>> session = Workspace.open(root).session("t")
        >>> tracker = RulesTracker(session)
        >>> [r.path for r in tracker.records]
        ['AGENTS.md']
    """

    def __init__(
        self,
        session: Session,
        index: RulesIndex | None = None,
        *,
        k: int = 3,
        min_score: float = DEFAULT_MIN_SCORE,
        pin: bool = False,
        skills: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.session = session
        self.index = index if index is not None else RulesIndex.discover(session.workspace)
        self.k = k
        self.min_score = min_score
        self.pin = pin
        self.skills = skills
        self._clock = clock or (lambda: datetime.now(UTC))
        self._records: dict[str, LoadRecord] = {}  # path -> record
        self._by_id: dict[str, str] = {}  # object id -> path
        self._stats: dict[str, tuple[int, int]] = {}
        self._seq = 0
        session._rules_tracker = self  # type: ignore[attr-defined]
        for rel in self.index.tier1():
            self._load(rel, 1, "rules", "always", "session_start", "session start")
        if skills and len(self.index.skills):
            self._add_skills()

    # -- loading ----------------------------------------------------------------------
    def _add_skills(self) -> None:
        for skill in self.index.skills:
            try:
                self.session.add_path(self._abs(self.index.skill_path(skill.name)), activate=False)
            except (NotFoundError, PolicyError):  # removed, or made a link, since discovery
                continue
        catalog = "Skills you can ask for by name:\n" + "\n".join(
            f"- {s.name}: {' '.join(s.description.split())}" for s in self.index.skills
        )
        oid = self.session.record_toolcall("list_skills", {}, catalog)
        if self.pin:
            self.session.pin(oid)
        self._seq += 1
        record = LoadRecord(
            oid,
            "list_skills()",
            1,
            "skills-index",
            "always: skill names and descriptions",
            "session_start",
            "session start",
            self.session.turn,
            self._clock(),
            self._seq,
        )
        self._records[record.path] = record
        self._by_id[oid] = record.path

    def _load(
        self, rel: str, tier: int, kind: str, reason: str, load_reason: str, trigger: str
    ) -> list[LoadRecord]:
        if rel in self._records:
            return []
        try:
            # Absolute, so that skills under .ctxnb/skills resolve to the skills root
            # of the workspace's policy; a refused path (a link, .env) is never loaded.
            oid = self.session.add_path(self._abs(rel), activate=True)
        except (NotFoundError, PolicyError):
            return []
        if self.pin:
            self.session.pin(oid)
        self._seq += 1
        record = LoadRecord(
            oid,
            rel,
            tier,
            kind,
            reason,
            load_reason,
            _short(trigger),
            self.session.turn,
            self._clock(),
            self._seq,
        )
        self._records[rel] = record
        self._by_id[oid] = rel
        self._stats[rel] = _stat_key(self._abs(rel))
        out = [record]
        for imp in self.index.imports_of(rel):
            out += self._load(
                imp.target,
                tier,
                "import",
                f"imported by {rel}:{imp.line_number}",
                "include",
                f"{rel}:{imp.line_number}",
            )
        return out

    def load_skill(self, name: str, *, trigger: str = "requested") -> list[LoadRecord]:
        """Activate a skill's body because the agent asked for it.

        Raises:
            NotFoundError: no skill has that name (the message lists the known ones).
        """
        return self._load(
            self.index.skill_path(name),
            2,
            "skill",
            f"skill {name!r} requested",
            "skill_request",
            trigger,
        )

    def on_query(self, text: str | None = None) -> list[LoadRecord]:
        """Load the link targets and skills a query matches.

        Changed rules files are re-read first (:meth:`refresh`). Only links in files
        already loaded are eligible, so a skill's references match from the next query
        after its body loaded.

        Args:
            text: the task or user turn; the session's latest user turn when omitted.

        Returns:
            What was loaded, in load order.
        """
        if text is None:
            text = next(
                (t["content"] for t in reversed(self.session.turns) if t["role"] == "user"), ""
            )
        self.refresh()
        if not text.strip():
            return []
        loaded = self._records
        out: list[LoadRecord] = []
        # Targets already loaded count towards k: asking the same thing twice loads
        # nothing new, rather than the next-best links.
        hits = self.index.match(
            text, self.k, min_score=self.min_score, eligible=lambda link: link.source in loaded
        )
        for hit in hits:
            link = hit.link
            if link.target in loaded:
                continue
            out += self._load(
                link.target,
                2,
                "linked" if link.skill is None else "skill-reference",
                f"query matched {link.text!r} ({link.source}:{link.line_number})",
                "link_match",
                text,
            )
        if not self.skills:
            return out
        for sh in self.index.match_skills(text, self.k, min_score=self.min_score):
            if self.index.skill_path(sh.skill.name) in loaded:
                continue
            out += self._load(
                self.index.skill_path(sh.skill.name),
                2,
                "skill",
                f"query matched the description of skill {sh.skill.name!r}",
                "skill_match",
                text,
            )
        return out

    def on_tool_call(self, tool: str, args: Mapping[str, Any]) -> list[LoadRecord]:
        """Load the nested rules of every file a tool call reads or writes.

        Args:
            tool: the tool name (only used in the recorded trigger).
            args: the call's arguments: ``path``-like keys, ``paths`` lists, a shell
                ``cmd``/``command`` (with ``cwd``), or a ``patch``.

        Returns:
            What was loaded (usually nothing: the check is a few dict lookups).
        """
        paths = self._paths_of(args)
        out: list[LoadRecord] = []
        for rel in paths:
            if rel in self._records:
                self._reread(rel)
                continue
            name = posixpath.basename(rel)
            if name in self.index.names and (rel in self.index.files) != (
                (self.index.root / rel).is_file()
            ):
                self.index.update(rel)  # a rules file was created or removed
            rules = self.index.for_path(rel)
            if any(r not in self._records for r in rules):
                out += self._touch_load(rules, rel, tool, args)
            skill = self.index.skill_for_path(rel)
            if skill is not None:
                out += self.load_skill(skill, trigger=_call_text(tool, args))
        return out

    def _touch_load(
        self, rules: list[str], rel: str, tool: str, args: Mapping[str, Any]
    ) -> list[LoadRecord]:
        out: list[LoadRecord] = []
        trigger = _call_text(tool, args)
        for r in rules:
            tier = self.index.files[r].tier
            load_reason = "session_start" if tier == 1 else "nested_traversal"
            out += self._load(r, tier, "rules", f"touched {rel}", load_reason, trigger)
        return out

    def _paths_of(self, args: Mapping[str, Any]) -> list[str]:
        rel_of = self.index.relative
        cwd = ""
        for key in _CWD_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value:
                cwd = rel_of(value) or ""
                break
        out: list[str] = []
        for key, value in args.items():
            kind = _ARG_KINDS.get(key)
            if kind is None or not value:
                continue
            if kind == "path" and isinstance(value, str):
                rel = rel_of(value, cwd)
                if rel:
                    out.append(rel)
            elif kind == "paths" and isinstance(value, list | tuple):
                out += [r for v in value if isinstance(v, str) and (r := rel_of(v, cwd))]
            elif kind == "cmd" and isinstance(value, str | list | tuple):
                if self._command_may_load(value, cwd):
                    out += self.index.paths_in_command(value, cwd=cwd)
            elif kind == "patch" and isinstance(value, str):
                out += [r for p in _patch_paths(value) if (r := rel_of(p, cwd))]
        return out

    def _needs(self, rel: str) -> bool:
        """Whether touching ``rel`` could load or re-read anything."""
        if rel in self._records or posixpath.basename(rel) in self.index.names:
            return True
        if self.index.skill_for_path(rel) is not None:
            return True
        return any(r not in self._records for r in self.index.for_path(rel))

    def _command_may_load(self, cmd: str | Sequence[str], cwd: str) -> bool:
        """A cheap over-approximation of :meth:`RulesIndex.paths_in_command`.

        Every whitespace-free word of the command is taken as a path; only when one of
        them could load something is the command parsed for real. Commands that
        change directory or quote a path with spaces in it are always parsed.
        """
        if isinstance(cmd, str):
            if _CHANGES_DIR.search(cmd) or _quoted_path_with_space(cmd):
                return True
            words: Iterable[str] = _QUICK_SPLIT.split(cmd)
        else:
            words = [str(w) for w in cmd]
        rel_of = self.index.relative
        for word in words:
            word = word.strip("'\"")
            rel = rel_of(word, cwd) if word else None
            if rel and self._needs(rel):
                return True
        return False

    def refresh(self, *, force: bool = False) -> list[str]:
        """Re-read the loaded files that changed on disk (each gets a new version).

        A file counts as changed when its modification time or size did; ``force``
        re-reads every loaded file (the store keeps one version per distinct content).

        Returns:
            The paths re-read.
        """
        changed = []
        for rel in list(self._stats):
            if force or _stat_key(self._abs(rel)) != self._stats[rel]:
                self._reread(rel, force=force)
                changed.append(rel)
        return changed

    def _reread(self, rel: str, *, force: bool = False) -> None:
        record = self._records[rel]
        key = _stat_key(self._abs(rel))
        if key == self._stats.get(rel) and not force:
            return
        active = record.id in self.session.active_set
        try:
            self.session.add_path(self._abs(rel), activate=active)
        except (NotFoundError, PolicyError):  # refused since it was loaded: keep the last
            pass
        self._stats[rel] = key
        record.updated_at = self._clock()
        if posixpath.basename(rel) in self.index.names:
            self.index.update(rel)

    def _abs(self, rel: str) -> str:
        return f"{self.index.root}/{rel}"

    # -- views ------------------------------------------------------------------------
    @property
    def records(self) -> list[LoadRecord]:
        """Every load, in load order."""
        return sorted(self._records.values(), key=lambda r: r.seq)

    def rule_ids(self) -> list[str]:
        """Ids of everything loaded, in context order.

        Rules files root to leaf, their imports, the skills index, then linked docs
        and skills in load order.
        """

        def key(r: LoadRecord) -> tuple[int, int, int]:
            rf = self.index.files.get(r.path)
            return (_KIND_ORDER.get(r.kind, 3), rf.depth if rf is not None else 0, r.seq)

        return [r.id for r in sorted(self._records.values(), key=key)]

    def status(self) -> pd.DataFrame:
        """The loaded rules and why, as a pandas DataFrame (see :func:`rules_status`)."""
        import pandas as pd

        active = set(self.session.active_set)
        pinned = set(self.session.pinned_set)
        rows = [
            {
                "path": r.path,
                "tier": r.tier,
                "reason": r.reason,
                "trigger": r.trigger,
                "turn": r.turn,
                "loaded_at": r.loaded_at,
                "kind": r.kind,
                "load_reason": r.load_reason,
                "id": r.id,
                "active": r.id in active,
                "pinned": r.id in pinned,
            }
            for r in sorted(self._records.values(), key=lambda r: (r.tier, r.seq))
            if r.kind != "skills-index"
        ]
        return pd.DataFrame(rows, columns=list(STATUS_COLUMNS))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} loaded={len(self._records)} {self.index!r}>"


class AllRules(RulesTracker):
    """The baseline: every rules file and every linked doc, loaded at once.

    Nothing waits for a query or a touch (skills still load on a match or a request),
    so a study can compare the context this gives with :class:`RulesTracker`'s.

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "pkg").mkdir()
        >>> _ = (root / "AGENTS.md").write_text("root\\n")
        >>> _ = (root / "pkg" / "AGENTS.md").write_text("nested\\n")
        >>> session = Workspace.open(root).session("all")
        >>> [r.path for r in AllRules(session).records]
        ['AGENTS.md', 'pkg/AGENTS.md']
    """

    def __init__(self, session: Session, index: RulesIndex | None = None, **kw: Any) -> None:
        super().__init__(session, index, **kw)
        for rel, rf in self.index.files.items():
            self._load(rel, rf.tier, "rules", "all rules loaded", "session_start", "AllRules")
        for link in self.index.links():
            if link.skill is None and link.kind == "link":
                reason = f"all rules loaded ({link.source}:{link.line_number})"
                self._load(link.target, 2, "linked", reason, "session_start", "AllRules")


# --------------------------------------------------------------------------- strategy


class RulesTiered:
    """A strategy that keeps the tracked rules and lets a base strategy decide the rest.

    The rules come first in the context, in :meth:`RulesTracker.rule_ids` order; the
    base strategy sees only the other items and the budget left after the rules.
    Because the assembler evicts the least recently used items when content overflows
    the budget, and rules are usually the oldest, this strategy fits the rest into the
    budget itself (counting each item at its full size, so masked or truncated items
    may be evicted a little early). Rules that alone exceed the budget stay; the context reports
    ``over_budget``.

    Args:
        base: the strategy for everything that is not a rule.
        rules: a :class:`RulesTracker` (its loads are followed as they happen) or a
            fixed collection of object ids.

    Example:
        >>> from ctxnb.strategies import Item, MetadataOnly, StrategyInput
        >>> inp = StrategyInput((Item("r", "file", 10, 1), Item("f", "file", 10, 2)), None, 1)
        >>> RulesTiered(MetadataOnly(), {"r"}).select(inp).active
        ['r']
    """

    name = "rules-tiered"

    def __init__(self, base: ContextStrategy, rules: RulesTracker | Iterable[str]) -> None:
        self.base = base
        self.base_name = base.name
        self._rules = rules if isinstance(rules, RulesTracker) else list(rules)

    def _rule_ids(self) -> list[str]:
        if isinstance(self._rules, RulesTracker):
            return self._rules.rule_ids()
        return self._rules

    def select(self, inp: StrategyInput) -> Selection:
        order = {oid: n for n, oid in enumerate(self._rule_ids())}
        rules = sorted((i for i in inp.items if i.id in order), key=lambda i: order[i.id])
        rest = tuple(i for i in inp.items if i.id not in order)
        budget = inp.budget
        if budget is not None:
            budget = max(0, budget - sum(i.tokens for i in rules))
        sub = self.base.select(StrategyInput(items=rest, budget=budget, turn=inp.turn))
        known = {i.id: i for i in rest}
        chosen = [a for a in sub.active if a in known]
        evicted = [e for e in sub.evicted if e in known]
        evicted += [i.id for i in rest if i.id not in chosen and i.id not in evicted]
        if budget is not None:
            total = sum(known[a].tokens for a in chosen)
            for item in sorted((known[a] for a in chosen), key=lambda i: i.last_used):
                if total <= budget:
                    break
                if not item.pinned:
                    chosen.remove(item.id)
                    evicted.append(item.id)
                    total -= item.tokens
        kept = set(chosen)
        return Selection(
            active=[i.id for i in rules] + chosen,
            masked=[m for m in sub.masked if m in kept],
            truncate={k: v for k, v in sub.truncate.items() if k in kept},
            evicted=evicted,
            replace={k: v for k, v in sub.replace.items() if k in kept},
        )

    def __repr__(self) -> str:
        return f"RulesTiered({self.base!r})"


# --------------------------------------------------------------------------- status


def tracker_for(session: Session) -> RulesTracker | None:
    """The rules tracker attached to a session, or None."""
    return getattr(session, "_rules_tracker", None)


def rules_status(session: Session) -> pd.DataFrame:
    """The rules a session has loaded and why, one row per file.

    Columns: ``path``, ``tier``, ``reason``, ``trigger``, ``turn``, ``loaded_at``,
    ``kind``, ``load_reason``, ``id``, ``active``, ``pinned``. Rows are ordered by
    tier, then load order. A session without a tracker gives an empty frame.

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb import Workspace
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "AGENTS.md").write_text("Be brief.\\n")
        >>> session = Workspace.open(root).session("s")
        >>> len(rules_status(session))
        0
        >>> _ = RulesTracker(session)
        >>> rules_status(session)[["path", "reason"]].values.tolist()
        [['AGENTS.md', 'always']]
    """
    tracker = tracker_for(session)
    if tracker is None:
        import pandas as pd

        return pd.DataFrame(columns=list(STATUS_COLUMNS))
    return tracker.status()


# --------------------------------------------------------------------------- helpers


def _stat_key(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def _short(text: str, limit: int = _TRIGGER_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_text(tool: str, args: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in args.items() if isinstance(v, str | int | float))
    return _short(f"{tool}({shown})")
