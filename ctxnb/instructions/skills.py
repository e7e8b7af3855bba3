"""Agent skills: folders with a ``SKILL.md`` that an agent loads when a task needs them.

ctxnb reads skills in the AgentSkills layout from ``<root>/.ctxnb/skills/<name>/`` and,
when present, ``<root>/.claude/skills/<name>/``::

    .ctxnb/skills/pdf-forms/
    ├── SKILL.md        YAML frontmatter (name, description, ...) and a markdown body
    ├── scripts/        optional: code the skill runs
    ├── references/     optional: further reading the body links to
    └── assets/         optional: templates, images, data

Frontmatter rules (those of the AgentSkills format): ``name`` is required, 1–64
characters of lowercase letters, digits and single hyphens, not starting or ending with
a hyphen, and equal to the folder's name; ``description`` is required, a non-empty
string of at most 1024 characters; ``license`` (a string), ``compatibility`` (a string
of at most 500 characters), ``allowed-tools`` (a string or a list) and ``metadata`` (a
mapping) are optional; any other key is kept as is.

A skill that breaks a rule does not stop the others: :func:`discover_skills` collects a
:class:`SkillError` naming the file and the problem, and
:meth:`SkillSet.raise_for_errors` turns the collection into one exception. When the same
name appears in both folders, the ``.ctxnb`` one wins and the other is listed in
:attr:`SkillSet.shadowed`.

Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> d = root / ".ctxnb" / "skills" / "release-notes"
    >>> (d / "references").mkdir(parents=True)
    >>> _ = (d / "references" / "style.md").write_text("# Style\\n")
    >>> _ = (d / "SKILL.md").write_text(
    ...     "---\\nname: release-notes\\n"
    ...     "description: Write release notes from a list of changes.\\n---\\n"
    ...     "Follow [the style guide](references/style.md).\\n"
    ... )
    >>> skills = discover_skills(root)
    >>> skills.metadata_lines()
    ['skill release-notes: Write release notes from a list of changes.']
    >>> s = skills["release-notes"]
    >>> s.files["references"], [(r.relative_path, r.line_number) for r in s.references]
    (['references/style.md'], [('references/style.md', 5)])
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..access.fdio import FileEntry, PathPolicy
from ..access.pathrules import DEFAULT_DENY, skills_readable
from ..errors import ConfigError, NotFoundError, PolicyError
from ..retrieval.markdown_links import MarkdownLink, extract_markdown_links

__all__ = [
    "SKILL_DIRS",
    "SKILL_FILE",
    "SUBFOLDERS",
    "Skill",
    "SkillError",
    "SkillSet",
    "discover_skills",
    "load_skill",
]

SKILL_FILE = "SKILL.md"
# Searched in this order; the first folder that defines a name wins.
SKILL_DIRS: tuple[str, ...] = (".ctxnb/skills", ".claude/skills")
SUBFOLDERS: tuple[str, ...] = ("scripts", "references", "assets")

_NAME_MAX = 64
_DESCRIPTION_MAX = 1024
_COMPATIBILITY_MAX = 500
_SKIP_NAMES = frozenset({"__pycache__"})


class SkillError(ConfigError):
    """A skill cannot be loaded: the message names its file and the problem.

    Attributes:
        path: the ``SKILL.md`` (or skill folder) at fault.
        problem: what is wrong and how to fix it, without the path.
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class Skill:
    """One loaded skill.

    Attributes:
        name: the frontmatter ``name`` (equal to the folder name).
        description: the frontmatter ``description``.
        path: the ``SKILL.md`` file.
        body: the markdown after the frontmatter.
        frontmatter: every frontmatter key, as parsed.
        references: markdown links and ``@`` imports in the body, with line numbers
            counted in ``SKILL.md`` (frontmatter included).
        files: the files under ``scripts/``, ``references/`` and ``assets/``, as sorted
            paths relative to the skill folder (``"scripts/run.py"``); every key is
            present, with an empty list when the folder is missing. Hidden files,
            ``__pycache__``, symbolic links and files the path policy denies (``*.pem``,
            ``id_*`` …) are left out.
    """

    name: str
    description: str
    path: Path
    body: str
    frontmatter: dict[str, Any]
    references: list[MarkdownLink] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        """The skill's folder."""
        return self.path.parent

    @property
    def license(self) -> str | None:
        """The frontmatter ``license``, if any."""
        return self.frontmatter.get("license")

    @property
    def metadata(self) -> dict[str, Any]:
        """The frontmatter ``metadata`` mapping (empty when absent)."""
        return dict(self.frontmatter.get("metadata") or {})

    @property
    def allowed_tools(self) -> list[str]:
        """The frontmatter ``allowed-tools`` as a list.

        A string is split on commas when it has any, else on whitespace outside
        parentheses, so ``Bash(git status:*) Read`` gives two tools.
        """
        value = self.frontmatter.get("allowed-tools")
        if value is None:
            return []
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        return _split_tools(str(value))

    def metadata_line(self) -> str:
        """The one line the metadata pool shows for this skill.

        Example:
            >>> Skill("pdf", "Fill PDF\\n  forms.", Path("SKILL.md"), "", {}).metadata_line()
            'skill pdf: Fill PDF forms.'
        """
        return f"skill {self.name}: {' '.join(self.description.split())}"

    def __repr__(self) -> str:  # the body can be long; keep reprs cheap
        return f"Skill(name={self.name!r}, path={str(self.path)!r})"


@dataclass
class SkillSet:
    """The skills found under a root, and the problems met on the way.

    Attributes:
        skills: loaded skills, sorted by name.
        errors: one :class:`SkillError` per skill that could not be loaded.
        shadowed: ``SKILL.md`` files hidden by a skill of the same name found earlier.
    """

    skills: list[Skill] = field(default_factory=list)
    errors: list[SkillError] = field(default_factory=list)
    shadowed: list[Path] = field(default_factory=list)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.skills)

    def __getitem__(self, name: str) -> Skill:
        for s in self.skills:
            if s.name == name:
                return s
        known = ", ".join(self.names()) or "none"
        raise NotFoundError(f"no skill named {name!r}; known skills: {known}")

    def names(self) -> list[str]:
        """The names of the loaded skills, sorted."""
        return [s.name for s in self.skills]

    def metadata_lines(self) -> list[str]:
        """One :meth:`Skill.metadata_line` per skill, sorted by name."""
        return [s.metadata_line() for s in self.skills]

    def raise_for_errors(self) -> None:
        """Raise a :class:`~ctxnb.errors.ConfigError` listing every error, if any.

        Raises:
            ConfigError: at least one skill could not be loaded.
        """
        if not self.errors:
            return
        n = len(self.errors)
        listing = "\n".join(f"  - {e}" for e in self.errors)
        raise ConfigError(f"{n} skill{'s' if n != 1 else ''} could not be loaded:\n{listing}")

    def __repr__(self) -> str:
        return (
            f"SkillSet(skills={self.names()!r}, errors={len(self.errors)}, "
            f"shadowed={len(self.shadowed)})"
        )


def discover_skills(
    root: str | os.PathLike[str],
    *,
    dirs: Sequence[str] = SKILL_DIRS,
    deny: Sequence[str] = DEFAULT_DENY,
) -> SkillSet:
    """Load every skill under ``root``; a broken skill is reported, not raised.

    The folders are listed and the files read through the access layer's descriptor
    walk (:meth:`~ctxnb.access.fdio.PathPolicy.walk`) from ``root``, under its path
    rules: a skills folder, skill folder or ``SKILL.md`` that is a symbolic link (or
    becomes one while ctxnb reads) or that a deny glob covers yields no skill, and a
    denied file inside a skill is not listed. ``.ctxnb/skills`` is read although
    ``.ctxnb/`` is denied (:func:`~ctxnb.access.pathrules.skills_readable`).

    Args:
        root: the workspace root.
        dirs: folders under ``root`` that hold one folder per skill, in order of
            precedence; missing ones are skipped.
        deny: the workspace's deny globs (``[policy] deny``).

    Returns:
        The skills, sorted by name, with the errors met and the shadowed files.

    Example:
        >>> import tempfile
        >>> found = discover_skills(tempfile.mkdtemp())
        >>> len(found), found.errors
        (0, [])
    """
    base = Path(root)
    result = SkillSet()
    wanted: list[tuple[str, ...]] = []
    for rel in dirs:
        parts = tuple(c for c in str(rel).split("/") if c not in ("", "."))
        if str(rel).startswith("/") or ".." in parts or not parts:
            result.errors.append(
                SkillError(base / rel, "a skills folder must be a folder inside the workspace")
            )
        elif parts not in wanted:
            wanted.append(parts)
    if not wanted or not base.is_dir() or not _any_there(base, wanted):
        return result
    walk = _Walk(base, wanted, deny)
    result.errors.extend(walk.errors)
    seen: set[str] = set()
    for where in wanted:
        for name in sorted(walk.folders[where]):
            try:
                skill = walk.folders[where][name].load()
            except SkillError as exc:
                result.errors.append(exc)
                continue
            if skill.name in seen:
                result.shadowed.append(skill.path)
                continue
            seen.add(skill.name)
            result.skills.append(skill)
    result.skills.sort(key=lambda s: s.name)
    return result


def _any_there(base: Path, wanted: list[tuple[str, ...]]) -> bool:
    """Whether a skills folder may be there. If, for each, some component is missing
    (``lstat``, each one below a plain directory, so no link is followed), the walk
    that looks for them would find nothing and report nothing; anything else there (a
    folder, a link, a file) is left to the walk to judge and report."""
    for parts in wanted:
        at = base
        for name in parts:
            at = at / name
            try:
                st = os.lstat(at)
            except FileNotFoundError:
                break
            except OSError:
                return True
            if not stat.S_ISDIR(st.st_mode):
                return True
        else:
            return True
    return False


def load_skill(path: str | os.PathLike[str], *, deny: Sequence[str] = DEFAULT_DENY) -> Skill:
    """Load one skill from its folder (or from its ``SKILL.md``).

    The folder is read like :func:`discover_skills` reads it, from its parent: a
    ``SKILL.md`` or folder that is a symbolic link is refused.

    Raises:
        SkillError: the file is missing, refused, unreadable or breaks a frontmatter rule.

    Example:
        >>> import pathlib, tempfile
        >>> d = pathlib.Path(tempfile.mkdtemp()) / "lint"
        >>> d.mkdir()
        >>> _ = (d / "SKILL.md").write_text("---\\nname: lint\\ndescription: Lint.\\n---\\n")
        >>> load_skill(d).description
        'Lint.'
    """
    p = Path(os.path.abspath(path))
    folder = p.parent if p.name == SKILL_FILE and not p.is_dir() else p
    if not folder.is_dir() and not folder.is_symlink():
        raise SkillError(folder, "no such skill folder")
    walk = _Walk(folder.parent, [()], deny, only=folder.name)
    if walk.errors:
        raise walk.errors[0]
    found = walk.folders[()].get(folder.name)
    if found is None:
        raise SkillError(folder, "no such skill folder")
    return found.load()


class _Folder:
    """What the walk found in one skill folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text: bytes | None = None
        self.problem: str | None = None  # why SKILL.md could not be read
        self.names: list[str] = []  # files directly in the folder
        self.files: dict[str, list[str]] = {sub: [] for sub in SUBFOLDERS}

    def load(self) -> Skill:
        skill_md = self.path / SKILL_FILE
        if self.problem is not None:
            raise SkillError(skill_md, self.problem)
        if self.text is None:
            others = [n for n in self.names if n.lower() == "skill.md"]
            hint = f" (found {others[0]!r}; rename it to {SKILL_FILE!r})" if others else ""
            raise SkillError(self.path, f"no {SKILL_FILE} in this skill folder{hint}")
        try:
            text = self.text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SkillError(
                skill_md, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        frontmatter, body, body_line = _split_frontmatter(skill_md, text)
        name, description = _validate(skill_md, self.path.name, frontmatter)
        offset = body_line - 1
        references = [
            MarkdownLink(
                r.display_text, r.relative_path, r.line_number + offset, r.kind, r.title, r.anchor
            )
            for r in extract_markdown_links(body)
        ]
        return Skill(
            name=name,
            description=description,
            path=skill_md,
            body=body,
            frontmatter=frontmatter,
            references=references,
            files={sub: sorted(found) for sub, found in self.files.items()},
        )


class _Walk:
    """One descriptor walk of ``base`` that collects the skill folders under ``wanted``.

    Only the directories on the way to a skills folder, the skill folders and their
    :data:`SUBFOLDERS` are entered; everything the policy refuses is left out.
    """

    def __init__(
        self,
        base: Path,
        wanted: list[tuple[str, ...]],
        deny: Sequence[str],
        *,
        only: str | None = None,
    ) -> None:
        self.base = base
        self.wanted = wanted
        self.only = only
        self.folders: dict[tuple[str, ...], dict[str, _Folder]] = {w: {} for w in wanted}
        self.errors: list[SkillError] = []
        policy = PathPolicy([base], deny=skills_readable(deny))
        for entry in policy.walk(skip=self._skip, on_dir=self._on_dir, on_refused=self._refused):
            self._on_file(entry)

    def _place(self, parts: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The skills folder ``parts`` lies below, and the parts below it."""
        for where in self.wanted:
            if len(parts) > len(where) and parts[: len(where)] == where:
                below = parts[len(where) :]
                if self.only is not None and below[0] != self.only:
                    return None
                return where, below
        return None

    def _skip(self, rel: str, is_dir: bool) -> bool:
        parts = tuple(rel.split("/"))
        placed = self._place(parts)
        if placed is None:  # only the way down to a skills folder is walked
            return not (is_dir and any(w[: len(parts)] == parts for w in self.wanted))
        below = placed[1]
        if _skipped(below[-1]):
            return True
        if len(below) == 1:
            return not is_dir  # plain files next to the skill folders
        if len(below) == 2 and is_dir:
            return below[1] not in SUBFOLDERS
        return False

    def _on_dir(self, rel: str, read: object) -> None:
        placed = self._place(tuple(rel.split("/"))) if rel else None
        if placed is not None and len(placed[1]) == 1:
            where, below = placed
            self.folders[where][below[0]] = _Folder(self.base.joinpath(*where, below[0]))

    def _on_file(self, entry: FileEntry) -> None:
        placed = self._place(entry.safe.parts)
        if placed is None or len(placed[1]) < 2:
            return
        where, below = placed
        folder = self.folders[where].get(below[0])
        if folder is None:
            return
        if len(below) == 2:
            folder.names.append(below[1])
            if below[1] == SKILL_FILE:
                try:
                    folder.text = entry.read()
                except (PolicyError, NotFoundError) as exc:
                    folder.problem = f"cannot be read: {exc}"
                except OSError as exc:
                    folder.problem = f"cannot be read: {exc.strerror or exc}"
        else:
            folder.files[below[1]].append("/".join(below[1:]))

    def _refused(self, rel: str, rule: str) -> None:
        parts = tuple(rel.split("/"))
        why = _REFUSALS.get(rule.split(":", 1)[0], "is refused by the path policy")
        problem = f"{why} (rule: {rule})"
        if parts in self.wanted:
            self.errors.append(SkillError(self.base / rel, f"the skills folder {problem}"))
            return
        placed = self._place(parts)
        if placed is None or _skipped(placed[1][-1]):
            return
        where, below = placed
        if len(below) == 1:
            self.errors.append(SkillError(self.base / rel, f"the skill folder {problem}"))
        elif len(below) == 2 and below[1] == SKILL_FILE and below[0] in self.folders[where]:
            self.folders[where][below[0]].problem = problem


_REFUSALS = {
    "symlink": "is a symbolic link, which ctxnb never follows below the workspace root; "
    "put the files themselves there",
    "deny": "is denied by the path policy",
    "special-file": "is not a regular file or folder",
}


# --- internals ---------------------------------------------------------------------------


def _split_frontmatter(path: Path, text: str) -> tuple[dict[str, Any], str, int]:
    """Return (frontmatter, body, 1-based line number where the body starts)."""
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        raise SkillError(
            path,
            "does not start with YAML frontmatter; the first line must be '---', followed "
            "by 'name: ...' and 'description: ...' lines and a closing '---'",
        )
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        raise SkillError(
            path, "the frontmatter opened on line 1 is never closed; add a '---' line after it"
        )
    source = "\n".join(lines[1:close])
    # PyYAML only where a skill is read: a workspace without skills never loads it.
    import yaml

    try:
        data = yaml.safe_load(source)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 2}"  # +1 for 1-based, +1 for the opening '---'
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillError(
            path,
            f"invalid YAML in the frontmatter{where}: {problem} "
            "(quote values that contain ': ' or start with a special character)",
        ) from None
    if data is None:
        raise SkillError(path, "the frontmatter is empty; it needs 'name' and 'description'")
    if not isinstance(data, dict):
        raise SkillError(
            path,
            f"the frontmatter must be a mapping of keys to values, not a {_yaml_kind(data)}",
        )
    return data, "\n".join(lines[close + 1 :]), close + 2


def _validate(path: Path, folder_name: str, fm: dict[str, Any]) -> tuple[str, str]:
    for key in ("name", "description"):
        if key not in fm:
            raise SkillError(path, f"the frontmatter has no {key!r}, which is required")
        if not isinstance(fm[key], str) or not fm[key].strip():
            raise SkillError(path, f"{key!r} must be a non-empty string, got {_yaml_kind(fm[key])}")
    name: str = fm["name"]
    description: str = fm["description"]
    if not _valid_name(name):
        raise SkillError(
            path,
            f"name {name!r} is not allowed: use 1-{_NAME_MAX} lowercase letters, digits and "
            "single hyphens, not starting or ending with a hyphen (e.g. 'pdf-forms')",
        )
    if name != folder_name:
        raise SkillError(
            path,
            f"name {name!r} does not match its folder {folder_name!r}; "
            "rename the folder or change the name so they agree",
        )
    if len(description) > _DESCRIPTION_MAX:
        raise SkillError(
            path,
            f"description is {len(description)} characters; the limit is {_DESCRIPTION_MAX}",
        )
    for key in ("license", "compatibility"):
        if key in fm and not isinstance(fm[key], str):
            raise SkillError(path, f"{key!r} must be a string, got {_yaml_kind(fm[key])}")
    if len(fm.get("compatibility") or "") > _COMPATIBILITY_MAX:
        raise SkillError(path, f"'compatibility' is longer than {_COMPATIBILITY_MAX} characters")
    if "metadata" in fm and not isinstance(fm["metadata"], dict):
        raise SkillError(
            path,
            f"'metadata' must be a mapping of keys to values, got {_yaml_kind(fm['metadata'])}",
        )
    tools = fm.get("allowed-tools")
    if tools is not None and not isinstance(tools, str | list):
        raise SkillError(
            path, f"'allowed-tools' must be a string or a list, got {_yaml_kind(tools)}"
        )
    return name, description


def _valid_name(name: str) -> bool:
    if not 1 <= len(name) <= _NAME_MAX or name.startswith("-") or name.endswith("-"):
        return False
    if "--" in name:
        return False
    return all(c == "-" or (c.isalnum() and c == c.lower()) for c in name)


def _yaml_kind(value: Any) -> str:
    kinds = {dict: "mapping", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIP_NAMES


def _split_tools(value: str) -> list[str]:
    """Split on commas if there are any outside parentheses, else on whitespace."""
    top_level_comma = False
    depth = 0
    for ch in value:
        depth += (ch == "(") - (ch == ")")
        top_level_comma |= ch == "," and depth <= 0
    tools: list[str] = []
    depth = 0
    current = ""
    for ch in value:
        depth = max(0, depth + (ch == "(") - (ch == ")"))
        is_sep = (ch == ",") if top_level_comma else ch.isspace()
        if is_sep and depth == 0:
            tools.append(current.strip())
            current = ""
        else:
            current += ch
    tools.append(current.strip())
    return [t for t in tools if t]
