"""A durable population for S-DURABLE tests: 1 000 tasks in all five statuses, and checks
that they come back unchanged (with their claims still valid) after a close or a restart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    Lease,
    NewTask,
    Progress,
    RequireInput,
    TaskRecord,
    TaskStatus,
    WorkSpec,
    new_task_id,
)

if TYPE_CHECKING:
    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.stores.protocol import Store

TASKS = 1_000


async def populate(store: Store) -> tuple[list[str], list[Lease]]:
    """1 000 tasks, 200 in each status, with owners, TTLs, payloads, claims and input;
    returns their ids and the live leases of the working ones."""
    ids: list[str] = []
    leases: list[Lease] = []
    for i in range(TASKS):
        task = await store.create(
            NewTask(
                new_task_id(),
                owner="alice" if i % 2 else None,
                ttl_ms=None if i % 3 else 3_600_000,
                status_message=f"task {i}",
                work=WorkSpec("job", {"i": i, "text": "é\u0000"}, retry_delays_ms=(10, 20)),
            )
        )
        ids.append(task.task_id)
        kind = i % 5
        if kind == 0:  # working, claimed by a live lease
            claimed = await store.claim("w", lease_ms=600_000, task_id=task.task_id)
            assert claimed is not None
            leases.append(claimed.lease)
            await store.put_status(task.task_id, Progress(f"{i}%"), lease=claimed.lease)
        elif kind == 1:  # input_required, one of two keys answered
            requests: dict[str, JSONObject] = {
                "a": {"method": "roots/list"},
                "b": {"method": "roots/list"},
            }
            await store.put_status(task.task_id, RequireInput(requests), event_id=f"e{i}")
            await store.update(task.task_id, task.owner, {"a": {"answer": i}})
        elif kind == 2:
            await store.put_status(task.task_id, Complete({"content": [], "n": i / 7}))
        elif kind == 3:
            await store.put_status(task.task_id, Fail({"code": -32603, "message": f"no {i}"}))
        else:
            await store.cancel(task.task_id, task.owner)
    return ids, leases


async def snapshot(store: Store, ids: list[str]) -> dict[str, TaskRecord]:
    return {task_id: await store.get(task_id, ANY_OWNER) for task_id in ids}


async def assert_survived(store: Store, before: dict[str, TaskRecord], leases: list[Lease]) -> None:
    after = await snapshot(store, list(before))
    assert after == before
    assert {r.status for r in after.values()} == set(TaskStatus)
    for lease in leases[:20]:  # claims stay valid until they expire
        renewed = await store.renew(lease, lease_ms=600_000)
        assert renewed.generation == lease.generation
