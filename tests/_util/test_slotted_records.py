"""The records on the hook's import path behave as the dataclasses they replaced.

``ctxnb/_util/record.py`` gives a dozen small classes a frozen dataclass's behaviour without
importing :mod:`dataclasses` (see docs/decisions.md, issue 26). Each guarantee a caller
could lean on is attacked here: assignment and deletion, equality across types, hashing,
pickling (workers receive records by value), copies, and the validation a record did in
``__post_init__``.
"""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path

import pytest

from ctxnb._util.jsonl import SkippedLine
from ctxnb._util.record import FrozenRecord, Record
from ctxnb.access._safepath import SafePath, _Parsed, _Root
from ctxnb.access.observe import IndexResult, Observation
from ctxnb.errors import ResolverError
from ctxnb.govern.chain import ChainReport
from ctxnb.redaction._patterns import RULES, Rule
from ctxnb.redaction.redactor import Finding, RedactionResult, redact
from ctxnb.resolver import MountMapping

ROOT = _Root(Path("/ws"), Path("/ws"))
FROZEN = [
    SkippedLine(3, "not a JSON object", "[1, 2]"),
    Observation("oid", "updated", 4, {"a": 1}, "sha"),
    IndexResult("oid", "created"),
    Finding("github-token", 1, 5, 45),
    RedactionResult("x", (Finding("aws", 2, 0, 20),)),
    MountMapping("/workspace", "/home/me/proj", "fs1"),
    SafePath(rel="a/b.py", root=Path("/ws"), abs=Path("/ws/a/b.py")),
    ROOT,
    _Parsed(ROOT, ("a", "b.py"), False, "a/b.py"),
]


@pytest.mark.parametrize("rec", FROZEN, ids=lambda r: type(r).__name__)
def test_a_frozen_record_refuses_assignment_and_deletion(rec: FrozenRecord) -> None:
    name = rec.__slots__[0]
    before = getattr(rec, name)
    with pytest.raises(AttributeError, match="immutable"):
        setattr(rec, name, "changed")
    with pytest.raises(AttributeError, match="immutable"):
        delattr(rec, name)
    with pytest.raises(AttributeError):
        rec.not_a_field = 1  # type: ignore[attr-defined]
    assert getattr(rec, name) == before


@pytest.mark.parametrize("rec", FROZEN, ids=lambda r: type(r).__name__)
def test_a_frozen_record_survives_pickle_and_copies_equal(rec: FrozenRecord) -> None:
    for other in (pickle.loads(pickle.dumps(rec)), copy.copy(rec), copy.deepcopy(rec)):
        assert other == rec and other is not rec
        assert type(other) is type(rec)
        if all(isinstance(v, str | int | bool | tuple | Path | type(None)) for v in rec._values()):
            assert hash(other) == hash(rec)
    assert repr(rec).startswith(f"{type(rec).__name__}(")


def test_equality_is_by_type_and_every_field() -> None:
    a = Finding("rule", 1, 2, 3)
    assert a == Finding("rule", 1, 2, 3)
    assert a != Finding("rule", 1, 2, 4)
    assert len({a, Finding("rule", 1, 2, 3)}) == 1

    class Other(FrozenRecord):
        __slots__ = ("rule", "line", "start", "end")

        def __init__(self, rule: str, line: int, start: int, end: int) -> None:
            self._fill(rule, line, start, end)

    # The same fields in another class are not equal (as dataclasses of two types).
    assert a != Other("rule", 1, 2, 3)
    assert a != ("rule", 1, 2, 3)


def test_fields_must_all_be_given() -> None:
    class Pair(FrozenRecord):
        __slots__ = ("a", "b")

    with pytest.raises(ValueError):
        Pair()._fill(1)  # one value for two fields


def test_a_mount_mapping_still_refuses_relative_prefixes_and_normalizes() -> None:
    with pytest.raises(ResolverError, match="agent_prefix must be an absolute"):
        MountMapping("workspace", "/home/me", "fs")
    with pytest.raises(ResolverError, match="canonical_prefix must be an absolute"):
        MountMapping("/workspace", "", "fs")
    m = MountMapping("/workspace//a/../b/", "/home/./me", "fs")
    assert (m.agent_prefix, m.canonical_prefix) == ("/workspace/b", "/home/me")
    assert pickle.loads(pickle.dumps(m)) == m


def test_the_chain_report_is_a_mutable_unhashable_record() -> None:
    report = ChainReport(ok=True, lines=2)
    other = ChainReport(ok=True, lines=2)
    report.unreadable.append(1)
    assert other.unreadable == []  # each report has its own list, as a default_factory
    report.unchained += 1
    assert report == ChainReport(True, 2, None, "", [1], 1)
    assert isinstance(report, Record) and not isinstance(report, FrozenRecord)
    with pytest.raises(TypeError):
        hash(report)


def test_the_secret_rules_keep_their_defaults() -> None:
    rule = Rule("r", re.compile("x"))
    assert (rule.keywords, rule.groups, rule.accept, rule.line_must) == ((), ("secret",), None, "")
    assert not (rule.strip_whitespace or rule.line_scoped or rule.anchored or rule.word_start)
    assert len(set(RULES)) == len(RULES)  # hashable, and no two rules alike
    # A rule from the table works end to end (the record holds its lazy pattern).
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    result = redact(f"token = {token}")
    assert token not in result.text and result.count == 1
    assert isinstance(result.findings[0], Finding)
