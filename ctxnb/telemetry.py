"""OpenTelemetry export: sessions, tool calls, model calls and ledger records as GenAI spans.

Observability tools researchers already use (Arize Phoenix, Langfuse, Jaeger, any OTLP
collector) read OpenTelemetry spans in the GenAI semantic conventions. ctxnb writes:

* one ``invoke_agent`` span per session (``gen_ai.conversation.id`` is the session id);
* one ``execute_tool`` span per audited tool call, a child of its session's span, with
  ``gen_ai.tool.name``, the arguments as recorded in the audit log, the intent id and,
  for a refused call, ``error.type`` and an error status;
* one ``agent_trace.record`` event per Agent Trace record on its session's span, carrying
  the whole record (``ctxnb.agent_trace.record``, JSON) and its intent, files, tool and
  context ids as attributes, so the ledger can be rebuilt from the spans
  (:func:`trace_frame_from_spans` gives the frame :func:`ctxnb.analysis.load_trace` gives);
  the ledger is read through the verifier every reader uses
  (:mod:`ctxnb.govern.ledgercheck`), and each event carries its record's verdict
  (``ctxnb.agent_trace.integrity``: ``verified``, ``chained``, ``unchained`` or
  ``tampered``), so a record changed outside ctxnb is exported marked, never as genuine;
* for a trajectory (a replay or a live run), one ``chat`` span per model call (span kind
  CLIENT) with the provider (``gen_ai.provider.name``), the model and token usage (input,
  output, cache reads and cache writes), and one ``execute_tool`` span per action.

Span names, kinds and attributes follow the OpenTelemetry GenAI semantic conventions;
``tests/analysis/test_telemetry.py`` checks every ``gen_ai.*`` attribute written against
the conventions' registry as the ``opentelemetry-semantic-conventions`` package ships it,
deprecated names excluded. Spans leave in batches (one OTLP request per 512 spans).

Spans are built as plain data first (:class:`SpanData`), then emitted through the
``opentelemetry-sdk`` with their recorded times, to any ``SpanExporter``, to an OTLP/HTTP
endpoint, or to a file in the OTLP JSON-lines format. Every text attribute passes through
ctxnb's redaction on the way out. Needs ``pip install 'ctxnb[otel]'``.

Example:
    >>> from ctxnb.telemetry import SpanData
    >>> s = SpanData(key="s1", parent=None, name="invoke_agent ctxnb", start_ns=1, end_ns=2)
    >>> s.attributes
    {}
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._util.jsonl import iter_jsonl
from .errors import MissingDependencyError
from .govern.ledger import record_session_id
from .redaction.redactor import redact_text

if TYPE_CHECKING:
    import pandas as pd

    from .replay.model import Trajectory

__all__ = [
    "SpanData",
    "provider_name",
    "TelemetryReport",
    "export_spans",
    "export_workspace",
    "trace_frame_from_spans",
    "trajectory_spans",
    "workspace_spans",
]

AGENT_NAME = "ctxnb"
RECORD_EVENT = "agent_trace.record"
RECORD_ATTRIBUTE = "ctxnb.agent_trace.record"
INTEGRITY_ATTRIBUTE = "ctxnb.agent_trace.integrity"
# A trajectory records no times; its steps are laid out one second apart from its start.
STEP_SPACING = timedelta(seconds=1)

Attributes = dict[str, Any]


@dataclass(frozen=True)
class SpanData:
    """One span, before it is emitted: ``parent`` names another span's ``key``."""

    key: str
    parent: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Attributes = field(default_factory=dict)
    events: tuple[tuple[str, int, Attributes], ...] = ()
    error: str | None = None
    # The GenAI conventions' span kinds: a model call goes to a remote service (CLIENT);
    # ctxnb's agent and its tools run in process (INTERNAL).
    kind: str = "internal"


@dataclass(frozen=True)
class TelemetryReport:
    """What an export sent: the number of spans and events, and where they went."""

    spans: int
    events: int
    destination: str

    def __str__(self) -> str:
        return f"exported {self.spans} spans and {self.events} events to {self.destination}"


# litellm's provider prefixes (and model name families) mapped to the GenAI conventions'
# well-known `gen_ai.provider.name` values; a prefix not listed is kept as it is (the
# conventions allow a custom value), and a bare unknown name is "unknown".
_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "cohere": "cohere",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
}
_FAMILIES = (
    ("claude", "anthropic"),
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("gemini", "gcp.gemini"),
    ("mistral", "mistral_ai"),
    ("deepseek", "deepseek"),
    ("grok", "x_ai"),
    ("command", "cohere"),
)


def provider_name(model: str) -> str:
    """``gen_ai.provider.name`` for a model id as litellm names it.

    Example:
        >>> [provider_name(m) for m in ("anthropic/claude-sonnet-4", "gpt-5-mini",
        ...  "gemini/gemini-2.5-pro", "openrouter/google/gemini-2.5-flash", "local-model")]
        ['anthropic', 'openai', 'gcp.gemini', 'openrouter', 'unknown']
    """
    prefix, _, rest = model.partition("/")
    if rest:
        return _PROVIDERS.get(prefix.lower(), prefix.lower())
    name = model.lower()
    return next((p for family, p in _FAMILIES if name.startswith(family)), "unknown")


def _ns(ts: str | datetime) -> int:
    when = datetime.fromisoformat(ts.replace("Z", "+00:00")) if isinstance(ts, str) else ts
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1e9)


def _text(value: Any) -> str:
    return redact_text(value if isinstance(value, str) else json.dumps(value, sort_keys=True))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [rec for _, rec in iter_jsonl(data)]


def _checked_records(path: Path) -> list[tuple[dict[str, Any], str]]:
    """The ledger's records with the verifier's verdict on each."""
    from .govern.ledgercheck import check_ledger

    check = check_ledger(path)
    if check.refused is not None:
        raise check.refused
    return [(rec, check.integrity[n]) for n, rec in check.records]


def _record_event(
    line: int, record: Mapping[str, Any], integrity: str
) -> tuple[str, int, Attributes]:
    meta = record.get("metadata") or {}
    attrs: Attributes = {
        RECORD_ATTRIBUTE: _text(record),
        INTEGRITY_ATTRIBUTE: integrity,
        # The ledger's order, which timestamps alone cannot give back (ties, clock steps).
        "ctxnb.agent_trace.line": line,
        "ctxnb.agent_trace.id": str(record.get("id", "")),
        "ctxnb.files": [str(f.get("path", "")) for f in record.get("files") or []],
    }
    for key, name in (
        ("intent_id", "ctxnb.intent_id"),
        ("tool", "gen_ai.tool.name"),
        ("mutation_class", "ctxnb.mutation_class"),
        ("context_id", "ctxnb.context_id"),
        ("turn", "ctxnb.turn"),
    ):
        if meta.get(key) is not None:
            attrs[name] = meta[key] if isinstance(meta[key], int) else _text(meta[key])
    return RECORD_EVENT, _ns(str(record.get("timestamp"))), attrs


def workspace_spans(root: str | os.PathLike[str]) -> list[SpanData]:
    """The spans of a workspace's audit log and trace ledger, sessions first.

    Reads ``.ctxnb/audit.jsonl`` and ``.orchestration/agent_trace.jsonl`` (either may be
    missing); a line cut by a crash is skipped, as every ctxnb reader does.
    """
    root = Path(root)
    calls = _jsonl(root / ".ctxnb" / "audit.jsonl")
    records = _checked_records(root / ".orchestration" / "agent_trace.jsonl")
    children: dict[str | None, list[SpanData]] = {}
    events: dict[str | None, list[tuple[str, int, Attributes]]] = {}
    for i, call in enumerate(calls):
        if "ts" not in call:
            continue
        end = _ns(str(call["ts"]))
        start = end - int(float(call.get("duration_ms") or 0) * 1e6)
        session = call.get("session_id")
        tool = str(call.get("tool", "unknown"))
        attrs: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": _text(call.get("args") or {}),
            "ctxnb.caller": _text(call.get("caller") or ""),
        }
        if call.get("intent_id"):
            attrs["ctxnb.intent_id"] = _text(call["intent_id"])
        error = None if call.get("success", True) else str(call.get("error_code") or "error")
        if error:
            attrs["error.type"] = error
        key = f"call:{i}"
        children.setdefault(session, []).append(
            SpanData(
                key, f"session:{session}", f"execute_tool {tool}", start, end, attrs, (), error
            )
        )
    for line, (record, integrity) in enumerate(records):
        events.setdefault(record_session_id(record), []).append(
            _record_event(line, record, integrity)
        )
    spans: list[SpanData] = []
    for session in sorted(set(children) | set(events), key=lambda s: (s is None, s or "")):
        kids, evs = children.get(session, []), events.get(session, [])
        times = [t for k in kids for t in (k.start_ns, k.end_ns)] + [e[1] for e in evs]
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME}
        if session is not None:
            attrs["gen_ai.conversation.id"] = _text(session)
        spans.append(
            SpanData(
                f"session:{session}",
                None,
                f"invoke_agent {AGENT_NAME}",
                min(times),
                max(times),
                attrs,
                tuple(sorted(evs, key=lambda e: e[1])),
            )
        )
        spans.extend(kids)
    return spans


def trajectory_spans(
    trajectory: Trajectory,
    *,
    model: str | None = None,
    calls: Sequence[Any] = (),
    start: datetime | None = None,
) -> list[SpanData]:
    """The spans of one agent run: ``invoke_agent``, then a ``chat`` and a tool per step.

    Args:
        trajectory: a replayed or live run (``LiveResult.trajectory``).
        model: the model's name, for ``gen_ai.request.model`` (else the trajectory's).
        calls: the run's per-call usage (``LiveResult.calls``); it wins over the steps'.
        start: the run's start; the steps are laid out one second apart from it.
    """
    model = model or str(trajectory.metadata.get("model") or "unknown")
    provider = provider_name(model)
    t0 = start or datetime(1970, 1, 1, tzinfo=UTC)
    run_key = f"run:{trajectory.id}"
    spans: list[SpanData] = []
    for step in trajectory.steps:
        begin = _ns(t0 + step.index * STEP_SPACING)
        mid, end = begin + 500_000_000, begin + 900_000_000
        chat: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": _text(model),
            "gen_ai.conversation.id": _text(trajectory.id),
        }
        call = calls[step.index] if step.index < len(calls) else None
        if call is not None:
            chat["gen_ai.usage.input_tokens"] = int(call.prompt_tokens)
            chat["gen_ai.usage.output_tokens"] = int(call.completion_tokens)
            chat["gen_ai.usage.cache_read.input_tokens"] = int(call.cached_tokens)
        elif step.usage is not None:
            usage = step.usage
            for key, value in (
                ("gen_ai.usage.input_tokens", usage.prompt_tokens),
                ("gen_ai.usage.output_tokens", usage.completion_tokens),
                ("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens),
                ("gen_ai.usage.cache_creation.input_tokens", _writes(usage)),
            ):
                if value is not None:
                    chat[key] = int(value)
        spans.append(
            SpanData(
                f"chat:{step.index}", run_key, f"chat {model}", begin, mid, chat, kind="client"
            )
        )
        tool: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step.action.tool,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": _text(step.action.args),
        }
        if step.observation is not None:
            tool["gen_ai.tool.call.result"] = _text(step.observation)
        name = f"execute_tool {step.action.tool}"
        spans.append(SpanData(f"tool:{step.index}", run_key, name, mid, end, tool))
    first = spans[0].start_ns if spans else _ns(t0)
    last = spans[-1].end_ns if spans else _ns(t0)
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.conversation.id": _text(trajectory.id),
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": _text(model),
    }
    return [SpanData(run_key, None, f"invoke_agent {AGENT_NAME}", first, last, agent), *spans]


def _writes(usage: Any) -> int | None:
    """Prompt tokens written to the provider's cache, for five minutes or an hour."""
    parts = [usage.cache_write_tokens, usage.cache_write_1h_tokens]
    return None if all(p is None for p in parts) else sum(p or 0 for p in parts)


def _sdk() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace
    except ImportError:
        raise MissingDependencyError.for_extra("opentelemetry-sdk", "otel") from None
    return sdk_trace


class _OtlpJsonLinesExporter:
    """Writes each batch as one line of OTLP JSON (the OpenTelemetry file-exporter format)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[Any]) -> Any:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        message = MessageToDict(encode_spans(spans))
        # OTLP JSON writes ids as hex, where protobuf's JSON mapping writes base64.
        for rs in message.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(message, separators=(",", ":")) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def export_spans(
    spans: Iterable[SpanData],
    *,
    exporter: Any = None,
    path: str | os.PathLike[str] | None = None,
    endpoint: str | None = None,
    service_name: str = AGENT_NAME,
) -> TelemetryReport:
    """Emit spans through the OpenTelemetry SDK with their recorded times.

    Give exactly one destination: ``exporter`` (any ``SpanExporter``, such as the SDK's
    ``InMemorySpanExporter``), ``path`` (OTLP JSON lines, appended) or ``endpoint`` (an
    OTLP/HTTP traces URL such as ``http://127.0.0.1:4318/v1/traces``).
    """
    given = [x for x in (exporter, path, endpoint) if x is not None]
    if len(given) != 1:
        raise ValueError("export_spans needs exactly one of exporter=, path= or endpoint=")
    sdk_trace = _sdk()
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if path is not None:
        exporter, destination = _OtlpJsonLinesExporter(Path(path)), str(path)
    elif endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter, destination = OTLPSpanExporter(endpoint=endpoint), endpoint
    else:
        destination = type(exporter).__name__
    provider = sdk_trace.TracerProvider(resource=Resource.create({"service.name": service_name}))
    # Batched: one OTLP request carries up to 512 spans (the SDK's default batch), not one
    # request per span; shutdown() flushes what is left.
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("ctxnb.telemetry")
    ordered = list(spans)
    kinds = {"internal": trace.SpanKind.INTERNAL, "client": trace.SpanKind.CLIENT}
    live: dict[str, Any] = {}
    n_events = 0
    for data in ordered:  # parents come before their children
        parent = live.get(data.parent) if data.parent else None
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        span = tracer.start_span(
            data.name,
            context=ctx,
            kind=kinds[data.kind],
            start_time=data.start_ns,
            attributes=data.attributes,
        )
        for name, ts, attrs in data.events:
            span.add_event(name, attrs, timestamp=ts)
            n_events += 1
        if data.error:
            span.set_status(trace.Status(trace.StatusCode.ERROR, data.error))
        live[data.key] = span
    for data in reversed(ordered):  # children end (and are exported) before parents
        live[data.key].end(end_time=data.end_ns)
    provider.shutdown()
    return TelemetryReport(spans=len(ordered), events=n_events, destination=destination)


def export_workspace(root: str | os.PathLike[str], **destination: Any) -> TelemetryReport:
    """:func:`workspace_spans` then :func:`export_spans` (same destination arguments)."""
    return export_spans(workspace_spans(root), **destination)


def trace_frame_from_spans(spans: Iterable[Any]) -> pd.DataFrame:
    """The Agent Trace frame rebuilt from exported spans (the SDK's ``ReadableSpan``).

    It equals :func:`ctxnb.analysis.load_trace` of the ledger the spans came from.
    """
    from .analysis._trace import trace_frame_from_jsonl

    found: list[tuple[int, str, str | None]] = []
    for span in spans:
        for event in span.events:
            attrs = event.attributes or {}
            if event.name == RECORD_EVENT and RECORD_ATTRIBUTE in attrs:
                verdict = attrs.get(INTEGRITY_ATTRIBUTE)
                found.append(
                    (
                        int(attrs["ctxnb.agent_trace.line"]),
                        str(attrs[RECORD_ATTRIBUTE]),
                        str(verdict) if verdict is not None else None,
                    )
                )
    found.sort(key=lambda f: f[0])
    lines = [text for _, text, _ in found]
    return trace_frame_from_jsonl("\n".join(lines).encode(), [v for _, _, v in found])
