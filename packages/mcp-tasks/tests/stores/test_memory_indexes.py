"""The memory store's indexes answer exactly as a look at every task would.

The backend keeps live and per-owner counts, a heap of deadlines, a claim queue and a
retention heap so that no operation scans the tasks. This stateful test drives two handles
of one backend, each on its own manual clock (one may lag behind the other, as two
processes' clocks may), through random operations, and after every step compares what the
indexes say with the pure rules applied to every stored task: the row cap's count, each
owner's active count, the task a claim without id takes, and what ``reap`` deletes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
)

from mcp_tasks import (
    ANY_OWNER,
    Claimed,
    Complete,
    Fail,
    Lease,
    ManualClock,
    MemoryBackend,
    MemoryTaskStore,
    NewTask,
    Progress,
    RequireInput,
    Retry,
    StoreOptions,
    TaskLimitReached,
    WorkSpec,
)
from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import MCPTasksError
from mcp_tasks.stores import memory

if TYPE_CHECKING:
    from collections.abc import Coroutine

T = TypeVar("T")

OPTIONS = StoreOptions(
    max_rows=6, max_active_per_owner=3, terminal_retention_ms=40, result_retention_ms=15
)
OWNERS = ("alice", None)
ELICIT = {"method": "elicitation/create", "params": {"message": "?"}}
changes = st.one_of(
    st.builds(Progress, st.just("p")),
    st.builds(Complete, st.just({"v": 1})),
    st.builds(Fail, st.just({"code": 1, "message": "boom"})),
    st.builds(Retry, st.just({"code": 1, "message": "boom"})),
    st.sampled_from(["a", "b", "c"]).map(lambda key: RequireInput({key: ELICIT})),
)


class IndexesVersusScan(RuleBasedStateMachine):
    tasks = Bundle("tasks")
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.backend = MemoryBackend()
        self.clocks = (ManualClock(), ManualClock())
        self.stores = tuple(
            MemoryTaskStore(OPTIONS, clock=clock, backend=self.backend) for clock in self.clocks
        )
        self.created = 0

    def teardown(self) -> None:
        self.loop.close()

    def run(self, call: Coroutine[Any, Any, T]) -> T | MCPTasksError:
        try:
            return self.loop.run_until_complete(call)
        except MCPTasksError as error:
            return error

    # --- operations, on either handle ------------------------------------------------------

    @rule(
        target=tasks,
        on=st.sampled_from([0, 1]),
        owner=st.sampled_from(OWNERS),
        ttl_ms=st.sampled_from([None, 5, 30, 200]),
        work=st.sampled_from([None, (), (0,), (25,)]),
        kind=st.sampled_from(["a", "b"]),
    )
    def create(self, on: int, owner: str | None, ttl_ms: int | None, work: Any, kind: str) -> str:
        self.created += 1
        task_id = f"t{self.created:03d}"
        spec = None if work is None else WorkSpec(kind, retry_delays_ms=work)
        self.run(self.stores[on].create(NewTask(task_id, owner=owner, ttl_ms=ttl_ms, work=spec)))
        return task_id

    @rule(on=st.sampled_from([0, 1]), task_id=tasks, change=changes)
    def put_unleased(self, on: int, task_id: str, change: Any) -> None:
        self.run(self.stores[on].put_status(task_id, change))

    @rule(on=st.sampled_from([0, 1]), lease=leases, change=changes)
    def put_leased(self, on: int, lease: Lease, change: Any) -> None:
        self.run(self.stores[on].put_status(lease.task_id, change, lease=lease))

    @rule(on=st.sampled_from([0, 1]), task_id=tasks)
    def cancel(self, on: int, task_id: str) -> None:
        self.run(self.stores[on].cancel(task_id, ANY_OWNER))

    @rule(on=st.sampled_from([0, 1]), task_id=tasks, key=st.sampled_from(["a", "b", "c"]))
    def answer(self, on: int, task_id: str, key: str) -> None:
        self.run(self.stores[on].update(task_id, ANY_OWNER, {key: 1}))

    @rule(
        target=leases,
        on=st.sampled_from([0, 1]),
        lease_ms=st.sampled_from([10, 100]),
        work_types=st.sampled_from(
            [None, frozenset(), frozenset("a"), frozenset("b"), frozenset("ab")]
        ),
    )
    def claim_next(self, on: int, lease_ms: int, work_types: frozenset[str] | None) -> Any:
        store, now = self.stores[on], self.clocks[on]()
        want = min(
            (
                r
                for r in self.backend.tasks.values()
                if rules.claimable(r, now) and rules.of_work_types(r, work_types)
            ),
            key=rules.claim_order,
            default=None,
        )
        got = self.run(store.claim("w", lease_ms=lease_ms, work_types=work_types))
        if want is None:
            assert got is None
            return multiple()
        assert isinstance(got, Claimed)
        assert got.record.task_id == want.task_id
        return got.lease

    @rule(target=leases, on=st.sampled_from([0, 1]), task_id=tasks)
    def claim_by_id(self, on: int, task_id: str) -> Any:
        got = self.run(self.stores[on].claim("w", lease_ms=50, task_id=task_id))
        return got.lease if isinstance(got, Claimed) else multiple()

    @rule(on=st.sampled_from([0, 1]), lease=leases)
    def renew(self, on: int, lease: Lease) -> None:
        self.run(self.stores[on].renew(lease, lease_ms=60))

    @rule(on=st.sampled_from([0, 1]), lease=leases)
    def release(self, on: int, lease: Lease) -> None:
        self.run(self.stores[on].release(lease))

    @rule(on=st.sampled_from([0, 1]), limit=st.integers(1, 4))
    def reap(self, on: int, limit: int) -> None:
        now = self.clocks[on]()
        retention = OPTIONS.terminal_retention_ms
        before = dict(self.backend.tasks)
        reapable = {i for i, r in before.items() if rules.is_reapable(r, now, retention)}
        reaped = self.run(self.stores[on].reap(limit=limit))
        assert reaped == min(limit, len(reapable))
        gone = before.keys() - self.backend.tasks.keys()
        assert len(gone) == reaped
        assert gone <= reapable

    @rule(on=st.sampled_from([0, 1]), ms=st.sampled_from([0, 1, 5, 10, 30, 60]))
    def advance(self, on: int, ms: int) -> None:
        self.clocks[on].advance(ms)

    @precondition(lambda self: self.clocks[0]() != self.clocks[1]())
    @rule()
    def catch_up(self) -> None:
        """The lagging clock joins the other (sometimes it stays behind for a while)."""
        behind = min(self.clocks, key=lambda clock: clock())
        behind.advance(max(c() for c in self.clocks) - behind())

    # --- what the indexes say, next to the rules over every task ---------------------------

    @invariant()
    def counts_agree(self) -> None:
        for clock in sorted(self.clocks, key=lambda c: -c()):  # the later clock first
            now = clock()
            records = list(self.backend.tasks.values())
            live = sum(1 for r in records if rules.counts_toward_cap(r, now))
            assert self.backend.live_rows(now) == live
            for owner in OWNERS:
                active = sum(1 for r in records if r.owner == owner and rules.is_active(r, now))
                assert self.backend.active_of(owner, now) == active

    @invariant()
    def caps_agree(self) -> None:
        """A create is refused exactly when a count of every task says it must be."""
        now = self.clocks[0]()
        records = self.backend.tasks.values()
        full = sum(1 for r in records if rules.counts_toward_cap(r, now)) >= 6
        owner_full = sum(1 for r in records if r.owner == "alice" and rules.is_active(r, now)) >= 3
        probe = NewTask(f"probe{self.created:03d}", owner="alice")
        got = self.run(self.stores[0].create(probe))
        assert isinstance(got, TaskLimitReached) == (full or owner_full)
        if not isinstance(got, MCPTasksError):
            self.backend.delete(probe.task_id)


class IndexesRebuiltOften(IndexesVersusScan):
    """The same with no slack for stale heap entries: the heaps are rebuilt as soon as
    stale entries outnumber live ones, so the rebuilds are checked too."""

    def __init__(self) -> None:
        self.slack, memory._STALE_SLACK = memory._STALE_SLACK, 0
        super().__init__()

    def teardown(self) -> None:
        memory._STALE_SLACK = self.slack
        super().teardown()


SETTINGS = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestIndexesVersusScan = IndexesVersusScan.TestCase
TestIndexesVersusScan.settings = SETTINGS
TestIndexesRebuiltOften = IndexesRebuiltOften.TestCase
TestIndexesRebuiltOften.settings = SETTINGS
