"""`mcp-tasks get | watch | cancel URL TASK_ID`: find a task again by its id.

The id is the one `mcp-tasks call` printed on stderr (or any client got from `tools/call`).
It is a bearer capability: these commands print it nowhere and log nothing.

Exit codes: `get` 0 (the state is printed); `watch` as `call` (0 completed, 1 completed
with isError, 3 failed, 4 cancelled, 5 input required and not answerable); `cancel` 0 when
the task is cancelled afterwards, 1 when it had already ended otherwise; 6 the request
failed (connection, protocol error, or no such task); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from mcp_tasks.cli._errors import EXIT_CHECK_FAILED, EXIT_INTERRUPTED, EXIT_OK
from mcp_tasks.cli.call import (
    Console,
    Followed,
    follow,
    make_elicitor,
    parse_pairs,
    remote_failure,
    render_result,
)
from mcp_tasks.client import TaskHandle, TaskState, tasks_client

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

EPILOG = """exit codes: get 0; watch as call (0 completed, 1 isError, 3 failed, 4 cancelled,
5 input not answerable); cancel 0 cancelled, 1 it had already ended; 2 usage;
6 the request failed (connection, protocol, no such task); 130 interrupted"""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, handler, summary in (
        ("get", get, "print a task's current state (tasks/get)"),
        ("watch", watch, "follow a task to its end, answering input; print its result"),
        ("cancel", cancel, "cancel a task (tasks/cancel) and print what it is then"),
    ):
        parser = commands.add_parser(
            name,
            help=summary,
            description=summary + ". TASK_ID is the id `mcp-tasks call` printed.",
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("url", help="server URL, e.g. http://127.0.0.1:8000/mcp")
        parser.add_argument("task_id", metavar="TASK_ID", help="the task's id")
        if name == "watch":
            parser.add_argument(
                "--answer",
                action="append",
                default=[],
                metavar="key=JSON",
                help="answer input request KEY with JSON (as for call)",
            )
            parser.add_argument(
                "--no-input", action="store_true", help="never prompt; unanswered input exits 5"
            )
        if name != "cancel":
            parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(handler=handler)


def describe(state: TaskState) -> str:
    """A task's state for a person: status and message, then its outcome or questions."""
    lines = [state.status + (f" — {state.status_message}" if state.status_message else "")]
    if state.status == "completed":
        lines.append(render_result(state.call_tool_result(), as_json=False))
    elif state.status == "failed":
        error = state.error or {}
        lines.append(f"error {error.get('code')}: {error.get('message')}")
    elif state.status == "input_required":
        keys = ", ".join(sorted(state.input_requests or {}))
        lines.append(f"waiting for input: {keys} (answer with mcp-tasks watch … --answer)")
    return "\n".join(lines)


def _dump(state: TaskState) -> str:
    dumped: dict[str, Any] = state.model_dump(by_alias=True, mode="json", exclude_none=True)
    return json.dumps(dumped, indent=2)


def _run(
    args: argparse.Namespace,
    body: Callable[[TaskHandle, TextIO, TextIO, Followed], Awaitable[int]],
    *,
    elicit: bool = False,
) -> int:
    followed = Followed(task_id=args.task_id)

    async def main() -> int:
        callback = None
        if elicit:
            answers = parse_pairs(args.answer, "--answer")
            interactive = not args.no_input and sys.stdin.isatty()
            callback = make_elicitor(answers, Console(sys.stderr), interactive=interactive)
        async with tasks_client(args.url, elicitation_callback=callback) as client:
            handle = TaskHandle.attach(client, args.task_id)
            return await body(handle, sys.stdout, sys.stderr, followed)

    try:
        return anyio.run(main)
    except KeyboardInterrupt:
        print("\ninterrupted; the task goes on", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as raw:  # a boundary: report, never a traceback for expected failures
        failure = remote_failure(raw, args.url, followed)
        if failure is None:
            raise
        code, text = failure
        print(text, file=sys.stderr)
        return code


def get(args: argparse.Namespace) -> int:
    async def body(handle: TaskHandle, out: TextIO, err: TextIO, followed: Followed) -> int:
        state = await handle.get()
        out.write((_dump(state) if args.json else describe(state)) + "\n")
        return EXIT_OK

    return _run(args, body)


def watch(args: argparse.Namespace) -> int:
    """Follow the task as `call` does; an abort stops watching and leaves the task be."""

    async def body(handle: TaskHandle, out: TextIO, err: TextIO, followed: Followed) -> int:
        return await follow(
            handle, Console(err), out, as_json=args.json, followed=followed, cancel_on_abort=False
        )

    return _run(args, body, elicit=True)


def cancel(args: argparse.Namespace) -> int:
    async def body(handle: TaskHandle, out: TextIO, err: TextIO, followed: Followed) -> int:
        before = await handle.get()
        if before.is_terminal:
            out.write(f"{before.status}: the task had already ended; nothing to cancel\n")
            return EXIT_OK if before.status == "cancelled" else EXIT_CHECK_FAILED
        await handle.cancel()
        after = await handle.get()
        out.write(f"{after.status}\n")
        return EXIT_OK if after.status == "cancelled" else EXIT_CHECK_FAILED

    return _run(args, body)
