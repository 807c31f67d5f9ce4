"""`mcp-tasks call` following a task through what happens to it meanwhile, as a real
subprocess: the server restarting, an answer from elsewhere, progress on a terminal."""

from __future__ import annotations

import os
import pty
import re
import sys
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import MemoryBackend, TaskStatus
from mcp_tasks.cli.demo_tools import BUILD_STEPS, POLL_INTERVAL_MS, demo_server
from mcp_tasks.client import TaskHandle, tasks_client
from mcp_tasks.runtime.context import TaskContext  # noqa: TC001 (tool hints resolve at runtime)
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.tasks import Tasks
from mcp_tasks.testing import free_socket, running

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

pytestmark = pytest.mark.anyio

TASK_ID = re.compile(rb"task id: ([A-Za-z0-9_-]{43}) ")


def cli_process(*args: str, **options: Any) -> Any:
    return anyio.open_process([sys.executable, "-m", "mcp_tasks.cli", *args], **options)


async def read_until(process: Process, seen: bytearray, wanted: bytes) -> None:
    """Read the process's stderr into `seen` until `wanted` is in it."""
    assert process.stderr is not None
    while wanted not in seen:
        seen += await process.stderr.receive()


def a_free_port() -> int:
    with free_socket() as sock:
        port: int = sock.getsockname()[1]
    return port


async def test_call_reconnects_when_the_server_restarts(tmp_path: Path) -> None:
    """The server stops while `call` follows a task on a durable store (a task longer
    than the server's shutdown grace, during which its listen stream stays open): `call`
    says it is reconnecting, keeps trying, and once a server is back on the store it follows the
    same task to its end (exit 0, the result)."""
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    port = a_free_port()
    seen = bytearray()
    # the stack closes the process's pipes once it is done (unclosed, they warn at GC)
    async with AsyncExitStack() as stack:
        with anyio.fail_after(120):
            async with running(demo_server(store_url, log_level="WARNING"), port=port) as url:
                process = await stack.enter_async_context(
                    await cli_process("call", url, "sleep", "seconds=6")
                )
                await read_until(process, seen, b"task: working")
            await read_until(process, seen, b"reconnecting for up to 60 s")
            async with running(demo_server(store_url, log_level="WARNING"), port=port):
                assert process.stdout is not None
                out = await process.stdout.receive()
                code = await process.wait()
                assert process.stderr is not None
                async for chunk in process.stderr:
                    seen += chunk
    err = seen.decode()
    assert code == 0, err
    assert out == b"slept 6s\n"
    assert f"mcp-tasks call: lost {url} (" in err
    assert "mcp-tasks call: reconnected\n" in err
    assert err.splitlines()[-1] == "task: completed"


async def test_call_gives_up_after_reconnect_for_and_prints_the_watch_line(
    tmp_path: Path,
) -> None:
    """A server that stays away: after --reconnect-for seconds `call` gives up with exit 6
    and the exact `mcp-tasks watch` line that finds the task later; the task goes on."""
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    seen = bytearray()
    async with AsyncExitStack() as stack:
        with anyio.fail_after(120):
            async with running(demo_server(store_url, log_level="WARNING")) as url:
                process = await stack.enter_async_context(
                    await cli_process("call", url, "sleep", "seconds=600", "--reconnect-for", "1")
                )
                await read_until(process, seen, b"task: working")
            code = await process.wait()
            assert process.stderr is not None
            async for chunk in process.stderr:
                seen += chunk
    err = seen.decode()
    found = TASK_ID.search(seen)
    assert found is not None, err
    task_id = found.group(1).decode()
    assert code == 6, err
    lines = err.splitlines()
    assert lines[-2].startswith(f"mcp-tasks call: gave up reconnecting to {url} after 1 s (")
    assert lines[-2].endswith("); the task may still be running there")
    assert lines[-1] == f"follow it later: mcp-tasks watch {url} {task_id}"


async def test_call_says_a_restarted_memory_server_lost_the_task() -> None:
    """The server restarts on a memory store while `call` follows a task: once a server
    answers again it does not know the task, and `call` says why that happens (not only
    `Task not found`), exit 6."""
    port = a_free_port()
    seen = bytearray()
    async with AsyncExitStack() as stack:
        with anyio.fail_after(120):
            server = demo_server(MemoryTaskStore(), log_level="WARNING")
            async with running(server, port=port) as url:
                process = await stack.enter_async_context(
                    await cli_process("call", url, "sleep", "seconds=600")
                )
                await read_until(process, seen, b"task: working")
            await read_until(process, seen, b"reconnecting for up to 60 s")
            async with running(demo_server(MemoryTaskStore(), log_level="WARNING"), port=port):
                code = await process.wait()
                assert process.stderr is not None
                async for chunk in process.stderr:
                    seen += chunk
    err = seen.decode()
    assert code == 6, err
    assert err.splitlines()[-1] == (
        "mcp-tasks call: the server no longer knows this task "
        "(a server on a memory store loses its tasks when it restarts)"
    )


async def on_a_terminal(
    url: str, *args: str, when: bytes = b"", then: Any = None, seen: Any = None
) -> tuple[int, str]:
    """Run `mcp-tasks call URL ARGS` on a pseudo-terminal; once `when` is printed, await
    `then(transcript)`; `seen(transcript)` is called after every read. (exit code,
    everything the terminal showed)."""
    master, child_end = pty.openpty()
    process = await cli_process(
        "call", url, *args, stdin=child_end, stdout=child_end, stderr=child_end
    )
    os.close(child_end)
    transcript = b""
    done = when == b""
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    # Abandoned on timeout, so a CLI stuck at its prompt fails the test.
                    chunk = await anyio.to_thread.run_sync(
                        os.read, master, 4096, abandon_on_cancel=True
                    )
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                transcript += chunk
                if seen is not None:
                    seen(transcript)
                if not done and when in transcript:
                    done = True
                    await then(transcript)
            code = await process.wait()
    finally:
        os.close(master)
        if process.returncode is None:
            process.kill()
    return code, transcript.decode(errors="replace")


async def never_answer(context: Any, params: Any) -> Any:
    raise AssertionError("this client only answers through tasks/update")


async def test_a_prompt_answered_elsewhere_is_dropped_and_the_call_goes_on() -> None:
    """While `call` prompts on a terminal, another client answers the task's question:
    `call` notices, says so, drops its prompt and follows the task to its end."""
    backend = MemoryBackend()
    server = demo_server(MemoryTaskStore(backend=backend), step_seconds=0.05, log_level="WARNING")

    async with running(server) as url:

        async def answer_elsewhere(transcript: bytes) -> None:
            found = TASK_ID.search(transcript)
            assert found is not None
            async with tasks_client(url, elicitation_callback=never_answer) as client:
                handle = TaskHandle.attach(client, found.group(1).decode())
                await handle.update({"confirm": {"action": "accept", "content": {"confirm": True}}})

        code, text = await on_a_terminal(
            url, "deploy", "env=tty", when=b"Go ahead? [boolean]: ", then=answer_elsewhere
        )
    assert code == 0, text
    assert "answered elsewhere; going on" in text
    assert "deployed to tty" in text
    [record] = backend.tasks.values()
    assert record.status is TaskStatus.COMPLETED


async def test_on_a_terminal_progress_is_a_bar_and_the_last_message_goes() -> None:
    """Progress numbers in the status message become a live bar with done/total and the
    percentage; once the task ends, the bar and its last message are gone and the
    outcome stands in their place. Each step of the build lasts until the terminal has
    shown it, so no step passes unseen however slow the machine."""
    on_screen = [anyio.Event() for _ in BUILD_STEPS]

    def show(transcript: bytes) -> None:
        for number, event in enumerate(on_screen, start=1):
            if f"({number}/4)".encode() in transcript:
                event.set()

    tasks = Tasks(store=MemoryTaskStore(), close_store=True)
    server = MCPServer(
        "build", extensions=[tasks.extension()], lifespan=tasks.lifespan, log_level="WARNING"
    )

    @tasks.tool(server, poll_interval_ms=POLL_INTERVAL_MS)
    async def build(ctx: TaskContext, ref: str) -> str:
        for number, step in enumerate(BUILD_STEPS, start=1):
            await ctx.progress(number, len(BUILD_STEPS), step)
            await on_screen[number - 1].wait()
        return f"built {ref}: 4 steps, all green"

    async with running(server) as url:
        code, text = await on_a_terminal(url, "build", "ref=bar", seen=show)
    assert code == 0, text
    bars = re.findall(r"\((\d)/4\) .*? (\d)/4 +(\d+)%", text)
    assert {done for _, done, _ in bars} == {"1", "2", "3", "4"}, text
    assert all(shown == done and int(percent) == 25 * int(done) for shown, done, percent in bars)
    last = text.rsplit("\x1b[2K", 1)[1]
    assert last.startswith("task: completed after 0:0")
    assert "Packaging" not in last
    assert "built bar: 4 steps, all green" in last
