"""`mcp-tasks get | watch | cancel URL TASK_ID`: find a task again by its id.

The id is the one `mcp-tasks call` printed on stderr (or any client got from `tools/call`).
It is a bearer capability: these commands log nothing; `watch` prints it only in the
`mcp-tasks watch …` line it leaves the user when it stops before the task's end.

Exit codes: `get` 0 (the state is printed); `watch` as `call` (0 completed, 1 completed
with isError, 3 failed, 4 cancelled, 5 input required and not answered here); `cancel` 0
when the task is cancelled afterwards, 1 when it had already ended otherwise; 6 the request
failed (connection, protocol error, or no such task); 130 interrupted.
"""

from __future__ import annotations

import argparse

from mcp_tasks.cli.call import add_reconnect_option, add_url_argument
from mcp_tasks.cli.client_args import ANSWER_HELP, parse_answers

EPILOG = """exit codes: get 0; watch as call (0 completed, 1 isError, 3 failed, 4 cancelled,
5 input required and not answered here); cancel 0 cancelled, 1 it had already ended;
2 usage; 6 the request failed (connection, protocol, no such task); 130 interrupted"""


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
        add_url_argument(parser)
        parser.add_argument("task_id", metavar="TASK_ID", help="the task's id")
        if name == "watch":
            parser.add_argument(
                "--answer", action="append", default=[], metavar="KEY=JSON", help=ANSWER_HELP
            )
            parser.add_argument(
                "--no-input",
                action="store_true",
                help="never prompt; input nobody answered exits 5 (the task waits)",
            )
            add_reconnect_option(parser)
        if name != "cancel":
            parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(handler=handler)


# The client side is imported only once the arguments are known to be usable.


def get(args: argparse.Namespace) -> int:
    from mcp_tasks.cli import follow  # noqa: PLC0415

    return follow.run_get(args)


def watch(args: argparse.Namespace) -> int:
    answers = parse_answers(args.answer)
    from mcp_tasks.cli import follow  # noqa: PLC0415

    return follow.run_watch(args, answers)


def cancel(args: argparse.Namespace) -> int:
    from mcp_tasks.cli import follow  # noqa: PLC0415

    return follow.run_cancel(args)
