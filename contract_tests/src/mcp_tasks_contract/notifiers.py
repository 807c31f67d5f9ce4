"""Checks for a backend's cross-process notifier: a change written through one store handle
and published on its notifier wakes a subscriber on another handle's notifier (as two
processes on one store would be), and so does a write of a ``TaskControl`` on a handle of
its own (an external job system's worker); a relay does not hear its own sends back; a
subscriber does not poll while the relay listens, and a change whose signal was lost while
the relay was away wakes it once the relay listens again."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from mcp_tasks import NewTask, Notifier, RelayNotifier, TaskControl, new_task_id, notifier_for
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.runtime import notifier
from mcp_tasks.runtime.notifier import signal_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp_tasks import Store
    from mcp_tasks.runtime.notifier import Relay
    from mcp_tasks_contract.proxy import StoppableProxy

#: A failure bound, not a speed check: a lost signal would only be seen at this point.
SIGNAL_BOUND_S = 10.0


async def check_signal_crosses_handles(
    writer: Store,
    listener: Store,
    notifier_of: Callable[[Store], Notifier] = notifier_for,
    *,
    keyed: bool = False,
) -> None:
    """Both handles' notifiers (``notifier_of``: by default the one the backend offers) relay
    across processes (not in-process only); a task created through ``writer`` and published
    on its notifier wakes a subscriber of that task on ``listener``'s notifier. With
    ``keyed``, the wake named that task's signal key (a relay that carries keys), not "any
    task may have changed" (what a relay also says after it failed and listens again).

    Raises:
        AssertionError: the backend offers no cross-process notifier, or the signal did
            not arrive within :data:`SIGNAL_BOUND_S`.
    """
    sender = notifier_of(writer)
    receiver = notifier_of(listener)
    assert isinstance(sender, RelayNotifier), f"no cross-process notifier for {writer!r}"
    assert isinstance(receiver, RelayNotifier), f"no cross-process notifier for {listener!r}"
    task_id = new_task_id()
    async with (
        sender.running(),
        receiver.running(),
        receiver.subscribe(task_id) as changes,
    ):
        await writer.create(NewTask(task_id=task_id, owner=None, ttl_ms=60_000))
        await sender.publish(task_id)
        assert await changes.wait(SIGNAL_BOUND_S), "the other handle's notifier heard nothing"
        if keyed:
            assert changes.take_changed() == frozenset({signal_key(task_id)}), "no key came"


async def check_task_control_reaches_handles(
    writer: Store, listener: Store, *, keyed: bool = False
) -> None:
    """A ``TaskControl(writer)`` built with no notifier (as an external worker builds it)
    and never run: its write wakes a subscriber of that task on ``listener``'s notifier,
    through a signal (not the poll). With ``keyed``, the wake named that task's key.

    Raises:
        AssertionError: nothing woke the subscriber within :data:`SIGNAL_BOUND_S`.
    """
    receiver = notifier_for(listener)
    assert isinstance(receiver, RelayNotifier), f"no cross-process notifier for {listener!r}"
    task_id = new_task_id()
    await writer.create(NewTask(task_id=task_id, owner=None, ttl_ms=60_000))
    async with (
        receiver.running(),
        receiver.subscribe(task_id) as changes,
        TaskControl(writer) as control,
    ):
        await control.progress(task_id, "frame 1")
        assert await changes.wait(SIGNAL_BOUND_S), "TaskControl's write woke nothing"
        if keyed:
            assert changes.take_changed() == frozenset({signal_key(task_id)}), "no key came"


async def check_relay_drops_its_own_echo(mine: Relay, other: Relay) -> None:
    """Two relays on one namespace, as two processes hold: a key ``mine`` sends while it
    listens does not come back to its own listener (its notifier woke its subscribers as it
    sent), while the same key sent by ``other`` right after does, once, and so does a key
    only ``other`` sent. Both relays are closed at the end.

    Raises:
        AssertionError: ``mine`` heard its own send, or not the other's within
            :data:`SIGNAL_BOUND_S`.
    """
    heard: list[str | None] = []
    listening = anyio.Event()
    own, theirs = "own-" + new_task_id(), "theirs-" + new_task_id()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(mine.receive, heard.append, listening.set)
            with anyio.fail_after(SIGNAL_BOUND_S):
                await listening.wait()
            await mine.send(own)
            await other.send(theirs)
            await mine.send(own)
            await other.send(own)
            with anyio.fail_after(SIGNAL_BOUND_S):
                while own not in heard:  # noqa: ASYNC110 (deliver is a plain callback)
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    finally:
        await mine.aclose()
        await other.aclose()
    assert heard == [theirs, own], "the relay heard its own send back"


#: How long a relay may take to find its link cut (a driver's own retry and timeout on it).
LOSS_NOTICED_S = 30.0


async def _until(condition: Callable[[], bool], bound_s: float, what: str) -> None:
    with anyio.fail_after(bound_s):
        while not condition():  # noqa: ASYNC110 (a state, not an event)
            await anyio.sleep(0.01)
    assert condition(), what


async def check_a_signal_lost_while_away_is_read_after(
    writer: Store, listener: RelayNotifier, proxy: StoppableProxy
) -> None:
    """``listener``'s relay reaches the store's server through ``proxy`` (``writer`` does
    not). While it listens, a subscriber waits for signals only (no poll); the proxy is
    taken away, and the subscriber is woken and polls; a task cancelled and published
    meanwhile, a signal no relay can carry to it, wakes it once the proxy is back and the
    relay listens again, and its read finds the change.

    Raises:
        AssertionError: the subscriber polled while the relay listened, was not woken when
            it stopped, or not when it listened again.
    """
    sender = notifier_for(writer)
    assert isinstance(sender, RelayNotifier), f"no cross-process notifier for {writer!r}"
    task_id = new_task_id()
    await writer.create(NewTask(task_id=task_id, owner=None, ttl_ms=60_000))
    async with sender.running(), listener.running(), listener.subscribe(task_id) as changes:
        await _until(listener.complete, SIGNAL_BOUND_S, "the relay never listened")
        assert changes.fallback_s > notifier.POLL_FALLBACK_S, "it polls while the relay listens"
        await proxy.stop("refused")
        await _until(lambda: not listener.complete(), LOSS_NOTICED_S, "the loss went unseen")
        assert changes.fallback_s == notifier.POLL_FALLBACK_S, "no poll while it is away"
        assert await changes.wait(0), "the relay's loss woke nobody"
        assert changes.take_changed() is None, "the loss did not say 'anything may have'"
        await writer.cancel(task_id, None)
        await sender.publish(task_id)  # heard by no one: the listener's relay is away
        assert not await changes.wait(0), "a signal crossed a relay that was away"
        await proxy.resume()
        assert await changes.wait(LOSS_NOTICED_S), "nothing woke it once the relay was back"
        assert changes.take_changed() is None, "the return did not say 'anything may have'"
        assert listener.complete()
        assert changes.fallback_s > notifier.POLL_FALLBACK_S, "it polls once the relay is back"
    assert (await writer.get(task_id, ANY_OWNER)).status is TaskStatus.CANCELLED


async def check_a_signal_that_failed_to_go_out_is_made_up(
    store: Store, sender: RelayNotifier, proxy: StoppableProxy
) -> None:
    """``sender``'s relay reaches the store's server through ``proxy`` (``store``'s own
    notifier, the listener, does not). A task is cancelled while the proxy is away, so its
    signal fails to go out; the listener's subscriber, which does not poll while its relay
    listens, hears nothing. Once the proxy is back, the sender's next signal (of another
    task) is followed by "any task may have changed", which wakes the subscriber.

    Raises:
        AssertionError: the failed signal was not made up at the next send.
    """
    listener = notifier_for(store)
    assert isinstance(listener, RelayNotifier), f"no cross-process notifier for {store!r}"
    cancelled, other = new_task_id(), new_task_id()
    for task_id in (cancelled, other):
        await store.create(NewTask(task_id=task_id, owner=None, ttl_ms=60_000))
    try:
        async with listener.running(), listener.subscribe(cancelled) as changes:
            await _until(listener.complete, SIGNAL_BOUND_S, "the relay never listened")
            await sender.send(other)  # the sender's connection, open
            await proxy.stop("refused")
            await store.cancel(cancelled, None)
            try:
                await sender.send(cancelled)
            except Exception:
                pass
            else:
                raise AssertionError("a signal went out through a proxy that was away")
            assert not await changes.wait(0), "a signal that failed to go out woke it"
            await proxy.resume()
            await sender.send(other)
            assert await changes.wait(SIGNAL_BOUND_S), "the failed signal was never made up"
            assert changes.take_changed() is None, "not 'any task may have changed'"
    finally:
        await sender.close_relay()
