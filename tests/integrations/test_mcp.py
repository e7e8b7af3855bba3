"""The MCP server: real clients over stdio and streamable HTTP, and the backend in-process.

Subprocess tests start ``python -m ctxnb mcp serve`` and talk to it with the MCP SDK's
own ``ClientSession``; every wait is bounded and every server process is stopped.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require
from _paths import REPO

require(has_module("mcp"), "the mcp SDK (ctxnb[mcp])")

import anyio  # noqa: E402
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from _mcp_client import (  # noqa: E402
    TIMEOUT,
    _free_port,
    _resource_text,
    _stop,
    _text,
    assert_decided,
    run_async,
    stdio_session,
)
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from ctxnb.cli.app import main as cli_main  # noqa: E402
from ctxnb.errors import ConfigError  # noqa: E402
from ctxnb.integrations.mcp_server import (  # noqa: E402
    URI_CONTEXT,
    URI_METADATA,
    URI_TRACE,
    BearerTokenMiddleware,
    McpBackend,
    check_bind,
    history_uri,
    is_loopback,
    transport_security,
)

# -- fixtures and helpers --------------------------------------------------------------------


# -- in-process: the backend -----------------------------------------------------------------


def test_tools_have_schemas_and_annotations(plain_ws: Path) -> None:
    with McpBackend(plain_ws, session_id="t") as b:
        tools = {t.name: t for t in b.list_tools()}
        assert {"read_file", "write_file", "activate", "deactivate", "pin", "unpin"} <= set(tools)
        assert "select_active_intent" not in tools  # ungoverned: no governance tools
        read, write, pin = tools["read_file"], tools["write_file"], tools["pin"]
        assert read.input_schema["type"] == "object"
        assert read.input_schema["required"] == ["path"]
        assert read.annotations is not None and read.annotations.read_only_hint is True
        assert write.annotations is not None and write.annotations.read_only_hint is False
        assert write.annotations.idempotent_hint is False
        assert pin.annotations is not None and pin.annotations.read_only_hint is False
        assert pin.annotations.destructive_hint is False
        assert pin.input_schema["required"] == ["target"]


def test_refusal_is_tool_error_with_structured_content(plain_ws: Path) -> None:
    (plain_ws / ".env").write_text("SECRET=1\n")
    with McpBackend(plain_ws) as b:
        res = b.call_tool("read_file", {"path": ".env"})
        assert res.is_error is True
        assert res.structured_content["error_code"] == "PATH_DENIED"
        # the model reads the refusal as text; programs read the JSON
        assert _text(res).startswith("REFUSED PATH_DENIED: ")
        assert f"Required action: {res.structured_content['required_action']}" in _text(res)
        assert {"message", "recoverable", "required_action"} <= set(res.structured_content)


def test_a_write_of_a_file_never_read_names_the_apis_fix_over_stdio(
    plain_ws: Path, tmp_path: Path
) -> None:
    """A real client over stdio gets the refusal the Python API raises, word for word:
    the cause and the fix (read it first, or pass expected_sha256), in the text the model
    reads and in the structured result; nothing is written."""
    before = (plain_ws / "README.md").read_bytes()

    async def body() -> types.CallToolResult:
        async with stdio_session(plain_ws, tmp_path / "err.log") as s:
            return await s.call_tool("write_file", {"path": "README.md", "content": "new\n"})

    res = run_async(body)
    assert res.is_error and res.structured_content["error_code"] == "READ_BEFORE_WRITE"
    assert (plain_ws / "README.md").read_bytes() == before
    from ctxnb import Workspace
    from ctxnb.errors import PolicyError

    with Workspace.open(plain_ws) as w, pytest.raises(PolicyError) as api:
        w.tools(w.session("api")).write_file("README.md", "new\n")
    assert res.structured_content["message"] == str(api.value)
    assert res.structured_content["required_action"] == api.value.required_action
    assert "read it first (read_file('README.md'))" in str(api.value)
    assert "expected_sha256" in str(api.value)
    assert str(api.value) in _text(res)


def test_unknown_tool_and_bad_arguments_are_protocol_errors(plain_ws: Path) -> None:
    with McpBackend(plain_ws) as b:
        with pytest.raises(MCPError) as e1:
            b.call_tool("no_such_tool", {})
        assert e1.value.code == types.INVALID_PARAMS
        assert e1.value.data["error_code"] == "UNKNOWN_TOOL"
        with pytest.raises(MCPError) as e2:
            b.call_tool("read_lines", {"path": "README.md", "start": "one", "end": 2})
        assert e2.value.code == types.INVALID_PARAMS
        assert "start" in e2.value.message


def test_session_tools_by_path_and_id(plain_ws: Path) -> None:
    with McpBackend(plain_ws) as b:
        res = b.call_tool("pin", {"target": "inventory/models.py"})
        assert not res.is_error
        info = res.structured_content["result"]
        assert info["active"] and info["pinned"]
        assert "class " in b.content.read_resource(URI_CONTEXT)  # models.py content is in context
        res = b.call_tool("unpin", {"target": info["id"]})
        assert res.structured_content["result"]["pinned"] is False
        res = b.call_tool("deactivate", {"target": info["id"]})
        assert res.structured_content["result"]["active"] is False
        pool = json.loads(b.content.read_resource(URI_METADATA))
        row = next(r for r in pool if r["id"] == info["id"])
        assert row["active"] is False and row["path"].endswith("inventory/models.py")
        missing = b.call_tool("activate", {"target": "nope/missing.py"})
        assert missing.is_error and missing.structured_content["error_code"] == "NOT_FOUND"


def test_activate_goes_through_the_path_policy(plain_ws: Path) -> None:
    (plain_ws / ".env").write_text("TOKEN=abc\n")
    with McpBackend(plain_ws) as b:
        res = b.call_tool("activate", {"target": ".env"})
        assert res.is_error and res.structured_content["error_code"] == "PATH_DENIED"
        assert "abc" not in b.content.read_resource(URI_CONTEXT)


def test_history_resource_and_trace_when_ungoverned(plain_ws: Path) -> None:
    with McpBackend(plain_ws) as b:
        first = b.call_tool("read_file", {"path": "README.md"}).structured_content["result"]
        b.call_tool(
            "write_file",
            {"path": "README.md", "content": "# changed\n", "expected_sha256": first["sha256"]},
        )
        versions = json.loads(b.content.read_resource(history_uri("README.md")))
        assert [v["action"] for v in versions] == ["created", "updated"]
        assert json.loads(b.content.read_resource(URI_TRACE)) == []
        with pytest.raises(MCPError) as e:
            b.content.read_resource("ctxnb://nope")
        assert e.value.code == types.INVALID_PARAMS


def test_handshake_prompt_lists_active_intents(gov_ws: Path, plain_ws: Path) -> None:
    with McpBackend(gov_ws) as b:
        text = (
            b.content.get_prompt("intent-handshake", {"intent_id": "INT-INV"}).messages[0].content
        )
        assert isinstance(text, types.TextContent)
        assert 'select_active_intent with intent_id="INT-INV"' in text.text
        assert "INT-INV: Inventory maintenance (owns inventory/**)" in text.text
        assert "INT-OLD" not in text.text  # done, not active
        with pytest.raises(MCPError):
            b.content.get_prompt("other", None)
    with McpBackend(plain_ws) as b:
        assert "not governed" in b.content.handshake_text()


def test_governed_refusals_and_trace_in_process(gov_ws: Path) -> None:
    with McpBackend(gov_ws) as b:
        sha = b.call_tool("read_file", {"path": "inventory/models.py"}).structured_content[
            "result"
        ]["sha256"]
        args = {"path": "inventory/models.py", "content": "X = 1\n", "expected_sha256": sha}
        res = b.call_tool("write_file", args)
        assert res.structured_content["error_code"] == "NO_ACTIVE_INTENT"
        assert "<intent_context>" in _text(
            b.call_tool("select_active_intent", {"intent_id": "INT-INV"})
        )
        res = b.call_tool("write_file", {"path": "README.md", "content": "x\n"})
        assert res.structured_content["error_code"] == "SCOPE_VIOLATION"
        assert not b.call_tool("write_file", args).is_error
        trace = json.loads(b.content.read_resource(URI_TRACE))
        assert trace[-1]["files"][0]["path"] == "inventory/models.py"
        # No client to ask: destructive commands are refused and nothing is deleted.
        res = b.call_tool("run_command", {"cmd": "rm inventory/report.py"})
        assert res.structured_content["error_code"] == "DESTRUCTIVE_NEEDS_APPROVAL"
        assert (gov_ws / "inventory" / "report.py").exists()


def test_bind_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    assert not is_loopback("example.com")
    with pytest.raises(ConfigError, match="CTXNB_MCP_TOKEN"):
        check_bind("0.0.0.0", None)
    assert check_bind("0.0.0.0", "s3cret") == ("s3cret",)
    assert check_bind("0.0.0.0", ["tok-a", "tok-b"]) == ("tok-a", "tok-b")
    assert check_bind("127.0.0.1", None) == ()
    os.environ["CTXNB_MCP_TOKEN"] = "from-env"
    assert check_bind("0.0.0.0", None) == ("from-env",)
    assert check_bind("127.0.0.1", None) == ("from-env",)
    assert check_bind("127.0.0.1", ["given"]) == ("given",)  # the flag wins over the env
    sec = transport_security("127.0.0.1", 8765)
    assert sec.enable_dns_rebinding_protection
    assert "127.0.0.1:8765" in sec.allowed_hosts and "localhost:8765" in sec.allowed_hosts
    assert all(h.endswith(":8765") for h in sec.allowed_hosts)
    assert "http://localhost:8765" in sec.allowed_origins


def test_bearer_middleware() -> None:
    calls: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    mw = BearerTokenMiddleware(app, "tok")

    async def status(headers: list[tuple[bytes, bytes]]) -> int:
        sent: list[dict[str, Any]] = []

        async def send(msg: dict[str, Any]) -> None:
            sent.append(msg)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        await mw({"type": "http", "path": "/mcp", "headers": headers}, receive, send)
        return int(sent[0]["status"])

    assert run_async(lambda: status([])) == 401
    assert run_async(lambda: status([(b"authorization", b"Bearer nope")])) == 401
    assert run_async(lambda: status([(b"authorization", b"Basic tok")])) == 401
    assert run_async(lambda: status([(b"authorization", b"Bearer tok")])) == 200
    assert calls == ["/mcp"]


def test_bearer_middleware_names_each_token_its_own_caller() -> None:
    """Several tokens, several callers: the scope names the one the request's token
    belongs to (by its hash, never the token), and nothing else passes."""
    from ctxnb.integrations.http_guard import CALLER_SCOPE_KEY, caller_of_token

    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope[CALLER_SCOPE_KEY])
        await send({"type": "http.response.start", "status": 200, "headers": []})

    mw = BearerTokenMiddleware(app, ["tok-a", "tok-b"])

    async def status(token: bytes) -> int:
        sent: list[dict[str, Any]] = []

        async def send(msg: dict[str, Any]) -> None:
            sent.append(msg)

        headers = [(b"authorization", b"Bearer " + token)]
        await mw({"type": "http", "path": "/mcp", "headers": headers}, None, send)
        return int(sent[0]["status"])

    assert [run_async(lambda t=t: status(t)) for t in (b"tok-a", b"tok-b", b"tok-c", b"")] == [
        200, 200, 401, 401,
    ]  # fmt: skip
    assert seen == [caller_of_token("tok-a"), caller_of_token("tok-b")]
    assert not any("tok-" in name for name in seen)
    for empty in ("", [], ["tok-a", ""]):
        with pytest.raises(ValueError, match="must not be empty"):
            BearerTokenMiddleware(app, empty)


def test_cli_refuses_wide_bind_without_token(
    plain_ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ.pop("CTXNB_MCP_TOKEN", None)
    code = cli_main(["mcp", "serve", str(plain_ws), "--http", "8765", "--host", "0.0.0.0"])
    assert code == 1
    assert "bearer token" in capsys.readouterr().err
    assert not (plain_ws / ".ctxnb").exists()  # refused before opening the workspace
    assert cli_main(["mcp", "serve", str(plain_ws), "--token", "x"]) == 1  # token needs --http
    capsys.readouterr()
    assert cli_main(["mcp", "serve", str(plain_ws / "missing")]) == 1
    assert "does not exist" in capsys.readouterr().err


# -- stdio: a real client against a server subprocess -------------------------------------------


@pytest.mark.slow
def test_stdio_lists_reads_and_serves_context(plain_ws: Path, tmp_path: Path) -> None:
    async def body() -> None:
        async with stdio_session(plain_ws, tmp_path / "err.log") as s:
            tools = (await s.list_tools()).tools
            names = {t.name for t in tools}
            assert {"read_file", "apply_patch", "activate", "pin"} <= names
            read = next(t for t in tools if t.name == "read_file")
            assert read.annotations is not None and read.annotations.read_only_hint is True
            uris = {r.uri for r in (await s.list_resources()).resources}
            assert uris == {URI_CONTEXT, URI_METADATA, URI_TRACE}
            templates = (await s.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["ctxnb://history/{path}"]
            prompts = (await s.list_prompts()).prompts
            assert [p.name for p in prompts] == ["intent-handshake"]

            res = await s.call_tool("read_file", {"path": "inventory/models.py"})
            assert not res.is_error
            assert res.structured_content["result"]["path"] == "inventory/models.py"
            on_disk = (plain_ws / "inventory" / "models.py").read_text()
            assert res.structured_content["result"]["content"] == on_disk

            await s.call_tool("activate", {"target": "docs/style.md"})
            ctx = _resource_text(await s.read_resource(URI_CONTEXT))
            assert (plain_ws / "docs" / "style.md").read_text().splitlines()[0] in ctx
            hist = json.loads(
                _resource_text(await s.read_resource(history_uri("inventory/models.py")))
            )
            assert hist and hist[0]["action"] == "created"

    run_async(body)
    # The server saved its session when the client hung up: it resumes with the pin.
    from ctxnb import Workspace

    with Workspace.open(plain_ws) as ws:
        session = ws.session("mcp-test")
        oid = session.find("docs/style.md")
        assert oid is not None and oid in session.active_set


@pytest.mark.slow
def test_stdio_protocol_errors_keep_the_server_serving(plain_ws: Path, tmp_path: Path) -> None:
    async def body() -> None:
        async with stdio_session(plain_ws, tmp_path / "err.log") as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("no_such_tool", {})
            assert e.value.code == types.INVALID_PARAMS
            with pytest.raises(MCPError) as e:
                await s.call_tool("read_lines", {"path": "README.md", "start": [], "end": "x"})
            assert e.value.code == types.INVALID_PARAMS
            res = await s.call_tool("read_file", {"path": "README.md"})
            assert not res.is_error

    run_async(body)


class _RawStdio:
    """``ctxnb mcp serve`` in a subprocess, spoken to line by line (no SDK client)."""

    def __init__(self, ws: Path, errlog: Path) -> None:
        self.errlog = errlog
        with open(errlog, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ctxnb", "mcp", "serve", str(ws)],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self.sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.seen: list[dict[str, Any]] = []

    def send_bytes(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def send(self, raw: str) -> None:
        self.send_bytes(raw.encode() + b"\n")

    def next(self, timeout: float = 30) -> dict[str, Any]:
        """The next message the server writes."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                raise AssertionError(f"no message from the server within {timeout}s")
            chunk = os.read(self.proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            if not chunk:
                raise AssertionError(f"server closed stdout: {self.errlog.read_text()}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        self.seen.append(msg)
        return msg

    def reply(self, request_id: int | str | None, timeout: float = 30) -> dict[str, Any]:
        """The next message answering ``request_id`` (None: an error with ``"id": null``)."""
        while True:
            msg = self.next(timeout)
            if "id" in msg and msg["id"] == request_id and ("result" in msg or "error" in msg):
                return msg

    def initialize(self) -> None:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        # The first answer waits for the server to start: generous on a loaded machine.
        assert self.reply(1, timeout=120)["result"]["serverInfo"]["name"] == "ctxnb"
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def close(self) -> None:
        self.sel.close()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        _stop(self.proc)
        self.proc.stdout.close()


@pytest.fixture
def raw_stdio(plain_ws: Path, tmp_path: Path) -> Iterator[_RawStdio]:
    raw = _RawStdio(plain_ws, tmp_path / "err.log")
    try:
        yield raw
    finally:
        raw.close()


@pytest.mark.slow
def test_stdio_raw_malformed_jsonrpc(raw_stdio: _RawStdio) -> None:
    """Bad params and unknown methods get their errors; serving goes on."""
    raw = raw_stdio
    raw.initialize()
    raw.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 7}}')
    assert raw.reply(2)["error"]["code"] == types.INVALID_PARAMS
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"}))
    assert raw.reply(3)["error"]["code"] == types.METHOD_NOT_FOUND
    call = {"name": "read_file", "arguments": {"path": "README.md"}}
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call}))
    ok = raw.reply(4)["result"]
    assert ok["isError"] is False
    assert ok["structuredContent"]["result"]["path"] == "README.md"


@pytest.mark.slow
def test_stdio_unreadable_lines_get_the_errors_the_spec_names(raw_stdio: _RawStdio) -> None:
    """Truncated, non-JSON, non-UTF-8, not-JSON-RPC and oversized lines each get one error
    (-32700 with id null, or -32600), and the next good request is still answered."""
    from ctxnb.integrations.mcp_stdio import DEFAULT_MAX_MESSAGE_BYTES

    raw = raw_stdio
    raw.initialize()
    parse_errors = [
        b'{"jsonrpc": "2.0", "id": 10, "method": "tools/li',  # truncated mid-request
        b"{this is not json",
        b"hello",
        b'{"jsonrpc": "2.0", "id": 11, "method": "ping"}}',  # trailing garbage
        b'"\xff\xfe"',  # not UTF-8
    ]
    for line in parse_errors:
        raw.send_bytes(line + b"\n")
        err = raw.reply(None)
        assert err["error"]["code"] == types.PARSE_ERROR, line
        assert err["id"] is None and err["jsonrpc"] == "2.0"
    invalid = [
        ('{"jsonrpc": "2.0", "id": 12, "method": 5}', 12),  # the id can be read: echoed
        ('{"jsonrpc": "1.0", "id": "a-13", "method": "ping"}', "a-13"),
        ('[{"jsonrpc": "2.0", "id": 14, "method": "ping"}]', None),  # a batch
        ('{"jsonrpc": "2.0", "id": 15.5, "method": "ping"}', None),  # not a valid id
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', None),
        ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', None),
        ('{"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}', None),
        ("42", None),
    ]
    for line, rid in invalid:
        raw.send(line)
        err = raw.reply(rid)
        assert err["error"]["code"] == types.INVALID_REQUEST, line
    # Longer than the limit: refused unread (a valid request inside does not run).
    big = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 16,
            "method": "ping",
            "params": {"_meta": {"pad": "x" * DEFAULT_MAX_MESSAGE_BYTES}},
        }
    )
    raw.send(big)
    err = raw.reply(None, timeout=60)
    assert err["error"]["code"] == types.INVALID_REQUEST
    assert str(DEFAULT_MAX_MESSAGE_BYTES) in err["error"]["message"]
    raw.send("")  # a blank line is no message and gets no answer
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 17, "method": "ping"}))
    assert raw.reply(17)["result"] == {}
    # One answer per bad line, nothing for the blank one, none for the oversized request.
    errors = [m for m in raw.seen if "error" in m]
    assert len(errors) == len(parse_errors) + len(invalid) + 1
    assert not any(m.get("id") == 16 for m in raw.seen)


def test_check_line_refuses_nesting_too_deep_to_parse() -> None:
    from ctxnb.integrations.mcp_stdio import check_line

    deep = b"[" * 100_000 + b"]" * 100_000
    in_params = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"a": ' + deep + b"}}"
    for line in (deep, in_params):
        err = check_line(line, max_bytes=1 << 20)
        assert err is not None and err.error.code == types.INVALID_REQUEST
        assert "nested" in err.error.message and err.id is None


@pytest.mark.slow
def test_stdio_a_deeply_nested_line_does_not_stop_the_server(raw_stdio: _RawStdio) -> None:
    """A 200 KB line of brackets is too deep for the JSON parser: it gets its error and
    the server keeps serving (it used to die on the parser's RecursionError)."""
    raw = raw_stdio
    raw.initialize()
    raw.send_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert raw.reply(None)["error"]["code"] == types.INVALID_REQUEST
    raw.send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
    assert raw.reply(5)["result"] == {}


@pytest.mark.slow
def test_stdio_governed_handshake_write_and_trace(gov_ws: Path, tmp_path: Path) -> None:
    async def body() -> None:
        notes: list[Any] = []

        async def on_message(message: Any) -> None:
            notes.append(message)

        async with stdio_session(gov_ws, tmp_path / "err.log", message_handler=on_message) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            # No intent yet: what would be refused is not listed (tool_listing="intent").
            assert {"select_active_intent", "search_tools", "read_file"} <= names
            assert "run_command" not in names and "write_file" not in names
            prompt = await s.get_prompt("intent-handshake", {"intent_id": "INT-INV"})
            block = prompt.messages[0].content
            assert isinstance(block, types.TextContent) and "INT-INV" in block.text

            read = await s.call_tool("read_file", {"path": "inventory/models.py"})
            sha = read.structured_content["result"]["sha256"]
            new = read.structured_content["result"]["content"] + "\n# checked\n"
            args = {"path": "inventory/models.py", "content": new, "expected_sha256": sha}

            refused = await s.call_tool("write_file", args)
            assert refused.is_error
            assert refused.structured_content["error_code"] == "NO_ACTIVE_INTENT"
            assert _text(refused).startswith("REFUSED NO_ACTIVE_INTENT: ")

            hs = await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            assert not hs.is_error and "<intent_context>" in _text(hs)
            with anyio.fail_after(30):
                while not any(
                    "ToolListChanged" in type(getattr(n, "root", n)).__name__ for n in notes
                ):
                    await anyio.sleep(0.05)
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"run_command", "write_file"} <= names

            out = await s.call_tool("write_file", {"path": "README.md", "content": "x\n"})
            assert out.is_error and out.structured_content["error_code"] == "SCOPE_VIOLATION"

            before = json.loads(_resource_text(await s.read_resource(URI_TRACE)))
            wrote = await s.call_tool("write_file", args)
            assert not wrote.is_error, _text(wrote)
            after = json.loads(_resource_text(await s.read_resource(URI_TRACE)))
            assert len(after) == len(before) + 1
            assert after[-1]["files"][0]["path"] == "inventory/models.py"
            assert (gov_ws / "inventory" / "models.py").read_text() == new

            ctx = _resource_text(await s.read_resource(URI_CONTEXT))
            assert "# checked" in ctx

    run_async(body)


@pytest.mark.slow
@pytest.mark.parametrize("approve", [True, False])
def test_stdio_destructive_command_asks_by_elicitation(
    gov_ws: Path, tmp_path: Path, approve: bool
) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    target = gov_ws / "inventory" / "report.py"

    async def body() -> types.CallToolResult:
        async with stdio_session(gov_ws, tmp_path / "err.log", elicitation_callback=on_elicit) as s:
            await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            return await s.call_tool("run_command", {"cmd": "rm inventory/report.py"})

    res = run_async(body)
    assert len(asked) == 1 and "rm inventory/report.py" in asked[0]
    assert_decided(res, target, approve)


@pytest.mark.slow
def test_stdio_destructive_command_without_elicitation_is_refused(
    gov_ws: Path, tmp_path: Path
) -> None:
    async def body() -> types.CallToolResult:
        async with stdio_session(gov_ws, tmp_path / "err.log") as s:
            await s.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            return await s.call_tool("run_command", {"cmd": "rm inventory/report.py"})

    res = run_async(body)
    assert res.is_error
    assert res.structured_content["error_code"] == "DESTRUCTIVE_NEEDS_APPROVAL"
    assert (gov_ws / "inventory" / "report.py").exists()


# -- streamable HTTP ----------------------------------------------------------------------------


@pytest.mark.slow
def test_http_client_round_trip(http_server: dict[str, Any]) -> None:
    async def body() -> None:
        async with streamable_http_client(http_server["url"]) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                assert "read_file" in names and "pin" in names
                res = await s.call_tool("read_file", {"path": "README.md"})
                assert not res.is_error
                assert res.structured_content["result"]["path"] == "README.md"
                bad = await s.call_tool("read_file", {"path": "../outside"})
                assert bad.is_error and bad.structured_content["error_code"]
                pool = json.loads(_resource_text(await s.read_resource(URI_METADATA)))
                # The pool holds tool calls too (the startup excerpts), which have no path.
                assert any(r["type"] == "file" and r["path"].endswith("README.md") for r in pool)

    run_async(body)


def _initialize_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.mark.slow
def test_http_refuses_foreign_host_and_origin(http_server: dict[str, Any]) -> None:
    url, port = http_server["url"], http_server["port"]
    with httpx2.Client(timeout=10) as c:
        ok = c.post(url, json=_initialize_body(), headers=_HEADERS)
        assert ok.status_code == 200
        evil_host = c.post(
            url, json=_initialize_body(), headers={**_HEADERS, "host": f"evil.example:{port}"}
        )
        assert 400 <= evil_host.status_code < 500
        evil_origin = c.post(
            url, json=_initialize_body(), headers={**_HEADERS, "origin": "http://evil.example"}
        )
        assert 400 <= evil_origin.status_code < 500
        good_origin = c.post(
            url,
            json=_initialize_body(),
            headers={**_HEADERS, "origin": f"http://localhost:{port}"},
        )
        assert good_origin.status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("http_server", [(None, ["--token", "s3cret-token"])], indirect=True)
def test_http_token_is_required_when_given(http_server: dict[str, Any]) -> None:
    url = http_server["url"]
    with httpx2.Client(timeout=10) as c:
        assert c.post(url, json=_initialize_body(), headers=_HEADERS).status_code == 401
        wrong = {**_HEADERS, "authorization": "Bearer wrong"}
        assert c.post(url, json=_initialize_body(), headers=wrong).status_code == 401

    # The deadlines guard a hang, not speed: the first call opens the workspace, which on
    # a loaded machine has taken longer than 30 s.
    async def body() -> None:
        auth = {"Authorization": "Bearer s3cret-token"}
        client = httpx2.AsyncClient(headers=auth, timeout=TIMEOUT)
        async with client, streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as s:
                await s.initialize()
                res = await s.call_tool("glob", {"pattern": "inventory/*.py"})
                assert "inventory/models.py" in _text(res)

    run_async(body, timeout=2 * TIMEOUT)


@pytest.mark.slow
def test_http_wide_bind_without_token_refuses_to_start(plain_ws: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CTXNB_MCP_TOKEN"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "ctxnb", "mcp", "serve", str(plain_ws), "--http",
         str(_free_port()), "--host", "0.0.0.0"],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "without a bearer token" in proc.stderr


# -- docs/integrations.md: its examples run ----------------------------------------------------

DOC = REPO / "docs" / "integrations.md"


def _blocks(lang: str) -> list[str]:
    import re

    return re.findall(rf"```{lang}[^\n]*\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _run_example(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    bin_dir = str(Path(sys.executable).parent)  # where the `ctxnb` command is installed
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    return subprocess.run(
        [sys.executable, str(script)],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_doc_json_snippets_are_valid() -> None:
    snippets = [json.loads(b) for b in _blocks("json")]
    servers = [s["mcpServers"]["ctxnb"] for s in snippets if "mcpServers" in s]
    assert len(servers) == 3
    assert servers[0]["args"][:2] == ["mcp", "serve"]
    assert any(s.get("url", "").endswith("/mcp") for s in servers)


def test_doc_tool_discovery_example() -> None:
    code = next(b for b in _blocks("python") if "ToolIndex" in b)
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
    assert namespace["schemas"][0]["name"] == "ctxnb__apply_patch"


@pytest.mark.slow
def test_doc_python_stdio_client_example(plain_ws: Path, tmp_path: Path) -> None:
    code = next(b for b in _blocks("python") if "stdio_client" in b)
    proc = _run_example(code.replace("/path/to/ws", str(plain_ws)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "'read_file'" in proc.stdout and "objects in the pool" in proc.stdout
    sha = __import__("hashlib").sha256((plain_ws / "README.md").read_bytes()).hexdigest()
    assert sha in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("http_server", [(None, ["--token", "the token"])], indirect=True)
def test_doc_python_http_client_example(http_server: dict[str, Any], tmp_path: Path) -> None:
    code = next(b for b in _blocks("python") if "streamable_http_client" in b)
    code = code.replace("http://127.0.0.1:8765/mcp", http_server["url"])
    proc = _run_example(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "inventory/models.py" in proc.stdout


def test_doctests() -> None:
    import doctest

    import ctxnb.cli.integrations as cli_mod
    import ctxnb.integrations.mcp_server as server_mod

    for mod in (server_mod, cli_mod):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, mod.__name__


def test_read_file_text_is_written_for_a_model(plain_ws: Path) -> None:
    body = "".join(f'    line_{i} = "value {i}"  # a comment with "quotes"\n' for i in range(20))
    (plain_ws / "inventory" / "sample.py").write_text("def f():\n" + body)
    with McpBackend(plain_ws) as b:
        res = b.call_tool("read_file", {"path": "inventory/sample.py"})
        result = res.structured_content["result"]
        header, rest = _text(res).split("\n", 1)
        # one header line, then the file exactly as it is (no escaped newlines or quotes)
        assert header.startswith("inventory/sample.py · lines 1-21 of 21 · sha256 ")
        assert result["sha256"] in header and result["version_id"] not in _text(res)
        assert rest == result["content"]
        assert len(_text(res)) < len(json.dumps(result)) * 0.85
        listed = b.call_tool("glob", {"pattern": "inventory/*.py"})
        assert "inventory/sample.py\n" in _text(listed) and "[" not in _text(listed)


def test_model_text_doctests() -> None:
    import doctest

    from ctxnb.integrations import model_text

    result = doctest.testmod(model_text)
    assert result.attempted >= 2 and result.failed == 0


@pytest.mark.slow
@pytest.mark.parametrize("http_server", [("governed", [])], indirect=True)
def test_http_intent_selection_belongs_to_one_client_session(http_server: dict[str, Any]) -> None:
    """Client A's handshake does not let client B (another Mcp-Session-Id) mutate."""

    async def body() -> None:
        async with (
            streamable_http_client(http_server["url"]) as (ra, wa),
            streamable_http_client(http_server["url"]) as (rb, wb),
            ClientSession(ra, wa, read_timeout_seconds=30) as a,
            ClientSession(rb, wb, read_timeout_seconds=30) as b,
        ):
            await a.initialize()
            await b.initialize()
            hs = await a.call_tool("select_active_intent", {"intent_id": "INT-INV"})
            assert not hs.is_error, _text(hs)
            cmd = {"cmd": "ls inventory"}
            refused = await b.call_tool("run_command", cmd)
            assert refused.is_error
            assert refused.structured_content["error_code"] == "NO_ACTIVE_INTENT"
            ran = await a.call_tool("run_command", cmd)
            assert not ran.is_error, _text(ran)
            assert "models.py" in ran.structured_content["result"]["stdout"]

    run_async(body)


def test_backend_keeps_one_intent_per_client_session(gov_ws: Path) -> None:
    class Ctx:  # what the SDK hands a handler: a session that knows its connection
        def __init__(self) -> None:
            self.session = type("Session", (), {})()
            self.session._connection = type("Connection", (), {})()

    one, two = Ctx(), Ctx()
    with McpBackend(gov_ws) as b:
        b.approver = None  # type: ignore[assignment]
        assert not b.call_tool("select_active_intent", {"intent_id": "INT-INV"}, one).is_error
        res = b.call_tool("write_file", {"path": "inventory/x.py", "content": "x\n"}, two)
        assert res.structured_content["error_code"] == "NO_ACTIVE_INTENT"
        res = b.call_tool("write_file", {"path": "inventory/x.py", "content": "x\n"}, one)
        assert not res.is_error, _text(res)
