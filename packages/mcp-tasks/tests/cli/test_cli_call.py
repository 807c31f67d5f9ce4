"""`mcp-tasks call` as a real subprocess against a real server: output and exit codes."""

from __future__ import annotations

import os
import pty
import signal
import sys

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_tasks import MemoryBackend, TaskContext, Tasks, TaskStatus
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.testing import running

pytestmark = pytest.mark.anyio


async def call(*args: str) -> tuple[int, str, str]:
    """Run `mcp-tasks call …` with no terminal attached; (exit code, stdout, stderr)."""
    result = await anyio.run_process(
        [sys.executable, "-m", "mcp_tasks.cli", "call", *args], check=False, stdin=None
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


async def test_a_completed_task_prints_its_result_and_exits_0(demo_url: str) -> None:
    """Status lines go to stderr, one per change seen (no TTY); the result to stdout; exit 0."""
    code, out, err = await call(demo_url, "build", "ref=release")
    assert code == 0
    assert out.strip() == "built release: 4 steps, all green"
    assert err.startswith("task: working")  # the CreateTaskResult's status comes first
    assert "task: completed" in err


async def test_answer_flag_answers_the_input_request(demo_url: str) -> None:
    """--answer KEY=JSON answers the task's input request; the deploy completes."""
    code, out, _ = await call(demo_url, "deploy", "env=qa", "--answer", 'confirm={"confirm": true}')
    assert code == 0
    assert out.strip() == "deployed to qa"


async def test_a_tool_error_exits_1(demo_url: str) -> None:
    """A declined confirmation is the tool's own error (completed + isError): exit 1."""
    code, out, _ = await call(demo_url, "deploy", "--answer", 'confirm={"action": "decline"}')
    assert code == 1
    assert "not confirmed" in out


async def test_unanswerable_input_exits_5_and_cancels(demo_url: str) -> None:
    """Without --answer and without a terminal, input cannot be given: exit 5."""
    code, _, err = await call(demo_url, "deploy", "--no-input")
    assert code == 5
    assert "--answer confirm=JSON" in err


async def test_a_failed_task_exits_3() -> None:
    """A task that fails with a JSON-RPC error exits 3 and prints the error."""
    tasks = Tasks(store=MemoryTaskStore())
    mcp = MCPServer("failing", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def explode() -> str:
        raise MCPError(-32000, "out of coolant")

    async with running(mcp) as url:
        code, _, err = await call(url, "explode")
    assert code == 3
    assert "error -32000: out of coolant" in err


async def test_a_cancelled_task_exits_4() -> None:
    """A task that ends cancelled (here: it cancels itself through the store) exits 4."""
    tasks = Tasks(store=MemoryTaskStore())
    mcp = MCPServer("cancelling", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def give_up(ctx: TaskContext) -> str:
        assert ctx.task_id is not None
        await tasks.store.cancel(ctx.task_id, None)
        await anyio.sleep(600)
        return "never"

    async with running(mcp) as url:
        code, _, err = await call(url, "give_up")
    assert code == 4
    assert "task: cancelled" in err


async def test_an_unreachable_server_exits_6() -> None:
    """A connection failure is reported in one line, exit 6."""
    with anyio.fail_after(60):
        code, _, err = await call("http://127.0.0.1:9/mcp", "build")
    assert code == 6
    assert "Traceback" not in err


async def test_on_a_terminal_it_shows_a_live_line_and_prompts(demo_url: str) -> None:
    """With a TTY, the status line is rewritten in place and input is asked interactively:
    the answer typed at the prompt confirms the deploy."""
    master, child_end = pty.openpty()
    process = await anyio.open_process(
        [sys.executable, "-m", "mcp_tasks.cli", "call", demo_url, "deploy", "env=tty"],
        stdin=child_end,
        stdout=child_end,
        stderr=child_end,
    )
    os.close(child_end)
    transcript = b""
    answered = False
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    chunk = await anyio.to_thread.run_sync(os.read, master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                transcript += chunk
                if not answered and b"Go ahead?" in transcript:
                    os.write(master, b"y\n")
                    answered = True
            code = await process.wait()
    finally:
        os.close(master)
        if process.returncode is None:
            process.kill()
    text = transcript.decode(errors="replace")
    assert code == 0, text
    assert "\r\x1b[2K" in text, "the status line is rewritten in place"
    assert "? Deploy to tty?" in text
    assert "deployed to tty" in text


async def test_ctrl_c_cancels_the_task_and_exits_130() -> None:
    """SIGINT while following a task sends tasks/cancel before exiting 130."""
    backend = MemoryBackend()
    server = demo_server(MemoryTaskStore(backend=backend), log_level="WARNING")
    async with running(server) as url:
        process = await anyio.open_process(
            [sys.executable, "-m", "mcp_tasks.cli", "call", url, "sleep", "seconds=600"]
        )
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(60):
            while b"task: working" not in seen:
                seen += await process.stderr.receive()
            process.send_signal(signal.SIGINT)
            code = await process.wait()
            async for chunk in process.stderr:
                seen += chunk
    [record] = backend.tasks.values()
    assert code == 130, seen.decode()
    assert record.status is TaskStatus.CANCELLED
