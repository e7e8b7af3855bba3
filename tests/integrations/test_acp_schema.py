"""``ctxnb acp serve`` against the ACP schema the SDK lags behind.

ctxnb pins the ``agent-client-protocol`` SDK at 0.12.1, the newest the registries here
serve; upstream the protocol's schema has moved on (the SDKs' 1.x line). A real
``ctxnb acp serve`` is driven here over its stdio by a raw JSON-RPC client that speaks
as a newer client does (every request it sends is first checked against the vendored
schema, ``tests/data/acp-schema-v1``), and every message ctxnb writes back, requests,
notifications and results, is checked against that schema's definition for its
method: a field the newer schema requires and the SDK leaves out fails here.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("acp") and has_module("jsonschema"), "the ACP SDK (ctxnb[acp]) and jsonschema")

import jsonschema  # noqa: E402
from _agent_workspace import (  # noqa: E402
    REPO,
    SUBMIT,
    make_workspace,
    require_live_agent,
    run_with_deadline,
)

from ctxnb.live import ScriptedModelServer  # noqa: E402

require_live_agent()
pytestmark = pytest.mark.slow

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "data" / "acp-schema-v1"

# What each method's params and result are, in the schema's own words.
REQUESTS = {
    "initialize": ("InitializeRequest", "InitializeResponse"),
    "session/new": ("NewSessionRequest", "NewSessionResponse"),
    "session/prompt": ("PromptRequest", "PromptResponse"),
    "session/set_mode": ("SetSessionModeRequest", "SetSessionModeResponse"),
    "session/request_permission": ("RequestPermissionRequest", "RequestPermissionResponse"),
}
NOTIFICATIONS = {"session/update": "SessionNotification", "session/cancel": "CancelNotification"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / "schema.json").read_text("utf-8"))
    return loaded


def check(schema: dict[str, Any], name: str, value: Any) -> None:
    """Validate ``value`` against the schema's definition ``name``."""
    wrapper = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
    jsonschema.validate(value, wrapper, cls=jsonschema.Draft202012Validator)


def errors(schema: dict[str, Any], name: str, value: Any) -> list[str]:
    """Every way ``value`` breaks the definition ``name``, the reasons within a union
    (one of the update kinds, say) included, each with where it is."""
    wrapper = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
    found: list[str] = []

    def walk(errs: Any) -> None:
        for e in errs:
            found.append(f"{'/'.join(map(str, e.absolute_path))}: {e.message}")
            walk(e.context or [])

    walk(jsonschema.Draft202012Validator(wrapper).iter_errors(value))
    return found


class RawClient:
    """A newer ACP client over ``ctxnb acp serve``'s stdio, recording the wire."""

    def __init__(self, schema: dict[str, Any], answers: list[str]) -> None:
        self.schema = schema
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.methods: dict[int, str] = {}  # our request id -> its method
        self.ids = iter(range(1, 1000))

    async def start(self, ws: Path, model: ScriptedModelServer) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "CTXNB_TEST_MODEL_KEY": "unused"}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ctxnb", "acp", "serve", str(ws),
            "--model", model.model_args["model"], "--api-base", model.url,
            "--api-key-env", "CTXNB_TEST_MODEL_KEY",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env, cwd=ws,
            limit=64 * 1024 * 1024,
        )  # fmt: skip
        self.reader = asyncio.create_task(self._read())

    async def _write(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.sent.append(msg)
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        await self.proc.stdin.drain()

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            self.received.append(msg)
            if "method" in msg and "id" in msg:  # the agent asks the client
                await self._answer(msg)
            elif "id" in msg and msg["id"] in self.pending:
                self.pending.pop(msg["id"]).set_result(msg)

    async def _answer(self, msg: dict[str, Any]) -> None:
        assert msg["method"] == "session/request_permission", msg
        result = {"outcome": {"outcome": "selected", "optionId": self.answers.pop(0)}}
        check(self.schema, "RequestPermissionResponse", result)
        await self._write({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        check(self.schema, REQUESTS[method][0], params)  # we speak the newer schema
        rid = next(self.ids)
        self.methods[rid] = method
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[rid] = done
        await self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        reply = await done
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
            self.reader.cancel()

    def problems(self) -> list[str]:
        """Every way a message ctxnb wrote breaks the newer schema."""
        found = []
        for msg in self.received:
            if msg.get("jsonrpc") != "2.0":
                found.append(f"not JSON-RPC 2.0: {msg}")
            if "method" in msg and "id" in msg:
                name = REQUESTS[msg["method"]][0]
                found += [f"{msg['method']} {e}" for e in errors(self.schema, name, msg["params"])]
            elif "method" in msg:
                name = NOTIFICATIONS[msg["method"]]
                found += [f"{msg['method']} {e}" for e in errors(self.schema, name, msg["params"])]
            elif "result" in msg:
                method = self.methods[msg["id"]]
                name = REQUESTS[method][1]
                found += [f"{method} result {e}" for e in errors(self.schema, name, msg["result"])]
        return found


def test_every_message_ctxnb_sends_meets_the_newer_acp_schema(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    """A prompt that reads, edits, asks permission twice (allow, reject) and ends, and a
    mode switch: every request, notification and result ctxnb wrote validates against
    the schema's definition for its method, the fields it requires included."""
    ws = make_workspace(tmp_path)
    script = [
        {"content": "Reading.", "commands": ["cat calc.py"]},
        {"content": "Fixing.", "commands": ["sed -i 's/return a - b/return a + b/' calc.py"]},
        {"content": "Clearing.", "commands": ["rm notes_a.txt"]},
        {"content": "And the others.", "commands": ["rm notes_b.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ]
    client = RawClient(schema, answers=["allow-once", "reject-once"])

    async def body() -> dict[str, Any]:
        with ScriptedModelServer(script) as model:
            await client.start(ws, model)
            try:
                init = await client.request("initialize", {
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                           "terminal": True},
                    "clientInfo": {"name": "newer-client", "title": "A newer client",
                                   "version": "1.23.0"},
                    "_meta": {"example.com/trace": "t-1"},
                })  # fmt: skip
                new = await client.request("session/new", {"cwd": str(ws), "mcpServers": []})
                sid = new["sessionId"]
                await client.request("session/set_mode", {"sessionId": sid, "modeId": "no-intent"})
                await client.request("session/set_mode", {"sessionId": sid, "modeId": "INT-CALC"})
                prompt = [{"type": "text", "text": "Fix add() in calc.py"},
                          {"type": "resource_link", "uri": f"file://{ws}/calc.py",
                           "name": "calc.py"}]  # fmt: skip
                done = await client.request("session/prompt", {"sessionId": sid, "prompt": prompt})
                return {"init": init, "new": new, "done": done}
            finally:
                await client.close()

    got = run_with_deadline(body())
    assert got["done"]["stopReason"] == "end_turn"
    assert client.problems() == []
    kinds = {m["params"]["update"]["sessionUpdate"] for m in client.received
             if m.get("method") == "session/update"}  # fmt: skip
    # What was checked is what ctxnb sends: text, tool calls and their updates, the
    # mode in force, and both permission questions.
    assert {"agent_message_chunk", "tool_call", "tool_call_update"} <= kinds
    asked = [m for m in client.received if m.get("method") == "session/request_permission"]
    assert len(asked) == 2
    assert "return a + b" in (ws / "calc.py").read_text()
    assert not (ws / "notes_a.txt").exists() and (ws / "notes_b.txt").exists()


def test_the_check_finds_a_missing_required_field(schema: dict[str, Any]) -> None:
    """The check above can fail: a message without what the schema requires is named."""
    good = {"protocolVersion": 1, "agentCapabilities": {}}
    check(schema, "InitializeResponse", good)
    assert errors(schema, "InitializeResponse", {"agentCapabilities": {}})
    update = {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "title": "x"}}
    assert any("toolCallId" in e for e in errors(schema, "SessionNotification", update))
    assert errors(schema, "PromptResponse", {"stopReason": "finished"})  # not a stop reason


def test_a_newer_clients_methods_get_method_not_found_and_the_session_goes_on(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    """Methods the newer schema has and ctxnb's agent does not offer (closing, listing,
    resuming sessions, logging out) are each answered -32601 under their id, never left
    unanswered; the protocol-level ``$/cancel_request`` notification is dropped without
    ending the connection, which then still makes sessions."""
    ws = make_workspace(tmp_path)
    client = RawClient(schema, answers=[])

    async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(client.ids)
        client.methods[rid] = method
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        client.pending[rid] = done
        await client._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        # Matched to its request by id (RawClient's reader), or no answer: a timeout.
        return await asyncio.wait_for(done, 30)

    async def body() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        with ScriptedModelServer([]) as model:
            await client.start(ws, model)
            try:
                await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                sid = (await client.request("session/new", {"cwd": str(ws), "mcpServers": []}))[
                    "sessionId"
                ]
                replies = [
                    await ask(method, params)
                    for method, params in [
                        ("session/close", {"sessionId": sid}),
                        ("session/list", {}),
                        ("session/resume", {"sessionId": sid, "cwd": str(ws)}),
                        ("logout", {}),
                    ]
                ]
                note = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}
                await client._write(note)
                after = await client.request("session/new", {"cwd": str(ws), "mcpServers": []})
                return replies, after
            finally:
                await client.close()

    replies, after = run_with_deadline(body())
    for reply in replies:
        assert reply["error"]["code"] == -32601 and reply["jsonrpc"] == "2.0", reply
    assert after["sessionId"]
    assert client.problems() == []
