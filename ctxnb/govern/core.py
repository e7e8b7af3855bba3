"""The policy core: what every governance engine decides, in one place, with no heavy imports.

:class:`~ctxnb.govern.engine.HookEngine` (ctxnb's own file tools, the notebook API and
the MCP server) and the Claude Code hooks (:mod:`ctxnb.integrations.claude_code`) ask the
same questions in the same order and get the same answers and messages from here:

1. the path: :meth:`ctxnb.access.PathPolicy.check` (the deny list, governance's own
   files, no links, no traversal);
2. intent presence: :func:`require_intent` (``NO_ACTIVE_INTENT``);
3. intent validity: :func:`get_intent` (``INVALID_INTENT``);
4. scope: :func:`check_scope` (``SCOPE_VIOLATION``);

:func:`check_mutation` runs all four for one path. This module imports neither
pydantic nor pandas, so a Claude Code hook process stays fast; the intents file is
validated by :mod:`ctxnb.govern.intents` and arrives here as :class:`IntentView`.

Example:
    >>> intents = {"INT-1": IntentView("INT-1", "Docs", "active", ["docs/**"])}
    >>> get_intent(intents, "INT-1").in_scope("docs/a.md")
    True
    >>> check_scope(intents["INT-1"], "src/app.py")
    Traceback (most recent call last):
    ...
    ctxnb.errors.PolicyError: src/app.py is outside the scope of intent INT-1 (docs/**)
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import PolicyError

if TYPE_CHECKING:
    from .._util.wildmatch import GlobList
    from ..access.fdio import PathPolicy
    from ..access.pathrules import SafePath

__all__ = [
    "NO_INTENT_MESSAGE",
    "IntentLike",
    "IntentView",
    "check_mutation",
    "check_scope",
    "files_in_scope",
    "get_intent",
    "in_scope",
    "require_intent",
]

NO_INTENT_MESSAGE = "You must cite a valid active Intent ID before mutating tools."
"""The refusal of a mutating call made before any intent was selected."""


class IntentLike(Protocol):
    """What the core needs of an intent (:class:`IntentView` or the validated model)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def owned_scope(self) -> list[str]: ...

    @property
    def is_active(self) -> bool: ...

    def in_scope(self, rel_path: str) -> bool: ...


@lru_cache(maxsize=256)
def _spec(globs: tuple[str, ...]) -> GlobList:
    from .._util.wildmatch import GlobList  # only when a scope is checked

    return GlobList([g for g in globs if g.strip() and not g.lstrip().startswith("#")])


def in_scope(owned_scope: Sequence[str], rel_path: str) -> bool:
    """Whether a workspace-relative path is owned by an intent with these globs.

    Globs follow ``.gitignore`` rules (``*`` stays within one directory, ``**``
    crosses directories, a glob without ``/`` matches at any depth, ``dir/`` matches
    everything under ``dir``). Absolute paths and paths that climb out of the
    workspace (``..``) are never in scope; no globs own nothing.

    Example:
        >>> in_scope(["docs/**"], "docs/a/b.md"), in_scope(["docs/**"], "../docs/x")
        (True, False)
    """
    text = str(rel_path).replace("\\", "/")
    if not text or text.startswith("/"):
        return False
    norm = posixpath.normpath(text)
    if norm in ("..", ".") or norm.startswith("../"):
        return False
    return bool(_spec(tuple(owned_scope)).match_file(norm))


def files_in_scope(owned_scope: Sequence[str], rel_paths: Iterable[str]) -> list[str]:
    """The paths of ``rel_paths`` owned by these globs, in their order: :func:`in_scope`
    of each, with each directory judged once (what makes thousands of files cheap).

    Example:
        >>> files_in_scope(["docs/**"], ["docs/a.md", "src/b.py", "../docs/x"])
        ['docs/a.md']
    """
    paths = list(rel_paths)
    spec = _spec(tuple(owned_scope))
    plain = [p for p in paths if _plain(p)]
    if len(plain) == len(paths):
        return spec.match_files(paths)  # the usual case: index and disk give plain paths
    kept = set(spec.match_files(plain))
    return [p for p in paths if (p in kept if _plain(p) else in_scope(owned_scope, p))]


def _plain(path: str) -> bool:
    # A path in_scope takes as it is (relative, normalized: posixpath.normpath leaves
    # it alone); any other goes through in_scope's own normalization.
    return (
        path not in ("", ".", "..")
        and "\\" not in path
        and "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.startswith(("/", "./", "../"))
        and not path.endswith(("/", "/.", "/.."))
    )


class IntentView:
    """An intent as the policies need it: a plain object, no validation behind it.

    The intents file is validated by :func:`ctxnb.govern.intents.load_intents`; the
    Claude Code hooks cache the validated intents as JSON and rebuild these views.
    """

    __slots__ = ("acceptance_criteria", "constraints", "id", "name", "owned_scope", "status")

    def __init__(
        self,
        id: str,
        name: str,
        status: str = "active",
        owned_scope: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        acceptance_criteria: Sequence[str] | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.status = status
        self.owned_scope = list(owned_scope or [])
        self.constraints = list(constraints or [])
        self.acceptance_criteria = list(acceptance_criteria or [])

    @property
    def is_active(self) -> bool:
        return self.status == "active"

    def in_scope(self, rel_path: str) -> bool:
        """See :func:`in_scope`."""
        return in_scope(self.owned_scope, rel_path)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    def __repr__(self) -> str:
        return f"IntentView({self.id!r}, status={self.status!r}, owned_scope={self.owned_scope!r})"


_FIELDS = ("id", "name", "status", "owned_scope", "constraints", "acceptance_criteria")


def require_intent(intent_id: str | None, active_ids: Sequence[str], *, how_to_select: str) -> str:
    """The selected intent id; ``NO_ACTIVE_INTENT`` when none is selected.

    Args:
        intent_id: the selection, or None.
        active_ids: the active intents, listed in the refusal.
        how_to_select: the engine's way to select one (a tool call, a prompt).
    """
    if intent_id is None:
        raise PolicyError(
            "NO_ACTIVE_INTENT",
            NO_INTENT_MESSAGE,
            required_action=f"{how_to_select} Active intents: {', '.join(active_ids) or '(none)'}.",
        )
    return intent_id


def get_intent(
    intents: Mapping[str, IntentLike],
    intent_id: str,
    *,
    where: str = "active_intents.yaml",
    how_to_select: str = "Call select_active_intent with one of the active intent ids.",
) -> IntentLike:
    """The active intent ``intent_id``; ``INVALID_INTENT`` when it is unknown or not active.

    The message and ``details`` list the known and active ids.
    """
    intent = intents.get(intent_id)
    active = [i.id for i in intents.values() if i.is_active]
    shown = ", ".join(active) or "(none)"
    details: dict[str, Any] = {
        "intent_id": intent_id,
        "known_ids": list(intents),
        "active_ids": active,
    }
    if intent is None:
        raise PolicyError(
            "INVALID_INTENT",
            f"No intent {intent_id!r} in {where}. Active intents: {shown}.",
            required_action=how_to_select,
            details=details,
        )
    if not intent.is_active:
        raise PolicyError(
            "INVALID_INTENT",
            f"Intent {intent_id!r} is {intent.status}, not active. Active intents: {shown}.",
            required_action="Select an active intent, or ask a human to set this intent's "
            "status to active.",
            details={**details, "status": intent.status},
        )
    return intent


def check_scope(intent: IntentLike, rel: str) -> None:
    """``SCOPE_VIOLATION`` unless ``rel`` lies in the intent's owned scope."""
    if not intent.in_scope(rel):
        raise PolicyError(
            "SCOPE_VIOLATION",
            f"{rel} is outside the scope of intent {intent.id} "
            f"({', '.join(intent.owned_scope) or 'no files'})",
            required_action="Select an intent whose owned_scope covers this file, "
            "or ask a human to widen the scope in .orchestration/active_intents.yaml.",
            details={"path": rel, "intent_id": intent.id, "owned_scope": list(intent.owned_scope)},
        )


def check_mutation(
    policy: PathPolicy,
    path: str,
    *,
    intents: Mapping[str, IntentLike] | None,
    intent_id: str | None,
    where: str = "active_intents.yaml",
    how_to_select: str = "Call select_active_intent with one of the active intent ids.",
) -> tuple[SafePath, IntentLike | None]:
    """Every pre check of a file mutation, in order; the first refusal is raised.

    Args:
        policy: the agent-facing path policy (it refuses governance's files).
        path: the target, relative or absolute inside the workspace.
        intents: the workspace's intents; None for an ungoverned workspace (only the
            path is checked).
        intent_id: the session's selected intent.
        where: the intents file, for messages.
        how_to_select: how this engine selects an intent, for messages.

    Returns:
        The checked path and the intent it is under (None when ungoverned).

    Example:
        >>> import pathlib, tempfile
        >>> from ctxnb.access import GOVERNANCE, PathPolicy
        >>> policy = PathPolicy([pathlib.Path(tempfile.mkdtemp())], protect=GOVERNANCE)
        >>> every = {"ALL": IntentView("ALL", "All", "active", ["**"])}
        >>> check_mutation(policy, "src/a.py", intents=every, intent_id="ALL")[0].rel
        'src/a.py'
        >>> check_mutation(policy, ".orchestration/active_intents.yaml", intents=every,
        ...                intent_id="ALL")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ctxnb.errors.PolicyError: Path '.orchestration/active_intents.yaml' is refused: ...
    """
    safe = policy.check(path, for_write=True)
    if intents is None:
        return safe, None
    active = [i.id for i in intents.values() if i.is_active]
    chosen = require_intent(intent_id, active, how_to_select=how_to_select)
    intent = get_intent(intents, chosen, where=where, how_to_select=how_to_select)
    check_scope(intent, safe.rel)
    return safe, intent
