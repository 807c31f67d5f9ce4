"""The in-process runner: leases, cancellation, input waits, replay and the reaper.

These tests hand bodies to the runner themselves (``runner.start``), so their Tasks run no
recovery loop (tests/runtime/test_recovery.py covers it)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import pytest

from mcp_tasks import (
    Complete,
    Lease,
    ManualClock,
    MemoryBackend,
    MemoryTaskStore,
    NewTask,
    Outcome,
    RequireInput,
    RunnerOptions,
    StaleLease,
    Tasks,
    TaskStatus,
    WorkSpec,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.context import RunningTaskContext
from mcp_tasks.runtime.notifier import POLL_FALLBACK_S, LocalNotifier

if TYPE_CHECKING:
    from mcp_tasks.domain.models import StatusChange

pytestmark = pytest.mark.anyio

WORK = WorkSpec(type="tool", input={})


async def test_a_lost_lease_stops_the_body_and_drops_its_outcome() -> None:
    """When another worker takes the task over (the lease expired), the body is stopped and
    its outcome is not written over the new holder's."""
    clock = ManualClock()
    store = MemoryTaskStore(clock=clock)
    tasks = Tasks(store=store, runner=RunnerOptions(lease_ms=300, recovery_interval_s=None))
    started, stopped = anyio.Event(), anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return Complete({"content": []})

    async with tasks.running():
        record = await store.create(NewTask(task_id="t", work=WORK))
        await tasks.runner.start(record.task_id, body)
        with anyio.fail_after(10):
            await started.wait()
        clock.advance(301)
        assert await store.claim("other-node", lease_ms=60_000, task_id="t") is not None
        with anyio.fail_after(10):
            await stopped.wait()
    after = await store.get("t", ANY_OWNER)
    assert after.status is TaskStatus.WORKING
    assert after.claim is not None
    assert after.claim.worker_id == "other-node"


class CountingReleases(MemoryTaskStore):
    """A memory store that counts ``release`` calls."""

    releases = 0

    async def release(self, lease: Lease) -> None:
        self.releases += 1
        await super().release(lease)


async def test_progress_and_outcome_are_recorded_with_the_lease() -> None:
    """A body's progress becomes the statusMessage and its outcome the terminal state. The
    finished task's claim is not released (one store write less per task): it is inert, as
    no claim, renew or leased write can use a finished task's claim."""
    clock = ManualClock()
    store = CountingReleases(clock=clock)
    tasks = Tasks(store=store, runner=RunnerOptions(recovery_interval_s=None))
    messages: list[str | None] = []

    async def body(context: RunningTaskContext) -> StatusChange:
        await context.progress(2, 4)
        messages.append((await store.get(context.task_id, ANY_OWNER)).status_message)
        await context.progress(3, 4, "almost")
        messages.append((await store.get(context.task_id, ANY_OWNER)).status_message)
        return Complete({"content": [], "isError": False})

    async with tasks.running():
        await store.create(NewTask(task_id="p", work=WORK))
        await tasks.runner.start("p", body)
        with anyio.fail_after(10):
            while not (await store.get("p", ANY_OWNER)).status.is_terminal:  # noqa: ASYNC110
                await anyio.sleep(0.01)
    record = await store.get("p", ANY_OWNER)
    assert messages == ["2/4", "almost (3/4)"]
    assert record.status is TaskStatus.COMPLETED
    assert store.releases == 0
    assert record.claim is not None
    claim = record.claim
    lease = Lease("p", claim.worker_id, claim.token, record.generation, claim.expires_at)
    with pytest.raises(StaleLease):
        await store.renew(lease, lease_ms=60_000)
    again = await store.put_status("p", Complete({"content": ["x"]}), lease=lease)
    assert again.outcome is Outcome.UNCHANGED
    assert again.record.revision == record.revision
    clock.advance(claim.expires_at - clock() + 1)
    assert await store.claim("other-node", lease_ms=60_000, task_id="p") is None
    assert await store.claim("other-node", lease_ms=60_000) is None
    assert (await store.get("p", ANY_OWNER)).status is TaskStatus.COMPLETED


async def test_a_body_that_ends_without_finishing_its_task_releases_the_claim() -> None:
    """A retry leaves the task working: the runner releases the claim at once, so the task
    is claimable when its delay is over (not only when the lease runs out)."""
    store = CountingReleases()
    tasks = Tasks(store=store, runner=RunnerOptions(recovery_interval_s=None))

    async def body(context: RunningTaskContext) -> StatusChange:
        context.retry("try again")

    async with tasks.running():
        await store.create(NewTask(task_id="q", work=replace(WORK, retry_delays_ms=(60_000,))))
        await tasks.runner.start("q", body)
        with anyio.fail_after(10):
            while store.releases == 0:  # noqa: ASYNC110
                await anyio.sleep(0.01)
    record = await store.get("q", ANY_OWNER)
    assert record.status is TaskStatus.WORKING
    assert record.retry_at is not None
    assert record.claim is None


async def test_recorded_answers_are_replayed_not_asked_again() -> None:
    """An input key already answered on the task (e.g. before a recovery), asked again with
    the same request, returns the recorded answer at once and writes nothing."""
    store = MemoryTaskStore()
    await store.create(NewTask(task_id="r", work=WORK))
    claimed = await store.claim("w", lease_ms=60_000, task_id="r")
    assert claimed is not None
    ask = {"k": {"method": "elicitation/create", "params": {}}}
    await store.put_status("r", RequireInput(ask), lease=claimed.lease)
    await store.update("r", None, {"k": {"action": "accept", "content": {"v": 1}}})
    context = RunningTaskContext(
        task_id="r", store=store, notifier=LocalNotifier(), lease=claimed.lease
    )
    revision = (await store.get("r", ANY_OWNER)).revision
    with anyio.fail_after(5):
        answers = await context.request_input(ask)
    assert answers == {"k": {"action": "accept", "content": {"v": 1}}}
    assert (await store.get("r", ANY_OWNER)).revision == revision


async def test_the_reaper_removes_expired_tasks() -> None:
    """The lifespan's reaper loop deletes tasks whose TTL has passed."""
    clock = ManualClock()
    backend = MemoryBackend()
    tasks = Tasks(
        store=MemoryTaskStore(clock=clock, backend=backend),
        runner=RunnerOptions(reap_interval_s=0.02),
    )
    async with tasks.running():
        await tasks.store.create(NewTask(task_id="old", ttl_ms=1_000))
        clock.advance(1_001)
        with anyio.fail_after(10):
            while backend.tasks:  # noqa: ASYNC110 (the store has no change events to await)
                await anyio.sleep(0.01)
    assert backend.tasks == {}


async def test_lifespan_is_reentrant_and_composable() -> None:
    """Entering the lifespan inside itself (Starlette + MCPServer) runs one runner."""
    tasks = Tasks()
    app: Any = object()
    async with tasks.lifespan(app) as state, tasks.lifespan(app):
        assert state == {}
        assert tasks.runner.running
    assert not tasks.runner.running


async def test_shutdown_releases_the_claim_of_a_running_body() -> None:
    """Leaving the lifespan stops running bodies and frees their claims for another node."""
    store = MemoryTaskStore()
    tasks = Tasks(store=store, runner=RunnerOptions(recovery_interval_s=None))
    started = anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        started.set()
        await anyio.sleep_forever()
        return Complete({"content": []})

    async with tasks.running():
        await store.create(NewTask(task_id="s", work=WORK))
        await tasks.runner.start("s", body)
        with anyio.fail_after(10):
            await started.wait()
        assert (await store.get("s", ANY_OWNER)).claim is not None
    record = await store.get("s", ANY_OWNER)
    assert record.claim is None
    assert record.status is TaskStatus.WORKING


async def test_frequent_changes_do_not_postpone_lease_renewal() -> None:
    """A body writing progress far more often than the renewal interval still has its lease
    renewed: the store clock (manual) moves two thirds of a lease at a time, and each time
    the runner renews before it moves again, for three lease periods; the outcome is
    recorded. No real-time window: a renewal that never comes fails the test."""
    clock = ManualClock()
    store = MemoryTaskStore(clock=clock)
    tasks = Tasks(
        store=store, runner=RunnerOptions(lease_ms=600, recovery_interval_s=None)
    )  # renewed every 200 ms
    done = anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        step = 0
        while not done.is_set():  # progress every 5 ms: many changes per renewal interval
            step += 1
            await context.progress(step, None)
            await anyio.sleep(0.005)
        return Complete({"content": []})

    async def lease_end() -> int:
        claim = (await store.get("f", ANY_OWNER)).claim
        assert claim is not None
        return claim.expires_at

    async with tasks.running():
        await store.create(NewTask(task_id="f", work=WORK))
        await tasks.runner.start("f", body)
        with anyio.fail_after(10):
            while (await store.get("f", ANY_OWNER)).claim is None:  # noqa: ASYNC110
                await anyio.sleep(0.005)
        for _ in range(4):
            before = await lease_end()
            clock.advance(400)  # the lease is still live: 200 ms of it left
            with anyio.fail_after(10):
                while await lease_end() <= before:  # noqa: ASYNC110
                    await anyio.sleep(0.005)
        done.set()
        with anyio.fail_after(10):
            while not (await store.get("f", ANY_OWNER)).status.is_terminal:  # noqa: ASYNC110
                await anyio.sleep(0.01)
    assert (await store.get("f", ANY_OWNER)).status is TaskStatus.COMPLETED


class CountingGets(MemoryTaskStore):
    """A memory store that counts ``get`` calls."""

    gets = 0

    async def get(self, task_id: str, owner: str | None) -> Any:
        self.gets += 1
        return await super().get(task_id, owner)


async def test_a_body_s_own_progress_does_not_wake_its_watch() -> None:
    """A body's own progress writes cannot have ended the task or taken it over, so they
    cost its watch no read of the task: the watch reads only at its fallback check (one per
    ``POLL_FALLBACK_S`` elapsed), however many reports the body writes, each followed by
    turns of the event loop in which a woken watch would have read. Another party's change
    still wakes it: a cancel stops the body."""
    store = CountingGets()
    tasks = Tasks(store=store, runner=RunnerOptions(recovery_interval_s=None))
    reports, stopped = 20, anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        for step in range(reports):
            await context.progress(step, reports)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
        reported.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return Complete({"content": []})

    reported = anyio.Event()
    async with tasks.running():
        await store.create(NewTask(task_id="w", work=WORK))
        started_at = anyio.current_time()
        await tasks.runner.start("w", body)
        with anyio.fail_after(10):
            await reported.wait()
        elapsed = anyio.current_time() - started_at
        assert store.gets <= elapsed // POLL_FALLBACK_S, f"{store.gets} reads in {elapsed:.2f} s"
        record = await store.get("w", ANY_OWNER)
        assert record.claim is not None
        await store.cancel("w", ANY_OWNER)
        await tasks.notifier.publish("w")
        with anyio.fail_after(10):
            await stopped.wait()


async def test_one_watch_keeps_every_body_s_lease_and_stops_only_the_cancelled_one() -> None:
    """The runner watches all its bodies at once: with several running, each one's lease
    is renewed before the store clock (manual) runs it out, twice over; a cancel stops its
    own body alone, and the others go on to record their outcomes."""
    clock = ManualClock()
    store = MemoryTaskStore(clock=clock)
    tasks = Tasks(
        store=store, runner=RunnerOptions(lease_ms=600, recovery_interval_s=None)
    )  # renewed every 200 ms
    ids = [f"m{i}" for i in range(8)]
    stopped: set[str] = set()
    finish = anyio.Event()

    async def body(context: RunningTaskContext) -> StatusChange:
        try:
            await finish.wait()
        finally:
            if context.cancelled:
                stopped.add(context.task_id)
        return Complete({"content": []})

    async def lease_ends() -> list[int]:
        ends = []
        for task_id in ids:
            claim = (await store.get(task_id, ANY_OWNER)).claim
            assert claim is not None
            ends.append(claim.expires_at)
        return ends

    async with tasks.running():
        for task_id in ids:
            await store.create(NewTask(task_id=task_id, work=WORK))
            await tasks.runner.start(task_id, body)
        for _ in range(2):
            before = await lease_ends()
            clock.advance(400)  # each lease is still live: 200 ms of it left
            with anyio.fail_after(10):
                while not all(  # noqa: ASYNC110
                    after > was for after, was in zip(await lease_ends(), before, strict=True)
                ):
                    await anyio.sleep(0.005)
        await store.cancel("m3", ANY_OWNER)
        await tasks.notifier.publish("m3")
        with anyio.fail_after(10):
            while "m3" not in stopped:  # noqa: ASYNC110
                await anyio.sleep(0.005)
        finish.set()
        with anyio.fail_after(10):
            while not all(  # noqa: ASYNC110
                [(await store.get(t, ANY_OWNER)).status.is_terminal for t in ids]
            ):
                await anyio.sleep(0.01)
    assert stopped == {"m3"}
    statuses = {t: (await store.get(t, ANY_OWNER)).status for t in ids}
    assert statuses.pop("m3") is TaskStatus.CANCELLED
    assert set(statuses.values()) == {TaskStatus.COMPLETED}
