"""Small records without :mod:`dataclasses`, for the modules on the hook's import path.

``import dataclasses`` costs about 8 ms (it imports :mod:`inspect`, which imports
``ast``, ``dis`` and ``tokenize``), and turning a class into a dataclass costs a
fraction of a millisecond more, each time a process starts. Claude Code starts
``ctxnb hook post-tool-use`` after every edit, and about a dozen records lie on its way
(an observation, a redaction result, a store log entry …), so those derive from these
bases instead: the fields are the class's ``__slots__``, in order; equality and the
repr come from them as a dataclass's do; :class:`FrozenRecord` is also immutable and
hashable, as a frozen dataclass is. Everywhere else ctxnb uses dataclasses.

Example:
    >>> class Point(FrozenRecord):
    ...     __slots__ = ("x", "y")
    ...     x: int
    ...     y: int
    ...
    ...     def __init__(self, x: int, y: int = 0) -> None:
    ...         self._fill(x, y)
    >>> Point(1)
    Point(x=1, y=0)
    >>> Point(1, 2) == Point(1, 2), len({Point(1, 2), Point(1, 2)})
    (True, 1)
    >>> Point(1).x = 3
    Traceback (most recent call last):
    ...
    AttributeError: cannot assign to field 'x' of Point: it is immutable
"""

from __future__ import annotations

__all__ = ["FrozenRecord", "Record"]

_set = object.__setattr__


class Record:
    """A mutable record: fields are ``__slots__``; ``==`` and repr compare and show them.

    Defining ``__eq__`` leaves it unhashable, as a mutable dataclass is.
    """

    __slots__ = ()

    def _fields(self) -> tuple[str, ...]:
        names: tuple[str, ...] = self.__slots__
        return names

    def _fill(self, *values: object) -> None:
        # Called by the subclass's __init__ with every field's value in slot order.
        for name, value in zip(self._fields(), values, strict=True):
            _set(self, name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields())
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[object, ...]:
        # Slots have no __dict__, and a frozen record refuses setattr: pickle (workers,
        # copies) rebuilds the record through its constructor instead.
        return (type(self), self._values())


class FrozenRecord(Record):
    """An immutable, hashable record (a frozen dataclass's behaviour)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"cannot assign to field {name!r} of {type(self).__name__}: it is immutable"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError(
            f"cannot delete field {name!r} of {type(self).__name__}: it is immutable"
        )

    def __hash__(self) -> int:
        return hash(self._values())
