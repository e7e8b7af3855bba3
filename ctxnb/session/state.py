"""What a session holds: its sets, each object's copy and entry, the chat, and their order.

:class:`SessionState` is the part of a :class:`~ctxnb.session.core.Session` that a saved
session document stores and a resume brings back. The session *has* one (``session.state``),
as httpx's ``Client`` has a transport: the session keeps the lock, the store, the
listeners and the rendering caches, and changes its state only through this object; the
resume (:mod:`ctxnb.session._resume`) is handed the state, never the session, so nothing
outside ``core.py`` reaches into a session's private attributes.

The four sets (DESIGN §6):

- ``index``: every object the session ever touched (append-only; ``session_index``);
- ``pool``: objects whose one-line metadata the model sees (``metadata_pool``);
- ``active``: objects whose full content is in the prompt (insertion-ordered);
- ``pinned``: objects no strategy may evict.

Every change that may alter an object's metadata line in the prompt goes through
:meth:`SessionState.set_meta` (or :meth:`~SessionState.mark`), which tells the rendering
caches (the ``mark`` callable the session hands in) so that the next context is right.

Example:
    >>> from ctxnb.context import MetaEntry
    >>> marked = []
    >>> st = SessionState(mark=marked.append)
    >>> st.add_to_index("a"), st.add_to_index("a"), st.in_index("a")
    (True, False, True)
    >>> st.set_meta("a", MetaEntry("a", "file", orphaned=True))
    >>> sorted(st.orphaned), marked
    (['a'], ['a'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, TypeVar

from ..context import MetaEntry
from ..hashing import stable_stringify
from ..ids import new_id

__all__ = ["LazyRows", "SessionState", "payload_of", "version_of"]

V = TypeVar("V")


class SessionState:
    """The sets, copies, chat and ordering of one session (see the module).

    Not thread-safe on its own: the session that holds it changes it under its lock.

    Args:
        mark: called with an object id whenever that object's metadata line or its
            place in the prompt may have changed (the session's rendering caches).
    """

    def __init__(self, *, mark: Callable[[str], None]) -> None:
        self.mark = mark
        self.index: list[str] = []
        self.pool: list[str] = []
        self.active: dict[str, None] = {}
        self.pinned: dict[str, None] = {}
        # Membership of the two append-only lists, kept beside them for O(1) tests.
        self.indexed: set[str] = set()
        self.pooled: set[str] = set()
        # Plain dicts, or after a resume mappings that make a file's row of the store's
        # columns into its document or entry when first asked for (LazyRows).
        self.docs: MutableMapping[str, dict[str, Any]] = {}
        self.meta: MutableMapping[str, MetaEntry] = {}
        self.orphaned: set[str] = set()
        # Recency (for strategies) and reading order: a counter stamps each use and
        # each entry of an active item.
        self.tick = 0
        self.last_used: dict[str, int] = {}
        self.seq: dict[str, int] = {}
        # The number of chat turns when each active item entered: its place in the
        # append-only layout of the context (ctxnb.context).
        self.entered: dict[str, int] = {}
        # Client-registered active copies (unsaved editor buffers): what the prompt shows
        # instead of the stored content (DESIGN §3: active copy > stored > snippet).
        self.overlays: dict[str, str] = {}
        self.turns: list[dict[str, Any]] = []
        self.toolcall_refs: list[str] = []
        self.chat_id = new_id()
        self.system_prompt_id: str | None = None
        self.system_prompt = ""
        # (turn, hash) of the last context assembled with record=True: what the model
        # saw when it asked for a change; the recorder puts it in the change's trace.
        self.last_context: tuple[int, str] | None = None
        # Items brought back with restore_item (ctxnb.context._changes): saved with the session.
        self.restores: list[dict[str, Any]] = []
        # The metadata lines the prompt has shown, in blocks (ctxnb.context._metalog):
        # append-only, saved with the session so that past contexts rebuild exactly.
        self.meta_log: list[dict[str, Any]] = []

    @property
    def turn(self) -> int:
        """The number of chat turns so far."""
        return len(self.turns)

    # -- membership -----------------------------------------------------------------------
    def in_index(self, oid: str) -> bool:
        """Whether ``oid`` is in the session's index."""
        return oid in self.indexed

    def add_to_index(self, oid: str) -> bool:
        """Append ``oid`` to the index; False when it was there already."""
        if oid in self.indexed:
            return False
        self.indexed.add(oid)
        self.index.append(oid)
        return True

    def add_to_pool(self, oid: str) -> bool:
        """Append ``oid`` to the metadata pool; False when it was there already."""
        if oid in self.pooled:
            return False
        self.pooled.add(oid)
        self.pool.append(oid)
        return True

    def restore_sets(
        self, index: list[str], pool: list[str], active: list[str], pinned: list[str]
    ) -> None:
        """Take the four sets of a saved session (membership rebuilt from the lists)."""
        self.index, self.indexed = index, set(index)
        self.pool, self.pooled = pool, set(pool)
        self.active, self.pinned = dict.fromkeys(active), dict.fromkeys(pinned)

    # -- entries and copies ---------------------------------------------------------------
    def set_meta(self, oid: str, entry: MetaEntry) -> None:
        """Set an object's metadata entry (and whether it is orphaned, as it says)."""
        self.meta[oid] = entry
        if entry.orphaned:
            self.orphaned.add(oid)
        else:
            self.orphaned.discard(oid)
        self.mark(oid)

    def set_orphaned(self, oid: str, value: bool) -> None:
        """Mark an object orphaned (its filesystem or file is out of reach) or back."""
        m = self.meta[oid]
        if m.orphaned != value:
            self.set_meta(oid, MetaEntry(**{**vars(m), "orphaned": value}))

    def install(self, oid: str, doc: dict[str, Any]) -> None:
        """Take a new version of an object; an active item whose content changed re-enters."""
        old = self.docs.get(oid)
        self.docs[oid] = doc
        if old is not None and version_of(old) != version_of(doc):
            self.reenter(oid)

    def reenter(self, oid: str) -> None:
        """An active item's content changed: it takes its place after everything so far.

        The model reads the new content after what happened since the old one, as in a
        transcript; everything before the item's old place stays a cacheable prefix. An
        item shown from a client's active copy keeps its place: its text did not change.
        """
        if oid in self.active and oid not in self.overlays:
            self.move_to_end(oid)

    def move_to_end(self, oid: str) -> None:
        """Place an active item after everything read so far, at the current turn."""
        self.tick += 1
        self.seq[oid] = self.tick
        self.entered[oid] = self.turn

    def touch(self, oid: str) -> None:
        """Mark an object as used now (recency strategies keep recent items)."""
        self.tick += 1
        self.last_used[oid] = self.tick


def version_of(doc: dict[str, Any]) -> str:
    """What tells two versions of an object apart: its content hash (or, for documents
    stored without one, such as plans, the whole document)."""
    return doc.get("content_hash") or stable_stringify(payload_of(doc))


def payload_of(doc: dict[str, Any]) -> dict[str, Any]:
    """A document without the fields that name it rather than hold it (what is hashed)."""
    return {k: v for k, v in doc.items() if k not in ("xt/id", "type", "source", "identity_hash")}


class LazyRows(MutableMapping[str, V]):
    """A mapping whose values for some keys are made from a column row when first read.

    ``rows`` maps a key to its row; ``make(row)`` builds the value. Reading, ``in``,
    ``len`` and iteration behave as for a dict holding every value.
    """

    __slots__ = ("_built", "_make", "_rows")

    def __init__(
        self,
        built: dict[str, V] | None = None,
        rows: dict[str, int] | None = None,
        make: Callable[[int], V] | None = None,
    ) -> None:
        self._built: dict[str, V] = built if built is not None else {}
        self._rows: dict[str, int] = rows if rows is not None else {}
        self._make = make

    def __getitem__(self, key: str) -> V:
        try:
            return self._built[key]
        except KeyError:
            pass
        row = self._rows.pop(key)
        assert self._make is not None
        value = self._built[key] = self._make(row)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: str, value: V) -> None:
        self._rows.pop(key, None)
        self._built[key] = value

    def __delitem__(self, key: str) -> None:
        if self._rows.pop(key, None) is None:
            del self._built[key]
        else:
            self._built.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._built or key in self._rows

    def __iter__(self) -> Iterator[str]:
        yield from list(self._built)
        yield from list(self._rows)

    def __len__(self) -> int:
        return len(self._built) + len(self._rows)

    def pending(self) -> int:
        """How many values are not built yet."""
        return len(self._rows)
