"""The store's connections: sessions keep the connection they end with cleanly for the next
one; a call cancelled mid-query or refused still leaves the store serving on a pool of one
connection."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from typing import TYPE_CHECKING

import anyio
import asyncpg
import pytest

from mcp_tasks import (
    ANY_OWNER,
    DuplicateTaskId,
    NewTask,
    Progress,
    StoreOptions,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
    new_task_id,
    store_from_url,
)
from mcp_tasks_postgres.asyncpg_quirks import quiet_outage_noise

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_calls_cancelled_at_every_point_leave_the_store_serving(
    open_store: OpenStore,
) -> None:
    """On a pool of one connection, 40 gets and put_status calls are cancelled after 0 to 7
    loop turns (before, during and after their round trips). The revision counts every
    write that returned and at most the 20 attempted; afterwards a write applies on the
    revision a read saw, and a read sees it."""
    store = await open_store(StoreOptions(max_rows=None), max_connections=1)
    task_id = (await store.create(NewTask(new_task_id()))).task_id
    returned_writes = 0
    with anyio.fail_after(60):  # a connection lost to the pool would hang the next call
        for i in range(40):
            call = (
                store.get(task_id, ANY_OWNER)
                if i % 2
                else store.put_status(task_id, Progress(f"step {i}"))
            )
            running = asyncio.ensure_future(call)
            for _ in range(i % 8):
                await asyncio.sleep(0)
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
                returned_writes += i % 2 == 0
        before = (await store.get(task_id, ANY_OWNER)).revision
        # Every write that returned applied; a cancelled one may have applied too.
        assert returned_writes <= before <= 20
        after = await store.put_status(task_id, Progress("after"))
        assert after.record.revision == before + 1
        seen = await store.get(task_id, ANY_OWNER)
        assert (seen.revision, seen.status_message) == (before + 1, "after")


async def test_an_operation_refused_by_the_rules_leaves_the_store_serving(
    open_store: OpenStore,
) -> None:
    """put_status on a missing task, a duplicate create and a create at the row cap fail
    with their typed errors on a pool of one connection; the calls after each are
    answered. (A connection the server drops is the restart test's.)"""
    store = await open_store(StoreOptions(max_rows=1), max_connections=1)
    task_id = (await store.create(NewTask(new_task_id()))).task_id
    with anyio.fail_after(60):  # a connection lost to the pool would hang the next call
        with pytest.raises(TaskNotFound):
            await store.put_status(new_task_id(), Progress("nobody"))
        assert (await store.get(task_id, ANY_OWNER)).task_id == task_id
        with pytest.raises(DuplicateTaskId):
            await store.create(NewTask(task_id))
        assert (await store.get(task_id, ANY_OWNER)).task_id == task_id
        with pytest.raises(TaskLimitReached):
            await store.create(NewTask(new_task_id()))
        assert (await store.put_status(task_id, Progress("still here"))).record.revision == 1


async def test_a_kept_connection_the_server_dropped_is_not_handed_out(
    open_store: OpenStore, postgres_url: str
) -> None:
    """The server drops the connections a store keeps between sessions (a restart, a blip):
    asyncpg hands each back to its pool by itself and refuses every later call on it. The
    store's next calls are answered on fresh connections, never refused with "connection
    has been released back to the pool"."""
    store = await open_store(max_connections=3)
    task_id = (await store.create(NewTask(new_task_id()))).task_id
    # Three sessions at once: three connections kept for the next sessions.
    await asyncio.gather(*(store.get(task_id, ANY_OWNER) for _ in range(3)))
    killer = await asyncpg.connect(postgres_url)
    try:
        dropped = await killer.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = 'mcp-tasks' AND pid <> pg_backend_pid()"
            " AND query LIKE '%' || $1 || '%'",
            store.schema,
        )
    finally:
        await killer.close()
    assert dropped >= 1
    await asyncio.sleep(0.5)  # the drops reach the client: asyncpg detaches the connections
    with anyio.fail_after(60):
        for _ in range(4):
            assert (await store.get(task_id, ANY_OWNER)).task_id == task_id


async def test_connects_cancelled_at_every_point_leave_no_failure_unread() -> None:
    """Against a server that accepts and never answers, 40 calls are cancelled after 0 to
    39 loop turns: before, during and just after asyncpg's TCP connect (cancelled there,
    asyncpg leaves its SSL probe's failure unread, and the loop logs it). No failure is
    left unread, the next call is still answered within the store's bound, and once the
    connects have timed out and the store is closed, no connection to the server is open."""
    loop = asyncio.get_running_loop()
    unread: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: unread.append(context))
    open_now = 0
    one_closed = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_now
        open_now += 1
        try:
            await reader.read()  # until the client closes
        finally:
            open_now -= 1
            one_closed.set()
            writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = store_from_url(f"postgresql://postgres@127.0.0.1:{port}/test?timeout_ms=300")
    try:
        for turns in range(40):
            running = asyncio.ensure_future(store.get(new_task_id(), ANY_OWNER))
            for _ in range(turns):
                await asyncio.sleep(0)
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError, StoreUnavailable):
                await running
        with anyio.fail_after(10), pytest.raises(StoreUnavailable):
            await store.get(new_task_id(), ANY_OWNER)
    finally:
        await store.close()
        server.close()
    with anyio.fail_after(10):
        while open_now:
            one_closed.clear()
            await one_closed.wait()
    gc.collect()
    await asyncio.sleep(0)
    assert [context["message"] for context in unread] == []


async def test_a_connect_timing_out_after_its_tcp_connect_reports_nothing() -> None:
    """asyncpg's own timeout falling just after the TCP connect (swept over the first
    20 ms against a server that accepts and never answers) leaves its SSL probe to fail
    unread; with the store's quirks on, the loop's handler hears none of it, while any
    other unread failure still reaches it."""
    loop = asyncio.get_running_loop()
    heard: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: heard.append(context))
    quiet_outage_noise(loop)
    quiet_outage_noise(loop)  # idempotent: one wrapper

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for step in range(400):
            with contextlib.suppress(TimeoutError, OSError):
                await asyncpg.connect(
                    f"postgresql://postgres@127.0.0.1:{port}/test", timeout=(step + 1) * 0.00005
                )
            await asyncio.sleep(0)
    finally:
        server.close()
    await asyncio.sleep(0.05)
    gc.collect()
    await asyncio.sleep(0)
    assert heard == []

    other: asyncio.Future[None] = loop.create_future()
    other.set_exception(ConnectionError("another failure"))
    del other
    gc.collect()
    assert [str(context["exception"]) for context in heard] == ["another failure"]
