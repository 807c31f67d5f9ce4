"""The notifier: who is woken by which signal, what a failing notifier or relay costs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from mcp_tasks import (
    LocalNotifier,
    NullNotifier,
    RelayNotifier,
    TaskControl,
    Tasks,
    notifier_for,
)
from mcp_tasks.runtime import notifier as notifier_module
from mcp_tasks.runtime.notifier import GuardedNotifier, Publisher, signal_key

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from mcp_tasks.runtime.notifier import Subscription

pytestmark = pytest.mark.anyio


async def test_a_subscriber_wakes_for_its_own_tasks_only() -> None:
    """Subscribed to a and b: a signal for c does not wake it; one for b does, and says b."""
    notifier = LocalNotifier()
    async with notifier.subscribe("a", "b") as changes:
        await notifier.publish("c")
        assert not await changes.wait(0)
        await notifier.publish("b")
        assert await changes.wait(0)
        assert changes.take_changed() == {signal_key("b")}


async def test_every_subscriber_of_the_task_wakes_told_only_what_changed_since() -> None:
    """Two subscribers of one task (a result waiter and a listen stream) both wake for it,
    and so does one of several tasks, each told that task alone; a subscriber of another
    task sleeps. A later wake names only what changed since the last one, and a subscriber
    still wakes for its task after the other subscriber of it left."""
    notifier = LocalNotifier()
    async with notifier.subscribe("a") as first, notifier.subscribe("b") as elsewhere:
        async with notifier.subscribe("a") as second, notifier.subscribe("a", "c") as several:
            await notifier.publish("a")
            for changes in (first, second, several):
                assert await changes.wait(0)
                assert changes.take_changed() == {signal_key("a")}
            assert not await elsewhere.wait(0)
            await notifier.publish("c")
            assert await several.wait(0)
            assert several.take_changed() == {signal_key("c")}
            assert not await first.wait(0)
        await notifier.publish("a")
        assert await first.wait(0)
        assert first.take_changed() == {signal_key("a")}
        assert not await elsewhere.wait(0)


async def test_subscribing_to_no_task_hears_every_task() -> None:
    """subscribe() with no ids wakes on any task's signal."""
    notifier = LocalNotifier()
    async with notifier.subscribe() as changes:
        await notifier.publish("anything")
        assert await changes.wait(0)


async def test_an_unknown_change_wakes_everyone_and_says_so() -> None:
    """deliver(None) (a relay that cannot say which task) wakes every subscriber; what
    changed is then unknown (None)."""
    notifier = LocalNotifier()
    async with notifier.subscribe("a") as first, notifier.subscribe("b") as second:
        notifier.deliver(None)
        assert await first.wait(0)
        assert await second.wait(0)
        assert first.take_changed() is None


class Broken:
    """Every call raises (and the message quotes the task id, as a careless one might)."""

    async def publish(self, task_id: str) -> None:
        raise RuntimeError(f"cannot publish {task_id}")

    def subscribe(self, *task_ids: str) -> AbstractAsyncContextManager[Subscription]:
        raise RuntimeError("cannot subscribe")

    def running(self) -> AbstractAsyncContextManager[None]:
        raise RuntimeError("cannot run")


async def test_a_failing_notifier_is_logged_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    """publish, subscribe and running of a raising notifier raise nothing; the failure is
    logged without the task id; the subscription is dormant (its holder polls)."""
    guarded = GuardedNotifier(Broken())
    task_id = "Zq4" + "x" * 40
    with caplog.at_level(logging.WARNING):
        async with guarded.running(), guarded.subscribe(task_id) as changes:
            await guarded.publish(task_id)
            assert not await changes.wait(0)
    assert "cannot publish" in caplog.text
    assert task_id not in caplog.text
    assert "cannot subscribe" in caplog.text or "failed to subscribe" in caplog.text


def test_none_turns_notifications_off_and_the_default_follows_the_store() -> None:
    """Tasks(notifier=None) is a NullNotifier; left out, the store's own (in-process for
    memory)."""
    assert isinstance(Tasks(notifier=None).notifier.inner, NullNotifier)
    assert not Tasks(notifier=None).notifier.enabled
    assert type(Tasks().notifier.inner) is LocalNotifier
    assert type(notifier_for(Tasks().store)) is LocalNotifier


class FlakyRelay:
    """A relay over a memory channel whose first receiver fails after it started."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.receivers = 0
        self.closed = False

    async def send(self, key: str) -> None:
        self.sent.append(key)

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        self.receivers += 1
        ready()
        if self.receivers == 1:
            raise ConnectionError("dropped")
        await anyio.sleep_forever()

    async def aclose(self) -> None:
        self.closed = True


async def test_a_relay_that_drops_is_started_again_and_everyone_re_reads() -> None:
    """A receiver that fails is logged and started again; meanwhile every subscriber is
    woken (signals may have been missed). Sends go to the relay only while running, and
    running closes the relay on exit."""
    relay = FlakyRelay()
    notifier = RelayNotifier(relay)
    await notifier.publish("before")
    assert relay.sent == []
    async with notifier.subscribe("a") as changes, notifier.running():
        assert await changes.wait(10)
        assert changes.take_changed() is None
        with anyio.fail_after(10):
            while relay.receivers < 2:  # noqa: ASYNC110 (the relay's own retry pause)
                await anyio.sleep(0.05)
        await notifier.publish("a")
        assert relay.sent == [signal_key("a")]
    assert relay.closed


async def test_a_publisher_sends_through_its_own_relay_without_listening() -> None:
    """A Publisher that owns a RelayNotifier sends each signal through the relay with
    nothing running (no receiver started) and closes the relay on aclose; one given a
    notifier it does not own publishes through it and closes nothing."""
    relay = FlakyRelay()
    owned = Publisher(RelayNotifier(relay), owned=True)
    await owned.publish("a")
    assert relay.sent == [signal_key("a")]
    assert relay.receivers == 0
    await owned.aclose()
    assert relay.closed
    other = FlakyRelay()
    borrowed = Publisher(RelayNotifier(other), owned=False)
    await borrowed.publish("a")  # not running: local only, as RelayNotifier.publish
    await borrowed.aclose()
    assert other.sent == []
    assert not other.closed


async def test_a_publisher_logs_a_failure_and_raises_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A publish that fails follows a write that succeeded: logged without the task id."""
    task_id = "Zq4" + "x" * 40
    with caplog.at_level(logging.WARNING):
        await Publisher(Broken(), owned=False).publish(task_id)
    assert "cannot publish" in caplog.text
    assert task_id not in caplog.text


def test_task_control_publishes_through_the_stores_notifier_unless_told() -> None:
    """TaskControl(store): the store's own notifier (in-process for memory); a notifier
    given: that one; None: nothing publishes."""
    store = Tasks().store
    assert type(TaskControl(store).notifier) is LocalNotifier
    given = LocalNotifier()
    assert TaskControl(store, given).notifier is given
    assert TaskControl(store, notifier=None).notifier is None


async def test_watched_names_the_subscribed_tasks_while_any_subscriber_waits() -> None:
    """What a relay that must find changed tasks itself reads: the ids by signal key while
    one subscriber still waits for them, and whether any takes every task."""
    notifier = LocalNotifier()
    assert notifier.watched() == ({}, False)
    async with notifier.subscribe("a", "b"):
        async with notifier.subscribe("a"):
            assert notifier.watched() == ({signal_key("a"): "a", signal_key("b"): "b"}, False)
        assert notifier.watched()[0] == {signal_key("a"): "a", signal_key("b"): "b"}
        async with notifier.subscribe():
            assert notifier.watched()[1] is True
    assert notifier.watched() == ({}, False)


class SlowRelay:
    """A relay that listens after ``listen_after_s`` (``None``: never), or first fails
    when ``fail_first``."""

    def __init__(self, *, listen_after_s: float | None, fail_first: bool = False) -> None:
        self.listen_after_s = listen_after_s
        self.fail_first = fail_first
        self.listening = False
        self.receivers = 0

    async def send(self, key: str) -> None:
        return None

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        self.receivers += 1
        if self.fail_first and self.receivers == 1:
            raise ConnectionRefusedError("nobody listens")
        if self.listen_after_s is None:
            await anyio.sleep_forever()
        await anyio.sleep(self.listen_after_s)
        self.listening = True
        ready()
        await anyio.sleep_forever()

    async def aclose(self) -> None:
        return None


async def test_start_up_waits_until_the_relay_listens() -> None:
    """Running a relay notifier returns only once the relay listens, so no signal sent
    right after start-up is missed."""
    relay = SlowRelay(listen_after_s=0.3)
    async with RelayNotifier(relay).running():
        assert relay.listening


async def test_start_up_waits_for_a_relay_that_never_listens_only_up_to_its_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A relay that neither listens nor fails holds start-up for RELAY_START_TIMEOUT_S at
    most; then the process serves (polling meanwhile) and says so."""
    monkeypatch.setattr(notifier_module, "RELAY_START_TIMEOUT_S", 0.5)
    relay = SlowRelay(listen_after_s=None)
    started = anyio.current_time()
    with anyio.fail_after(10):  # generous: only a broken bound reaches it
        async with RelayNotifier(relay).running():
            waited = anyio.current_time() - started
    assert waited >= 0.5, "it waited for the relay"
    assert "the change relay is not listening yet; polling meanwhile" in caplog.messages


async def test_start_up_goes_on_once_the_relay_has_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A relay whose first attempt fails does not hold start-up until the bound: it goes
    on at once, the relay retrying in the background."""
    monkeypatch.setattr(notifier_module, "RELAY_START_TIMEOUT_S", 3600.0)
    relay = SlowRelay(listen_after_s=3600.0, fail_first=True)
    with anyio.fail_after(10):  # generous: waiting for the bound would take an hour
        async with RelayNotifier(relay).running():
            assert relay.receivers == 1
            assert not relay.listening


class AwayThenBack(LocalNotifier):
    """Publishing fails (its store away) until :attr:`away` is cleared."""

    def __init__(self) -> None:
        super().__init__()
        self.away = True

    async def publish(self, task_id: str) -> None:
        if self.away:
            raise ConnectionRefusedError("[Errno 111] Connect call failed")
        await super().publish(task_id)


@pytest.mark.parametrize("wrap", [GuardedNotifier, lambda n: Publisher(n, owned=False)])
async def test_failed_publishes_are_said_once_per_outage(
    wrap: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Every publish fails while the relay's store is away: one WARNING naming the cause,
    without a traceback, however many changes; one INFO line when a publish works again."""
    inner = AwayThenBack()
    notifier = wrap(inner)
    with caplog.at_level(logging.DEBUG, logger="mcp_tasks"):
        for i in range(5):
            await notifier.publish(f"task-{i}")
        inner.away = False
        await notifier.publish("task-5")
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO], caplog.text
    assert "ConnectionRefusedError: [Errno 111] Connect call failed" in lines[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)
    assert "after 5 failures" in lines[1].getMessage()


def test_a_complete_subscription_re_reads_at_the_listening_fallback_spread() -> None:
    """A subscription whose notifier loses no signal still re-reads, between half and all
    of LISTENING_FALLBACK_S (spread, so waiters that began together do not read together);
    one that may lose signals re-reads every POLL_FALLBACK_S."""
    listening = notifier_module.Subscription(lambda: True)
    waits = [listening.fallback_s for _ in range(200)]
    spread = notifier_module.LISTENING_FALLBACK_S
    assert all(spread / 2 <= wait <= spread for wait in waits)
    assert max(waits) - min(waits) > spread / 4, "every wait the same length"
    lossy = notifier_module.Subscription(lambda: False)
    assert lossy.fallback_s == notifier_module.POLL_FALLBACK_S
