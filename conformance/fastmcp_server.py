"""The conformance fixture on FastMCP with our FastMCP extension (``server.py --fastmcp``).

The same tools, resources, template, prompts and completion as ``core.py``, and the tasks
fixtures as FastMCP task tools (``TaskConfig``) whose bodies reach their task through
``current_task_context()``. FastMCP serves its own HTTP app (the tasks fast path is the
official SDK's, not FastMCP's). ``test_tool_with_task`` is absent: a FastMCP ``TaskConfig``
carries no input round to run before the task is created, so ``tasks-mrtr-composition``
has nothing to call here.
"""

from __future__ import annotations

import base64
import json
import secrets
from datetime import timedelta
from typing import Annotated, Any

import anyio
from core import (
    CONFIRM_SCHEMA,
    PNG,
    ROUNDS,
    SCHEMA_2020_12,
    WAV,
    Round,
    form,
    round_prompt,
)
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.prompts import Message
from fastmcp.tools import Tool
from fastmcp.utilities.tasks import TaskConfig
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    TextContent,
    TextResourceContents,
    ToolListChangedNotification,
)
from pydantic import Field

from mcp_tasks import TaskContext, Tasks, current_task_context

POLL = timedelta(milliseconds=500)


def task() -> TaskContext:
    """The running task's context (a FastMCP task body has no other way to it)."""
    ctx = current_task_context()
    if ctx is None:
        msg = "a task tool's body runs in its task's context"
        raise RuntimeError(msg)
    return ctx


def add_task_tools(mcp: FastMCP) -> None:
    """The tasks scenarios' fixtures, as FastMCP task tools."""
    optional = TaskConfig(mode="optional", poll_interval=POLL)
    required = TaskConfig(mode="required", poll_interval=POLL)

    @mcp.tool
    def greet(name: str) -> str:
        """Say hello (never a task)."""
        return f"Hello, {name}!"

    @mcp.tool(task=optional)
    async def slow_compute(seconds: float, label: str = "result") -> str:
        """Sleep, then report."""
        ctx = current_task_context()
        if ctx is not None and seconds > 0:
            await ctx.progress(0, seconds, f"Computing {label}")
        await anyio.sleep(seconds)
        return f"Computed {label} after {seconds:g}s"

    @mcp.tool(task=required)
    async def failing_job() -> str:
        """Fail as a tool (isError), after a second."""
        await anyio.sleep(1)
        raise ToolError("The job failed")

    @mcp.tool(task=optional)
    async def protocol_error_job() -> str:
        """Fail with a JSON-RPC error."""
        await anyio.sleep(0.2)
        raise MCPError(code=-32603, message="The job hit an internal error")

    @mcp.tool(task=optional)
    async def confirm_delete(filename: str) -> str:
        """Ask before deleting."""
        answer = await task().elicit("confirm", f"Delete {filename}?", CONFIRM_SCHEMA)
        content = answer.get("content")
        confirmed = isinstance(content, dict) and content.get("confirm") is True
        return f"Deleted {filename}" if confirmed else f"Kept {filename}"

    @mcp.tool(task=optional)
    async def multi_input() -> str:
        """Ask two questions at once."""
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
        }
        answers = await task().request_input(
            {
                key: {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": text, "requestedSchema": schema},
                }
                for key, text in (("first", "First answer?"), ("second", "Second answer?"))
            }
        )
        return f"Got {len(answers)} answers"


def add_content_tools(mcp: FastMCP) -> None:
    """The tools the ``tools-call-*`` scenarios call."""

    @mcp.tool
    def test_simple_text() -> str:
        """Answer one text block."""
        return "This is a simple text response for testing."

    @mcp.tool
    def test_image_content() -> list[ImageContent]:
        """Answer one PNG image."""
        return [ImageContent(type="image", data=PNG, mime_type="image/png")]

    @mcp.tool
    def test_audio_content() -> list[AudioContent]:
        """Answer one WAV clip."""
        return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]

    @mcp.tool
    def test_embedded_resource() -> list[EmbeddedResource]:
        """Answer an embedded text resource."""
        embedded = TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return [EmbeddedResource(type="resource", resource=embedded)]

    @mcp.tool
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

    @mcp.tool
    def test_error_handling() -> str:
        """Fail as a tool (isError)."""
        raise ToolError("This tool intentionally returns an error for testing")

    @mcp.tool
    async def test_tool_with_progress(ctx: Context) -> str:
        """Report progress three times."""
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
            await anyio.sleep(0.05)
        return "progress reported"


def add_diagnostic_tools(mcp: FastMCP) -> None:
    """The tools ``server-stateless`` and the header and schema scenarios probe."""

    @mcp.tool
    async def test_tool_with_logging(ctx: Context) -> str:
        """Log three messages at info while it runs."""
        for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.log(text, level="info")
            await anyio.sleep(0.05)
        return "Tool with logging executed successfully"

    @mcp.tool
    async def test_logging_tool(ctx: Context) -> str:
        """Log at info: a request that names no log level receives none of it."""
        await ctx.log("A log line nobody asked for", level="info")
        return "logged"

    @mcp.tool
    def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
        """Ask the user a question: on the stateless wire an input round."""
        answer = (ctx.input_responses or {}).get("answer")
        if answer is None:
            return InputRequiredResult(
                input_requests={"answer": form("Your answer?", text="string")}
            )
        return "Answered"

    @mcp.tool
    def test_missing_capability(ctx: Context) -> str:
        """Needs the client's ``sampling`` capability: -32021 naming it, when undeclared."""
        capabilities = ctx.session.client_capabilities
        if capabilities is None or capabilities.sampling is None:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool requires the client's sampling capability",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return "The client declared sampling."

    @mcp.tool
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

    def json_schema_2020_12_tool() -> str:
        """A tool whose input schema uses the JSON Schema 2020-12 vocabulary."""
        return "json_schema_2020_12_tool"

    tool = Tool.from_function(json_schema_2020_12_tool)
    mcp.add_tool(tool.model_copy(update={"parameters": SCHEMA_2020_12}))

    def dynamic() -> str:
        """Added and removed again by test_trigger_tool_change."""
        return "dynamic"

    @mcp.tool
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Change the tool list and say so."""
        mcp.add_tool(Tool.from_function(dynamic, name="test_dynamic_tool"))
        mcp.remove_tool("test_dynamic_tool")
        await ctx.send_notification(ToolListChangedNotification())
        return "tool list changed"


def round_tool(round_: Round) -> Any:
    """A FastMCP tool function that runs ``round_`` on what its request carries."""

    def tool(ctx: Context) -> str | InputRequiredResult:
        capabilities = ctx.session.client_capabilities
        return round_(ctx.input_responses or {}, ctx.request_state, capabilities)

    return tool


def add_input_rounds(mcp: FastMCP) -> None:
    """The ``test_input_required_result_*`` tools and prompt."""
    for name, round_ in ROUNDS.items():
        mcp.add_tool(Tool.from_function(round_tool(round_), name=name, description=round_.__doc__))

    @mcp.prompt
    def test_input_required_result_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
        """A prompt that asks for context before it is built."""
        text = round_prompt(ctx.input_responses or {})
        return text if isinstance(text, InputRequiredResult) else [Message(text)]


def add_resources_and_prompts(mcp: FastMCP) -> None:
    """The resources, the template, the prompts and completion."""

    @mcp.resource("test://static-text", mime_type="text/plain")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @mcp.resource("test://static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        """A static binary resource (a PNG)."""
        return base64.b64decode(PNG)

    @mcp.resource("test://template/{id}/data", mime_type="application/json")
    def template_data(id: str) -> str:
        """A resource template: the id comes back in the data."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @mcp.resource("test://watched-resource", mime_type="text/plain")
    def watched() -> str:
        """A resource a client may subscribe to."""
        return "Watched resource content"

    @mcp.prompt
    def test_simple_prompt() -> str:
        """A prompt without arguments."""
        return "This is a simple prompt for testing."

    @mcp.prompt
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """A prompt with two required arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @mcp.prompt
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 (the runner's argument name)
        """A prompt that embeds the resource it is given."""
        embedded = TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            Message(EmbeddedResource(type="resource", resource=embedded)),
            Message("Please process the embedded resource above."),
        ]

    @mcp.prompt
    def test_prompt_with_image() -> list[Message]:
        """A prompt with an image."""
        return [
            Message(ImageContent(type="image", data=PNG, mime_type="image/png")),
            Message("Please analyze the image above."),
        ]

    @mcp.completion
    def complete(*_: Any, **__: Any) -> Completion:
        """No suggestions: the scenario checks the answer's shape."""
        return Completion(values=[], total=0, has_more=False)


def build(tasks: Tasks) -> FastMCP:
    """The FastMCP fixture server on ``tasks``."""
    mcp = FastMCP(
        "mcp-tasks-conformance-fastmcp",
        version="0.1.0",
        # FastMCP inlines $ref by default; json-schema-2020-12 wants the schema as written.
        dereference_schemas=False,
        # Signs the request states the input-round tools hand out (a fresh key per process).
        request_state_security=RequestStateSecurity(keys=[secrets.token_bytes(32)]),
    )
    mcp.add_extension(tasks.fastmcp_extension())
    add_task_tools(mcp)
    add_content_tools(mcp)
    add_diagnostic_tools(mcp)
    add_input_rounds(mcp)
    add_resources_and_prompts(mcp)
    return mcp
