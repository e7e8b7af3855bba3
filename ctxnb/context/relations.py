"""Plans, steps, files and agents as a multi-parent DAG that renders into context.

A :class:`RelationStore` holds :class:`Node` objects joined by typed :class:`Edge`
objects. An edge reads "parent *type* child": a plan ``contains`` a step, a step
``depends_on`` another step (the child comes first), a step ``touches`` a file, a step
is ``assigned`` an agent. A node may have many parents; the graph as a whole (all edge
types together) stays acyclic, and an edge that would close a cycle is refused with a
:class:`~ctxnb.errors.CycleError` that shows the cycle.

Removing a node that is the only parent of some child is refused unless
``cascade=True``, which also removes every descendant left without a parent; a
descendant that has another parent stays and is only detached. A plan step never
silently turns into a root.

:meth:`RelationStore.to_context` renders the graph as an indented task list for the
model. :meth:`RelationStore.save` writes the whole graph as one ``relations`` document
to an object store; each save is a new version, so the store's history shows how a plan
evolved.

Example:
    >>> plan = RelationStore("release")
    >>> plan.add(Node("p", kind="plan", title="Ship 1.0", status="doing"))
    Node(id='p', kind='plan', title='Ship 1.0', status='doing', data={})
    >>> _ = plan.add(Node("parse", title="Write the parser", status="done"), parents="p")
    >>> _ = plan.add(Node("test", title="Test the parser"), parents="p")
    >>> _ = plan.link("test", "parse", "depends_on")
    >>> print(plan.to_context())
    - [~] Ship 1.0 (doing) — plan p
      - [x] Write the parser (done) — step parse
      - [ ] Test the parser (todo) — step test
        - (depends_on) [x] Write the parser (done) — step parse ↑ shown above
    >>> try:  # doctest: +ELLIPSIS
    ...     plan.link("parse", "p")
    ... except CycleError as exc:
    ...     print(exc)
    linking 'parse' → 'p' (contains) would create a cycle: parse → p → parse. ...
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import CtxnbError, CycleError, NotFoundError, StoreError

__all__ = ["DocStore", "Edge", "Node", "RelationError", "RelationStore"]

DOC_TYPE = "relations"
_FORMAT = 1
_UPDATABLE = ("kind", "title", "status", "data")
_CHECKBOX = {"done": "[x]", "doing": "[~]", "blocked": "[!]"}


class RelationError(CtxnbError, ValueError):
    """A relation-store operation is invalid (duplicate id, would orphan a node, ...)."""


@dataclass(frozen=True)
class Node:
    """A plan, step, file, agent or any other kind of item in a relation graph.

    Treat a node as a value: change it with :meth:`RelationStore.update`, not by
    mutating ``data`` in place.

    Attributes:
        id: unique within the graph.
        kind: ``"plan"``, ``"step"``, ``"file"``, ``"agent"`` or any other string.
        title: what the model reads; the id is shown when empty.
        status: ``"todo"``, ``"doing"``, ``"done"``, ``"blocked"`` or any other string.
        data: extra JSON-shaped fields (a file's path, an agent's model, ...).
    """

    id: str
    kind: str = "step"
    title: str = ""
    status: str = "todo"
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Edge:
    """A typed edge that reads "parent *type* child"."""

    parent: str
    child: str
    type: str = "contains"


class DocStore(Protocol):
    """What :meth:`RelationStore.save` and :meth:`RelationStore.load` need of a store.

    :class:`ctxnb.store.objectstore.ObjectStore` has this shape.
    """

    def put(self, docs: list[dict[str, Any]]) -> Any: ...

    def get(self, id: str) -> dict[str, Any] | None: ...


class RelationStore:
    """A multi-parent DAG of :class:`Node` objects joined by typed :class:`Edge` objects.

    Every listing (children, ancestors, roots, ...) is in a deterministic order: nodes in
    the order they were added, edges in the order they were linked, walks breadth-first.

    Args:
        graph_id: names the graph; the stored document's id is ``relations:<graph_id>``.

    Example:
        >>> g = RelationStore("demo")
        >>> _ = g.add(Node("a", kind="plan"))
        >>> _ = g.add(Node("b"), parents=["a"])
        >>> _ = g.add(Node("c"), parents=["a", "b"])
        >>> [n.id for n in g.descendants("a")], [n.id for n in g.parents("c")]
        (['b', 'c'], ['a', 'b'])
        >>> g.would_create_cycle("c", "a")
        True
    """

    def __init__(self, graph_id: str = "default") -> None:
        if not isinstance(graph_id, str) or not graph_id:
            raise RelationError(f"graph_id must be a non-empty string, got {graph_id!r}")
        self.graph_id = graph_id
        self._nodes: dict[str, Node] = {}
        self._edges: dict[tuple[str, str, str], Edge] = {}
        self._out: dict[str, dict[tuple[str, str], Edge]] = {}  # id → (child, type) → edge
        self._in: dict[str, dict[tuple[str, str], Edge]] = {}  # id → (parent, type) → edge

    # --- nodes -------------------------------------------------------------------------

    def add(
        self,
        node: Node,
        parents: str | Iterable[str] = (),
        edge_type: str = "contains",
    ) -> Node:
        """Add ``node``, linked under each of ``parents`` with ``edge_type``.

        Raises:
            RelationError: the id is taken, or a field has the wrong type.
            NotFoundError: a parent does not exist (nothing is added then).
        """
        node = _checked(node)
        if node.id in self._nodes:
            raise RelationError(
                f"a node with id {node.id!r} already exists in graph {self.graph_id!r}; "
                "use update() to change it or pick another id"
            )
        parent_ids = [parents] if isinstance(parents, str) else list(parents)
        for p in parent_ids:
            self._require(p)
        _check_name(edge_type, "edge_type")
        self._nodes[node.id] = node
        self._out[node.id] = {}
        self._in[node.id] = {}
        for p in parent_ids:
            self._add_edge(Edge(p, node.id, edge_type))  # a new node cannot close a cycle
        return node

    def get(self, id: str) -> Node:
        """The node with this id.

        Raises:
            NotFoundError: no such node.
        """
        return self._require(id)

    def update(self, id: str, /, **fields: Any) -> Node:
        """Replace some of a node's fields (``kind``, ``title``, ``status``, ``data``).

        ``data`` is replaced as a whole. Returns the new node.

        Example:
            >>> g = RelationStore()
            >>> _ = g.add(Node("s", title="Write docs"))
            >>> g.update("s", status="done").status
            'done'
        """
        node = self._require(id)
        bad = sorted(set(fields) - set(_UPDATABLE))
        if bad:
            hint = " (ids never change: add a new node and re-link)" if "id" in bad else ""
            raise RelationError(
                f"cannot update field(s) {', '.join(bad)} of node {id!r}{hint}; "
                f"updatable fields are {', '.join(_UPDATABLE)}"
            )
        new = _checked(dataclasses.replace(node, **fields))
        self._nodes[id] = new
        return new

    def remove(self, id: str, *, cascade: bool = False) -> list[str]:
        """Remove a node and its edges; return the ids removed, this one first.

        Args:
            id: the node to remove.
            cascade: also remove every descendant that would be left without a parent.
                Without it, removing the only parent of a child is refused.

        Raises:
            NotFoundError: no such node.
            RelationError: a child would be orphaned and ``cascade`` is false.
        """
        self._require(id)
        if not cascade:
            orphans = [c for c in self._child_ids(id) if set(self._parent_ids(c)) == {id}]
            if orphans:
                raise RelationError(
                    f"removing {id!r} would leave {', '.join(map(repr, orphans))} without a "
                    "parent; pass cascade=True to remove them too, or link them elsewhere "
                    "first"
                )
        below = self._walk(id, self._child_ids) if cascade else []
        doomed_set = {id}
        changed = True
        while changed:  # a descendant goes once all of its parents are going
            changed = False
            for d in below:
                if d not in doomed_set and set(self._parent_ids(d)) <= doomed_set:
                    doomed_set.add(d)
                    changed = True
        doomed = [id, *(d for d in below if d in doomed_set)]
        for d in doomed:
            for e in [*self._in[d].values(), *self._out[d].values()]:
                self._drop_edge(e)
        for d in doomed:
            del self._nodes[d], self._in[d], self._out[d]
        return doomed

    def __contains__(self, id: object) -> bool:
        return id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes.values()))

    def __repr__(self) -> str:
        return (
            f"RelationStore(graph_id={self.graph_id!r}, nodes={len(self._nodes)}, "
            f"edges={len(self._edges)})"
        )

    # --- edges -------------------------------------------------------------------------

    def link(self, parent: str, child: str, edge_type: str = "contains") -> Edge:
        """Add the edge "parent *edge_type* child" (a no-op if it already exists).

        Raises:
            NotFoundError: either node does not exist.
            CycleError: the edge would close a cycle; the message shows it.
        """
        self._require(parent)
        self._require(child)
        _check_name(edge_type, "edge_type")
        existing = self._edges.get((parent, child, edge_type))
        if existing is not None:
            return existing
        path = self._cycle_path(parent, child)
        if path is not None:
            shown = " → ".join(path)
            raise CycleError(
                f"linking {parent!r} → {child!r} ({edge_type}) would create a cycle: {shown}. "
                "Unlink one of these edges first, or link the other way round.",
                cycle=path,
            )
        return self._add_edge(Edge(parent, child, edge_type))

    def unlink(self, parent: str, child: str, edge_type: str | None = None) -> int:
        """Remove the edge(s) from ``parent`` to ``child``; return how many.

        With ``edge_type=None`` every edge between the two goes.

        Raises:
            NotFoundError: there is no such edge.
        """
        gone = [
            e
            for e in self._out.get(parent, {}).values()
            if e.child == child and (edge_type is None or e.type == edge_type)
        ]
        if not gone:
            kind = f" of type {edge_type!r}" if edge_type else ""
            raise NotFoundError(f"no edge{kind} from {parent!r} to {child!r}")
        for e in gone:
            self._drop_edge(e)
        return len(gone)

    def edges(self) -> list[Edge]:
        """Every edge, in the order linked."""
        return list(self._edges.values())

    def by_edge_type(self, edge_type: str) -> list[Edge]:
        """The edges of one type, in the order linked."""
        return [e for e in self._edges.values() if e.type == edge_type]

    # --- queries -----------------------------------------------------------------------

    def parents(self, id: str, edge_type: str | None = None) -> list[Node]:
        """Direct parents, optionally through edges of one type only."""
        self._require(id)
        return [self._nodes[p] for p in self._parent_ids(id, edge_type)]

    def children(self, id: str, edge_type: str | None = None) -> list[Node]:
        """Direct children, optionally through edges of one type only."""
        self._require(id)
        return [self._nodes[c] for c in self._child_ids(id, edge_type)]

    def ancestors(self, id: str, edge_type: str | None = None) -> list[Node]:
        """Every node above ``id``, nearest first (breadth-first), each once."""
        self._require(id)
        return [self._nodes[a] for a in self._walk(id, lambda n: self._parent_ids(n, edge_type))]

    def descendants(self, id: str, edge_type: str | None = None) -> list[Node]:
        """Every node below ``id``, nearest first (breadth-first), each once."""
        self._require(id)
        return [self._nodes[d] for d in self._walk(id, lambda n: self._child_ids(n, edge_type))]

    def roots(self) -> list[Node]:
        """Nodes without parents."""
        return [n for n in self._nodes.values() if not self._in[n.id]]

    def leaves(self) -> list[Node]:
        """Nodes without children."""
        return [n for n in self._nodes.values() if not self._out[n.id]]

    def by_status(self, status: str) -> list[Node]:
        """Nodes with this status."""
        return [n for n in self._nodes.values() if n.status == status]

    def by_kind(self, kind: str) -> list[Node]:
        """Nodes of this kind."""
        return [n for n in self._nodes.values() if n.kind == kind]

    def would_create_cycle(self, parent: str, child: str) -> bool:
        """Whether linking ``parent`` → ``child`` (any edge type) would close a cycle.

        Raises:
            NotFoundError: either node does not exist.
        """
        self._require(parent)
        self._require(child)
        return self._cycle_path(parent, child) is not None

    # --- rendering -----------------------------------------------------------------------

    def to_context(self, root: str | None = None, *, max_depth: int | None = None) -> str:
        """Render the graph (or the subtree under ``root``) as an indented task list.

        Each node is one line: ``- [x] title (status) — kind id``, with ``[ ]`` for
        todo, ``[~]`` doing, ``[x]`` done and ``[!]`` blocked; an edge type other than
        ``contains`` is shown in parentheses before the box. A node with several
        parents is expanded under the first one reached and marked ``↑ shown above``
        under the others, so shared nodes never repeat their subtree.

        Args:
            root: render only this node and what lies below it; default: every root.
            max_depth: levels below the root(s) to show (0: the roots alone); the
                hidden children of the last level are counted on a ``… N more`` line.

        Example:
            >>> g = RelationStore()
            >>> _ = g.add(Node("p", kind="plan", title="Plan"))
            >>> _ = g.add(Node("a", title="A", status="blocked"), parents="p")
            >>> print(g.to_context(max_depth=0))
            - [ ] Plan (todo) — plan p
              - … 1 more
        """
        if max_depth is not None and max_depth < 0:
            raise RelationError(f"max_depth must be >= 0 or None, got {max_depth}")
        start = [self._require(root).id] if root is not None else [n.id for n in self.roots()]
        lines: list[str] = []
        shown: set[str] = set()
        # Iterative depth-first walk: deep plans must not hit the recursion limit.
        stack: list[tuple[str, int, str]] = [(r, 0, "contains") for r in reversed(start)]
        while stack:
            nid, depth, via = stack.pop()
            node = self._nodes[nid]
            indent = "  " * depth
            label = "" if via == "contains" else f"({via}) "
            box = _CHECKBOX.get(node.status, "[ ]")
            line = f"{indent}- {label}{box} {node.title or node.id} ({node.status})"
            line += f" — {node.kind} {node.id}"
            if nid in shown:
                lines.append(line + " ↑ shown above")
                continue
            shown.add(nid)
            lines.append(line)
            out = list(self._out[nid].values())
            if not out:
                continue
            if max_depth is not None and depth >= max_depth:
                lines.append(f"{indent}  - … {len(out)} more")
                continue
            stack.extend((e.child, depth + 1, e.type) for e in reversed(out))
        return "\n".join(lines)

    # --- persistence ---------------------------------------------------------------------

    @property
    def doc_id(self) -> str:
        """The id of this graph's document in an object store."""
        return f"{DOC_TYPE}:{self.graph_id}"

    def to_doc(self) -> dict[str, Any]:
        """The whole graph as one JSON-shaped ``relations`` document."""
        return {
            "xt/id": self.doc_id,
            "type": DOC_TYPE,
            "graph_id": self.graph_id,
            "format": _FORMAT,
            "nodes": [dataclasses.asdict(n) for n in self._nodes.values()],
            "edges": [dataclasses.asdict(e) for e in self._edges.values()],
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> RelationStore:
        """Rebuild a graph from :meth:`to_doc` output (edges are re-checked for cycles).

        Raises:
            StoreError: the document is not a relations document or is malformed.
        """
        if not isinstance(doc, dict) or doc.get("type") != DOC_TYPE:
            got = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
            raise StoreError(f"expected a {DOC_TYPE!r} document, got {got!r}")
        if doc.get("format") != _FORMAT:
            raise StoreError(
                f"relations document {doc.get('xt/id')!r} has format {doc.get('format')!r}; "
                f"this version of ctxnb reads format {_FORMAT}"
            )
        try:
            g = cls(doc["graph_id"])
            for n in doc["nodes"]:
                g.add(Node(**n))
            for e in doc["edges"]:
                g.link(e["parent"], e["child"], e["type"])
        except (KeyError, TypeError, RelationError, NotFoundError, CycleError) as exc:
            raise StoreError(
                f"relations document {doc.get('xt/id')!r} is malformed: {exc}"
            ) from exc
        return g

    def save(self, store: DocStore) -> Any:
        """Write the graph to ``store`` as a new version; return what ``put`` returns.

        Example:
            >>> class Store(dict):
            ...     def put(self, docs):
            ...         self.update({d["xt/id"]: d for d in docs})
            >>> s = Store()
            >>> g = RelationStore("p1")
            >>> _ = g.add(Node("a"))
            >>> g.save(s)
            >>> [n.id for n in RelationStore.load(s, "p1")]
            ['a']
        """
        return store.put([self.to_doc()])

    @classmethod
    def load(cls, store: DocStore, graph_id: str, *, as_of: Any = None) -> RelationStore:
        """Load a saved graph: the latest version, or the one current at ``as_of``.

        Args:
            store: an object store (``put``/``get``; ``as_of`` too when it is used).
            graph_id: the graph's id.
            as_of: a transaction (record or id) or an aware datetime, passed to
                ``store.as_of`` to read the plan as it was then.

        Raises:
            NotFoundError: the store has no such graph (at that time).
            StoreError: the stored document is malformed, or ``as_of`` was given and
                the store keeps no history.

        Example:
            >>> import tempfile
            >>> from ctxnb.store import ObjectStore
            >>> store = ObjectStore(tempfile.mkdtemp())
            >>> g = RelationStore("p1")
            >>> _ = g.add(Node("a", title="Draft"))
            >>> first = g.save(store)
            >>> _ = g.update("a", status="done")
            >>> _ = g.save(store)
            >>> RelationStore.load(store, "p1").get("a").status
            'done'
            >>> RelationStore.load(store, "p1", as_of=first).get("a").status
            'todo'
            >>> store.close()
        """
        doc_id = f"{DOC_TYPE}:{graph_id}"
        if as_of is None:
            doc = store.get(doc_id)
        else:
            reader = getattr(store, "as_of", None)
            if reader is None:
                raise StoreError(
                    f"{type(store).__name__} keeps no history (it has no as_of method); "
                    "load without as_of or use ctxnb.store.objectstore.ObjectStore"
                )
            doc = reader(doc_id, as_of)
        if doc is None:
            when = "" if as_of is None else f" as of {as_of!r}"
            raise NotFoundError(
                f"no relations graph {graph_id!r} in the store{when} (looked for document "
                f"id {doc_id!r}); save() one first"
            )
        return cls.from_doc(doc)

    # --- internals -----------------------------------------------------------------------

    def _require(self, id: str) -> Node:
        try:
            return self._nodes[id]
        except (KeyError, TypeError):
            raise NotFoundError(f"no node {id!r} in graph {self.graph_id!r}") from None

    def _add_edge(self, e: Edge) -> Edge:
        self._edges[(e.parent, e.child, e.type)] = e
        self._out[e.parent][(e.child, e.type)] = e
        self._in[e.child][(e.parent, e.type)] = e
        return e

    def _drop_edge(self, e: Edge) -> None:
        self._edges.pop((e.parent, e.child, e.type), None)
        self._out[e.parent].pop((e.child, e.type), None)
        self._in[e.child].pop((e.parent, e.type), None)

    def _parent_ids(self, id: str, edge_type: str | None = None) -> list[str]:
        return _unique(e.parent for e in self._in[id].values() if edge_type in (None, e.type))

    def _child_ids(self, id: str, edge_type: str | None = None) -> list[str]:
        return _unique(e.child for e in self._out[id].values() if edge_type in (None, e.type))

    def _walk(self, start: str, step: Any) -> list[str]:
        seen = {start}
        order: list[str] = []
        queue = deque([start])
        while queue:
            for nxt in step(queue.popleft()):
                if nxt not in seen:
                    seen.add(nxt)
                    order.append(nxt)
                    queue.append(nxt)
        return order

    def _cycle_path(self, parent: str, child: str) -> list[str] | None:
        """The cycle ``parent → child → … → parent`` a new edge would close, or None."""
        if parent == child:
            return [parent, parent]
        came_from: dict[str, str] = {child: child}
        queue = deque([child])
        while queue:
            cur = queue.popleft()
            for nxt in self._child_ids(cur):
                if nxt in came_from:
                    continue
                came_from[nxt] = cur
                if nxt == parent:
                    path = [parent]
                    while path[-1] != child:
                        path.append(came_from[path[-1]])
                    return [parent, *reversed(path)]
                queue.append(nxt)
        return None


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _check_name(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise RelationError(f"{what} must be a non-empty string, got {value!r}")


def _checked(node: Node) -> Node:
    """Validate a node and detach its data from the caller's dict."""
    if not isinstance(node, Node):
        raise RelationError(f"expected a Node, got {type(node).__name__}")
    _check_name(node.id, "Node.id")
    _check_name(node.kind, f"kind of node {node.id!r}")
    _check_name(node.status, f"status of node {node.id!r}")
    if not isinstance(node.title, str):
        raise RelationError(f"title of node {node.id!r} must be a string, got {node.title!r}")
    if not isinstance(node.data, dict):
        raise RelationError(
            f"data of node {node.id!r} must be a dict, got {type(node.data).__name__}"
        )
    try:
        # A JSON round trip both checks the data can be saved and copies it.
        data = json.loads(json.dumps(node.data, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise RelationError(f"data of node {node.id!r} is not JSON-shaped: {exc}") from None
    return dataclasses.replace(node, data=data)
