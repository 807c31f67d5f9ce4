"""A complete Store in one file: tasks in a dict, every decision left to the shared rules.

The worked example of docs/store-contract.md ("Write your own store"): it passes the whole
contract suite (examples/test_minimal_store.py). A real backend keeps the same shape and
replaces the dict with its database: one atomic read-modify-write per operation, the
database's clock, and its driver's failures raised as ``StoreUnavailable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mcp_tasks import (
    Claimed,
    Clock,
    DuplicateTaskId,
    Lease,
    NewTask,
    OwnerTaskLimitReached,
    StoreOptions,
    TaskLimitReached,
    TaskRecord,
    Transition,
    system_clock,
)
from mcp_tasks.domain import rules
from mcp_tasks.stores.kit import CloseGuard
from mcp_tasks.stores.read_modify_write import ReadModifyWrite

#: What a read-modify-write computes from the record (or ``None``) and the store's now:
#: the answer, and the record to persist (``None``: nothing to write).
Write = Callable[[TaskRecord | None, int], tuple[Transition, TaskRecord | None]]


@dataclass
class Database:
    """The state every handle on one namespace shares, as connections share a database."""

    tasks: dict[str, TaskRecord] = field(default_factory=dict)


class DictTaskStore(ReadModifyWrite):
    """One handle. No operation awaits between its read and its write, so each one is
    atomic on the event loop: that is all this store has to guarantee itself."""

    def __init__(
        self, database: Database, options: StoreOptions | None = None, clock: Clock = system_clock
    ) -> None:
        self.options = options or StoreOptions()
        self._db = database
        self._clock = clock
        self._guard = CloseGuard()

    def _tasks(self) -> dict[str, TaskRecord]:
        self._guard.check()  # S-CLOSE: a closed handle refuses every operation
        return self._db.tasks

    async def create(self, task: NewTask) -> TaskRecord:
        tasks, now = self._tasks(), self._clock()
        if task.task_id in tasks:  # S-CREATE.4: checked before the caps
            raise DuplicateTaskId
        cap, per_owner = self.options.max_rows, self.options.owner_cap(task.owner)
        if cap is not None and sum(rules.counts_toward_cap(r, now) for r in tasks.values()) >= cap:
            raise TaskLimitReached
        if per_owner is not None:
            mine = [r for r in tasks.values() if r.owner == task.owner]
            if sum(rules.is_active(r, now) for r in mine) >= per_owner:
                raise OwnerTaskLimitReached
        record = rules.new_record(task, now)
        tasks[task.task_id] = record
        return record

    async def get(self, task_id: str, owner: rules.OwnerArg) -> TaskRecord:
        return rules.visible(self._tasks().get(task_id), owner, self._clock())

    async def _modify(self, task_id: str, compute: Write) -> Transition:
        """update, cancel and put_status (ReadModifyWrite): the rules compute the write."""
        tasks = self._tasks()
        transition, record = compute(tasks.get(task_id), self._clock())
        if record is not None:
            tasks[task_id] = record
        return transition

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: rules.WorkTypes = None,
    ) -> Claimed | None:
        tasks, now = self._tasks(), self._clock()
        if task_id is not None:
            candidates = [tasks[task_id]] if task_id in tasks else []
        else:
            candidates = sorted(tasks.values(), key=rules.claim_order)
        for record in candidates:
            if rules.claimable(record, now) and rules.of_work_types(record, work_types):
                claimed = rules.apply_claim(record, worker_id, lease_ms, now)
                tasks[record.task_id] = claimed.record
                return claimed
        return None

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        tasks = self._tasks()
        renewed = rules.apply_renew(tasks.get(lease.task_id), lease, lease_ms, self._clock())
        tasks[lease.task_id] = renewed.record
        return renewed.lease

    async def release(self, lease: Lease) -> None:
        tasks = self._tasks()
        released = rules.apply_release(tasks.get(lease.task_id), lease)
        if released is not None:
            tasks[lease.task_id] = released

    async def reap(self, *, limit: int = 500) -> int:
        tasks, now = self._tasks(), self._clock()
        retention = self.options.terminal_retention_ms
        gone = [i for i, r in tasks.items() if rules.is_reapable(r, now, retention)][:limit]
        for task_id in gone:
            del tasks[task_id]
        return len(gone)

    async def close(self) -> None:
        self._guard.close()
