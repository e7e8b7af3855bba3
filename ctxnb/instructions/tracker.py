"""The rules tracker: which rules files, linked docs and skills a session loads, and why.

See :mod:`ctxnb.instructions` for the three tiers. :class:`RulesTracker` follows a session's
queries and tool calls and loads what they call for (``session.add_path``, through the
access layer); :func:`rules_status` tells what was loaded and why.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, PolicyError
from ..redaction.redactor import redact_text
from ._shellwords import (
    _ARG_KINDS,
    _CHANGES_DIR,
    _CWD_KEYS,
    _QUICK_SPLIT,
    _patch_paths,
    _quoted_path_with_space,
)
from .index import DEFAULT_MIN_SCORE, RulesIndex

if TYPE_CHECKING:
    import pandas as pd

    from ..session.core import Session

__all__ = [
    "STATUS_COLUMNS",
    "AllRules",
    "LoadRecord",
    "RulesTracker",
    "follow_rules",
    "rules_status",
    "tracker_for",
]

STATUS_COLUMNS: tuple[str, ...] = (
    "path",
    "tier",
    "reason",
    "trigger",
    "turn",
    "loaded_at",
    "kind",
    "load_reason",
    "matched_by",
    "id",
    "active",
    "pinned",
)

_TRIGGER_MAX = 120


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
        matched_by: for a query's match, what matched it: ``"BM25"`` when words alone
            answered (no embedder configured: set ``CTXNB_EMBEDDER=minilm`` to match by
            meaning too), ``"BM25+minilm"`` when meaning was fused in; ``None`` otherwise.
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
    matched_by: str | None = None


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
        >>> session = Workspace.open(root).session("t", rules=False)
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
        min_similarity: float | None = None,
        pin: bool = False,
        skills: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.session = session
        self.index = index if index is not None else RulesIndex.discover(session.workspace)
        self.k = k
        self.min_score = min_score
        self.min_similarity = min_similarity  # None: the index's own threshold
        self.pin = pin
        self.skills = skills
        self._clock = clock or (lambda: datetime.now(UTC))
        self._records: dict[str, LoadRecord] = {}  # path -> record
        self._by_id: dict[str, str] = {}  # object id -> path
        self._stats: dict[str, tuple[int, int]] = {}
        self._seq = 0
        session.rules_tracker = self
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
        self,
        rel: str,
        tier: int,
        kind: str,
        reason: str,
        load_reason: str,
        trigger: str,
        *,
        matched_by: str | None = None,
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
            matched_by=matched_by,
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
            text,
            self.k,
            min_score=self.min_score,
            min_similarity=self.min_similarity,
            eligible=lambda link: link.source in loaded,
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
                matched_by=self.index.matched_by,
            )
        if not self.skills:
            return out
        for sh in self.index.match_skills(
            text, self.k, min_score=self.min_score, min_similarity=self.min_similarity
        ):
            if self.index.skill_path(sh.skill.name) in loaded:
                continue
            out += self._load(
                self.index.skill_path(sh.skill.name),
                2,
                "skill",
                f"query matched the description of skill {sh.skill.name!r}",
                "skill_match",
                text,
                matched_by=self.index.matched_by,
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
        # A frame leaves toward a notebook or a log: names (a link's target, a touched
        # path) and the triggering call's arguments are redacted as the context shows them.
        rows = [
            {
                "path": redact_text(r.path),
                "tier": r.tier,
                "reason": redact_text(r.reason),
                "trigger": redact_text(r.trigger),
                "turn": r.turn,
                "loaded_at": r.loaded_at,
                "kind": r.kind,
                "load_reason": r.load_reason,
                "matched_by": r.matched_by,
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
        >>> session = Workspace.open(root).session("all", rules=False)
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


# --------------------------------------------------------------------------- status


def tracker_for(session: Session) -> RulesTracker | None:
    """The rules tracker attached to a session, or None."""
    tracker = session.rules_tracker
    # Only a RulesTracker attaches itself to a session (see __init__).
    return tracker if isinstance(tracker, RulesTracker) else None


def follow_rules(session: Session) -> RulesTracker:
    """The session's rules tracker, attached now if it has none: the default of every
    session a :class:`~ctxnb.workspace.Workspace` makes.

    The root rules files (tier 1) are loaded and pinned, so every context holds them
    whatever the strategy; user turns and tool queries load tier 2, touched subtrees
    tier 3 (see :class:`RulesTracker`).

    Example:
        >>> import tempfile
        >>> from ctxnb import Workspace
        >>> ws = Workspace.open(tempfile.mkdtemp())
        >>> _ = (ws.root / "AGENTS.md").write_text("Answer in French.\\n")
        >>> bare = ws.session("bare", rules=False)
        >>> tracker_for(bare) is None, follow_rules(bare) is tracker_for(bare)
        (True, True)
        >>> bare.pinned_set == [bare.find("AGENTS.md")]
        True
    """
    tracker = tracker_for(session)
    if tracker is None:
        tracker = RulesTracker(session)
        for record in tracker.records:
            if record.tier == 1:
                session.pin(record.id)
    return tracker


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
        >>> session = Workspace.open(root).session("s", rules=False)
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
