"""The caps' bounds: the create lock's document keeps an upper bound of the unexpired rows,
and a document per owner one of the owner's active tasks, so a create under a cap counts
only when the bound says the cap could be reached. These tests watch the commands a handle
sends (PyMongo's command monitoring) and read the bounds from their documents: no count
below the bound, an exact count that resets it at the cap, and never fewer than the
unexpired rows (the owner's active tasks), through expiries, finished tasks, reaps,
stalled lock holders and concurrent creates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from pymongo import AsyncMongoClient
from pymongo.monitoring import CommandListener, CommandStartedEvent

from mcp_tasks import (
    Complete,
    NewTask,
    OwnerTaskLimitReached,
    StoreOptions,
    TaskLimitReached,
    new_task_id,
)
from mcp_tasks_mongodb import create_lock

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


async def owner_bound_of(mongodb_url: str, store: MongoTaskStore, owner: str) -> int | None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        meta = client[store.database][f"{store.prefix}_meta"]
        bound = await meta.find_one({"_id": create_lock.owner_key(owner)})
    finally:
        await client.close()
    return None if bound is None else bound["bound"]


async def steal_the_lock(mongodb_url: str, store: MongoTaskStore) -> None:
    """Leave the lock to a holder that stalled: its hold has run out."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        meta = client[store.database][f"{store.prefix}_meta"]
        await meta.update_one({"_id": "create"}, {"$set": {"holder": "stalled", "until": 0}})
    finally:
        await client.close()


async def owned(store: MongoTaskStore, owner: str = "alice") -> str:
    """A new task of ``owner``'s: its id."""
    return (await store.create(NewTask(new_task_id(), owner=owner, ttl_ms=LONG_MS))).task_id


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


async def race(stores: list[MongoTaskStore], ttls: list[int]) -> tuple[list[int], int]:
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
        await create_lock.unlock(store._meta(), "stalled", -100, 1, owner=None)
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


async def test_no_owner_count_while_the_owners_bound_is_below_the_cap(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """An owner's first create counts its active tasks (it has no bound yet), the next ones
    up to the per-owner cap count nothing, each raising the owner's bound by one; at the cap
    the create counts and is refused. Another owner has a bound of its own."""
    options = StoreOptions(max_rows=None, max_active_per_owner=CAP)
    store, commands = await watched(open_store, mongodb_url, options)
    await owned(store)
    assert commands.counts_of(store) == 1
    for active in range(2, CAP + 1):
        await owned(store)
        assert commands.counts_of(store) == 0, f"create {active} counted the owner's tasks"
        assert await owner_bound_of(mongodb_url, store, "alice") == active
    with pytest.raises(OwnerTaskLimitReached):
        await owned(store)
    assert commands.counts_of(store) == 1
    assert await owner_bound_of(mongodb_url, store, "alice") == CAP
    await owned(store, "bob")
    assert commands.counts_of(store) == 1
    assert await owner_bound_of(mongodb_url, store, "bob") == 1


async def test_finished_tasks_leave_room_the_exact_count_finds(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """Two of the owner's tasks finish: its bound stays at the cap (nothing but a count
    lowers it), so the next create counts, finds room, and sets the bound to the exact count
    plus its own row; the one after counts nothing; then the cap is full again."""
    options = StoreOptions(max_rows=None, max_active_per_owner=CAP)
    store, commands = await watched(open_store, mongodb_url, options)
    ids = [await owned(store) for _ in range(CAP)]
    for task_id in ids[:2]:
        await store.put_status(task_id, Complete({"content": []}))
    commands.counts_of(store)
    assert await owner_bound_of(mongodb_url, store, "alice") == CAP

    await owned(store)
    assert commands.counts_of(store) == 1
    assert await owner_bound_of(mongodb_url, store, "alice") == CAP - 1  # 3 active, and this
    await owned(store)
    assert commands.counts_of(store) == 0
    with pytest.raises(OwnerTaskLimitReached):
        await owned(store)
    assert commands.counts_of(store) == 1


async def test_a_lock_taken_from_a_stalled_holder_distrusts_every_owners_bound(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """The stalled holder may have inserted for any owner without raising its bound: after
    the lock is taken from it, each owner's next create counts exactly (once), and the
    stalled holder's late unlock raises its owner's bound by its row."""
    options = StoreOptions(max_rows=None, max_active_per_owner=CAP)
    store, commands = await watched(open_store, mongodb_url, options)
    for owner in ("alice", "bob"):
        await owned(store, owner)
    commands.counts_of(store)
    await steal_the_lock(mongodb_url, store)
    for owner in ("alice", "bob"):
        await owned(store, owner)
        assert commands.counts_of(store) == 1, f"{owner}'s bound trusted after the theft"
        await owned(store, owner)
        assert commands.counts_of(store) == 0
        assert await owner_bound_of(mongodb_url, store, owner) == 3
    await create_lock.unlock(store._meta(), "stalled", 0, 1, owner="alice")
    assert await owner_bound_of(mongodb_url, store, "alice") == 4


async def test_creates_of_a_row_capped_handle_raise_the_owners_bound(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A handle with only a row cap creates under the lock and raises the owner's bound by
    its rows: a handle with a per-owner cap beside it does not pass that cap."""
    rows_only = await open_store(StoreOptions(max_rows=100, max_active_per_owner=None))
    per_owner = await open_store(StoreOptions(max_rows=None, max_active_per_owner=CAP))
    await owned(per_owner)
    for _ in range(CAP - 2):
        await owned(rows_only)
    await owned(per_owner)
    with pytest.raises(OwnerTaskLimitReached):
        await owned(per_owner)
    assert await owner_bound_of(mongodb_url, per_owner, "alice") == CAP


async def test_concurrent_creates_of_one_owner_keep_its_bound_above_its_tasks(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """Creates of one owner race from two handles: exactly the cap are created, and the
    owner's bound is at least that many."""
    stores = [
        await open_store(StoreOptions(max_rows=None, max_active_per_owner=CAP)) for _ in range(2)
    ]
    created = refused = 0

    async def one(store: MongoTaskStore) -> None:
        nonlocal created, refused
        try:
            await owned(store)
        except OwnerTaskLimitReached:
            refused += 1
        else:
            created += 1

    async with anyio.create_task_group() as group:
        for i in range(3 * CAP):
            group.start_soon(one, stores[i % 2])
    assert (created, refused) == (CAP, 2 * CAP)
    bound = await owner_bound_of(mongodb_url, stores[0], "alice")
    assert bound is not None
    assert bound >= CAP
