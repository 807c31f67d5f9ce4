"""Claims without an id on the MongoDB store: the server's clock that moves due tasks to
the ready lane comes from a recent ``hello`` (``MongoTaskStore._lane_now``), so an idle
runner's claim a second reads the task collection alone, and a task whose time has come is
still claimed at once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from pymongo import AsyncMongoClient
from pymongo.monitoring import CommandListener, CommandStartedEvent

from mcp_tasks import NewTask, StoreOptions, WorkSpec, new_task_id
from mcp_tasks_mongodb.driver import server_now
from mcp_tasks_mongodb.store import LANE_CLOCK_S

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks_mongodb import MongoTaskStore

pytestmark = pytest.mark.anyio


class Commands(CommandListener):
    """The names of the commands a client sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.sent.append(event.command_name)

    def succeeded(self, event: object) -> None:
        pass

    def failed(self, event: object) -> None:
        pass


async def watched(open_store: OpenStore, mongodb_url: str) -> tuple[MongoTaskStore, Commands]:
    """A handle whose client reports every command it sends (heartbeats are no commands)."""
    store = await open_store(StoreOptions())
    commands = Commands()
    store._client = AsyncMongoClient(mongodb_url, tz_aware=False, event_listeners=[commands])
    return store, commands


async def test_an_idle_claim_reads_the_server_clock_once_in_ten_seconds(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """With nothing to claim, the first claim asks the server's clock (``hello``); the
    claims after it within LANE_CLOCK_S send only their reads of the task collection."""
    store, commands = await watched(open_store, mongodb_url)
    with anyio.fail_after(LANE_CLOCK_S / 2):
        assert await store.claim("w", lease_ms=1_000) is None
        assert "hello" in commands.sent
        commands.sent.clear()
        for _ in range(3):
            assert await store.claim("w", lease_ms=1_000) is None
    assert "hello" not in commands.sent
    assert commands.sent.count("find") == 6  # each: the due tasks, then the ready lane


async def test_a_task_whose_lease_ran_out_is_claimed_at_once_on_the_lane_clock(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """The lane clock runs from its ``hello``'s send, never behind the server's: a task
    whose claim ran out is claimed again as soon as the server's clock is past the lease's
    end, by a claim that asks no ``hello`` (the one of the first claim serves)."""
    store, commands = await watched(open_store, mongodb_url)
    created = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    first = await store.claim("a", lease_ms=300)
    assert first is not None
    assert first.record.task_id == created.task_id
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_url)
    try:
        with anyio.fail_after(LANE_CLOCK_S / 2):
            # The server's clock only grows after its answer: 1 ms past the lease's end.
            now = await server_now(client[store.database])
            await anyio.sleep((first.lease.expires_at + 1 - now) / 1000)
            commands.sent.clear()
            again = await store.claim("b", lease_ms=1_000)
    finally:
        await client.close()
    assert "hello" not in commands.sent
    assert again is not None
    assert again.record.task_id == created.task_id
