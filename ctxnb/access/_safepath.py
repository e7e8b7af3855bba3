"""A path that passed the path rules, and a path as the rules parse it.

:class:`SafePath` is the validated name every file operation of the access layer takes
(a name, not a capability: each operation checks it again); ``_Parsed`` is a path split
into its root and names, as :class:`~ctxnb.access.pathrules.PathRules` parses it before
judging it. Imported by the Claude Code hook on every call: standard library only.
"""

from __future__ import annotations

from pathlib import Path

from .._util.record import FrozenRecord


class SafePath(FrozenRecord):
    """A path that passed the policy's checks, relative to one workspace root.

    A ``SafePath`` is a validated *name*, not a capability: the file operations of
    :class:`PathPolicy` accept it and validate it again. ``abs`` is for display and
    logs; opening ``abs`` by name would give up the race-free walk.

    Attributes:
        rel: posix form relative to ``root``, normalized (no ``.``, no ``//``); ``"."``
            for the root itself.
        root: the root's real path.
        abs: ``root / rel``.

    Example:
        >>> SafePath(rel="src/app.py", root=Path("/ws"), abs=Path("/ws/src/app.py")).rel
        'src/app.py'
    """

    # A record, not a dataclass: the Claude Code hook imports this module on every tool
    # call, and ``dataclasses`` (with ``inspect``) costs milliseconds to import.
    __slots__ = ("rel", "root", "abs")

    rel: str
    root: Path
    abs: Path

    def __init__(self, *, rel: str, root: Path, abs: Path) -> None:
        self._fill(rel, root, abs)

    def __reduce__(self) -> tuple[object, tuple[str, Path, Path]]:
        return _safe_path, (self.rel, self.root, self.abs)

    @property
    def parts(self) -> tuple[str, ...]:
        """The names from the root down; empty for the root itself."""
        return () if self.rel == "." else tuple(self.rel.split("/"))


def _safe_path(rel: str, root: Path, abs: Path) -> SafePath:
    return SafePath(rel=rel, root=root, abs=abs)


class _Root(FrozenRecord):
    __slots__ = ("real", "given")
    real: Path  # realpath at construction; what is opened
    given: Path  # absolute but unresolved, so absolute paths spelled that way match

    def __init__(self, real: Path, given: Path) -> None:
        self._fill(real, given)


class _Parsed(FrozenRecord):
    __slots__ = ("root", "parts", "dir_form", "display")
    root: _Root
    parts: tuple[str, ...]
    dir_form: bool  # the caller wrote a trailing '/' (or '/.')
    display: str  # the path as the caller gave it, for messages

    def __init__(self, root: _Root, parts: tuple[str, ...], dir_form: bool, display: str) -> None:
        self._fill(root, parts, dir_form, display)

    @property
    def safe(self) -> SafePath:
        rel = "/".join(self.parts) or "."
        abs_path = self.root.real.joinpath(*self.parts) if self.parts else self.root.real
        return SafePath(rel=rel, root=self.root.real, abs=abs_path)
