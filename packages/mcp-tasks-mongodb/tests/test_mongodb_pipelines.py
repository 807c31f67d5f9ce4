"""Each piece of :mod:`mcp_tasks_mongodb.pipelines` computes what the rule it restates
computes, on random task documents on a real server.

A batch of random records, each written as its task document (``document_of``), sits
around one ``now`` of the test's choosing (ahead of the real clock, so that the TTL
index's janitor leaves the documents alone): every instant a rule looks at is ``None``, on
``now``, one millisecond either side, or anywhere within an hour. The pieces take ``now``
as a number there (the leaf the store fills with ``$$NOW`` or the clock of ``hello``), so
records can sit exactly on the edges. Filters are run as finds, guards as an aggregation's
``$project``, and the write pipelines (claim, renew, release, the TTL hold, the lanes) as
an aggregation of the same stages over the stored documents, read back with
``record_of``: each must equal what the rule computes from the same record at the same
now. A batch is deleted afterwards, and every piece must have met both answers (selected
and not, written and not) over the run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

import anyio.from_thread
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import StaleLease
from mcp_tasks.domain.models import Claim, Lease, TaskRecord
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks_contract.records import (
    CLAIM_HOLDER,
    JOB,
    SPREAD_MS,
    TOKENS,
    near,
    task_records,
)
from mcp_tasks_mongodb import pipelines
from mcp_tasks_mongodb.codec import document_of, record_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import OpenStore
    from hypothesis.vendor.pretty import RepresentationPrinter
    from pymongo.asynchronous.collection import AsyncCollection

    from mcp_tasks_mongodb.codec import Document

pytestmark = pytest.mark.anyio

GRACE_MS: Final = 60_000
LEASE_MS: Final = 30_000
WORKER: Final = "w-new"
TOKEN: Final = "token-new"
VERSION: Final = "version-new"


@dataclass(frozen=True)
class Case:
    """Records, the lease each is renewed and released with, a ``now``, a retention, and
    an instant the TTL hold holds each record until."""

    now: int
    retention: int
    until: int
    records: tuple[TaskRecord, ...]
    leases: tuple[Lease, ...]

    def __repr__(self) -> str:
        # TaskRecord's repr hides its fields (it is made for logs); a failing case must not.
        rows = "".join(
            f"\n    {i}: {_describe(r, lease, self.now)},"
            for i, (r, lease) in enumerate(zip(self.records, self.leases, strict=True))
        )
        return (
            f"Case(now={self.now}, retention={self.retention},"
            f" until=now{self.until - self.now:+d}, records=[{rows}\n])"
        )

    def _repr_pretty_(self, printer: RepresentationPrinter, cycle: bool) -> None:
        printer.text(repr(self))  # how Hypothesis prints a falsifying example


def _describe(record: TaskRecord, lease: Lease, now: int) -> str:
    def at(value: int | None) -> str:
        return "None" if value is None else f"now{value - now:+d}"

    claim = record.claim
    held = "none" if claim is None else f"{claim.token}/{at(claim.expires_at)}"
    return (
        f"status={record.status.value} work={'yes' if record.work else 'no'}"
        f" owner={record.owner} generation={record.generation} claim={held}"
        f" retry_at={at(record.retry_at)} expires_at={at(record.expires_at)}"
        f" created_at={at(record.created_at)} last_updated_at={at(record.last_updated_at)}"
        f" lease={lease.token}/{lease.generation}"
    )


@st.composite
def _record_and_lease(draw: st.DrawFn, now: int, retention: int) -> tuple[TaskRecord, Lease]:
    """A record the store could hold (:func:`~mcp_tasks_contract.records.task_records` as
    stored) and a lease that is its claim's, or differs in the token or the generation."""
    record = draw(task_records(now, retention, as_stored=True))
    token = record.claim.token if record.claim is not None else draw(st.sampled_from(TOKENS))
    other = next(t for t in TOKENS if t != token)
    lease_token = draw(st.sampled_from((token, token, other)))
    generation = record.generation
    lease_generation = draw(st.sampled_from((generation, generation, generation + 1)))
    return record, Lease("", CLAIM_HOLDER, lease_token, lease_generation, now)


@st.composite
def cases(draw: st.DrawFn, max_records: int = 8) -> Case:
    now = draw(st.integers(2**41, 2**42))  # ahead of the clock: no janitor deletes
    retention = draw(st.sampled_from((0, 1, SPREAD_MS)) | st.integers(0, 2**36))
    pairs = draw(st.lists(_record_and_lease(now, retention), min_size=1, max_size=max_records))
    until = draw(near(now))
    return _case(now, retention, until, pairs)


def _case(now: int, retention: int, until: int, pairs: list[tuple[TaskRecord, Lease]]) -> Case:
    batch = secrets.token_hex(4)
    records, leases = [], []
    for i, (record, lease) in enumerate(pairs):
        task_id = f"pipelines-{batch}-{i}"
        records.append(replace(record, task_id=task_id))
        leases.append(replace(lease, task_id=task_id))
    return Case(now, retention, until, tuple(records), tuple(leases))


def _edge_case() -> Case:
    """Every edge the pieces decide on, each on and beside it: run first, every time."""
    now, retention = 2_000_000_000_000, SPREAD_MS
    base = TaskRecord("", "alice", TaskStatus.WORKING, 0, now - 10, now - 10, None, None, work=JOB)

    def claimed(ends: int, token: str = "t1") -> TaskRecord:
        return replace(base, claim=Claim(CLAIM_HOLDER, token, ends), generation=1)

    def ttl(record: TaskRecord, expires_at: int) -> TaskRecord:
        return replace(record, expires_at=expires_at, ttl_ms=expires_at - record.created_at)

    own = Lease("", CLAIM_HOLDER, "t1", 1, now)
    variants = [
        (replace(base, retry_at=now), own),  # due exactly now: claimable, due
        (replace(base, retry_at=now + 1), own),  # due in 1 ms: waiting
        (ttl(base, now), own),  # expired exactly now: reapable, not counted
        (ttl(base, now + 1), own),  # expires in 1 ms: claimable, active, held
        (claimed(now), own),  # claim ended exactly now: claimable, not renewable
        (claimed(now + 1), own),  # claim live 1 ms more: renewable
        (claimed(now + 1), replace(own, generation=2)),  # another generation: stale
        (claimed(now + 1, "t2"), own),  # another token: stale
        (ttl(claimed(now + 1), now + 1), own),  # renewable, the TTL held for the lease
        (replace(base, status=TaskStatus.INPUT_REQUIRED), own),
        (replace(base, work=None), own),  # manual: no lane, never claimable
        (replace(base, status=TaskStatus.COMPLETED, last_updated_at=now - retention), own),
        (replace(base, status=TaskStatus.FAILED, last_updated_at=now - retention + 1), own),
        (replace(base, retry_at=0), own),  # a retry due since the epoch: waiting, due
        (ttl(base, now + rules.EXPIRY_HORIZON_MS), own),  # expiring within the hour
        (ttl(base, now + rules.EXPIRY_HORIZON_MS + 1), own),  # 1 ms beyond it
        (replace(base, status=TaskStatus.CANCELLED), own),  # counted as cancelled
        # created exactly UNCLAIMED_AFTER_MS ago: waiting unclaimed; 1 ms later: not yet
        (replace(base, created_at=now - rules.UNCLAIMED_AFTER_MS), own),
        (replace(base, created_at=now - rules.UNCLAIMED_AFTER_MS + 1), own),
    ]
    return _case(now, retention, now + LEASE_MS, variants)


EDGE_CASE: Final = _edge_case()


def _lane(record: TaskRecord) -> tuple[str | None, int | None]:
    """The ``lane`` and ``wait_until`` fields ``rules.claim_lane`` says the record has."""
    lane = rules.claim_lane(record)
    if lane is None:
        return None, None
    place, at = lane
    return place.value, at if place is rules.ClaimLane.WAITING else None


def _gone_at(record: TaskRecord) -> datetime | None:
    if record.expires_at is None:
        return None
    moment = datetime.fromtimestamp((record.expires_at + GRACE_MS) / 1000, tz=UTC)
    return moment.replace(tzinfo=None)


def _with_token(claimed: TaskRecord) -> TaskRecord:
    assert claimed.claim is not None
    return replace(claimed, claim=replace(claimed.claim, worker_id=WORKER, token=TOKEN))


#: Per piece, what its rule answers for (record, lease, case): a bool for a filter or a
#: guard, the record it writes (``None``: writes nothing) for a write.
FILTER_RULES: Final[dict[str, Callable[[TaskRecord, Case], bool]]] = {
    "unexpired": lambda r, c: rules.counts_toward_cap(r, c.now),
    "active": lambda r, c: r.owner == "alice" and rules.is_active(r, c.now),
    "reapable": lambda r, c: rules.is_reapable(r, c.now, c.retention),
    "due": lambda r, c: (
        (lane := rules.claim_lane(r)) is not None
        and lane[0] is rules.ClaimLane.WAITING
        and lane[1] <= c.now
    ),
    "claim_order": lambda r, c: (
        (lane := rules.claim_lane(r)) is not None and lane[0] is rules.ClaimLane.READY
    ),
    "claim_order after": lambda r, c: (
        (lane := rules.claim_lane(r)) is not None
        and lane[0] is rules.ClaimLane.READY
        and rules.claim_order(r) > rules.claim_order(c.records[0])
    ),
    "claimable": lambda r, c: rules.claimable(r, c.now),
    **{
        f"counted status_{status.value}": (
            lambda r, c, status=status: r.status is status and rules.counts_toward_cap(r, c.now)
        )
        for status in TaskStatus
    },
    "counted claimed": lambda r, c: rules.is_claimed(r, c.now),
    "counted lease_lapsed": lambda r, c: rules.lease_lapsed(r, c.now),
    "counted retry_due": lambda r, c: rules.retry_due(r, c.now),
    "counted waiting_unclaimed": lambda r, c: rules.waits_unclaimed(r, c.now),
    "counted retry_pending": lambda r, c: rules.retry_pending(r, c.now),
    "counted expiring_soon": lambda r, c: rules.expires_within(r, c.now, rules.EXPIRY_HORIZON_MS),
}


def _claimed(record: TaskRecord, _lease: Lease, case: Case) -> TaskRecord | None:
    if not rules.claimable(record, case.now):
        return None
    return _with_token(rules.apply_claim(record, WORKER, LEASE_MS, case.now).record)


def _renewed(record: TaskRecord, lease: Lease, case: Case) -> TaskRecord | None:
    try:
        return rules.apply_renew(record, lease, LEASE_MS, case.now).record
    except StaleLease:
        return None


WRITE_RULES: Final[dict[str, Callable[[TaskRecord, Lease, Case], TaskRecord | None]]] = {
    "claim": _claimed,
    "renew": _renewed,
    "release": lambda r, lease, _c: rules.apply_release(r, lease),
    "held_until": lambda r, _lease, c: rules.held_until(r, c.until),
    "claim_lane": lambda r, _lease, _c: r,
}


async def _selected(tasks: AsyncCollection[Document], case: Case) -> dict[str, set[int]]:
    """Per filter and guard, which records (by index) the piece selects."""
    ids = [r.task_id for r in case.records]
    index = {task_id: i for i, task_id in enumerate(ids)}
    mine: Document = {"_id": {"$in": ids}}
    reap = {"$or": [condition for condition, _ in pipelines.reapable(case.now, case.retention)]}
    first = await tasks.find_one({"_id": ids[0]}, {"_id": 1, "created_at": 1})
    assert first is not None
    filters: dict[str, Document] = {
        "unexpired": pipelines.unexpired(case.now),
        "active": pipelines.active("alice", case.now),
        "reapable": reap,
        "due": pipelines.due(case.now),
        "claim_order": pipelines.claim_order()[0],
        "claim_order after": pipelines.claim_order(first)[0],
    }
    selected: dict[str, set[int]] = {}
    for name, condition in filters.items():
        found = tasks.find({"$and": [mine, condition]}, {"_id": 1})
        selected[name] = {index[d["_id"]] async for d in found}
    guard = await tasks.aggregate(
        [{"$match": mine}, {"$project": {"ok": pipelines.claimable(case.now)}}]
    )
    selected["claimable"] = {index[d["_id"]] async for d in guard if d["ok"]}
    figures = pipelines.counted(case.now)
    counted = await (await tasks.aggregate([{"$match": mine}, {"$project": figures}])).to_list()
    for name in figures:
        selected[f"counted {name}"] = {index[d["_id"]] for d in counted if d[name]}
    return selected


def _stages(name: str, lease: Lease, case: Case) -> tuple[Document, list[Document]]:
    """The match and the stages of write piece ``name`` for one record."""
    mine: Document = {"_id": lease.task_id}
    if name == "claim":
        claim = pipelines.claim(
            WORKER, token=TOKEN, lease_ms=LEASE_MS, version=VERSION, grace_ms=GRACE_MS, now=case.now
        )
        return mine, claim
    if name == "renew":
        renew = pipelines.renew(
            lease, lease_ms=LEASE_MS, version=VERSION, grace_ms=GRACE_MS, now=case.now
        )
        return mine, renew
    if name == "release":
        return pipelines.release(lease, VERSION)
    if name == "held_until":
        return mine, [*pipelines.held_until(case.until, GRACE_MS), {"$set": {"v": VERSION}}]
    # the lanes recomputed from scratch
    scrambled: Document = {"$set": {"lane": "scrambled", "wait_until": -1, "v": VERSION}}
    return mine, [scrambled, pipelines.claim_lane()]


async def _written(
    tasks: AsyncCollection[Document], case: Case
) -> dict[str, list[Document | None]]:
    """Per write piece and record: the document its stages make of the stored one, or
    ``None`` when its match selects none."""
    written: dict[str, list[Document | None]] = {}
    for name in WRITE_RULES:
        results: list[Document | None] = []
        for lease in case.leases:
            match, stages = _stages(name, lease, case)
            found = await tasks.aggregate([{"$match": match}, *stages])
            documents = await found.to_list()
            results.append(documents[0] if documents else None)
        written[name] = results
    return written


def _compare(
    case: Case, selected: dict[str, set[int]], written: dict[str, list[Document | None]]
) -> list[str]:
    wrong: list[str] = []
    for name, accepts in FILTER_RULES.items():
        accepted = {i for i, r in enumerate(case.records) if accepts(r, case)}
        for i in sorted(accepted ^ selected[name]):
            verdict = "missed" if i in accepted else "wrongly selected"
            wrong.append(f"pipelines.{name} {verdict} record {i}")
    for name, rule in WRITE_RULES.items():
        for i, (record, lease, got) in enumerate(
            zip(case.records, case.leases, written[name], strict=True)
        ):
            expected = rule(record, lease, case)
            if got is None or got["v"] != VERSION:  # matched nothing, or the guard held
                if expected is not None:
                    wrong.append(f"pipelines.{name} wrote nothing to record {i}")
                continue
            if expected is None:
                wrong.append(f"pipelines.{name} wrote to record {i}, which its rule leaves")
                continue
            if record_of(got) != expected:
                wrong.append(f"pipelines.{name} wrote another record than its rule to {i}")
            lane = (got["lane"], got["wait_until"])
            if lane != _lane(expected):
                wrong.append(f"pipelines.{name} filed record {i} in {lane}, not {_lane(expected)}")
            if got["gone_at"] != _gone_at(expected):
                wrong.append(f"pipelines.{name} set record {i}'s gone_at to {got['gone_at']}")
    return wrong


class Outcomes:
    """Which answers each piece met over the run (both, or it was never put to the test):
    a filter or guard selected and not; a write changed a record and left one as it was
    (the lanes: filed a task waiting and not)."""

    def __init__(self) -> None:
        self.seen: dict[str, set[bool]] = {name: set() for name in (*FILTER_RULES, *WRITE_RULES)}

    def add(
        self, case: Case, selected: dict[str, set[int]], written: dict[str, list[Document | None]]
    ) -> None:
        for name, picked in selected.items():
            self.seen[name].update(i in picked for i in range(len(case.records)))
        for name, rule in WRITE_RULES.items():
            for record, lease in zip(case.records, case.leases, strict=True):
                if name == "claim_lane":  # always written: filed waiting, or not
                    self.seen[name].add(_lane(record)[0] == "waiting")
                else:  # the rule changes the record, or leaves it as it is
                    self.seen[name].add(rule(record, lease, case) not in (None, record))

    def vacuous(self) -> list[str]:
        return sorted(name for name, seen in self.seen.items() if seen != {True, False})


async def _check(tasks: AsyncCollection[Document], case: Case, outcomes: Outcomes) -> None:
    await tasks.insert_many([document_of(r, GRACE_MS) for r in case.records])
    try:
        selected = await _selected(tasks, case)
        written = await _written(tasks, case)
    finally:
        await tasks.delete_many({"_id": {"$in": [r.task_id for r in case.records]}})
    wrong = _compare(case, selected, written)
    if wrong:
        raise AssertionError(
            f"MongoDB pipelines disagree with their rules in {case!r}:\n  " + "\n  ".join(wrong)
        )
    outcomes.add(case, selected, written)


async def test_every_pipeline_piece_computes_what_its_rule_computes(
    open_store: OpenStore,
) -> None:
    """Filters select, the guard passes and the writes write exactly what rules.py says,
    for the edge case and random batches."""
    store = await open_store()
    tasks = await store._tasks()
    outcomes = Outcomes()

    def agrees(case: Case) -> None:
        anyio.from_thread.run(_check, tasks, case, outcomes)

    config = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    test = config(example(EDGE_CASE)(given(cases())(agrees)))
    await anyio.to_thread.run_sync(test)
    assert outcomes.vacuous() == []


async def test_the_edge_case_alone_meets_every_answer(open_store: OpenStore) -> None:
    """The fixed edge case on its own already exercises both answers of every piece (so
    a wrong edge fails here whatever Hypothesis draws)."""
    store = await open_store()
    tasks = await store._tasks()
    outcomes = Outcomes()
    await _check(tasks, EDGE_CASE, outcomes)
    assert outcomes.vacuous() == []


@pytest.mark.parametrize("name", ["claim", "renew", "release"])
async def test_a_write_that_its_rule_refuses_leaves_the_document_as_it_was(
    open_store: OpenStore, name: str
) -> None:
    """Where the rule writes nothing, the piece leaves every field and the version (or
    matches nothing): how the store tells a write from none."""
    store = await open_store()
    tasks = await store._tasks()
    await tasks.insert_many([document_of(r, GRACE_MS) for r in EDGE_CASE.records])
    rule = WRITE_RULES[name]
    checked = 0
    for record, lease in zip(EDGE_CASE.records, EDGE_CASE.leases, strict=True):
        if rule(record, lease, EDGE_CASE) is not None:
            continue
        match, stages = _stages(name, lease, EDGE_CASE)
        stored = await tasks.find_one({"_id": record.task_id})
        found = await (await tasks.aggregate([{"$match": match}, *stages])).to_list()
        assert found in ([], [stored]), (name, _describe(record, lease, EDGE_CASE.now))
        checked += 1
    assert checked
