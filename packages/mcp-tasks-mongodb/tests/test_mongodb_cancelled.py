"""Store operations cancelled from outside (as a request that ends) while PyMongo waits for
a server that is gone: each ends as the cancellation or StoreUnavailable, and the store's
client works again when the server is back (see :mod:`mcp_tasks_mongodb.driver` on why
PyMongo is never cancelled)."""

from __future__ import annotations

import time

import anyio
import pytest

from mcp_tasks import NewTask, StoreOptions, StoreUnavailable, new_task_id
from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_mongodb import MongoTaskStore
from mcp_tasks_mongodb.provision import own_mongodb

pytestmark = pytest.mark.anyio

BOUND_MS = 1_000
#: Cancelled this soon: well inside the bound, so PyMongo is still waiting for the server.
CANCEL_AFTER_S = 0.2


async def test_operations_cancelled_while_the_server_is_gone_leave_the_client_working() -> None:
    """Eight gets and eight creates at a time, each cancelled by an anyio cancel scope
    after 0.2 s, four rounds, while the store's server is killed: every one ends cancelled
    or StoreUnavailable (no other error); once the server is started again the same store
    creates and reads tasks."""
    with own_mongodb(sync_on_commit=True) as server:
        if server is None:
            unavailable("own MongoDB", "install the SecantusDB test dependency")
        store = MongoTaskStore(server.url, StoreOptions(timeout_ms=BOUND_MS), prefix="cancelled")
        try:
            kept = await store.create(NewTask(new_task_id()))
            await anyio.to_thread.run_sync(server.kill)
            endings: dict[str, int] = {}

            async def cancelled_soon(create: bool) -> None:
                with anyio.move_on_after(CANCEL_AFTER_S) as scope:
                    try:
                        if create:
                            await store.create(NewTask(new_task_id()))
                        else:
                            await store.get(kept.task_id, None)
                    except StoreUnavailable:
                        endings["unavailable"] = endings.get("unavailable", 0) + 1
                        return
                    except Exception as error:  # what the test is about: none of these
                        name = type(error).__name__
                        endings[name] = endings.get(name, 0) + 1
                        return
                ending = "cancelled" if scope.cancelled_caught else "answered"
                endings[ending] = endings.get(ending, 0) + 1

            with anyio.fail_after(60):  # a client left broken may hang instead
                for _ in range(4):
                    async with anyio.create_task_group() as group:
                        for index in range(16):
                            group.start_soon(cancelled_soon, index % 2 == 0)
            assert set(endings) <= {"cancelled", "unavailable"}, endings
            await anyio.to_thread.run_sync(server.start)
            deadline = time.monotonic() + 30  # the server's start is not what is tested
            with anyio.fail_after(60):
                while True:
                    try:
                        created = await store.create(NewTask(new_task_id()))
                        break
                    except StoreUnavailable:
                        if time.monotonic() > deadline:
                            raise
                assert (await store.get(created.task_id, None)).task_id == created.task_id
                assert (await store.get(kept.task_id, None)).task_id == kept.task_id
        finally:
            with anyio.fail_after(30):  # a client left broken may hang here too
                await store.close()
