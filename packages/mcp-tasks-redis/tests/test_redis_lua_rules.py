"""The Lua scripts restate the rules: each writes exactly what the pure rule computes from
the same record at the same now (the server's, read back from what the script wrote); the
contract suite's stateful test checks the same against the memory store at random. The
scripts never parse a user's payload: it comes back byte for byte as Python wrote it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import pytest
from redis.asyncio import Redis

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    NewTask,
    Progress,
    RequireInput,
    Retry,
    StaleLease,
    StoreOptions,
    TaskNotFound,
    WorkSpec,
    new_task_id,
)
from mcp_tasks.domain import rules
from mcp_tasks_redis.scripts import JANITOR_GRACE_MS

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks import Claimed, StatusChange, TaskRecord

pytestmark = pytest.mark.anyio

LEASE_MS = 60_000


def expected_claim(before: TaskRecord, got: Claimed, worker: str) -> Claimed:
    """rules.apply_claim at the now the script used, with the token it minted."""
    now = got.lease.expires_at - LEASE_MS
    computed = rules.apply_claim(before, worker, LEASE_MS, now)
    assert computed.record.claim is not None
    token = got.lease.token
    record = replace(computed.record, claim=replace(computed.record.claim, token=token))
    return replace(computed, record=record, lease=replace(computed.lease, token=token))


@pytest.mark.parametrize("ttl_ms", [None, 1_000, 3_600_000])
@pytest.mark.parametrize("by_id", [True, False])
async def test_claim_writes_what_apply_claim_computes(
    open_store: OpenStore, ttl_ms: int | None, by_id: bool
) -> None:
    """By id and without: generation + 1, the claim, retry_at cleared, the TTL held for the
    lease (a short TTL grows, a long one and none stay); nothing else moves."""
    store = await open_store()
    before = await store.create(NewTask(new_task_id(), ttl_ms=ttl_ms, work=WorkSpec("job")))
    got = await store.claim("w1", lease_ms=LEASE_MS, task_id=before.task_id if by_id else None)
    assert got is not None
    assert got == expected_claim(before, got, "w1")
    assert await store.get(before.task_id, ANY_OWNER) == got.record


async def test_renew_and_release_write_what_the_rules_compute(open_store: OpenStore) -> None:
    """renew: the claim's end and the held TTL; release: the claim gone, generation kept;
    then a stale lease renews to StaleLease and releases to nothing."""
    store = await open_store()
    before = await store.create(NewTask(new_task_id(), ttl_ms=1_000, work=WorkSpec("job")))
    got = await store.claim("w1", lease_ms=LEASE_MS, task_id=before.task_id)
    assert got is not None
    lease = await store.renew(got.lease, lease_ms=2 * LEASE_MS)
    now = lease.expires_at - 2 * LEASE_MS
    renewed = rules.apply_renew(got.record, got.lease, 2 * LEASE_MS, now)
    assert lease == renewed.lease
    assert await store.get(before.task_id, ANY_OWNER) == renewed.record
    await store.release(lease)
    assert await store.get(before.task_id, ANY_OWNER) == rules.apply_release(renewed.record, lease)
    with pytest.raises(StaleLease):
        await store.renew(lease, lease_ms=LEASE_MS)
    await store.release(lease)  # stale: a no-op
    again = await store.claim("w2", lease_ms=LEASE_MS)
    assert again is not None
    assert again.lease.generation == 2


async def test_a_retry_waits_then_claims_in_order(open_store: OpenStore) -> None:
    """A task retried with a delay is not claimable before retry_at (by id or not); the
    other tasks are taken in claim order instead; a retry of 0 is claimable at once."""
    store = await open_store()
    first = await store.create(NewTask(new_task_id(), work=WorkSpec("job", None, None, (0,))))
    second = await store.create(NewTask(new_task_id(), work=WorkSpec("job", None, None, (60_000,))))
    third = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    for task in (second, first):
        got = await store.claim("w", lease_ms=LEASE_MS, task_id=task.task_id)
        assert got is not None
        await store.put_status(
            task.task_id, Retry({"code": 1, "message": "again"}), lease=got.lease
        )
    assert await store.claim("w", lease_ms=LEASE_MS, task_id=second.task_id) is None
    taken = [await store.claim("w", lease_ms=LEASE_MS) for _ in range(3)]
    # rules.claim_order: created_at, then id (tasks created in one millisecond tie)
    due = sorted([first, third], key=rules.claim_order)
    assert [t.record.task_id if t else None for t in taken] == [*(t.task_id for t in due), None]


#: JSON a Lua round trip through cjson would change: empty arrays and objects, integers
#: beyond 2^53, float spelling, escapes, text that looks like the scripts' own markers.
AWKWARD = {
    "empty list": [],
    "empty object": {},
    "big": 2**63 - 1,
    "tenth": 0.1,
    "text": 'é / \\ " \u0000 ☃ =',
    "nested": [[], {}, [{}], {"": []}],
}


def write_now(before: TaskRecord, after: TaskRecord) -> int:
    """The server's now when ``after`` was written (the test waits a few ms between writes,
    so last_updated_at = max(now, previous + 1) is now itself)."""
    assert after.last_updated_at > before.last_updated_at + 1
    return after.last_updated_at


async def a_moment() -> None:
    await anyio.sleep(0.005)


ELICIT = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}


@pytest.mark.parametrize(
    "change",
    [
        Progress("half way"),
        Progress(None),
        RequireInput({"k": ELICIT}, status_message="asking"),
        Complete({"content": [], "structuredContent": AWKWARD}),
        Complete({"content": []}, status_message=""),
        Fail({"code": -1, "message": "boom", "data": AWKWARD}),
        Fail({"code": -1, "message": ""}),
        Retry({"code": 1, "message": "again"}),
        Retry({"code": 1, "message": "again"}, status_message="retrying"),
    ],
    ids=repr,
)
@pytest.mark.parametrize("event_id", [None, "ev/é"])
async def test_put_status_writes_what_apply_put_computes(
    open_store: OpenStore, change: StatusChange, event_id: str | None
) -> None:
    """Every kind of change, with and without an event id, with a result retention that
    holds the ended task: the record equals rules.apply_put at the script's now."""
    store = await open_store(StoreOptions(result_retention_ms=7_200_000))
    work = WorkSpec("job", None, None, (500,))
    before = await store.create(NewTask(new_task_id(), ttl_ms=60_000, work=work))
    await a_moment()
    got = await store.put_status(before.task_id, change, event_id=event_id)
    now = write_now(before, got.record)
    want = rules.apply_put(before, change, now, result_retention_ms=7_200_000, event_id=event_id)
    assert got == want
    assert await store.get(before.task_id, ANY_OWNER) == want.record
    if event_id is not None:
        again = await store.put_status(before.task_id, change, event_id=event_id)
        assert again == rules.apply_put(
            want.record, change, now + 1, result_retention_ms=7_200_000, event_id=event_id
        )


async def test_update_and_cancel_write_what_the_rules_compute(open_store: OpenStore) -> None:
    """Answers to some, then all outstanding keys (payloads a Lua JSON round trip would
    change), then a cancel: each the rule's record at the script's now."""
    store = await open_store(StoreOptions(result_retention_ms=600_000))
    task = await store.create(NewTask(new_task_id(), owner="alice", ttl_ms=1_000))
    asked = await store.put_status(task.task_id, RequireInput({"a": ELICIT, "b": ELICIT}))
    steps: list[tuple[dict[str, object], str]] = [
        ({"a": {"action": "accept", "content": AWKWARD}, "zzz": 1}, "answer a"),
        ({"b": {"action": "decline"}}, "answer b"),
    ]
    before = asked.record
    for responses, _ in steps:
        await a_moment()
        got = await store.update(task.task_id, "alice", responses)
        assert got == rules.apply_update(before, "alice", responses, write_now(before, got.record))
        before = got.record
    await a_moment()
    cancelled = await store.cancel(task.task_id, "alice")
    now = write_now(before, cancelled.record)
    assert cancelled == rules.apply_cancel(before, "alice", now, result_retention_ms=600_000)
    assert cancelled.record.expires_at == now + 600_000  # held for the result retention
    assert await store.get(task.task_id, "alice") == cancelled.record


async def test_text_that_looks_like_a_marker_round_trips(open_store: OpenStore) -> None:
    """The scripts spell "none" as '' and a text as '=' + text: an empty message, one that
    starts with '=', an owner '=x' and an event id '' all come back as they were."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id(), owner="=x", status_message=""))
    assert (await store.get(task.task_id, "=x")).status_message == ""
    written = await store.put_status(task.task_id, Progress("=half"), event_id="")
    assert written.record.status_message == "=half"
    assert [e.event_id for e in written.record.recent_events] == [""]
    for caller in (None, "x", "==x"):
        with pytest.raises(TaskNotFound):
            await store.get(task.task_id, caller)


async def expire_at(raw: Redis, key: str) -> int | None:
    """When Redis deletes ``key`` by itself (server ms, give or take one), or None if never
    (``PEXPIRETIME`` is Redis 7; this works on 6.2 too: TIME and PTTL in one transaction)."""
    async with raw.pipeline(transaction=True) as pipe:
        (seconds, micros), ttl = await pipe.time().pttl(key).execute()
    return None if ttl < 0 else int(seconds) * 1000 + int(micros) // 1000 + int(ttl)


async def test_redis_itself_deletes_a_hash_only_after_its_expiry(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """PEXPIREAT is a janitor a minute past expires_at, moved with it (a claim that holds
    the task longer); a task without TTL never expires by itself."""
    store = await open_store()
    short = await store.create(NewTask(new_task_id(), ttl_ms=1_000, work=WorkSpec("job")))
    forever = await store.create(NewTask(new_task_id(), ttl_ms=None))
    raw = Redis.from_url(redis_url)
    try:
        key = "{" + namespace + "}:t:"
        assert short.expires_at is not None
        janitor = await expire_at(raw, key + short.task_id)
        assert janitor is not None
        assert abs(janitor - (short.expires_at + JANITOR_GRACE_MS)) <= 1
        assert await expire_at(raw, key + forever.task_id) is None
        claimed = await store.claim("w", lease_ms=LEASE_MS, task_id=short.task_id)
        assert claimed is not None
        assert claimed.record.expires_at is not None
        held = claimed.record.expires_at
        janitor = await expire_at(raw, key + short.task_id)
        assert janitor is not None
        assert abs(janitor - (held + JANITOR_GRACE_MS)) <= 1
    finally:
        await raw.aclose()


async def test_a_task_the_janitor_deleted_leaves_no_trace_in_the_caps(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """A hash Redis deleted by itself (as PEXPIREAT does, simulated with DEL after the task
    expired): the reaper still clears its index entries, and neither cap counts it."""
    store = await open_store(StoreOptions(max_rows=1, max_active_per_owner=1))
    gone = await store.create(NewTask(new_task_id(), owner="alice", ttl_ms=50))
    await anyio.sleep(0.1)
    raw = Redis.from_url(redis_url)
    try:
        await raw.delete("{" + namespace + "}:t:" + gone.task_id)
    finally:
        await raw.aclose()
    assert await store.reap() == 1
    again = await store.create(NewTask(new_task_id(), owner="alice", ttl_ms=60_000))
    assert await store.get(again.task_id, "alice") == again


async def test_scripts_are_loaded_again_after_the_server_forgets_them(
    open_store: OpenStore, redis_url: str
) -> None:
    """The store calls its scripts by SHA; after ``SCRIPT FLUSH`` (as after a restart or a
    failover) every operation still works: it loads a script again on ``NOSCRIPT``."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    raw = Redis.from_url(redis_url)
    try:
        await raw.script_flush()
        got = await store.claim("w", lease_ms=LEASE_MS, task_id=task.task_id)
        assert got is not None
        await raw.script_flush()
        done = await store.put_status(task.task_id, Complete({"content": []}), lease=got.lease)
        assert done.record.status.value == "completed"
        await raw.script_flush()
        assert await store.get(task.task_id, ANY_OWNER) == done.record
    finally:
        await raw.aclose()
