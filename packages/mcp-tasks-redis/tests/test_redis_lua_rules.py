"""What only the Lua scripts' layout can get wrong: the text markers they spell values
with, the janitor expiry Redis applies itself, the scripts' SHAs after the server forgets
them. That each script writes what its pure rule computes is the contract suite's
rule-agreement part (mcp_tasks_contract.suite.agreement, run by test_contract_redis.py);
its stateful test checks the same against the memory store at random."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from redis.asyncio import Redis

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    NewTask,
    Progress,
    StoreOptions,
    TaskNotFound,
    WorkSpec,
    new_task_id,
)
from mcp_tasks_redis.scripts import JANITOR_GRACE_MS

if TYPE_CHECKING:
    from conftest import OpenStore


pytestmark = pytest.mark.anyio

LEASE_MS = 60_000


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


async def test_tasks_filed_before_the_ready_sets_per_type_are_claimed_by_type(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """Tasks written before the work type had its field and ready set per type (S-CLAIM.4):
    no ``wt`` field, queued in the one ``{p}:ready`` set, or waiting in ``{p}:delayed``. A
    claim for their type finds them (the type read from their work once); a claim for
    another type leaves them as they are."""
    store = await open_store()
    tag = "{" + namespace + "}"
    old = [await store.create(NewTask(new_task_id(), work=WorkSpec(t))) for t in ("a", "b")]
    raw = Redis.from_url(redis_url)
    try:
        for record in old:
            assert record.work is not None
            key = f"{tag}:t:{record.task_id}"
            await raw.hdel(key, "wt")
            await raw.zrem(f"{tag}:ready:{record.work.type}", record.task_id)
            await raw.zadd(f"{tag}:ready", {record.task_id: record.created_at})
        await raw.delete(f"{tag}:ready-types")
    finally:
        await raw.aclose()
    assert await store.claim("w", lease_ms=LEASE_MS, work_types=frozenset({"c"})) is None
    for record in reversed(old):
        assert record.work is not None
        claimed = await store.claim(
            "w", lease_ms=LEASE_MS, work_types=frozenset({record.work.type})
        )
        assert claimed is not None
        assert claimed.record.task_id == record.task_id
