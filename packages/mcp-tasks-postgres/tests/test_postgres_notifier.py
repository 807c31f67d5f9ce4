"""The Postgres notifier (LISTEN/NOTIFY): one handle publishes, another's notifier hears."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import RelayNotifier
from mcp_tasks_contract.notifiers import (
    check_a_signal_lost_while_away_is_read_after,
    check_a_signal_that_failed_to_go_out_is_made_up,
    check_relay_drops_its_own_echo,
    check_signal_crosses_handles,
    check_task_control_reaches_handles,
)
from mcp_tasks_contract.proxy import StoppableProxy, through
from mcp_tasks_postgres.notify import PostgresRelay

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


async def test_a_relay_drops_its_own_signals_and_hears_others(
    postgres_url: str, namespace: str
) -> None:
    """What a relay sends while it listens comes back over LISTEN; it is dropped (the
    notifier woke its own subscribers as it sent), while another process's signals on the
    channel, the same key among them, are delivered."""
    await check_relay_drops_its_own_echo(
        PostgresRelay(postgres_url, namespace), PostgresRelay(postgres_url, namespace)
    )


async def test_a_change_missed_while_the_listen_connection_was_cut_is_read_after(
    open_store: OpenStore, postgres_url: str, namespace: str
) -> None:
    """The LISTEN connection goes through a proxy that is taken away: a subscriber, idle
    (no poll) while it listens, is woken at the loss and polls; a cancel published
    meanwhile is missed, and the subscriber is woken once LISTEN is back."""
    async with StoppableProxy.to(postgres_url) as proxy:
        listener = RelayNotifier(PostgresRelay(through(postgres_url, proxy), namespace))
        await check_a_signal_lost_while_away_is_read_after(await open_store(), listener, proxy)


async def test_a_signal_that_failed_to_go_out_is_made_up_at_the_next_send(
    open_store: OpenStore, postgres_url: str, namespace: str
) -> None:
    """A sender's NOTIFY connection goes through a proxy that is taken away: the cancel's
    signal fails, and the sender's next signal, once the proxy is back, wakes the other
    process's subscriber with "any task may have changed"."""
    async with StoppableProxy.to(postgres_url) as proxy:
        sender = RelayNotifier(PostgresRelay(through(postgres_url, proxy), namespace))
        await check_a_signal_that_failed_to_go_out_is_made_up(await open_store(), sender, proxy)
