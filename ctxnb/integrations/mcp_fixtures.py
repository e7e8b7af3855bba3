"""The MCP conformance suite's diagnostic fixtures, served by ctxnb's own server stack.

The official suite (``@modelcontextprotocol/conformance``) tests a server through tools,
resources and prompts of fixed names and answers (``test_simple_text``,
``test://static-text``, ``test_prompt_with_arguments`` …), which every SDK's conformance
server registers. ``ctxnb mcp serve --conformance-fixtures`` registers them beside the
workspace's own, on the same :func:`~ctxnb.integrations.mcp_server.build_server`, the same
transports, sessions, request-state seal and Host/Origin checks, so the suite exercises
ctxnb's stack: content types, progress, logging, completion, subscriptions, elicitation
and sampling over a 2025-11-25 session, and ``input_required`` rounds, sealed
``requestState`` and per-request capabilities on the 2026-07-28 stateless path.

They never touch the workspace, and they are off unless asked for: a workspace server
offers no ``test_*`` tool. What each fixture must do is the suite's own description of
its scenario.

Example:
    >>> fx = ConformanceFixtures()
    >>> "test_simple_text" in [t.name for t in fx.tools()]
    True
    >>> fx.owns_resource("test://static-text"), fx.owns_resource("ctxnb://context")
    (True, False)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._mcp_sdk import anyio, types

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["ConformanceFixtures"]

# A 1x1 red PNG and a 44-byte silent WAV: the smallest content of each kind.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
_TEMPLATE = re.compile(r"^test://template/([^/]+)/data$")
_OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def _schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _elicit(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def _sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=_text(text))],
            max_tokens=max_tokens,
        )
    )


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value


_ENUMS = {
    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
    "titledSingle": {
        "type": "string",
        "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ],
    },
    "legacyEnum": {
        "type": "string",
        "enum": ["opt1", "opt2", "opt3"],
        "enumNames": ["Option One", "Option Two", "Option Three"],
    },
    "untitledMulti": {
        "type": "array",
        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
    },
    "titledMulti": {
        "type": "array",
        "items": {
            "anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]
        },
    },
}
_DEFAULTS = {
    "name": {"type": "string", "default": "John Doe"},
    "age": {"type": "integer", "default": 30},
    "score": {"type": "number", "default": 95.5},
    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "default": True},
}
# The 2026-07-28 input rounds: tool -> the requests of its first round.
_ROUND_ONE: dict[str, dict[str, Any]] = {
    "test_input_required_result_elicitation": {
        "user_name": _elicit("What is your name?", _schema(name={"type": "string"}))
    },
    "test_input_required_result_sampling": {
        "capital_question": _sample("What is the capital of France?", 100)
    },
    "test_input_required_result_list_roots": {"client_roots": types.ListRootsRequest()},
    "test_input_required_result_request_state": {
        "confirm": _elicit("Please confirm", _schema(ok={"type": "boolean"}))
    },
    "test_input_required_result_multiple_inputs": {
        "user_name": _elicit("What is your name?", _schema(name={"type": "string"})),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": types.ListRootsRequest(),
    },
    "test_input_required_result_multi_round": {
        "step1": _elicit("Step 1: What is your name?", _schema(name={"type": "string"}))
    },
    "test_input_required_result_tampered_state": {
        "confirm": _elicit("Please confirm", _schema(ok={"type": "boolean"}))
    },
    "test_streaming_elicitation": {
        "answer": _elicit("Answer to continue", _schema(ok={"type": "boolean"}))
    },
}
_STEP2 = {
    "step2": _elicit("Step 2: What is your favorite color?", _schema(color={"type": "string"}))
}
_PROMPT_CONTEXT = {
    "user_context": _elicit(
        "What context should the prompt use?", _schema(context={"type": "string"})
    )
}
_NO_ARGS = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_logging_tool",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_missing_capability",
    "test_input_required_result_capabilities",
    *_ROUND_ONE,
]


class ConformanceFixtures:
    """The suite's fixture tools, resources, prompts, completion, logging level and
    subscriptions. One per server; its state (the logging level, the subscribed URIs)
    is the server's."""

    def __init__(self) -> None:
        self.log_level: str | None = None
        self.subscribed: set[str] = set()

    # -- tools ---------------------------------------------------------------------------
    def tools(self) -> list[types.Tool]:
        out = [types.Tool(name=n, description=f"Conformance fixture {n}.", input_schema=_OBJ)
               for n in _NO_ARGS]  # fmt: skip
        out.append(
            types.Tool(
                name=JSON_SCHEMA_TOOL,
                description="Tool with JSON Schema 2020-12 features",
                input_schema=_SCHEMA_2020_12,
            )
        )
        out.append(
            types.Tool(
                name="test_sampling",
                description="Conformance fixture: asks the client's model.",
                input_schema=_schema(prompt={"type": "string"}),
            )
        )
        out.append(
            types.Tool(
                name="test_elicitation",
                description="Conformance fixture: asks the user.",
                input_schema=_schema(message={"type": "string"}),
            )
        )
        return out

    def has_tool(self, name: str) -> bool:
        return name in _NO_ARGS or name in ("test_sampling", "test_elicitation", JSON_SCHEMA_TOOL)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, args = params.name, dict(params.arguments or {})
        if name in _ROUND_ONE or name == "test_input_required_result_capabilities":
            return self._rounds(ctx, name, params.input_responses, params.request_state)
        content: list[Any]
        if name == "test_simple_text":
            content = [_text("This is a simple text response for testing.")]
        elif name == "test_image_content":
            content = [types.ImageContent(type="image", data=PNG, mime_type="image/png")]
        elif name == "test_audio_content":
            content = [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
        elif name == "test_embedded_resource":
            content = [self._embedded("test://embedded-resource")]
        elif name == "test_multiple_content_types":
            content = [
                _text("Multiple content types test:"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="test://mixed-content-resource",
                        mime_type="application/json",
                        text=json.dumps({"test": "data", "value": 123}),
                    ),
                ),
            ]
        elif name == JSON_SCHEMA_TOOL:
            content = [_text(f"called with {json.dumps(args, sort_keys=True)}")]
        elif name == "test_error_handling":
            text = "This tool intentionally returns an error for testing"
            return types.CallToolResult(content=[_text(text)], is_error=True)
        elif name == "test_tool_with_progress":
            for done in (0, 50, 100):
                await ctx.session.report_progress(done, 100)  # type: ignore[attr-defined]
                await anyio.sleep(0.05)
            content = [_text("Progress reported: 0, 50, 100 of 100")]
        elif name in ("test_tool_with_logging", "test_logging_tool"):
            for i, msg in enumerate(
                ["Tool execution started", "Tool processing data", "Tool execution completed"]
            ):
                if i:
                    await anyio.sleep(0.05)
                # Under 2026-07-28 the SDK sends it only to a request that asked for logs.
                await ctx.session.send_log_message(
                    "info", msg, logger="conformance", related_request_id=ctx.request_id
                )
            content = [_text("Logging done")]
        elif name == "test_missing_capability":
            caps = ctx.session.client_capabilities
            if caps is None or caps.sampling is None:
                from mcp.shared.exceptions import MCPError

                need = types.ClientCapabilities(sampling=types.SamplingCapability())
                raise MCPError(
                    types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "this tool asks the client's model: declare the sampling capability",
                    data=types.MissingRequiredClientCapabilityErrorData(
                        required_capabilities=need
                    ).model_dump(mode="json", by_alias=True, exclude_none=True),
                )
            content = [_text("sampling declared")]
        elif name == "test_sampling":
            sampled = await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=_text(str(args.get("prompt", ""))))],
                max_tokens=100,
                related_request_id=ctx.request_id,
            )
            said = getattr(sampled.content, "text", sampled.content)
            content = [_text(f"LLM response: {said}")]
        else:  # the three form elicitations of 2025-11-25
            message, schema = {
                "test_elicitation": (str(args.get("message", "")), _ELICIT),
                "test_elicitation_sep1034_defaults": ("Defaults for every type", _DEFAULTS),
                "test_elicitation_sep1330_enums": ("Pick from each kind of list", _ENUMS),
            }[name]
            full = {"type": "object", "properties": schema}
            if name == "test_elicitation":
                full["required"] = ["username", "email"]
            res = await ctx.session.elicit_form(message, full, related_request_id=ctx.request_id)
            prefix = "User response" if name == "test_elicitation" else "Elicitation completed"
            content = [
                _text(f"{prefix}: action={res.action}, content={json.dumps(res.content or {})}")
            ]
        return types.CallToolResult(content=content)

    def _rounds(
        self,
        ctx: ServerRequestContext[Any],
        name: str,
        responses: Mapping[str, Any] | None,
        state: str | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One 2026-07-28 input round: the requests still unanswered, or the result.

        The state goes out sealed by the server's request-state boundary (ctxnb's own
        middleware), so a tampered state never reaches this method."""
        if name == "test_input_required_result_capabilities":
            caps = ctx.session.client_capabilities
            wanted: dict[str, Any] = {}
            if caps is not None and caps.sampling is not None:
                wanted["capital_question"] = _sample("What is the capital of France?", 100)
            if caps is not None and caps.elicitation is not None:
                wanted["user_name"] = _elicit(
                    "What is your name?", _schema(name={"type": "string"})
                )
            if not wanted:
                return types.CallToolResult(content=[_text("the client declared nothing to ask")])
        else:
            wanted = _ROUND_ONE[name]
        answers = {k: _dump(v) for k, v in (responses or {}).items()}
        got = json.loads(state) if state else {}
        step = got.get("step", 1)
        if name == "test_input_required_result_multi_round" and step == 2:
            wanted = _STEP2
        missing = {k: v for k, v in wanted.items() if not isinstance(answers.get(k), dict)}
        if missing or not (responses or state):
            # Asked again for what is missing (a wrong or absent answer is re-requested).
            return types.InputRequiredResult(
                input_requests=missing or wanted,
                request_state=json.dumps({"tool": name, "step": step}),
            )
        if name == "test_input_required_result_multi_round" and step == 1:
            return types.InputRequiredResult(
                input_requests=_STEP2, request_state=json.dumps({"tool": name, "step": 2})
            )
        if got and got.get("tool") != name:
            from mcp.shared.exceptions import MCPError

            raise MCPError(types.INVALID_PARAMS, "requestState belongs to another call")
        said = {k: answers[k] for k in wanted}
        text = f"state-ok: {json.dumps(said, sort_keys=True)}"
        first = said.get("user_name", {}).get("content", {}).get("name")
        if first:
            text = f"Hello, {first}! {text}"
        return types.CallToolResult(content=[_text(text)])

    # -- resources ------------------------------------------------------------------------
    @staticmethod
    def _embedded(uri: str) -> types.EmbeddedResource:
        return types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="This is an embedded resource content."
            ),
        )

    def resources(self) -> list[types.Resource]:
        return [
            types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain"),
            types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png"),
            types.Resource(uri="test://watched-resource", name="watched", mime_type="text/plain"),
        ]

    def templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uri_template="test://template/{id}/data",
                name="template",
                mime_type="application/json",
            )
        ]

    def owns_resource(self, uri: str) -> bool:
        return uri.startswith("test://") and (
            uri in {r.uri for r in self.resources()} or _TEMPLATE.match(uri) is not None
        )

    def read_resource(self, uri: str) -> types.ReadResourceResult:
        contents: Any
        if uri == "test://static-binary":
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
        elif (m := _TEMPLATE.match(uri)) is not None:
            data = {"id": m.group(1), "templateTest": True, "data": f"Data for ID: {m.group(1)}"}
            contents = types.TextResourceContents(
                uri=uri, mime_type="application/json", text=json.dumps(data)
            )
        else:
            text = "This is the content of the static text resource."
            contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)
        return types.ReadResourceResult(contents=[contents])

    # -- prompts --------------------------------------------------------------------------
    def prompts(self) -> list[types.Prompt]:
        def arg(n: str) -> types.PromptArgument:
            return types.PromptArgument(name=n, required=True)

        return [
            types.Prompt(name="test_simple_prompt", description="A simple prompt"),
            types.Prompt(
                name="test_prompt_with_arguments",
                description="A prompt with arguments",
                arguments=[arg("arg1"), arg("arg2")],
            ),
            types.Prompt(
                name="test_prompt_with_embedded_resource",
                description="A prompt with an embedded resource",
                arguments=[arg("resourceUri")],
            ),
            types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
            types.Prompt(
                name="test_input_required_result_prompt", description="A prompt that asks first"
            ),
        ]

    def has_prompt(self, name: str) -> bool:
        return name in {p.name for p in self.prompts()}

    def get_prompt(
        self, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        args = dict(params.arguments or {})

        def user(content: Any) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        if params.name == "test_simple_prompt":
            msgs = [user(_text("This is a simple prompt for testing."))]
        elif params.name == "test_prompt_with_arguments":
            text = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
            msgs = [user(_text(text))]
        elif params.name == "test_prompt_with_embedded_resource":
            res = types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=args.get("resourceUri", "test://embedded"),
                    mime_type="text/plain",
                    text="Embedded resource content for testing.",
                ),
            )
            msgs = [user(res), user(_text("Please process the embedded resource above."))]
        elif params.name == "test_prompt_with_image":
            image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
            msgs = [user(image), user(_text("Please analyze the image above."))]
        else:  # test_input_required_result_prompt
            answer = (params.input_responses or {}).get("user_context")
            if not isinstance(_dump(answer), dict):
                return types.InputRequiredResult(
                    input_requests=_PROMPT_CONTEXT, request_state=json.dumps({"prompt": 1})
                )
            given = (_dump(answer).get("content") or {}).get("context", "")
            msgs = [user(_text(f"Use this context: {given}"))]
        return types.GetPromptResult(messages=msgs)

    # -- completion, logging, subscriptions --------------------------------------------------
    def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        words = ["paris", "park", "party", "hello", "world", "123"]
        prefix = params.argument.value
        values = [w for w in words if w.startswith(prefix)]
        return types.CompleteResult(
            completion=types.Completion(values=values, total=len(values), has_more=False)
        )

    def set_level(self, level: str) -> None:
        self.log_level = level


# JSON Schema 2020-12 keywords a tool listing must keep (SEP-1613, SEP-2106).
JSON_SCHEMA_TOOL = "json_schema_2020_12_tool"
_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
_ELICIT = {
    "username": {"type": "string", "description": "User's response"},
    "email": {"type": "string", "description": "User's email address"},
}
