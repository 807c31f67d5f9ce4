"""Status notifications across processes: two real servers on one durable store (SQLite,
Postgres, Redis, MongoDB). A client listening on B hears about a task running on A; a
cancel or an answer sent to B reaches the body running on A.

Every server here polls the store only hourly (``MCP_TASKS_POLL_FALLBACK_S``), and a running
body's lease is renewed only hourly too (a renewal fails once the task is cancelled), so a
change made on one process reaches the other by its signal through the store's notifier or
not within the tests' bounds (:data:`PUSHED_WITHIN_S`): a process-local notifier fails them.
Latencies are printed (``-s`` shows them), never asserted: ``nox -s bench`` watches them
(bench/notify_latency.py).
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest

from mcp_tasks.testing import RawClient

if TYPE_CHECKING:
    from conftest import Processes

    from mcp_tasks.testing import MessageStream

pytestmark = pytest.mark.anyio

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[4] / "examples"
CONFORMANCE_SERVER = (
    __import__("pathlib").Path(__file__).resolve().parents[4] / "conformance" / "server.py"
)
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: How long a pushed change may take to arrive, load included; without a push it takes an hour.
PUSHED_WITHIN_S = 30
HOUR = "3600"


@pytest.fixture(autouse=True)
def signals_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers these tests start hear other processes' changes through signals only."""
    monkeypatch.setenv("MCP_TASKS_POLL_FALLBACK_S", HOUR)
    monkeypatch.setenv("CRASH_LEASE_MS", str(2 * 3_600_000))
    monkeypatch.setenv("CRASH_HEARTBEAT_MS", str(3_600_000))


async def conformance_server(processes: Processes, store_url: str) -> str:
    """The URL of a conformance fixture server started on ``store_url``: the one this
    process says it bound (a port picked beforehand could be another's by the time a
    server binds it, and another's server would answer the tests)."""
    started = await processes.start(
        [sys.executable, str(CONFORMANCE_SERVER), "--store", store_url, "--port", "0"]
    )
    assert started.url is not None
    return started.url


def backend(store_url: str) -> str:
    return store_url.split(":", 1)[0]


def epoch_s(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


async def create(client: RawClient, tool: str, arguments: dict[str, Any]) -> str:
    reply = await client.call("tools/call", {"name": tool, "arguments": arguments})
    assert "taskId" in reply.get("result", {}), f"the create answered {reply}"
    task_id: str = reply["result"]["taskId"]
    return task_id


async def collect(stream: MessageStream, into: list[tuple[float, dict[str, Any]]]) -> None:
    """Every message of ``stream`` with its arrival wall time, until the stream ends (each
    within :data:`PUSHED_WITHIN_S`)."""
    while (message := await stream.next(timeout_s=PUSHED_WITHIN_S)) is not None:
        into.append((time.time(), message))


async def logged_time(processes: Processes, kind: str, task_id: str) -> tuple[int, float]:
    """``(pid, wall time)`` of the app's first ``kind`` line for ``task_id`` (within
    :data:`PUSHED_WITHIN_S`)."""
    with anyio.fail_after(PUSHED_WITHIN_S):
        while True:
            for pid, logged_id, what in processes.lines(kind):
                if logged_id == task_id:
                    return pid, float(what)
            # Written by another process: there is nothing to wait on but the file.
            await anyio.sleep(0.005)


async def test_a_listener_on_b_hears_a_task_created_and_completed_on_a(
    processes: Processes, store_url: str
) -> None:
    """The conformance fixture server twice: a task created on A is acknowledged on B's
    listen stream and each of its changes arrives there as notifications/tasks, up to
    completion; then B ends the stream gracefully."""
    a_url, b_url = [await conformance_server(processes, store_url) for _ in range(2)]
    async with httpx.AsyncClient(timeout=60) as http:
        on_a, on_b = RawClient(http, a_url), RawClient(http, b_url)
        task_id = await create(on_a, "slow_compute", {"seconds": 1.5})
        received: list[tuple[float, dict[str, Any]]] = []
        async with on_b.stream(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, request_id="l-b"
        ) as stream:
            await collect(stream, received)
    ack, *notes, end = (m for _, m in received)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    assert all(n["method"] == "notifications/tasks" for n in notes)
    assert all(n["params"]["_meta"] == {SUBSCRIPTION_ID: "l-b"} for n in notes)
    assert notes[-1]["params"]["status"] == "completed"
    assert notes[-1]["params"]["result"]["content"][0]["text"] == "Computed result after 1.5s"
    assert end["result"]["_meta"] == {SUBSCRIPTION_ID: "l-b"}
    arrived = received[-2][0]
    changed = epoch_s(notes[-1]["params"]["lastUpdatedAt"])
    heard_ms = 1000 * (arrived - changed)
    print(f"\n{backend(store_url)}: completed on A → heard on B {heard_ms:.0f} ms")


async def test_a_listener_on_a_fastmcp_server_hears_a_task_of_another_process(
    processes: Processes, store_url: str
) -> None:
    """A task created and run on A (the conformance fixture server) is acknowledged on the
    listen stream of B, a FastMCP server with our extension on the same store
    (examples/fastmcp_server.py under ``mcp-tasks serve``), and B hears it complete, then
    ends the stream."""
    a_url = await conformance_server(processes, store_url)
    b = await processes.serve(
        "fastmcp_server:mcp", PYTHONPATH=str(EXAMPLES), MCP_TASKS_STORE_URL=store_url
    )
    assert b.url is not None
    async with httpx.AsyncClient(timeout=60) as http:
        on_a, on_b = RawClient(http, a_url), RawClient(http, b.url)
        task_id = await create(on_a, "slow_compute", {"seconds": 1.5})
        received: list[tuple[float, dict[str, Any]]] = []
        async with on_b.stream(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, request_id="l-b"
        ) as stream:
            await collect(stream, received)
    ack, *notes, end = (m for _, m in received)
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    assert all(n["params"]["_meta"] == {SUBSCRIPTION_ID: "l-b"} for n in notes)
    assert notes[-1]["params"]["status"] == "completed"
    assert end["result"]["_meta"][SUBSCRIPTION_ID] == "l-b"


async def test_a_cancel_sent_to_b_stops_the_body_on_a(processes: Processes, store_url: str) -> None:
    """A task running on A, cancelled through B: A's body stops."""
    a, b = await processes.serve(), await processes.serve()
    assert a.url is not None
    assert b.url is not None
    async with httpx.AsyncClient(timeout=60) as http:
        task_id = await create(RawClient(http, a.url), "stoppable", {})
        await logged_time_of_run(processes, task_id)
        sent = time.time()
        reply = await RawClient(http, b.url).call("tasks/cancel", {"taskId": task_id})
        assert "result" in reply
        pid, stopped = await logged_time(processes, "stopped", task_id)
    assert pid == a.pid
    print(
        f"\n{backend(store_url)}: cancel on B → body stopped on A {1000 * (stopped - sent):.0f} ms"
    )


async def test_an_answer_sent_to_b_reaches_the_body_on_a_and_b_hears_the_end(
    processes: Processes, store_url: str
) -> None:
    """A task on A waiting for input, answered through B: A's body goes on, and a listener
    on B hears input_required, then completed."""
    a, b = await processes.serve(), await processes.serve()
    assert a.url is not None
    assert b.url is not None
    received: list[tuple[float, dict[str, Any]]] = []
    async with httpx.AsyncClient(timeout=60) as http, anyio.create_task_group() as tg:
        on_b = RawClient(http, b.url)
        task_id = await create(RawClient(http, a.url), "answerable", {})
        opened = anyio.Event()

        async def listen() -> None:
            async with on_b.stream(
                "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
            ) as stream:
                opened.set()
                await collect(stream, received)

        tg.start_soon(listen)
        await opened.wait()
        await until(lambda: any(status_of(m) == "input_required" for _, m in received))
        sent = time.time()
        answer = {"go": {"action": "accept", "content": {}}}
        reply = await on_b.call("tasks/update", {"taskId": task_id, "inputResponses": answer})
        assert "result" in reply
        pid, answered = await logged_time(processes, "answered", task_id)
    assert pid == a.pid
    statuses = [
        m["params"]["status"] for _, m in received if m.get("method") == "notifications/tasks"
    ]
    assert statuses[-1] == "completed"
    assert "input_required" in statuses
    _, finishing = await logged_time(processes, "finishing", task_id)
    heard = next(t for t, m in received if status_of(m) == "completed")
    name = backend(store_url)
    print(f"\n{name}: update on B → body on A resumed {1000 * (answered - sent):.0f} ms")
    print(f"{name}: completed on A → heard on B {1000 * (heard - finishing):.0f} ms")


async def logged_time_of_run(processes: Processes, task_id: str) -> None:
    """Wait until the body of ``task_id`` runs (its ``run`` line)."""
    await until(lambda: any(t == task_id for _, t, _ in processes.lines("run")))


def status_of(message: dict[str, Any]) -> object:
    return message.get("params", {}).get("status")


async def until(condition: Any) -> None:
    """Wait until ``condition()`` (within :data:`PUSHED_WITHIN_S`); what it reads is written
    elsewhere (another process, a stream reader), so there is nothing to wait on but
    re-checking."""
    with anyio.fail_after(PUSHED_WITHIN_S):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)
