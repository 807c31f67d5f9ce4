"""The Redis (pub/sub) notifier: what one handle publishes, another handle's notifier hears;
what another namespace publishes, it does not."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import RelayNotifier, new_task_id, notifier_for
from mcp_tasks.runtime.notifier import WORK_SIGNAL, signal_key
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.notifiers import (
    SIGNAL_BOUND_S,
    check_signal_crosses_handles,
    check_task_control_reaches_handles,
)
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_a_change_published_on_one_handle_wakes_another(open_store: OpenStore) -> None:
    """Two handles on one namespace, as two processes would hold: a task created and
    published through the first wakes a subscriber on the second's notifier."""
    await check_signal_crosses_handles(await open_store(), await open_store())


async def test_a_task_control_write_wakes_another_handle(open_store: OpenStore) -> None:
    """``TaskControl(store)`` on a handle of its own (an external worker's) publishes by
    default: its write wakes a subscriber on another handle's notifier (the key of the task)."""
    await check_task_control_reaches_handles(await open_store(), await open_store(), keyed=True)


async def test_a_namespace_hears_only_its_own_changes(
    open_store: OpenStore, redis_url: str
) -> None:
    """Each namespace has its own channel: signals another namespace on the same server
    sends (a task's, the work signal, whose key is the same in every namespace) wake no
    subscriber here, not even one of every task; this namespace's own signal, sent after
    them on the same server, does, and names its task alone."""
    listener, writer = await open_store(), await open_store()
    elsewhere = RedisTaskStore(redis_url, prefix=new_namespace())
    receiver, here, there = notifier_for(listener), notifier_for(writer), notifier_for(elsewhere)
    assert isinstance(receiver, RelayNotifier)
    assert isinstance(here, RelayNotifier)
    assert isinstance(there, RelayNotifier)
    mine = new_task_id()
    heard: set[str] = set()
    try:
        async with (
            receiver.running(),
            receiver.subscribe() as everything,
            receiver.subscribe(WORK_SIGNAL) as work,
        ):
            await there.send(WORK_SIGNAL)
            await there.send(new_task_id())
            await here.send(mine)  # the server relays it after those, if it relays them here
            with anyio.fail_after(SIGNAL_BOUND_S):
                while signal_key(mine) not in heard:
                    await everything.wait(SIGNAL_BOUND_S)
                    changed = everything.take_changed()
                    assert changed is not None, "the relay failed and listened again"
                    heard |= changed
            assert heard == {signal_key(mine)}, "another namespace's signal came through"
            assert not await work.wait(0), "another namespace's work signal woke a runner"
    finally:
        await here.close_relay()
        await there.close_relay()
        await elsewhere.close()
