"""Intents: the ``.orchestration/active_intents.yaml`` file and the context it yields.

An intent is a named piece of work an agent may carry out: what it is for, which files
it owns (``owned_scope``, gitignore-style globs relative to the workspace root), the
constraints it must respect and how to tell it is done. A mutating tool call names one
active intent; the hook engine checks the target against that intent's scope.

The file looks like this::

    active_intents:
      - id: INT-001
        name: Add CSV export
        status: active            # active | paused | done | blocked
        owned_scope:
          - src/export/**
          - tests/test_export.py
        constraints:
          - Do not change the public API of src/export/base.py
        acceptance_criteria:
          - pytest tests/test_export.py passes

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "active_intents.yaml").write_text(
    ...     "active_intents:\\n"
    ...     "  - id: INT-001\\n"
    ...     "    name: Add CSV export\\n"
    ...     "    owned_scope: ['src/export/**']\\n"
    ... )
    >>> intents = load_intents(root / "active_intents.yaml")
    >>> intents.get("INT-001").in_scope("src/export/csv.py")
    True
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from .._util.domains import check_pattern
from ..errors import ConfigError
from ..redaction.redactor import redact_text
from .core import get_intent, in_scope
from .ledger import record_intent_id
from .lessons import Lesson

__all__ = [
    "INTENT_STATUSES",
    "Intent",
    "IntentFile",
    "IntentStatus",
    "init_governance",
    "intent_context",
    "load_intents",
]

IntentStatus = Literal["active", "paused", "done", "blocked"]
INTENT_STATUSES: tuple[str, ...] = ("active", "paused", "done", "blocked")

ORCHESTRATION_DIR = ".orchestration"

# Prefer libyaml's loader when present: the hook process parses this file on every call.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _relative_glob(glob: str) -> str:
    if not glob.strip():
        raise ValueError("an owned_scope glob must not be empty")
    if glob.startswith(("/", "..")) or "/../" in glob:
        raise ValueError(
            f"owned_scope glob {glob!r} must be relative to the workspace root "
            "(no leading '/', no '..')"
        )
    return glob


# Validated per item so that an error points at the offending line of the file.
_Glob = Annotated[str, AfterValidator(_relative_glob)]
_Domain = Annotated[str, AfterValidator(check_pattern)]


class Intent(BaseModel):
    """One intent of ``active_intents.yaml``.

    Example:
        >>> it = Intent(id="INT-1", name="Docs", owned_scope=["docs/**", "*.md"])
        >>> it.in_scope("docs/guide/intro.rst"), it.in_scope("README.md")
        (True, True)
        >>> it.in_scope("src/app.py"), it.in_scope("../docs/x.md")
        (False, False)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^\S+$")
    name: str = Field(min_length=1)
    status: IntentStatus = "active"
    owned_scope: list[_Glob] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    acceptance_criteria: list[str] = Field(default_factory=list)
    network: bool = Field(
        default=False, description="commands under this intent may reach the network"
    )
    allowed_domains: list[_Domain] = Field(
        default_factory=list,
        description="domains commands under this intent may reach through ctxnb's proxy, "
        "besides [sandbox] allowed_domains",
    )

    @property
    def is_active(self) -> bool:
        """Whether a tool call may act under this intent."""
        return self.status == "active"

    def in_scope(self, rel_path: str | Path) -> bool:
        """Whether a workspace-relative path is owned by this intent.

        The rule is :func:`ctxnb.govern.core.in_scope` (``.gitignore`` globs; absolute
        paths and ``..`` are never in scope; no globs own nothing).
        """
        return in_scope(self.owned_scope, str(rel_path))


class IntentFile(BaseModel):
    """The parsed ``active_intents.yaml``.

    Example:
        >>> f = IntentFile(active_intents=[Intent(id="A", name="a", status="paused")])
        >>> f.ids
        ['A']
        >>> f.get("A")
        Traceback (most recent call last):
        ...
        ctxnb.errors.PolicyError: Intent 'A' is paused, not active. Active intents: (none).
    """

    model_config = ConfigDict(extra="forbid")

    active_intents: list[Intent] = Field(default_factory=list)

    _path: Path | None = PrivateAttr(default=None)

    @field_validator("active_intents", mode="before")
    @classmethod
    def _nothing_is_empty(cls, value: Any) -> Any:
        # `active_intents:` with every example line commented out is YAML's null.
        return [] if value is None else value

    @field_validator("active_intents")
    @classmethod
    def _ids_are_unique(cls, intents: list[Intent]) -> list[Intent]:
        seen: set[str] = set()
        for intent in intents:
            if intent.id in seen:
                raise ValueError(f"intent id {intent.id!r} is used more than once")
            seen.add(intent.id)
        return intents

    @property
    def path(self) -> Path | None:
        """The file this was loaded from, if any."""
        return self._path

    @property
    def ids(self) -> list[str]:
        """Every intent id, in file order."""
        return [i.id for i in self.active_intents]

    def active(self) -> list[Intent]:
        """The intents whose status is ``active``."""
        return [i for i in self.active_intents if i.is_active]

    def find(self, intent_id: str) -> Intent | None:
        """The intent with this id whatever its status, or None."""
        for intent in self.active_intents:
            if intent.id == intent_id:
                return intent
        return None

    def get(self, intent_id: str) -> Intent:
        """The active intent with this id.

        Raises:
            PolicyError: ``INVALID_INTENT`` when no intent has this id or it is not
                active; the message and ``details`` list the known and active ids
                (:func:`ctxnb.govern.core.get_intent`).
        """
        by_id = {i.id: i for i in self.active_intents}
        return get_intent(by_id, intent_id, where=self._where())  # type: ignore[return-value]

    def _where(self) -> str:
        return str(self._path) if self._path else "active_intents.yaml"


def load_intents(path: str | Path) -> IntentFile:
    """Read and validate an ``active_intents.yaml`` file.

    An empty file is an empty list of intents.

    Raises:
        ConfigError: the file is missing, is not YAML, or breaks the model; the message
            names the file, the line and what is allowed.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "active_intents.yaml"
        >>> _ = p.write_text("active_intents:\\n  - id: A\\n    name: a\\n    state: x\\n")
        >>> load_intents(p)
        Traceback (most recent call last):
        ...
        ctxnb.errors.ConfigError: ...active_intents.yaml:4: active_intents[0].state: unknown key...
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no intents file. Create one with ctxnb.govern.init_governance(root)."
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason}).") from None

    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: not valid YAML: {problem}.") from None
    finally:
        loader.dispose()

    if data is None:
        data = {}
    if not isinstance(data, dict):
        line = node.start_mark.line + 1 if node is not None else 1
        raise ConfigError(
            f"{path}:{line}: the top level must be a mapping with the key 'active_intents' "
            f"(a list of intents), not a {type(data).__name__}."
        )
    _check_unique_ids(path, node, data)
    try:
        model = IntentFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(path, node, exc)) from None
    model._path = path
    return model


def _check_unique_ids(path: Path, root: yaml.Node | None, data: dict[str, Any]) -> None:
    """Report a repeated id at its second occurrence (the model only knows the list)."""
    items = data.get("active_intents")
    if not isinstance(items, list):
        return
    first: dict[Any, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or "id" not in item:
            continue
        if item["id"] in first:
            line = _line_of(root, ("active_intents", index, "id"))
            first_line = _line_of(root, ("active_intents", first[item["id"]], "id"))
            raise ConfigError(
                f"{path}:{line}: active_intents[{index}].id: intent id {item['id']!r} is "
                f"used more than once (first on line {first_line}); ids must be unique"
            )
        first[item["id"]] = index


_ALLOWED_KEYS = {
    (): ["active_intents"],
    ("active_intents", int): list(Intent.model_fields),
}


def _format_errors(path: Path, root: yaml.Node | None, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        line = _line_of(root, loc)
        where = f"{path}:{line}" if line else str(path)
        dotted = _dotted(loc)
        if err["type"] == "extra_forbidden":
            parent = tuple(int if isinstance(p, int) else p for p in loc[:-1])
            allowed = ", ".join(_ALLOWED_KEYS.get(parent, []))
            msg = f"unknown key {loc[-1]!r}; allowed keys: {allowed}"
        elif err["type"] == "missing":
            msg = f"missing required key {loc[-1]!r}"
        elif err["type"] == "literal_error" and loc and loc[-1] == "status":
            msg = f"status must be one of {', '.join(INTENT_STATUSES)}"
        elif err["type"] == "string_type":
            msg = f"{err['msg']} (quote the value in YAML, e.g. '001')"
        else:
            msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {dotted}: {msg}" if dotted else f"{where}: {msg}")
    return "\n".join(lines)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node a pydantic error location points at."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    line = key_node.start_mark.line + 1
                    node = value_node
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


_INTENTS_TEMPLATE = """\
# Intents an agent may work under. A mutating tool call must first select one
# active intent (select_active_intent); its target must match owned_scope.
#
# Keys of an intent:
#   id                   unique, no spaces (e.g. INT-001)
#   name                 one line saying what the work is
#   status               active | paused | done | blocked (only active intents are usable)
#   owned_scope          .gitignore-style globs, relative to the workspace root
#   constraints          rules the work must respect
#   acceptance_criteria  how to tell the work is done
#
# An example follows. To use it, remove the leading "# " of every line after
# "active_intents:" (the two spaces before "- id" stay: the intent is an item of the list).
# "active_intents:" with nothing under it is an empty list.
active_intents:
#   - id: INT-001
#     name: Add CSV export
#     status: active
#     owned_scope:
#       - src/export/**
#       - tests/test_export.py
#     constraints:
#       - Do not change the public API of src/export/base.py
#     acceptance_criteria:
#       - pytest tests/test_export.py passes
"""

_INTENT_MAP_TEMPLATE = """\
# Intent map

Which files and symbols each intent has changed. ctxnb keeps this file up to date
after every governed write; edits by hand are overwritten.
"""

_AGENT_MD_TEMPLATE = """\
# AGENT.md — lessons and decisions

Shared memory for everyone working in this workspace, agents and humans alike.
Add an entry when something is learned the hard way (a failing check, a wrong
assumption, a convention that is easy to miss) or when a decision is taken that
later work must respect. Keep entries short: the date, the intent id if any,
what happened and what to do instead.

## Lessons

## Decisions
"""


def init_governance(root: str | Path) -> list[Path]:
    """Create ``.orchestration/`` under ``root`` with starter files.

    Creates ``active_intents.yaml`` (no intents yet, a commented example),
    an empty ``agent_trace.jsonl``, ``intent_map.md`` and ``AGENT.md``. Existing
    files are never touched, so calling this again is safe.

    Returns:
        The files created by this call (empty when everything already existed).

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> [p.name for p in init_governance(root)]
        ['active_intents.yaml', 'agent_trace.jsonl', 'intent_map.md', 'AGENT.md']
        >>> init_governance(root)
        []
    """
    base = Path(root) / ORCHESTRATION_DIR
    base.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    for name, content in (
        ("active_intents.yaml", _INTENTS_TEMPLATE),
        ("agent_trace.jsonl", ""),
        ("intent_map.md", _INTENT_MAP_TEMPLATE),
        ("AGENT.md", _AGENT_MD_TEMPLATE),
    ):
        target = base / name
        try:
            # "x" mode: an existing file (even one created a moment ago by another
            # process) is left as it is.
            with open(target, "x", encoding="utf-8") as fh:
                fh.write(content)
        except FileExistsError:
            continue
        created.append(target)
    return created


def intent_context(
    intent: Intent,
    recent_records: Iterable[Mapping[str, Any]] = (),
    *,
    limit: int = 10,
    lessons: Iterable[Lesson] = (),
) -> str:
    """The ``<intent_context>`` block returned to an agent that selects an intent.

    Lists the intent's id, name, status, scope, constraints and acceptance criteria,
    then up to ``limit`` of the most recent trace records made under this intent, one
    line each, and the lessons of ``AGENT.md`` that concern it (see
    :func:`~ctxnb.govern.lessons.lessons_for`). Text from the intent file and the lessons
    is XML-escaped so it cannot close the block.

    Example:
        >>> it = Intent(id="INT-1", name="Docs <v2>", owned_scope=["docs/**"])
        >>> print(intent_context(it))
        <intent_context>
        id: INT-1
        name: Docs &lt;v2&gt;
        status: active
        owned_scope:
          - docs/**
        constraints: (none)
        acceptance_criteria: (none)
        recent_trace: (none)
        lessons: (none)
        </intent_context>
    """
    esc = html.escape

    def block(title: str, items: list[str]) -> list[str]:
        if not items:
            return [f"{title}: (none)"]
        return [f"{title}:"] + [f"  - {esc(item, quote=False)}" for item in items]

    mine = [r for r in recent_records if record_intent_id(r) == intent.id]
    trace_lines = [_summarize_record(r) for r in mine[-limit:]] if limit > 0 else []
    out = [
        "<intent_context>",
        f"id: {esc(intent.id, quote=False)}",
        f"name: {esc(intent.name, quote=False)}",
        f"status: {intent.status}",
        *block("owned_scope", intent.owned_scope),
        *block("constraints", intent.constraints),
        *block("acceptance_criteria", intent.acceptance_criteria),
        *block("recent_trace", trace_lines),
        # AGENT.md is also written by hand, and by versions that did not redact lessons.
        *block("lessons", [redact_text(f"{x.when} {x.text}") for x in lessons]),
        "</intent_context>",
    ]
    return "\n".join(out)


def _summarize_record(record: Mapping[str, Any]) -> str:
    """``<timestamp> <path> L<a>-<b>[, ...] [<mutation class>] by <contributor>``."""
    meta = record.get("metadata") or {}
    parts = []
    contributors: set[str] = set()
    for f in record.get("files") or []:
        spans = []
        for conv in f.get("conversations") or []:
            contributor = conv.get("contributor") or {}
            if contributor.get("type"):
                who = contributor["type"]
                if contributor.get("model_id"):
                    who += f" ({contributor['model_id']})"
                contributors.add(who)
            for r in conv.get("ranges") or []:
                spans.append(f"L{r.get('start_line')}-{r.get('end_line')}")
        parts.append(f"{f.get('path')} {', '.join(spans)}".rstrip())
    line = f"{record.get('timestamp', '?')} {'; '.join(parts) or '(no files)'}"
    for key in ("tool", "mutation_class"):
        if meta.get(key):
            line += f" {meta[key]}"
    if contributors:
        line += " by " + ", ".join(sorted(contributors))
    return line
