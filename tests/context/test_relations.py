from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxnb.context.relations import Edge, Node, RelationError, RelationStore
from ctxnb.errors import CtxnbError, CycleError, NotFoundError, StoreError
from ctxnb.store.objectstore import ObjectStore, TxRecord


def ids(nodes: list[Node]) -> list[str]:
    return [n.id for n in nodes]


@pytest.fixture
def plan() -> RelationStore:
    """p contains s1, s2, s3; s2 depends_on s1; s2 touches f; s3 touches f; a assigned s3."""
    g = RelationStore("plan-1")
    g.add(Node("p", kind="plan", title="Ship it", status="doing"))
    g.add(Node("s1", title="Parse", status="done"), parents="p")
    g.add(Node("s2", title="Test", status="doing"), parents=["p"])
    g.add(Node("s3", title="Docs", status="blocked"), parents=("p",))
    g.link("s2", "s1", "depends_on")
    g.add(Node("f", kind="file", title="src/parse.py", data={"path": "src/parse.py"}))
    g.link("s2", "f", "touches")
    g.link("s3", "f", "touches")
    g.add(Node("a", kind="agent", title="claude"))
    g.link("a", "s3", "assigned")
    return g


# --- nodes -------------------------------------------------------------------------------


def test_add_and_get(plan: RelationStore) -> None:
    assert plan.get("s1") == Node("s1", "step", "Parse", "done", {})
    assert "s1" in plan and "zz" not in plan
    assert len(plan) == 6
    assert ids(list(plan)) == ["p", "s1", "s2", "s3", "f", "a"]


def test_add_duplicate_id_is_refused(plan: RelationStore) -> None:
    with pytest.raises(RelationError, match="'s1' already exists"):
        plan.add(Node("s1"))


def test_add_under_missing_parent_adds_nothing(plan: RelationStore) -> None:
    with pytest.raises(NotFoundError, match="no node 'nope'"):
        plan.add(Node("x"), parents=["p", "nope"])
    assert "x" not in plan
    assert ids(plan.children("p")) == ["s1", "s2", "s3"]


def test_add_with_edge_type(plan: RelationStore) -> None:
    plan.add(Node("g", kind="file"), parents=["s1", "s2"], edge_type="touches")
    assert plan.by_edge_type("touches")[-2:] == [
        Edge("s1", "g", "touches"),
        Edge("s2", "g", "touches"),
    ]


@pytest.mark.parametrize(
    "node",
    [
        Node(""),
        Node("x", kind=""),
        Node("x", status=None),  # type: ignore[arg-type]
        Node("x", title=3),  # type: ignore[arg-type]
        Node("x", data=[1]),  # type: ignore[arg-type]
        Node("x", data={"s": {1, 2}}),
        Node("x", data={"n": float("nan")}),
    ],
)
def test_invalid_nodes_are_refused(node: Node) -> None:
    with pytest.raises(RelationError):
        RelationStore().add(node)


def test_node_data_is_copied_on_the_way_in() -> None:
    g = RelationStore()
    data: dict[str, Any] = {"tags": ["a"]}
    g.add(Node("x", data=data))
    data["tags"].append("b")
    assert g.get("x").data == {"tags": ["a"]}


def test_update(plan: RelationStore) -> None:
    new = plan.update("s2", status="done", data={"pr": 12})
    assert new == plan.get("s2") == Node("s2", "step", "Test", "done", {"pr": 12})
    assert ids(plan.children("s2")) == ["s1", "f"]  # edges survive updates


def test_update_refuses_id_and_unknown_fields(plan: RelationStore) -> None:
    with pytest.raises(RelationError, match="ids never change"):
        plan.update("s1", id="s9")
    with pytest.raises(RelationError, match="updatable fields are kind, title, status, data"):
        plan.update("s1", colour="red")
    with pytest.raises(RelationError):
        plan.update("s1", status="")
    with pytest.raises(NotFoundError):
        plan.update("nope", status="done")
    assert plan.get("s1").status == "done"


def test_remove_leaf(plan: RelationStore) -> None:
    assert plan.remove("a") == ["a"]
    assert "a" not in plan
    assert plan.by_edge_type("assigned") == []


def test_remove_refuses_to_orphan(plan: RelationStore) -> None:
    # s1 also hangs under s2 and s3 under agent a; only s2 would be orphaned.
    with pytest.raises(RelationError, match=r"leave 's2' without a parent.*cascade=True"):
        plan.remove("p")
    assert len(plan) == 6 and len(plan.edges()) == 7


def test_remove_detaches_child_with_other_parents(plan: RelationStore) -> None:
    # f is touched by s2 and s3: removing s3 only detaches it.
    assert plan.remove("s3") == ["s3"]
    assert ids(plan.parents("f")) == ["s2"]
    assert ids(plan.children("a")) == []


def test_remove_cascade_keeps_shared_descendants(plan: RelationStore) -> None:
    plan.add(Node("s4"), parents="s2")
    plan.add(Node("shared"), parents=["s4", "a"])
    removed = plan.remove("s2", cascade=True)
    # s1 still has p, f still has s3, shared still has a: only s4 goes with s2.
    assert removed == ["s2", "s4"]
    assert ids(plan.parents("shared")) == ["a"]
    assert ids(plan.parents("f")) == ["s3"]
    assert all("s2" not in (e.parent, e.child) for e in plan.edges())


def test_remove_cascade_whole_plan(plan: RelationStore) -> None:
    removed = plan.remove("p", cascade=True)
    # s3 is still assigned to agent a, so it stays (and keeps f).
    assert removed == ["p", "s1", "s2"]
    assert ids(list(plan)) == ["s3", "f", "a"]


def test_remove_cascade_diamond() -> None:
    g = RelationStore()
    g.add(Node("r"))
    g.add(Node("x"), parents="r")
    g.add(Node("y"), parents="r")
    g.add(Node("z"), parents=["x", "y"])
    assert sorted(g.remove("r", cascade=True)) == ["r", "x", "y", "z"]
    assert len(g) == 0 and g.edges() == []


def test_get_missing_is_not_found_and_a_key_error() -> None:
    with pytest.raises(KeyError):
        RelationStore().get("x")
    with pytest.raises(NotFoundError, match="no node 'x' in graph 'default'"):
        RelationStore().get("x")


# --- edges and queries ---------------------------------------------------------------------


def test_parents_and_children_with_types(plan: RelationStore) -> None:
    assert ids(plan.children("s2")) == ["s1", "f"]
    assert ids(plan.children("s2", "touches")) == ["f"]
    assert ids(plan.parents("s1")) == ["p", "s2"]
    assert ids(plan.parents("s1", "contains")) == ["p"]
    assert ids(plan.parents("s3", "assigned")) == ["a"]


def test_two_edge_types_between_one_pair_list_the_node_once(plan: RelationStore) -> None:
    plan.link("s2", "s1", "blocks")
    assert ids(plan.children("s2")) == ["s1", "f"]
    assert plan.unlink("s2", "s1") == 2
    assert ids(plan.children("s2")) == ["f"]


def test_link_is_idempotent(plan: RelationStore) -> None:
    before = plan.edges()
    assert plan.link("p", "s1") == Edge("p", "s1", "contains")
    assert plan.edges() == before


def test_unlink_one_type(plan: RelationStore) -> None:
    assert plan.unlink("s2", "s1", "depends_on") == 1
    assert ids(plan.parents("s1")) == ["p"]
    with pytest.raises(NotFoundError, match="no edge of type 'depends_on' from 's2' to 's1'"):
        plan.unlink("s2", "s1", "depends_on")
    with pytest.raises(NotFoundError):
        plan.unlink("nope", "s1")


def test_ancestors_and_descendants_breadth_first(plan: RelationStore) -> None:
    assert ids(plan.descendants("p")) == ["s1", "s2", "s3", "f"]
    assert ids(plan.descendants("p", "contains")) == ["s1", "s2", "s3"]
    assert ids(plan.ancestors("f")) == ["s2", "s3", "p", "a"]
    assert ids(plan.ancestors("s1", "depends_on")) == ["s2"]
    assert plan.ancestors("p") == [] and plan.descendants("f") == []


def test_roots_leaves_status_kind_edge_type(plan: RelationStore) -> None:
    assert ids(plan.roots()) == ["p", "a"]
    assert ids(plan.leaves()) == ["s1", "f"]
    assert ids(plan.by_status("doing")) == ["p", "s2"]
    assert ids(plan.by_status("nope")) == []
    assert ids(plan.by_kind("file")) == ["f"]
    assert plan.by_edge_type("touches") == [Edge("s2", "f", "touches"), Edge("s3", "f", "touches")]


# --- cycles ------------------------------------------------------------------------------


def test_cycle_is_refused_with_path() -> None:
    g = RelationStore()
    for n in "abc":
        g.add(Node(n))
    g.link("b", "c")
    g.link("c", "a", "depends_on")
    assert g.would_create_cycle("a", "b")
    with pytest.raises(CycleError, match="a → b → c → a") as info:
        g.link("a", "b", "depends_on")
    assert info.value.cycle == ["a", "b", "c", "a"]
    assert isinstance(info.value, CtxnbError) and isinstance(info.value, ValueError)
    assert g.edges() == [Edge("b", "c"), Edge("c", "a", "depends_on")]


def test_self_loop_is_a_cycle() -> None:
    g = RelationStore()
    g.add(Node("a"))
    assert g.would_create_cycle("a", "a")
    with pytest.raises(CycleError, match="a → a"):
        g.link("a", "a")


def test_diamond_is_not_a_cycle(plan: RelationStore) -> None:
    assert not plan.would_create_cycle("p", "f")
    plan.link("p", "f", "touches")
    assert not plan.would_create_cycle("a", "s1")
    assert plan.would_create_cycle("f", "p")
    assert plan.would_create_cycle("s1", "s2")


def test_would_create_cycle_unknown_node() -> None:
    with pytest.raises(NotFoundError):
        RelationStore().would_create_cycle("x", "y")


def test_cycle_path_is_shortest() -> None:
    g = RelationStore()
    for n in ["a", "b", "c", "d"]:
        g.add(Node(n))
    g.link("a", "b")
    g.link("b", "c")
    g.link("c", "d")
    g.link("a", "d")
    with pytest.raises(CycleError) as info:
        g.link("d", "a")
    assert info.value.cycle == ["d", "a", "d"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=40))
def test_random_links_never_make_a_cycle(pairs: list[tuple[int, int]]) -> None:
    g = RelationStore()
    for i in range(8):
        g.add(Node(str(i)))
    for a, b in pairs:
        expect_cycle = g.would_create_cycle(str(a), str(b))
        try:
            g.link(str(a), str(b))
        except CycleError as exc:
            assert expect_cycle
            assert exc.cycle[0] == exc.cycle[-1] == str(a)
        else:
            assert not expect_cycle
    for n in g:
        assert n.id not in ids(g.descendants(n.id))


# --- rendering -----------------------------------------------------------------------------


def test_to_context_full(plan: RelationStore) -> None:
    assert plan.to_context() == "\n".join(
        [
            "- [~] Ship it (doing) — plan p",
            "  - [x] Parse (done) — step s1",
            "  - [~] Test (doing) — step s2",
            "    - (depends_on) [x] Parse (done) — step s1 ↑ shown above",
            "    - (touches) [ ] src/parse.py (todo) — file f",
            "  - [!] Docs (blocked) — step s3",
            "    - (touches) [ ] src/parse.py (todo) — file f ↑ shown above",
            "- [ ] claude (todo) — agent a",
            "  - (assigned) [!] Docs (blocked) — step s3 ↑ shown above",
        ]
    )


def test_to_context_subtree_and_depth(plan: RelationStore) -> None:
    assert plan.to_context("s3") == (
        "- [!] Docs (blocked) — step s3\n  - (touches) [ ] src/parse.py (todo) — file f"
    )
    assert plan.to_context(max_depth=1).splitlines()[2:5] == [
        "  - [~] Test (doing) — step s2",
        "    - … 2 more",
        "  - [!] Docs (blocked) — step s3",
    ]
    with pytest.raises(RelationError):
        plan.to_context(max_depth=-1)
    with pytest.raises(NotFoundError):
        plan.to_context("nope")


def test_to_context_title_falls_back_to_id_and_unknown_status() -> None:
    g = RelationStore()
    g.add(Node("x", kind="task", status="review"))
    assert g.to_context() == "- [ ] x (review) — task x"
    assert RelationStore().to_context() == ""


def test_to_context_shared_subtree_is_expanded_once() -> None:
    # A ladder of diamonds: 2**20 paths from the top, but each node shows at most twice.
    g = RelationStore()
    g.add(Node("n0"))
    for i in range(1, 21):
        g.add(Node(f"l{i}"), parents=f"n{i - 1}")
        g.add(Node(f"r{i}"), parents=f"n{i - 1}")
        g.add(Node(f"n{i}"), parents=[f"l{i}", f"r{i}"])
    lines = g.to_context().splitlines()
    assert len(lines) == 1 + 20 * 4
    assert sum("n20" in line for line in lines) == 2


def test_deep_chain_does_not_hit_recursion_limit() -> None:
    g = RelationStore()
    depth = sys.getrecursionlimit() + 100
    g.add(Node("0"))
    for i in range(1, depth):
        g.add(Node(str(i)), parents=str(i - 1))
    assert len(g.to_context().splitlines()) == depth
    assert len(g.descendants("0")) == depth - 1
    assert g.would_create_cycle(str(depth - 1), "0")


def test_repr_is_cheap_and_informative(plan: RelationStore) -> None:
    assert repr(plan) == "RelationStore(graph_id='plan-1', nodes=6, edges=7)"


# --- persistence -----------------------------------------------------------------------------


class DictStore:
    """The smallest store save/load accept: put and get, latest version only."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}

    def put(self, docs: list[dict[str, Any]]) -> str:
        for d in docs:
            self.docs[d["xt/id"]] = copy.deepcopy(d)
        return "ok"

    def get(self, id: str) -> dict[str, Any] | None:
        d = self.docs.get(id)
        return copy.deepcopy(d) if d is not None else None


@pytest.fixture
def object_store(tmp_path: Path) -> Iterator[ObjectStore]:
    store = ObjectStore(tmp_path / "store")
    yield store
    store.close()


@pytest.mark.parametrize("kind", ["object_store", "dict"])
def test_round_trip(plan: RelationStore, kind: str, request: pytest.FixtureRequest) -> None:
    store = request.getfixturevalue("object_store") if kind == "object_store" else DictStore()
    result = plan.save(store)
    if kind == "object_store":
        assert isinstance(result, TxRecord) and result.count == 1
    loaded = RelationStore.load(store, "plan-1")
    assert loaded.to_doc() == plan.to_doc()
    assert loaded.to_context() == plan.to_context()
    assert ids(list(loaded)) == ids(list(plan)) and loaded.edges() == plan.edges()
    assert loaded.get("f").data == {"path": "src/parse.py"}
    with pytest.raises(CycleError):
        loaded.link("s1", "p")


def test_round_trip_survives_reopening_the_store(plan: RelationStore, tmp_path: Path) -> None:
    with_store = ObjectStore(tmp_path / "s")
    plan.save(with_store)
    with_store.close()
    reopened = ObjectStore(tmp_path / "s", create=False)
    try:
        assert RelationStore.load(reopened, "plan-1").to_doc() == plan.to_doc()
    finally:
        reopened.close()


def test_each_save_is_a_new_version(plan: RelationStore, object_store: ObjectStore) -> None:
    first = plan.save(object_store)
    plan.update("s2", status="done")
    plan.add(Node("s5", title="Release"), parents="p")
    plan.save(object_store)
    assert RelationStore.load(object_store, "plan-1").get("s2").status == "done"
    history = object_store.history(plan.doc_id)
    statuses = [{n["id"]: n["status"] for n in v.doc["nodes"]}["s2"] for v in history]
    assert statuses == ["doing", "done"]
    old = RelationStore.load(object_store, "plan-1", as_of=first)
    assert old.get("s2").status == "doing" and "s5" not in old


def test_load_as_of_needs_a_store_with_history(plan: RelationStore) -> None:
    store = DictStore()
    plan.save(store)
    with pytest.raises(StoreError, match="keeps no history"):
        RelationStore.load(store, "plan-1", as_of=1)


def test_load_as_of_before_the_graph_existed(
    plan: RelationStore, object_store: ObjectStore
) -> None:
    first = object_store.put([{"xt/id": "other", "type": "note"}])
    plan.save(object_store)
    with pytest.raises(NotFoundError, match="as of"):
        RelationStore.load(object_store, "plan-1", as_of=first)


def test_saved_document_shape(plan: RelationStore) -> None:
    doc = plan.to_doc()
    assert doc["xt/id"] == "relations:plan-1" and doc["type"] == "relations"
    assert doc["edges"][0] == {"parent": "p", "child": "s1", "type": "contains"}
    assert doc["nodes"][0] == {
        "id": "p",
        "kind": "plan",
        "title": "Ship it",
        "status": "doing",
        "data": {},
    }


def test_load_missing_graph(object_store: ObjectStore) -> None:
    with pytest.raises(NotFoundError, match="no relations graph 'x'.*save"):
        RelationStore.load(object_store, "x")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(type="file"),
        lambda d: d.update(format=99),
        lambda d: d["edges"].append({"parent": "s1", "child": "p", "type": "contains"}),
        lambda d: d["edges"].append({"parent": "p", "child": "ghost", "type": "contains"}),
        lambda d: d["nodes"].append({"id": "p"}),
        lambda d: d["nodes"].append({"id": "q", "colour": "red"}),
        lambda d: d.pop("nodes"),
    ],
)
def test_malformed_documents_are_store_errors(plan: RelationStore, mutate: Any) -> None:
    doc = plan.to_doc()
    mutate(doc)
    with pytest.raises(StoreError):
        RelationStore.from_doc(doc)


def test_bad_graph_id() -> None:
    with pytest.raises(RelationError):
        RelationStore("")
