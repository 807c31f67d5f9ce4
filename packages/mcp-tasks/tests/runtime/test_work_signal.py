"""The work signal: a runner that leaves claimable work behind wakes the others' recovery
loops, so another runner takes the work at once instead of at its next poll.

"Another process" is a second Tasks on the same memory backend, hearing the first through
one notifier (as processes on a durable store hear each other through its relay). Every
recovery loop here polls once an hour: only the signal can wake it in time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from mcp_tasks import (
    ANY_OWNER,
    LocalNotifier,
    MemoryBackend,
    MemoryTaskStore,
    RequestView,
    RunnerOptions,
    Tasks,
    TaskStatus,
)

if TYPE_CHECKING:
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks.runtime.notifier import Notifier

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
REQUEST = RequestView(protocol_version="2026-07-28", client_capabilities=TASKS_CAPS)
AN_HOUR_S = 3600.0


def process(backend: MemoryBackend, notifier: Notifier, **runner: Any) -> Tasks:
    return Tasks(
        store=MemoryTaskStore(backend=backend),
        notifier=notifier,
        runner=RunnerOptions(recovery_interval_s=AN_HOUR_S, **runner),
    )


async def finished(store: MemoryTaskStore, task_id: str) -> TaskRecord:
    with anyio.fail_after(10):
        while True:
            record = await store.get(task_id, ANY_OWNER)
            if record.status.is_terminal:
                return record
            await anyio.sleep(0.02)


async def test_a_clean_shutdown_hands_a_running_task_to_another_runner_by_the_signal() -> None:
    """The first runner stops (its lifespan exits) while its task runs: it releases the task
    and signals the work, and the second runner, idle until then, runs it to the end."""
    backend, notifier = MemoryBackend(), LocalNotifier()
    first, second = process(backend, notifier), process(backend, notifier)
    started = anyio.Event()

    async def forever() -> Any:
        started.set()
        await anyio.sleep_forever()

    async def finish(arguments: Any) -> str:
        return "finished by the second runner"

    first.register("work", mode="required")
    second.register("work", mode="required", run=finish)
    async with second.running():
        async with first.running():
            created = await first.engine.handle_tool_call(
                REQUEST, name="work", arguments={}, input_responses=None, call_next=forever
            )
            await started.wait()
        done = await finished(second.store, created["taskId"])  # type: ignore[arg-type]
    assert done.status is TaskStatus.COMPLETED
    assert done.result is not None
    assert done.result["content"] == [{"type": "text", "text": "finished by the second runner"}]


async def test_a_server_that_runs_no_tasks_wakes_the_workers_by_the_signal() -> None:
    """``RunnerOptions(run_tasks=False)`` creates the task unclaimed and signals the work: a worker
    already idle runs it."""
    backend, notifier = MemoryBackend(), LocalNotifier()
    server = process(backend, notifier, run_tasks=False)
    worker = process(backend, notifier)

    async def never() -> Any:
        raise AssertionError("the server must not run the body")

    async def job(arguments: Any) -> str:
        return "done by the worker"

    server.register("job", mode="required")
    worker.register("job", mode="required", run=job)
    async with worker.running(), server.running():
        await anyio.sleep(0.05)  # the worker's first look finds nothing; then it waits
        created = await server.engine.handle_tool_call(
            REQUEST, name="job", arguments={}, input_responses=None, call_next=never
        )
        done = await finished(worker.store, created["taskId"])  # type: ignore[arg-type]
    assert done.status is TaskStatus.COMPLETED
