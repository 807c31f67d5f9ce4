"""The in-memory Store: the reference implementation of the contract and a test double.

Not durable and not shared between processes. Several :class:`MemoryTaskStore` handles
may share one :class:`MemoryBackend`, the way several connections share one database.
Each operation runs without awaiting between its read and its write, so on one event
loop every operation is atomic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Self
from urllib.parse import urlsplit

from mcp_tasks.domain import rules
from mcp_tasks.domain.clock import Clock, system_clock
from mcp_tasks.domain.errors import DuplicateTaskId, StoreUnavailable, TaskLimitReached
from mcp_tasks.domain.models import (
    Claimed,
    Lease,
    NewTask,
    Outcome,
    StatusChange,
    StoreOptions,
    TaskRecord,
    Transition,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_tasks.domain.rules import OwnerArg


@dataclass
class MemoryBackend:
    """The state several store handles share: the "server" of the memory store."""

    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    name: str | None = None
    """The namespace in ``memory://NAME`` that every store of that URL shares."""


class MemoryTaskStore:
    """A :class:`~mcp_tasks.stores.protocol.Store` kept in this process's memory."""

    def __init__(
        self,
        options: StoreOptions | None = None,
        *,
        clock: Clock = system_clock,
        backend: MemoryBackend | None = None,
    ) -> None:
        self.options = options or StoreOptions()
        self._clock = clock
        self._backend = backend if backend is not None else MemoryBackend()
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryTaskStore(url={self.url!r}, max_rows={self.options.max_rows})"

    @property
    def url(self) -> str:
        """``memory://NAME`` for a named (shared) backend; ``memory://`` for a private one."""
        return f"memory://{self._backend.name or ''}"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def _tasks(self) -> dict[str, TaskRecord]:
        if self._closed:
            raise StoreUnavailable("The store is closed")
        return self._backend.tasks

    async def create(self, task: NewTask) -> TaskRecord:
        tasks, now = self._tasks, self._clock()
        if task.task_id in tasks:
            raise DuplicateTaskId
        self._check_caps(tasks, task.owner, now)
        record = rules.new_record(task, now)
        tasks[task.task_id] = record
        return record

    def _check_caps(self, tasks: dict[str, TaskRecord], owner: str | None, now: int) -> None:
        cap = self.options.max_rows
        # Counting is O(n): only do it when the raw row count could be at the cap.
        if cap is not None and len(tasks) >= cap:
            live = sum(1 for r in tasks.values() if rules.counts_toward_cap(r, now))
            if live >= cap:
                raise TaskLimitReached
        per_owner = self.options.max_active_per_owner
        if per_owner is not None:
            active = sum(1 for r in tasks.values() if r.owner == owner and rules.is_active(r, now))
            if active >= per_owner:
                raise TaskLimitReached

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        return rules.visible(self._tasks.get(task_id), owner, self._clock())

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        tasks = self._tasks
        return self._save(
            tasks, rules.apply_update(tasks.get(task_id), owner, input_responses, self._clock())
        )

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        tasks = self._tasks
        transition = rules.apply_cancel(
            tasks.get(task_id),
            owner,
            self._clock(),
            result_retention_ms=self.options.result_retention_ms,
        )
        return self._save(tasks, transition)

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        tasks = self._tasks
        transition = rules.apply_put(
            tasks.get(task_id),
            change,
            self._clock(),
            result_retention_ms=self.options.result_retention_ms,
            lease=lease,
            expected_revision=expected_revision,
            event_id=event_id,
        )
        return self._save(tasks, transition)

    @staticmethod
    def _save(tasks: dict[str, TaskRecord], transition: Transition) -> Transition:
        if transition.outcome is Outcome.APPLIED:
            tasks[transition.record.task_id] = transition.record
        return transition

    async def claim(
        self, worker_id: str, *, lease_ms: int, task_id: str | None = None
    ) -> Claimed | None:
        tasks, now = self._tasks, self._clock()
        if task_id is not None:
            record = tasks.get(task_id)
            candidate = record if record is not None and rules.claimable(record, now) else None
        else:
            eligible = (r for r in tasks.values() if rules.claimable(r, now))
            candidate = min(eligible, key=rules.claim_order, default=None)
        if candidate is None:
            return None
        claimed = rules.apply_claim(candidate, worker_id, lease_ms, now)
        tasks[candidate.task_id] = claimed.record
        return claimed

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        tasks = self._tasks
        renewed = rules.apply_renew(tasks.get(lease.task_id), lease, lease_ms, self._clock())
        tasks[lease.task_id] = renewed.record
        return renewed.lease

    async def release(self, lease: Lease) -> None:
        tasks = self._tasks
        released = rules.apply_release(tasks.get(lease.task_id), lease)
        if released is not None:
            tasks[lease.task_id] = released

    async def reap(self, *, limit: int = 500) -> int:
        tasks, now = self._tasks, self._clock()
        retention = self.options.terminal_retention_ms
        reapable = (i for i, r in tasks.items() if rules.is_reapable(r, now, retention))
        doomed = list(islice(reapable, limit))
        for task_id in doomed:
            del tasks[task_id]
        return len(doomed)

    async def close(self) -> None:
        self._closed = True


class MemoryStoreBackend:
    """Opens ``memory://`` (a fresh private store each time) and ``memory://NAME``: every
    store of one NAME in this process shares its tasks, like connections to one database,
    until the name is dropped."""

    def __init__(self) -> None:
        self._named: dict[str, MemoryBackend] = {}

    def open(self, url: str, options: StoreOptions | None = None, /) -> MemoryTaskStore:
        name = _name_of(url)
        if not name:
            return MemoryTaskStore(options)
        shared = self._named.setdefault(name, MemoryBackend(name=name))
        return MemoryTaskStore(options, backend=shared)

    def namespaced(self, url: str, namespace: str, /) -> str:
        _name_of(url)
        return f"memory://{namespace}"

    async def drop(self, url: str, /) -> None:
        name = _name_of(url)
        shared = self._named.pop(name, None)
        if shared is not None:
            shared.tasks.clear()


def _name_of(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme.lower() != "memory" or parts.path not in ("", "/") or parts.query:
        raise ValueError("A memory store URL looks like memory:// or memory://NAME")
    return parts.netloc


#: The ``memory`` entry point of the ``mcp_tasks.stores`` group.
backend = MemoryStoreBackend()
