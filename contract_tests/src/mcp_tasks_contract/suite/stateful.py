"""The stateful property test: random operation sequences on the store and on the model.

The model is the reference memory store. Every step runs the same operation on both and
compares the outcome (or the error's type) and the visible record; the invariants of the
contract are checked after every step. The machine is synchronous (Hypothesis drives it),
so it runs in a worker thread and calls back into the test's own event loop: handles are
opened and used on the loop the ``store`` fixture was set up on. TTLs and leases are long,
except for tasks made to expire: the machine waits until the store's clock is past their
expiry (and moves the model's manual clock past it), so outcomes never depend on timing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine
from hypothesis.reporting import default as default_reporter
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mcp_tasks import (
    ANY_OWNER,
    Claimed,
    Complete,
    DuplicateInputKeys,
    EventIdReused,
    Fail,
    InvalidTransition,
    Lease,
    ManualClock,
    MemoryTaskStore,
    NewTask,
    Outcome,
    Progress,
    RequireInput,
    Retry,
    RevisionConflict,
    StaleLease,
    StatusChange,
    Store,
    StoreOptions,
    TaskLimitReached,
    TaskNotFound,
    TaskRecord,
    Transition,
    WorkSpec,
    new_task_id,
)
from mcp_tasks.stores.encrypted import encrypting
from mcp_tasks_contract.handles import StoreHandles, new_namespace
from mcp_tasks_contract.suite.base import BOOM, ELICIT, LONG_LEASE_MS, ContractBase, outcome_of
from mcp_tasks_contract.verdicts import RuleBroken

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from mcp_tasks.domain.rules import OwnerArg

T = TypeVar("T")

OPTIONS = StoreOptions(max_rows=8, max_active_per_owner=4)
OWNERS: tuple[str | None, ...] = ("alice", None, "bob")
CALLERS: tuple[OwnerArg, ...] = ("alice", ANY_OWNER, None, "bob")
KEYS = ("a", "b", "c", "d")
STEPS = 30

works = (
    st.builds(
        WorkSpec,
        type=st.just("job"),
        input=st.integers(0, 3),
        retry_delays_ms=st.lists(st.sampled_from([0, 3_600_000]), max_size=2).map(tuple),
    )
    | st.none()
)
changes: st.SearchStrategy[StatusChange] = st.one_of(
    st.builds(
        RequireInput,
        st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True).map(
            lambda keys: {key: ELICIT for key in keys}
        ),
    ),
    st.builds(Progress, st.sampled_from(["p1", "p2"])),
    st.builds(Complete, st.fixed_dictionaries({"v": st.integers(0, 2)})),
    st.builds(Fail, st.just(BOOM)),
    st.builds(Retry, st.just(BOOM)),
)
event_ids = st.sampled_from(["e1", "e2", "e3"]) | st.none()
revision_offsets = st.none() | st.sampled_from([0, 0, -1, 1])
answers = st.dictionaries(
    st.sampled_from((*KEYS, "x")), st.integers(0, 3) | st.text(max_size=3), min_size=1, max_size=3
)


#: Each step of the machine: the Store operation it runs, and the rules its answer proves
#: (:func:`step_rules` narrows them by what the model answered).
STEP_OPERATIONS: dict[str, str] = {
    "seed": "create",
    "create": "create",
    "create_expired": "create, then its TTL runs out",
    "create_again": "create of an id already used",
    "get": "get as owner, stranger, anonymous and trusted caller",
    "update": "update",
    "answer": "update by the owner with outstanding keys",
    "cancel": "cancel",
    "put_by_id": "put_status without a lease",
    "put_leased": "put_status with the lease",
    "put_forged": "put_status with a forged lease",
    "claim_by_id": "claim of one task",
    "claim_next": "claim of the oldest eligible task",
    "renew": "renew",
    "release": "release",
    "release_forged": "release of a forged lease",
    "reap": "reap",
    "reopen_and_get": "close, open a new handle, get",
}
STEP_RULES: dict[str, tuple[str, ...]] = {
    "seed": ("S-CREATE.1",),
    "create": ("S-CREATE.1", "S-CREATE.2"),
    "create_expired": ("S-CREATE.1",),
    "create_again": ("S-CREATE.4",),
    "get": ("S-GET.1", "S-GET.2"),
    "update": ("S-UPDATE.1", "S-UPDATE.2"),
    "answer": ("S-UPDATE.3", "S-UPDATE.4"),
    "cancel": ("S-CANCEL.1", "S-CANCEL.2"),
    "put_by_id": ("S-PUT.1",),
    "put_leased": ("S-PUT.1",),
    "put_forged": ("S-PUT.1",),
    "claim_by_id": ("S-CLAIM.1", "S-CLAIM.2"),
    "claim_next": ("S-CLAIM.1",),
    "renew": ("S-RENEW",),
    "release": ("S-RELEASE",),
    "release_forged": ("S-RELEASE",),
    "reap": ("S-REAP",),
    "reopen_and_get": ("S-DURABLE",),
}
#: The put_status rule an error (or its absence) of the model's answer points at.
PUT_ERRORS: dict[type[Exception], str] = {
    StaleLease: "S-PUT.1",
    EventIdReused: "S-PUT.2",
    RevisionConflict: "S-PUT.3",
    InvalidTransition: "S-PUT.5",
    DuplicateInputKeys: "S-PUT.5",
}
#: What a terminal task's write must answer, by the machine's step.
TERMINAL_RULES: dict[str, str] = {"update": "S-UPDATE.2", "cancel": "S-CANCEL.2"}


def step_rules(
    step: str,
    before: object,
    got: object,
    want: object,
    change: StatusChange | None,
    *,
    expired: bool,
) -> tuple[str, ...]:
    """The rules a step's answer proves: the step's own, narrowed by the task before it
    (terminal, expired) and by the answers (a cap, a put_status error)."""
    if expired:
        return ("INV-EXPIRED",)
    answers = (want, got)
    if any(isinstance(a, TaskLimitReached) for a in answers):
        return ("S-CREATE.2", "INV-CAP")
    if isinstance(before, TaskRecord) and before.status.is_terminal:
        if step.startswith("put"):
            return ("S-PUT.4", "INV-TERMINAL")
        if step in TERMINAL_RULES:
            return (TERMINAL_RULES[step], "INV-TERMINAL")
    if step.startswith("put"):
        for answer in answers:
            if isinstance(answer, Exception) and type(answer) in PUT_ERRORS:
                return (PUT_ERRORS[type(answer)],)
            if isinstance(answer, Transition) and answer.outcome is Outcome.DUPLICATE:
                return ("S-PUT.2",)
        if isinstance(change, Retry):
            return ("S-PUT.6",)
        if isinstance(change, RequireInput):
            return ("S-PUT.5",)
    return STEP_RULES.get(step, ())


def view(record: TaskRecord) -> tuple[object, ...]:
    """What must agree between store and model: everything but times and tokens."""
    claim = record.claim
    return (
        record.task_id,
        record.owner,
        record.status,
        record.revision,
        record.ttl_ms,
        record.expires_at is None,
        record.poll_interval_ms,
        record.status_message,
        dict(record.input_requests),
        dict(record.input_responses),
        record.used_input_keys,
        record.result,
        record.error,
        record.work,
        record.attempt,
        record.retry_at is None,
        record.generation,
        None if claim is None else claim.worker_id,
        record.recent_events,
    )


def final_view(record: TaskRecord) -> tuple[object, ...]:
    """What a terminal task may never change again."""
    return (record.status, record.revision, record.result, record.error, record.status_message)


def assert_same(got: object, want: object) -> None:
    """The store under test answered as the model did."""
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert type(got) is type(want), f"store: {got!r}, model: {want!r}"
        if isinstance(got, RevisionConflict) and isinstance(want, RevisionConflict):
            assert view(got.current) == view(want.current)
        if isinstance(got, DuplicateInputKeys) and isinstance(want, DuplicateInputKeys):
            assert got.keys == want.keys
    elif isinstance(want, Transition):
        assert isinstance(got, Transition)
        assert (got.outcome, got.revision) == (want.outcome, want.revision)
        assert view(got.record) == view(want.record)
    elif isinstance(want, Claimed):
        assert isinstance(got, Claimed)
        assert view(got.record) == view(want.record)
        assert (got.lease.generation, got.lease.worker_id) == (
            want.lease.generation,
            want.lease.worker_id,
        )
    elif isinstance(want, TaskRecord):
        assert isinstance(got, TaskRecord)
        assert view(got) == view(want)
    elif isinstance(want, Lease):
        assert isinstance(got, Lease)
        assert (got.task_id, got.generation, got.worker_id) == (
            want.task_id,
            want.generation,
            want.worker_id,
        )
    else:
        assert got == want


def disagreement(got: object, want: object) -> str | None:
    """How the store's answer differs from the model's, or ``None``. (Returned, not raised:
    every divergence is then raised from one place, which Hypothesis takes for one failure
    and shrinks once.)"""
    try:
        assert_same(got, want)
    except AssertionError as diverged:
        return str(diverged)
    return None


@dataclass
class Session:
    """What every example of one stateful test shares."""

    handles: StoreHandles
    announce: Callable[[str], None]
    """Writes a line on the terminal at once, while the test runs."""
    shrink_s: int
    announced: bool = False


@dataclass
class Tracked:
    """What the machine knows of one task from the store's answers."""

    owner: str | None
    updated_at: int
    expired: bool = False
    applied: int = 0
    generation: int = 0
    final: tuple[object, ...] | None = None


@dataclass(frozen=True)
class LeasePair:
    """One claim as the store and as the model issued it (tokens differ)."""

    store: Lease
    model: Lease


class StoreVersusModel(RuleBasedStateMachine):
    """Random sequences of Store operations, each on the store under test and on the model."""

    session: ClassVar[Session]  # set by the test, on a subclass made per test

    tasks = Bundle("tasks")
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.namespace = new_namespace()
        self.store = self._open()
        self.model_clock = ManualClock()
        # Sealed as the store is (deterministically: equal values, equal ciphertexts), so
        # the digests and fingerprints the two keep of what they are given agree.
        self.model = encrypting(
            MemoryTaskStore(OPTIONS, clock=self.model_clock), self.session.handles.keys
        )
        self.known: dict[str, Tracked] = {}
        self.created = 0
        self.steps = 0
        self.last_step = "start"
        self.last_rules: tuple[str, ...] = ()
        with pytest.raises(TaskNotFound) as missing:
            self.run(self.store.get, new_task_id(), "alice")
        self.missing_text = str(missing.value)

    # --- plumbing ----------------------------------------------------------------------

    @staticmethod
    def run(call: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """Run a coroutine function on the test's event loop."""
        return anyio.from_thread.run(call, *args)

    def next_id(self) -> str:
        """Ids sort in creation order, as created_at does, so "the oldest eligible task" is
        the same on every replay of an example (Hypothesis needs examples to be repeatable)."""
        self.created += 1
        return f"task{self.created:04d}{self.namespace}"

    def _open(self) -> Store:
        return self.run(partial(self.session.handles.open, OPTIONS, namespace=self.namespace))

    def stored(self, task_id: str) -> TaskRecord | Exception:
        return self.run(outcome_of, partial(self.store.get, task_id, ANY_OWNER))

    def both(
        self,
        step: str,
        task_id: str | None,
        on_store: Callable[[Store], Awaitable[T]],
        on_model: Callable[[Store], Awaitable[T]] | None = None,
        *,
        change: StatusChange | None = None,
    ) -> tuple[T | Exception, T | Exception]:
        """Apply one operation to both; compare; on an error check that nothing was written.
        A disagreement names the step, the operation and the rules it breaks."""
        before = self.stored(task_id) if task_id is not None else None
        model_before = (
            self.run(outcome_of, partial(self.model.get, task_id, ANY_OWNER))
            if task_id is not None
            else None
        )
        expired = task_id is not None and task_id in self.known and self.known[task_id].expired
        got = self.run(outcome_of, partial(on_store, self.store))
        want = self.run(outcome_of, partial(on_model or on_store, self.model))
        self.last_step = step
        self.last_rules = step_rules(step, model_before, got, want, change, expired=expired)
        diverged = disagreement(got, want)
        if diverged is not None:
            self.broken(self.last_rules, f"the store answered unlike the model: {diverged}")
        if isinstance(got, Exception) and task_id is not None:
            after = self.stored(task_id)
            if isinstance(before, Exception):  # missing before, missing after
                same = (type(after), str(after)) == (type(before), str(before))
            else:
                same = after == before
            self.require(same, ("INV-NOPARTIAL",), f"{got!r} left a write behind: {after!r}")
        if isinstance(got, Transition) and got.outcome is Outcome.APPLIED:
            tracked = self.known[got.record.task_id]
            tracked.applied += 1
            self.require(
                got.record.last_updated_at > tracked.updated_at,
                ("INV-TIMES",),
                "an applied change did not move last_updated_at forward",
            )
            tracked.updated_at = got.record.last_updated_at
        return got, want

    def require(self, holds: bool, rules: tuple[str, ...], what: str) -> None:
        """A check of the contract: when it fails, the failure names ``rules``."""
        if not holds:
            self.broken(rules, what)

    def broken(self, rules: tuple[str, ...], what: str) -> NoReturn:
        """Fail naming the step, the operation, the rules and what went wrong; the first
        time in a test, say so at once (shrinking the example follows, bounded)."""
        step = STEP_OPERATIONS.get(self.last_step, self.last_step)
        message = (
            f"step {self.steps + 1} ({self.last_step}: {step}) breaks {', '.join(rules)}: {what}"
        )
        if not self.session.announced:
            self.session.announced = True
            self.session.announce(
                f"stateful test: {message.splitlines()[0]}\n    looking for the shortest "
                f"sequence that fails (at most {self.session.shrink_s} s)"
            )
        raise RuleBroken(rules, message)

    def expected_revision(self, task_id: str, offset: int | None) -> int | None:
        if offset is None:
            return None
        if self.known[task_id].expired:
            return offset  # any revision: the task answers as missing first
        return self.run(self.model.get, task_id, ANY_OWNER).revision + offset

    def teardown(self) -> None:
        self.run(self.store.close)

    # --- rules -------------------------------------------------------------------------

    # Hypothesis favours the first enabled rule in its order (no target, fewer arguments,
    # then name), so the rules are shaped to make that one the harmless, informative `get`,
    # and a few tasks with work exist from the first step.

    @initialize(target=tasks, owners=st.lists(st.sampled_from(OWNERS), min_size=2, max_size=4))
    def seed(self, owners: list[str | None]) -> object:
        created = []
        for owner in owners:
            task = NewTask(task_id=self.next_id(), owner=owner, work=WorkSpec(type="job"))
            got, _ = self.both("seed", None, lambda s: s.create(task))  # noqa: B023 - runs at once
            assert isinstance(got, TaskRecord)
            self.known[task.task_id] = Tracked(owner=owner, updated_at=got.last_updated_at)
            created.append(task.task_id)
        return multiple(*created)

    @rule(
        target=tasks,
        owner=st.sampled_from(OWNERS),
        work=works,
        ttl_ms=st.sampled_from([None, 3_600_000]),
    )
    def create(self, owner: str | None, work: WorkSpec | None, ttl_ms: int | None) -> object:
        task = NewTask(task_id=self.next_id(), owner=owner, ttl_ms=ttl_ms, work=work)
        got, _ = self.both("create", None, lambda s: s.create(task))
        if isinstance(got, Exception):
            assert isinstance(self.stored(task.task_id), TaskNotFound)
            return multiple()
        self.known[task.task_id] = Tracked(owner=owner, updated_at=got.last_updated_at)
        return task.task_id

    @rule(target=tasks, owner=st.sampled_from(OWNERS))
    def create_expired(self, owner: str | None) -> object:
        """A task that expires at once: the machine waits past its expiry on the store's
        clock and moves the model's past it too (INV-EXPIRED is checked from then on)."""
        task = NewTask(task_id=self.next_id(), owner=owner, ttl_ms=1, work=WorkSpec(type="job"))
        got, _ = self.both("create_expired", None, lambda s: s.create(task))
        if isinstance(got, Exception):
            return multiple()
        assert got.expires_at is not None
        self.run(self.session.handles.wait_past, got.expires_at)
        self.model_clock.advance(2)
        self.known[task.task_id] = Tracked(
            owner=owner, updated_at=got.last_updated_at, expired=True
        )
        return task.task_id

    @rule(task_id=tasks, owner=st.sampled_from(OWNERS))
    def create_again(self, task_id: str, owner: str | None) -> None:
        """Refused while the id exists (expired or not); a reaped id is free again."""
        got, _ = self.both(
            "create_again", task_id, lambda s: s.create(NewTask(task_id=task_id, owner=owner))
        )
        if isinstance(got, TaskRecord):
            self.known[task_id] = Tracked(owner=owner, updated_at=got.last_updated_at)

    @rule(task_id=tasks)
    def get(self, task_id: str) -> None:
        """Read as every kind of caller: owner, stranger, anonymous, trusted."""
        for caller in CALLERS:
            self.both("get", task_id, lambda s: s.get(task_id, caller))  # noqa: B023 - runs at once

    @rule(task_id=tasks, caller=st.sampled_from(CALLERS), responses=answers)
    def update(self, task_id: str, caller: OwnerArg, responses: dict[str, object]) -> None:
        self.both("update", task_id, lambda s: s.update(task_id, caller, responses))

    def waiting(self) -> list[TaskRecord]:
        """The model's tasks in input_required."""
        records = [
            self.run(self.model.get, task_id, ANY_OWNER)
            for task_id, tracked in self.known.items()
            if not tracked.expired
        ]
        return [r for r in records if r.input_requests]

    @precondition(lambda self: bool(self.waiting()))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        """A waiting task's owner answers some of its requests (random updates rarely hit)."""
        record = data.draw(st.sampled_from(self.waiting()))
        keys = data.draw(
            st.lists(st.sampled_from(sorted(record.input_requests)), min_size=1, unique=True)
        )
        responses: dict[str, object] = {key: f"answer {key}" for key in keys}
        self.both(
            "answer", record.task_id, lambda s: s.update(record.task_id, record.owner, responses)
        )

    @rule(task_id=tasks, caller=st.sampled_from(CALLERS))
    def cancel(self, task_id: str, caller: OwnerArg) -> None:
        self.both("cancel", task_id, lambda s: s.cancel(task_id, caller))

    @rule(task_id=tasks, change=changes, offset=revision_offsets, event_id=event_ids)
    def put_by_id(
        self, task_id: str, change: StatusChange, offset: int | None, event_id: str | None
    ) -> None:
        expected = self.expected_revision(task_id, offset)
        self.both(
            "put_by_id",
            task_id,
            lambda s: s.put_status(task_id, change, expected_revision=expected, event_id=event_id),
            change=change,
        )

    @rule(pair=leases, change=changes, offset=revision_offsets, event_id=event_ids)
    def put_leased(
        self, pair: LeasePair, change: StatusChange, offset: int | None, event_id: str | None
    ) -> None:
        task_id = pair.store.task_id
        expected = self.expected_revision(task_id, offset)

        def write(lease: Lease) -> Callable[[Store], Awaitable[Transition]]:
            return lambda s: s.put_status(
                task_id, change, lease=lease, expected_revision=expected, event_id=event_id
            )

        self.both("put_leased", task_id, write(pair.store), write(pair.model), change=change)

    @rule(pair=leases, change=changes)
    def put_forged(self, pair: LeasePair, change: StatusChange) -> None:
        task_id = pair.store.task_id
        forged = replace(pair.store, token="forged")
        self.both(
            "put_forged",
            task_id,
            lambda s: s.put_status(task_id, change, lease=forged),
            change=change,
        )

    @rule(target=leases, task_id=tasks, worker=st.sampled_from(["w1", "w2"]))
    def claim_by_id(self, task_id: str, worker: str) -> object:
        got, want = self.both(
            "claim_by_id",
            task_id,
            lambda s: s.claim(worker, lease_ms=LONG_LEASE_MS, task_id=task_id),
        )
        return self._claimed(got, want)

    @rule(target=leases, worker=st.sampled_from(["w1", "w2"]))
    def claim_next(self, worker: str) -> object:
        """The store picks the task; the model must find that very task eligible."""
        got = self.run(outcome_of, partial(self.store.claim, worker, lease_ms=LONG_LEASE_MS))
        task_id = got.record.task_id if isinstance(got, Claimed) else None
        want = self.run(
            outcome_of, partial(self.model.claim, worker, lease_ms=LONG_LEASE_MS, task_id=task_id)
        )
        self.last_step, self.last_rules = "claim_next", STEP_RULES["claim_next"]
        diverged = disagreement(got, want)
        if diverged is not None:
            self.broken(self.last_rules, f"the store claimed unlike the model: {diverged}")
        return self._claimed(got, want)

    def _claimed(self, got: object, want: object) -> object:
        """A new lease pair for the bundle; each claim is the task's next generation."""
        if not isinstance(got, Claimed):
            return multiple()
        assert isinstance(want, Claimed)
        tracked = self.known[got.record.task_id]
        self.require(
            got.lease.generation == tracked.generation + 1,
            ("INV-CLAIM", "S-CLAIM.2"),
            f"a claim at generation {got.lease.generation} after {tracked.generation}",
        )
        tracked.generation = got.lease.generation
        return LeasePair(got.lease, want.lease)

    @rule(pair=leases)
    def renew(self, pair: LeasePair) -> None:
        self.both(
            "renew",
            pair.store.task_id,
            lambda s: s.renew(pair.store, lease_ms=LONG_LEASE_MS),
            lambda s: s.renew(pair.model, lease_ms=LONG_LEASE_MS),
        )

    @rule(pair=leases)
    def release(self, pair: LeasePair) -> None:
        self.both(
            "release",
            pair.store.task_id,
            lambda s: s.release(pair.store),
            lambda s: s.release(pair.model),
        )

    @rule(pair=leases)
    def release_forged(self, pair: LeasePair) -> None:
        forged = replace(pair.store, token="forged")
        self.both("release_forged", pair.store.task_id, lambda s: s.release(forged))

    @rule(limit=st.integers(1, 500))
    def reap(self, limit: int) -> None:
        """Expired tasks go, as many on both; then the rest, so both keep the same ids."""
        self.both("reap", None, lambda s: s.reap(limit=limit))
        self.both("reap", None, lambda s: s.reap(limit=500))

    @rule(task_id=tasks)
    def reopen_and_get(self, task_id: str) -> None:
        """Close the handle, open a new one on the same namespace, read (S-DURABLE)."""
        self.run(self.store.close)
        self.store = self._open()
        self.both("reopen_and_get", task_id, lambda s: s.get(task_id, ANY_OWNER))

    # --- invariants --------------------------------------------------------------------

    def assert_missing(self, call: Callable[[], Awaitable[object]], what: str) -> None:
        """The call raises TaskNotFound with the very message of an unknown id."""
        got = self.run(outcome_of, call)
        self.require(
            isinstance(got, TaskNotFound) and str(got) == self.missing_text,
            ("INV-EXPIRED",),
            f"{what} of an expired task answered {got!r}, not as for a missing one",
        )

    def check_expired(self, task_id: str) -> None:
        """INV-EXPIRED: get, update, cancel and put_status answer as for a missing task (and
        write nothing), claim passes it over."""
        store = self.store
        self.assert_missing(partial(store.get, task_id, ANY_OWNER), "get")
        self.assert_missing(partial(store.update, task_id, ANY_OWNER, {"a": 1}), "update")
        self.assert_missing(partial(store.cancel, task_id, ANY_OWNER), "cancel")
        self.assert_missing(partial(store.put_status, task_id, Complete({"v": 0})), "put_status")
        claimed = self.run(partial(store.claim, "w9", lease_ms=LONG_LEASE_MS, task_id=task_id))
        self.require(claimed is None, ("INV-EXPIRED",), "claim took an expired task")

    @invariant()
    def store_agrees_with_model_and_invariants_hold(self) -> None:
        live = [task_id for task_id, tracked in self.known.items() if not tracked.expired]
        cap = OPTIONS.max_rows or len(live)
        self.require(len(live) <= cap, ("INV-CAP",), f"{len(live)} live tasks, cap {cap}")
        active: dict[str | None, int] = {}
        for task_id, tracked in self.known.items():
            if tracked.expired:
                self.check_expired(task_id)
                continue
            got = self.run(self.store.get, task_id, ANY_OWNER)
            want = self.run(self.model.get, task_id, ANY_OWNER)
            self.require(
                view(got) == view(want),
                self.last_rules,
                f"the stored record {view(got)} is not the model's {view(want)}",
            )
            self.require(
                got.revision == tracked.applied,
                ("INV-REVISION",),
                f"revision {got.revision} after {tracked.applied} applied changes",
            )
            self.require(
                got.created_at <= got.last_updated_at == tracked.updated_at,
                ("INV-TIMES",),
                "last_updated_at moved without an applied change, or before created_at",
            )
            self.require(
                got.generation == tracked.generation,
                ("INV-CLAIM",),
                f"generation {got.generation}, claims gave {tracked.generation}",
            )
            if tracked.final is not None:
                self.require(
                    final_view(got) == tracked.final,
                    ("INV-TERMINAL", "S-PUT.4"),
                    f"a terminal task changed: {tracked.final} became {final_view(got)}",
                )
            elif got.status.is_terminal:
                tracked.final = final_view(got)
            elif got.owner is not None:  # ownerless tasks are not held to the owner cap
                active[got.owner] = active.get(got.owner, 0) + 1
            if got.owner is not None:
                for stranger in ("mallory", None):
                    seen = self.run(outcome_of, partial(self.store.get, task_id, stranger))
                    self.require(
                        isinstance(seen, TaskNotFound) and str(seen) == self.missing_text,
                        ("INV-FOREIGN",),
                        f"another caller's get of an owned task answered {seen!r}",
                    )
        per_owner = OPTIONS.max_active_per_owner
        self.require(
            all(n <= (per_owner or n) for n in active.values()),
            ("INV-CAP",),
            f"active tasks per owner {active} exceed {per_owner}",
        )
        self.steps += 1


def run_machine(machine: type[StoreVersusModel], config: settings, shrink_s: int) -> None:
    """Run the state machine (in a worker thread). Hypothesis's note when it stops
    shrinking speaks of five minutes; the note printed is ours, with the real bound."""

    def report(value: object) -> None:
        if str(value).startswith("WARNING: Hypothesis has spent more than"):
            value = (
                f"The stateful test stopped shrinking after {shrink_s} s (stateful_shrink_s): "
                "the failing sequence is the shortest found by then."
            )
        default_reporter(value)

    with with_reporter(report):
        run_state_machine_as_test(machine, settings=config)


class StatefulContract(ContractBase):
    """The invariants, checked after every step of random operation sequences."""

    @pytest.mark.rule(
        "INV-REVISION",
        "INV-TERMINAL",
        "INV-CLAIM",
        "INV-FOREIGN",
        "INV-CAP",
        "INV-NOPARTIAL",
        "INV-TIMES",
        "INV-EXPIRED",
    )
    async def test_random_operations_agree_with_the_memory_model(
        self, handles: StoreHandles, request: pytest.FixtureRequest
    ) -> None:
        """Any sequence of create/get/update/cancel/put/claim/renew/release/reap/reopen gives
        the model's outcomes and records, and every invariant holds after every step."""
        examples = (
            request.config.getoption("contract_stateful_examples", None)
            or self.stateful_max_examples
        )
        assert examples > 0, "the stateful test never runs with zero examples"
        run = request.config.pluginmanager.get_plugin("mcp_tasks_contract_run")
        session = Session(
            handles, run.announce_now if run is not None else print, self.stateful_shrink_s
        )
        machine = type("StoreVersusModel", (StoreVersusModel,), {"session": session})
        config = settings(
            max_examples=examples,
            stateful_step_count=STEPS,
            deadline=None,
            # Not Phase.explain: it replays the failing example many times more (unbounded
            # by the shrink limit) only to list the lines that failing runs alone reached.
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        )
        # A failing example is shrunk (each try replays a sequence on the store) for at
        # most stateful_shrink_s, then the shortest found so far is reported. Hypothesis
        # documents this limit as the one to set (engine.MAX_SHRINKING_SECONDS).
        limit, engine.MAX_SHRINKING_SECONDS = engine.MAX_SHRINKING_SECONDS, self.stateful_shrink_s
        try:
            await anyio.to_thread.run_sync(
                partial(run_machine, machine, config, self.stateful_shrink_s)
            )
        finally:
            engine.MAX_SHRINKING_SECONDS = limit
