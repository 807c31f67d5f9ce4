"""The core fixtures of the conformance runner's server specification, on an ``MCPServer``.

The runner's 2026-07-28 server scenarios call these by name (its scenario sources under
``src/scenarios/server/`` and the reference "everything server" name them): content tools,
diagnostic tools (``test_missing_capability``, ``test_logging_tool``,
``test_streaming_elicitation``, ``test_trigger_tool_change``, ``test_trigger_prompt_change``),
the ``test_input_required_result_*`` tools and prompt (multi-round-trip requests), a tool
whose parameter carries ``x-mcp-header``, a tool with a JSON Schema 2020-12 input schema,
three resources, a resource template, four prompts and completions. ``server.py`` adds them
beside the tasks fixtures, on a server with the tasks extension installed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import anyio

# Context is resolved at run time: MCPServer reads the tools' signatures.
from mcp.server.mcpserver import Context, MCPServer  # noqa: TC002
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    ClientCapabilities,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

#: A 1x1 PNG and a tiny WAV: what the image and audio fixtures carry.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

#: What ``confirm_delete`` asks (a tasks fixture).
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}

#: The JSON Schema 2020-12 keywords the ``json-schema-2020-12`` scenario looks for, intact.
SCHEMA_2020_12: dict[str, Any] = {
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


def form(message: str, **fields: str) -> ElicitRequest:
    """An ``elicitation/create`` form asking for string fields, all required."""
    schema = {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in fields.items()},
        "required": list(fields),
    }
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def ask_model(text: str, max_tokens: int) -> CreateMessageRequest:
    """A ``sampling/createMessage`` request with one user message."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(
        params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def field_of(answer: object, name: str) -> Any:
    """A field of an accepted elicitation answer, else None."""
    if isinstance(answer, ElicitResult) and answer.content:
        return answer.content.get(name)
    return None


def add_content_tools(mcp: MCPServer[Any]) -> None:
    """The tools the ``tools-call-*`` scenarios call."""

    @mcp.tool()
    def test_simple_text() -> str:
        """Answer one text block."""
        return "This is a simple text response for testing."

    @mcp.tool()
    def test_image_content() -> list[ImageContent]:
        """Answer one PNG image."""
        return [ImageContent(type="image", data=PNG, mime_type="image/png")]

    @mcp.tool()
    def test_audio_content() -> list[AudioContent]:
        """Answer one WAV clip."""
        return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]

    @mcp.tool()
    def test_embedded_resource() -> list[EmbeddedResource]:
        """Answer an embedded text resource."""
        embedded = TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return [EmbeddedResource(type="resource", resource=embedded)]

    @mcp.tool()
    def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
        """Answer text, an image and an embedded JSON resource."""
        embedded = TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text=json.dumps({"test": "data", "value": 123}),
        )
        return [
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=embedded),
        ]

    @mcp.tool()
    def test_error_handling() -> str:
        """Fail as a tool (isError)."""
        msg = "This tool intentionally returns an error for testing"
        raise RuntimeError(msg)

    @mcp.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Report progress three times, then answer the progress token."""
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
            await anyio.sleep(0.05)
        meta = ctx.request_context.meta if ctx.request_context else None
        return str(meta.get("progress_token") if meta else 0)


def add_diagnostic_tools(mcp: MCPServer[Any]) -> None:
    """The tools ``server-stateless`` and the header and schema scenarios probe."""

    @mcp.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Log three messages at info while it runs."""
        for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.log("info", text)
            await anyio.sleep(0.05)
        return "Tool with logging executed successfully"

    @mcp.tool()
    async def test_logging_tool(ctx: Context) -> str:
        """Log at info: a request that names no log level receives none of it."""
        await ctx.log("info", "A log line nobody asked for")
        return "logged"

    @mcp.tool()
    async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
        """Ask the user a question: on the stateless wire an input round, never a request
        on the response stream."""
        answer = (ctx.input_responses or {}).get("answer")
        if answer is None:
            return InputRequiredResult(
                input_requests={"answer": form("Your answer?", text="string")}
            )
        return f"Answered: {field_of(answer, 'text')}"

    @mcp.tool()
    async def test_missing_capability(ctx: Context) -> str:
        """Needs the client's ``sampling`` capability: -32021 naming it, when undeclared."""
        capabilities = ctx.client_capabilities
        if capabilities is None or capabilities.sampling is None:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool requires the client's sampling capability",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return "The client declared sampling."

    @mcp.tool()
    def test_x_mcp_header(
        region: Annotated[
            str,
            Field(
                description="Sent again as the Mcp-Param-Region header",
                json_schema_extra={"x-mcp-header": "Region"},
            ),
        ] = "<none>",
    ) -> str:
        """Echo a parameter that is mirrored into an ``Mcp-Param-*`` header."""
        return f"region={region}"

    @mcp.tool(name="json_schema_2020_12_tool")
    def json_schema_2020_12_tool() -> str:
        """A tool whose input schema uses the JSON Schema 2020-12 vocabulary."""
        return "json_schema_2020_12_tool"

    # MCPServer.tool() derives the schema from the signature and takes no schema of its
    # own; the registered tool's parameters are the schema tools/list serves.
    mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = SCHEMA_2020_12

    def dynamic() -> str:
        """Added and removed again by test_trigger_tool_change / test_trigger_prompt_change."""
        return "dynamic"

    @mcp.tool()
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Change the tool list and say so to listen streams."""
        mcp.add_tool(dynamic, name="test_dynamic_tool")
        mcp.remove_tool("test_dynamic_tool")
        await ctx.notify_tools_changed()
        return "tool list changed"

    @mcp.tool()
    async def test_trigger_prompt_change(ctx: Context) -> str:
        """Change the prompt list and say so to listen streams."""
        mcp.add_prompt(Prompt.from_function(dynamic, name="test_dynamic_prompt"))
        mcp.remove_prompt("test_dynamic_prompt")
        await ctx.notify_prompts_changed()
        return "prompt list changed"


# The input rounds (multi-round-trip requests), as functions of what the request carries,
# so the MCPServer and the FastMCP fixture serve the same ones. Each gets the request's
# input responses, its request state and the client's capabilities.
def confirm_request() -> ElicitRequest:
    """A yes/no confirmation form."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    return ElicitRequest(
        params=ElicitRequestFormParams(message="Please confirm", requested_schema=schema)
    )


def round_elicitation(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Ask a name, then greet it."""
    if "user_name" not in answers:
        return InputRequiredResult(
            input_requests={"user_name": form("What is your name?", name="string")}
        )
    return f"Hello, {field_of(answers['user_name'], 'name') or 'stranger'}!"


def round_sampling(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Ask the client's model, then repeat its answer."""
    answer = answers.get("capital_question")
    if answer is None:
        question = ask_model("What is the capital of France?", 100)
        return InputRequiredResult(input_requests={"capital_question": question})
    text = "?"
    if isinstance(answer, CreateMessageResult) and isinstance(answer.content, TextContent):
        text = answer.content.text
    return f"Model said: {text}"


def round_list_roots(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Ask the client's roots, then count them."""
    answer = answers.get("client_roots")
    if answer is None:
        return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})
    count = len(answer.roots) if isinstance(answer, ListRootsResult) else 0
    return f"Client exposed {count} root(s)."


def round_request_state(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Ask a confirmation with a request state, and check the state comes back."""
    if "confirm" in answers and state == "awaiting-confirm":
        return "state-ok: the confirmation and its request state arrived"
    return InputRequiredResult(
        input_requests={"confirm": confirm_request()}, request_state="awaiting-confirm"
    )


def round_multiple_inputs(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Ask an elicitation, a sampling and the roots in one round."""
    if {"user_name", "greeting", "client_roots"} <= answers.keys():
        return "All inputs received."
    return InputRequiredResult(
        input_requests={
            "user_name": form("What is your name?", name="string"),
            "greeting": ask_model("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        },
        request_state="three-questions",
    )


def round_multi_round(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Three rounds: a name, then a colour, then the answer; the state says where."""
    where = json.loads(state) if state else {}
    if where.get("round") == 2 and "step2" in answers:
        return f"{where.get('name')} likes {field_of(answers['step2'], 'color')}."
    if where.get("round") == 1 and "step1" in answers:
        return InputRequiredResult(
            input_requests={"step2": form("Step 2: What is your favorite color?", color="string")},
            request_state=json.dumps({"round": 2, "name": field_of(answers["step1"], "name")}),
        )
    # The first round, or answers out of order: start again.
    return InputRequiredResult(
        input_requests={"step1": form("Step 1: What is your name?", name="string")},
        request_state=json.dumps({"round": 1}),
    )


def round_tampered_state(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Hand out a request state; the SDK refuses one that comes back altered."""
    if state is not None:
        return f"state-ok: {state}"
    return InputRequiredResult(
        input_requests={"confirm": confirm_request()}, request_state="round-1"
    )


def round_capabilities(
    answers: Mapping[str, Any], state: str | None, caps: ClientCapabilities | None
) -> str | InputRequiredResult:
    """Ask only what the client declared it can answer."""
    requests: dict[str, InputRequest] = {}
    if caps is None or caps.sampling is not None:
        requests["sample"] = ask_model("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        requests["ask"] = form("What is your name?", name="string")
    return InputRequiredResult(input_requests=requests, request_state="declared-only")


def round_prompt(answers: Mapping[str, Any]) -> str | InputRequiredResult:
    """test_input_required_result_prompt: ask for context, then the prompt's text."""
    answer = answers.get("user_context")
    if answer is None:
        return InputRequiredResult(
            input_requests={
                "user_context": form("What context should the prompt use?", context="string")
            }
        )
    return f"Use the following context: {field_of(answer, 'context') or '?'}"


Round = Callable[
    [Mapping[str, Any], str | None, ClientCapabilities | None], str | InputRequiredResult
]

#: Tool name → its input round.
ROUNDS: dict[str, Round] = {
    "test_input_required_result_elicitation": round_elicitation,
    "test_input_required_result_sampling": round_sampling,
    "test_input_required_result_list_roots": round_list_roots,
    "test_input_required_result_request_state": round_request_state,
    "test_input_required_result_multiple_inputs": round_multiple_inputs,
    "test_input_required_result_multi_round": round_multi_round,
    "test_input_required_result_tampered_state": round_tampered_state,
    "test_input_required_result_capabilities": round_capabilities,
}


def round_tool(round_: Round) -> Callable[[Context], str | InputRequiredResult]:
    """An MCPServer tool that runs ``round_`` on what its request carries."""

    def tool(ctx: Context) -> str | InputRequiredResult:
        return round_(ctx.input_responses or {}, ctx.request_state, ctx.client_capabilities)

    return tool


def add_input_rounds(mcp: MCPServer[Any]) -> None:
    """The ``test_input_required_result_*`` tools and prompt."""
    for name, round_ in ROUNDS.items():
        mcp.add_tool(round_tool(round_), name=name, description=round_.__doc__)

    @mcp.prompt()
    async def test_input_required_result_prompt(
        ctx: Context,
    ) -> list[UserMessage] | InputRequiredResult:
        """A prompt that asks for context before it is built."""
        text = round_prompt(ctx.input_responses or {})
        if isinstance(text, InputRequiredResult):
            return text
        return [UserMessage(role="user", content=TextContent(type="text", text=text))]


def add_resources_and_prompts(mcp: MCPServer[Any]) -> None:
    """The resources, the template, the prompts and completion."""

    @mcp.resource("test://static-text")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @mcp.resource("test://static-binary")
    def static_binary() -> bytes:
        """A static binary resource (a PNG)."""
        return base64.b64decode(PNG)

    @mcp.resource("test://template/{id}/data")
    def template_data(id: str) -> str:
        """A resource template: the id comes back in the data."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @mcp.resource("test://watched-resource")
    def watched() -> str:
        """A resource a client may subscribe to."""
        return "Watched resource content"

    @mcp.prompt()
    def test_simple_prompt() -> list[UserMessage]:
        """A prompt without arguments."""
        return [
            UserMessage(
                role="user",
                content=TextContent(type="text", text="This is a simple prompt for testing."),
            )
        ]

    @mcp.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        """A prompt with two required arguments."""
        text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
        return [UserMessage(role="user", content=TextContent(type="text", text=text))]

    @mcp.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:  # noqa: N803 (the runner's argument name)
        """A prompt that embeds the resource it is given."""
        embedded = TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(role="user", content=EmbeddedResource(type="resource", resource=embedded)),
            UserMessage(
                role="user",
                content=TextContent(
                    type="text", text="Please process the embedded resource above."
                ),
            ),
        ]

    @mcp.prompt()
    def test_prompt_with_image() -> list[UserMessage]:
        """A prompt with an image."""
        return [
            UserMessage(
                role="user", content=ImageContent(type="image", data=PNG, mime_type="image/png")
            ),
            UserMessage(
                role="user",
                content=TextContent(type="text", text="Please analyze the image above."),
            ),
        ]

    @mcp.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        """No suggestions: the scenario checks the answer's shape."""
        del ref, argument, context
        return Completion(values=[], total=0, has_more=False)


def add_core(mcp: MCPServer[Any]) -> None:
    """Every core fixture of the runner's server specification, on ``mcp``."""
    add_content_tools(mcp)
    add_diagnostic_tools(mcp)
    add_input_rounds(mcp)
    add_resources_and_prompts(mcp)
