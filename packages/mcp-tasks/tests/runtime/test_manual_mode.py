"""Manual mode: ``defer`` creates a task for an external worker; ``TaskControl`` drives it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks import (
    MemoryBackend,
    MemoryTaskStore,
    Outcome,
    RequestView,
    TaskControl,
    Tasks,
    TaskStatus,
    defer,
)
from mcp_tasks.engine import ToolOptions
from mcp_tasks.runtime.control import defer_slot

if TYPE_CHECKING:
    from mcp_tasks.runtime.control import Deferred

pytestmark = pytest.mark.anyio

EXT: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class Manual:
    """A Tasks whose tool returns whatever ``Deferred`` the test hands it."""

    def __init__(self) -> None:
        self.backend = MemoryBackend()
        self.tasks = Tasks(store=MemoryTaskStore(backend=self.backend))
        self.control = self.tasks.control()

    async def call(self, deferred: Deferred | str, caps: dict[str, Any] | None = None) -> Any:
        async def call_next() -> Any:
            slot = defer_slot.get()
            if slot is not None and not isinstance(deferred, str):
                slot.deferred = deferred  # what the @tasks.tool wrapper does
                return "deferred"
            return deferred

        return await self.tasks.engine.handle_tool_call(
            RequestView(
                protocol_version="2026-07-28", client_capabilities=EXT if caps is None else caps
            ),
            name="enqueue",
            arguments={},
            input_responses=None,
            call_next=call_next,
            options=ToolOptions(mode="optional", manual=True),
        )


async def test_defer_creates_a_task_without_work_and_starts_it() -> None:
    """The task has no work descriptor (no in-process runner), the descriptor's TTL, poll
    interval and status message, and ``start`` gets its id."""
    manual = Manual()
    started: list[str] = []
    created = await manual.call(
        defer(started.append, ttl_ms=9_000, poll_interval_ms=700, status_message="queued")
    )
    assert started == [created["taskId"]]
    assert (created["ttlMs"], created["statusMessage"]) == (9_000, "queued")
    record = await manual.control.status(created["taskId"])
    assert record.work is None
    assert record.poll_interval_ms == 700


async def test_async_start_is_awaited() -> None:
    """An async ``start`` is awaited before the answer."""
    manual = Manual()
    started: list[str] = []

    async def start(task_id: str) -> None:
        started.append(task_id)

    created = await manual.call(defer(start))
    assert started == [created["taskId"]]


async def test_a_failing_start_still_answers_a_task_which_fails() -> None:
    """If ``start`` raises the client still gets its task, and the task is failed -32603."""
    manual = Manual()

    def start(task_id: str) -> None:
        raise RuntimeError("queue down")

    created = await manual.call(defer(start))
    assert created["resultType"] == "task"
    record = await manual.control.status(created["taskId"])
    assert record.status is TaskStatus.FAILED
    assert record.error is not None
    assert record.error["code"] == -32603


@pytest.mark.parametrize(
    "bad",
    [
        defer(lambda task_id: None, color="blue"),
        defer(lambda task_id: None, ttl_ms=-5),
        defer(lambda task_id: None, poll_interval_ms="fast"),  # type: ignore[arg-type]
        defer(lambda task_id: None, status_message=3),  # type: ignore[arg-type]
        defer("not callable"),  # type: ignore[arg-type]
    ],
)
async def test_bad_descriptors_are_internal_errors_and_create_nothing(bad: Deferred) -> None:
    """Unknown or ill-typed attributes: -32603 and no task created."""
    manual = Manual()
    with pytest.raises(MCPError) as caught:
        await manual.call(bad)
    assert caught.value.code == -32603
    assert manual.backend.tasks == {}


async def test_plain_results_pass_through_and_undeclared_deferral_is_refused() -> None:
    """A manual tool may answer directly; deferring without the extension is -32021."""
    manual = Manual()
    assert await manual.call("direct answer") == "direct answer"
    with pytest.raises(MCPError) as caught:
        await manual.call(defer(lambda task_id: None), caps={})
    assert caught.value.code == -32021
    assert manual.backend.tasks == {}


async def test_task_control_drives_a_task_by_id() -> None:
    """progress → statusMessage; require_input → input_required; answers show on status();
    complete → completed with a CallToolResult; is_cancelled follows tasks/cancel."""
    manual = Manual()
    control = TaskControl(manual.tasks.store)
    first = (await manual.call(defer(lambda task_id: None), {**EXT, "elicitation": {}}))["taskId"]
    await control.progress(first, "half way")
    assert (await control.status(first)).status_message == "half way"
    ask = {"ok": {"method": "elicitation/create", "params": {}}}
    await control.require_input(first, ask)
    assert (await control.status(first)).status is TaskStatus.INPUT_REQUIRED
    await manual.tasks.store.update(first, None, {"ok": {"action": "accept"}})
    record = await control.status(first)
    assert record.input_responses == {"ok": {"action": "accept"}}
    await control.complete(first, "all done")
    done = await control.status(first)
    assert done.status is TaskStatus.COMPLETED
    assert done.result == {"content": [{"type": "text", "text": "all done"}], "isError": False}

    second = (await manual.call(defer(lambda task_id: None)))["taskId"]
    assert not await control.is_cancelled(second)
    await manual.tasks.store.cancel(second, None)
    assert await control.is_cancelled(second)
    assert await control.is_cancelled("never-existed")

    third = (await manual.call(defer(lambda task_id: None)))["taskId"]
    await control.fail(third, "worker crashed", code=-32000, data={"attempt": 1})
    failed = await control.status(third)
    assert failed.error == {"code": -32000, "message": "worker crashed", "data": {"attempt": 1}}


async def test_a_replayed_job_writes_each_step_once() -> None:
    """Each write with an event id applies once: a second run of the same job (a queue's
    redelivery) replays the first run's writes as ``duplicate`` outcomes that write nothing,
    and its own new steps apply; after the end, its final write is a ``duplicate`` too."""
    manual = Manual()
    control = TaskControl(manual.tasks.store)
    caps = {**EXT, "elicitation": {}}
    task_id = (await manual.call(defer(lambda task_id: None), caps))["taskId"]
    ask = {"ok": {"method": "elicitation/create", "params": {}}}
    first_run = [await control.progress(task_id, "frame 1", event_id="frame-1")]
    revision = (await control.status(task_id)).revision

    second_run = [
        await control.progress(task_id, "frame 1", event_id="frame-1"),
        await control.progress(task_id, "frame 2", event_id="frame-2"),
        await control.require_input(task_id, ask, event_id="ask"),
        await control.require_input(task_id, ask, event_id="ask"),
    ]
    await manual.tasks.store.update(task_id, None, {"ok": {"action": "accept"}})
    done = await control.complete(task_id, "all done", event_id="done")
    again = await control.complete(task_id, "all done", event_id="done")

    assert [t.outcome for t in first_run] == [Outcome.APPLIED]
    outcomes = [t.outcome for t in second_run]
    assert outcomes == [Outcome.DUPLICATE, Outcome.APPLIED, Outcome.APPLIED, Outcome.DUPLICATE]
    assert (done.outcome, again.outcome) == (Outcome.APPLIED, Outcome.DUPLICATE)
    # frame 2, the question, the answer and the result: four writes after the first run's.
    assert again.record.revision == revision + 4
    assert again.record.status is TaskStatus.COMPLETED
