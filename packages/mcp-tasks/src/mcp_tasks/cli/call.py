"""`mcp-tasks call URL TOOL [key=value …]`: call a tool as a tasks-aware client and follow it.

Exit codes: 0 completed; 1 completed with `isError: true`; 2 a usage error (a malformed
`key=value` or `--answer`); 3 failed (JSON-RPC error); 4 cancelled; 5 input was required
and could not be answered; 6 the call itself failed (connection, protocol error).

The task id goes to stderr as soon as there is one, so the task can be found again
(`mcp-tasks get | watch | cancel URL ID`); it is a bearer capability, so it is printed only
to the user running this command, never logged.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import httpx2 as httpx
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_tasks.cli._errors import EXIT_INTERRUPTED, UsageError, leaves, one_line
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
            raise UsageError(f"{what} must look like key=value, got {pair!r}")
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


@dataclass
class Followed:
    """What became of the task a command followed, for its last words."""

    task_id: str | None = None
    final_status: str | None = None  # read back after cancelling on an abort
    cancel_error: str | None = None

    def fate(self) -> str | None:
        """What happened to the task after an abort, as the user should hear it."""
        if self.task_id is None:
            return None  # no task was started
        if self.cancel_error is not None:
            return f"cancelling the task failed ({self.cancel_error}); it may still run"
        if self.final_status == "cancelled":
            return "the task was cancelled"
        if self.final_status is not None:
            return f"the task is {self.final_status}"
        return None


def announce(console: Console, handle: TaskHandle, url: str) -> None:
    """The task id, on this user's stderr only: how to find the task again."""
    console.line(f"task id: {handle.task_id} (mcp-tasks get|watch|cancel {url} ID)")


async def follow(
    handle: TaskHandle,
    console: Console,
    out: TextIO,
    *,
    as_json: bool,
    followed: Followed,
    cancel_on_abort: bool,
) -> int:
    """Wait for the task's end and print its outcome; the exit code (0, 1, 3 or 4).

    An abort (Ctrl-C, an unanswerable prompt) cancels the task first when
    `cancel_on_abort`, and records in `followed` what the task then is.
    """

    async def on_status(state: TaskState) -> None:
        console.status(state)

    try:
        state = await handle.wait(on_status=on_status)
    except BaseException:
        if cancel_on_abort:
            # Do not leave the task running unattended; then read what it really is.
            with anyio.CancelScope(shield=True):
                try:
                    await handle.cancel()
                    followed.final_status = (await handle.get()).status
                except Exception as failure:  # reported in the last words
                    followed.cancel_error = one_line(str(failure)) or type(failure).__name__
        raise
    console.end_line()
    if state.status == "failed":
        error = state.error or {}
        console.line(f"error {error.get('code')}: {error.get('message')}")
        return EXIT_FAILED
    if state.status == "cancelled":
        return EXIT_CANCELLED
    result = state.call_tool_result()
    out.write(render_result(result, as_json) + "\n")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def call(args: argparse.Namespace, out: TextIO, err: TextIO, followed: Followed) -> int:
    console = Console(err)
    answers = parse_pairs(args.answer, "--answer")
    arguments = parse_pairs(args.arguments, "an argument")
    interactive = not args.no_input and sys.stdin.isatty()
    elicit = make_elicitor(answers, console, interactive=interactive)

    async with tasks_client(args.url, elicitation_callback=elicit) as client:
        started = await start_tool(client, args.tool, arguments)
        if isinstance(started, TaskHandle):
            followed.task_id = started.task_id
            announce(console, started, args.url)
            if started.created is not None:
                console.status(started.created)
            return await follow(
                started,
                console,
                out,
                as_json=args.json,
                followed=followed,
                cancel_on_abort=True,
            )
    out.write(render_result(started, args.json) + "\n")
    return EXIT_TOOL_ERROR if started.is_error else EXIT_OK


def remote_failure(raw: BaseException, url: str, followed: Followed) -> tuple[int, str] | None:
    """The exit code and last words (at most two lines) for an expected failure talking to
    a server; `None` for anything else (a bug)."""
    expected = (InputUnanswerable, MCPError, OSError, httpx.TransportError)
    error = next((leaf for leaf in leaves(raw) if isinstance(leaf, expected)), None)
    fate = followed.fate()
    if isinstance(error, InputUnanswerable):
        text = f"input required for {error} but not answerable (pass --answer {error}=JSON)"
        return EXIT_NO_INPUT, text + (f"\n{fate}" if fate else "")
    if isinstance(error, MCPError):
        return EXIT_CALL_ERROR, f"error {error.code}: {one_line(error.message)}"
    if isinstance(error, OSError | httpx.TransportError):
        reason = one_line(str(error)) or type(error).__name__
        return EXIT_CALL_ERROR, f"cannot reach {one_line(url)}: {reason}"
    return None


def run(args: argparse.Namespace) -> int:
    followed = Followed()
    try:
        return anyio.run(call, args, sys.stdout, sys.stderr, followed)
    except KeyboardInterrupt:
        fate = followed.fate()
        print("\ninterrupted" + (f"; {fate}" if fate else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as raw:  # a boundary: report, never a traceback for expected failures
        failure = remote_failure(raw, args.url, followed)
        if failure is None:
            raise
        code, text = failure
        print(text, file=sys.stderr)
        return code
