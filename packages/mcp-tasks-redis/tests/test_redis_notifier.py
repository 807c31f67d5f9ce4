"""The Redis (pub/sub) notifier: what one handle publishes, another handle's notifier hears;
what another namespace publishes, it does not."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import pytest
from resend_scenarios import DroppingProxy, through

from mcp_tasks import RelayNotifier, new_task_id, notifier_for
from mcp_tasks.runtime.notifier import WORK_SIGNAL, signal_key
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.notifiers import (
    SIGNAL_BOUND_S,
    check_a_signal_lost_while_away_is_read_after,
    check_a_signal_that_failed_to_go_out_is_made_up,
    check_relay_drops_its_own_echo,
    check_signal_crosses_handles,
    check_task_control_reaches_handles,
)
from mcp_tasks_contract.proxy import StoppableProxy
from mcp_tasks_contract.proxy import through as proxied
from mcp_tasks_redis import RedisTaskStore
from mcp_tasks_redis.notify import RedisRelay

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


async def test_a_quiet_link_is_checked_and_a_silent_one_found_dead(
    redis_url: str, namespace: str
) -> None:
    """The listening connection, quiet for many health checks, still hears a signal sent
    after them; once the network goes silent (nothing answers, nothing is closed), the
    relay fails within two health checks, so its notifier listens again on a new link."""
    # A PONG must come back within one check: long enough that a process waiting for a
    # core on a loaded machine does not miss it, short enough that the test stays short.
    health_check_s = 1.0
    parts = urlsplit(redis_url)
    assert parts.hostname is not None
    proxy = DroppingProxy(parts.hostname, parts.port or 6379)
    await proxy.start()
    relay = RedisRelay(through(redis_url, proxy), namespace, health_check_s=health_check_s)
    sender = RedisRelay(redis_url, namespace)
    heard: list[str | None] = []
    listening = anyio.Event()

    async def after_quiet_then_silence() -> None:
        await listening.wait()
        await anyio.sleep(5 * health_check_s)
        await sender.send("after-quiet")
        with anyio.fail_after(SIGNAL_BOUND_S):
            while "after-quiet" not in heard:  # noqa: ASYNC110 (deliver is a plain callback)
                await anyio.sleep(0.01)
        proxy.silent = True

    try:
        dead = pytest.RaisesExc(ConnectionError, match="no answer to a PING")
        with pytest.RaisesGroup(dead):
            async with anyio.create_task_group() as tg:
                tg.start_soon(after_quiet_then_silence)
                with anyio.fail_after(SIGNAL_BOUND_S + 30 * health_check_s):
                    await relay.receive(heard.append, listening.set)
    finally:
        await relay.aclose()
        await sender.aclose()
        await proxy.close()
    assert heard == ["after-quiet"]


async def test_a_relay_drops_its_own_signals_and_hears_others(
    redis_url: str, namespace: str
) -> None:
    """What a relay publishes while it listens comes back over pub/sub; it is dropped (the
    notifier woke its own subscribers as it sent), while another process's signals on the
    channel, the same key among them, are delivered."""
    await check_relay_drops_its_own_echo(
        RedisRelay(redis_url, namespace), RedisRelay(redis_url, namespace)
    )


async def test_a_change_missed_while_the_subscribed_link_was_cut_is_read_after(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """The pub/sub link goes through a proxy that is taken away: a subscriber, idle (no
    poll) while it listens, is woken at the loss and polls; a cancel published meanwhile is
    missed, and the subscriber is woken once the link is back."""
    async with StoppableProxy.to(redis_url) as proxy:
        listener = RelayNotifier(RedisRelay(proxied(redis_url, proxy), namespace))
        await check_a_signal_lost_while_away_is_read_after(await open_store(), listener, proxy)


async def test_a_signal_that_failed_to_go_out_is_made_up_at_the_next_send(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """A sender's PUBLISH connection goes through a proxy that is taken away: the cancel's
    signal fails, and the sender's next signal, once the proxy is back, wakes the other
    process's subscriber with "any task may have changed"."""
    async with StoppableProxy.to(redis_url) as proxy:
        sender = RelayNotifier(RedisRelay(proxied(redis_url, proxy), namespace))
        await check_a_signal_that_failed_to_go_out_is_made_up(await open_store(), sender, proxy)
