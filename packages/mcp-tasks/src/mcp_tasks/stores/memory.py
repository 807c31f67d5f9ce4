"""The in-memory Store: the reference implementation of the contract and a test double.

Not durable and not shared between processes. Several :class:`MemoryTaskStore` handles
may share one :class:`MemoryBackend`, the way several connections share one database.
Each operation runs without awaiting between its read and its write, so on one event
loop every operation is atomic.

The backend keeps indexes beside its tasks, so that no operation looks at every task: the
row cap and the per-owner cap read counts kept up to date on every write, expiry moves
tasks out of those counts through a heap of deadlines, ``claim`` takes the oldest eligible
task from a queue ordered as :func:`rules.claim_order`, and ``reap`` takes what expired and
what finished longest ago. The decisions stay the pure rules': the indexes only pick which
records to hand them.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Self
from urllib.parse import urlsplit

from mcp_tasks.domain import rules
from mcp_tasks.domain.clock import Clock, system_clock
from mcp_tasks.domain.errors import DuplicateTaskId, OwnerTaskLimitReached, TaskLimitReached
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
from mcp_tasks.domain.rules import ClaimLane
from mcp_tasks.stores.kit import CloseGuard
from mcp_tasks.stores.location import StoreLocation
from mcp_tasks.stores.stats import StoreCounts, StoreStats, count, tally

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from contextlib import AbstractContextManager

    from mcp_tasks.domain.rules import OwnerArg
    from mcp_tasks.stores.abilities import Rewrite

#: Stale heap entries tolerated beyond one per indexed task before a heap is rebuilt.
_STALE_SLACK = 64


@dataclass
class MemoryBackend:
    """The state several store handles share: the "server" of the memory store.

    ``tasks`` is for reading; the store writes through :meth:`put` and :meth:`delete`,
    which keep the indexes beside it. The indexes keep time as the latest "now" any
    operation brought (the horizon); an operation whose clock reads earlier (a handle with
    a clock behind the others') looks at every task instead, as the rules would."""

    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    name: str | None = None
    """The namespace in ``memory://NAME`` that every store of that URL shares."""

    def __post_init__(self) -> None:
        given, self.tasks = self.tasks, {}
        self._reset()
        for record in given.values():
            self.put(record)

    def _reset(self) -> None:
        self._horizon = 0
        # Ids expired by the horizon: not live for the row cap, not active for an owner.
        self._expired: set[str] = set()
        # Per owner, the tasks neither terminal nor expired by the horizon.
        self._active: Counter[str | None] = Counter()
        # (expires_at, id) of every task with a TTL not expired by the horizon; an entry
        # whose time is no longer its task's is stale and skipped (a lease moved it later).
        self._deadlines: list[tuple[int, str]] = []
        # (last_updated_at, id) of terminal tasks without TTL: the retention's candidates.
        self._finished: list[tuple[int, str]] = []
        # Every task a claim may take, by where it waits; a heap entry that is not its
        # task's entry here is stale and skipped.
        self._queued: dict[str, tuple[ClaimLane, int]] = {}
        # Per work type (S-CLAIM.4), (created_at, id): rules.claim_order.
        self._ready: dict[str, list[tuple[int, str]]] = {}
        self._waiting: list[tuple[int, str]] = []  # (until, id)

    def put(self, record: TaskRecord) -> None:
        """Store ``record``, new or in place of the task of its id."""
        old = self.tasks.get(record.task_id)
        self.tasks[record.task_id] = record
        self._refile(record.task_id, old, record)

    def delete(self, task_id: str) -> None:
        self._refile(task_id, self.tasks.pop(task_id), None)

    def clear(self) -> None:
        self.tasks.clear()
        self._reset()

    def _refile(self, task_id: str, old: TaskRecord | None, new: TaskRecord | None) -> None:
        """Move one task's entries in the indexes from ``old`` to ``new`` (``None``: absent)."""
        was_expired = task_id in self._expired
        if old is not None:
            if was_expired:
                self._expired.discard(task_id)
            elif not old.status.is_terminal:
                self._deactivate(old.owner)
        if new is not None:
            expires_at = new.expires_at
            if expires_at is not None and expires_at <= self._horizon:
                self._expired.add(task_id)
            else:
                if not new.status.is_terminal:
                    self._active[new.owner] += 1
                if expires_at is not None and (old is None or old.expires_at != expires_at):
                    heapq.heappush(self._deadlines, (expires_at, task_id))
            if _retained(new) and not (
                old is not None and _retained(old) and old.last_updated_at == new.last_updated_at
            ):
                heapq.heappush(self._finished, (new.last_updated_at, task_id))
        entry = None if new is None else rules.claim_lane(new)
        if entry is None or new is None:
            self._queued.pop(task_id, None)
        elif self._queued.get(task_id) != entry:
            self._queued[task_id] = entry
            if entry[0] is ClaimLane.READY:
                heapq.heappush(self._ready_of(new), (entry[1], task_id))
            else:
                heapq.heappush(self._waiting, (entry[1], task_id))
        self._compact()

    def _ready_of(self, record: TaskRecord) -> list[tuple[int, str]]:
        """The ready heap of ``record``'s work type (a queued task has work)."""
        assert record.work is not None
        return self._ready.setdefault(record.work.type, [])

    def _deactivate(self, owner: str | None) -> None:
        self._active[owner] -= 1
        if not self._active[owner]:
            del self._active[owner]

    def _compact(self) -> None:
        """Rebuild a heap that stale entries have made more than twice what it indexes
        (each renewal leaves one): amortised, a write still costs O(log n)."""
        if len(self._deadlines) > 2 * len(self.tasks) + _STALE_SLACK:
            self._deadlines = [
                (r.expires_at, i)
                for i, r in self.tasks.items()
                if r.expires_at is not None and i not in self._expired
            ]
            heapq.heapify(self._deadlines)
        ready = sum(len(heap) for heap in self._ready.values())
        if ready + len(self._waiting) > 2 * len(self._queued) + _STALE_SLACK:
            queued = self._queued.items()
            self._ready = {}
            for task_id, (where, at) in queued:
                if where is ClaimLane.READY:
                    self._ready_of(self.tasks[task_id]).append((at, task_id))
            self._waiting = [(at, i) for i, (where, at) in queued if where is ClaimLane.WAITING]
            for heap in self._ready.values():
                heapq.heapify(heap)
            heapq.heapify(self._waiting)

    def _advance(self, now: int) -> bool:
        """Bring the indexes to ``now``: tasks whose deadline passed leave the live counts.
        False when ``now`` is before the horizon: the indexes cannot go back in time, and
        the caller looks at every task instead."""
        if now < self._horizon:
            return False
        self._horizon = now
        deadlines, tasks = self._deadlines, self.tasks
        while deadlines and deadlines[0][0] <= now:
            expires_at, task_id = heapq.heappop(deadlines)
            record = tasks.get(task_id)
            if record is None or record.expires_at != expires_at or task_id in self._expired:
                continue
            self._expired.add(task_id)
            if not record.status.is_terminal:
                self._deactivate(record.owner)
        return True

    def live_rows(self, now: int) -> int:
        """The tasks the row cap counts at ``now`` (rules.counts_toward_cap)."""
        if self._advance(now):
            return len(self.tasks) - len(self._expired)
        return sum(1 for r in self.tasks.values() if rules.counts_toward_cap(r, now))

    def active_of(self, owner: str | None, now: int) -> int:
        """One owner's tasks the per-owner cap counts at ``now`` (rules.is_active)."""
        if self._advance(now):
            return self._active[owner]
        return sum(1 for r in self.tasks.values() if r.owner == owner and rules.is_active(r, now))

    def next_claimable(self, now: int, work_types: rules.WorkTypes = None) -> TaskRecord | None:
        """The oldest task rules.claimable allows at ``now`` (rules.claim_order) of one of
        ``work_types`` (``None``: any), or None. Each work type has its own ready heap: a
        claim looks at the heads of its types' heaps only."""
        tasks = self.tasks
        if not self._advance(now):
            eligible = (
                r
                for r in tasks.values()
                if rules.claimable(r, now) and rules.of_work_types(r, work_types)
            )
            return min(eligible, key=rules.claim_order, default=None)
        waiting, queued = self._waiting, self._queued
        while waiting and waiting[0][0] <= now:  # due: retry time or claim end passed
            until, task_id = heapq.heappop(waiting)
            if queued.get(task_id) == (ClaimLane.WAITING, until):
                record = tasks[task_id]
                queued[task_id] = (ClaimLane.READY, record.created_at)
                heapq.heappush(self._ready_of(record), (record.created_at, task_id))
        types = self._ready.keys() if work_types is None else work_types & self._ready.keys()
        heads = (self._head(self._ready[t], now) for t in types)
        return min((r for r in heads if r is not None), key=rules.claim_order, default=None)

    def _head(self, ready: list[tuple[int, str]], now: int) -> TaskRecord | None:
        """The oldest claimable task of one ready heap, stale and expired entries dropped."""
        tasks, queued = self.tasks, self._queued
        while ready:
            created_at, task_id = ready[0]
            if queued.get(task_id) != (ClaimLane.READY, created_at):
                heapq.heappop(ready)
                continue
            record = tasks[task_id]
            if rules.claimable(record, now):
                return record  # left queued: the claim's write refiles it
            # Only expiry keeps a ready task from a claim (it became ready when its time
            # had passed, and the horizon never goes back): no claim takes it again unless
            # a write revives it, and a write files it again.
            heapq.heappop(ready)
            del queued[task_id]
        return None

    def reap(self, now: int, terminal_retention_ms: int, limit: int) -> int:
        """Delete up to ``limit`` tasks rules.is_reapable lets go at ``now`` (the expired
        ones first, then the finished ones without TTL, longest finished first)."""
        doomed = list(islice(self._reapable(now, terminal_retention_ms), limit))
        for task_id in doomed:  # taken before any is deleted
            self.delete(task_id)
        return len(doomed)

    def _reapable(self, now: int, terminal_retention_ms: int) -> Iterator[str]:
        if not self._advance(now):
            yield from (
                i for i, r in self.tasks.items() if rules.is_reapable(r, now, terminal_retention_ms)
            )
            return
        yield from self._expired
        # Each entry taken off this heap is yielded only for a task reap then deletes.
        finished, tasks = self._finished, self.tasks
        while finished and finished[0][0] + terminal_retention_ms <= now:
            updated_at, task_id = heapq.heappop(finished)
            record = tasks.get(task_id)
            if record is not None and _retained(record) and record.last_updated_at == updated_at:
                yield task_id


def _retained(record: TaskRecord) -> bool:
    """Terminal without TTL: reaped by the terminal retention (rules.is_reapable)."""
    return record.ttl_ms is None and record.status.is_terminal


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
        self._guard = CloseGuard()

    def __repr__(self) -> str:
        return f"MemoryTaskStore(url={self.url!r}, max_rows={self.options.max_rows})"

    @property
    def url(self) -> str:
        """``memory://NAME`` for a named (shared) backend; ``memory://`` for a private one."""
        return f"memory://{self._backend.name or ''}"

    @property
    def location(self) -> StoreLocation:
        """Where the store is: ``memory://NAME`` (the name its namespace), or ``memory://``."""
        return StoreLocation(url=self.url, scheme="memory", namespace=self._backend.name)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def _open_backend(self) -> MemoryBackend:
        self._guard.check()
        return self._backend

    async def create(self, task: NewTask) -> TaskRecord:
        backend, now = self._open_backend, self._clock()
        if task.task_id in backend.tasks:
            raise DuplicateTaskId
        self._check_caps(backend, task.owner, now)
        record = rules.new_record(task, now)
        backend.put(record)
        return record

    def _check_caps(self, backend: MemoryBackend, owner: str | None, now: int) -> None:
        cap = self.options.max_rows
        if cap is not None and len(backend.tasks) >= cap and backend.live_rows(now) >= cap:
            raise TaskLimitReached
        per_owner = self.options.owner_cap(owner)
        if per_owner is not None and backend.active_of(owner, now) >= per_owner:
            raise OwnerTaskLimitReached

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        return rules.visible(self._open_backend.tasks.get(task_id), owner, self._clock())

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        backend = self._open_backend
        transition = rules.apply_update(
            backend.tasks.get(task_id), owner, input_responses, self._clock()
        )
        return self._save(backend, transition)

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        backend = self._open_backend
        transition = rules.apply_cancel(
            backend.tasks.get(task_id),
            owner,
            self._clock(),
            result_retention_ms=self.options.result_retention_ms,
        )
        return self._save(backend, transition)

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        backend = self._open_backend
        transition = rules.apply_put(
            backend.tasks.get(task_id),
            change,
            self._clock(),
            result_retention_ms=self.options.result_retention_ms,
            lease=lease,
            expected_revision=expected_revision,
            event_id=event_id,
        )
        return self._save(backend, transition)

    @staticmethod
    def _save(backend: MemoryBackend, transition: Transition) -> Transition:
        if transition.outcome is Outcome.APPLIED:
            backend.put(transition.record)
        return transition

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: rules.WorkTypes = None,
    ) -> Claimed | None:
        backend, now = self._open_backend, self._clock()
        if task_id is not None:
            record = backend.tasks.get(task_id)
            candidate = (
                record
                if record is not None
                and rules.claimable(record, now)
                and rules.of_work_types(record, work_types)
                else None
            )
        else:
            candidate = backend.next_claimable(now, work_types)
        if candidate is None:
            return None
        claimed = rules.apply_claim(candidate, worker_id, lease_ms, now)
        backend.put(claimed.record)
        return claimed

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        backend = self._open_backend
        record = backend.tasks.get(lease.task_id)
        renewed = rules.apply_renew(record, lease, lease_ms, self._clock())
        backend.put(renewed.record)
        return renewed.lease

    async def release(self, lease: Lease) -> None:
        backend = self._open_backend
        released = rules.apply_release(backend.tasks.get(lease.task_id), lease)
        if released is not None:
            backend.put(released)

    async def reap(self, *, limit: int = 500) -> int:
        backend = self._open_backend
        return backend.reap(self._clock(), self.options.terminal_retention_ms, limit)

    async def rewrite_after(self, after: str | None, rewrite: Rewrite) -> str | None:
        """The next task by id rewritten in place (``Rewrites``; no await between the read
        and the write, so nothing can come between them)."""
        backend = self._open_backend
        following = [task_id for task_id in backend.tasks if after is None or task_id > after]
        if not following:
            return None
        task_id = min(following)
        record = backend.tasks[task_id]
        written = rules.rewritten(record, rewrite(record))
        if written is not None:
            backend.put(written)
        return task_id

    async def stats(self) -> StoreStats:
        """Aggregates of every task (``mcp-tasks stats``): one pass over the backend, which
        it leaves as it was (no index moves)."""
        backend = self._open_backend
        return tally(list(backend.tasks.values()), self._clock(), self.options)

    async def counts(self) -> StoreCounts:
        """Rows and unexpired tasks per status (the store gauges): one pass over the tasks
        in this process's memory, with no I/O; the memory store serves one process, so no
        other process reads it."""
        backend = self._open_backend
        return count(list(backend.tasks.values()), self._clock(), self.options)

    async def close(self) -> None:
        self._guard.close()


class MemoryStoreBackend:
    """Opens ``memory://`` (a fresh private store each time) and ``memory://NAME``: every
    store of one NAME in this process shares its tasks, like connections to one database,
    until the name is dropped. ``?timeout_ms=`` is accepted as on every store (memory
    never waits)."""

    def __init__(self) -> None:
        self._named: dict[str, MemoryBackend] = {}

    def locate(self, url: str, /) -> StoreLocation:
        location = StoreLocation.read(url)
        parts = urlsplit(url)
        if location.scheme != "memory" or parts.path not in ("", "/") or location.query:
            raise ValueError("A memory store URL looks like memory:// or memory://NAME")
        name = parts.netloc
        return dataclasses.replace(location, namespace=name or None, masked=f"memory://{name}")

    def open(self, location: StoreLocation, options: StoreOptions, /) -> MemoryTaskStore:
        name = location.namespace
        if not name:
            return MemoryTaskStore(options)
        shared = self._named.setdefault(name, MemoryBackend(name=name))
        return MemoryTaskStore(options, backend=shared)

    def namespaced(self, location: StoreLocation, namespace: str, /) -> StoreLocation:
        return self.locate(f"memory://{namespace}")

    async def drop(self, location: StoreLocation, /) -> None:
        shared = self._named.pop(location.namespace or "", None)
        if shared is not None:
            shared.clear()

    def test_server(self) -> AbstractContextManager[str]:
        """Tests' stores live in this process (:mod:`mcp_tasks.stores.provisioning`)."""
        return nullcontext("memory://")

    def test_store_url(self, server_url: str, /) -> str:
        return server_url


#: The ``memory`` entry point of the ``mcp_tasks.stores`` group.
backend = MemoryStoreBackend()
