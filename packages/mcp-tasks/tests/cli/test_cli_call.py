"""`mcp-tasks call` as a real subprocess against a real server: output and exit codes."""

from __future__ import annotations

import os
import pty
import re
import shlex
import signal
import sys
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_tasks import MemoryBackend, TaskContext, Tasks, TaskStatus
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.testing import running

if TYPE_CHECKING:
    import mcp_types as types

pytestmark = pytest.mark.anyio


async def cli(*args: str) -> tuple[int, str, str]:
    """Run `mcp-tasks …` with no terminal attached; (exit code, stdout, stderr)."""
    result = await anyio.run_process(
        [sys.executable, "-m", "mcp_tasks.cli", *args], check=False, stdin=None
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


async def call(*args: str) -> tuple[int, str, str]:
    """Run `mcp-tasks call …` with no terminal attached; (exit code, stdout, stderr)."""
    return await cli("call", *args)


TASK_ID_LINE = re.compile(r"task id: ([A-Za-z0-9_-]{43}) \(mcp-tasks get\|watch\|cancel (\S+) ID\)")


def printed_task_id(err: str) -> str:
    """The task id `call` printed on stderr (its first line)."""
    found = TASK_ID_LINE.fullmatch(err.splitlines()[0])
    assert found is not None, err
    return found.group(1)


async def test_a_completed_task_prints_its_result_and_exits_0(demo_url: str) -> None:
    """The task id comes first on stderr, then status lines, one per change seen (no TTY);
    the result to stdout; exit 0. `get` with that id finds the task again."""
    code, out, err = await call(demo_url, "build", "ref=release")
    assert code == 0
    assert out.strip() == "built release: 4 steps, all green"
    task_id = printed_task_id(err)
    assert TASK_ID_LINE.fullmatch(err.splitlines()[0]).group(2) == demo_url  # type: ignore[union-attr]
    assert err.splitlines()[1] == "task: working"  # the CreateTaskResult's status next
    assert "task: completed" in err
    assert err.splitlines()[-1] == "task: completed"  # not the last progress message
    code, out, err = await cli("get", demo_url, task_id)
    assert (code, err) == (0, "")
    assert out == "completed — Packaging (4/4)\nbuilt release: 4 steps, all green\n"


async def test_answer_flag_answers_the_input_request(demo_url: str) -> None:
    """--answer KEY=JSON answers the task's input request; the deploy completes."""
    code, out, _ = await call(demo_url, "deploy", "env=qa", "--answer", 'confirm={"confirm": true}')
    assert code == 0
    assert out.strip() == "deployed to qa"


@pytest.mark.parametrize(
    ("answer", "accepting"),
    [
        ("confirm=true", """'confirm={"confirm": true}'"""),
        ('confirm="yes"', """'confirm={"confirm": "yes"}'"""),
        ("confirm={ok:true}", """'confirm={"confirm": true}'"""),
    ],
)
async def test_an_answer_that_cannot_be_sent_is_refused_before_any_task(
    answer: str, accepting: str
) -> None:
    """`--answer confirm=true` (and other answers tasks/update cannot carry): one line
    saying why, one with answers that can be sent, exit 2, and no task was made."""
    backend = MemoryBackend()
    server = demo_server(MemoryTaskStore(backend=backend), step_seconds=0.05, log_level="WARNING")
    async with running(server) as url:
        code, out, err = await call(url, "deploy", "env=x", "--answer", answer)
    assert (code, out) == (2, "")
    first, hint = err.splitlines()
    assert first.startswith(f"mcp-tasks call: --answer {answer} cannot be sent: ")
    assert hint == (
        f"an answer that can be sent: --answer {accepting} (the form's fields) "
        """or --answer 'confirm={"action": "decline"}'"""
    )
    assert backend.tasks == {}


async def test_a_url_without_mcp_that_answers_404_gets_a_hint(demo_url: str) -> None:
    """The server's root instead of its /mcp endpoint: one line saying what answered,
    the next step naming the /mcp URL, exit 6."""
    root = demo_url.removesuffix("/mcp")
    code, out, err = await call(root, "build")
    assert (code, out) == (6, "")
    assert err.splitlines() == [
        f"mcp-tasks call: {root} answered 404 Not Found: no MCP endpoint there",
        f"is the MCP endpoint at {root}/mcp? (mcp-tasks serve serves /mcp)",
    ]


async def test_a_tool_error_exits_1_and_says_the_tool_failed(demo_url: str) -> None:
    """A declined confirmation is the tool's own error (completed + isError): the last
    status says it failed as a tool error (not `completed`), the error text follows on
    stdout, exit 1."""
    code, out, err = await call(demo_url, "deploy", "--answer", 'confirm={"action": "decline"}')
    assert code == 1
    assert out == "Error executing tool deploy: deploy to staging was not confirmed\n"
    assert err.splitlines()[-1] == "task: failed as a tool error"
    assert "task: completed" not in err


async def test_input_nobody_answers_here_exits_5_and_leaves_the_task_waiting() -> None:
    """Without --answer and without a terminal, nobody here can answer: exit 5, the task
    is left waiting (not cancelled), and the last lines give the question and the exact
    `mcp-tasks watch … --answer …` line that answers it; that line completes the task."""
    backend = MemoryBackend()
    server = demo_server(MemoryTaskStore(backend=backend), step_seconds=0.05, log_level="WARNING")
    async with running(server) as url:
        code, _, err = await call(url, "deploy", "env=qa", "--no-input")
        [record] = backend.tasks.values()
        assert code == 5, err
        assert record.status is TaskStatus.INPUT_REQUIRED
        task_id = printed_task_id(err)
        assert err.splitlines()[-2:] == [
            "mcp-tasks call: the task needs input: confirm: Deploy to qa? (no --answer "
            "confirm=… and --no-input); it is left waiting",
            f"answer it with: mcp-tasks watch {url} {task_id} --answer "
            """'confirm={"confirm": true}'""",
        ]
        watch = shlex.split(err.splitlines()[-1].removeprefix("answer it with: "))
        assert watch[:2] == ["mcp-tasks", "watch"]
        code, out, err = await cli(*watch[1:])
    assert (code, out) == (0, "deployed to qa\n"), err
    assert backend.tasks[task_id].status is TaskStatus.COMPLETED


ASK_NAME: dict[str, Any] = {
    "name": {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
}


async def test_unanswerable_input_before_any_task_claims_no_cancellation() -> None:
    """Input asked before a task exists (a preflight round): exit 5, and no task was
    started, so nothing claims one was cancelled."""
    backend = MemoryBackend()
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    mcp = MCPServer("asking", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    def preflight(arguments: Any, answers: Any) -> Any:
        return None if "name" in answers else ASK_NAME

    @tasks.tool(mcp, mode="required", preflight=preflight)
    async def greet() -> str:
        return "hello"

    async with running(mcp) as url:
        code, _, err = await call(url, "greet", "--no-input")
    assert code == 5
    assert backend.tasks == {}
    assert err.splitlines() == [
        "mcp-tasks call: the tool needs input before it starts: name: Name? (no --answer "
        "name=… and --no-input)",
        """call again with --answer 'name={"name": "..."}'""",
    ]


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
    assert err.splitlines()[-1] == "mcp-tasks call: the task failed: error -32000: out of coolant"


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


async def never_answer(context: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("not asked: the test only watches")


async def test_watch_follows_a_task_by_id_and_cancel_cancels_it() -> None:
    """A task found again by id: `watch` with --no-input stops at its question (exit 5)
    and leaves it waiting; `cancel` cancels it (exit 0); `watch` then exits 4; `cancel`
    again says it had already ended."""
    backend = MemoryBackend()
    server = demo_server(MemoryTaskStore(backend=backend), step_seconds=0.05, log_level="WARNING")
    async with running(server) as url:
        # The client declares elicitation (deploy needs it); it never answers: only `watch`
        # is used, which does not answer.
        async with tasks_client(url, elicitation_callback=never_answer) as client:
            started = await start_tool(client, "deploy", {"env": "qa"})
            assert isinstance(started, TaskHandle)
            task_id = started.task_id
            async for state in started.watch():
                if state.status == "input_required":
                    break
        code, _, err = await cli("watch", url, task_id, "--no-input")
        assert code == 5, err
        [record] = backend.tasks.values()
        assert record.status is TaskStatus.INPUT_REQUIRED
        assert "cancelled" not in err
        assert task_id not in err
        code, out, err = await cli("cancel", url, task_id)
        assert (code, out, err) == (0, "cancelled\n", "")
        assert record.task_id == task_id
        assert backend.tasks[task_id].status is TaskStatus.CANCELLED
        code, _, err = await cli("watch", url, task_id)
        assert code == 4
        assert err.splitlines()[-1].startswith("task: cancelled")
        code, out, _ = await cli("cancel", url, task_id)
        assert (code, out) == (0, "cancelled: the task had already ended; nothing to cancel\n")


async def test_get_of_an_unknown_task_is_one_line_exit_6(demo_url: str) -> None:
    """An id no task has: one line naming the command and the server's not-found error,
    exit 6; the same for watch and cancel."""
    for command in ("get", "watch", "cancel"):
        code, out, err = await cli(command, demo_url, "x" * 43)
        assert (code, out) == (6, "")
        assert err == (
            f"mcp-tasks {command}: no such task on {demo_url} "
            "(error -32602: Failed to retrieve task: Task not found)\n"
        )
