"""Approvals over MCP, tried as an attacker and as a careless client: an answer counts
only when it is the schema's own yes, the question shows the agent's control characters
as escapes, a client waiting on its approval blocks nobody else, and another client
(with a token of its own) can neither see nor answer it.

Every test drives ``python -m ctxnb mcp serve`` with the MCP SDK's own clients over
stdio or streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import anyio  # noqa: E402
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from _approval_question import ESCAPES, HOSTILE, HOSTILE_RM, LONG, expected_question  # noqa: E402
from _mcp_client import _text, run_async, server_params, stdio_session  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from ctxnb._util.text import _CONTROL  # noqa: E402

pytestmark = pytest.mark.slow

REMOVE = {"cmd": "rm inventory/report.py", "intent_id": "INT-INV"}

# Answers a client might send for "no" that a truthiness test reads as yes, and shapes
# that are not the schema's boolean at all.
NOT_A_YES = [{"approve": "false"}, {"approve": "no"}, {"approve": 1}, {}]


def _answering(content: dict[str, Any], asked: list[str]) -> Any:
    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content=content)

    return on_elicit


@pytest.mark.parametrize("content", NOT_A_YES)
def test_handshake_answer_that_is_not_a_boolean_is_an_error_and_runs_nothing(
    gov_ws: Path, tmp_path: Path, content: dict[str, Any]
) -> None:
    asked: list[str] = []

    async def body() -> types.CallToolResult:
        on_elicit = _answering(content, asked)
        async with stdio_session(gov_ws, tmp_path / "err.log", elicitation_callback=on_elicit) as s:
            await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            return await s.call_tool("run_command", {"cmd": REMOVE["cmd"]})

    res = run_async(body)
    assert len(asked) == 1
    assert res.is_error, _text(res)
    assert res.structured_content["error_code"] == "APPROVAL_ANSWER_INVALID"
    assert (gov_ws / "inventory" / "report.py").exists()


@pytest.mark.parametrize("content", NOT_A_YES)
def test_stateless_answer_that_is_not_a_boolean_is_an_error_and_runs_nothing(
    gov_ws: Path, tmp_path: Path, content: dict[str, Any]
) -> None:
    asked: list[str] = []

    async def body() -> None:
        with open(tmp_path / "err.log", "w", encoding="utf-8") as log:
            transport = stdio_client(server_params(gov_ws, "mcp-rev"), errlog=log)
            on_elicit = _answering(content, asked)
            async with Client(
                transport, mode="auto", read_timeout_seconds=30, elicitation_callback=on_elicit
            ) as c:
                assert c.protocol_version == "2026-07-28"
                with pytest.raises(MCPError) as e:
                    await c.call_tool("run_command", REMOVE)
                assert e.value.error.code == types.INVALID_PARAMS
                assert "approve" in e.value.error.message

    run_async(body)
    assert len(asked) == 1
    assert (gov_ws / "inventory" / "report.py").exists()


def test_the_question_shows_control_and_bidi_characters_as_escapes(
    gov_ws: Path, tmp_path: Path
) -> None:
    """A file whose bytes would clear the line, return the carriage and reverse the text
    in the user's terminal: the question names each one, and carries none; it is the one
    question every door asks, character for character."""
    rel = "inventory/report.py"
    (gov_ws / rel).write_text(HOSTILE, encoding="utf-8")
    cmd = HOSTILE_RM.format(path=rel)
    asked: list[str] = []

    async def body() -> None:
        on_elicit = _answering({"approve": False}, asked)
        async with stdio_session(gov_ws, tmp_path / "err.log", elicitation_callback=on_elicit) as s:
            await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            await s.call_tool("run_command", {"cmd": cmd})

    run_async(body)
    (question,) = asked
    assert _CONTROL.search(question) is None, repr(question)
    for shown in ESCAPES:
        assert shown in question
    assert "-fine" in question  # the diff is still there, line by line
    assert question == expected_question(cmd, rel, HOSTILE.encode(), "INT-INV")


@pytest.mark.parametrize("revision", ["handshake", "stateless"])
def test_a_diff_too_long_to_show_is_never_asked_about(
    gov_ws: Path, tmp_path: Path, revision: str
) -> None:
    """A deletion whose diff no person would read through: the user is not asked (an
    approval of what they were not shown is none), the act is refused with
    DIFF_TOO_LONG, and the file stays."""
    target = gov_ws / "inventory" / "report.py"
    target.write_text(LONG, encoding="utf-8")
    asked: list[str] = []
    on_elicit = _answering({"approve": True}, asked)

    async def body() -> types.CallToolResult:
        if revision == "handshake":
            async with stdio_session(
                gov_ws, tmp_path / "err.log", elicitation_callback=on_elicit
            ) as s:
                await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
                return await s.call_tool("run_command", {"cmd": REMOVE["cmd"]})
        with open(tmp_path / "err.log", "w", encoding="utf-8") as log:
            transport = stdio_client(server_params(gov_ws, "mcp-rev"), errlog=log)
            async with Client(
                transport, mode="auto", read_timeout_seconds=30, elicitation_callback=on_elicit
            ) as c:
                return await c.call_tool("run_command", REMOVE)

    res = run_async(body)
    assert asked == []
    assert res.is_error and res.structured_content["error_code"] == "DIFF_TOO_LONG", _text(res)
    assert target.read_bytes() == LONG.encode()


@pytest.mark.parametrize("http_server", [("governed", [])], indirect=True)
def test_a_pending_approval_blocks_no_other_http_client(http_server: dict[str, Any]) -> None:
    """Client A's destructive command waits on its user; client B (another session) is
    answered meanwhile, and A's approval still decides A's act."""
    ws = http_server["ws"]
    order: list[str] = []
    asked = anyio.Event()
    answer = anyio.Event()

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        order.append("A asked")
        asked.set()
        await answer.wait()  # A's user thinks while B works
        order.append("A answered")
        return types.ElicitResult(action="accept", content={"approve": True})

    async def client_a() -> types.CallToolResult:
        async with (
            streamable_http_client(http_server["url"]) as (r, w),
            ClientSession(r, w, read_timeout_seconds=60, elicitation_callback=on_elicit) as a,
        ):
            await a.initialize()
            await a.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            res = await a.call_tool("run_command", {"cmd": REMOVE["cmd"]})
            order.append("A done")
            return res

    async def client_b() -> None:
        await asked.wait()
        async with (
            streamable_http_client(http_server["url"]) as (r, w),
            ClientSession(r, w, read_timeout_seconds=60) as b,
        ):
            await b.initialize()
            names = {t.name for t in (await b.list_tools()).tools}
            read = await b.call_tool("read_file", {"path": "inventory/models.py"})
            assert "read_file" in names and not read.is_error, _text(read)
            order.append("B served")
        answer.set()

    results: list[types.CallToolResult] = []

    async def body() -> None:
        async def run_a() -> None:
            results.append(await client_a())

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_a)
            tg.start_soon(client_b)

    run_async(body)
    assert order == ["A asked", "B served", "A answered", "A done"]
    assert not results[0].is_error, _text(results[0])
    assert not (ws / "inventory" / "report.py").exists()


def test_a_notebook_approver_waiting_on_its_human_blocks_no_other_client(
    gov_ws: Path,
) -> None:
    """A server embedded with the notebook's queue as its approver (an ApprovalPanel
    decides): client A's destructive command waits on the person at the notebook, and
    client B, over HTTP on 127.0.0.1 like A, is answered meanwhile."""
    import socket
    import threading

    import uvicorn

    from ctxnb.govern.approval import QueueApprover
    from ctxnb.integrations.mcp_server import build_server, http_app

    queue = QueueApprover(timeout=60)
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = build_server(gov_ws, approver=queue)
    app = http_app(server, host="127.0.0.1", port=port)
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=web.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/mcp"
    order: list[str] = []

    async def client_a() -> types.CallToolResult:
        async with (
            streamable_http_client(url) as (r, w),
            ClientSession(r, w, read_timeout_seconds=90) as a,
        ):
            await a.initialize()
            await a.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            res = await a.call_tool("run_command", {"cmd": REMOVE["cmd"]})
            order.append("A done")
            return res

    async def client_b() -> None:
        with anyio.fail_after(60):
            while not queue.pending():  # A's act waits in the notebook's queue
                await anyio.sleep(0.05)
        order.append("A asked")
        # Served while A waits, or never: the lock A's call held until its human decided.
        with anyio.fail_after(20):
            async with (
                streamable_http_client(url) as (r, w),
                ClientSession(r, w, read_timeout_seconds=20) as b,
            ):
                await b.initialize()
                read = await b.call_tool("read_file", {"path": "inventory/models.py"})
                assert not read.is_error, _text(read)
                order.append("B served")
        (req,) = queue.pending()
        queue.decide(req.id, True, by="the person at the notebook")

    results: list[types.CallToolResult] = []

    async def body() -> None:
        async def run_a() -> None:
            results.append(await client_a())

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_a)
            tg.start_soon(client_b)

    try:
        run_async(body, timeout=120)
    finally:
        for req in queue.pending():  # a failure above leaves A's act refused, not waiting
            queue.decide(req.id, False, by="test")
        web.should_exit = True
        thread.join(30)
        server.ctxnb_backend.close()  # type: ignore[attr-defined]
        sock.close()
    assert order == ["A asked", "B served", "A done"]
    assert not results[0].is_error, _text(results[0])
    assert not (gov_ws / "inventory" / "report.py").exists()


# -- another caller: two clients, each with a token of its own -----------------------------------

TOK_A, TOK_B = secrets.token_urlsafe(16), secrets.token_urlsafe(16)  # generated, never real
# `--token=VALUE`: a generated token may start with "-", which argparse would read as
# an option after a bare `--token`.
TWO_CALLERS = ("governed", [f"--token={TOK_A}", f"--token={TOK_B}"])


def _http(token: str, seen: list[str] | None = None) -> httpx2.AsyncClient:
    """An HTTP client with ``token``; ``seen`` collects the session ids it sends."""

    async def note(request: httpx2.Request) -> None:
        sid = request.headers.get("mcp-session-id")
        if seen is not None and sid and sid not in seen:
            seen.append(sid)

    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=120),
        event_hooks={"request": [note]},
    )


@asynccontextmanager
async def _legacy(
    url: str, token: str, **kw: Any
) -> AsyncIterator[tuple[ClientSession, list[str]]]:
    seen: list[str] = []
    async with (
        _http(token, seen) as http,
        streamable_http_client(url, http_client=http) as (r, w),
        ClientSession(r, w, read_timeout_seconds=60, **kw) as s,
    ):
        await s.initialize()
        yield s, seen


async def _post(url: str, token: str, message: dict[str, Any], session: str) -> int:
    """One JSON-RPC message sent by hand on ``session``, as a client would: its status."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": "2025-11-25",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    async with httpx2.AsyncClient(timeout=30) as raw:
        r = await raw.post(url, content=json.dumps(message), headers=headers)
        return int(r.status_code)


def _yes(request_id: int) -> dict[str, Any]:
    """The answer "approve" to the server's request ``request_id``."""
    result = {"action": "accept", "content": {"approve": True}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


@pytest.mark.parametrize("http_server", [TWO_CALLERS], indirect=True)
def test_another_caller_can_neither_see_nor_answer_a_pending_approval(
    http_server: dict[str, Any],
) -> None:
    """Client A's removal waits on A's user. Client B, with a valid token of its own, is
    served meanwhile; it answers "approve" to every request id on its own session, and
    then on A's session (its id learned somehow): its own answers reach nothing, and
    A's session is not found for B's token. Only A's "no" decides."""
    url, ws = http_server["url"], http_server["ws"]
    order: list[str] = []
    asked, answer = anyio.Event(), anyio.Event()
    statuses: dict[str, Any] = {}

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        order.append("A asked")
        asked.set()
        await answer.wait()
        order.append("A answered")
        return types.ElicitResult(action="accept", content={"approve": False})

    async def client_a(sessions: list[list[str]]) -> types.CallToolResult:
        async with _legacy(url, TOK_A, elicitation_callback=on_elicit) as (a, seen):
            sessions.append(seen)  # filled as A's requests go out
            await a.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            res = await a.call_tool("run_command", {"cmd": REMOVE["cmd"]})
            order.append("A done")
            return res

    async def client_b(sessions: list[list[str]]) -> None:
        await asked.wait()
        async with _legacy(url, TOK_B) as (b, seen):
            read = await b.call_tool("read_file", {"path": "inventory/models.py"})
            assert not read.is_error, _text(read)
            order.append("B served")
            (own,) = seen
            statuses["own"] = [await _post(url, TOK_B, _yes(i), own) for i in range(4)]
            ((a_session,),) = sessions
            assert a_session != own
            statuses["a's"] = [await _post(url, TOK_B, _yes(i), a_session) for i in range(4)]
            read_it = {"name": "read_file", "arguments": {"path": "inventory/models.py"}}
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": read_it}
            statuses["a's call"] = await _post(url, TOK_B, call, a_session)
            still = await b.call_tool("read_file", {"path": "inventory/models.py"})
            assert not still.is_error  # B's own session works on
        assert (ws / "inventory" / "report.py").exists()  # nothing B sent decided
        order.append("B gave up")
        answer.set()

    results: list[types.CallToolResult] = []

    async def body() -> None:
        sessions: list[list[str]] = []

        async def run_a() -> None:
            results.append(await client_a(sessions))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_a)
            tg.start_soon(client_b, sessions)

    run_async(body)
    assert order == ["A asked", "B served", "B gave up", "A answered", "A done"]
    assert statuses["a's"] == [404] * 4 and statuses["a's call"] == 404, statuses
    assert all(s < 500 for s in statuses["own"]), statuses
    assert results[0].is_error
    assert results[0].structured_content["error_code"] == "APPROVAL_REJECTED", _text(results[0])
    assert (ws / "inventory" / "report.py").exists()


@pytest.mark.parametrize("http_server", [TWO_CALLERS], indirect=True)
def test_another_caller_cannot_answer_a_stateless_approval_with_its_sealed_state(
    http_server: dict[str, Any],
) -> None:
    """Under 2026-07-28 the question and its sealed ``requestState`` go to A. B, holding
    A's state (leaked, logged, shared), sends the very same call with "approve": the
    state names A, so B is refused and nothing runs; A's own answer still counts."""
    url, ws = http_server["url"], http_server["ws"]
    yes = types.ElicitResult(action="accept", content={"approve": True})
    target = ws / "inventory" / "report.py"

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("B is never asked: the question is A's")

    async def body() -> tuple[str, types.CallToolResult]:
        async with (
            _http(TOK_A) as http_a,
            _http(TOK_B) as http_b,
            Client(
                streamable_http_client(url, http_client=http_a),
                mode="auto",
                read_timeout_seconds=30,
                elicitation_callback=never,
            ) as a,  # fmt: skip
            Client(
                streamable_http_client(url, http_client=http_b),
                mode="auto",
                read_timeout_seconds=30,
                elicitation_callback=never,
            ) as b,  # fmt: skip
        ):
            assert a.protocol_version == b.protocol_version == "2026-07-28"
            asked = await a.session.call_tool("run_command", REMOVE, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult), asked
            stolen = {"input_responses": {"approval": yes}, "request_state": asked.request_state}
            with pytest.raises(MCPError) as refused:
                await b.session.call_tool(
                    "run_command", REMOVE, allow_input_required=True, **stolen
                )
            assert target.exists()
            done = await a.session.call_tool(
                "run_command", REMOVE, allow_input_required=True, **stolen
            )
            assert isinstance(done, types.CallToolResult)
            return refused.value.error.message, done

    message, done = run_async(body)
    assert "requestState" in message
    assert not done.is_error, _text(done)
    assert not target.exists()  # A's own approval of A's act ran it
