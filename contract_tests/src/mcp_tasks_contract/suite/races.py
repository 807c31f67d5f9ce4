"""The races: concurrent actors, each on its own handle (its own connection), started at once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from mcp_tasks import (
    Claimed,
    Complete,
    DuplicateTaskId,
    Lease,
    NewTask,
    Outcome,
    OwnerTaskLimitReached,
    Progress,
    RequireInput,
    RevisionConflict,
    StaleLease,
    Store,
    StoreOptions,
    TaskLimitReached,
    TaskNotFound,
    TaskRecord,
    TaskStatus,
    Transition,
    new_task_id,
)
from mcp_tasks_contract.handles import new_namespace
from mcp_tasks_contract.suite.base import (
    ELICIT,
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    current,
    expiry,
    in_time,
    job,
    new_task,
    run_concurrently,
)
from mcp_tasks_contract.suite.reap import assert_wholly_gone

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles

Call = Callable[[], Awaitable[Any]]


def applied(results: list[Any]) -> list[Transition]:
    return [r for r in results if isinstance(r, Transition) and r.outcome is Outcome.APPLIED]


def assert_only(results: Iterable[object], allowed: tuple[type, ...]) -> None:
    """Every result is an instance of one of ``allowed`` (the values and the errors a race may
    end in); otherwise fail naming each unexpected one, an error with its chain of causes."""
    unexpected = [(i, r) for i, r in enumerate(results) if not isinstance(r, allowed)]
    if unexpected:
        names = ", ".join(t.__name__ for t in allowed) or "nothing"
        lines = [f"{len(unexpected)} unexpected result(s); allowed: {names}"]
        lines += [f"  [{i}] {described(r)}" for i, r in unexpected]
        pytest.fail("\n".join(lines))


def described(result: object) -> str:
    """``repr(result)``, and for an error each ``__cause__`` behind it (the driver's error)."""
    text = repr(result)
    cause = result.__cause__ if isinstance(result, BaseException) else None
    for _ in range(10):  # a cause chain is short; never loop on a cyclic one
        if cause is None:
            break
        text += f" caused by {cause!r}"
        cause = cause.__cause__
    return text


class RaceContract(ContractBase):
    """Races for S-CREATE, S-PUT, S-UPDATE, S-CANCEL, S-CLAIM and S-REAP."""

    @pytest.mark.rule("S-CREATE.1", "S-CREATE.4")
    async def test_concurrent_creates_of_one_id_one_wins(self, handles: StoreHandles) -> None:
        """16 handles create the same id at once: exactly one succeeds, the rest get
        DuplicateTaskId, and the stored task is the winner's."""
        stores = await handles.open_many(16)
        task_id = new_task_id()
        calls: list[Call] = [
            partial(s.create, NewTask(task_id=task_id, owner=f"owner-{i}"))
            for i, s in enumerate(stores)
        ]
        results = await run_concurrently(calls)
        assert_only(results, (TaskRecord, DuplicateTaskId))
        winners = [r for r in results if not isinstance(r, Exception)]
        assert len(winners) == 1
        assert await current(stores[0], task_id) == winners[0]

    @pytest.mark.rule("S-CREATE.1", "S-CREATE.2", "INV-CAP")
    async def test_concurrent_creates_never_pass_the_cap(self, handles: StoreHandles) -> None:
        """40 creates at once from 8 handles against max_rows=20: exactly 20 succeed, 20 get
        TaskLimitReached, and exactly the 20 winners are stored."""
        options = StoreOptions(max_rows=20)
        stores = await handles.open_many(8, options)
        tasks = [NewTask(task_id=new_task_id()) for _ in range(40)]
        calls: list[Call] = [partial(stores[i % 8].create, t) for i, t in enumerate(tasks)]
        results = await run_concurrently(calls)
        assert_only(results, (TaskRecord, TaskLimitReached))
        won = {
            t.task_id for t, r in zip(tasks, results, strict=True) if not isinstance(r, Exception)
        }
        assert len(won) == 20
        for task in tasks:
            if task.task_id in won:
                assert (await current(stores[0], task.task_id)).revision == 0
            else:
                with pytest.raises(TaskNotFound):
                    await current(stores[0], task.task_id)

    @pytest.mark.rule("S-CREATE.1", "S-CREATE.2", "INV-CAP")
    async def test_concurrent_creates_of_one_owner_never_pass_its_cap(
        self, handles: StoreHandles
    ) -> None:
        """40 creates of one owner at once from 8 handles, beside 8 of another owner, against
        max_active_per_owner=10: exactly 10 of the first owner's succeed, all of the other's."""
        stores = await handles.open_many(8, StoreOptions(max_active_per_owner=10))
        tasks = [NewTask(task_id=new_task_id(), owner="alice") for _ in range(40)]
        tasks += [NewTask(task_id=new_task_id(), owner="bob") for _ in range(8)]
        calls: list[Call] = [partial(stores[i % 8].create, t) for i, t in enumerate(tasks)]
        results = await run_concurrently(calls)
        assert_only(results, (TaskRecord, OwnerTaskLimitReached))
        won = Counter(r.owner for r in results if isinstance(r, TaskRecord))
        assert won == {"alice": 10, "bob": 8}

    @pytest.mark.rule("S-PUT.3", "INV-REVISION")
    async def test_32_writers_on_one_revision_exactly_one_applies(
        self, handles: StoreHandles
    ) -> None:
        """32 handles write with expected_revision=0 at once: one applied, 31 RevisionConflict."""
        stores = await handles.open_many(32)
        record = await new_task(stores[0])
        calls: list[Call] = [
            partial(s.put_status, record.task_id, Progress(f"writer {i}"), expected_revision=0)
            for i, s in enumerate(stores)
        ]
        results = await run_concurrently(calls)
        assert_only(results, (Transition, RevisionConflict))
        winners = applied(results)
        assert len(winners) == 1
        losers = [r for r in results if r not in winners]
        assert len(losers) == 31
        assert_only(losers, (RevisionConflict,))
        seen = await current(stores[1], record.task_id)
        assert seen.revision == 1
        assert seen.status_message == winners[0].record.status_message

    @pytest.mark.rule("S-CLAIM.3", "INV-CLAIM")
    async def test_16_claimers_over_500_tasks_claim_each_once(self, handles: StoreHandles) -> None:
        """16 workers on 16 handles claim until nothing is left: each of 500 tasks is claimed
        exactly once, at generation 1."""
        creator, *claimers = await handles.open_many(17)
        created = {(await new_task(creator, work=job())).task_id for _ in range(500)}
        taken: list[Claimed] = []

        async def work(worker: int, store: Store) -> None:
            while (claimed := await store.claim(f"w{worker}", lease_ms=LONG_LEASE_MS)) is not None:
                taken.append(claimed)

        async with anyio.create_task_group() as group:
            for worker, store in enumerate(claimers):
                group.start_soon(work, worker, store)
        counts = Counter(c.lease.task_id for c in taken)
        assert set(counts) == created
        assert max(counts.values()) == 1
        assert {c.lease.generation for c in taken} == {1}

    @pytest.mark.rule("S-CLAIM.3", "INV-CLAIM")
    async def test_16_claimers_of_one_task_one_wins(self, handles: StoreHandles) -> None:
        """16 handles claim the same task by id at once: exactly one gets it."""
        stores = await handles.open_many(16)
        record = await new_task(stores[0], work=job())
        calls: list[Call] = [
            partial(s.claim, f"w{i}", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
            for i, s in enumerate(stores)
        ]
        results = await run_concurrently(calls)
        assert_only(results, (Claimed, type(None)))
        winners = [r for r in results if isinstance(r, Claimed)]
        assert len(winners) == 1
        assert results.count(None) == 15
        seen = await current(stores[0], record.task_id)
        assert seen.generation == 1
        assert seen.claim is not None
        assert seen.claim.token == winners[0].lease.token

    @pytest.mark.rule("S-CANCEL.1", "S-PUT.4", "INV-TERMINAL")
    async def test_cancel_against_completion_exactly_one_wins(self, handles: StoreHandles) -> None:
        """Cancel and the worker's Complete race on 20 tasks: on each, exactly one applies and
        the final status is the winner's."""
        canceller, worker = await handles.open_many(2)
        for _ in range(20):
            record = await new_task(canceller, owner="alice", work=job())
            claimed = await worker.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
            assert claimed is not None
            cancel, complete = await run_concurrently(
                [
                    partial(canceller.cancel, record.task_id, "alice"),
                    partial(
                        worker.put_status, record.task_id, Complete({"v": 1}), lease=claimed.lease
                    ),
                ]
            )
            assert_only([cancel, complete], (Transition,))
            assert isinstance(cancel, Transition)
            assert isinstance(complete, Transition)
            assert {cancel.outcome, complete.outcome} == {Outcome.APPLIED, Outcome.UNCHANGED}
            seen = await current(canceller, record.task_id)
            assert seen.revision == 1
            if cancel.outcome is Outcome.APPLIED:
                assert (seen.status, seen.result) == (TaskStatus.CANCELLED, None)
            else:
                assert (seen.status, seen.result) == (TaskStatus.COMPLETED, {"v": 1})

    @pytest.mark.rule("S-UPDATE.5", "INV-TERMINAL")
    async def test_answer_against_completion_never_undoes_it(self, handles: StoreHandles) -> None:
        """tasks/update and the worker's Complete race on 20 waiting tasks: every task ends
        completed with its result; the answer never moves it back to working."""
        client, worker = await handles.open_many(2)
        for _ in range(20):
            record = await new_task(client, owner="alice", work=job())
            claimed = await worker.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
            assert claimed is not None
            await worker.put_status(
                record.task_id, RequireInput({"a": ELICIT}), lease=claimed.lease
            )
            answer, complete = await run_concurrently(
                [
                    partial(client.update, record.task_id, "alice", {"a": "yes"}),
                    partial(
                        worker.put_status, record.task_id, Complete({"v": 1}), lease=claimed.lease
                    ),
                ]
            )
            assert_only([answer, complete], (Transition,))
            assert isinstance(answer, Transition)
            assert isinstance(complete, Transition)
            assert complete.outcome is Outcome.APPLIED
            seen = await current(client, record.task_id)
            assert (seen.status, seen.result) == (TaskStatus.COMPLETED, {"v": 1})
            assert seen.revision == 2 + (answer.outcome is Outcome.APPLIED)

    @pytest.mark.rule("S-REAP", "INV-NOPARTIAL")
    async def test_reap_against_writers_leaves_tasks_whole_or_gone(
        self, handles: StoreHandles
    ) -> None:
        """Writers keep writing to 20 tasks across the instant they expire while a reaper
        removes them: writes only ever apply or raise TaskNotFound/StaleLease, every task
        ends wholly gone (its id free again), and the reaper counts each task once. Half the
        tasks are written by the holder of a lease that ends with them, half by id (manual
        mode); every writer has written before the expiry and writes on until it fails."""

        async def set_up(ttl_ms: int) -> tuple[list[Store], list[TaskRecord], list[Lease | None]]:
            # A fresh namespace per attempt: a failed attempt leaves nothing to reap here.
            namespace = new_namespace()
            stores = [await handles.open(namespace=namespace) for _ in range(5)]
            reaper, workers = stores[0], stores[1:]
            records: list[TaskRecord] = []
            leases: list[Lease | None] = []
            for i in range(20):
                record = await new_task(reaper, work=job(), ttl_ms=ttl_ms)
                lease = None
                if i % 2:
                    # The lease ends with the TTL (S-TTL.1 keeps the task as long as it).
                    claimed = await workers[i % 4].claim(
                        "w", lease_ms=ttl_ms, task_id=record.task_id
                    )
                    if claimed is None:
                        raise TaskNotFound  # expired before the claim: in_time tries again
                    lease = claimed.lease
                # Written once before the race: the task surely lives when the writers start.
                done = await workers[i % 4].put_status(record.task_id, Progress("0"), lease=lease)
                records.append(done.record)
                leases.append(lease)
            return stores, records, leases

        stores, records, leases = await in_time(set_up)
        reaper, workers = stores[0], stores[1:]
        unexpected: list[BaseException] = []
        reaped = 0
        started = 0  # writers that have written once more in the race, or stopped
        all_started = anyio.Event()

        def one_started() -> None:
            nonlocal started
            started += 1
            if started == len(records):
                all_started.set()

        async def write(store: Store, index: int) -> None:
            task_id, lease = records[index].task_id, leases[index]
            step, counted = 0, False
            try:
                while True:
                    step += 1
                    await store.put_status(task_id, Progress(f"step {step}"), lease=lease)
                    if not counted:
                        counted = True
                        one_started()
                    await anyio.sleep(0.001)
            except (TaskNotFound, StaleLease):
                pass
            except Exception as exc:
                unexpected.append(exc)
            if not counted:
                one_started()

        async def reap() -> None:
            nonlocal reaped
            while reaped < len(records):
                reaped += await reaper.reap(limit=3)
                await anyio.sleep(0.005)

        async def expire() -> None:
            # Time passes while the writers write (a manual clock is advanced only now).
            await all_started.wait()
            await handles.wait_past(max(expiry(record) for record in records))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(reap)
                group.start_soon(expire)
                for index in range(len(records)):
                    group.start_soon(write, workers[index % 4], index)
        assert_only(unexpected, ())
        assert reaped == len(records)
        assert await reaper.reap() == 0
        for record in records:
            await assert_wholly_gone(workers[0], record)

    @pytest.mark.rule("S-REAP")
    async def test_two_reapers_remove_disjoint_sets(self, handles: StoreHandles) -> None:
        """Two reapers on two handles, racing over 100 expired tasks in small batches, report
        counts that add up to exactly 100: no task is counted twice."""
        first, second = await handles.open_many(2)
        created = [await new_task(first, ttl_ms=SHORT_MS) for _ in range(100)]
        await handles.wait_past(max(expiry(record) for record in created))
        counts = {"first": 0, "second": 0}

        async def reap(name: str, store: Store) -> None:
            while (removed := await store.reap(limit=7)) > 0:
                counts[name] += removed

        async with anyio.create_task_group() as group:
            group.start_soon(reap, "first", first)
            group.start_soon(reap, "second", second)
        assert counts["first"] + counts["second"] == 100
        assert await first.reap() == await second.reap() == 0
