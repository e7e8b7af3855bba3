import pytest

from ctxnb.hashing import content_hash, identity_hash
from ctxnb.model import (
    CONTENT_TYPES,
    INFRA_TYPES,
    ChatObject,
    FileObject,
    FilesystemSource,
    SessionObject,
    SystemPromptObject,
    ToolCallObject,
    model_for_type,
)


def test_file_object_json_shape():
    src = FilesystemSource(filesystem_id="fs1", path="/ws/a.py")
    obj = FileObject.new(src, content="x = 1\n", file_type="python", data=b"x = 1\n")
    doc = obj.to_doc()
    assert doc["xt/id"] == identity_hash("file", src.to_dict())
    assert doc["source"] == {"type": "filesystem", "filesystemId": "fs1", "path": "/ws/a.py"}
    assert doc["identity_hash"] == doc["xt/id"]
    assert doc["char_count"] == 6
    assert doc["content_hash"] == content_hash(obj.payload())
    assert FileObject.from_doc(doc) == obj


def test_every_type_round_trips():
    objs = [
        ToolCallObject(id="t1", tool="read_file", args={"path": "a"}, status="fail", content="e"),
        SystemPromptObject(id="s1", content="You are helpful."),
        ChatObject(id="c1", turns=[{"role": "user", "content": "hi"}], turn_count=1),
        SessionObject(id="x1", session_id="x1", session_index=["a"], active_set=["a"]),
    ]
    for o in objs:
        doc = o.to_doc()
        assert doc["type"] == o.TYPE
        assert model_for_type(doc["type"]).from_doc(doc) == o


def test_families_are_disjoint():
    assert CONTENT_TYPES == {"file", "toolcall"}
    assert INFRA_TYPES == {"system_prompt", "chat", "session"}


def test_unknown_type_and_bad_values():
    with pytest.raises(ValueError, match="known types"):
        model_for_type("folder")
    with pytest.raises(ValueError):
        ToolCallObject(id="t", tool="x", status="maybe")
