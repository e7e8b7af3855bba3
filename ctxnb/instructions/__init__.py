"""Instruction files: which ``AGENTS.md`` files, linked docs and skills are in context, and why.

These are the agent's instructions, called rules files by the ``AGENTS.md`` convention
(the class names say ``Rules``); the path rules of the access layer are
:mod:`ctxnb.access.pathrules` and the secret rules of redaction are private to it.

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
    >>> session = Workspace.open(root).session("demo", rules=False)
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

from ..strategies.builtin import RulesTiered
from .index import (
    DEFAULT_MIN_SCORE,
    RULES_FILE_NAMES,
    LinkHit,
    RuleLink,
    RulesFile,
    RulesIndex,
    SkillHit,
)
from .tracker import (
    STATUS_COLUMNS,
    AllRules,
    LoadRecord,
    RulesTracker,
    follow_rules,
    rules_status,
    tracker_for,
)

__all__ = [
    "DEFAULT_MIN_SCORE",
    "RULES_FILE_NAMES",
    "STATUS_COLUMNS",
    "AllRules",
    "LinkHit",
    "LoadRecord",
    "RuleLink",
    "RulesFile",
    "RulesIndex",
    "RulesTiered",
    "RulesTracker",
    "SkillHit",
    "follow_rules",
    "rules_status",
    "tracker_for",
]
