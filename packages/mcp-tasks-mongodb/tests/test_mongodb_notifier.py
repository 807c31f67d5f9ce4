"""The MongoDB notifier: what one handle publishes, another handle's notifier hears, through
a change stream (the test server is a replica set) and through the polling fallback a
standalone server gets."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from mcp_tasks import (
    Notifier,
    RelayNotifier,
    Store,
    drop_namespace,
    namespaced_url,
    new_task_id,
    notifier_for,
    store_from_url,
)
from mcp_tasks.cli import main
from mcp_tasks.runtime import notifier
from mcp_tasks.runtime.notifier import signal_key
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.notifiers import (
    check_a_signal_lost_while_away_is_read_after,
    check_a_signal_that_failed_to_go_out_is_made_up,
    check_signal_crosses_handles,
    check_task_control_reaches_handles,
)
from mcp_tasks_contract.proxy import StoppableProxy, through
from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_mongodb import MongoTaskStore
from mcp_tasks_mongodb.notify import MongoRelay, offers_change_streams
from mcp_tasks_mongodb.provision import embedded_mongodb

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import OpenStore


@pytest.mark.anyio
async def test_a_change_published_on_one_handle_wakes_another(open_store: OpenStore) -> None:
    """Two handles on one namespace, as two processes would hold: a task created and
    published through the first wakes a subscriber on the second's notifier."""
    await check_signal_crosses_handles(await open_store(), await open_store(), keyed=True)


@pytest.mark.anyio
async def test_a_task_control_write_wakes_another_handle(open_store: OpenStore) -> None:
    """``TaskControl(store)`` on a handle of its own (an external worker's) publishes by
    default: its write wakes a subscriber on another handle's notifier (the task's key)."""
    await check_task_control_reaches_handles(await open_store(), await open_store(), keyed=True)


@pytest.mark.anyio
async def test_the_notifier_offered_for_a_mongodb_store_listens_on_a_change_stream(
    open_store: OpenStore,
) -> None:
    """The entry point's notifier relays through the namespace's signals collection and
    does not poll (the test server offers change streams)."""
    offered = notifier_for(await open_store())
    assert isinstance(offered, RelayNotifier)
    assert isinstance(offered.relay, MongoRelay)
    assert offered.relay.collection.endswith("_signals")
    assert not offered.relay.polling


def polling_notifier(store: Store) -> Notifier:
    assert isinstance(store, MongoTaskStore)
    return RelayNotifier(MongoRelay(store.connect_url, store.database, store.prefix, polling=True))


@pytest.mark.anyio
async def test_a_signal_crosses_handles_by_polling_without_change_streams(
    open_store: OpenStore,
) -> None:
    """The fallback a standalone server gets (forced here): a listener that reads the
    signals collection hears what another handle published."""
    await check_signal_crosses_handles(
        await open_store(), await open_store(), notifier_of=polling_notifier, keyed=True
    )


@pytest.mark.anyio
async def test_only_the_signal_key_is_written_never_the_task_id(open_store: OpenStore) -> None:
    """A published change leaves a digest in the signals collection; the task id appears in
    no signal document (ids are bearer capabilities)."""
    store = await open_store()
    relay = MongoRelay(store.connect_url, store.database, store.prefix)
    notifier = RelayNotifier(relay)
    task_id = new_task_id()
    try:
        async with notifier.running():
            await notifier.publish(task_id)
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(store.connect_url)
        try:
            found = client[store.database][relay.collection].find({}, {"_id": 0})
            documents = await found.to_list()
        finally:
            await client.close()
    finally:
        await relay.aclose()
    assert documents == [{"key": signal_key(task_id)}]


def test_doctor_reports_the_notifier_of_a_mongodb_store(
    mongodb_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mcp-tasks doctor`` on a MongoDB store lists the cross-process notifier as present."""
    url = namespaced_url(mongodb_url, new_namespace())
    try:
        assert main(["doctor", "--store", url]) == 0
    finally:
        anyio.run(drop_namespace, url)
    out = capsys.readouterr().out
    assert re.search(r"^  notifier +yes ", out, re.MULTILINE), out


@pytest.mark.parametrize(
    ("hello", "offered"),
    [
        ({"isWritablePrimary": True, "maxWireVersion": 21}, False),  # a standalone mongod
        ({"isWritablePrimary": True, "setName": "rs0"}, True),  # a replica set member
        ({"isWritablePrimary": True, "msg": "isdbgrid"}, True),  # a mongos
    ],
)
def test_a_server_without_a_replica_set_gets_the_polling_fallback(
    hello: dict[str, Any], offered: bool
) -> None:
    """The choice between a change stream and polling, from the server's ``hello`` reply."""
    assert offers_change_streams(hello) is offered


@pytest.fixture(scope="module")
def standalone_mongodb_url() -> Iterator[str]:
    """An embedded SecantusDB server run standalone (no replica set: no change streams)."""
    with embedded_mongodb(standalone=True) as url:
        if url is None:
            unavailable("standalone MongoDB", "install the SecantusDB test dependency")
        yield url


@pytest.mark.anyio
async def test_on_a_standalone_server_the_notifier_polls_and_a_signal_crosses(
    standalone_mongodb_url: str,
) -> None:
    """A standalone server refuses change streams; the offered notifier falls back to
    reading the signals collection on its own, and a signal still crosses two handles."""
    url = namespaced_url(standalone_mongodb_url, new_namespace())
    async with store_from_url(url) as writer, store_from_url(url) as listener:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(standalone_mongodb_url)
        try:
            assert not offers_change_streams(await client.admin.command("hello"))
        finally:
            await client.close()
        await check_signal_crosses_handles(writer, listener, keyed=True)
    await drop_namespace(url)


@pytest.mark.anyio
async def test_a_change_missed_while_the_change_stream_was_cut_is_read_after(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """The change stream's client goes through a proxy that is taken away: a subscriber,
    idle (no poll) while the stream lives, is woken at the loss and polls; a cancel
    published meanwhile is missed, and the subscriber is woken once the stream is back."""
    store = await open_store()
    async with StoppableProxy.to(mongodb_url) as proxy:
        relay = MongoRelay(through(mongodb_url, proxy), store.database, store.prefix)
        await check_a_signal_lost_while_away_is_read_after(store, RelayNotifier(relay), proxy)


@pytest.mark.anyio
async def test_a_polling_relay_leaves_its_subscribers_polling(open_store: OpenStore) -> None:
    """Polled signals can be missed (a sender's clock behind the window): while such a relay
    listens, its subscribers still re-read the store at the poll fallback."""
    store = await open_store()
    relayed = polling_notifier(store)
    assert isinstance(relayed, RelayNotifier)
    async with relayed.running(), relayed.subscribe(new_task_id()) as changes:
        # Entered: the relay listens (or failed once; it polls then too).
        assert not relayed.relay.complete  # type: ignore[attr-defined]
        assert not relayed.complete()
        assert changes.fallback_s == notifier.POLL_FALLBACK_S


@pytest.mark.anyio
async def test_a_signal_that_failed_to_go_out_is_made_up_at_the_next_send(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A sender's client goes through a proxy that is taken away: the cancel's signal
    fails, and the sender's next signal, once the proxy is back, wakes the other process's
    subscriber with "any task may have changed"."""
    store = await open_store()
    async with StoppableProxy.to(mongodb_url) as proxy:
        relay = MongoRelay(through(mongodb_url, proxy), store.database, store.prefix)
        await check_a_signal_that_failed_to_go_out_is_made_up(store, RelayNotifier(relay), proxy)
