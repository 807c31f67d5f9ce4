"""The write rules and the status table agree, step by step, on random event sequences.

Each test drives writes through the rule functions of :mod:`mcp_tasks.domain.rules`,
starting from ``rules.new_record``: worker changes (``apply_put``), answers
(``apply_update``), cancels (``apply_cancel``), claims (``claimable``/``apply_claim``) and
renewals (``apply_renew``). The test names each write's event itself, from the write and
the record (it never asks the rules), and checks at every step that

* when the table has an entry for ``(status, event)``, the rule applied it and the new
  status is the table's (barring a check of something else: reused input keys, a lease
  that no longer holds);
* when it has none, the status did not move and the caller saw the rules' stated
  consequence: ``unchanged`` for a terminal task's put or cancel and for any answer,
  ``InvalidTransition`` for a live task's put, not claimable, ``StaleLease`` on renew;

and that the record still means what its status says (``input_required`` exactly while
requests are outstanding, a result exactly when ``completed``, an error exactly when
``failed``; while a task stays ``input_required``, a key leaves only by being answered).
Those checks do not read the table, so a wrong entry fails them even though the rules
follow the table faithfully; ``test_states.py`` pins every entry besides.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias

import pytest
from hypothesis import event as note_event
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import DuplicateInputKeys, InvalidTransition, StaleLease
from mcp_tasks.domain.models import (
    Claimed,
    Complete,
    Fail,
    Lease,
    NewTask,
    Outcome,
    Progress,
    RequireInput,
    Retry,
    StatusChange,
    TaskRecord,
    Transition,
    WorkSpec,
)
from mcp_tasks.domain.states import Event, TaskStatus, next_status

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue

W, Q, C, F, X = (
    TaskStatus.WORKING,
    TaskStatus.INPUT_REQUIRED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.CANCELLED,
)
START: Final = 1_000_000
LEASE_MS: Final = 10_000
RETENTION_MS: Final = 60_000
KEY_POOL: Final = ("a", "b", "c", "d")
REQUEST: Final[JSONObject] = {"method": "elicitation/create", "params": {"message": "?"}}


# --- the writes a step can make --------------------------------------------------------


@dataclass(frozen=True)
class Put:
    change: StatusChange


@dataclass(frozen=True)
class Answer:
    responses: dict[str, JSONValue]


@dataclass(frozen=True)
class Cancel:
    pass


@dataclass(frozen=True)
class Claim:
    pass


@dataclass(frozen=True)
class Renew:
    pass


Action: TypeAlias = Put | Answer | Cancel | Claim | Renew


@dataclass
class World:
    """One task as the rules left it, the store's clock, and the lease the worker holds."""

    record: TaskRecord
    now: int = START
    lease: Lease | None = None
    seen: list[tuple[TaskStatus, Event | None]] = field(default_factory=list)


def new_world(retry_delays_ms: tuple[int, ...] | None) -> World:
    """A fresh task (no TTL); ``None``: manual mode, no work, so never claimable."""
    work = None if retry_delays_ms is None else WorkSpec("job", retry_delays_ms=retry_delays_ms)
    return World(rules.new_record(NewTask("task-1", ttl_ms=None, work=work), START))


def event_of(record: TaskRecord, action: Action) -> Event | None:
    """The event ``action`` is on ``record``, worked out here; ``None``: no event at all."""
    match action:
        case Put(change=Progress()):
            return Event.PROGRESS
        case Put(change=RequireInput()):
            return Event.REQUIRE_INPUT
        case Put(change=Complete()):
            return Event.COMPLETE
        case Put(change=Fail()):
            return Event.FAIL
        case Put(change=Retry()):
            delays = record.work.retry_delays_ms if record.work is not None else ()
            return Event.RETRY if record.attempt < len(delays) else Event.FAIL
        case Answer(responses=responses):
            answered = responses.keys() & record.input_requests.keys()
            if not answered:
                return None
            if answered == record.input_requests.keys():
                return Event.ANSWER_ALL
            return Event.ANSWER_SOME
        case Cancel():
            return Event.CANCEL
        case Claim():
            return Event.CLAIM
        case Renew():
            return Event.RENEW
    raise AssertionError(action)  # pragma: no cover


def outcome_of(call: Callable[[], Transition | Claimed]) -> Transition | Claimed | Exception:
    try:
        return call()
    except (InvalidTransition, DuplicateInputKeys, StaleLease) as error:
        return error


def step(world: World, action: Action) -> None:
    """Apply ``action`` through the rules and check it against the table."""
    before = world.record
    world.now += 1
    event = event_of(before, action)
    target = None if event is None else next_status(before.status, event)
    terminal = all(next_status(before.status, e) is None for e in Event)
    world.seen.append((before.status, event))

    match action:
        case Put(change=change):
            lease = world.lease if before.live_claim(world.now) is not None else None
            result = outcome_of(
                lambda: rules.apply_put(
                    before, change, world.now, result_retention_ms=RETENTION_MS, lease=lease
                )
            )
            reused = isinstance(change, RequireInput) and bool(
                before.used_input_keys & change.requests.keys()
            )
            world.record = put_or_cancel(result, before, target, terminal, reused=reused)
        case Cancel():
            result = outcome_of(
                lambda: rules.apply_cancel(
                    before, None, world.now, result_retention_ms=RETENTION_MS
                )
            )
            world.record = put_or_cancel(result, before, target, terminal)
        case Answer(responses=responses):
            result = outcome_of(lambda: rules.apply_update(before, None, responses, world.now))
            if target is None:  # no event, or an answer the table does not allow: ignored
                assert result == Transition(before, Outcome.UNCHANGED, before.revision)
            else:
                world.record = applied(result, before, target)
        case Claim():
            # Make everything but the status eligible: the retry is due, any claim ran out.
            claim_end = before.claim.expires_at if before.claim is not None else 0
            world.now = max(world.now, before.retry_at or 0, claim_end)
            eligible = rules.claimable(before, world.now)
            assert eligible is (target is not None and before.work is not None), event
            if eligible:
                claimed = rules.apply_claim(before, "worker", LEASE_MS, world.now)
                assert claimed.record.status is target
                assert claimed.record.revision == before.revision
                world.record, world.lease = claimed.record, claimed.lease
        case Renew():
            lease = world.lease or Lease(before.task_id, "worker", "forged", 0, 0)
            live = before.live_claim(world.now)
            holds = (
                live is not None
                and live.token == lease.token
                and before.generation == lease.generation
            )
            result = outcome_of(lambda: rules.apply_renew(before, lease, LEASE_MS, world.now))
            if target is None or not holds:
                assert isinstance(result, StaleLease), result
            else:
                assert isinstance(result, Claimed), result
                assert result.record.status is target
                assert result.record.revision == before.revision
                world.record, world.lease = result.record, result.lease
    check_coherent(world.record)
    check_step(before, world.record)


def put_or_cancel(
    result: Transition | Claimed | Exception,
    before: TaskRecord,
    target: TaskStatus | None,
    terminal: bool,
    *,
    reused: bool = False,
) -> TaskRecord:
    """No entry: a terminal task ignores the write, a live one refuses it. An entry: applied,
    unless the change asks again for an input key used before."""
    if target is None:
        if terminal:
            assert result == Transition(before, Outcome.UNCHANGED, before.revision)
        else:
            assert isinstance(result, InvalidTransition), result
        return before
    if reused:
        assert isinstance(result, DuplicateInputKeys), result
        return before
    return applied(result, before, target)


def applied(
    result: Transition | Claimed | Exception, before: TaskRecord, target: TaskStatus
) -> TaskRecord:
    """The table's entry was applied: one write, landing on the table's status."""
    assert isinstance(result, Transition), result
    assert result.outcome is Outcome.APPLIED
    assert result.record.status is target
    assert result.record.revision == before.revision + 1
    return result.record


def check_coherent(record: TaskRecord) -> None:
    """What each status means on the record, stated without the table."""
    assert (record.status is Q) == bool(record.input_requests), record
    assert (record.status is C) == (record.result is not None), record
    assert (record.status is F) == (record.error is not None), record


def check_step(before: TaskRecord, after: TaskRecord) -> None:
    """What a step may do to outstanding input, stated without the table: while a task
    stays input_required, a key leaves ``input_requests`` only by being answered."""
    if before.status is Q and after.status is Q:
        gone = before.input_requests.keys() - after.input_requests.keys()
        assert after.input_requests.keys() <= before.input_requests.keys(), after
        assert gone <= after.input_responses.keys() - before.input_responses.keys(), after


# --- random sequences ------------------------------------------------------------------

# Weighted towards the writes that keep a task live, so sequences spend most steps there.
KINDS: Final = (
    *("progress",) * 2,
    *("require_input",) * 3,
    *("answer",) * 4,
    *("retry",) * 2,
    *("claim",) * 2,
    *("renew",) * 2,
    "complete",
    "fail",
    "cancel",
)
messages = st.none() | st.text(max_size=8)
int64s = st.integers(-(2**63), 2**63 - 1)
json_values = st.none() | st.booleans() | int64s | st.text(max_size=8)


def draw_action(data: st.DataObject, world: World) -> Action:
    record = world.record
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    if kind == "progress":
        return Put(Progress(data.draw(st.text(max_size=8))))
    if kind == "require_input":
        # Keys from a small pool (fresh at first, reused later) and brand-new ones.
        keys = data.draw(st.lists(st.sampled_from(KEY_POOL), max_size=2, unique=True))
        fresh = data.draw(st.integers(0, 2))
        keys += [f"k{world.now}-{i}" for i in range(fresh if keys else max(fresh, 1))]
        return Put(RequireInput(dict.fromkeys(keys, REQUEST), data.draw(messages)))
    if kind == "answer":
        outstanding = sorted(record.input_requests)
        how = data.draw(st.sampled_from(("all", "some", "none")))
        if how == "all" or not outstanding:
            keys = outstanding if how == "all" else []
        elif how == "some":
            keys = data.draw(st.lists(st.sampled_from(outstanding), min_size=1, unique=True))
        else:
            keys = []
        # Keys that are not outstanding: answered before, never asked, or not yet asked.
        keys += data.draw(st.lists(st.sampled_from((*KEY_POOL, "never")), max_size=2))
        return Answer({key: data.draw(json_values) for key in keys})
    if kind == "complete":
        return Put(Complete({"content": [], "n": data.draw(int64s)}, data.draw(messages)))
    if kind == "fail":
        return Put(Fail({"code": -1, "message": data.draw(st.text())}, data.draw(messages)))
    if kind == "retry":
        return Put(Retry({"code": -2, "message": "again"}, data.draw(messages)))
    return {"cancel": Cancel(), "claim": Claim(), "renew": Renew()}[kind]


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    retry_delays_ms=st.none() | st.lists(st.integers(0, 50), max_size=4).map(tuple),
    length=st.integers(1, 30),
)
def test_random_writes_follow_the_table(
    data: st.DataObject, retry_delays_ms: tuple[int, ...] | None, length: int
) -> None:
    """Random sequences of worker writes, answers, cancels, claims and renewals: each step
    does what the table says for its (status, event), and nothing when it has no entry."""
    world = new_world(retry_delays_ms)
    check_coherent(world.record)
    for _ in range(length):
        step(world, draw_action(data, world))
        status, event = world.seen[-1]
        note_event(f"{status} x {event}")


# --- every (status, event) pair, deterministically ---------------------------------------

PATHS: Final[dict[TaskStatus, tuple[Action, ...]]] = {
    W: (),
    Q: (Put(RequireInput({"a": REQUEST, "b": REQUEST})),),
    C: (Put(Complete({"content": []})),),
    F: (Put(Fail({"code": 1, "message": "no"})),),
    X: (Cancel(),),
}
ACTIONS: Final[tuple[tuple[str, Action], ...]] = (
    ("progress", Put(Progress("p"))),
    ("input, fresh key", Put(RequireInput({"n": REQUEST}))),
    ("input, reused key", Put(RequireInput({"a": REQUEST}))),
    ("complete", Put(Complete({"content": []}))),
    ("fail", Put(Fail({"code": 1, "message": "no"}))),
    ("retry", Put(Retry({"code": 2, "message": "again"}))),
    ("answer some", Answer({"a": 1, "never": 2})),
    ("answer all", Answer({"a": 1, "b": 2})),
    ("answer none", Answer({"never": 1})),
    ("cancel", Cancel()),
    ("claim", Claim()),
    ("renew", Renew()),
)


def world_in(status: TaskStatus, retry_delays_ms: tuple[int, ...]) -> World:
    """A claimed task driven to ``status`` through the rules (input key "a" is used in Q)."""
    world = new_world(retry_delays_ms)
    step(world, Claim())
    for action in PATHS[status]:
        step(world, action)
    assert world.record.status is status
    return world


def exercise(status: TaskStatus) -> set[tuple[TaskStatus, Event | None]]:
    seen: set[tuple[TaskStatus, Event | None]] = set()
    for (_, action), retries in itertools.product(ACTIONS, [(5,), ()]):
        world = world_in(status, retries)
        del world.seen[:]
        step(world, action)
        seen.update(world.seen)
    return seen


@pytest.mark.parametrize("status", list(TaskStatus))
def test_every_write_from_every_status_follows_the_table(status: TaskStatus) -> None:
    """Each kind of write (a retry with and without a delay left) from a task in
    ``status``: applied as the table says, or the stated consequence of no entry."""
    exercise(status)


def test_the_deterministic_walk_meets_every_pair_that_can_occur() -> None:
    """Every (status, event) pair is exercised, except answers outside input_required:
    with nothing outstanding an answer is no event at all."""
    seen = set().union(*(exercise(status) for status in TaskStatus))
    answers = {Event.ANSWER_SOME, Event.ANSWER_ALL}
    possible = {
        (status, event)
        for status, event in itertools.product(TaskStatus, Event)
        if status is Q or event not in answers
    }
    assert {pair for pair in seen if pair[1] is not None} == possible
