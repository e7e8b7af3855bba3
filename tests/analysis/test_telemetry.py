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
        tools.session.close()  # in turn: the next session takes the intent's scope
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


# -- the GenAI semantic conventions -----------------------------------------------------------

CONVENTIONS = json.loads(
    (Path(__file__).parent.parent / "data" / "otel-genai" / "registry.json").read_text()
)


def _genai_keys(spans: list[Any]) -> set[str]:
    return {k for s in spans for k in (s.attributes or {}) if k.startswith("gen_ai.")} | {
        k for s in spans for e in s.events for k in (e.attributes or {}) if k.startswith("gen_ai.")
    }


def _claude_code_spans(test_data: Path) -> list[Any]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ctxnb.replay import load
    from ctxnb.telemetry import export_spans, trajectory_spans

    path = test_data / "trajectories" / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    exporter = InMemorySpanExporter()
    export_spans(trajectory_spans(load(path)), exporter=exporter)
    return list(exporter.get_finished_spans())


def test_every_genai_attribute_is_one_the_conventions_define(
    governed: tuple[Path, str], test_data: Path
) -> None:
    spans = _memory_spans(governed[0]) + _claude_code_spans(test_data)
    used = _genai_keys(spans)
    assert {"gen_ai.provider.name", "gen_ai.usage.cache_creation.input_tokens"} <= used
    assert used - set(CONVENTIONS["attributes"]) == set()
    ops = {s.attributes["gen_ai.operation.name"] for s in spans}
    assert ops == {"invoke_agent", "execute_tool", "chat"}
    assert ops <= set(CONVENTIONS["operation_names"])


def test_span_kinds_and_the_provider_follow_the_conventions(test_data: Path) -> None:
    from opentelemetry.trace import SpanKind

    spans = _claude_code_spans(test_data)
    for span in spans:
        op = span.attributes["gen_ai.operation.name"]
        expected = CONVENTIONS["span_kinds"][op]
        assert span.kind.name in (expected if isinstance(expected, list) else [expected]), op
    chats = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    assert chats and all(s.kind is SpanKind.CLIENT for s in chats)
    for key in CONVENTIONS["required_on_inference"]:
        assert all(key in s.attributes for s in chats), key
    # The recorded session is Claude's: a well-known provider value, not a guess.
    assert {s.attributes["gen_ai.provider.name"] for s in chats} == {"anthropic"}
    assert "anthropic" in CONVENTIONS["provider_names"]
    # Cache writes and reads are counted, and both are part of the input tokens.
    written = sum(s.attributes.get("gen_ai.usage.cache_creation.input_tokens", 0) for s in chats)
    assert written > 0
    for s in chats:
        a = s.attributes
        cached = a.get("gen_ai.usage.cache_read.input_tokens", 0) + a.get(
            "gen_ai.usage.cache_creation.input_tokens", 0
        )
        assert cached <= a.get("gen_ai.usage.input_tokens", cached)


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("anthropic/claude-opus-4-6", "anthropic"),
        ("claude-sonnet-4", "anthropic"),
        ("gpt-5-mini", "openai"),
        ("openai/gpt-5-mini", "openai"),
        ("gemini/gemini-2.5-pro", "gcp.gemini"),
        ("vertex_ai/gemini-2.5-pro", "gcp.vertex_ai"),
        ("bedrock/anthropic.claude-3", "aws.bedrock"),
        ("azure/gpt-4o", "azure.ai.openai"),
        ("mistral/mistral-large", "mistral_ai"),
        ("xai/grok-4", "x_ai"),
        ("openrouter/google/gemini-2.5-flash", "openrouter"),
        ("smollm2-135m", "unknown"),
    ],
)
def test_the_provider_is_the_conventions_value_for_litellm_names(model: str, provider: str) -> None:
    from ctxnb.telemetry import provider_name

    assert provider_name(model) == provider
    if provider not in ("openrouter", "unknown"):
        assert provider in CONVENTIONS["provider_names"]


def test_spans_leave_in_batches_not_one_request_each(
    test_data: Path, collector: tuple[str, list[bytes]]
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from ctxnb.replay import load
    from ctxnb.telemetry import export_spans, trajectory_spans

    url, bodies = collector
    path = next((test_data / "trajectories" / "mini-swe-agent").glob("*.traj.json"))
    report = export_spans(trajectory_spans(load(path)), endpoint=url)
    received = [
        s
        for body in bodies
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    assert len(received) == report.spans > 20
    # The SDK's batch holds 512 spans: a run of this size is one request, not one per span.
    assert len(bodies) <= -(-report.spans // 512)
