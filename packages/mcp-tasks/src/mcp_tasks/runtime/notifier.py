"""Task-changed signals: wake runners and waiters when a task changes, instead of polling."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class Subscription:
    """Wakes its holder when its task changed since the last wait."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def signal(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 (a bounded wait is the point)
        """Wait for a change, at most ``timeout`` seconds; ``True`` if one was signalled.

        A change signalled between two waits is not lost: the next wait returns at once.
        """
        with anyio.move_on_after(timeout):
            await self._event.wait()
        changed = self._event.is_set()
        if changed:
            self._event = anyio.Event()
        return changed


@runtime_checkable
class Notifier(Protocol):
    """Publishes "task X changed" and lets interested parties wait for it.

    A signal carries no state: a woken party re-reads the Store. Delivery is best effort,
    so every waiter also wakes on a slow timeout and re-reads.
    """

    async def publish(self, task_id: str) -> None:
        """Signal that ``task_id`` changed."""
        ...

    def subscribe(self, task_id: str) -> AbstractAsyncContextManager[Subscription]:
        """Receive signals for ``task_id`` while the context is open."""
        ...


class LocalNotifier:
    """A :class:`Notifier` for one process: signals reach subscribers on this node only."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[Subscription]] = {}

    def __repr__(self) -> str:
        return "LocalNotifier()"

    async def publish(self, task_id: str) -> None:
        for subscription in tuple(self._subscribers.get(task_id, ())):
            subscription.signal()

    def subscribe(self, task_id: str) -> AbstractAsyncContextManager[Subscription]:
        return self._subscribe(task_id)

    @asynccontextmanager
    async def _subscribe(self, task_id: str) -> AsyncIterator[Subscription]:
        subscription = Subscription()
        self._subscribers.setdefault(task_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            subscribers = self._subscribers.get(task_id)
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del self._subscribers[task_id]
