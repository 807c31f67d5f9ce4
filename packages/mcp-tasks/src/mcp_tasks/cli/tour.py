"""The tour `mcp-tasks demo` runs: the demo tools served on a free 127.0.0.1 port from the
embedded default store (a SQLite file in a temporary folder, removed afterwards;
``memory://`` when the SQLite store is not installed) or from ``--store URL``, driven with
the tasks client: live progress, an input prompt answered automatically, and a
cancellation."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import mcp_types as types

from mcp_tasks.cli._stores import check_reachable
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.domain.errors import StoreUnavailable
from mcp_tasks.stores.opening import store_from_url
from mcp_tasks.testing import running

if TYPE_CHECKING:
    import argparse

    from mcp.client.session import ClientRequestContext


class Tour:
    """Prints what happens, step by step."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.ok = True

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    async def show(self, state: TaskState) -> None:
        message = f" — {state.status_message}" if state.status_message else ""
        self.say(f"   · {state.status}{message}")

    def expect(self, what: str, condition: bool) -> None:
        self.say(f"   {'✓' if condition else '✗'} {what}")
        self.ok = self.ok and condition


async def confirm_yes(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """The demo's user: answers every confirmation with yes."""
    print(f"   ? {params.message}  → answering yes automatically", flush=True)
    return types.ElicitResult(action="accept", content={"confirm": True})


def embedded_store_url(folder: Path) -> str:
    """The embedded default store: SQLite in ``folder``, or memory without the SQLite store."""
    if importlib.util.find_spec("mcp_tasks_sqlite") is None:
        return "memory://"
    return f"sqlite:///{folder / 'demo-tasks.db'}"


async def tour(out: TextIO, store_url: str) -> bool:
    show = Tour(out)
    store = store_from_url(store_url)
    try:
        await check_reachable(store)  # before serving: a broken store is one line, not a log
    except BaseException:
        with suppress(StoreUnavailable):
            await store.close()
        raise
    server = demo_server(store, log_level="WARNING")
    scheme = store_url.split(":", 1)[0]
    async with running(server) as url:
        show.say(f"mcp-tasks demo: serving the demo tools at {url} ({scheme} store)")
        async with tasks_client(url, elicitation_callback=confirm_yes) as client:
            show.say()
            show.say("1. build — a task reporting progress")
            started = await start_tool(client, "build", {"ref": "main"})
            show.expect("tools/call answered with a task handle", isinstance(started, TaskHandle))
            if isinstance(started, TaskHandle):
                state = await started.wait(on_status=show.show)
                result = state.call_tool_result() if state.status == "completed" else None
                show.expect(
                    f"completed: {_text(result)}", result is not None and not result.is_error
                )

            show.say()
            show.say("2. deploy — the task asks for confirmation (input_required)")
            started = await start_tool(client, "deploy", {"env": "staging"})
            if isinstance(started, TaskHandle):
                state = await started.wait(on_status=show.show)
                result = state.call_tool_result() if state.status == "completed" else None
                show.expect(
                    f"completed: {_text(result)}", result is not None and not result.is_error
                )
            else:
                show.expect("tools/call answered with a task handle", False)

            show.say()
            show.say("3. sleep — a long task, cancelled with tasks/cancel")
            started = await start_tool(client, "sleep", {"seconds": 600})
            if isinstance(started, TaskHandle):
                first = await started.get()
                await show.show(first)
                show.say("   → tasks/cancel")
                await started.cancel()
                state = await started.wait(on_status=show.show)
                show.expect("the task ended cancelled", state.status == "cancelled")
            else:
                show.expect("tools/call answered with a task handle", False)
    show.say()
    show.say(
        "demo finished: all steps as expected" if show.ok else "demo finished: SOMETHING WAS OFF"
    )
    return show.ok


def _text(result: types.CallToolResult | None) -> str:
    if result is None:
        return "(no result)"
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def run_tour(args: argparse.Namespace) -> int:
    """`mcp-tasks demo`: the tour; 0 when every step ended as expected."""
    if args.store:
        ok: Any = anyio.run(tour, sys.stdout, args.store)
    else:
        with tempfile.TemporaryDirectory(prefix="mcp-tasks-demo-") as folder:
            ok = anyio.run(tour, sys.stdout, embedded_store_url(Path(folder)))
    return 0 if ok else 1
