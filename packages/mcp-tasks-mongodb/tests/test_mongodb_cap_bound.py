"""The row cap's bound: the create lock's document keeps an upper bound of the unexpired
rows, so a create under the row cap counts them only when the bound says the cap could be
reached. These tests watch the commands a handle sends (PyMongo's command monitoring) and
read the bound from the lock document: no count below the bound, an exact count that
resets it at the cap, and never fewer than the unexpired rows, through expiries, reaps,
stalled lock holders and concurrent creates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from pymongo import AsyncMongoClient
from pymongo.monitoring import CommandListener, CommandStartedEvent

from mcp_tasks import NewTask, StoreOptions, TaskLimitReached, new_task_id

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks_mongodb import MongoTaskStore

pytestmark = pytest.mark.anyio

CAP = 5
#: Long enough that a task stays unexpired while the test runs on a busy machine.
LONG_MS = 600_000
#: Short enough to wait for.
SHORT_MS = 300
#: Longer than a round of racing creates takes, even on a busy machine.
ROUND_MS = 3_000


class Commands(CommandListener):
    """The commands a client sent, as (name, collection) pairs."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.sent.append((event.command_name, event.command.get(event.command_name)))

    def succeeded(self, event: object) -> None:
        pass

    def failed(self, event: object) -> None:
        pass

    def counts_of(self, store: MongoTaskStore) -> int:
        """Aggregations on the task collection (``count_documents`` is one; ``create``
        sends no other) since the last call."""
        tasks = f"{store.prefix}_tasks"
        counted = sum(1 for name, on in self.sent if name == "aggregate" and on == tasks)
        self.sent.clear()
        return counted


async def watched(
    open_store: OpenStore, mongodb_url: str, options: StoreOptions
) -> tuple[MongoTaskStore, Commands]:
    """A handle whose client reports every command it sends."""
    store = await open_store(options)
    commands = Commands()
    store._client = AsyncMongoClient(mongodb_url, tz_aware=False, event_listeners=[commands])
    return store, commands


async def create(store: MongoTaskStore, ttl_ms: int | None = LONG_MS) -> int | None:
    """A new task's expiry."""
    return (await store.create(NewTask(new_task_id(), ttl_ms=ttl_ms))).expires_at


async def bound_of(mongodb_url: str, store: MongoTaskStore) -> int | None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        lock = await client[store.database][f"{store.prefix}_meta"].find_one({"_id": "create"})
    finally:
        await client.close()
    assert lock is not None
    return lock.get("bound")


async def unexpired(mongodb_url: str, store: MongoTaskStore) -> int:
    """The unexpired rows, counted at the server's now (an aggregation reads ``$$NOW``)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        found = await client[store.database][f"{store.prefix}_tasks"].aggregate(
            [
                {
                    "$match": {
                        "$expr": {
                            "$or": [
                                {"$eq": ["$expires_at", None]},
                                {"$gt": ["$expires_at", {"$toLong": "$$NOW"}]},
                            ]
                        }
                    }
                },
                {"$count": "n"},
            ]
        )
        rows = await found.to_list()
    finally:
        await client.close()
    return rows[0]["n"] if rows else 0


async def race(stores: list[MongoTaskStore], ttls: list[int]) -> tuple[list[tuple[int, int]], int]:
    """Create a task of each TTL at once, spread over the handles: the created tasks' TTLs
    and expiries, and how many were refused."""
    expiries: list[int] = []
    refused = 0

    async def one(store: MongoTaskStore, ttl_ms: int) -> None:
        nonlocal refused
        try:
            expires_at = await create(store, ttl_ms)
        except TaskLimitReached:
            refused += 1
        else:
            assert expires_at is not None
            expiries.append(expires_at)

    async with anyio.create_task_group() as group:
        for i, ttl_ms in enumerate(ttls):
            group.start_soon(one, stores[i % len(stores)], ttl_ms)
    return expiries, refused


async def wait_past(store: MongoTaskStore, epoch_ms: int | None) -> None:
    """Until the server's clock is past ``epoch_ms``."""
    assert epoch_ms is not None
    for _ in range(600):
        if await store._server_now() > epoch_ms:
            return
        await anyio.sleep(0.05)
    pytest.fail("the server's clock did not pass the expiry in 30 s")


async def test_no_count_while_the_bound_is_below_the_cap(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """The first create counts (the namespace has no bound yet), the next ones up to the cap
    count nothing, each raising the bound by one; at the cap the create counts and is
    refused."""
    store, commands = await watched(open_store, mongodb_url, StoreOptions(max_rows=CAP))
    await create(store)
    assert commands.counts_of(store) == 1
    for rows in range(2, CAP + 1):
        await create(store)
        assert commands.counts_of(store) == 0, f"create {rows} counted the rows"
        assert await bound_of(mongodb_url, store) == rows  # exact: the first create counted
    with pytest.raises(TaskLimitReached):
        await create(store)
    assert commands.counts_of(store) == 1
    assert await bound_of(mongodb_url, store) == CAP


async def test_the_exact_count_at_the_cap_resets_the_bound(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """Two of the cap's tasks expire: the bound stays at the cap (expiries never lower it),
    so the next create counts, finds room, and sets the bound to the exact count plus its
    own row; the one after counts nothing; then the cap is full again."""
    store, commands = await watched(open_store, mongodb_url, StoreOptions(max_rows=CAP))
    expiries = [await create(store, ttl_ms=SHORT_MS) for _ in range(2)]
    for _ in range(CAP - 2):
        await create(store)
    await wait_past(store, max(e for e in expiries if e is not None))
    await store.reap()
    commands.counts_of(store)
    assert await bound_of(mongodb_url, store) == CAP

    await create(store)
    assert commands.counts_of(store) == 1
    assert await bound_of(mongodb_url, store) == CAP - 1  # exact: 3 live, plus this one
    await create(store)
    assert commands.counts_of(store) == 0
    assert await bound_of(mongodb_url, store) == CAP
    with pytest.raises(TaskLimitReached):
        await create(store)
    assert commands.counts_of(store) == 1
    assert await unexpired(mongodb_url, store) == CAP


async def test_the_bound_never_under_counts_through_expiries_and_races(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """Two long-lived tasks, then rounds of: creates from two handles race to the cap with
    short-lived tasks, exactly the cap is unexpired, and the bound is at least the cap; the
    short-lived ones expire (reaped on even rounds, left in place on odd ones), which never
    lowers the bound; the next round fills the cap exactly again."""
    stores = [await open_store(StoreOptions(max_rows=CAP)) for _ in range(2)]
    kept = 2
    for _ in range(kept):
        await create(stores[0])
    for round_ in range(4):
        expiries, refused = await race(stores, [ROUND_MS] * (3 * CAP))
        assert (len(expiries), refused) == (CAP - kept, 2 * CAP + kept), f"round {round_}"
        assert await unexpired(mongodb_url, stores[0]) == CAP
        bound = await bound_of(mongodb_url, stores[0])
        assert bound is not None
        assert bound >= CAP
        await wait_past(stores[0], max(expiries))
        assert await unexpired(mongodb_url, stores[0]) == kept
        if round_ % 2 == 0:
            await stores[1].reap()
        assert await bound_of(mongodb_url, stores[0]) == bound  # expiries never lower it


async def test_a_lock_taken_from_a_stalled_holder_counts_exactly(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A holder that stalled past the lock's hold may have inserted without raising the
    bound (its unlock failed or has not come yet): the next holder takes the lock from it
    and counts, whatever the bound says. The stalled holder's late unlock adds its row
    to the bound and frees nothing."""
    store, commands = await watched(open_store, mongodb_url, StoreOptions(max_rows=CAP))
    for _ in range(CAP):
        await create(store)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    meta = client[store.database][f"{store.prefix}_meta"]
    try:
        # a stalled holder whose hold ran out, and a bound that lacks rows
        await meta.update_one(
            {"_id": "create"}, {"$set": {"holder": "stalled", "until": 0, "bound": 1}}
        )
        commands.counts_of(store)
        with pytest.raises(TaskLimitReached):
            await create(store)
        assert commands.counts_of(store) == 1
        assert await bound_of(mongodb_url, store) == CAP
        # the stalled holder comes back: its row counts, the lock stays free
        await store._unlock("stalled", -100, 1)
        lock = await meta.find_one({"_id": "create"})
    finally:
        await client.close()
    assert lock is not None
    assert (lock["bound"], lock["holder"]) == (CAP + 1, None)


async def test_creates_of_a_per_owner_capped_handle_raise_the_bound(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A handle with only a per-owner cap also creates under the lock, and raises the bound
    by its rows: a row-capped handle beside it does not pass the row cap."""
    capped = await open_store(StoreOptions(max_rows=CAP))
    owners = await open_store(StoreOptions(max_rows=None, max_active_per_owner=CAP))
    await create(capped)
    for _ in range(CAP - 2):
        await owners.create(NewTask(new_task_id(), owner="alice", ttl_ms=LONG_MS))
    await create(capped)
    with pytest.raises(TaskLimitReached):
        await create(capped)
    assert await unexpired(mongodb_url, capped) == CAP
