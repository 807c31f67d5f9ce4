"""S-CREATE: inserting a task."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    DuplicateTaskId,
    InvalidArgument,
    NewTask,
    Outcome,
    OwnerTaskLimitReached,
    Progress,
    RequireInput,
    StaleLease,
    StoreOptions,
    TaskLimitReached,
    TaskNotFound,
    TaskStatus,
    WorkSpec,
    new_task_id,
)
from mcp_tasks.domain.rules import lease_of
from mcp_tasks_contract.suite.base import (
    ELICIT,
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    expiry,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks import Store
    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks_contract.handles import StoreHandles


async def assert_owner_refused(store: Store, owner: str) -> NewTask:
    """One more task of ``owner`` is refused with OwnerTaskLimitReached and nothing is
    stored: the refused task, for creating again once there is room."""
    refused = NewTask(task_id=new_task_id(), owner=owner)
    with pytest.raises(OwnerTaskLimitReached):
        await store.create(refused)
    with pytest.raises(TaskNotFound):
        await store.get(refused.task_id, owner)
    return refused


class CreateContract(ContractBase):
    """S-CREATE.1-6."""

    @pytest.mark.rule("S-CREATE.1", "INV-TIMES")
    async def test_create_returns_the_new_record_at_revision_zero(
        self, handles: StoreHandles
    ) -> None:
        """create returns a working task at revision 0 whose fields are what was asked (the
        work descriptor whole, its creating request's trace context included)."""
        store = await handles.open()
        work = WorkSpec(
            type="build",
            input={"ref": "main"},
            idempotency_key="k1",
            retry_delays_ms=(5, 10),
            trace_context={
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "tracestate": "vendor=é",
            },
        )
        task = NewTask(
            task_id=new_task_id(),
            owner="alice",
            ttl_ms=60_000,
            poll_interval_ms=500,
            status_message="Queued",
            work=work,
        )
        record = await store.create(task)
        assert record.task_id == task.task_id
        assert record.owner == "alice"
        assert record.status is TaskStatus.WORKING
        assert record.revision == 0
        assert record.created_at == record.last_updated_at
        assert record.ttl_ms == 60_000
        assert record.expires_at == record.created_at + 60_000
        assert record.poll_interval_ms == 500
        assert record.status_message == "Queued"
        assert record.work == work
        assert (record.attempt, record.retry_at, record.generation, record.claim) == (
            0,
            None,
            0,
            None,
        )
        assert (record.result, record.error) == (None, None)
        assert dict(record.input_requests) == {}
        assert await current(store, task.task_id) == record

    @pytest.mark.rule("S-CREATE.1")
    async def test_task_without_ttl_never_expires(self, handles: StoreHandles) -> None:
        """ttl_ms None stores no expiry: expires_at is None."""
        store = await handles.open()
        record = await new_task(store, ttl_ms=None)
        assert (record.ttl_ms, record.expires_at) == (None, None)
        assert (await current(store, record.task_id)).expires_at is None

    @pytest.mark.rule("S-CREATE.2")
    async def test_create_at_the_row_cap_raises_and_writes_nothing(
        self, handles: StoreHandles
    ) -> None:
        """With max_rows unexpired rows stored, create raises TaskLimitReached (not the
        per-owner OwnerTaskLimitReached), inserts nothing."""
        store = await handles.open(StoreOptions(max_rows=3))
        kept = [await new_task(store, owner="alice") for _ in range(3)]
        refused = NewTask(task_id=new_task_id(), owner="bob")
        with pytest.raises(TaskLimitReached) as raised:
            await store.create(refused)
        assert type(raised.value) is TaskLimitReached
        with pytest.raises(TaskNotFound):
            await store.get(refused.task_id, ANY_OWNER)
        for record in kept:
            await assert_unchanged(store, record)

    @pytest.mark.rule("S-CREATE.2", "INV-EXPIRED")
    async def test_expired_rows_do_not_count_toward_the_cap(self, handles: StoreHandles) -> None:
        """Rows whose TTL has passed (even before any reap) leave room under the cap."""
        store = await handles.open(StoreOptions(max_rows=2))
        await new_task(store, ttl_ms=SHORT_MS)
        last = await new_task(store, ttl_ms=SHORT_MS)
        await handles.wait_past(expiry(last))
        fresh = await new_task(store)
        assert (await current(store, fresh.task_id)).revision == 0

    @pytest.mark.rule("S-CREATE.2")
    async def test_per_owner_cap_counts_only_active_tasks(self, handles: StoreHandles) -> None:
        """max_active_per_owner refuses a third active task of one owner
        (OwnerTaskLimitReached), not another owner's; a finished task makes room again;
        ownerless tasks are not held to it."""
        store = await handles.open(StoreOptions(max_active_per_owner=2))
        first = await new_task(store, owner="alice")
        await new_task(store, owner="alice")
        refused = await assert_owner_refused(store, "alice")
        await new_task(store, owner="bob")
        await store.cancel(first.task_id, "alice")
        await store.create(refused)
        assert (await store.get(refused.task_id, "alice")).status is TaskStatus.WORKING

        ownerless = [await new_task(store) for _ in range(3)]
        assert [record.owner for record in ownerless] == [None, None, None]

    @pytest.mark.rule("S-CREATE.2")
    async def test_default_options_cap_each_owner(self, handles: StoreHandles) -> None:
        """With the default StoreOptions one owner's active tasks stop at the default
        max_active_per_owner, and another owner and an ownerless caller still create."""
        cap = StoreOptions().max_active_per_owner
        assert cap is not None, "StoreOptions() must leave room for other owners"
        store = await handles.open(StoreOptions())
        for _ in range(cap):
            await new_task(store, owner="alice")
        await assert_owner_refused(store, "alice")
        assert (await new_task(store, owner="bob")).owner == "bob"
        assert (await new_task(store)).owner is None

    @pytest.mark.rule("S-CREATE.3")
    async def test_created_task_is_visible_on_another_handle(self, handles: StoreHandles) -> None:
        """Once create returns, get on a different handle (another connection) sees the task."""
        writer, reader = await handles.open_many(2)
        record = await new_task(writer, owner="alice", status_message="hello")
        assert await reader.get(record.task_id, "alice") == record

    @pytest.mark.rule("S-CREATE.4")
    async def test_existing_id_is_refused_and_the_original_untouched(
        self, handles: StoreHandles
    ) -> None:
        """Creating an id that exists raises DuplicateTaskId; the stored task stays as it was."""
        store = await handles.open()
        original = await new_task(store, owner="alice", status_message="original")
        with pytest.raises(DuplicateTaskId):
            await store.create(NewTask(task_id=original.task_id, owner="mallory", ttl_ms=None))
        await assert_unchanged(store, original)

    @pytest.mark.rule("S-CREATE.5", "S-JSON")
    async def test_client_capabilities_are_kept_exactly_through_every_write(
        self, handles: StoreHandles
    ) -> None:
        """The creating request's client capabilities come back from create and from get on
        another handle exactly as given (nested, unicode, numbers, nulls), and no later write
        (progress, input, answer, claim, renew, completion) changes them; None stays None."""
        store, other = await handles.open_many(2)
        capabilities: JSONObject = {
            "elicitation": {"form": {}, "url": {}},
            "sampling": {},
            "extensions": {"io.modelcontextprotocol/tasks": {"version": "2026-07-28"}},
            "experimental": {"x": [1, -2.5, None, True, "é ☃ \u0000"], "": {"nested": []}},
        }
        task = NewTask(
            task_id=new_task_id(),
            owner="alice",
            work=WorkSpec("job"),
            client_capabilities=capabilities,
        )
        created = await store.create(task)
        assert created.client_capabilities == capabilities
        assert (await current(other, task.task_id)).client_capabilities == capabilities
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=task.task_id)
        assert claimed is not None
        lease = await store.renew(claimed.lease, lease_ms=LONG_LEASE_MS)
        await store.put_status(task.task_id, Progress("p"), lease=lease)
        await store.put_status(task.task_id, RequireInput({"a": ELICIT}), lease=lease)
        await other.update(task.task_id, "alice", {"a": "yes"})
        done = await store.put_status(task.task_id, Complete({"v": 1}), lease=lease)
        assert done.record.client_capabilities == capabilities
        assert (await current(other, task.task_id)).client_capabilities == capabilities
        plain = await new_task(store)
        assert plain.client_capabilities is None
        await store.put_status(plain.task_id, Complete({"v": 1}))
        assert (await current(other, plain.task_id)).client_capabilities is None

    @pytest.mark.rule("S-CREATE.6", "S-TTL.1")
    async def test_a_task_created_claimed_is_its_creators_alone(
        self, handles: StoreHandles
    ) -> None:
        """claimed_by + lease_ms insert the task claimed at generation 1, held as long as the
        lease; no claim (by id or not) from any handle takes it while the lease lives; the
        creator's lease (rules.lease_of) writes and renews; released, it is claimable again
        at generation 2."""
        store, other = await handles.open_many(2)
        task = NewTask(
            task_id=new_task_id(),
            ttl_ms=1_000,  # shorter than the lease: the lease holds the task
            work=WorkSpec("job"),
            claimed_by="creator",
            lease_ms=LONG_LEASE_MS,
        )
        created = await store.create(task)
        assert (created.revision, created.generation) == (0, 1)
        assert created.claim is not None
        assert created.claim.worker_id == "creator"
        assert created.claim.expires_at == created.created_at + LONG_LEASE_MS
        assert created.expires_at == created.claim.expires_at  # held by the lease (S-TTL.1)
        assert await current(other, task.task_id) == created
        assert await other.claim("thief", lease_ms=LONG_LEASE_MS) is None
        assert await other.claim("thief", lease_ms=LONG_LEASE_MS, task_id=task.task_id) is None
        lease = lease_of(created)
        assert (lease.worker_id, lease.generation) == ("creator", 1)
        renewed = await store.renew(lease, lease_ms=LONG_LEASE_MS)
        written = await store.put_status(task.task_id, Progress("p"), lease=renewed)
        assert written.outcome is Outcome.APPLIED
        with pytest.raises(StaleLease):  # unleased writes never mix with a live claim
            await other.put_status(task.task_id, Progress("q"))
        await store.release(renewed)
        again = await other.claim("second", lease_ms=LONG_LEASE_MS)
        assert again is not None
        assert (again.record.task_id, again.lease.generation) == (task.task_id, 2)

    @pytest.mark.rule("S-CREATE.6")
    def test_claimed_by_needs_work_and_a_lease(self) -> None:
        """A claimed create names a lease and has work; a lease alone means nothing."""
        with pytest.raises(InvalidArgument):
            NewTask(task_id=new_task_id(), work=WorkSpec("job"), claimed_by="w")
        with pytest.raises(InvalidArgument):
            NewTask(task_id=new_task_id(), claimed_by="w", lease_ms=LONG_LEASE_MS)
        with pytest.raises(InvalidArgument):
            NewTask(task_id=new_task_id(), work=WorkSpec("job"), lease_ms=LONG_LEASE_MS)
