"""``ctxnb a2a serve`` held to the A2A compatibility kit's mandatory cases.

The A2A project's TCK (github.com/a2aproject/a2a-tck, ``tests/mandatory/``) is not on
the package registries, so its mandatory cases that apply to a JSON-RPC server are
written again here, against a real ``ctxnb a2a serve`` on 127.0.0.1: through the
a2a-sdk's own client where it can say the request, as raw JSON-RPC over HTTP where the
case is a malformed request no client would send. ``docs/integrations.md`` maps each
TCK case to the test here that covers it, or says why it does not apply.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("a2a") and has_module("starlette"), "the A2A SDK (ctxnb[a2a])")

import httpx  # noqa: E402
from _agent_workspace import (  # noqa: E402
    SUBMIT,
    TIMEOUT,
    make_workspace,
    require_live_agent,
    run_with_deadline,
)
from a2a.client import ClientCallContext, ClientConfig, create_client  # noqa: E402
from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402
from a2a.utils.errors import (  # noqa: E402
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from test_a2a import message  # noqa: E402

require_live_agent()
pytestmark = pytest.mark.slow

CARD = ".well-known/agent-card.json"
RM = {"content": "Clearing.", "commands": ["rm notes_a.txt"]}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


@pytest.fixture
def serve(ws: Path) -> Any:
    from test_a2a import Served

    servers: list[Any] = []

    def start(script: list[dict[str, Any]], *extra: str) -> Any:
        servers.append(Served(ws, script, *extra))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


class Rpc:
    """Raw JSON-RPC 2.0 to the server, as the TCK sends it (A2A 1.0 method names)."""

    def __init__(self, server: Any) -> None:
        self.url = server.url
        self.http = httpx.Client(timeout=TIMEOUT, headers=server.auth)

    def raw(self, body: bytes | dict[str, Any], version: str = "1.0") -> dict[str, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "A2A-Version": version}
        r = self.http.post(self.url, content=data, headers=headers)
        assert r.status_code == 200, r.text  # JSON-RPC errors come with HTTP 200
        reply: dict[str, Any] = r.json()
        return reply

    def call(self, method: str, params: Any, rid: Any = "r1") -> dict[str, Any]:
        return self.raw({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def send(self, *parts: dict[str, Any], **ids: str) -> dict[str, Any]:
        msg = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": list(parts), **ids}
        return self.call("SendMessage", {"message": msg})

    def close(self) -> None:
        self.http.close()


def error_of(reply: dict[str, Any], code: int, rid: Any = "r1") -> str:
    """The error's message, once the reply is checked to be a JSON-RPC error of ``code``
    in the shape JSON-RPC 2.0 fixes (TCK ``test_error_response_completeness``)."""
    assert reply.get("jsonrpc") == "2.0" and "result" not in reply, reply
    assert reply.get("id") == rid, reply
    err = reply["error"]
    assert err["code"] == code, reply
    assert isinstance(err["message"], str) and err["message"].strip(), reply
    return str(err["message"])


def test_the_agent_card_is_public_and_says_a_bearer_token_is_required(ws: Path, serve: Any) -> None:
    """TCK protocol/test_agent_card*.py, security/test_agent_card_security.py and
    authentication/*: the card is read without credentials, has every required field,
    declares the one scheme the server enforces, and every other request without a
    valid token is refused at the HTTP level with a Bearer challenge."""
    server = serve([])
    with httpx.Client(timeout=30) as anon:
        card_reply = anon.get(server.url + CARD)
        rebound = anon.get(server.url + CARD, headers={"Host": "evil.example:80"})
        posted = anon.post(server.url + CARD, json={})
        refused = []
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t-1"}}
        for auth in (None, "Bearer invalid-dummy-jwt-token-12345", "Basic aW52YWxpZDppbnZhbGlk"):
            headers = {"Authorization": auth} if auth else {}
            refused.append(anon.post(server.url, json=body, headers=headers))
    log = server.close()

    assert card_reply.status_code == 200
    card = card_reply.json()
    for field, kind in [("name", str), ("description", str), ("version", str),
                        ("supportedInterfaces", list), ("capabilities", dict),
                        ("defaultInputModes", list), ("defaultOutputModes", list),
                        ("skills", list)]:  # fmt: skip
        assert isinstance(card.get(field), kind), field
    assert all(isinstance(m, str) for m in card["defaultInputModes"] + card["defaultOutputModes"])
    assert card["supportedInterfaces"] == [
        {"url": server.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    for skill in card["skills"]:
        assert {"id", "name", "description", "tags"} <= set(skill)
    # One scheme, of a type the spec knows, and every requirement names a declared one.
    assert list(card["securitySchemes"]) == ["bearer"]
    assert list(card["securitySchemes"]["bearer"]) == ["httpAuthSecurityScheme"]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert server.token not in card_reply.text and server.token in log
    # Host and Origin hold for the public card; only a GET of it is public.
    assert rebound.status_code == 421 and posted.status_code == 401
    for r in refused:
        assert r.status_code == 401, r.text
        assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_the_sdk_client_learns_from_the_card_to_send_its_token(ws: Path, serve: Any) -> None:
    """TCK authentication/test_auth_compliance_v030.py: a client that knows only the
    URL and a credential for the scheme the card names is let in; without the
    credential it is not."""
    server = serve([])

    async def body() -> tuple[Any, Any]:
        store = InMemoryContextCredentialStore()
        await store.set_credentials("s-1", "bearer", server.token)
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:  # no Authorization header
            config = ClientConfig(streaming=False, httpx_client=http)
            client = await create_client(server.url, config, [AuthInterceptor(store)])
            async with client:
                with pytest.raises(TaskNotFoundError) as known:
                    ctx = ClientCallContext(state={"sessionId": "s-1"})
                    await client.get_task(pb.GetTaskRequest(id="no-such-task"), context=ctx)
                with pytest.raises(Exception) as stranger:
                    ctx = ClientCallContext(state={"sessionId": "s-2"})
                    await client.get_task(pb.GetTaskRequest(id="no-such-task"), context=ctx)
        return known.value, stranger.value

    known, stranger = run_with_deadline(body())
    server.close()
    assert isinstance(known, TaskNotFoundError)  # authenticated: the server looked
    assert "401" in str(stranger)


def test_json_rpc_errors_have_the_shapes_the_tck_requires(ws: Path, serve: Any) -> None:
    """TCK jsonrpc/test_json_rpc_compliance.py, test_protocol_violations.py and
    quality/test_error_validation_enhanced.py: each malformed request gets its JSON-RPC
    error code, with the request's id when it had a usable one, and starts nothing."""
    server = serve([])
    rpc = Rpc(server)
    msg = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
    try:
        parse = rpc.raw(b'{"jsonrpc": "2.0", "method": "SendMessage", "params": {"foo": "bar"}')
        cases = [
            (rpc.raw({"jsonrpc": "aaa", "method": "SendMessage", "params": {}}), -32600, None),
            (
                rpc.raw(
                    {
                        "jsonrpc": "1.0",
                        "id": "v1",
                        "method": "SendMessage",
                        "params": {"message": msg},
                    }
                ),
                -32600,
                "v1",
            ),  # fmt: skip
            (rpc.raw({"jsonrpc": "2.0", "params": {}}), -32600, None),
            (rpc.raw({"jsonrpc": "2.0", "id": "m1", "params": {}}), -32600, "m1"),
            (
                rpc.raw(
                    {"jsonrpc": "2.0", "method": "SendMessage", "params": {}, "id": {"bad": "type"}}
                ),
                -32600,
                None,
            ),  # fmt: skip
            (rpc.call("SendMessageXXX", {}, "3"), -32601, "3"),
            (rpc.call("nonexistent/method", {}, "u1"), -32601, "u1"),
            (rpc.call("SendMessage", {"": "not_a_dict"}, "4"), -32602, "4"),
            (rpc.call("SendMessage", {"message": {"parts": "invalid"}}), -32602, "r1"),
            (rpc.call("SendMessage", {"message": {"kind": "message"}}), -32602, "r1"),
            (rpc.call("GetTask", {"id": "t", "historyLength": -1}), -32602, "r1"),
            (rpc.call("GetTask", {"id": "nonexistent-task-id"}), -32001, "r1"),
            (rpc.call("CancelTask", {"id": "nonexistent-task-id"}), -32001, "r1"),
        ]
        # Two requests with one id each get their own answer under that id.
        first = rpc.call("GetTask", {"id": "a"}, "dup")
        second = rpc.call("ListTasks", {}, "dup")
        listed = rpc.call("ListTasks", {})
    finally:
        rpc.close()
        server.close()

    assert parse["error"]["code"] == -32700 and parse["id"] is None
    for reply, code, rid in cases:
        error_of(reply, code, rid)
    assert first["id"] == second["id"] == "dup" and "result" in second
    assert listed["result"]["tasks"] == []  # none of the above started a task
    assert server.model.requests == []


def test_send_continue_get_and_cancel_through_the_sdk_client(ws: Path, serve: Any) -> None:
    """TCK protocol/test_message_send_method.py, test_tasks_get_method.py,
    test_tasks_cancel_method.py and test_state_transitions.py: SendMessage returns the
    task; a message naming it continues it (here: replies to its approval question);
    GetTask honours historyLength; CancelTask cancels once, then says it cannot; an
    unknown id is -32001 and a finished task takes no more messages (-32004)."""
    server = serve([RM])

    async def body() -> dict[str, Any]:
        got: dict[str, Any] = {}
        headers = {"Authorization": f"Bearer {server.token}"}
        async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
            config = ClientConfig(streaming=False, httpx_client=http)
            client = await create_client(server.url, config)
            async with client:
                sent = [ev async for ev in client.send_message(message("clear the notes"))]
                task = got["sent"] = sent[-1].task
                got["continued"] = []
                for text in ("maybe", "later", "not sure"):
                    req = message(text, task)
                    got["continued"] += [ev.task async for ev in client.send_message(req)]
                got["full"] = await client.get_task(pb.GetTaskRequest(id=task.id))
                got["two"] = await client.get_task(pb.GetTaskRequest(id=task.id, history_length=2))
                got["listed"] = await client.list_tasks(pb.ListTasksRequest())
                got["cancelled"] = await client.cancel_task(pb.CancelTaskRequest(id=task.id))
                with pytest.raises(TaskNotCancelableError):
                    await client.cancel_task(pb.CancelTaskRequest(id=task.id))
                with pytest.raises(TaskNotFoundError):
                    await client.get_task(pb.GetTaskRequest(id="nonexistent-task-id"))
                with pytest.raises(TaskNotFoundError):
                    await client.cancel_task(pb.CancelTaskRequest(id="nonexistent-task-id"))
                with pytest.raises(UnsupportedOperationError):
                    async for _ in client.send_message(message("approve", task)):
                        pass
        return got

    got = run_with_deadline(body())
    server.close()
    sent, continued = got["sent"], got["continued"]
    assert sent.status.state == pb.TaskState.TASK_STATE_INPUT_REQUIRED
    assert [t.id for t in continued] == [sent.id] * 3
    assert {t.status.state for t in continued} == {pb.TaskState.TASK_STATE_INPUT_REQUIRED}
    assert len(got["full"].history) > 2 and len(got["two"].history) == 2
    assert [t.id for t in got["listed"].tasks] == [sent.id]
    assert got["cancelled"].id == sent.id
    assert got["cancelled"].status.state == pb.TaskState.TASK_STATE_CANCELED
    assert (ws / "notes_a.txt").exists()  # no reply was a yes, and the cancel refused it


def test_what_the_agent_does_not_do_gets_its_a2a_error_code(ws: Path, serve: Any) -> None:
    """TCK jsonrpc/test_a2a_error_codes*.py and protocol/test_a2a_v030_new_methods.py:
    push notifications are -32003, the extended card and a finished task's stream are
    -32004, and a message the agent cannot read (a file, data, another media type, no
    text) is -32005, refused before a task exists or the model is called."""
    server = serve([{"content": "Done.", "commands": [SUBMIT]}])
    rpc = Rpc(server)
    hook = {"url": "https://example.com/webhook", "token": "test-token"}
    try:
        push_new = rpc.call("CreateTaskPushNotificationConfig", {"taskId": "t-1", **hook})
        old_name = "tasks/pushNotificationConfig/set"
        old_params = {"taskId": "t-1", "pushNotificationConfig": hook}
        push_old = rpc.raw(
            {"jsonrpc": "2.0", "id": "r1", "method": old_name, "params": old_params}, "0.3"
        )
        extended = rpc.call("GetExtendedAgentCard", {})
        unreadable = [
            rpc.send(
                {"text": "read this"}, {"url": "https://example.com/a.txt", "filename": "a.txt"}
            ),
            rpc.send({"data": {"key": "value", "nested": {"array": [1, 2, 3]}}}),
            rpc.send({"raw": "VGVzdCBkYXRh", "mediaType": "application/x-totally-unsupported"}),
            rpc.send({"text": "x", "mediaType": "application/pdf"}),
            rpc.send({"text": "   "}),
        ]
        before = rpc.call("ListTasks", {})
        calls_before = len(server.model.requests)
        done = rpc.send({"text": "hello"})["result"]["task"]
        again = rpc.send({"text": "hello again"}, taskId=done["id"])
        subscribe = rpc.call("SubscribeToTask", {"id": done["id"]})
    finally:
        rpc.close()
        server.close()

    error_of(push_new, -32003)
    error_of(push_old, -32003)
    error_of(extended, -32004)
    for reply in unreadable:
        assert "text" in error_of(reply, -32005).lower()
    assert before["result"]["tasks"] == [] and calls_before == 0
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "terminal" in error_of(again, -32004)
    error_of(subscribe, -32004)


def test_a_message_sent_while_the_task_works_does_not_answer_the_question_asked_after(
    ws: Path, serve: Any
) -> None:
    """The SDK holds a message to a working task until the task pauses. An ``approve``
    sent before the approval question existed must not answer it: its sender never saw
    what it would approve. Nor may a reply that is not text, and neither ends the wait."""
    server = serve([{"content": "Waiting.", "commands": ["sleep 3"]}, RM])
    rpc = Rpc(server)
    try:
        params = {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                              "parts": [{"text": "wait, then clear the notes"}]},
                  "configuration": {"returnImmediately": True}}  # fmt: skip
        task = rpc.call("SendMessage", params)["result"]["task"]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        deadline = time.monotonic() + TIMEOUT
        while rpc.call("GetTask", {"id": task["id"]})["result"]["status"]["state"] != (
            "TASK_STATE_WORKING"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        rpc.send({"text": "approve"}, **ids)
        time.sleep(1)
        early = rpc.call("GetTask", {"id": task["id"]})["result"]
        kept_early = (ws / "notes_a.txt").exists()
        as_data = rpc.send({"data": {"approve": True}}, **ids)
        waiting = rpc.call("GetTask", {"id": task["id"]})["result"]
        answered = rpc.send({"text": "reject"}, **ids)["result"]["task"]
    finally:
        rpc.close()
        log = server.close()

    assert early["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", log
    # Asked again, the early reply named as what it was.
    assert early["status"]["message"]["metadata"]["unanswered_reply"] == "approve"
    assert "rm notes_a.txt" in early["status"]["message"]["parts"][1]["text"]
    assert kept_early
    error_of(as_data, -32005)
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (ws / "notes_a.txt").read_text() == "old notes a\n"
    trace = (ws / ".orchestration" / "agent_trace.jsonl").read_text(encoding="utf-8")
    assert "a2a-client-user" in trace  # the one answer read: the reject


def test_list_tasks_pages_filters_and_refuses_bad_bounds(ws: Path, serve: Any) -> None:
    """TCK protocol/test_tasks_list_method.py: ListTasks counts, pages, filters by
    context, state and time (alone and together), leaves history and artifacts out
    unless asked, sorts newest first, and refuses a bad page size, page token, history
    length, timestamp or task state."""
    server = serve([{"content": "Fixing.", "commands": ["sed -i 's/a - b/a + b/' calc.py"]}])
    rpc = Rpc(server)
    try:
        made = [rpc.send({"text": f"hello {i}"})["result"]["task"] for i in range(3)]
        all_ = rpc.call("ListTasks", {})["result"]
        page1 = rpc.call("ListTasks", {"pageSize": 2})["result"]
        page2 = rpc.call("ListTasks", {"pageSize": 2, "pageToken": page1["nextPageToken"]})
        by_context = rpc.call("ListTasks", {"contextId": made[1]["contextId"]})["result"]
        by_state = rpc.call("ListTasks", {"status": "TASK_STATE_WORKING"})["result"]
        both = {"contextId": made[2]["contextId"], "status": "TASK_STATE_COMPLETED"}
        combined = rpc.call("ListTasks", both)["result"]
        since = [
            rpc.call("ListTasks", {"statusTimestampAfter": stamp})["result"]["totalSize"]
            for stamp in ("2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z")
        ]
        no_history = rpc.call("ListTasks", {"historyLength": 0})["result"]
        with_history = rpc.call("ListTasks", {"historyLength": 1, "includeArtifacts": True})
        bad = [rpc.call("ListTasks", params) for params in (
            {"pageSize": -1}, {"pageSize": 0}, {"pageSize": 1000}, {"pageToken": "garbage"},
            {"historyLength": -1}, {"statusTimestampAfter": "yesterday"},
            {"status": "INVALID_STATUS"}, {"status": "TASK_STATE_DONE\u202e"},
        )]  # fmt: skip
    finally:
        rpc.close()
        server.close()

    ids = [t["id"] for t in made]
    assert all_["totalSize"] == 3 and all_["pageSize"] == 50
    assert [t["id"] for t in all_["tasks"]] == ids[::-1]  # the newest first
    assert all("artifacts" not in t for t in all_["tasks"])  # absent, not []
    assert all(not t.get("history") for t in no_history["tasks"])
    assert len(page1["tasks"]) == 2 and page1["nextPageToken"]
    assert [t["id"] for t in page2["result"]["tasks"]] == ids[:1]
    assert not page2["result"].get("nextPageToken")
    assert [t["id"] for t in by_context["tasks"]] == ids[1:2]
    assert by_state["tasks"] == [] and by_state["totalSize"] == 0
    assert [t["id"] for t in combined["tasks"]] == ids[2:]
    assert since == [3, 0]
    for task in all_["tasks"]:
        assert task["contextId"] and task["status"]["state"] == "TASK_STATE_COMPLETED"
    listed = with_history["result"]["tasks"]
    assert all(len(t["history"]) == 1 for t in listed)
    assert {a["name"] for a in listed[-1]["artifacts"]} >= {"diff:calc.py"}
    for reply in bad:
        error_of(reply, -32602)
    # An unknown state is named back escaped (the SDK would have read it as no filter).
    assert "\\u202e" in bad[-1]["error"]["message"]
