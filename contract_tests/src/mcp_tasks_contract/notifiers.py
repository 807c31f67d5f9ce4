"""Checks for a backend's cross-process notifier: a change written through one store handle
and published on its notifier wakes a subscriber on another handle's notifier (as two
processes on one store would be), and so does a write of a ``TaskControl`` on a handle of
its own (an external job system's worker); a relay does not hear its own sends back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from mcp_tasks import NewTask, Notifier, RelayNotifier, TaskControl, new_task_id, notifier_for
from mcp_tasks.runtime.notifier import signal_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp_tasks import Store
    from mcp_tasks.runtime.notifier import Relay

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
