"""The optional behaviours (``O-…``): proven when the store's ``offers`` declares them;
the plugin leaves the others out of the run and reports them "not offered"."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    TaskNotFound,
    drop_namespace,
    namespaced_url,
    store_from_url,
)
from mcp_tasks.stores.abilities import Located
from mcp_tasks.stores.observed import unobserved
from mcp_tasks_contract.notifiers import check_signal_crosses_handles
from mcp_tasks_contract.offers import BEHAVIOURS
from mcp_tasks_contract.population import assert_survived, populate, snapshot
from mcp_tasks_contract.suite.base import ContractBase, current, new_task

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles
    from mcp_tasks_contract.suite.base import ServerRestart


class OptionalContract(ContractBase):
    """O-CLOCK, O-NAMESPACES, O-NOTIFIER, O-RESTART: only what ``offers`` declares."""

    def require(self, behaviour: str) -> None:
        """Skip, saying "not offered", unless ``offers`` declares ``behaviour`` (only when
        the plugin, which leaves such tests out, is not loaded)."""
        if not getattr(self.offers, behaviour):
            pytest.skip(
                f"not offered: {BEHAVIOURS[behaviour]} "
                f"({type(self).__name__}.offers.{behaviour} is False)"
            )

    @pytest.mark.rule("O-CLOCK")
    async def test_an_injected_clock_is_the_stores_time(self, handles: StoreHandles) -> None:
        """With ``offers.clock``, every handle keeps the suite's ManualClock: a task is
        created at its now and expires exactly when it is advanced past the TTL."""
        self.require("clock")
        clock = handles.clock
        assert clock is not None, "offers.clock is set but the store_clock fixture gave None"
        store = await handles.open()
        task = await new_task(store, ttl_ms=1_000)
        assert (task.created_at, task.expires_at) == (clock(), clock() + 1_000)
        clock.advance(999)
        assert await current(store, task.task_id) == task
        clock.advance(1)
        with pytest.raises(TaskNotFound):
            await current(store, task.task_id)

    @pytest.mark.rule("O-NAMESPACES")
    async def test_a_url_namespace_is_isolated_and_dropped(self, handles: StoreHandles) -> None:
        """With ``offers.namespaces``, the handle's location pointed at another namespace
        (``namespaced_url``) opens a store that shares nothing with the first; after
        ``drop_namespace`` its task is gone."""
        self.require("namespaces")
        store = unobserved(await handles.open())  # the store inside an encrypting handle
        assert isinstance(store, Located), (
            "offers.namespaces is set but the handle has no location (stores.abilities.Located)"
        )
        other_url = namespaced_url(store.location.url, handles.namespace + "_other")
        other = store_from_url(other_url)
        try:
            task = await new_task(other)
            with pytest.raises(TaskNotFound):
                await store.get(task.task_id, ANY_OWNER)
        finally:
            await other.close()
        await drop_namespace(other_url)
        reopened = store_from_url(other_url)
        try:
            with pytest.raises(TaskNotFound):
                await reopened.get(task.task_id, ANY_OWNER)
        finally:
            await reopened.close()
            await drop_namespace(other_url)

    @pytest.mark.rule("O-NOTIFIER")
    async def test_a_change_wakes_a_subscriber_on_another_handle(
        self, handles: StoreHandles
    ) -> None:
        """With ``offers.notifier``, the notifier registered for the store's scheme relays:
        a task published on one handle's notifier wakes its subscriber on another's."""
        self.require("notifier")
        await check_signal_crosses_handles(await handles.open(), await handles.open())

    @pytest.mark.rule("O-RESTART")
    async def test_tasks_survive_a_restart_of_the_server(
        self, handles: StoreHandles, store_server_restart: ServerRestart
    ) -> None:
        """With ``offers.server_restart``, 1 000 tasks in all five statuses, with live claims,
        are identical on a new handle after ``store_server_restart`` restarted the server."""
        self.require("server_restart")
        first = await handles.open()
        ids, leases = await populate(first)
        before = await snapshot(first, ids)
        await first.close()
        await store_server_restart()
        await assert_survived(await handles.open(), before, leases)
