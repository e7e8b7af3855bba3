"""OpenTelemetry export: real spans through the SDK, read back, sent over real OTLP/HTTP."""

from __future__ import annotations

import json
import secrets
import string
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _needs import has_module, require

from ctxnb import Workspace
from ctxnb.analysis import load_trace
from ctxnb.govern import init_governance

INTENTS = """\
active_intents:
  - id: INT-001
    name: Inventory reorder rules
    status: active
    owned_scope: ["inventory/**", "tests/**"]
"""


@pytest.fixture(autouse=True)
def _otel() -> None:
    require(has_module("opentelemetry.sdk"), "opentelemetry-sdk (the otel extra)")


def _fake_key() -> str:
    # A generated AWS-style access key id (never a real one).
    return "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))


@pytest.fixture
def governed(git_repo: Path) -> tuple[Path, str]:
    """Two sessions of real governed tool calls: writes, a refusal, a search with a key."""
    init_governance(git_repo)
    (git_repo / ".orchestration" / "active_intents.yaml").write_text(INTENTS)
    key = _fake_key()
    ws = Workspace.open(git_repo)
    for sid in ("alpha", "beta"):
        tools = ws.tools(ws.session(sid), caller="test-agent", model_id="example/model")
        refused = tools.dispatch("write_file", {"path": "inventory/models.py", "content": "x"})
        assert refused["error_code"] == "NO_ACTIVE_INTENT"
        tools.dispatch("select_active_intent", {"intent_id": "INT-001"})
        read = tools.read_file("inventory/models.py")
        new = read.content + f"\n# {sid}\n"
        assert tools.write_file("inventory/models.py", new, expected_sha256=read.sha256).success
        tools.dispatch("search", {"pattern": f"aws_key = {key}"})
    ws.close()
    return git_repo, key


def _memory_spans(root: Path) -> list[Any]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ctxnb.telemetry import export_workspace

    exporter = InMemorySpanExporter()
    report = export_workspace(root, exporter=exporter)
    spans = list(exporter.get_finished_spans())
    assert report.spans == len(spans)
    return spans


def test_sessions_and_tool_calls_become_genai_spans(governed: tuple[Path, str]) -> None:
    root, _ = governed
    spans = _memory_spans(root)
    agents = [s for s in spans if s.attributes["gen_ai.operation.name"] == "invoke_agent"]
    tools = [s for s in spans if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert sorted(a.attributes["gen_ai.conversation.id"] for a in agents) == ["alpha", "beta"]
    audit = [json.loads(x) for x in (root / ".ctxnb" / "audit.jsonl").read_text().splitlines()]
    assert len(tools) == len(audit) and len(spans) == len(audit) + 2
    by_id = {a.context.span_id: a.attributes["gen_ai.conversation.id"] for a in agents}
    for span, call in zip(sorted(tools, key=lambda s: s.start_time), audit, strict=True):
        # Each call is a child of its own session's span, in the same trace.
        assert span.parent is not None and by_id[span.parent.span_id] == call["session_id"]
        assert span.name == f"execute_tool {call['tool']}"
        assert span.attributes["gen_ai.tool.name"] == call["tool"]
        assert span.end_time - span.start_time == pytest.approx(call["duration_ms"] * 1e6, abs=1e3)
    refused = [s for s in tools if "error.type" in s.attributes]
    assert [s.attributes["error.type"] for s in refused] == ["NO_ACTIVE_INTENT"] * 2
    assert all(s.status.status_code.name == "ERROR" for s in refused)
    writes = [s for s in tools if s.attributes["gen_ai.tool.name"] == "write_file"]
    assert any(s.attributes.get("ctxnb.intent_id") == "INT-001" for s in writes)


def test_the_ledger_is_rebuilt_from_the_spans(governed: tuple[Path, str]) -> None:
    from ctxnb.telemetry import trace_frame_from_spans

    root, _ = governed
    spans = _memory_spans(root)
    events = [e for s in spans for e in s.events if e.name == "agent_trace.record"]
    ledger = (root / ".orchestration" / "agent_trace.jsonl").read_text().splitlines()
    assert len(events) == len(ledger) >= 2
    assert all(e.attributes["ctxnb.intent_id"] == "INT-001" for e in events)
    expected = load_trace(root)
    got = trace_frame_from_spans(spans)
    pd.testing.assert_frame_equal(got, expected)


def test_no_secret_leaves_in_any_attribute(governed: tuple[Path, str], tmp_path: Path) -> None:
    from ctxnb.telemetry import export_workspace

    root, key = governed
    out = tmp_path / "spans.jsonl"
    export_workspace(root, path=out)
    text = out.read_text()
    assert "aws_key" in text and key not in text
    assert key not in json.dumps([dict(s.attributes) for s in _memory_spans(root)])


def test_the_file_is_otlp_json_lines(governed: tuple[Path, str], tmp_path: Path) -> None:
    from ctxnb.telemetry import export_workspace

    root, _ = governed
    out = tmp_path / "spans.jsonl"
    report = export_workspace(root, path=out)
    spans = []
    for line in out.read_text().splitlines():
        message = json.loads(line)
        for rs in message["resourceSpans"]:
            assert {"key": "service.name", "value": {"stringValue": "ctxnb"}} in rs["resource"][
                "attributes"
            ]
            spans += [s for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert len(spans) == report.spans
    # OTLP JSON writes ids as lowercase hex (32 and 16 digits), not base64.
    assert all(len(s["traceId"]) == 32 and int(s["traceId"], 16) for s in spans)
    assert all(len(s["spanId"]) == 16 for s in spans)
    assert len({s["traceId"] for s in spans}) == 2  # one trace per session


class _Collector(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []
    handler = type("Collector", (_Collector,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_spans_reach_a_real_otlp_http_endpoint(
    governed: tuple[Path, str], collector: tuple[str, list[bytes]]
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from ctxnb.telemetry import export_workspace

    root, _ = governed
    url, bodies = collector
    report = export_workspace(root, endpoint=url)
    names = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            names += [s.name for ss in rs.scope_spans for s in ss.spans]
    assert len(names) == report.spans and names.count("invoke_agent ctxnb") == 2


def test_a_trajectory_becomes_chat_and_tool_spans(test_data: Path) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ctxnb.replay import load
    from ctxnb.telemetry import export_spans, trajectory_spans

    path = next((test_data / "trajectories" / "mini-swe-agent").glob("*.traj.json"))
    traj = load(path)
    exporter = InMemorySpanExporter()
    export_spans(trajectory_spans(traj, model="openai/gpt-5-mini"), exporter=exporter)
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    tools = [s for s in spans if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert len(chats) == len(tools) == len(traj.steps) > 0
    assert all(s.name == "chat openai/gpt-5-mini" for s in chats)
    with_usage = [s for s in traj.steps if s.usage and s.usage.prompt_tokens is not None]
    assert sum(s.attributes.get("gen_ai.usage.input_tokens", 0) for s in chats) == sum(
        s.usage.prompt_tokens for s in with_usage if s.usage and s.usage.prompt_tokens
    )
    root = [s for s in spans if s.parent is None]
    assert len(root) == 1 and all(s.parent.span_id == root[0].context.span_id for s in chats)


def test_a_destination_must_be_given_once(tmp_path: Path) -> None:
    from ctxnb.telemetry import export_spans

    with pytest.raises(ValueError, match="exactly one"):
        export_spans([])
    with pytest.raises(ValueError, match="exactly one"):
        export_spans([], path=tmp_path / "a", endpoint="http://127.0.0.1:9/v1/traces")
