"""`mcp-tasks call URL TOOL [key=value …]`: call a tool as a tasks-aware client and follow it.

Exit codes: 0 completed; 1 completed with `isError: true`; 3 failed (JSON-RPC error);
4 cancelled; 5 input was required and could not be answered; 6 the call itself failed
(connection, protocol error). argparse's own usage errors exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import httpx2 as httpx
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_tasks.client import CreateTaskResult, TaskHandle, TaskState, start_tool, tasks_client

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext, ElicitationFnT

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_NO_INPUT = 5
EXIT_CALL_ERROR = 6

EPILOG = """exit codes: 0 completed, 1 completed with isError, 3 failed, 4 cancelled,
5 input required but not answerable, 6 the call failed (connection/protocol), 2 usage,
130 interrupted (the task is cancelled first)"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "call",
        help="call a tool, follow its task, answer input prompts, print the result",
        description="Call TOOL on the Streamable HTTP server at URL, declaring tasks support.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", help="server URL, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument("tool", help="tool name")
    parser.add_argument(
        "arguments",
        nargs="*",
        metavar="key=value",
        help="tool arguments; values are JSON when they parse, else strings",
    )
    parser.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="key=JSON",
        help="answer input request KEY with JSON: an object with 'action' is sent as is, "
        "anything else is accepted as the content",
    )
    parser.add_argument(
        "--no-input", action="store_true", help="never prompt; unanswered input requests exit 5"
    )
    parser.add_argument("--json", action="store_true", help="print the final result as JSON")
    parser.set_defaults(handler=run)


class InputUnanswerable(Exception):
    """An input request had no `--answer` and there was no terminal to ask."""


def parse_pairs(pairs: list[str], what: str) -> dict[str, Any]:
    """`key=value` pairs → dict; a value is JSON when it parses as JSON, else the raw string."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"mcp-tasks call: {what} must look like key=value, got {pair!r}")
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return parsed


class Console:
    """Status output: one rewritten line on a terminal, one line per change otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self._open_line = False

    def status(self, state: TaskState | CreateTaskResult) -> None:
        text = state.status + (f" — {state.status_message}" if state.status_message else "")
        if self.live:
            self.stream.write("\r\x1b[2K" + text)
            self._open_line = True
        else:
            self.stream.write(f"task: {text}\n")
        self.stream.flush()

    def end_line(self) -> None:
        """Finish the live status line (the last status stays visible)."""
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False

    def line(self, text: str) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False
        self.stream.write(text + "\n")
        self.stream.flush()


def _coerce(raw: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "boolean":
        return raw.strip().lower() in {"y", "yes", "true", "1"}
    if kind == "integer":
        return int(raw)
    if kind == "number":
        return float(raw)
    return raw


def make_elicitor(
    answers: dict[str, Any], console: Console, *, interactive: bool
) -> ElicitationFnT:
    """An elicitation callback: `--answer` first, then a prompt per form field on a TTY."""

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        key = str(context.request_id)
        if key in answers:
            given = answers[key]
            if isinstance(given, dict) and "action" in given:
                return types.ElicitResult.model_validate(given)
            return types.ElicitResult(action="accept", content=given)
        if not interactive or not isinstance(params, types.ElicitRequestFormParams):
            raise InputUnanswerable(key)
        console.line(f"? {params.message}")
        content: dict[str, Any] = {}
        properties: dict[str, Any] = (
            params.requested_schema.get("properties", {})
            if isinstance(params.requested_schema, dict)
            else {}
        )
        for field, schema in properties.items():
            label = schema.get("title") or schema.get("description") or field
            raw = await anyio.to_thread.run_sync(
                input, f"  {label} [{schema.get('type', 'string')}]: "
            )
            if raw == "":
                return types.ElicitResult(action="decline")
            content[field] = _coerce(raw, schema)
        return types.ElicitResult(action="accept", content=content)

    return elicit


def render_result(result: types.CallToolResult, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            result.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2
        )
    parts = [
        block.text
        if isinstance(block, types.TextContent)
        else json.dumps(block.model_dump(by_alias=True, mode="json", exclude_none=True))
        for block in result.content
    ]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


async def call(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    console = Console(err)
    answers = parse_pairs(args.answer, "--answer")
    interactive = not args.no_input and sys.stdin.isatty()
    elicit = make_elicitor(answers, console, interactive=interactive)

    async def on_status(state: TaskState) -> None:
        console.status(state)

    async with tasks_client(args.url, elicitation_callback=elicit) as client:
        started = await start_tool(client, args.tool, parse_pairs(args.arguments, "an argument"))
        if isinstance(started, TaskHandle):
            handle = started
            if handle.created is not None:
                console.status(handle.created)
            try:
                state = await handle.wait(on_status=on_status)
            except BaseException:
                # Ctrl-C or an unanswerable prompt: do not leave the task running unattended.
                with anyio.CancelScope(shield=True):
                    await handle.cancel()
                raise
            console.end_line()
            if state.status == "failed":
                error = state.error or {}
                console.line(f"error {error.get('code')}: {error.get('message')}")
                return EXIT_FAILED
            if state.status == "cancelled":
                return EXIT_CANCELLED
            result = state.call_tool_result()
        else:
            result = started
    out.write(render_result(result, args.json) + "\n")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _leaves(error: BaseException) -> list[BaseException]:
    """The leaf exceptions of a (possibly nested) exception group, in order."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def run(args: argparse.Namespace) -> int:
    try:
        return anyio.run(call, args, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        print("\ninterrupted; a task it had started was cancelled", file=sys.stderr)
        return 130
    except BaseException as raw:  # a boundary: report, never a traceback for expected failures
        leaves = _leaves(raw)
        expected = (InputUnanswerable, MCPError, OSError, httpx.TransportError)
        error = next((leaf for leaf in leaves if isinstance(leaf, expected)), leaves[0])
        if isinstance(error, InputUnanswerable):
            print(
                f"input required for {error} but not answerable (pass --answer {error}=JSON); "
                "the task was cancelled",
                file=sys.stderr,
            )
            return EXIT_NO_INPUT
        if isinstance(error, MCPError):
            print(f"error {error.code}: {error.message}", file=sys.stderr)
            return EXIT_CALL_ERROR
        if isinstance(error, OSError | httpx.TransportError):
            print(f"cannot reach {args.url}: {error}", file=sys.stderr)
            return EXIT_CALL_ERROR
        if isinstance(error, SystemExit | KeyboardInterrupt):
            raise error from None
        raise
