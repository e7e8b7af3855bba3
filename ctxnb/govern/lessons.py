"""Lessons in ``.orchestration/AGENT.md``: written when work goes wrong, read back when it starts.

Governance appends a lesson when a human refuses an act or a quality command fails
after an edit. One line each, readable by people and parsed back here::

    - 2026-11-23 17:05 [INT-001] (inventory/models.py) `pytest -q` failed (1) after write_file

``[…]`` is the intent the work was under, ``(…)`` the files it touched (comma
separated); both are optional, and lines a person writes by hand need neither. When an
agent selects an intent, the lessons that concern it — recorded under that intent, or
naming a file in its scope — come back inside its ``<intent_context>``.

Example:
    >>> from ctxnb.govern.intents import Intent
    >>> text = format_lesson("2026-11-23 17:05", "`pytest` failed (1)",
    ...                      intent_id="INT-1", paths=["src/app.py"])
    >>> text
    '- 2026-11-23 17:05 [INT-1] (src/app.py) `pytest` failed (1)'
    >>> lessons = parse_lessons(text + "\\n- 2026-11-20 09:00 docs/a.md is generated\\n")
    >>> it = Intent(id="INT-2", name="app", owned_scope=["src/**"])
    >>> [lesson.text for lesson in lessons_for(it, lessons)]
    ['`pytest` failed (1)']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import IntentLike

__all__ = ["Lesson", "format_lesson", "lessons_for", "parse_lessons", "read_lessons"]

_LINE = re.compile(
    r"^- (?P<when>\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?)\s+"
    r"(?:\[(?P<intent>[^\]\n]+)\]\s+)?"
    r"(?:\((?P<paths>[^)\n]*)\)\s+)?"
    r"(?P<text>.+)$"
)
# A word that looks like a workspace path: has a slash or an extension, no spaces.
_PATHLIKE = re.compile(r"[\w.\-/]+(?:/[\w.\-]+|\.[A-Za-z0-9]{1,8})")


@dataclass(frozen=True)
class Lesson:
    """One lesson line: when, under which intent, about which files, what."""

    when: str
    intent_id: str | None
    paths: tuple[str, ...]
    text: str

    def line(self) -> str:
        return format_lesson(self.when, self.text, intent_id=self.intent_id, paths=self.paths)


def _one_line(text: str) -> str:
    # A lesson is one line: a newline in a refusal note must not start a forged entry.
    return " ".join(str(text).split())


def format_lesson(
    when: str, text: str, *, intent_id: str | None = None, paths: Iterable[str] = ()
) -> str:
    """One ``AGENT.md`` lesson line (without the newline)."""
    parts = ["-", when]
    if intent_id:
        parts.append(f"[{_one_line(intent_id).replace(']', '')}]")
    clean = [_one_line(p).replace(")", "").replace(",", "") for p in paths if p]
    if clean:
        parts.append(f"({', '.join(clean)})")
    parts.append(_one_line(text))
    return " ".join(parts)


def parse_lessons(markdown: str) -> list[Lesson]:
    """Every dated ``- YYYY-MM-DD …`` line of an ``AGENT.md``, in file order."""
    out = []
    for raw in markdown.splitlines():
        m = _LINE.match(raw.strip())
        if m is None:
            continue
        paths = tuple(p.strip() for p in (m["paths"] or "").split(",") if p.strip())
        out.append(Lesson(m["when"], m["intent"], paths, m["text"].strip()))
    return out


def read_lessons(path: str | Path) -> list[Lesson]:
    """The lessons of an ``AGENT.md`` file (none when it does not exist)."""
    try:
        return parse_lessons(Path(path).read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return []


def lessons_for(intent: IntentLike, lessons: Sequence[Lesson], *, limit: int = 10) -> list[Lesson]:
    """The most recent ``limit`` lessons that concern ``intent``.

    A lesson concerns an intent when it was recorded under it, when one of its files is
    in the intent's scope, or — for lines written by hand, without tags — when a word of
    it that looks like a path is in scope.
    """

    def concerns(lesson: Lesson) -> bool:
        if lesson.intent_id == intent.id:
            return True
        if any(intent.in_scope(p) for p in lesson.paths):
            return True
        if lesson.intent_id is None and not lesson.paths:
            return any(intent.in_scope(w.strip("./")) for w in _PATHLIKE.findall(lesson.text))
        return False

    mine = [lesson for lesson in lessons if concerns(lesson)]
    return mine[-limit:] if limit > 0 else []
