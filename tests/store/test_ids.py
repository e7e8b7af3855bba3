"""Ids as people type them: full, ``<id>@<tx>`` and unique prefixes (``ctxnb.ids``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxnb.errors import NotFoundError
from ctxnb.ids import parse_version_id, resolve_id, resolve_version, short_id
from ctxnb.store.objectstore import ObjectStore


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    s = ObjectStore(tmp_path / "store")
    s.put([{"xt/id": i, "type": "file"} for i in ("abc1", "abc2", "abd0", "b")])
    s.put([{"xt/id": "sess-1", "type": "session"}, {"xt/id": "abc1", "type": "file", "v": 2}])
    return s


def test_full_ids_and_unique_prefixes(store: ObjectStore) -> None:
    assert resolve_id(store, "abc1") == "abc1"
    assert resolve_id(store, "abd") == "abd0"
    assert resolve_id(store, "b") == "b"
    assert resolve_version(store, "abd@1") == ("abd0", 1)
    assert resolve_version(store, "abc1@2") == ("abc1", 2)
    assert parse_version_id("x@y@3") == ("x@y", 3)  # the tx is after the last @


def test_an_exact_id_wins_over_longer_ids_it_prefixes(tmp_path: Path) -> None:
    s = ObjectStore(tmp_path / "s")
    s.put([{"xt/id": "ab", "type": "file"}, {"xt/id": "abc", "type": "file"}])
    assert resolve_id(s, "ab") == "ab"
    assert short_id(s, "ab", min_len=1) == "ab"
    assert short_id(s, "abc", min_len=1) == "abc"


def test_ambiguous_and_missing_ids_say_what_to_do(store: ObjectStore) -> None:
    with pytest.raises(NotFoundError, match=r"'ab' is ambiguous: it matches 3 objects") as e:
        resolve_id(store, "ab")
    assert all(c in str(e.value) for c in ("abc1", "abc2", "abd0"))
    with pytest.raises(NotFoundError, match="nor an id starting with it"):
        resolve_id(store, "zz")
    with pytest.raises(NotFoundError, match="empty id"):
        resolve_id(store, "")
    for bad in ("abc1@", "abc1@x", "@3", "abc1@-1"):
        with pytest.raises(NotFoundError, match="<id>@<tx>"):
            resolve_version(store, bad)


def test_a_type_narrows_the_candidates(store: ObjectStore) -> None:
    assert resolve_id(store, "s", type="session") == "sess-1"
    with pytest.raises(NotFoundError, match="stored sessions: sess-1"):
        resolve_id(store, "abc1", type="session")  # a file, not a session


def test_short_ids_are_unique_and_at_least_min_len(store: ObjectStore) -> None:
    assert short_id(store, "abc1", min_len=1) == "abc1"
    assert short_id(store, "abd0", min_len=1) == "abd"
    assert short_id(store, "abd0") == "abd0"  # never longer than the id
    for oid in store.ids():
        assert resolve_id(store, short_id(store, oid, min_len=1)) == oid


def test_a_new_id_is_a_random_uuid_as_uuid4_writes_it() -> None:
    import uuid

    from ctxnb.ids import new_id

    made = [new_id() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for text in made:
        u = uuid.UUID(text)
        assert (u.version, u.variant, str(u)) == (4, uuid.RFC_4122, text)
    # Every one of the 122 random bits takes both values across the ids.
    bits = [uuid.UUID(t).int for t in made]
    fixed = (0xF << 76) | (0x3 << 62)  # the version's and the variant's bits
    ones = zeros = 0
    for b in bits:
        ones |= b
        zeros |= ~b
    assert (ones & zeros & ((1 << 128) - 1)) == ((1 << 128) - 1) & ~fixed
